package arch

import (
	"fmt"
	"math"
	"strconv"

	"github.com/ggload/ggload/ggml/ops"
	"github.com/ggload/ggload/internal/arch/ast"
)

// Kind is the dynamic kind of a value.
type Kind uint8

// Kinds.
const (
	KVoid   Kind = iota
	KInt         // I, with T the C++ integer type (ast.TBool, ast.TI32, ast.TU32, ast.TI64, ast.TU64)
	KFloat       // F, with T ast.TF32 or ast.TF64
	KStr         // S
	KNull        // a null pointer
	KTensor      // P: *Tensor (a created tensor or a file tensor's metadata)
	KObj         // P: *Object
	KArr         // P: *Array
	KFunc        // P: *closure or builtinFunc
	KTN          // P: *tnVal, a tensor name (LLM_TN_IMPL)
	KEnum        // S: an enum constant of a table (LLM_TENSOR_*, LLM_KV_*, LLM_ARCH_*), I: its family
	KMap         // P: *cmap, a std::map / unordered_map / set
	KIter        // P: *Array or *cmap, I: the position
	KNative      // P: a native ggml tensor, context or graph (graph.go)
	KAddr        // P: *Cell, the address of a variable that holds no object (a ggml_tensor ** out-parameter)
)

// enum families of KEnum values
const (
	famTensor = iota
	famKV
	famArch
)

// Val is a value of the evaluated C++.
type Val struct {
	K Kind
	T ast.Type
	I int64
	F float64
	S string
	P any
}

var (
	vVoid  = Val{}
	vNull  = Val{K: KNull}
	vTrue  = Val{K: KInt, T: ast.TBool, I: 1}
	vFalse = Val{K: KInt, T: ast.TBool, I: 0}
)

func vInt(i int64, t ast.Type) Val { return Val{K: KInt, T: t, I: wrap(i, t)} }
func vBool(b bool) Val {
	if b {
		return vTrue
	}
	return vFalse
}
func vStr(s string) Val { return Val{K: KStr, S: s} }

// wrap reduces i to the range of integer type t.
func wrap(i int64, t ast.Type) int64 {
	switch t {
	case ast.TBool:
		if i != 0 {
			return 1
		}
		return 0
	case ast.TI32:
		return int64(int32(i))
	case ast.TU32:
		return int64(uint32(i))
	}
	return i
}

// Cell is a typed storage location: a variable, a member, an array element.
type Cell struct {
	V Val
	T ast.Type // ast.TAuto: takes any value
}

// set stores v converted to the cell's type.
func (c *Cell) set(v Val) error {
	cv, err := convert(v, c.T)
	if err != nil {
		return err
	}
	if c.T == ast.TPtr || c.T == ast.TRef {
		c.V = cv // a pointer copies the address: both name one object
		return nil
	}
	switch cv.K {
	case KObj:
		cv.P = cv.P.(*Object).clone()
	case KArr:
		cv.P = cv.P.(*Array).clone()
	case KMap:
		cv.P = cv.P.(*cmap).clone()
	}
	c.V = cv
	return nil
}

// convert applies C++'s implicit conversion of v to type t.
func convert(v Val, t ast.Type) (Val, error) {
	switch t {
	case ast.TAuto, ast.TRef, ast.TObj:
		return v, nil
	case ast.TPtr:
		if v.K == KInt && v.I == 0 {
			return vNull, nil
		}
		return v, nil
	case ast.TStr:
		switch v.K {
		case KStr:
			return v, nil
		case KTN:
			return vStr(v.P.(*tnVal).String()), nil
		case KNull:
			return vStr(""), nil
		}
		return vVoid, fmt.Errorf("cannot convert %s to a string", v.describe())
	case ast.TF32, ast.TF64:
		switch v.K {
		case KInt:
			return Val{K: KFloat, T: t, F: v.float()}, nil
		case KFloat:
			f := v.F
			if t == ast.TF32 {
				f = float64(float32(f))
			}
			return Val{K: KFloat, T: t, F: f}, nil
		}
	case ast.TBool:
		return vBool(v.truthy()), nil
	default: // integers
		switch v.K {
		case KInt:
			return vInt(v.I, t), nil
		case KFloat:
			if math.IsNaN(v.F) || math.IsInf(v.F, 0) {
				return vInt(0, t), nil
			}
			if t == ast.TU64 && v.F >= 1<<63 {
				return Val{K: KInt, T: t, I: int64(uint64(v.F))}, nil
			}
			return vInt(int64(v.F), t), nil
		case KNull:
			return vInt(0, t), nil
		}
	}
	return vVoid, fmt.Errorf("cannot convert %s to %s", v.describe(), t)
}

func (v Val) float() float64 {
	switch v.K {
	case KFloat:
		return v.F
	case KInt:
		if v.T == ast.TU64 {
			return float64(uint64(v.I))
		}
		return float64(v.I)
	}
	return 0
}

// truthy is C++'s conversion to bool.
func (v Val) truthy() bool {
	switch v.K {
	case KInt:
		return v.I != 0
	case KFloat:
		return v.F != 0
	case KNull, KVoid:
		return false
	}
	return true
}

func (v Val) describe() string {
	switch v.K {
	case KVoid:
		return "void"
	case KInt:
		return fmt.Sprintf("%s %d", v.T, v.I)
	case KFloat:
		return fmt.Sprintf("float %g", v.F)
	case KStr:
		return strconv.Quote(v.S)
	case KNull:
		return "nullptr"
	case KTensor:
		return "tensor " + v.P.(*Tensor).Name
	case KObj:
		return "object " + v.P.(*Object).class
	case KArr:
		return "array"
	case KFunc:
		return "function"
	case KTN:
		return "tensor name " + v.P.(*tnVal).String()
	case KEnum:
		return v.S
	case KMap:
		return "map"
	case KIter:
		return "iterator"
	case KAddr:
		return "address of " + v.P.(*Cell).V.describe()
	case KNative:
		if t, ok := v.P.(*ops.Tensor); ok {
			n, _ := nativeMember(v, "name")
			return fmt.Sprintf("ggml tensor %q %v", n.S, t.Ne)
		}
		return "ggml handle"
	}
	return "value"
}

// common is the type of C++'s usual arithmetic conversions of a and b
// (both integers).
func common(a, b ast.Type) ast.Type {
	rank := func(t ast.Type) int {
		switch t {
		case ast.TU64:
			return 4
		case ast.TI64:
			return 3
		case ast.TU32:
			return 2
		}
		return 1 // bool, i32 (promoted)
	}
	ra, rb := rank(a), rank(b)
	switch max(ra, rb) {
	case 4:
		return ast.TU64
	case 3:
		return ast.TI64
	case 2:
		return ast.TU32
	}
	return ast.TI32
}

// arith evaluates a binary arithmetic, bitwise or comparison operator.
func arith(op string, a, b Val) (Val, error) {
	switch {
	case a.K != KInt && a.K != KFloat || b.K != KInt && b.K != KFloat:
		return otherArith(op, a, b)
	case a.K == KFloat || b.K == KFloat:
		return floatArith(op, a, b)
	}
	return intArith(op, a, b)
}

// otherArith is == and != of pointers, objects and strings, + of
// strings, and iterators moved and subtracted.
func otherArith(op string, a, b Val) (Val, error) {
	switch op {
	case "==", "!=":
		eq := same(a, b)
		if op == "!=" {
			eq = !eq
		}
		return vBool(eq), nil
	case "+":
		if a.K == KStr || b.K == KStr || a.K == KTN || b.K == KTN {
			sa, err := convert(a, ast.TStr)
			if err != nil {
				return vVoid, err
			}
			sb, err := convert(b, ast.TStr)
			if err != nil {
				return vVoid, err
			}
			return vStr(sa.S + sb.S), nil
		}
	case "-":
		if a.K == KIter && b.K == KIter && a.P == b.P {
			return vInt(a.I-b.I, ast.TI64), nil
		}
	}
	if a.K == KIter && b.K == KInt && (op == "+" || op == "-") {
		// an iterator (a pointer into an array) moved
		n := b.I
		if op == "-" {
			n = -n
		}
		return Val{K: KIter, P: a.P, I: a.I + n}, nil
	}
	return vVoid, fmt.Errorf("operator %s on %s and %s", op, a.describe(), b.describe())
}

// floatArith is an operator with a floating operand: float when both are
// float (or integers), else double.
func floatArith(op string, a, b Val) (Val, error) {
	x, y := a.float(), b.float()
	t := ast.TF64
	if (a.K != KFloat || a.T == ast.TF32) && (b.K != KFloat || b.T == ast.TF32) {
		t = ast.TF32
	}
	var r float64
	switch op {
	case "+":
		r = x + y
	case "-":
		r = x - y
	case "*":
		r = x * y
	case "/":
		r = x / y
	case "<":
		return vBool(x < y), nil
	case "<=":
		return vBool(x <= y), nil
	case ">":
		return vBool(x > y), nil
	case ">=":
		return vBool(x >= y), nil
	case "==":
		return vBool(x == y), nil
	case "!=":
		return vBool(x != y), nil
	default:
		return vVoid, fmt.Errorf("operator %s on floats", op)
	}
	if t == ast.TF32 {
		r = float64(float32(r))
	}
	return Val{K: KFloat, T: t, F: r}, nil
}

// intArith is an operator on integers, in their common type.
func intArith(op string, a, b Val) (Val, error) {
	t := common(a.T, b.T)
	x, y := wrap(a.I, t), wrap(b.I, t)
	unsigned := t == ast.TU32 || t == ast.TU64
	switch op {
	case "+":
		return vInt(x+y, t), nil
	case "-":
		return vInt(x-y, t), nil
	case "*":
		return vInt(x*y, t), nil
	case "/", "%":
		if y == 0 {
			return vVoid, &Abort{Msg: "integer division by zero (SIGFPE)"}
		}
		var r int64
		if t == ast.TU64 {
			if op == "/" {
				r = int64(uint64(x) / uint64(y))
			} else {
				r = int64(uint64(x) % uint64(y))
			}
		} else if op == "/" {
			r = x / y
		} else {
			r = x % y
		}
		return vInt(r, t), nil
	case "&":
		return vInt(x&y, t), nil
	case "|":
		return vInt(x|y, t), nil
	case "^":
		return vInt(x^y, t), nil
	case "<<":
		return vInt(x<<uint(b.I&63), t), nil
	case ">>":
		if unsigned {
			if t == ast.TU32 {
				return vInt(int64(uint32(x)>>uint(b.I&31)), t), nil
			}
			return vInt(int64(uint64(x)>>uint(b.I&63)), t), nil
		}
		return vInt(x>>uint(b.I&63), t), nil
	}
	var c int
	if t == ast.TU64 {
		switch {
		case uint64(x) < uint64(y):
			c = -1
		case uint64(x) > uint64(y):
			c = 1
		}
	} else {
		switch {
		case x < y:
			c = -1
		case x > y:
			c = 1
		}
	}
	switch op {
	case "<":
		return vBool(c < 0), nil
	case "<=":
		return vBool(c <= 0), nil
	case ">":
		return vBool(c > 0), nil
	case ">=":
		return vBool(c >= 0), nil
	case "==":
		return vBool(c == 0), nil
	case "!=":
		return vBool(c != 0), nil
	}
	return vVoid, fmt.Errorf("unknown operator %s", op)
}

// same is == for non-arithmetic values.
func same(a, b Val) bool {
	null := func(v Val) bool { return v.K == KNull || v.K == KVoid || v.K == KInt && v.I == 0 }
	if null(a) || null(b) {
		return null(a) && null(b)
	}
	if a.K != b.K {
		if (a.K == KStr || a.K == KTN) && (b.K == KStr || b.K == KTN) {
			sa, _ := convert(a, ast.TStr)
			sb, _ := convert(b, ast.TStr)
			return sa.S == sb.S
		}
		return false
	}
	switch a.K {
	case KStr:
		return a.S == b.S
	case KEnum:
		return a.S == b.S && a.I == b.I
	case KTN:
		return a.P.(*tnVal).String() == b.P.(*tnVal).String()
	case KIter:
		return a.P == b.P && a.I == b.I
	}
	return a.P == b.P
}

// Object is a struct value: a model, a layer, llama_hparams, a nested
// struct. Members not yet assigned read as null pointers.
type Object struct {
	class  string
	fields map[string]*Cell
	slab   []Cell // cells for new members, allocated a few at a time
	share  bool   // members hold what is assigned (the graph's objects, graph.go)
}

func newObject(class string) *Object { return &Object{class: class, fields: map[string]*Cell{}} }

func (o *Object) clone() *Object {
	c := &Object{class: o.class, fields: make(map[string]*Cell, len(o.fields)), share: o.share}
	for k, f := range o.fields {
		nf := *f
		if nf.T == ast.TPtr || nf.T == ast.TRef {
			c.fields[k] = &nf // a pointer member: the copy names the same object
			continue
		}
		switch nf.V.K {
		case KObj:
			nf.V.P = nf.V.P.(*Object).clone()
		case KArr:
			nf.V.P = nf.V.P.(*Array).clone() // std::array and std::vector members copy by value
		case KMap:
			nf.V.P = nf.V.P.(*cmap).clone()
		}
		c.fields[k] = &nf
	}
	return c
}

// field returns the member's cell, creating an untyped one (a null
// pointer) on first use.
func (o *Object) field(name string) *Cell {
	c, ok := o.fields[name]
	if !ok {
		if len(o.slab) == 0 {
			o.slab = make([]Cell, 16)
		}
		c = &o.slab[0]
		o.slab = o.slab[1:]
		c.V = vNull
		if o.share {
			c.T = ast.TRef
		}
		if st, ok := layerStructs[name]; ok && o.class == "llama_layer" {
			c.V = Val{K: KObj, P: newStructObject(st)}
		}
		o.fields[name] = c
	}
	return c
}

// Array is a std::array, std::vector or std::bitset.
type Array struct {
	elem  ast.Type
	cells []Cell
	fixed bool // std::array/bitset: no resize
	class string
}

// dims is a tensor's ne or nb as the C array it is.
func dims(t ast.Type, d [4]int64) Val {
	a := newArray(t, 4, true)
	for i := range a.cells {
		a.cells[i].V = vInt(d[i], t)
	}
	return Val{K: KArr, P: a}
}

func newArray(elem ast.Type, n int, fixed bool) *Array {
	a := &Array{elem: elem, cells: make([]Cell, n), fixed: fixed}
	zero := zeroOf(elem)
	for i := range a.cells {
		a.cells[i] = Cell{V: zero, T: elem}
	}
	return a
}

func zeroOf(t ast.Type) Val {
	switch t {
	case ast.TBool, ast.TI32, ast.TU32, ast.TI64, ast.TU64:
		return vInt(0, t)
	case ast.TF32, ast.TF64:
		return Val{K: KFloat, T: t}
	case ast.TStr:
		return vStr("")
	case ast.TAuto, ast.TPtr:
		return vNull
	}
	return vVoid
}

// clone copies an array by value (C++ assignment of std::array/vector).
func (a *Array) clone() *Array {
	c := &Array{elem: a.elem, fixed: a.fixed, class: a.class, cells: make([]Cell, len(a.cells))}
	copy(c.cells, a.cells)
	for i := range c.cells {
		switch v := c.cells[i].V; v.K {
		case KObj:
			c.cells[i].V.P = v.P.(*Object).clone()
		case KArr:
			c.cells[i].V.P = v.P.(*Array).clone()
		}
	}
	return c
}

func (a *Array) at(i int64) (*Cell, error) {
	if i < 0 || i >= int64(len(a.cells)) {
		return nil, fmt.Errorf("index %d out of range [0, %d)", i, len(a.cells))
	}
	return &a.cells[i], nil
}

func (a *Array) resize(n int64) error {
	if n < 0 || n > 1<<24 {
		return fmt.Errorf("resize to %d", n)
	}
	for int64(len(a.cells)) < n {
		var v Val
		if a.class != "" {
			v = Val{K: KObj, P: newStructObject(a.class)}
		} else {
			v = zeroOf(a.elem)
		}
		a.cells = append(a.cells, Cell{V: v, T: a.elem})
	}
	a.cells = a.cells[:n]
	return nil
}

// cmap is a std::map, unordered_map or set with keys compared by value.
type cmap struct {
	keys []Val
	vals []Val
	// ints indexes integer keys (all of them integers) by value, as of
	// len(keys) == intsN: the graph looks up a layer's index per layer
	ints   map[int64]int
	intsN  int
	noInts bool // as of intsN: a key is no integer
}

func (m *cmap) clone() *cmap {
	c := &cmap{keys: append([]Val(nil), m.keys...)}
	if m.vals != nil {
		c.vals = append([]Val{}, m.vals...)
	}
	return c
}

func (m *cmap) find(k Val) int {
	if k.K == KInt && len(m.keys) > 16 {
		if m.intsN != len(m.keys) {
			m.ints, m.intsN, m.noInts = make(map[int64]int, len(m.keys)), len(m.keys), false
			for i, x := range m.keys {
				if x.K != KInt {
					m.ints, m.noInts = nil, true
					break
				}
				if _, dup := m.ints[x.I]; !dup {
					m.ints[x.I] = i
				}
			}
		}
		if !m.noInts {
			if i, ok := m.ints[k.I]; ok {
				return i
			}
			return -1
		}
	}
	for i, x := range m.keys {
		if eqVals(x, k) {
			return i
		}
	}
	return -1
}

func eqVals(a, b Val) bool {
	if (a.K == KInt || a.K == KFloat) && (b.K == KInt || b.K == KFloat) {
		r, err := arith("==", a, b)
		return err == nil && r.I == 1
	}
	return same(a, b)
}

// newStructObject makes a struct of llama.cpp's model. Its struct-typed
// members (llama_layer's nextn, posnet, ...) are members by value: they
// come into being on first use (see field).
func newStructObject(class string) *Object {
	o := newObject(class)
	if class == "llama_layer" {
		o.fields = make(map[string]*Cell, 64)
	}
	return o
}
