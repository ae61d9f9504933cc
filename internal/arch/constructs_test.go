package arch

import (
	"errors"
	"strings"
	"testing"

	"github.com/ggload/ggload/internal/cpp"
	"github.com/ggload/ggload/internal/cpp/ast"
)

// The constructs of the split state and context programs, one by one, as
// C++ runs them.
func TestConstructs(t *testing.T) {
	cases := []struct {
		name string
		body string
		want any // int64 or string
	}{
		{"a local struct from a brace list", `(block (decl "f" (lambda (block) (block (return (list @"cfg:a,b" 4 (cast :u32 5))))))
			(decl "s" (call f)) (return (bin "+" (mem "a" s) (mem "b" s))))`, int64(9)},
		{"a header struct, value-initialized", `(block (decl "st" @"ggml_backend_meta_split_state") (return (bin "+" (mem "n_segments" st) (idx (mem "nr" st) 15))))`, int64(0)},
		{"a header struct by position", `(block (decl "st" @"ggml_backend_meta_split_state" (list 11)) (return (mem "axis" st)))`, int64(11)},
		{"memset of a struct", `(block (decl "st" @"ggml_backend_meta_split_state") (expr (set "=" (idx (mem "ne" st) 3) 7))
			(expr (call memset (un "&" st) 0 (call sizeof st))) (return (idx (mem "ne" st) 3)))`, int64(0)},
		{"memset of an array", `(block (decl "st" @"ggml_backend_meta_split_state") (expr (set "=" (idx (mem "nr" st) 1) 7))
			(expr (call memset (mem "nr" st) 0 (call sizeof (mem "nr" st)))) (return (idx (mem "nr" st) 1)))`, int64(0)},
		{"sizeof a scalar type", `(return (bin "+" (call sizeof float) (call sizeof int64_t)))`, int64(12)},
		{"a pair's members", `(block (decl "g" (lambda (block) (block (return (list (list 3 4))))))
			(decl "v" (call g)) (return (bin "*" (mem "first" (idx v 0)) (mem "second" (idx v 0)))))`, int64(12)},
		{"a vector of copies", `(block (decl "v" (call std::vector 3 7)) (return (bin "+" (call (mem "size" v)) (idx v 2))))`, int64(10)},
		{"a C array, the rest value-initialized", `(block (decl "a" :i32 @"array" 4 (list 5 6)) (expr (set "=" (idx a 3) 9))
			(return (bin "+" (bin "+" (idx a 0) (idx a 1)) (bin "+" (idx a 2) (idx a 3)))))`, int64(20)},
		{"a C array of pointers", `(block (decl "p" :ptr @"array" 3 (list nullptr)) (return (bin "==" (idx p 2) nullptr)))`, int64(1)},
		{"lcm", `(return (call std::lcm 6 4))`, int64(12)},
		{"lcm of zero", `(return (call std::lcm 0 4))`, int64(0)},
		{"stoull reads the leading digits", `(return (call std::stoull "12.attn"))`, int64(12)},
		{"substr", `(return (call (mem "substr" "blk.12.attn") 4 2))`, "12"},
		{"substr to the end", `(return (call (mem "substr" "cache_k_l7") 9))`, "7"},
		{"find a character", `(return (call (mem "find" "blk.12.attn") 46 4))`, int64(6)},
		{"find a string", `(return (call (mem "find" "cache_k_l7") "_l" 6))`, int64(7)},
		{"find nothing is npos", `(return (bin "==" (call (mem "find" "blk") "x") std::string::npos))`, int64(1)},
		{"find past the end is npos", `(return (bin "==" (call (mem "find" "blk") "b" 9) std::string::npos))`, int64(1)},
		{"regex_match is a whole match", `(block (decl "re" :obj @"std::regex" (list "blk\\.\\d*\\.attn_(k|v).weight"))
			(return (bin "+" (call std::regex_match "blk.3.attn_k.weight" re) (call std::regex_match "blk.3.attn_k.weight.x" re))))`, int64(1)},
		{"GGML_PAD", `(return (call GGML_PAD 257 256))`, int64(512)},
		{"atoi", `(return (call atoi " -42x"))`, int64(-42)},
		{"getenv of nothing is null", `(return (bin "==" (call getenv "GGLOAD_NO_SUCH_VARIABLE_AT_ALL") nullptr))`, int64(1)},
		{"ggml_is_quantized", `(return (bin "+" (call ggml_is_quantized 8) (call ggml_is_quantized 1)))`, int64(1)},
		{"ggml_type_name", `(return (call ggml_type_name 8))`, "q8_0"},
		{"ggml_blck_size", `(return (call ggml_blck_size 8))`, int64(32)},
		{"vector reserve is capacity only", `(block (decl "v" :obj @"std::vector<float>") (expr (call (mem "reserve" v) 4)) (return (call (mem "size" v))))`, int64(0)},
		{"a pointer aliases its object", `(block (decl "st" @"ggml_backend_meta_split_state") (decl "p" :ptr st) (expr (set "=" (mem "n_segments" p) 3)) (return (mem "n_segments" st)))`, int64(3)},
		{"the function's name", `(return __func__)`, "test"},
	}
	for _, c := range cases {
		checkValue(t, c.name, c.body, c.want)
	}
}

// checkValue runs body and compares its value with want, an int64 or a
// string (a tensor name's text counts as one).
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
		s := v.S
		if v.K == cpp.KTN {
			s = v.P.(*tnVal).String()
		} else if v.K != cpp.KStr {
			s = v.Describe()
		}
		if s != w {
			t.Errorf("%s = %s, want %q", name, v.Describe(), w)
		}
	}
}

// A construct used other than as the pin uses it is the evaluator's
// error, naming it; llama.cpp's own failures are Throw or Abort.
func TestConstructFailures(t *testing.T) {
	cases := []struct {
		name, body, want string
	}{
		{"memset to other than 0", `(block (decl "st" @"ggml_backend_meta_split_state") (expr (call memset (un "&" st) 1 (call sizeof st))))`, "memset to other than 0"},
		{"memset of another size", `(block (decl "st" @"ggml_backend_meta_split_state") (expr (call memset (un "&" st) 0 8)))`, "a size other than its own"},
		{"memset arguments", `(expr (call memset 1))`, "memset with 1 arguments"},
		{"memset of a scalar", `(block (decl "x" :i32 1) (expr (call memset (un "&" x) 0 (call sizeof x))))`, "memset of"},
		{"sizeof an object", `(block (decl "x" :i32 1) (return (call sizeof x)))`, "only of a scalar type"},
		{"lcm of a string", `(return (call std::lcm "a" 2))`, "std::lcm arguments"},
		{"stoull of no digits", `(return (call std::stoull "x"))`, "stoull"},
		{"stoull of a number", `(return (call std::stoull 3))`, "std::stoull arguments"},
		{"vector arguments", `(return (call std::vector 3))`, "std::vector(n, value)"},
		{"regex_match arguments", `(return (call std::regex_match "a" "b"))`, "std::regex_match arguments"},
		{"a bad regex", `(block (decl "re" :obj @"std::regex" (list "(")) (return 0))`, "std::regex re"},
		{"a regex of two arguments", `(block (decl "re" :obj @"std::regex" (list "a" "b")) (return 0))`, "of 2 arguments"},
		{"substr past the end", `(return (call (mem "substr" "abc") 5))`, "__pos > this->size()"},
		{"substr of a string position", `(return (call (mem "substr" "abc") "x"))`, "substr argument 0"},
		{"find of nothing", `(return (call (mem "find" "abc")))`, "find without an argument"},
		{"find of a struct", `(block (decl "st" @"ggml_backend_meta_split_state") (return (call (mem "find" "abc") st)))`, "find of"},
		{"GGML_PAD by zero", `(return (call GGML_PAD 3 0))`, "GGML_PAD arguments"},
		{"getenv of a number", `(return (call getenv 3))`, "getenv arguments"},
		{"atoi of a number", `(return (call atoi 3))`, "atoi arguments"},
		{"ggml_blck_size of no type", `(return (call ggml_blck_size 1000))`, "ggml_blck_size of type 1000"},
		{"ggml_blck_size of a string", `(return (call ggml_blck_size "x"))`, "ggml_blck_size arguments"},
		{"ggml_type_name of no type", `(return (call ggml_type_name 1000))`, "ggml_type_name arguments"},
		{"a backend buffer", `(return (call ggml_backend_buffer_get_size 0))`, "ggload plans no backend"},
		{"too many members", `(block (decl "st" @"ggml_backend_meta_split_state" (list 1 2 3 4 5)) (return 0))`, "5 initializers"},
		{"a member of the wrong type", `(block (decl "st" @"ggml_backend_meta_split_state" (list "x")) (return 0))`, "ggml_backend_meta_split_state.axis"},
		{"get_tensor outside a split state", `(return (call (mem "get_tensor" this) "x"))`, "outside a split state"},
	}
	for _, c := range cases {
		_, err := run(t, c.body)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: %v, want %q", c.name, err, c.want)
		}
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
		{"set", `(block (decl "s" :obj @"std::set<int>") (expr (call (mem "insert" s) 3)) (expr (call (mem "insert" s) 3)) (return (call (mem "size" s))))`, int64(1)},
		{"vector push_back, back, front", `(block (decl "v" :obj @"std::vector<int>") (expr (call (mem "push_back" v) 4)) (expr (call (mem "emplace_back" v) 6))
			(return (bin "+" (call (mem "back" v)) (bin "*" 10 (call (mem "front" v))))))`, int64(46)},
		{"vector resize and clear", `(block (decl "v" :obj @"std::vector<int>") (expr (call (mem "resize" v) 3)) (decl "n" (call (mem "size" v))) (expr (call (mem "clear" v)))
			(return (bin "+" n (call (mem "size" v)))))`, int64(3)},
		{"a range over a vector", `(block (decl "v" :obj @"std::vector<int>" (list 1 2 3)) (decl "s" :i32 0) (range "x" :i32 v (block (expr (set "+=" s x)))) (return s))`, int64(6)},
		{"std::fill", `(block (decl "v" :obj @"std::array<int, 3>") (expr (call std::fill (call (mem "begin" v)) (call (mem "end" v)) 7)) (return (idx v 2)))`, int64(7)},
		{"std::copy from std::begin to an offset into a C array", `(block (decl "v" :obj @"std::array<int, 4>") (expr (call std::fill (call (mem "begin" v)) (call (mem "end" v)) 5)) (decl "s" :i32 @"array" 4) (expr (call std::copy (call std::begin v) (bin "+" (call std::begin v) 4) s)) (return (idx s 3)))`, int64(5)},
		{"iterators subtract", `(block (decl "v" :obj @"std::array<int, 4>") (return (bin "-" (call std::end v) (bin "+" (call std::begin v) 1))))`, int64(3)},
		{"bitset set, test, reset", `(block (decl "b" :obj @"std::array<bool, 4>") (expr (call (mem "set" b) 2)) (decl "x" (call (mem "test" b) 2))
			(expr (call (mem "reset" b))) (return (bin "+" x (call (mem "test" b) 2))))`, int64(1)},
		{"std::max and std::min", `(return (bin "+" (call std::max 3 9) (call std::min 3 9)))`, int64(12)},
		{"pow", `(return (cast :i32 (call std::pow 2 10)))`, int64(1024)},
		{"powf", `(return (cast :i32 (call powf 3 2)))`, int64(9)},
		{"sqrt", `(return (cast :i32 (call std::sqrt 49)))`, int64(7)},
		{"to_string of an integer", `(return (call std::to_string 42))`, "42"},
		{"to_string of a float", `(return (call std::to_string 1.5))`, "1.500000"},
		{"std::string", `(return (call std::string "ab"))`, "ab"},
		{"format", `(return (call format "%s-%d-%u-%.2f-%5s|%x" "a" -3 7 1.5 "b" 255))`, "a--3-7-1.50-    b|ff"},
		{"ffn op from a string", `(return (bin "==" (call llm_ffn_op_type_from_string "geglu" 0) LLM_FFN_GEGLU))`, int64(1)},
		{"ffn op default", `(return (call llm_ffn_op_type_from_string "nonsense" 17))`, int64(17)},
		{"rope scaling from a string", `(return (bin "==" (call llama_rope_scaling_type_from_string "yarn") LLAMA_ROPE_SCALING_TYPE_YARN))`, int64(1)},
		{"rope scaling unknown", `(return (bin "==" (call llama_rope_scaling_type_from_string "x") LLAMA_ROPE_SCALING_TYPE_UNSPECIFIED))`, int64(1)},
		{"LLM_KV names a key", `(block (decl "kv" (call LLM_KV LLM_ARCH_LLAMA)) (return (call kv LLM_KV_CONTEXT_LENGTH)))`, "llama.context_length"},
		{"the loader's architecture name", `(return (call (mem "get_arch_name" ml)))`, "llama"},
		{"the file type's name", `(return (call (mem "ftype_name" ml)))`, "(guessed) all F32"},
		{"a file tensor", `(return (mem "name" (call (mem "get_tensor_meta" ml) "token_embd.weight")))`, "token_embd.weight"},
		{"no such file tensor", `(return (bin "==" (call (mem "get_weight" ml) "nothing") nullptr))`, int64(1)},
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
		{"require a missing tensor", `(return (call (mem "require_weight" ml) "nothing"))`, "tensor 'nothing' not found"},
		{"GGML_ABORT", `(expr (call GGML_ABORT "fatal %d" 3))`, "fatal 3"},
		{"pow of one argument", `(return (call std::pow 2))`, "pow with 1 arguments"},
		{"to_string of a string", `(return (call std::to_string "x"))`, "std::to_string of"},
		{"an unknown container", `(block (decl "v" :obj @"std::deque<int>") (return 0))`, "unsupported container"},
	}
	for _, c := range failures {
		_, err := run(t, c.body)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: %v, want %q", c.name, err, c.want)
		}
	}
}

// What failures print: a failed assertion shows its expression as C++,
// and values describe themselves.
func TestMessages(t *testing.T) {
	var a *cpp.Abort
	_, err := run(t, `(block (decl "m" :obj @"std::map<int, int>") (decl "c" :obj @"std::map<int, int>") (expr (call (mem "insert" m) 1 2)) (expr (set "=" c m))
		(expr (call GGML_ASSERT (bin "&&" (bin "==" (call (mem "size" c)) 1) (bin "<" (cond (un "!" 0) (idx (list 1 2) (un "pre++" (cast :i32 1.5))) "s") (un "post--" x))))))`)
	if !errors.As(err, &a) && err == nil {
		t.Fatalf("assert: %v", err)
	}
	if _, err := run(t, `(expr (call GGML_ASSERT (bin "==" (call (mem "size" (list 1 2.5 "s"))) 0)))`); !errors.As(err, &a) ||
		a.Msg != `GGML_ASSERT({1, 2.5, "s"}.size() == 0) failed` {
		t.Errorf("assert message: %v", err)
	}
	for _, v := range []cpp.Val{cpp.Void, cpp.Int(3, ast.TU64), {K: cpp.KFloat, F: 1.5}, cpp.Str("s"), cpp.Null, {K: cpp.KTensor, P: &Tensor{Name: "t"}},
		{K: cpp.KObj, P: cpp.NewObject("o")}, {K: cpp.KArr, P: &cpp.Array{}}, {K: cpp.KFunc}, {K: cpp.KEnum, S: "LLM_ARCH_LLAMA"}, {K: cpp.KMap, P: &cpp.Map{}}, {K: cpp.KIter}, {K: cpp.KTN, P: &tnVal{}}} {
		if v.Describe() == "" || v.Describe() == "value" || cpp.FormatValue(v) == "" {
			t.Errorf("%v describes as %q, formats as %q", v.K, v.Describe(), cpp.FormatValue(v))
		}
	}
	m := &cpp.Map{Keys: []cpp.Val{cpp.Int(1, ast.TI32)}, Vals: []*cpp.Cell{{V: cpp.Str("a")}}}
	if c := m.Clone(); len(c.Keys) != 1 || c.Vals[0].V.S != "a" {
		t.Error("map clone")
	}
	for _, c := range []struct {
		a, b cpp.Val
		want bool
	}{
		{cpp.Str("a"), cpp.Str("a"), true},
		{cpp.Null, cpp.Void, true},
		{cpp.Str("a"), cpp.Null, false},
		{cpp.Val{K: cpp.KEnum, S: "X", I: 1}, cpp.Val{K: cpp.KEnum, S: "X", I: 1}, true},
		{cpp.Val{K: cpp.KEnum, S: "X", I: 1}, cpp.Val{K: cpp.KEnum, S: "X", I: 2}, false},
		{cpp.Str("a"), cpp.Val{K: cpp.KEnum, S: "a"}, false},
	} {
		if cpp.Same(c.a, c.b) != c.want {
			t.Errorf("same(%s, %s) != %v", c.a.Describe(), c.b.Describe(), c.want)
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
		`(return (mem "ne" (call (mem "get_tensor_meta" ml) "nothing")))`,
		`(expr (call std::fill 1 2 3))`,
		`(expr (call std::fill 1))`,
		`(return (call std::min 1))`,
		`(return (call std::sqrt))`,
		`(return (call std::string 1 2))`,
		`(return (call format))`,
		`(return (call llm_ffn_op_type_from_string 1))`,
		`(return (call llama_rope_scaling_type_from_string 1))`,
		`(expr (call GGML_ASSERT 1 2))`,
		`(return (call llama_get_model 0))`,
		`(return (call (mem "find" (call (mem "begin" (list 1))))))`,
		`(block (decl "m" :obj @"std::map<int, int>") (return (call (mem "find" m))))`,
		`(block (decl "m" :obj @"std::map<int, int>") (return (call (mem "count" m))))`,
		`(block (decl "m" :obj @"std::map<int, int>") (return (call (mem "insert" m))))`,
		`(block (decl "m" :obj @"std::map<int, int>") (return (call (mem "nothing" m))))`,
		`(block (decl "v" :obj @"std::vector<int>") (return (call (mem "resize" v) "a")))`,
		`(block (decl "v" :obj @"std::array<int, 2>") (return (call (mem "clear" v))))`,
		`(block (decl "v" :obj @"std::array<bool, 2>") (return (call (mem "test" v) 5)))`,
		`(block (decl "v" :obj @"std::array<bool, 2>") (return (call (mem "set" v) 5)))`,
		`(block (decl "v" :obj @"std::array<int, BAD_LENGTH>") (return 0))`,
		`(return (call (mem "get_key" ml)))`,
		`(return (call (mem "llm_kv" ml) 5))`,
		`(return (call (mem "get_weight" ml) (list 1)))`,
		`(return (call (lambda (block) (block (return 1))) 1 2))`,
	} {
		_, err := run(t, body)
		var a *cpp.Abort
		var th *cpp.Throw
		if err == nil || !IsEvalError(err) && !errors.As(err, &a) && !errors.As(err, &th) {
			t.Errorf("%s: %v", body, err)
		}
	}
}
