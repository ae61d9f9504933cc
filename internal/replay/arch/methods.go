package arch

import (
	"fmt"
	"strings"

	"github.com/ggload/ggload/gguf"
	"github.com/ggload/ggload/internal/replay/cpp"
	"github.com/ggload/ggload/internal/replay/cpp/ast"
)

// HasMethod reports whether an object of the replay has a method name.
func (r *Run) HasMethod(obj cpp.Val, name string) bool {
	if obj.K != cpp.KObj {
		return false
	}
	o := obj.P.(*cpp.Object)
	switch {
	case o == r.model:
		return modelMethods[name] || r.modelProgram(name) != nil
	case o.Class == "llama_hparams":
		return r.hparamsProgram(name) != nil
	case o.Class == "llama_model_loader":
		return loaderMethods[name]
	case o.Class == "llama_vocab":
		return name == "n_tokens" || name == "n_token_types"
	}
	return false
}

// modelProgram is the program of a llama_model_base method, nil if none.
func (r *Run) modelProgram(name string) *cpp.Program {
	p, ok := r.progCache[name]
	if !ok {
		// the architecture's class and its parents first (the graph's
		// virtual methods: build_arch_graph)
		for c := r.entry.Class; c != "" && p == nil; c = classParents[c] {
			p = r.Function(c + "::" + name)
		}
		if p == nil {
			p = r.Function(name)
		}
		if p == nil {
			p = r.Function("llama_model_base::" + name)
		}
		if p == nil {
			p = r.Function("llama_model::" + name)
		}
		r.progCache[name] = p
	}
	return p
}

// hparamsProgram is the program of a llama_hparams method, nil if none.
func (r *Run) hparamsProgram(name string) *cpp.Program {
	p, ok := r.hpCache[name]
	if !ok {
		p = r.Function("llama_hparams::" + name)
		r.hpCache[name] = p
	}
	return p
}

var loaderMethods = map[string]bool{"get_key": true, "get_key_or_arr": true, "get_arr": true, "get_arr_n": true,
	"get_weight": true, "require_weight": true, "get_tensor_meta": true, "get_arch": true, "get_arch_name": true,
	"llm_kv": true, "ftype_name": true}

// CallMethod calls a bound method of an object of the replay.
func (r *Run) CallMethod(f *cpp.Frame, m *cpp.Method, args []*ast.Node) (cpp.Val, error) {
	recv := m.Recv
	switch recv.K {
	case cpp.KObj:
		o := recv.P.(*cpp.Object)
		switch {
		case o == r.model:
			switch m.Name {
			case "create_tensor":
				return r.createTensor(f, args)
			case "tn":
				return r.tn(f, args)
			case "arch_name":
				return cpp.Str(r.Arch), nil
			case "type_name":
				return cpp.Str("?B"), nil
			case "get_tensor", "tensor_split":
				return r.splitMethod(f, m.Name, args)
			case "split_mode":
				return cpp.Int(int64(r.splitMode), ast.TI32), nil
			case "n_tensors":
				return cpp.Int(int64(r.nTensors), ast.TU64), nil
			case "load_arch_hparams":
				if r.entry.Hparams == "" {
					return cpp.Void, nil // the generic path: no architecture's own keys
				}
				p, err := r.program(r.entry.Hparams)
				if err != nil {
					return cpp.Void, err
				}
				return r.Invoke(f, p, recv, args)
			case "load_arch_tensors":
				p, err := r.program(r.entry.Tensors)
				if err != nil {
					return cpp.Void, err
				}
				return r.Invoke(f, p, recv, args)
			}
			return r.Invoke(f, r.modelProgram(m.Name), recv, args)
		case o.Class == "llama_hparams":
			if r.split != nil {
				return r.memoHparams(f, m.Name, recv, args)
			}
			return r.Invoke(f, r.hparamsProgram(m.Name), recv, args)
		case o.Class == "llama_model_loader":
			return r.loaderCall(f, m.Name, args)
		case o.Class == "llama_vocab":
			return o.Fields[m.Name].V, nil
		}
	}
	return cpp.Void, f.Errorf("method %s of %s", m.Name, recv.Describe())
}

// newLoader is llama_model_loader as the programs see it.
func (r *Run) newLoader() cpp.Val {
	o := cpp.NewObject("llama_model_loader")
	o.Fields["load_mtp"] = &cpp.Cell{V: cpp.Bool(r.opts.LoadMTP)}
	o.Fields["use_mmap"] = &cpp.Cell{V: cpp.False}
	o.Fields["no_alloc"] = &cpp.Cell{V: cpp.False}
	o.Fields["n_bytes"] = &cpp.Cell{V: cpp.Int(int64(r.gm.NBytes), ast.TU64)}
	o.Fields["n_elements"] = &cpp.Cell{V: cpp.Int(int64(r.gm.NElements), ast.TU64)}
	ft, _ := r.gm.FileType()
	o.Fields["ftype"] = &cpp.Cell{V: cpp.Int(int64(ft), ast.TI32)}
	o.Fields["metadata"] = &cpp.Cell{V: cpp.Void}
	return cpp.Val{K: cpp.KObj, P: o}
}

// ValueType is a GGUF metadata type.
type ValueType = gguf.ValueType

func (r *Run) loaderCall(f *cpp.Frame, name string, args []*ast.Node) (cpp.Val, error) {
	arg := func(i int) (cpp.Val, error) {
		if i >= len(args) {
			return cpp.Void, f.Errorf("%s: missing argument %d", name, i)
		}
		return f.Eval(args[i])
	}
	keyArg := func() (string, error) {
		v, err := arg(0)
		if err != nil {
			return "", err
		}
		k, err := r.kvKey(v)
		if err != nil {
			return "", f.Errorf("%s: %v", name, err)
		}
		return k, nil
	}
	switch name {
	case "get_arch":
		return r.model.Fields["arch"].V, nil
	case "get_arch_name":
		return cpp.Str(r.Arch), nil
	case "ftype_name":
		return cpp.Str(r.gm.FileTypeName()), nil
	case "llm_kv":
		k, err := keyArg()
		if err != nil {
			return cpp.Void, err
		}
		return cpp.Str(k), nil
	case "get_weight", "require_weight", "get_tensor_meta":
		v, err := arg(0)
		if err != nil {
			return cpp.Void, err
		}
		s, err := cpp.Convert(v, ast.TStr)
		if err != nil {
			return cpp.Void, f.Errorf("%s: %v", name, err)
		}
		w, ok := r.gm.Weight(s.S)
		if !ok {
			w, ok = r.extraWeights[s.S]
		}
		if !ok {
			if name == "require_weight" {
				return cpp.Void, &cpp.Throw{Msg: fmt.Sprintf("tensor '%s' not found", s.S)}
			}
			return cpp.Null, nil
		}
		return cpp.Val{K: cpp.KTensor, P: weightTensor(w)}, nil
	case "get_key", "get_key_or_arr", "get_arr", "get_arr_n":
		return r.keyCall(f, name, args)
	}
	return cpp.Void, f.Errorf("llama_model_loader::%s", name)
}

// keyCall is one of the loader's metadata reads, (key, destination,
// [n,] [required]) as the programs call them.
func (r *Run) keyCall(f *cpp.Frame, name string, args []*ast.Node) (cpp.Val, error) {
	if len(args) < 2 {
		return cpp.Void, f.Errorf("%s: %d arguments", name, len(args))
	}
	kv, err := f.Eval(args[0])
	if err != nil {
		return cpp.Void, err
	}
	key, err := r.kvKey(kv)
	if err != nil {
		return cpp.Void, f.Errorf("%s: %v", name, err)
	}
	dst, err := f.Ref(args[1])
	if err != nil {
		return cpp.Void, err
	}
	// get_key_or_arr into a std::array takes n before required
	rest := args[2:]
	var n int64
	isArr := dst.V.K == cpp.KArr
	if name == "get_key_or_arr" && isArr {
		if len(rest) == 0 {
			return cpp.Void, f.Errorf("get_key_or_arr: no length")
		}
		nv, err := f.Eval(rest[0])
		if err != nil {
			return cpp.Void, err
		}
		n, rest = nv.I, rest[1:]
	}
	req := true
	if len(rest) > 0 {
		v, err := f.Eval(rest[0])
		if err != nil {
			return cpp.Void, err
		}
		req = v.Truthy()
	}
	var found bool
	switch {
	case name == "get_key":
		found, err = r.getKey(key, dst, req)
		if err == nil && !found && dst == r.hparams.obj.Fields["pooling_type"] {
			// the llama_pooling_type overload reports UNSPECIFIED when absent
			dst.V = cpp.Int(enumConsts["LLAMA_POOLING_TYPE_UNSPECIFIED"], ast.TI32)
		}
	case name == "get_key_or_arr" && isArr:
		found, err = r.getKeyOrArr(key, dst.V.P.(*cpp.Array), n, req)
	case name == "get_key_or_arr":
		found, err = r.getKeyOrArrScalar(key, dst, req)
	case name == "get_arr" && isArr:
		found, err = r.getArr(key, dst.V.P.(*cpp.Array), req)
	case name == "get_arr":
		return cpp.Void, f.Errorf("get_arr into %s", dst.V.Describe())
	default:
		found, err = r.getArrN(key, dst, req)
	}
	return cpp.Bool(found), err
}

func weightTensor(w *gguf.Weight) *Tensor {
	t := &Tensor{Name: w.Name, Type: int(w.Type)}
	copy(t.Ne[:], w.Shape[:])
	return t
}

// newVocab is llama_vocab's two counts the programs read: the number of
// tokens and of token types.
func (r *Run) newVocab() (cpp.Val, error) {
	o := cpp.NewObject("llama_vocab")
	nTypes := &cpp.Cell{T: ast.TU32, V: cpp.Int(0, ast.TU32)}
	model := &cpp.Cell{T: ast.TStr, V: cpp.Str("")}
	if _, err := r.getKey("tokenizer.ggml.model", model, true); err != nil {
		return cpp.Void, err
	}
	if _, err := r.getKey("tokenizer.ggml.token_type_count", nTypes, false); err != nil {
		return cpp.Void, err
	}
	n := &cpp.Cell{T: ast.TU32, V: cpp.Int(0, ast.TU32)}
	if m := model.V.S; m == "no_vocab" || m == "none" {
		if _, err := r.getKey(strings.Replace(kvNames["LLM_KV_VOCAB_SIZE"], "%s", r.Arch, 1), n, false); err != nil {
			return cpp.Void, err
		}
	} else {
		v, ok := r.lookup("tokenizer.ggml.tokens")
		if !ok {
			return cpp.Void, &cpp.Throw{Msg: "cannot find tokenizer vocab in model file\n"}
		}
		if !v.IsArray() || v.ElemType() != gguf.TypeString {
			return cpp.Void, &cpp.Throw{Msg: "invalid gguf type for tokenizer.ggml.tokens"}
		}
		n.V = cpp.Int(int64(v.Len()), ast.TU32)
	}
	o.Fields["n_tokens"] = n
	o.Fields["n_token_types"] = nTypes
	return cpp.Val{K: cpp.KObj, P: o}, nil
}
