package cpp

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/ggload/ggload/internal/replay/cpp/ast"
)

// The methods of the values the interpreter knows (strings, std::vector
// and std::array, std::map and std::set, std::stringstream); the others'
// are the host's.

// methodOf returns obj.name as a callable, if the receiver has it.
func (in *Interp) methodOf(obj Val, name string) (Val, bool) {
	if !in.hasMethod(obj, name) {
		return Void, false
	}
	return Val{K: KFunc, P: &Method{Recv: obj, Name: name}}, true
}

// hasMethod reports whether the receiver has a method name.
func (in *Interp) hasMethod(obj Val, name string) bool {
	switch obj.K {
	case KObj:
		o := obj.P.(*Object)
		if o.Class == "stringstream" {
			return name == "str"
		}
		if o.Methods != nil {
			return o.Methods.HasMethod(o, name)
		}
	case KStr, KTN:
		switch name {
		case "c_str", "str", "size", "length", "empty", "substr", "find":
			return true
		}
		return false
	case KArr:
		switch name {
		case "size", "resize", "reserve", "assign", "begin", "end", "empty", "push_back", "emplace_back", "clear", "back", "front", "reset", "set", "test", "data":
			return true
		}
		return false
	case KMap:
		switch name {
		case "find", "end", "begin", "count", "insert", "emplace", "size", "empty", "at", "clear":
			return true
		}
		return false
	}
	return in.Host.HasMethod(obj, name)
}

// callMethod calls a bound method.
func (in *Interp) callMethod(f *Frame, m *Method, args []*ast.Node) (Val, error) {
	recv := m.Recv
	switch recv.K {
	case KObj:
		o := recv.P.(*Object)
		if o.Class == "stringstream" {
			return o.Fields["str"].V, nil
		}
		if o.Methods != nil {
			return o.Methods.CallMethod(f, m, args)
		}
	case KStr, KTN:
		s, _ := Convert(recv, ast.TStr)
		switch m.Name {
		case "c_str", "str":
			return s, nil
		case "size", "length":
			return Int(int64(len(s.S)), ast.TU64), nil
		case "empty":
			return Bool(s.S == ""), nil
		case "substr", "find":
			return stringMethod(f, s.S, m.Name, args)
		}
		return Void, f.Errorf("method %s of %s", m.Name, recv.Describe())
	case KArr:
		return arrayMethod(f, recv.P.(*Array), m.Name, args)
	case KMap:
		return mapMethod(f, recv.P.(*Map), m.Name, args)
	}
	return in.Host.CallMethod(f, m, args)
}

// containerMethod answers the methods every container has (size, empty,
// begin, end) for container c of n elements.
func containerMethod(c any, n int, name string) (Val, bool) {
	switch name {
	case "size":
		return Int(int64(n), ast.TU64), true
	case "empty":
		return Bool(n == 0), true
	case "begin":
		return Val{K: KIter, P: c, I: 0}, true
	case "end":
		return Val{K: KIter, P: c, I: int64(n)}, true
	}
	return Void, false
}

func arrayMethod(f *Frame, a *Array, name string, args []*ast.Node) (Val, error) {
	vs, err := EvalArgs(f, args)
	if err != nil {
		return Void, err
	}
	if v, ok := containerMethod(a, len(a.Cells), name); ok {
		return v, nil
	}
	switch name {
	case "data":
		return Val{K: KArr, P: a}, nil // the elements, for a C array parameter (ggml_build_forward_select)
	case "resize":
		if len(vs) < 1 || vs[0].K != KInt {
			return Void, f.Errorf("resize arguments")
		}
		if a.Fixed {
			return Void, f.Errorf("resize of a std::array")
		}
		return Void, a.Resize(vs[0].I)
	case "reserve":
		return Void, nil // capacity only
	case "assign":
		// assign(first, last): the elements of another array's range
		if len(vs) != 2 || vs[0].K != KIter || vs[1].K != KIter || vs[0].P != vs[1].P || a.Fixed {
			return Void, f.Errorf("assign arguments")
		}
		src, ok := vs[0].P.(*Array)
		if !ok || vs[0].I < 0 || vs[1].I < vs[0].I || vs[1].I > int64(len(src.Cells)) {
			return Void, f.Errorf("assign of a range of %s", vs[0].Describe())
		}
		cells := make([]Cell, 0, vs[1].I-vs[0].I)
		for _, sc := range src.Cells[vs[0].I:vs[1].I] {
			c := Cell{T: a.Elem}
			if err := c.Set(sc.V); err != nil {
				return Void, err
			}
			cells = append(cells, c)
		}
		a.Cells = cells
		return Void, nil
	case "push_back", "emplace_back":
		if len(vs) != 1 || a.Fixed {
			return Void, f.Errorf("%s arguments", name)
		}
		c := Cell{T: a.Elem}
		if err := c.Set(vs[0]); err != nil {
			return Void, err
		}
		a.Cells = append(a.Cells, c)
		return Void, nil
	case "clear":
		if a.Fixed {
			return Void, f.Errorf("clear of a std::array")
		}
		a.Cells = a.Cells[:0]
		return Void, nil
	case "reset", "set":
		// std::bitset: all bits, or bit i (to a value)
		switch len(vs) {
		case 0:
			for i := range a.Cells {
				a.Cells[i].V = Bool(name == "set")
			}
			return Void, nil
		case 1, 2:
			c, err := a.At(vs[0].I)
			if err != nil {
				return Void, &Abort{Msg: "bitset " + err.Error(), Where: f.Fn}
			}
			v := name == "set"
			if len(vs) == 2 {
				v = vs[1].Truthy()
			}
			c.V = Bool(v)
			return Void, nil
		}
	case "test":
		if len(vs) == 1 {
			c, err := a.At(vs[0].I)
			if err != nil {
				return Void, &Abort{Msg: "bitset " + err.Error(), Where: f.Fn}
			}
			return Bool(c.V.Truthy()), nil
		}
	case "back", "front":
		if len(a.Cells) == 0 {
			return Void, &Abort{Msg: name + "() of an empty vector", Where: f.Fn}
		}
		if name == "back" {
			return a.Cells[len(a.Cells)-1].V, nil
		}
		return a.Cells[0].V, nil
	}
	return Void, f.Errorf("method %s of an array", name)
}

func mapMethod(f *Frame, m *Map, name string, args []*ast.Node) (Val, error) {
	vs, err := EvalArgs(f, args)
	if err != nil {
		return Void, err
	}
	if v, ok := containerMethod(m, len(m.Keys), name); ok {
		return v, nil
	}
	switch name {
	case "find":
		if len(vs) != 1 {
			return Void, f.Errorf("find arguments")
		}
		i := m.Find(vs[0])
		if i < 0 {
			i = len(m.Keys)
		}
		return Val{K: KIter, P: m, I: int64(i)}, nil
	case "count":
		if len(vs) != 1 {
			return Void, f.Errorf("count arguments")
		}
		return Bool(m.Find(vs[0]) >= 0), nil
	case "insert", "emplace":
		if len(vs) == 0 {
			return Void, f.Errorf("%s arguments", name)
		}
		// the pair of the element's iterator and whether it was inserted
		i := m.Find(vs[0])
		if i >= 0 {
			return Pair(Val{K: KIter, P: m, I: int64(i)}, False), nil
		}
		var c *Cell // none for a set's key
		switch {
		case m.Vals == nil:
		case len(vs) > 1:
			c = &Cell{T: m.Elem}
			if err := c.Set(vs[1]); err != nil {
				return Void, f.Errorf("%s: %v", name, err)
			}
		default:
			c = &Cell{T: m.Elem, V: m.zero()}
		}
		return Pair(Val{K: KIter, P: m, I: int64(m.add(vs[0], c))}, True), nil
	case "clear":
		m.Keys, m.intsN = m.Keys[:0], 0
		if m.Vals != nil {
			m.Vals = m.Vals[:0]
		}
		return Void, nil
	case "at":
		if len(vs) != 1 || m.Vals == nil {
			return Void, f.Errorf("at arguments")
		}
		i := m.Find(vs[0])
		if i < 0 {
			return Void, &Throw{Msg: "map::at"}
		}
		return m.Vals[i].V, nil
	}
	return Void, f.Errorf("method %s of a map", name)
}

// Container makes an empty value of a std:: container type.
func (in *Interp) Container(ctype string) (Val, error) {
	v, ok, err := in.container(ctype)
	if !ok {
		return Void, fmt.Errorf("unsupported container %s", ctype)
	}
	return v, err
}

// container makes an empty value of ctype, and reports whether ctype is
// a container it knows.
func (in *Interp) container(ctype string) (Val, bool, error) {
	base, _, _ := strings.Cut(ctype, "<")
	switch base {
	case "std::vector", "std::array":
		t, mk, err := in.element(templateArg(ctype, 0))
		if err != nil {
			return Void, true, err
		}
		a := &Array{Elem: t, Make: mk}
		if base == "std::vector" {
			return Val{K: KArr, P: a}, true, nil
		}
		size, err := in.ArrayLen(templateArg(ctype, 1))
		if err == nil {
			err = a.Resize(size)
		}
		a.Fixed = true
		return Val{K: KArr, P: a}, true, err
	case "std::unordered_set", "std::set":
		return Val{K: KMap, P: &Map{}}, true, nil
	case "std::map", "std::unordered_map":
		t, mk, err := in.element(templateArg(ctype, 1))
		return Val{K: KMap, P: &Map{Vals: []*Cell{}, Elem: t, Make: mk}}, true, err
	case "std::stringstream", "std::ostringstream":
		o := NewObject("stringstream")
		o.Fields["str"] = &Cell{V: Str("")}
		return Val{K: KObj, P: o}, true, nil
	}
	return Void, false, nil
}

// element is how a container value-initializes an element of C++ type
// ctype: its cell's type and, for a struct of the headers or a container,
// a maker of a fresh one (nil: Zero of the type; of a type it knows
// neither, a null pointer).
func (in *Interp) element(ctype string) (ast.Type, func() Val, error) {
	if t := elemType(ctype); t != ast.TAuto {
		return t, nil, nil
	}
	var proto Val
	var err error
	known := true
	if fields, ok := in.Lib.structs[ctype]; ok {
		var o *Object
		o, err = in.Host.NewStruct(ctype, fields)
		proto = Val{K: KObj, P: o}
	} else {
		proto, known, err = in.container(ctype)
	}
	if !known || err != nil {
		return ast.TAuto, nil, err
	}
	return ast.TAuto, func() Val { return byValue(proto, ast.TAuto) }, nil
}

// templateArg is the i-th argument of a template's type, "" past its
// last: of "std::map<K, std::vector<V>>", K and std::vector<V>, split at
// the commas outside nested angle brackets.
func templateArg(ctype string, i int) string {
	_, rest, _ := strings.Cut(ctype, "<")
	rest = strings.TrimSuffix(strings.TrimSpace(rest), ">")
	depth, start := 0, 0
	for j := 0; j < len(rest); j++ {
		switch rest[j] {
		case '<':
			depth++
		case '>':
			depth--
		case ',':
			if depth > 0 {
				continue
			}
			if i == 0 {
				return strings.TrimSpace(rest[start:j])
			}
			i, start = i-1, j+1
		}
	}
	if i > 0 {
		return ""
	}
	return strings.TrimSpace(rest[start:])
}

// elemType is the cells' type of a container's elements of C++ type s.
func elemType(s string) ast.Type {
	if strings.HasSuffix(s, "*") {
		return ast.TPtr
	}
	switch s {
	case "bool":
		return ast.TBool
	case "int", "int32_t", "llama_token":
		return ast.TI32
	case "uint32_t", "unsigned":
		return ast.TU32
	case "int64_t":
		return ast.TI64
	case "uint64_t", "size_t":
		return ast.TU64
	case "float":
		return ast.TF32
	case "double":
		return ast.TF64
	case "std::string":
		return ast.TStr
	}
	return ast.TAuto
}

func (in *Interp) ArrayLen(s string) (int64, error) {
	if a, b, ok := strings.Cut(s, "*"); ok {
		// a C array's length: a product
		x, err := in.ArrayLen(a)
		if err != nil {
			return 0, err
		}
		y, err := in.ArrayLen(b)
		return x * y, err
	}
	s = strings.TrimSpace(s)
	if v, ok := in.Host.ConstLen(s); ok {
		return v, nil
	}
	return strconv.ParseInt(s, 10, 64)
}
