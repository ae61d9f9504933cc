package cpp

import (
	"fmt"
	"math"
	"slices"
	"strconv"

	"github.com/ggload/ggload/ggml/ops"
	"github.com/ggload/ggload/internal/replay/cpp/ast"
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
	KTensor      // P: a HostValue (the host's tensor: a created one, or a file tensor's metadata)
	KObj         // P: *Object
	KArr         // P: *Array
	KFunc        // P: *closure or builtinFunc
	KTN          // P: a fmt.Stringer, a host's name of a tensor (LLM_TN_IMPL)
	KEnum        // S: an enum constant of a table (LLM_TENSOR_*, LLM_KV_*, LLM_ARCH_*), I: its family
	KMap         // P: *cmap, a std::map / unordered_map / set
	KIter        // P: *Array or *cmap, I: the position
	KNative      // P: a native ggml tensor, context or graph (graph.go)
	KAddr        // P: *Cell, the address of a variable that holds no object (a ggml_tensor ** out-parameter)
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
	Void  = Val{}
	Null  = Val{K: KNull}
	True  = Val{K: KInt, T: ast.TBool, I: 1}
	False = Val{K: KInt, T: ast.TBool, I: 0}
)

func Int(i int64, t ast.Type) Val { return Val{K: KInt, T: t, I: WrapInt(i, t)} }
func Bool(b bool) Val {
	if b {
		return True
	}
	return False
}
func Str(s string) Val { return Val{K: KStr, S: s} }

// WrapInt reduces i to the range of integer type t.
func WrapInt(i int64, t ast.Type) int64 {
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

// Set stores v converted to the cell's type.
func (c *Cell) Set(v Val) error {
	cv, err := Convert(v, c.T)
	if err != nil {
		return err
	}
	c.V = byValue(cv, c.T)
	return nil
}

// byValue is v as a cell of type t holds it: a struct or a container
// copied (C++ assignment), but the object a pointer or a reference names
// shared.
func byValue(v Val, t ast.Type) Val {
	if t == ast.TPtr || t == ast.TRef {
		return v
	}
	switch v.K {
	case KObj:
		v.P = v.P.(*Object).Clone()
	case KArr:
		v.P = v.P.(*Array).Clone()
	case KMap:
		v.P = v.P.(*Map).Clone()
	}
	return v
}

// Convert applies C++'s implicit conversion of v to type t.
func Convert(v Val, t ast.Type) (Val, error) {
	switch t {
	case ast.TAuto, ast.TRef, ast.TObj:
		return v, nil
	case ast.TPtr:
		if v.K == KInt && v.I == 0 {
			return Null, nil
		}
		return v, nil
	case ast.TStr:
		switch v.K {
		case KStr:
			return v, nil
		case KTN:
			return Str(v.P.(fmt.Stringer).String()), nil
		case KNull:
			return Str(""), nil
		}
		return Void, fmt.Errorf("cannot convert %s to a string", v.Describe())
	case ast.TF32, ast.TF64:
		switch v.K {
		case KInt:
			return Val{K: KFloat, T: t, F: v.Float()}, nil
		case KFloat:
			f := v.F
			if t == ast.TF32 {
				f = float64(float32(f))
			}
			return Val{K: KFloat, T: t, F: f}, nil
		}
	case ast.TBool:
		return Bool(v.Truthy()), nil
	default: // integers
		switch v.K {
		case KInt:
			return Int(v.I, t), nil
		case KFloat:
			if math.IsNaN(v.F) || math.IsInf(v.F, 0) {
				return Int(0, t), nil
			}
			if t == ast.TU64 && v.F >= 1<<63 {
				return Val{K: KInt, T: t, I: int64(uint64(v.F))}, nil
			}
			return Int(int64(v.F), t), nil
		case KNull:
			return Int(0, t), nil
		}
	}
	return Void, fmt.Errorf("cannot convert %s to %s", v.Describe(), t)
}

func (v Val) Float() float64 {
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

// Truthy is C++'s conversion to bool.
func (v Val) Truthy() bool {
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

func (v Val) Describe() string {
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
		if hv, ok := v.P.(HostValue); ok {
			return hv.Describe()
		}
		return "host value"
	case KObj:
		return "object " + v.P.(*Object).Class
	case KArr:
		return "array"
	case KFunc:
		return "function"
	case KTN:
		return "tensor name " + v.P.(fmt.Stringer).String()
	case KEnum:
		return v.S
	case KMap:
		return "map"
	case KIter:
		return "iterator"
	case KAddr:
		return "address of " + v.P.(*Cell).V.Describe()
	case KNative:
		if t, ok := v.P.(*ops.Tensor); ok {
			n, _ := nativeMember(v, "name")
			return fmt.Sprintf("ggml tensor %q %v", n.S, t.Ne)
		}
		return "ggml handle"
	}
	return "value"
}

// Common is the type of C++'s usual arithmetic conversions of a and b
// (both integers).
func Common(a, b ast.Type) ast.Type {
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

// Arith evaluates a binary arithmetic, bitwise or comparison operator.
func Arith(op string, a, b Val) (Val, error) {
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
		eq := Same(a, b)
		if op == "!=" {
			eq = !eq
		}
		return Bool(eq), nil
	case "+":
		if a.K == KStr || b.K == KStr || a.K == KTN || b.K == KTN {
			sa, err := Convert(a, ast.TStr)
			if err != nil {
				return Void, err
			}
			sb, err := Convert(b, ast.TStr)
			if err != nil {
				return Void, err
			}
			return Str(sa.S + sb.S), nil
		}
	case "-":
		if a.K == KIter && b.K == KIter && a.P == b.P {
			return Int(a.I-b.I, ast.TI64), nil
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
	return Void, fmt.Errorf("operator %s on %s and %s", op, a.Describe(), b.Describe())
}

// floatArith is an operator with a floating operand: float when both are
// float (or integers), else double.
func floatArith(op string, a, b Val) (Val, error) {
	x, y := a.Float(), b.Float()
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
		return Bool(x < y), nil
	case "<=":
		return Bool(x <= y), nil
	case ">":
		return Bool(x > y), nil
	case ">=":
		return Bool(x >= y), nil
	case "==":
		return Bool(x == y), nil
	case "!=":
		return Bool(x != y), nil
	default:
		return Void, fmt.Errorf("operator %s on floats", op)
	}
	if t == ast.TF32 {
		r = float64(float32(r))
	}
	return Val{K: KFloat, T: t, F: r}, nil
}

// intArith is an operator on integers, in their common type.
func intArith(op string, a, b Val) (Val, error) {
	t := Common(a.T, b.T)
	x, y := WrapInt(a.I, t), WrapInt(b.I, t)
	unsigned := t == ast.TU32 || t == ast.TU64
	switch op {
	case "+":
		return Int(x+y, t), nil
	case "-":
		return Int(x-y, t), nil
	case "*":
		return Int(x*y, t), nil
	case "/", "%":
		if y == 0 {
			return Void, &Abort{Msg: "integer division by zero (SIGFPE)"}
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
		return Int(r, t), nil
	case "&":
		return Int(x&y, t), nil
	case "|":
		return Int(x|y, t), nil
	case "^":
		return Int(x^y, t), nil
	case "<<":
		return Int(x<<uint(b.I&63), t), nil
	case ">>":
		if unsigned {
			if t == ast.TU32 {
				return Int(int64(uint32(x)>>uint(b.I&31)), t), nil
			}
			return Int(int64(uint64(x)>>uint(b.I&63)), t), nil
		}
		return Int(x>>uint(b.I&63), t), nil
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
		return Bool(c < 0), nil
	case "<=":
		return Bool(c <= 0), nil
	case ">":
		return Bool(c > 0), nil
	case ">=":
		return Bool(c >= 0), nil
	case "==":
		return Bool(c == 0), nil
	case "!=":
		return Bool(c != 0), nil
	}
	return Void, fmt.Errorf("unknown operator %s", op)
}

// Same is == for non-arithmetic values.
func Same(a, b Val) bool {
	null := func(v Val) bool { return v.K == KNull || v.K == KVoid || v.K == KInt && v.I == 0 }
	if null(a) || null(b) {
		return null(a) && null(b)
	}
	if a.K != b.K {
		if (a.K == KStr || a.K == KTN) && (b.K == KStr || b.K == KTN) {
			sa, _ := Convert(a, ast.TStr)
			sb, _ := Convert(b, ast.TStr)
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
		return a.P.(fmt.Stringer).String() == b.P.(fmt.Stringer).String()
	case KIter:
		return a.P == b.P && a.I == b.I
	}
	return a.P == b.P
}

// Object is a struct value: a model, a layer, llama_hparams, a nested
// struct. Members not yet assigned read as null pointers.
type Object struct {
	Class  string
	Fields map[string]*Cell
	slab   []Cell // cells for new members, allocated a few at a time
	Shared bool   // members hold what is assigned (the graph's objects)
	Open   bool   // members never assigned read as null pointers, even unnamed ones (the model)
	Strict bool   // a member it lacks is an error, not a null pointer (llama_hparams)
	// Members, when set, makes the struct a member is, for the members
	// that are structs held by value (llama_layer's): they come into
	// being on first use. Nil for the other names.
	Members func(name string) *Object
	// Methods, when set, answers the struct's methods (before the
	// Interp's Host does).
	Methods MethodSet
}

// MethodSet answers the methods of the objects that carry it.
type MethodSet interface {
	HasMethod(o *Object, name string) bool
	CallMethod(f *Frame, m *Method, args []*ast.Node) (Val, error)
}

// NewObject is an empty struct of class.
func NewObject(class string) *Object { return &Object{Class: class, Fields: map[string]*Cell{}} }

// Clone copies the struct by value (C++ assignment).
func (o *Object) Clone() *Object {
	c := &Object{Class: o.Class, Fields: make(map[string]*Cell, len(o.Fields)), Shared: o.Shared, Open: o.Open, Strict: o.Strict, Members: o.Members, Methods: o.Methods}
	for k, f := range o.Fields {
		c.Fields[k] = &Cell{V: byValue(f.V, f.T), T: f.T}
	}
	return c
}

// Field returns the member's cell, creating an untyped one (a null
// pointer) on first use.
func (o *Object) Field(name string) *Cell {
	c, ok := o.Fields[name]
	if !ok {
		if len(o.slab) == 0 {
			o.slab = make([]Cell, 16)
		}
		c = &o.slab[0]
		o.slab = o.slab[1:]
		c.V = Null
		if o.Shared {
			c.T = ast.TRef
		}
		if o.Members != nil {
			if sub := o.Members(name); sub != nil {
				c.V = Val{K: KObj, P: sub}
			}
		}
		o.Fields[name] = c
	}
	return c
}

// Array is a std::array, std::vector or std::bitset.
type Array struct {
	Elem  ast.Type
	Cells []Cell
	Fixed bool // std::array/bitset: no resize
	// Make, when set, makes a value-initialized element (a struct, a
	// container, the model's layers); else one is Zero(Elem).
	Make func() Val
}

// Dims is a tensor's ne or nb as the C array it is.
func Dims(t ast.Type, d [4]int64) Val {
	a := NewArray(t, 4, true)
	for i := range a.Cells {
		a.Cells[i].V = Int(d[i], t)
	}
	return Val{K: KArr, P: a}
}

func NewArray(elem ast.Type, n int, fixed bool) *Array {
	a := &Array{Elem: elem, Cells: make([]Cell, n), Fixed: fixed}
	zero := Zero(elem)
	for i := range a.Cells {
		a.Cells[i] = Cell{V: zero, T: elem}
	}
	return a
}

func Zero(t ast.Type) Val {
	switch t {
	case ast.TBool, ast.TI32, ast.TU32, ast.TI64, ast.TU64:
		return Int(0, t)
	case ast.TF32, ast.TF64:
		return Val{K: KFloat, T: t}
	case ast.TStr:
		return Str("")
	case ast.TAuto, ast.TPtr:
		return Null
	}
	return Void
}

// Clone copies an array by value (C++ assignment of std::array/vector).
func (a *Array) Clone() *Array {
	c := &Array{Elem: a.Elem, Fixed: a.Fixed, Make: a.Make, Cells: make([]Cell, len(a.Cells))}
	copy(c.Cells, a.Cells)
	for i := range c.Cells {
		switch v := c.Cells[i].V; v.K {
		case KObj:
			c.Cells[i].V.P = v.P.(*Object).Clone()
		case KArr:
			c.Cells[i].V.P = v.P.(*Array).Clone()
		}
	}
	return c
}

func (a *Array) At(i int64) (*Cell, error) {
	if i < 0 || i >= int64(len(a.Cells)) {
		return nil, fmt.Errorf("index %d out of range [0, %d)", i, len(a.Cells))
	}
	return &a.Cells[i], nil
}

// zero is a value-initialized element.
func (a *Array) zero() Val {
	if a.Make != nil {
		return a.Make()
	}
	return Zero(a.Elem)
}

func (a *Array) Resize(n int64) error {
	if n < 0 || n > 1<<24 {
		return fmt.Errorf("resize to %d", n)
	}
	if more := int(n) - len(a.Cells); more > 0 {
		a.Cells = slices.Grow(a.Cells, more)
	}
	for int64(len(a.Cells)) < n {
		a.Cells = append(a.Cells, Cell{V: a.zero(), T: a.Elem})
	}
	a.Cells = a.Cells[:n]
	return nil
}

// Map is a std::map, unordered_map or set with keys compared by value.
type Map struct {
	Keys []Val
	// Vals are the values' cells, the i-th of Keys[i]'s, each allocated
	// once, so that a reference to one stays valid as the map grows; nil
	// for a set.
	Vals []*Cell
	Elem ast.Type // the values' type (ast.TAuto: any)
	// Make, when set, makes a value-initialized value (a struct, a
	// container); else one is Zero(Elem).
	Make func() Val
	// ints indexes integer keys (all of them integers) by value, as of
	// len(keys) == intsN: the graph looks up a layer's index per layer
	ints   map[int64]int
	intsN  int
	noInts bool // as of intsN: a key is no integer
}

// Clone copies a map by value, its values as their cells hold them.
func (m *Map) Clone() *Map {
	c := &Map{Keys: append([]Val(nil), m.Keys...), Elem: m.Elem, Make: m.Make}
	if m.Vals != nil {
		c.Vals = make([]*Cell, len(m.Vals))
		cells := make([]Cell, len(m.Vals))
		for i, v := range m.Vals {
			cells[i] = Cell{V: byValue(v.V, v.T), T: v.T}
			c.Vals[i] = &cells[i]
		}
	}
	return c
}

// zero is a value-initialized value of the map's type.
func (m *Map) zero() Val {
	if m.Make != nil {
		return m.Make()
	}
	return Zero(m.Elem)
}

// add appends key k and, unless the map is a set, its value's cell c;
// it returns the key's index.
func (m *Map) add(k Val, c *Cell) int {
	if m.Vals != nil {
		m.Vals = append(m.Vals, c)
	}
	m.Keys = append(m.Keys, k)
	return len(m.Keys) - 1
}

func (m *Map) Find(k Val) int {
	if k.K == KInt && len(m.Keys) > 16 {
		if m.intsN != len(m.Keys) {
			m.ints, m.intsN, m.noInts = make(map[int64]int, len(m.Keys)), len(m.Keys), false
			for i, x := range m.Keys {
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
	for i, x := range m.Keys {
		if eqVals(x, k) {
			return i
		}
	}
	return -1
}

func eqVals(a, b Val) bool {
	if (a.K == KInt || a.K == KFloat) && (b.K == KInt || b.K == KFloat) {
		r, err := Arith("==", a, b)
		return err == nil && r.I == 1
	}
	return Same(a, b)
}

// FieldDef is a data member of llama_hparams or of a struct inside it.
type FieldDef struct {
	Name    string
	CType   string
	Type    ast.Type
	Enum    bool
	Len     string
	Struct  string
	Default string
}
