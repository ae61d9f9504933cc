package arch

import (
	"fmt"
	"strings"

	"github.com/ggload/ggload/gguf"
	"github.com/ggload/ggload/internal/arch/ast"
)

// methodOf returns obj.name as a callable, if the receiver has it.
func (r *Run) methodOf(obj Val, name string) (Val, bool) {
	if !r.hasMethod(obj, name) {
		return vVoid, false
	}
	return Val{K: KFunc, P: &method{recv: obj, name: name}}, true
}

// hasMethod reports whether the receiver has a method name.
func (r *Run) hasMethod(obj Val, name string) bool {
	bound := func() bool { return true }
	switch obj.K {
	case KObj:
		o := obj.P.(*Object)
		switch {
		case o == r.model:
			if modelMethods[name] || r.modelProgram(name) != nil {
				return bound()
			}
		case o.class == "llama_hparams":
			if r.hparamsProgram(name) != nil {
				return bound()
			}
		case o.class == "llama_model_loader":
			if loaderMethods[name] {
				return bound()
			}
		case o.class == "llama_vocab":
			if name == "n_tokens" || name == "n_token_types" {
				return bound()
			}
		case o.class == "stringstream":
			if name == "str" {
				return bound()
			}
		case o.share:
			if strings.Contains(name, "::") {
				return false
			}
			if _, ok := r.graphMethod(o, name); ok || len(classPrograms(o.class, name)) > 0 {
				return bound()
			}
		}
	case KStr, KTN:
		switch name {
		case "c_str", "str", "size", "length", "empty", "substr", "find":
			return bound()
		}
	case KArr:
		switch name {
		case "size", "resize", "reserve", "begin", "end", "empty", "push_back", "emplace_back", "clear", "back", "front", "reset", "set", "test", "data":
			return bound()
		}
	case KMap:
		switch name {
		case "find", "end", "begin", "count", "insert", "emplace", "size", "empty", "at", "clear":
			return bound()
		}
	}
	return false
}

// modelProgram is the program of a llama_model_base method, nil if none.
func (r *Run) modelProgram(name string) *Program {
	p, ok := r.progCache[name]
	if !ok {
		// the architecture's class and its parents first (the graph's
		// virtual methods: build_arch_graph)
		for c := r.entry.Class; c != "" && p == nil; c = classParents[c] {
			p = r.prog(c + "::" + name)
		}
		if p == nil {
			p = r.prog(name)
		}
		if p == nil {
			p = r.prog("llama_model_base::" + name)
		}
		if p == nil {
			p = r.prog("llama_model::" + name)
		}
		r.progCache[name] = p
	}
	return p
}

// hparamsProgram is the program of a llama_hparams method, nil if none.
func (r *Run) hparamsProgram(name string) *Program {
	p, ok := r.hpCache[name]
	if !ok {
		p = r.prog("llama_hparams::" + name)
		r.hpCache[name] = p
	}
	return p
}

var loaderMethods = map[string]bool{"get_key": true, "get_key_or_arr": true, "get_arr": true, "get_arr_n": true,
	"get_weight": true, "require_weight": true, "get_tensor_meta": true, "get_arch": true, "get_arch_name": true,
	"llm_kv": true, "ftype_name": true}

// callMethod calls a bound method.
func (r *Run) callMethod(f *frame, m *method, args []*ast.Node) (Val, error) {
	recv := m.recv
	switch recv.K {
	case KObj:
		o := recv.P.(*Object)
		switch {
		case o == r.model:
			switch m.name {
			case "create_tensor":
				return r.createTensor(f, args)
			case "tn":
				return r.tn(f, args)
			case "arch_name":
				return vStr(r.Arch), nil
			case "type_name":
				return vStr("?B"), nil
			case "get_tensor", "tensor_split":
				return r.splitMethod(f, m.name, args)
			case "split_mode":
				return vInt(int64(r.splitMode), ast.TI32), nil
			case "n_tensors":
				return vInt(int64(r.nTensors), ast.TU64), nil
			case "load_arch_hparams":
				if r.entry.Hparams == "" {
					return vVoid, nil // the generic path: no architecture's own keys
				}
				p, err := r.program(r.entry.Hparams)
				if err != nil {
					return vVoid, err
				}
				return r.invoke(f, p, recv, args)
			case "load_arch_tensors":
				p, err := r.program(r.entry.Tensors)
				if err != nil {
					return vVoid, err
				}
				return r.invoke(f, p, recv, args)
			}
			return r.invoke(f, r.modelProgram(m.name), recv, args)
		case o.class == "llama_hparams":
			if r.split != nil {
				return r.memoHparams(f, m.name, recv, args)
			}
			return r.invoke(f, r.hparamsProgram(m.name), recv, args)
		case o.class == "llama_model_loader":
			return r.loaderCall(f, m.name, args)
		case o.class == "llama_vocab":
			return o.fields[m.name].V, nil
		case o.class == "stringstream":
			return o.fields["str"].V, nil
		case o.share:
			if gm, ok := r.graphMethod(o, m.name); ok {
				return gm(f, args)
			}
			p, err := pickOverload(f, classPrograms(o.class, m.name), args)
			if err != nil {
				return vVoid, err
			}
			return r.invoke(f, p, recv, args)
		}
	case KStr, KTN:
		s, _ := convert(recv, ast.TStr)
		switch m.name {
		case "c_str", "str":
			return s, nil
		case "size", "length":
			return vInt(int64(len(s.S)), ast.TU64), nil
		case "empty":
			return vBool(s.S == ""), nil
		case "substr", "find":
			return stringMethod(f, s.S, m.name, args)
		}
	case KArr:
		return r.arrayMethod(f, recv.P.(*Array), m.name, args)
	case KMap:
		return r.mapMethod(f, recv.P.(*cmap), m.name, args)
	}
	return vVoid, f.errorf("method %s of %s", m.name, recv.describe())
}

// containerMethod answers the methods every container has (size, empty,
// begin, end) for container c of n elements.
func containerMethod(c any, n int, name string) (Val, bool) {
	switch name {
	case "size":
		return vInt(int64(n), ast.TU64), true
	case "empty":
		return vBool(n == 0), true
	case "begin":
		return Val{K: KIter, P: c, I: 0}, true
	case "end":
		return Val{K: KIter, P: c, I: int64(n)}, true
	}
	return vVoid, false
}

func (r *Run) arrayMethod(f *frame, a *Array, name string, args []*ast.Node) (Val, error) {
	vs, err := evalArgs(f, args)
	if err != nil {
		return vVoid, err
	}
	if v, ok := containerMethod(a, len(a.cells), name); ok {
		return v, nil
	}
	switch name {
	case "data":
		return Val{K: KArr, P: a}, nil // the elements, for a C array parameter (ggml_build_forward_select)
	case "resize":
		if len(vs) < 1 || vs[0].K != KInt {
			return vVoid, f.errorf("resize arguments")
		}
		if a.fixed {
			return vVoid, f.errorf("resize of a std::array")
		}
		return vVoid, a.resize(vs[0].I)
	case "reserve":
		return vVoid, nil // capacity only
	case "push_back", "emplace_back":
		if len(vs) != 1 || a.fixed {
			return vVoid, f.errorf("%s arguments", name)
		}
		c := Cell{T: a.elem}
		if err := c.set(vs[0]); err != nil {
			return vVoid, err
		}
		a.cells = append(a.cells, c)
		return vVoid, nil
	case "clear":
		if a.fixed {
			return vVoid, f.errorf("clear of a std::array")
		}
		a.cells = a.cells[:0]
		return vVoid, nil
	case "reset", "set":
		// std::bitset: all bits, or bit i (to a value)
		switch len(vs) {
		case 0:
			for i := range a.cells {
				a.cells[i].V = vBool(name == "set")
			}
			return vVoid, nil
		case 1, 2:
			c, err := a.at(vs[0].I)
			if err != nil {
				return vVoid, &Abort{Msg: "bitset " + err.Error(), Where: f.fn}
			}
			v := name == "set"
			if len(vs) == 2 {
				v = vs[1].truthy()
			}
			c.V = vBool(v)
			return vVoid, nil
		}
	case "test":
		if len(vs) == 1 {
			c, err := a.at(vs[0].I)
			if err != nil {
				return vVoid, &Abort{Msg: "bitset " + err.Error(), Where: f.fn}
			}
			return vBool(c.V.truthy()), nil
		}
	case "back", "front":
		if len(a.cells) == 0 {
			return vVoid, &Abort{Msg: name + "() of an empty vector", Where: f.fn}
		}
		if name == "back" {
			return a.cells[len(a.cells)-1].V, nil
		}
		return a.cells[0].V, nil
	}
	return vVoid, f.errorf("method %s of an array", name)
}

func (r *Run) mapMethod(f *frame, m *cmap, name string, args []*ast.Node) (Val, error) {
	vs, err := evalArgs(f, args)
	if err != nil {
		return vVoid, err
	}
	if v, ok := containerMethod(m, len(m.keys), name); ok {
		return v, nil
	}
	switch name {
	case "find":
		if len(vs) != 1 {
			return vVoid, f.errorf("find arguments")
		}
		i := m.find(vs[0])
		if i < 0 {
			i = len(m.keys)
		}
		return Val{K: KIter, P: m, I: int64(i)}, nil
	case "count":
		if len(vs) != 1 {
			return vVoid, f.errorf("count arguments")
		}
		return vBool(m.find(vs[0]) >= 0), nil
	case "insert", "emplace":
		if len(vs) == 0 {
			return vVoid, f.errorf("%s arguments", name)
		}
		// the pair of the element's iterator and whether it was inserted
		i := m.find(vs[0])
		if i >= 0 {
			return pairVal(Val{K: KIter, P: m, I: int64(i)}, vFalse), nil
		}
		m.keys = append(m.keys, vs[0])
		if m.vals != nil {
			v := vVoid
			if len(vs) > 1 {
				v = vs[1]
			}
			m.vals = append(m.vals, v)
		}
		return pairVal(Val{K: KIter, P: m, I: int64(len(m.keys) - 1)}, vTrue), nil
	case "clear":
		m.keys, m.intsN = m.keys[:0], 0
		if m.vals != nil {
			m.vals = m.vals[:0]
		}
		return vVoid, nil
	case "at":
		if len(vs) != 1 || m.vals == nil {
			return vVoid, f.errorf("at arguments")
		}
		i := m.find(vs[0])
		if i < 0 {
			return vVoid, &Throw{Msg: "map::at"}
		}
		return m.vals[i], nil
	}
	return vVoid, f.errorf("method %s of a map", name)
}

// newLoader is llama_model_loader as the programs see it.
func (r *Run) newLoader() Val {
	o := newObject("llama_model_loader")
	o.fields["load_mtp"] = &Cell{V: vBool(r.opts.LoadMTP)}
	o.fields["use_mmap"] = &Cell{V: vFalse}
	o.fields["no_alloc"] = &Cell{V: vFalse}
	o.fields["n_bytes"] = &Cell{V: vInt(int64(r.gm.NBytes), ast.TU64)}
	o.fields["n_elements"] = &Cell{V: vInt(int64(r.gm.NElements), ast.TU64)}
	ft, _ := r.gm.FileType()
	o.fields["ftype"] = &Cell{V: vInt(int64(ft), ast.TI32)}
	o.fields["metadata"] = &Cell{V: vVoid}
	return Val{K: KObj, P: o}
}

// ValueType is a GGUF metadata type.
type ValueType = gguf.ValueType

func (r *Run) loaderCall(f *frame, name string, args []*ast.Node) (Val, error) {
	arg := func(i int) (Val, error) {
		if i >= len(args) {
			return vVoid, f.errorf("%s: missing argument %d", name, i)
		}
		return f.eval(args[i])
	}
	keyArg := func() (string, error) {
		v, err := arg(0)
		if err != nil {
			return "", err
		}
		k, err := r.kvKey(v)
		if err != nil {
			return "", f.errorf("%s: %v", name, err)
		}
		return k, nil
	}
	switch name {
	case "get_arch":
		return r.model.fields["arch"].V, nil
	case "get_arch_name":
		return vStr(r.Arch), nil
	case "ftype_name":
		return vStr(r.gm.FileTypeName()), nil
	case "llm_kv":
		k, err := keyArg()
		if err != nil {
			return vVoid, err
		}
		return vStr(k), nil
	case "get_weight", "require_weight", "get_tensor_meta":
		v, err := arg(0)
		if err != nil {
			return vVoid, err
		}
		s, err := convert(v, ast.TStr)
		if err != nil {
			return vVoid, f.errorf("%s: %v", name, err)
		}
		w, ok := r.gm.Weight(s.S)
		if !ok {
			w, ok = r.extraWeights[s.S]
		}
		if !ok {
			if name == "require_weight" {
				return vVoid, &Throw{Msg: fmt.Sprintf("tensor '%s' not found", s.S)}
			}
			return vNull, nil
		}
		return Val{K: KTensor, P: weightTensor(w)}, nil
	case "get_key", "get_key_or_arr", "get_arr", "get_arr_n":
		return r.keyCall(f, name, args)
	}
	return vVoid, f.errorf("llama_model_loader::%s", name)
}

// keyCall is one of the loader's metadata reads, (key, destination,
// [n,] [required]) as the programs call them.
func (r *Run) keyCall(f *frame, name string, args []*ast.Node) (Val, error) {
	if len(args) < 2 {
		return vVoid, f.errorf("%s: %d arguments", name, len(args))
	}
	kv, err := f.eval(args[0])
	if err != nil {
		return vVoid, err
	}
	key, err := r.kvKey(kv)
	if err != nil {
		return vVoid, f.errorf("%s: %v", name, err)
	}
	dst, err := f.ref(args[1])
	if err != nil {
		return vVoid, err
	}
	// get_key_or_arr into a std::array takes n before required
	rest := args[2:]
	var n int64
	isArr := dst.V.K == KArr
	if name == "get_key_or_arr" && isArr {
		if len(rest) == 0 {
			return vVoid, f.errorf("get_key_or_arr: no length")
		}
		nv, err := f.eval(rest[0])
		if err != nil {
			return vVoid, err
		}
		n, rest = nv.I, rest[1:]
	}
	req := true
	if len(rest) > 0 {
		v, err := f.eval(rest[0])
		if err != nil {
			return vVoid, err
		}
		req = v.truthy()
	}
	var found bool
	switch {
	case name == "get_key":
		found, err = r.getKey(key, dst, req)
		if err == nil && !found && dst == r.hparams.obj.fields["pooling_type"] {
			// the llama_pooling_type overload reports UNSPECIFIED when absent
			dst.V = vInt(enumConsts["LLAMA_POOLING_TYPE_UNSPECIFIED"], ast.TI32)
		}
	case name == "get_key_or_arr" && isArr:
		found, err = r.getKeyOrArr(key, dst.V.P.(*Array), n, req)
	case name == "get_key_or_arr":
		found, err = r.getKeyOrArrScalar(key, dst, req)
	case name == "get_arr" && isArr:
		found, err = r.getArr(key, dst.V.P.(*Array), req)
	case name == "get_arr":
		return vVoid, f.errorf("get_arr into %s", dst.V.describe())
	default:
		found, err = r.getArrN(key, dst, req)
	}
	return vBool(found), err
}

func weightTensor(w *gguf.Weight) *Tensor {
	t := &Tensor{Name: w.Name, Type: int(w.Type)}
	copy(t.Ne[:], w.Shape[:])
	return t
}

// newVocab is llama_vocab's two counts the programs read: the number of
// tokens and of token types.
func (r *Run) newVocab() (Val, error) {
	o := newObject("llama_vocab")
	nTypes := &Cell{T: ast.TU32, V: vInt(0, ast.TU32)}
	model := &Cell{T: ast.TStr, V: vStr("")}
	if _, err := r.getKey("tokenizer.ggml.model", model, true); err != nil {
		return vVoid, err
	}
	if _, err := r.getKey("tokenizer.ggml.token_type_count", nTypes, false); err != nil {
		return vVoid, err
	}
	n := &Cell{T: ast.TU32, V: vInt(0, ast.TU32)}
	if m := model.V.S; m == "no_vocab" || m == "none" {
		if _, err := r.getKey(strings.Replace(kvNames["LLM_KV_VOCAB_SIZE"], "%s", r.Arch, 1), n, false); err != nil {
			return vVoid, err
		}
	} else {
		v, ok := r.lookup("tokenizer.ggml.tokens")
		if !ok {
			return vVoid, &Throw{Msg: "cannot find tokenizer vocab in model file\n"}
		}
		if !v.IsArray() || v.ElemType() != gguf.TypeString {
			return vVoid, &Throw{Msg: "invalid gguf type for tokenizer.ggml.tokens"}
		}
		n.V = vInt(int64(v.Len()), ast.TU32)
	}
	o.fields["n_tokens"] = n
	o.fields["n_token_types"] = nTypes
	return Val{K: KObj, P: o}, nil
}
