package cpp_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/ggload/ggload/internal/replay/cpp"
	"github.com/ggload/ggload/internal/replay/cpp/ast"
)

// host is a Host of the tests: a few constants, a struct of its
// "headers", a counter object with a method, an array length.
type host struct{ lib *cpp.Library }

func (h *host) Global(name string) (cpp.Val, bool) {
	if name == "SEVEN" {
		return cpp.Int(7, ast.TI32), true
	}
	return cpp.Void, false
}

func (h *host) Function(name string) *cpp.Program {
	p, _ := h.lib.Lookup(name)
	return p
}

func (h *host) HasMethod(obj cpp.Val, name string) bool {
	o, ok := obj.P.(*cpp.Object)
	return ok && obj.K == cpp.KObj && o.Class == "counter" && name == "inc"
}

func (h *host) CallMethod(f *cpp.Frame, m *cpp.Method, args []*ast.Node) (cpp.Val, error) {
	vs, err := cpp.EvalArgs(f, args)
	if err != nil {
		return cpp.Void, err
	}
	c := m.Recv.P.(*cpp.Object).Field("n")
	for _, v := range vs {
		c.V = cpp.Int(c.V.I+v.I, ast.TI64)
	}
	return c.V, nil
}

func (h *host) ConstLen(name string) (int64, bool) {
	if name == "FOUR" {
		return 4, true
	}
	return 0, false
}

func (h *host) NewStruct(class string, fields []cpp.FieldDef) (*cpp.Object, error) {
	o := cpp.NewObject(class)
	for _, fd := range fields {
		o.Fields[fd.Name] = &cpp.Cell{T: fd.Type, V: cpp.Zero(fd.Type)}
	}
	return o, nil
}

// structs are the tests' "headers": cfg with members a and b, and
// split_state as llama.cpp's ggml_backend_meta_split_state begins.
var structs = map[string][]cpp.FieldDef{
	"cfg":         {{Name: "a", Type: ast.TI32}, {Name: "b", Type: ast.TU32}},
	"split_state": {{Name: "axis", Type: ast.TI32}, {Name: "n_segments", Type: ast.TU32}},
}

// testLib is the tests' library: a program "twice" and the constant K.
var testLib = cpp.NewLibrary("fn twice t.cpp:1\n(block (decl \"x\" :i32))\n(block (return (bin \"*\" x 2)))\n",
	func(name string) (cpp.Val, bool) {
		if name == "K" {
			return cpp.Int(3, ast.TI32), true
		}
		return cpp.Void, false
	}, structs)

// run evaluates a program body (in the programs' text form), this being
// a counter object.
func run(t *testing.T, body string) (cpp.Val, error) {
	t.Helper()
	if !strings.HasPrefix(body, "(block") {
		body = "(block " + body + ")"
	}
	p, err := cpp.DecodeProgram("fn test test.cpp:1\n(block)\n" + body)
	if err != nil {
		t.Fatal(err)
	}
	testLib.Prepare(p)
	in := &cpp.Interp{Lib: testLib}
	in.Host = &host{lib: testLib}
	this := cpp.NewObject("counter")
	this.Open = true
	return in.Call(p, cpp.Val{K: cpp.KObj, P: this}, nil)
}

// checkValue runs body and compares its value with want, an int64 or a
// string.
func checkValue(t *testing.T, name, body string, want any) {
	t.Helper()
	v, err := run(t, body)
	if err != nil {
		t.Errorf("%s: %v", name, err)
		return
	}
	switch w := want.(type) {
	case int64:
		if v.K != cpp.KInt || v.I != w {
			t.Errorf("%s = %s, want %d", name, v.Describe(), w)
		}
	case string:
		s, err := cpp.Convert(v, ast.TStr)
		if err != nil || s.S != w {
			t.Errorf("%s = %s, want %q", name, v.Describe(), w)
		}
	}
}

// C++'s semantics where the programs depend on them.
func TestEvalSemantics(t *testing.T) {
	cases := []struct {
		name string
		body string
		want int64
	}{
		{"unsigned wraps", `(block (decl "x" :u32 0) (expr (set "-=" x 1)) (return x))`, 4294967295},
		{"unsigned compare", `(block (decl "x" :u32 0) (return (bin "<" (bin "-" x 1) 5)))`, 0},
		{"signed compare", `(block (decl "x" :i32 0) (return (bin "<" (bin "-" x 1) 5)))`, 1},
		{"integer division truncates", `(return (bin "/" -7 2))`, -3},
		{"cast to int truncates", `(return (cast :i32 2.9))`, 2},
		{"switch falls through", `(block (decl "n" :i32 0)
			(switch 1 (case 0 (expr (set "+=" n 1))) (case 1 (expr (set "+=" n 10))) (case 2 (expr (set "+=" n 100)) (break)) (case (nil) (expr (set "+=" n 1000))))
			(return n))`, 110},
		{"switch default", `(block (decl "n" :i32 0) (switch 7 (case 0 (expr (set "=" n 1))) (case (nil) (expr (set "=" n 2)))) (return n))`, 2},
		{"for with continue and break", `(block (decl "s" :i32 0)
			(for (decl "i" :i32 0) (bin "<" i 10) (un "post++" i)
				(block (if (nil) (bin "==" i 3) (continue) (nil)) (if (nil) (bin "==" i 6) (break) (nil)) (expr (set "+=" s i))))
			(return s))`, 0 + 1 + 2 + 4 + 5},
		{"try catches a throw", `(block (decl "n" :i32 0) (try (block (throw "boom") (expr (set "=" n 1))) (block (expr (set "=" n 2)))) (return n))`, 2},
		{"lambda captures by reference", `(block (decl "n" :i32 1) (decl "f" (lambda (block (decl "k" :i32)) (block (expr (set "+=" n k)))))
			(expr (call f 5)) (expr (call f 7)) (return n))`, 13},
		{"reference aliases", `(block (decl "x" :i32 1) (decl "y" :ref x) (expr (set "=" y 4)) (return x))`, 4},
		{"shadowing in a block", `(block (decl "x" :i32 1) (block (decl "x" :i32 2) (expr (set "=" x 3))) (return x))`, 1},
		{"short circuit", `(block (decl "n" :i32 0) (expr (bin "||" 1 (set "=" n 5))) (return n))`, 0},
		{"ternary", `(return (cond (bin ">" 2 1) 7 8))`, 7},
		{"a library program", `(return (call twice 21))`, 42},
		{"a library constant", `(return K)`, 3},
		{"a host constant", `(return SEVEN)`, 7},
		{"a host method", `(block (expr (call inc 2)) (return (call (mem "inc" this) 5)))`, 7},
		{"an open object's unassigned member", `(return (bin "==" (mem "nothing" this) nullptr))`, 1},
		{"a member holding a function, called", `(block (decl "n" :i32 1)
			(expr (set "=" (mem "hook" this) (lambda (block (decl "k" :i32)) (block (expr (set "+=" n k))))))
			(if (nil) (mem "hook" this) (expr (call (mem "hook" this) 5)) (nil)) (return n))`, 6},
		{"an array sized by the host", `(block (decl "v" :obj @"std::array<int, FOUR>") (return (call (mem "size" v))))`, 4},
	}
	for _, c := range cases {
		v, err := run(t, c.body)
		if err != nil {
			t.Errorf("%s: %v", c.name, err)
			continue
		}
		if v.K != cpp.KInt || v.I != c.want {
			t.Errorf("%s = %s, want %d", c.name, v.Describe(), c.want)
		}
	}
}

// What llama.cpp would crash on is an Abort, never a Go panic; what the
// evaluator cannot do is its own error.
func TestEvalFailures(t *testing.T) {
	var a *cpp.Abort
	if _, err := run(t, `(return (bin "/" 1 0))`); !errors.As(err, &a) {
		t.Errorf("division by zero: %v", err)
	}
	if _, err := run(t, `(expr (call GGML_ASSERT (bin "==" 1 2)))`); !errors.As(err, &a) || a.Msg != "GGML_ASSERT(1 == 2) failed" {
		t.Errorf("assert: %v", err)
	}
	if _, err := run(t, `(block (decl "v" :obj @"std::array<int, 4>") (return (idx v 100000)))`); !errors.As(err, &a) {
		t.Errorf("index past the end: %v", err)
	}
	var e *cpp.EvalError
	if _, err := run(t, `(return (call no_such_function))`); !errors.As(err, &e) {
		t.Errorf("unknown function: %v", err)
	}
	var th *cpp.Throw
	if _, err := run(t, `(throw (call format "bad %s %d" "x" 3))`); !errors.As(err, &th) || th.Msg != "bad x 3" {
		t.Errorf("throw: %v", err)
	}
}

// The constructs of the programs, one by one, as C++ runs them.
func TestConstructs(t *testing.T) {
	cases := []struct {
		name string
		body string
		want any // int64 or string
	}{
		{"a local struct from a brace list", `(block (decl "f" (lambda (block) (block (return (list @"cfg:a,b" 4 (cast :u32 5))))))
			(decl "s" (call f)) (return (bin "+" (mem "a" s) (mem "b" s))))`, int64(9)},
		{"a pair's members", `(block (decl "g" (lambda (block) (block (return (list (list 3 4))))))
			(decl "v" (call g)) (return (bin "*" (mem "first" (idx v 0)) (mem "second" (idx v 0)))))`, int64(12)},
		{"a vector of copies", `(block (decl "v" (call std::vector 3 7)) (return (bin "+" (call (mem "size" v)) (idx v 2))))`, int64(10)},
		{"a C array, the rest value-initialized", `(block (decl "a" :i32 @"array" 4 (list 5 6)) (expr (set "=" (idx a 3) 9))
			(return (bin "+" (bin "+" (idx a 0) (idx a 1)) (bin "+" (idx a 2) (idx a 3)))))`, int64(20)},
		{"a C array of pointers", `(block (decl "p" :ptr @"array" 3 (list nullptr)) (return (bin "==" (idx p 2) nullptr)))`, int64(1)},
		{"substr", `(return (call (mem "substr" "blk.12.attn") 4 2))`, "12"},
		{"substr to the end", `(return (call (mem "substr" "cache_k_l7") 9))`, "7"},
		{"find a character", `(return (call (mem "find" "blk.12.attn") 46 4))`, int64(6)},
		{"find a string", `(return (call (mem "find" "cache_k_l7") "_l" 6))`, int64(7)},
		{"find nothing is npos", `(return (bin "==" (call (mem "find" "blk") "x") std::string::npos))`, int64(1)},
		{"find past the end is npos", `(return (bin "==" (call (mem "find" "blk") "b" 9) std::string::npos))`, int64(1)},
		{"regex_match is a whole match", `(block (decl "re" :obj @"std::regex" (list "blk\\.\\d*\\.attn_(k|v).weight"))
			(return (bin "+" (call std::regex_match "blk.3.attn_k.weight" re) (call std::regex_match "blk.3.attn_k.weight.x" re))))`, int64(1)},
		{"vector reserve is capacity only", `(block (decl "v" :obj @"std::vector<float>") (expr (call (mem "reserve" v) 4)) (return (call (mem "size" v))))`, int64(0)},
		{"the function's name", `(return __func__)`, "test"},

		{"a header struct, value-initialized", `(block (decl "st" @"split_state") (return (bin "+" (mem "n_segments" st) (mem "axis" st))))`, int64(0)},
		{"a header struct by position", `(block (decl "st" @"split_state" (list 11)) (return (mem "axis" st)))`, int64(11)},
		{"a pointer aliases its object", `(block (decl "st" @"split_state") (decl "p" :ptr st) (expr (set "=" (mem "n_segments" p) 3)) (return (mem "n_segments" st)))`, int64(3)},
		{"lcm", `(return (call std::lcm 6 4))`, int64(12)},
		{"lcm of zero", `(return (call std::lcm 0 4))`, int64(0)},
	}
	for _, c := range cases {
		checkValue(t, c.name, c.body, c.want)
	}
}

// The standard library's containers and functions the programs use.
func TestLibrary(t *testing.T) {
	cases := []struct {
		name string
		body string
		want any
	}{
		{"map insert, find, at", `(block (decl "m" :obj @"std::map<int, int>") (expr (call (mem "insert" m) 5 50)) (expr (call (mem "emplace" m) 5 60))
			(return (bin "+" (call (mem "at" m) 5) (bin "+" (call (mem "count" m) 5) (call (mem "size" m))))))`, int64(52)},
		{"map find of a missing key is end", `(block (decl "m" :obj @"std::map<int, int>") (return (bin "==" (call (mem "find" m) 5) (call (mem "end" m)))))`, int64(1)},
		{"map iterator's members", `(block (decl "m" :obj @"std::map<int, int>") (expr (call (mem "insert" m) 2 9)) (decl "it" (call (mem "find" m) 2))
			(return (bin "+" (mem "first" it) (mem "second" it))))`, int64(11)},
		{"map clear", `(block (decl "m" :obj @"std::map<int, int>") (expr (call (mem "insert" m) 2 9)) (expr (call (mem "clear" m))) (return (call (mem "empty" m))))`, int64(1)},
		{"map operator[] assigns its element", `(block (decl "m" :obj @"std::map<int, int>") (expr (set "=" (idx m 3) 7)) (return (idx m 3)))`, int64(7)},
		{"map operator[] adds to its element", `(block (decl "m" :obj @"std::map<int, int>") (expr (set "=" (idx m 3) 7)) (expr (set "+=" (idx m 3) 2))
			(expr (un "post++" (idx m 3))) (expr (un "pre++" (idx m 4))) (return (bin "+" (bin "*" 10 (idx m 3)) (idx m 4))))`, int64(101)},
		{"map operator[] value-initializes a vector", `(block (decl "m" :obj @"std::map<int, std::vector<uint32_t>>") (expr (call (mem "push_back" (idx m 3)) 1))
			(return (call (mem "size" (idx m 3)))))`, int64(1)},
		{"map insert of a key value-initializes its value", `(block (decl "m" :obj @"std::map<int, std::vector<int>>") (expr (call (mem "insert" m) 2))
			(return (call (mem "size" (call (mem "at" m) 2)))))`, int64(0)},
		{"map operator[] value-initializes a header struct", `(block (decl "m" :obj @"std::map<int, cfg>") (expr (set "=" (mem "b" (idx m 1)) 5)) (return (bin "+" (mem "a" (idx m 1)) (mem "b" (idx m 1)))))`, int64(5)},
		{"set", `(block (decl "s" :obj @"std::set<int>") (expr (call (mem "insert" s) 3)) (expr (call (mem "insert" s) 3)) (return (call (mem "size" s))))`, int64(1)},
		{"vector push_back, back, front", `(block (decl "v" :obj @"std::vector<int>") (expr (call (mem "push_back" v) 4)) (expr (call (mem "emplace_back" v) 6))
			(return (bin "+" (call (mem "back" v)) (bin "*" 10 (call (mem "front" v))))))`, int64(46)},
		{"vector resize value-initializes header structs", `(block (decl "v" :obj @"std::vector<split_state>") (expr (call (mem "resize" v) 2)) (expr (set "=" (mem "axis" (idx v 1)) 4))
			(return (bin "+" (mem "axis" (idx v 1)) (bin "+" (mem "axis" (idx v 0)) (mem "n_segments" (idx v 0))))))`, int64(4)},
		{"a sized vector value-initializes header structs", `(block (decl "v" :obj @"std::vector<split_state>" (call std::vector 2)) (return (mem "n_segments" (idx v 1))))`, int64(0)},
		{"a std::array of header structs", `(block (decl "v" :obj @"std::array<split_state, 2>") (return (mem "n_segments" (idx v 1))))`, int64(0)},
		{"vector resize value-initializes vectors, each its own", `(block (decl "v" :obj @"std::vector<std::vector<int>>") (expr (call (mem "resize" v) 2))
			(expr (call (mem "push_back" (idx v 1)) 3)) (return (bin "+" (call (mem "size" (idx v 0))) (bin "*" 10 (call (mem "size" (idx v 1)))))))`, int64(10)},
		{"vector resize and clear", `(block (decl "v" :obj @"std::vector<int>") (expr (call (mem "resize" v) 3)) (decl "n" (call (mem "size" v))) (expr (call (mem "clear" v)))
			(return (bin "+" n (call (mem "size" v)))))`, int64(3)},
		{"a range over a vector", `(block (decl "v" :obj @"std::vector<int>" (list 1 2 3)) (decl "s" :i32 0) (range "x" :i32 v (block (expr (set "+=" s x)))) (return s))`, int64(6)},
		{"a range by reference writes the elements", `(block (decl "v" :obj @"std::vector<int>" (list 1 2 3)) (range "x" :ref v (block (expr (set "=" x 5))))
			(return (bin "+" (bin "+" (idx v 0) (idx v 1)) (idx v 2))))`, int64(15)},
		{"a range by value copies the elements", `(block (decl "v" :obj @"std::vector<int>" (list 1 2 3)) (range "x" :i32 v (block (expr (set "=" x 5))))
			(return (bin "+" (bin "+" (idx v 0) (idx v 1)) (idx v 2))))`, int64(6)},
		{"a range by reference over a map writes its values", `(block (decl "m" :obj @"std::map<int, int>") (expr (call (mem "insert" m) 1 10)) (expr (call (mem "insert" m) 2 20))
			(range "kv" :ref m (block (expr (set "+=" (mem "second" kv) (mem "first" kv))))) (return (bin "+" (idx m 1) (idx m 2))))`, int64(33)},
		{"a range by value over a map copies its values", `(block (decl "m" :obj @"std::map<int, std::vector<int>>") (expr (call (mem "push_back" (idx m 1)) 4))
			(range "kv" :auto m (block (expr (call (mem "push_back" (mem "second" kv)) 5)))) (return (call (mem "size" (idx m 1)))))`, int64(1)},
		{"a range by reference over vectors appends to them", `(block (decl "v" :obj @"std::vector<std::vector<int>>") (expr (call (mem "resize" v) 2))
			(range "x" :ref v (block (expr (call (mem "push_back" x) 1)))) (return (bin "+" (call (mem "size" (idx v 0))) (call (mem "size" (idx v 1))))))`, int64(2)},
		{"a range by value over structs copies them", `(block (decl "v" :obj @"std::vector<cfg>") (expr (call (mem "resize" v) 1))
			(range "x" :auto v (block (expr (set "=" (mem "a" x) 5)))) (return (mem "a" (idx v 0))))`, int64(0)},
		{"std::fill", `(block (decl "v" :obj @"std::array<int, 3>") (expr (call std::fill (call (mem "begin" v)) (call (mem "end" v)) 7)) (return (idx v 2)))`, int64(7)},
		{"std::copy from std::begin to an offset into a C array", `(block (decl "v" :obj @"std::array<int, 4>") (expr (call std::fill (call (mem "begin" v)) (call (mem "end" v)) 5)) (decl "s" :i32 @"array" 4) (expr (call std::copy (call std::begin v) (bin "+" (call std::begin v) 4) s)) (return (idx s 3)))`, int64(5)},
		{"iterators subtract", `(block (decl "v" :obj @"std::array<int, 4>") (return (bin "-" (call std::end v) (bin "+" (call std::begin v) 1))))`, int64(3)},
		{"bitset set, test, reset", `(block (decl "b" :obj @"std::array<bool, 4>") (expr (call (mem "set" b) 2)) (decl "x" (call (mem "test" b) 2))
			(expr (call (mem "reset" b))) (return (bin "+" x (call (mem "test" b) 2))))`, int64(1)},
		{"std::max and std::min", `(return (bin "+" (call std::max 3 9) (call std::min 3 9)))`, int64(12)},
		{"pow", `(return (cast :i32 (call std::pow 2 10)))`, int64(1024)},
		{"powf", `(return (cast :i32 (call powf 3 2)))`, int64(9)},
		{"sqrt", `(return (cast :i32 (call std::sqrt 49)))`, int64(7)},
		// float arithmetic rounds to float at each step, as compiled code
		// does: 1.0f / sqrtf(24) is 0x3e5105eb, not the float nearest the
		// double 1 / sqrt(24) (0x3e5105ec)
		{"sqrtf in float", `(return (cast :i32 (bin "==" (bin "/" (cast :f32 1.0) (call sqrtf (cast :f32 24))) (cast :f32 0.20412413775920868))))`, int64(1)},
		{"std::sqrt of a float in float", `(return (cast :i32 (bin "==" (bin "/" (cast :f32 1.0) (call std::sqrt (cast :f32 24))) (cast :f32 0.20412413775920868))))`, int64(1)},
		{"std::sqrt of an int in double", `(return (cast :i32 (bin "==" (cast :f32 (bin "/" 1.0 (call std::sqrt 24))) (cast :f32 0.20412415266036987))))`, int64(1)},
		{"std::abs of an int", `(return (call std::abs -3))`, int64(3)},
		{"to_string of an integer", `(return (call std::to_string 42))`, "42"},
		{"to_string of a float", `(return (call std::to_string 1.5))`, "1.500000"},
		{"std::string", `(return (call std::string "ab"))`, "ab"},
		{"format", `(return (call format "%s-%d-%u-%.2f-%5s|%x" "a" -3 7 1.5 "b" 255))`, "a--3-7-1.50-    b|ff"},
	}
	for _, c := range cases {
		checkValue(t, c.name, c.body, c.want)
	}
	failures := []struct{ name, body, want string }{
		{"map at of a missing key", `(block (decl "m" :obj @"std::map<int, int>") (return (call (mem "at" m) 1)))`, "map::at"},
		{"back of an empty vector", `(block (decl "v" :obj @"std::vector<int>") (return (call (mem "back" v))))`, "back() of an empty vector"},
		{"resize of a std::array", `(block (decl "v" :obj @"std::array<int, 3>") (expr (call (mem "resize" v) 5)))`, "resize of a std::array"},
		{"push_back onto a std::array", `(block (decl "v" :obj @"std::array<int, 3>") (expr (call (mem "push_back" v) 5)))`, "push_back arguments"},
		{"a method no container has", `(block (decl "v" :obj @"std::vector<int>") (expr (call (mem "frobnicate" v))))`, "no method frobnicate"},
		{"GGML_ABORT", `(expr (call GGML_ABORT "fatal %d" 3))`, "fatal 3"},
		{"pow of one argument", `(return (call std::pow 2))`, "pow with 1 arguments"},
		{"to_string of a string", `(return (call std::to_string "x"))`, "std::to_string of"},
		{"an unknown container", `(block (decl "v" :obj @"std::deque<int>") (return 0))`, "unsupported container"},
		{"vector arguments", `(return (call std::vector 3))`, "std::vector(n, value)"},
		{"regex_match arguments", `(return (call std::regex_match "a" "b"))`, "std::regex_match arguments"},
		{"a bad regex", `(block (decl "re" :obj @"std::regex" (list "(")) (return 0))`, "std::regex re"},
		{"a regex of two arguments", `(block (decl "re" :obj @"std::regex" (list "a" "b")) (return 0))`, "of 2 arguments"},
		{"substr past the end", `(return (call (mem "substr" "abc") 5))`, "__pos > this->size()"},
		{"substr of a string position", `(return (call (mem "substr" "abc") "x"))`, "substr argument 0"},
		{"find of nothing", `(return (call (mem "find" "abc")))`, "find without an argument"},
		{"lcm of a string", `(return (call std::lcm "a" 2))`, "std::lcm arguments"},
	}
	for _, c := range failures {
		_, err := run(t, c.body)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: %v, want %q", c.name, err, c.want)
		}
	}
}

// Programs the generator never writes still fail cleanly, as the
// evaluator's own errors (or llama.cpp's, where C++ would crash).
func TestMisusedConstructs(t *testing.T) {
	for _, body := range []string{
		`(block (decl "r" :ref) (return 0))`,
		`(expr (set "=" 5 3))`,
		`(range "x" :i32 5 (block))`,
		`(block (decl "x" :i32 1) (return (call x)))`,
		`(return (idx 5 0))`,
		`(return (mem "y" 5))`,
		`(return (call (mem "size" 5)))`,
		`(return (bin "+" "a" (list 1)))`,
		`(return (un "~" "a"))`,
		`(return (un "-" (list 1)))`,
		`(return (cast :i32 "a"))`,
		`(block (decl "x" :i32 "a") (return x))`,
		`(return (bin "<" (list 1) (list 2)))`,
		`(expr (call std::fill 1 2 3))`,
		`(expr (call std::fill 1))`,
		`(return (call std::min 1))`,
		`(return (call std::sqrt))`,
		`(return (call std::string 1 2))`,
		`(return (call format))`,
		`(expr (call GGML_ASSERT 1 2))`,
		`(return (call (mem "find" (call (mem "begin" (list 1))))))`,
		`(block (decl "m" :obj @"std::map<int, int>") (return (call (mem "find" m))))`,
		`(block (decl "m" :obj @"std::map<int, int>") (return (call (mem "count" m))))`,
		`(block (decl "m" :obj @"std::map<int, int>") (return (call (mem "insert" m))))`,
		`(block (decl "m" :obj @"std::map<int, int>") (return (call (mem "nothing" m))))`,
		`(block (decl "s" :obj @"std::set<int>") (return (idx s 1)))`,
		`(block (decl "m" :obj @"std::map<int, int>") (expr (call (mem "insert" m) 1 "x")) (return 0))`,
		`(block (decl "v" :obj @"std::vector<int>") (return (call (mem "resize" v) "a")))`,
		`(block (decl "v" :obj @"std::array<int, 2>") (return (call (mem "clear" v))))`,
		`(block (decl "v" :obj @"std::array<bool, 2>") (return (call (mem "test" v) 5)))`,
		`(block (decl "v" :obj @"std::array<bool, 2>") (return (call (mem "set" v) 5)))`,
		`(block (decl "v" :obj @"std::array<int, BAD_LENGTH>") (return 0))`,
		`(return (call (lambda (block) (block (return 1))) 1 2))`,
	} {
		_, err := run(t, body)
		var a *cpp.Abort
		var th *cpp.Throw
		var e *cpp.EvalError
		if err == nil || !errors.As(err, &e) && !errors.As(err, &a) && !errors.As(err, &th) {
			t.Errorf("%s: %v", body, err)
		}
	}
}
