package cpp_test

import (
	"errors"
	"slices"
	"strings"
	"testing"

	"github.com/ggload/ggload/internal/replay/cpp"
	"github.com/ggload/ggload/internal/replay/cpp/ast"
)

// richText is a library of programs with parameters: a reference, a
// default (a literal, a host's constant), a struct by value, and a
// program that does not decode. Its last line ends without a newline.
const richText = `fn addto t.cpp:1
(block (decl "x" :ref) (decl "y" :i32 5))
(block (expr (set "+=" x y)) (return x))
fn sum3 t.cpp:2
(block (decl "a" :i32) (decl "b" :i32 10) (decl "c" :i32 SEVEN))
(block (return (bin "+" (bin "+" a b) c)))
fn keep t.cpp:3
(block (decl "n" :i32))
(block (decl "a" :i32 n) (block (decl "b" :i32 (bin "*" n 2))) (decl "c" :i32 (bin "+" a 1)))
fn fails t.cpp:4
(block)
(block (throw "failed"))
fn adder t.cpp:5
(block)
(block (decl "base" :i32 100) (return (lambda (block (decl "k" :i32) (decl "r" :ref)) (block (expr (set "+=" r k)) (return (bin "+" base k))))))
fn badarg t.cpp:6
(block (decl "o" :obj) (decl "d" :i32 (bin "+" 1 "x")))
(block (return 1))
fn baddefault t.cpp:7
(block (decl "s" :i32 "x"))
(block (return s))
fn unnamed t.cpp:8
(block (decl "" :i32))
(block (return 2))
fn limit t.cpp:9
(block (decl "m" :i32 INT32_MAX))
(block (return m))
fn broken t.cpp:10
(block) (block (frob))`

// gadget's methods: double(x) is 2x.
type gadgetMethods struct{}

func (gadgetMethods) HasMethod(o *cpp.Object, name string) bool { return name == "double" }

func (gadgetMethods) CallMethod(f *cpp.Frame, m *cpp.Method, args []*ast.Node) (cpp.Val, error) {
	vs, err := cpp.EvalArgs(f, args)
	if err != nil {
		return cpp.Void, err
	}
	return cpp.Int(2*vs[0].I, ast.TI64), nil
}

// richHost is the tests' host with more to reach: values of every kind
// of the host's (a tensor, a tensor name, an enum constant, objects with
// methods, strict members and members held by value), and a struct it
// cannot make.
type richHost struct {
	host
	globals map[string]cpp.Val
}

func (h *richHost) Global(name string) (cpp.Val, bool) {
	if v, ok := h.globals[name]; ok {
		return v, true
	}
	return h.host.Global(name)
}

func (h *richHost) NewStruct(class string, fields []cpp.FieldDef) (*cpp.Object, error) {
	if class == "unmade" {
		return nil, errors.New("no unmade struct in the headers")
	}
	return h.host.NewStruct(class, fields)
}

func newRichHost(lib *cpp.Library) *richHost {
	gadget := cpp.NewObject("gadget")
	gadget.Methods = gadgetMethods{}
	strict := cpp.NewObject("llama_hparams")
	strict.Strict = true
	strict.Fields["n_embd"] = &cpp.Cell{T: ast.TU32, V: cpp.Int(64, ast.TU32)}
	layer := cpp.NewObject("llama_layer")
	layer.Members = func(name string) *cpp.Object {
		if name == "ffn" {
			return cpp.NewObject("llama_layer_ffn")
		}
		return nil
	}
	badRegex := cpp.NewObject("std::regex")
	badRegex.Fields["pattern"] = &cpp.Cell{V: cpp.Str("(")}
	sum3, _ := lib.Lookup("sum3")
	return &richHost{host: host{lib: lib}, globals: map[string]cpp.Val{
		"BAD_REGEX": {K: cpp.KObj, P: badRegex},
		"PROGRAM":   {K: cpp.KFunc, P: sum3},
		"GADGET":    {K: cpp.KObj, P: gadget},
		"STRICT":    {K: cpp.KObj, P: strict},
		"LAYER":     {K: cpp.KObj, P: layer},
		"TNAME":     {K: cpp.KTN, P: tensorName("blk.0.attn")},
		"TENSOR":    {K: cpp.KTensor, P: &hostTensor{name: "tok_embd"}},
		"ENUM_A":    {K: cpp.KEnum, S: "ENUM_A", I: 2},
		"HANDLE":    {K: cpp.KNative, P: "a context"},
	}}
}

// richStructs are the rich library's headers: the tests' and one the
// host cannot make.
var richStructs = map[string][]cpp.FieldDef{
	"cfg":         structs["cfg"],
	"split_state": structs["split_state"],
	"unmade":      {{Name: "a", Type: ast.TI32}},
	"fcfg":        {{Name: "x", Type: ast.TF32}, {Name: "s", Type: ast.TStr}},
}

// richLib is the library of richText, with a builtin that exercises a
// frame (probe) and a ggml function taken as a value.
var richLib = func() *cpp.Library {
	l := cpp.NewLibrary(richText, func(name string) (cpp.Val, bool) {
		if name == "K" {
			return cpp.Int(3, ast.TI32), true
		}
		return cpp.Void, false
	}, richStructs)
	l.Register(map[string]cpp.Builtin{
		"ggml_negate": func(f *cpp.Frame, args []*ast.Node) (cpp.Val, error) {
			vs, err := cpp.EvalArgs(f, args)
			if err != nil {
				return cpp.Void, err
			}
			return cpp.Int(-vs[0].I, ast.TI32), nil
		},
		// probe(x) checks what a builtin can do with its frame: x's
		// storage, and the errors of nodes never compiled
		"probe": func(f *cpp.Frame, args []*ast.Node) (cpp.Val, error) {
			if c, err := f.Exec(nil); c != 0 || err != nil {
				return cpp.Void, errors.New("Exec(nil) did something")
			}
			raw := &ast.Node{Op: ast.OpInt, I: 1}
			if _, err := f.Exec(raw); err == nil || !strings.Contains(err.Error(), "was never compiled") {
				return cpp.Void, errors.New("Exec of a raw node")
			}
			if _, err := f.Eval(raw); err == nil || !strings.Contains(err.Error(), "was never compiled") {
				return cpp.Void, errors.New("Eval of a raw node")
			}
			if _, err := f.Ref(raw); err == nil || !strings.Contains(err.Error(), "is not an lvalue") {
				return cpp.Void, errors.New("Ref of a raw node")
			}
			c, err := f.Ref(args[0])
			if err != nil {
				return cpp.Void, err
			}
			c.V = cpp.Int(c.V.I+100, c.V.T)
			return c.V, nil
		},
	})
	return l
}()

// evalIn evaluates a program body with the rich library and host, this
// being this.
func evalIn(t *testing.T, this cpp.Val, body string) (cpp.Val, error) {
	t.Helper()
	if !strings.HasPrefix(body, "(block") {
		body = "(block " + body + ")"
	}
	p, err := cpp.DecodeProgram("fn test::body test.cpp:1\n(block)\n" + body)
	if err != nil {
		t.Fatal(err)
	}
	richLib.Prepare(p)
	in := &cpp.Interp{Lib: richLib, Host: newRichHost(richLib)}
	return in.Call(p, this, nil)
}

// eval evaluates a program body with this an open object (as the model
// is).
func eval(t *testing.T, body string) (cpp.Val, error) {
	t.Helper()
	this := cpp.NewObject("counter")
	this.Open = true
	return evalIn(t, cpp.Val{K: cpp.KObj, P: this}, body)
}

// valueCase is a body and its value: an int64, a float64 or a string.
type valueCase struct {
	name, body string
	want       any
}

func checkValues(t *testing.T, eval func(*testing.T, string) (cpp.Val, error), cases []valueCase) {
	t.Helper()
	for _, c := range cases {
		v, err := eval(t, c.body)
		if err != nil {
			t.Errorf("%s: %v", c.name, err)
			continue
		}
		switch w := c.want.(type) {
		case int64:
			if v.K != cpp.KInt || v.I != w {
				t.Errorf("%s = %s, want %d", c.name, v.Describe(), w)
			}
		case float64:
			if v.K != cpp.KFloat || v.F != w {
				t.Errorf("%s = %s, want %g", c.name, v.Describe(), w)
			}
		case string:
			if s, err := cpp.Convert(v, ast.TStr); err != nil || s.S != w {
				t.Errorf("%s = %s, want %q", c.name, v.Describe(), w)
			}
		default:
			t.Fatalf("%s: want %T", c.name, w)
		}
	}
}

// errorCase is a body that fails: its error's kind (abort, throw or
// eval) and a part of its text.
type errorCase struct {
	name, body, kind, want string
}

func checkErrors(t *testing.T, eval func(*testing.T, string) (cpp.Val, error), cases []errorCase) {
	t.Helper()
	for _, c := range cases {
		_, err := eval(t, c.body)
		var a *cpp.Abort
		var th *cpp.Throw
		var e *cpp.EvalError
		kind := "other"
		switch {
		case errors.As(err, &a):
			kind = "abort"
		case errors.As(err, &th):
			kind = "throw"
		case errors.As(err, &e):
			kind = "eval"
		}
		if err == nil || kind != c.kind || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: %v (%s), want %s %q", c.name, err, kind, c.kind, c.want)
		}
	}
}

// A library indexes its programs without decoding them, decodes each
// once, and remembers a program that does not decode.
func TestLibraryPrograms(t *testing.T) {
	names := richLib.Names()
	slices.Sort(names)
	if want := []string{"adder", "addto", "badarg", "baddefault", "broken", "fails", "keep", "limit", "sum3", "unnamed"}; !slices.Equal(names, want) {
		t.Errorf("Names() = %v, want %v", names, want)
	}
	if !richLib.Has("broken") || richLib.Has("nothing") {
		t.Error("Has")
	}
	p1, err1 := richLib.Lookup("sum3")
	p2, err2 := richLib.Lookup("sum3")
	if err1 != nil || err2 != nil || p1 == nil || p1 != p2 || p1.Loc != "t.cpp:2" {
		t.Errorf("Lookup twice: %v %v, %v, %v", p1, p2, err1, err2)
	}
	_, err1 = richLib.Lookup("broken")
	_, err2 = richLib.Lookup("broken")
	if err1 == nil || err1 != err2 || !strings.Contains(err1.Error(), `program broken: ast: programs text line 2: unknown node "frob"`) {
		t.Errorf("Lookup of a broken program: %v, then %v", err1, err2)
	}
	if p, err := richLib.Lookup("nothing"); p != nil || err != nil {
		t.Errorf("Lookup of no program: %v, %v", p, err)
	}
	if b, ok := richLib.Builtin("probe"); !ok || b == nil {
		t.Error("a registered builtin")
	}
	if _, ok := richLib.Builtin("std::max"); !ok {
		t.Error("a standard builtin")
	}
	if _, ok := richLib.Builtin("nothing"); ok {
		t.Error("Builtin of nothing")
	}
	if s := richLib.Structs(); len(s["cfg"]) != 2 || s["fcfg"][1].Name != "s" {
		t.Errorf("Structs() = %v", s)
	}
	for _, c := range []struct{ text, want string }{
		{"", "expected fn"},
		{"fx a b (block) (block)", "expected fn"},
		{"fn", "expected a word"},
		{"fn name", "expected a word"},
		{"fn name loc", "unexpected end"},
		{"fn name loc (block)", "unexpected end"},
		{"fn name loc (block) (return 1)", "malformed program"},
		{"fn name loc (nil) (block)", "malformed program"},
	} {
		if _, err := cpp.DecodeProgram(c.text); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("DecodeProgram(%q): %v, want %q", c.text, err, c.want)
		}
	}
}

// An Interp calls a program with values, with cells the caller sees
// change, or for the values its variables end with; a lambda a program
// returned is applied to values.
func TestInterpCalls(t *testing.T) {
	in := &cpp.Interp{Lib: richLib, Host: newRichHost(richLib)}
	lookup := func(name string) *cpp.Program {
		p, err := richLib.Lookup(name)
		if err != nil || p == nil {
			t.Fatalf("%s: %v", name, err)
		}
		return p
	}
	sum3, addto, keep := lookup("sum3"), lookup("addto"), lookup("keep")
	for _, c := range []struct {
		args []cpp.Val
		want int64
	}{{[]cpp.Val{i32(1)}, 18}, {[]cpp.Val{i32(1), i32(2), i32(3)}, 6}} {
		if v, err := in.Call(sum3, cpp.Void, c.args); err != nil || v.I != c.want {
			t.Errorf("sum3%v = %s, %v; want %d", c.args, v.Describe(), err, c.want)
		}
	}
	if _, err := in.Call(sum3, cpp.Void, []cpp.Val{cpp.Str("x")}); err == nil {
		t.Error("sum3 of a string")
	}
	if _, err := in.Call(lookup("badarg"), cpp.Void, []cpp.Val{{K: cpp.KObj, P: cpp.NewObject("cfg")}}); err == nil {
		t.Error("a default that fails")
	}
	if _, err := in.Call(lookup("baddefault"), cpp.Void, nil); err == nil {
		t.Error("a default of the wrong type")
	}
	if v, err := in.Call(lookup("unnamed"), cpp.Void, []cpp.Val{i32(1)}); err != nil || v.I != 2 {
		t.Errorf("an unnamed parameter: %s, %v", v.Describe(), err)
	}
	if _, err := in.Call(lookup("fails"), cpp.Void, nil); err == nil || err.Error() != "failed" {
		t.Errorf("a throw: %v", err)
	}

	x := &cpp.Cell{T: ast.TI32, V: i32(1)}
	if v, err := in.CallCells(addto, cpp.Void, []*cpp.Cell{x, {V: i32(2)}}); err != nil || v.I != 3 || x.V.I != 3 {
		t.Errorf("addto(x, 2) = %s, %v; x = %s", v.Describe(), err, x.V.Describe())
	}
	if _, err := in.CallCells(addto, cpp.Void, []*cpp.Cell{x}); err == nil || !strings.Contains(err.Error(), "1 arguments for 2 parameters") {
		t.Errorf("addto of one cell: %v", err)
	}
	if _, err := in.CallCells(lookup("fails"), cpp.Void, nil); err == nil {
		t.Error("CallCells of a throw")
	}

	got, err := in.CallLocals(keep, cpp.Void, []cpp.Val{i32(4)}, "a", "b", "c")
	if err != nil || got["a"].I != 4 || got["b"].I != 8 || got["c"].I != 5 {
		t.Errorf("keep(4)'s locals: %v, %v", got, err)
	}
	if _, err := in.CallLocals(keep, cpp.Void, []cpp.Val{i32(4)}, "a", "nothing"); err == nil || !strings.Contains(err.Error(), "no variable nothing") {
		t.Errorf("a local it has not: %v", err)
	}
	if _, err := in.CallLocals(lookup("fails"), cpp.Void, nil, "a"); err == nil {
		t.Error("CallLocals of a throw")
	}
	// the capture ends with the call: a later call captures nothing
	if v, err := in.Call(keep, cpp.Void, []cpp.Val{i32(1)}); err != nil || v.K != cpp.KVoid {
		t.Errorf("keep(1) = %s, %v", v.Describe(), err)
	}

	lv, err := in.Call(lookup("adder"), cpp.Void, nil)
	cl, ok := lv.P.(*cpp.Closure)
	if err != nil || lv.K != cpp.KFunc || !ok {
		t.Fatalf("adder() = %s, %v", lv.Describe(), err)
	}
	if v, err := in.Apply(cl, []cpp.Val{i32(5), i32(1)}); err != nil || v.I != 105 {
		t.Errorf("adder()(5, 1) = %s, %v", v.Describe(), err)
	}
	if _, err := in.Apply(cl, []cpp.Val{cpp.Str("x")}); err == nil {
		t.Error("a lambda applied to a string")
	}
	fv, err := in.Call(lookup("adder"), cpp.Void, nil)
	if err != nil {
		t.Fatal(err)
	}
	bad := *fv.P.(*cpp.Closure)
	bad.Body = lookup("fails").Body
	if _, err := in.Apply(&bad, nil); err == nil || err.Error() != "failed" {
		t.Errorf("a lambda that throws: %v", err)
	}
}

// Calling programs from programs: references, defaults, and the errors
// of the arguments.
func TestProgramCalls(t *testing.T) {
	checkValues(t, eval, []valueCase{
		{"a reference parameter", `(block (decl "n" :i32 1) (expr (call addto n)) (return n))`, int64(6)},
		{"a reference parameter and an argument", `(block (decl "n" :i32 1) (expr (call addto n 2)) (return n))`, int64(3)},
		{"a reference to a temporary", `(return (call addto 3))`, int64(8)},
		{"defaults", `(return (call sum3 1))`, int64(18)},
		{"a struct by value", `(block (decl "st" @"cfg") (return (call badarg st 2)))`, int64(1)},
		{"a builtin sees its frame", `(block (decl "n" :i32 1) (expr (call probe n)) (return n))`, int64(101)},
		{"a ggml function as a value", `(block (decl "g" ggml_negate) (return (call g 4)))`, int64(-4)},
		{"a program as a value", `(block (decl "p" PROGRAM) (return (call p 1 1)))`, int64(9)},
		{"a default of C++'s constants", `(return (call limit))`, int64(2147483647)},
	})
	checkErrors(t, eval, []errorCase{
		{"a missing argument", `(return (call sum3))`, "eval", "sum3: missing argument 0"},
		{"an argument of the wrong type", `(return (call sum3 "x"))`, "eval", "argument 0 of sum3"},
		{"too many arguments", `(return (call sum3 1 2 3 4))`, "eval", "4 arguments for 3 parameters"},
		{"an argument that fails", `(return (call sum3 (call nothing)))`, "eval", "unknown function nothing"},
		{"a reference argument that fails", `(return (call addto (call nothing)))`, "eval", "unknown function nothing"},
		{"a default that fails", `(block (decl "st" @"cfg") (return (call badarg st)))`, "eval", "cannot convert i32 1 to a string"},
		{"a default of the wrong type", `(return (call baddefault))`, "other", "cannot convert"},
		{"a program that throws", `(return (call fails))`, "throw", "failed"},
		{"a lambda that throws", `(block (decl "f" (lambda (block) (block (throw "in lambda")))) (return (call f)))`, "throw", "in lambda"},
		{"regex_match of a pattern Go cannot compile", `(return (call std::regex_match "a" BAD_REGEX))`, "eval", "std::regex"},
		{"probe of no lvalue", `(return (call probe (call sum3 1)))`, "eval", "call is not an lvalue"},
	})
}

// ExprString prints what a failed GGML_ASSERT shows: the expression as
// C++.
func TestExprString(t *testing.T) {
	for _, c := range []struct{ expr, want string }{
		{`(bin "==" (mem "n_embd" hparams) 4096)`, "hparams.n_embd == 4096"},
		{`(idx (mem "ne" t) 0)`, "t.ne[0]"},
		{`(call ggml_nelements a "s" 1.5)`, `ggml_nelements(a, "s", 1.5)`},
		{`(un "pre++" i)`, "++i"},
		{`(un "post--" i)`, "i--"},
		{`(un "!" ok)`, "!ok"},
		{`(set "+=" x 2)`, "x += 2"},
		{`(cond c 1 2)`, "c ? 1 : 2"},
		{`(cast :u32 x)`, "(u32) x"},
		{`(list 1 2)`, "{1, 2}"},
		{`(lambda (block) (block))`, "lambda"},
	} {
		n, err := ast.NewDecoder(c.expr).Node()
		if err != nil {
			t.Fatal(err)
		}
		if got := cpp.ExprString(n); got != c.want {
			t.Errorf("ExprString(%s) = %q, want %q", c.expr, got, c.want)
		}
	}
	if got := cpp.ExprString(nil); got != "" {
		t.Errorf("ExprString(nil) = %q", got)
	}
}
