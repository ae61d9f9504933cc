package cpp_test

import (
	"errors"
	"math"
	"strings"
	"testing"

	"github.com/ggload/ggload/internal/replay/cpp"
	"github.com/ggload/ggload/internal/replay/cpp/ast"
)

// tensorName is a host's name of a tensor (a KTN value's P).
type tensorName string

func (n tensorName) String() string { return string(n) }

// hostTensor is a host's tensor (a KTensor value's P): ne0 is a member,
// self names the tensor itself.
type hostTensor struct{ name string }

func (h *hostTensor) Member(name string) (cpp.Val, bool) {
	switch name {
	case "ne0":
		return cpp.Int(32, ast.TI64), true
	case "self":
		return cpp.Void, true
	}
	return cpp.Void, false
}

func (h *hostTensor) Describe() string { return "tensor " + h.name }

func f32(f float64) cpp.Val { return cpp.Val{K: cpp.KFloat, T: ast.TF32, F: f} }
func f64(f float64) cpp.Val { return cpp.Val{K: cpp.KFloat, T: ast.TF64, F: f} }
func i32(i int64) cpp.Val   { return cpp.Int(i, ast.TI32) }
func u64(i int64) cpp.Val   { return cpp.Int(i, ast.TU64) }

// sameVal compares the scalar parts of two values.
func sameVal(a, b cpp.Val) bool {
	return a.K == b.K && a.T == b.T && a.I == b.I && a.S == b.S && (a.F == b.F || math.IsNaN(a.F) && math.IsNaN(b.F))
}

// C++'s implicit conversions, of every kind to every type the programs
// convert to.
func TestConvert(t *testing.T) {
	cases := []struct {
		name string
		v    cpp.Val
		to   ast.Type
		want cpp.Val
	}{
		{"a literal 0 is a null pointer", i32(0), ast.TPtr, cpp.Null},
		{"a pointer converts to itself", cpp.Str("x"), ast.TPtr, cpp.Str("x")},
		{"a tensor name is its string", cpp.Val{K: cpp.KTN, P: tensorName("blk.0.attn_q")}, ast.TStr, cpp.Str("blk.0.attn_q")},
		{"a null pointer is the empty string", cpp.Null, ast.TStr, cpp.Str("")},
		{"an int to float", i32(3), ast.TF32, f32(3)},
		{"an unsigned 64-bit int to double", u64(-1), ast.TF64, f64(18446744073709551615)},
		{"a double to float rounds", f64(0.1), ast.TF32, f32(float64(float32(0.1)))},
		{"a double stays a double", f64(0.1), ast.TF64, f64(0.1)},
		{"a string to bool", cpp.Str(""), ast.TBool, cpp.True},
		{"a float 0 to bool", f64(0), ast.TBool, cpp.False},
		{"NaN to an int is 0", f64(math.NaN()), ast.TI32, i32(0)},
		{"infinity to an unsigned int is 0", f64(math.Inf(1)), ast.TU32, cpp.Int(0, ast.TU32)},
		{"2^63 to uint64_t", f64(1 << 63), ast.TU64, cpp.Val{K: cpp.KInt, T: ast.TU64, I: math.MinInt64}},
		{"a float to int truncates toward zero", f64(-2.7), ast.TI32, i32(-2)},
		{"a null pointer to an int is 0", cpp.Null, ast.TI64, cpp.Int(0, ast.TI64)},
		{"int64_t to int32_t wraps", cpp.Int(1<<32+5, ast.TI64), ast.TI32, i32(5)},
		{"-1 to uint32_t", i32(-1), ast.TU32, cpp.Int(4294967295, ast.TU32)},
		{"5 to bool", i32(5), ast.TBool, cpp.True},
		{"auto keeps the value", f32(1.5), ast.TAuto, f32(1.5)},
	}
	for _, c := range cases {
		got, err := cpp.Convert(c.v, c.to)
		if err != nil || !sameVal(got, c.want) {
			t.Errorf("%s: Convert(%s, %s) = %s, %v; want %s", c.name, c.v.Describe(), c.to, got.Describe(), err, c.want.Describe())
		}
	}
	for _, c := range []struct {
		v  cpp.Val
		to ast.Type
	}{
		{i32(1), ast.TStr},
		{cpp.Str("1"), ast.TF64},
		{cpp.Str("1"), ast.TI32},
		{cpp.Val{K: cpp.KObj, P: cpp.NewObject("cfg")}, ast.TU64},
	} {
		if got, err := cpp.Convert(c.v, c.to); err == nil || !strings.Contains(err.Error(), "cannot convert") {
			t.Errorf("Convert(%s, %s) = %s, %v; want an error", c.v.Describe(), c.to, got.Describe(), err)
		}
	}
	for _, c := range []struct {
		i    int64
		t    ast.Type
		want int64
	}{{5, ast.TBool, 1}, {0, ast.TBool, 0}, {1<<32 + 1, ast.TI32, 1}, {-1, ast.TU32, 4294967295}, {-1, ast.TI64, -1}, {-1, ast.TU64, -1}} {
		if got := cpp.WrapInt(c.i, c.t); got != c.want {
			t.Errorf("WrapInt(%d, %s) = %d, want %d", c.i, c.t, got, c.want)
		}
	}
}

// A value's number, truth and name in messages.
func TestValueViews(t *testing.T) {
	for _, c := range []struct {
		v    cpp.Val
		want float64
	}{{u64(-1), 18446744073709551615}, {i32(-3), -3}, {f32(0.5), 0.5}, {cpp.Str("7"), 0}} {
		if got := c.v.Float(); got != c.want {
			t.Errorf("%s.Float() = %g, want %g", c.v.Describe(), got, c.want)
		}
	}
	for _, c := range []struct {
		v    cpp.Val
		want bool
	}{{f64(0.5), true}, {f64(0), false}, {cpp.Null, false}, {cpp.Void, false}, {cpp.Str(""), true}, {i32(0), false},
		{cpp.Val{K: cpp.KObj, P: cpp.NewObject("cfg")}, true}} {
		if got := c.v.Truthy(); got != c.want {
			t.Errorf("%s.Truthy() = %v, want %v", c.v.Describe(), got, c.want)
		}
	}
	cell := &cpp.Cell{V: i32(4)}
	for _, c := range []struct {
		v    cpp.Val
		want string
	}{
		{cpp.Void, "void"},
		{u64(3), "u64 3"},
		{f64(1.5), "float 1.5"},
		{cpp.Str("s"), `"s"`},
		{cpp.Null, "nullptr"},
		{cpp.Val{K: cpp.KTensor, P: &hostTensor{name: "w"}}, "tensor w"},
		{cpp.Val{K: cpp.KTensor, P: 5}, "host value"},
		{cpp.Val{K: cpp.KObj, P: cpp.NewObject("cfg")}, "object cfg"},
		{cpp.Val{K: cpp.KArr, P: &cpp.Array{}}, "array"},
		{cpp.Val{K: cpp.KFunc}, "function"},
		{cpp.Val{K: cpp.KTN, P: tensorName("output")}, "tensor name output"},
		{cpp.Val{K: cpp.KEnum, S: "LLM_ARCH_LLAMA"}, "LLM_ARCH_LLAMA"},
		{cpp.Val{K: cpp.KMap, P: &cpp.Map{}}, "map"},
		{cpp.Val{K: cpp.KIter}, "iterator"},
		{cpp.Val{K: cpp.KAddr, P: cell}, "address of i32 4"},
		{cpp.Val{K: cpp.KNative, P: "a context"}, "ggml handle"},
		{cpp.Val{K: cpp.Kind(200)}, "value"},
	} {
		if got := c.v.Describe(); got != c.want {
			t.Errorf("Describe() = %q, want %q", got, c.want)
		}
	}
	for _, c := range []struct {
		v    cpp.Val
		want string
	}{{u64(-1), "18446744073709551615"}, {i32(-3), "-3"}, {f64(0.25), "0.25"}, {cpp.Str("x"), "x"}, {cpp.Null, "nullptr"}} {
		if got := cpp.FormatValue(c.v); got != c.want {
			t.Errorf("FormatValue(%s) = %q, want %q", c.v.Describe(), got, c.want)
		}
	}
	for _, c := range []struct{ a, b, want ast.Type }{
		{ast.TBool, ast.TI32, ast.TI32}, {ast.TU32, ast.TI32, ast.TU32}, {ast.TI64, ast.TU32, ast.TI64},
		{ast.TU64, ast.TI64, ast.TU64}, {ast.TI32, ast.TI64, ast.TI64}, {ast.TBool, ast.TBool, ast.TI32},
	} {
		if got := cpp.Common(c.a, c.b); got != c.want {
			t.Errorf("Common(%s, %s) = %s, want %s", c.a, c.b, got, c.want)
		}
	}
	for _, c := range []struct {
		name string
		want cpp.Val
	}{
		{"true", cpp.True}, {"false", cpp.False}, {"NULL", cpp.Null}, {"nullptr", cpp.Null},
		{"FLT_MAX", f32(math.MaxFloat32)}, {"INT32_MAX", i32(math.MaxInt32)}, {"UINT32_MAX", cpp.Int(math.MaxUint32, ast.TU32)},
		{"std::string::npos", u64(-1)}, {"INFINITY", f32(math.Inf(1))},
	} {
		if got, ok := cpp.Constant(c.name); !ok || !sameVal(got, c.want) {
			t.Errorf("Constant(%s) = %s, %v", c.name, got.Describe(), ok)
		}
	}
	if _, ok := cpp.Constant("LLAMA_MAX_LAYERS"); ok {
		t.Error("Constant of a host's constant")
	}
}

// The usual arithmetic conversions, operator by operator.
func TestArith(t *testing.T) {
	arr := &cpp.Array{}
	cases := []struct {
		op   string
		a, b cpp.Val
		want cpp.Val
	}{
		// floats: float when both are float (or ints), else double
		{"+", f32(1.5), i32(2), f32(3.5)},
		{"+", f64(0.5), f32(0.25), f64(0.75)},
		{"-", i32(1), f64(0.25), f64(0.75)},
		{"*", f32(0.1), i32(3), f32(float64(float32(float64(float32(0.1)) * 3)))},
		{"/", f64(1), i32(4), f64(0.25)},
		{"<", f64(1), i32(2), cpp.True},
		{"<=", f64(2), i32(2), cpp.True},
		{">", f64(1), i32(2), cpp.False},
		{">=", f64(1), i32(2), cpp.False},
		{"==", f64(2), i32(2), cpp.True},
		{"!=", f64(2), i32(2), cpp.False},
		// integers in their common type
		{"/", u64(-1), i32(2), u64(math.MaxInt64)},
		{"%", u64(-1), i32(10), u64(5)},
		{"%", i32(-7), i32(3), i32(-1)},
		{"&", i32(6), i32(3), i32(2)},
		{"|", i32(6), i32(3), i32(7)},
		{"^", i32(6), i32(3), i32(5)},
		{"<<", i32(1), i32(33), i32(0)},
		{"<<", cpp.Int(1, ast.TI64), i32(33), cpp.Int(1<<33, ast.TI64)},
		{">>", cpp.Int(-8, ast.TU32), i32(1), cpp.Int(2147483644, ast.TU32)},
		{">>", u64(-8), i32(60), u64(15)},
		{">>", i32(-8), i32(1), i32(-4)},
		{">", u64(-1), i32(1), cpp.True},
		{"<", u64(1), u64(-1), cpp.True},
		{"<=", i32(3), i32(3), cpp.True},
		{">=", i32(2), i32(3), cpp.False},
		{"!=", i32(2), i32(3), cpp.True},
		// strings, pointers, iterators
		{"==", cpp.Str("a"), cpp.Str("a"), cpp.True},
		{"!=", cpp.Str("a"), cpp.Str("a"), cpp.False},
		{"+", cpp.Str("a"), cpp.Str("b"), cpp.Str("ab")},
		{"+", cpp.Val{K: cpp.KTN, P: tensorName("blk.1")}, cpp.Str(".weight"), cpp.Str("blk.1.weight")},
		{"-", cpp.Val{K: cpp.KIter, P: arr, I: 5}, cpp.Val{K: cpp.KIter, P: arr, I: 2}, cpp.Int(3, ast.TI64)},
		{"+", cpp.Val{K: cpp.KIter, P: arr, I: 1}, i32(2), cpp.Val{K: cpp.KIter, I: 3}},
		{"-", cpp.Val{K: cpp.KIter, P: arr, I: 4}, i32(3), cpp.Val{K: cpp.KIter, I: 1}},
	}
	for _, c := range cases {
		got, err := cpp.Arith(c.op, c.a, c.b)
		if err != nil || !sameVal(got, c.want) {
			t.Errorf("%s %s %s = %s, %v; want %s", c.a.Describe(), c.op, c.b.Describe(), got.Describe(), err, c.want.Describe())
		}
	}
	obj := cpp.Val{K: cpp.KObj, P: cpp.NewObject("cfg")}
	for _, c := range []struct {
		op   string
		a, b cpp.Val
		want string
	}{
		{"%", f64(1), f64(2), "operator % on floats"},
		{"&&", i32(1), i32(2), "unknown operator &&"},
		{"+", cpp.Str("a"), obj, "cannot convert object cfg"},
		{"+", obj, cpp.Str("a"), "cannot convert object cfg"},
		{"*", obj, obj, "operator * on object cfg and object cfg"},
		{"-", cpp.Val{K: cpp.KIter, P: arr}, cpp.Val{K: cpp.KIter, P: &cpp.Array{}}, "operator - on iterator and iterator"},
	} {
		if _, err := cpp.Arith(c.op, c.a, c.b); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s %s %s: %v, want %q", c.a.Describe(), c.op, c.b.Describe(), err, c.want)
		}
	}
	for _, op := range []string{"/", "%"} {
		var a *cpp.Abort
		if _, err := cpp.Arith(op, u64(7), i32(0)); !errors.As(err, &a) || !strings.Contains(a.Msg, "division by zero") {
			t.Errorf("7 %s 0: %v, want an abort", op, err)
		}
	}
}

// == of values that are no numbers.
func TestSame(t *testing.T) {
	o1, o2 := cpp.NewObject("cfg"), cpp.NewObject("cfg")
	arr := &cpp.Array{}
	for _, c := range []struct {
		a, b cpp.Val
		want bool
	}{
		{cpp.Null, i32(0), true},
		{cpp.Null, cpp.Str(""), false},
		{cpp.Str("blk.0"), cpp.Val{K: cpp.KTN, P: tensorName("blk.0")}, true},
		{cpp.Val{K: cpp.KTN, P: tensorName("blk.0")}, cpp.Str("blk.1"), false},
		{cpp.Val{K: cpp.KTN, P: tensorName("a")}, cpp.Val{K: cpp.KTN, P: tensorName("a")}, true},
		{cpp.Str("5"), i32(5), false},
		{cpp.Val{K: cpp.KIter, P: arr, I: 2}, cpp.Val{K: cpp.KIter, P: arr, I: 2}, true},
		{cpp.Val{K: cpp.KIter, P: arr, I: 2}, cpp.Val{K: cpp.KIter, P: arr, I: 3}, false},
		{cpp.Val{K: cpp.KObj, P: o1}, cpp.Val{K: cpp.KObj, P: o1}, true},
		{cpp.Val{K: cpp.KObj, P: o1}, cpp.Val{K: cpp.KObj, P: o2}, false},
		{cpp.Val{K: cpp.KEnum, S: "X", I: 1}, cpp.Val{K: cpp.KEnum, S: "X", I: 1}, true},
		{cpp.Val{K: cpp.KEnum, S: "X", I: 1}, cpp.Val{K: cpp.KEnum, S: "X", I: 2}, false},
		{cpp.Str("a"), cpp.Val{K: cpp.KEnum, S: "a"}, false},
		{cpp.Str("a"), cpp.Str("a"), true},
		{cpp.Null, cpp.Void, true},
	} {
		if got := cpp.Same(c.a, c.b); got != c.want {
			t.Errorf("Same(%s, %s) = %v, want %v", c.a.Describe(), c.b.Describe(), got, c.want)
		}
	}
}

// Assignment copies structs, arrays and maps by value; a pointer (or a
// reference) names the same object.
func TestCopies(t *testing.T) {
	target := cpp.NewObject("target")
	sub := cpp.NewObject("sub")
	sub.Fields["x"] = &cpp.Cell{V: i32(1)}
	o := cpp.NewObject("holder")
	o.Fields["p"] = &cpp.Cell{T: ast.TPtr, V: cpp.Val{K: cpp.KObj, P: target}}
	o.Fields["sub"] = &cpp.Cell{V: cpp.Val{K: cpp.KObj, P: sub}}
	o.Fields["arr"] = &cpp.Cell{V: cpp.Val{K: cpp.KArr, P: cpp.NewArray(ast.TI32, 2, true)}}
	inner := cpp.NewArray(ast.TI32, 1, false)
	o.Fields["m"] = &cpp.Cell{V: cpp.Val{K: cpp.KMap, P: &cpp.Map{Keys: []cpp.Val{i32(1), i32(2)}, Vals: []*cpp.Cell{{V: i32(2)}, {V: cpp.Val{K: cpp.KArr, P: inner}}}}}}
	o.Fields["i"] = &cpp.Cell{T: ast.TI32, V: i32(7)}
	c := o.Clone()
	if c.Fields["p"].V.P != target {
		t.Error("a cloned pointer member names another object")
	}
	if c.Fields["sub"].V.P == sub || c.Fields["sub"].V.P.(*cpp.Object).Fields["x"].V.I != 1 {
		t.Error("a struct member is not copied by value")
	}
	if c.Fields["arr"].V.P == o.Fields["arr"].V.P || len(c.Fields["arr"].V.P.(*cpp.Array).Cells) != 2 {
		t.Error("an array member is not copied by value")
	}
	if m := c.Fields["m"].V.P.(*cpp.Map); m == o.Fields["m"].V.P || len(m.Keys) != 2 || m.Vals[0].V.I != 2 ||
		m.Vals[0] == o.Fields["m"].V.P.(*cpp.Map).Vals[0] || m.Vals[1].V.P == inner {
		t.Error("a map member is not copied by value, with its values")
	}
	o.Fields["i"].V = i32(8)
	if c.Fields["i"].V.I != 7 {
		t.Error("a scalar member of the clone changed with the original's")
	}

	var cell cpp.Cell
	m := &cpp.Map{Keys: []cpp.Val{i32(1)}}
	if err := cell.Set(cpp.Val{K: cpp.KMap, P: m}); err != nil || cell.V.P == m || cell.V.P.(*cpp.Map).Vals != nil {
		t.Errorf("a set assigned: %v", err)
	}
	ptr := cpp.Cell{T: ast.TPtr}
	if err := ptr.Set(cpp.Val{K: cpp.KObj, P: sub}); err != nil || ptr.V.P != sub {
		t.Errorf("a pointer assigned: %v", err)
	}
	typed := cpp.Cell{T: ast.TI32}
	if err := typed.Set(cpp.Str("x")); err == nil {
		t.Error("an int cell took a string")
	}

	shared := cpp.NewObject("llm_graph_result")
	shared.Shared = true
	if f := shared.Field("t_logits"); f.T != ast.TRef || f.V.K != cpp.KNull {
		t.Errorf("a shared object's new member: %s of %s", f.V.Describe(), f.T)
	}
	layer := cpp.NewObject("llama_layer")
	layer.Members = func(name string) *cpp.Object {
		if name == "ffn" {
			return cpp.NewObject("llama_layer_ffn")
		}
		return nil
	}
	if f := layer.Field("ffn"); f.V.K != cpp.KObj || f.V.P.(*cpp.Object).Class != "llama_layer_ffn" {
		t.Errorf("a struct member held by value: %s", f.V.Describe())
	}
	if f := layer.Field("wq"); f.V.K != cpp.KNull {
		t.Errorf("a pointer member: %s", f.V.Describe())
	}
	for i := 0; i < 40; i++ { // past the first slab of cells
		layer.Field(string(rune('a' + i)))
	}
	if len(layer.Fields) != 42 {
		t.Errorf("%d members", len(layer.Fields))
	}
	if p := cpp.Pair(i32(1), cpp.Str("x")).P.(*cpp.Object); p.Fields["first"].V.I != 1 || p.Fields["second"].V.S != "x" {
		t.Error("a pair")
	}
}

// Arrays: ne and nb as C arrays, value-initialization, resize, clone.
func TestArrays(t *testing.T) {
	d := cpp.Dims(ast.TI64, [4]int64{1, 2, 3, 4})
	if a := d.P.(*cpp.Array); d.K != cpp.KArr || !a.Fixed || len(a.Cells) != 4 || a.Cells[2].V.I != 3 || a.Cells[2].V.T != ast.TI64 {
		t.Errorf("Dims: %+v", d)
	}
	for _, c := range []struct {
		t    ast.Type
		want cpp.Val
	}{{ast.TF64, f64(0)}, {ast.TF32, f32(0)}, {ast.TStr, cpp.Str("")}, {ast.TPtr, cpp.Null}, {ast.TObj, cpp.Void}, {ast.TU32, cpp.Int(0, ast.TU32)}} {
		if got := cpp.Zero(c.t); !sameVal(got, c.want) {
			t.Errorf("Zero(%s) = %s", c.t, got.Describe())
		}
	}
	n := 0
	a := &cpp.Array{Elem: ast.TAuto, Make: func() cpp.Val { n++; return cpp.Val{K: cpp.KObj, P: cpp.NewObject("llama_layer")} }}
	if err := a.Resize(3); err != nil || n != 3 || a.Cells[1].V.K != cpp.KObj {
		t.Errorf("resize with a maker: %v, %d made", err, n)
	}
	c := a.Clone()
	if c.Cells[0].V.P == a.Cells[0].V.P || c.Make == nil {
		t.Error("a clone shares its structs")
	}
	nested := cpp.NewArray(ast.TAuto, 1, false)
	nested.Cells[0].V = cpp.Val{K: cpp.KArr, P: cpp.NewArray(ast.TI32, 2, true)}
	if nc := nested.Clone(); nc.Cells[0].V.P == nested.Cells[0].V.P {
		t.Error("a clone shares its arrays")
	}
	if err := a.Resize(1); err != nil || len(a.Cells) != 1 {
		t.Errorf("shrink: %v", err)
	}
	for _, bad := range []int64{-1, 1<<24 + 1} {
		if err := a.Resize(bad); err == nil {
			t.Errorf("resize to %d", bad)
		}
	}
	if _, err := a.At(1); err == nil || !strings.Contains(err.Error(), "out of range [0, 1)") {
		t.Errorf("At past the end: %v", err)
	}
}

// A map finds integer keys by value (indexed past 16 keys), the others
// by ==.
func TestMapFind(t *testing.T) {
	m := &cpp.Map{}
	for i := 0; i < 20; i++ {
		m.Keys = append(m.Keys, i32(int64(i*3)))
	}
	m.Keys = append(m.Keys, i32(9)) // a duplicate: the first one counts
	for _, c := range []struct {
		k    cpp.Val
		want int
	}{{i32(9), 3}, {i32(57), 19}, {i32(10), -1}, {f64(6), 2}, {cpp.Str("x"), -1}} {
		if got := m.Find(c.k); got != c.want {
			t.Errorf("Find(%s) = %d, want %d", c.k.Describe(), got, c.want)
		}
	}
	m.Keys = append(m.Keys, i32(100)) // the index follows the keys
	if got := m.Find(i32(100)); got != 21 {
		t.Errorf("Find of a key added after the index = %d", got)
	}
	m.Keys = append(m.Keys, cpp.Str("x")) // a key that is no integer: by ==
	if got, got2 := m.Find(i32(57)), m.Find(cpp.Str("x")); got != 19 || got2 != 22 {
		t.Errorf("Find in mixed keys = %d, %d", got, got2)
	}
	if got := m.Find(i32(1000)); got != -1 {
		t.Errorf("Find of no key in mixed keys = %d", got)
	}
	set := &cpp.Map{Keys: []cpp.Val{cpp.Str("a")}}
	if c := set.Clone(); c.Vals != nil || len(c.Keys) != 1 || c.Find(cpp.Str("a")) != 0 {
		t.Error("a set's clone")
	}
}

// C's printf conversions in llama.cpp's messages.
func TestCFormat(t *testing.T) {
	obj := cpp.Val{K: cpp.KObj, P: cpp.NewObject("cfg")}
	for _, c := range []struct {
		format string
		args   []cpp.Val
		want   string
	}{
		{"%-5d|%+d", []cpp.Val{i32(3), i32(3)}, "3    |+3"},
		{"%05.1f", []cpp.Val{f64(2.5)}, "002.5"},
		{"%ld %zu %lld %u", []cpp.Val{i32(5), u64(-1), cpp.Int(7, ast.TI64), cpp.Int(4294967295, ast.TU32)}, "5 18446744073709551615 7 4294967295"},
		{"100%%", nil, "100%"},
		{"%c%c", []cpp.Val{i32('o'), i32('k')}, "ok"},
		{"%p", []cpp.Val{cpp.Null}, "0x0"},
		{"%s|%s", []cpp.Val{obj, i32(5)}, "object cfg|5"},
		{"%k", []cpp.Val{i32(1)}, "%k"},
		{"50%", nil, "50%"},
		{"50%5", nil, "50%5"},
		{"%d", nil, "0"},
		{"%x %X %o", []cpp.Val{i32(255), i32(255), i32(8)}, "ff FF 10"},
		{"%e %g", []cpp.Val{f64(1500), f32(0.5)}, "1.500000e+03 0.5"},
	} {
		if got := cpp.CFormat(c.format, c.args); got != c.want {
			t.Errorf("CFormat(%q) = %q, want %q", c.format, got, c.want)
		}
	}
}

// The errors say what failed and where.
func TestErrorTexts(t *testing.T) {
	for _, c := range []struct {
		err  error
		want string
	}{
		{&cpp.Abort{Msg: "GGML_ASSERT(x) failed", Where: "f"}, "GGML_ASSERT(x) failed (in f)"},
		{&cpp.Throw{Msg: "key not found"}, "key not found"},
		{&cpp.EvalError{Fn: "f", Msg: "statement frob"}, "arch: evaluating f: statement frob (ggload's evaluator does not support this construct)"},
	} {
		if c.err.Error() != c.want {
			t.Errorf("%q, want %q", c.err.Error(), c.want)
		}
	}
}
