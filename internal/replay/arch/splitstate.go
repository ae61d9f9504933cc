package arch

import (
	"fmt"

	"github.com/ggload/ggload/ggml"
	"github.com/ggload/ggload/internal/replay/cpp"
	"github.com/ggload/ggload/internal/replay/cpp/ast"
)

// Split mode tensor, replayed: llm_arch_supports_sm_tensor says which
// architectures take it, and llama_meta_device_get_split_state, the
// callback llama.cpp gives ggml's meta device, says per tensor how its
// slices lie over the devices. Both are the pin's own code (programs.sx);
// this file gives them what they read: the tensor, the model's other
// tensors by name, the device count and the tensor split, and the few
// standard-library calls they make (std::regex_match, std::lcm, ...).

// SupportsTensorSplit replays llm_arch_supports_sm_tensor for the model's
// architecture.
func (r *Run) SupportsTensorSplit() (bool, error) {
	if !r.Exact() {
		return false, fmt.Errorf("arch: %s: llama.cpp %s does not know the architecture", r.Arch, Pin)
	}
	p, err := r.program("llm_arch_supports_sm_tensor")
	if err != nil {
		return false, err
	}
	v, err := r.Call(p, cpp.Void, []cpp.Val{r.model.Fields["arch"].V})
	if err != nil {
		return false, err
	}
	return v.Truthy(), nil
}

// SplitDevices is what llama_meta_device_get_split_state reads besides the
// tensor: the meta device's device count, the model's tensor split (its
// 16 floats; all zero splits evenly) and llama_model::get_tensor.
type SplitDevices struct {
	N      int
	Split  [16]float32
	Lookup func(name string) (Tensor, bool)
}

// splitCtx is one SplitState call's view of the model.
type splitCtx struct {
	d       SplitDevices
	tensors map[string]*Tensor // one value per name, so that pointers compare as in C++
}

func (s *splitCtx) tensor(t Tensor) *Tensor {
	if p, ok := s.tensors[t.Name]; ok {
		return p
	}
	p := &t
	s.tensors[t.Name] = p
	return p
}

// SplitState replays llama_meta_device_get_split_state for tensor t: the
// split axis, and for a split along a dimension each segment's slice
// lengths per device and its repeat count. A failed GGML_ASSERT, where
// llama.cpp would abort, is an Abort.
func (r *Run) SplitState(t Tensor, d SplitDevices) (ggml.SplitState, error) {
	if d.N < 1 || d.N > int(enumConsts["GGML_BACKEND_META_MAX_DEVICES"]) {
		return ggml.SplitState{}, fmt.Errorf("arch: split state over %d devices", d.N)
	}
	p, err := r.program("llama_meta_device_get_split_state")
	if err != nil {
		return ggml.SplitState{}, err
	}
	sc := &splitCtx{d: d, tensors: map[string]*Tensor{}}
	ud := cpp.NewObject("llama_meta_device_get_split_state_userdata")
	ud.Fields["n_devices"] = &cpp.Cell{V: cpp.Int(int64(d.N), ast.TU64)}
	ud.Fields["model"] = &cpp.Cell{V: cpp.Val{K: cpp.KObj, P: r.model}}
	if r.hpMemo == nil {
		// kept for the next tensor: after CreateTensors the
		// hyperparameters no longer change
		r.hpMemo = map[hpKey]cpp.Val{}
	}
	r.split = sc
	defer func() { r.split = nil }()
	v, err := r.Call(p, cpp.Void, []cpp.Val{{K: cpp.KTensor, P: sc.tensor(t)}, {K: cpp.KObj, P: ud}})
	if err != nil {
		return ggml.SplitState{}, err
	}
	return splitStateOf(v, d.N)
}

// splitStateOf reads a ggml_backend_meta_split_state.
func splitStateOf(v cpp.Val, n int) (ggml.SplitState, error) {
	o, ok := v.P.(*cpp.Object)
	if v.K != cpp.KObj || !ok || o.Class != "ggml_backend_meta_split_state" {
		return ggml.SplitState{}, fmt.Errorf("arch: the split state callback returned %s", v.Describe())
	}
	st := ggml.SplitState{Axis: ggml.SplitAxis(o.Fields["axis"].V.I)}
	if !st.Axis.IsDim() && st.Axis != ggml.SplitPartial {
		return st, nil
	}
	ne, nr := o.Fields["ne"].V.P.(*cpp.Array), o.Fields["nr"].V.P.(*cpp.Array)
	segs := int(o.Fields["n_segments"].V.I)
	if segs < 1 || segs > len(nr.Cells) || segs*n > len(ne.Cells) {
		return ggml.SplitState{}, fmt.Errorf("arch: split state with %d segments over %d devices", segs, n)
	}
	for is := range segs {
		lengths := make([]int64, n)
		for j := range lengths {
			lengths[j] = ne.Cells[is*n+j].V.I
		}
		st.Segments = append(st.Segments, ggml.SplitSegment{Lengths: lengths, Repeat: uint32(nr.Cells[is].V.I)})
	}
	return st, nil
}

// splitMethod answers llama_model::get_tensor and tensor_split in a
// SplitState replay.
func (r *Run) splitMethod(f *cpp.Frame, name string, args []*ast.Node) (cpp.Val, error) {
	sc := r.split
	if sc == nil {
		return cpp.Void, f.Errorf("llama_model::%s outside a split state", name)
	}
	switch name {
	case "tensor_split":
		a := cpp.NewArray(ast.TF32, len(sc.d.Split), true)
		for i, x := range sc.d.Split {
			a.Cells[i].V = cpp.Val{K: cpp.KFloat, T: ast.TF32, F: float64(x)}
		}
		return cpp.Val{K: cpp.KArr, P: a}, nil
	case "get_tensor":
		vs, err := cpp.EvalArgs(f, args)
		if err != nil {
			return cpp.Void, err
		}
		if len(vs) != 1 {
			return cpp.Void, f.Errorf("get_tensor with %d arguments", len(vs))
		}
		s, err := cpp.Convert(vs[0], ast.TStr)
		if err != nil {
			return cpp.Void, f.Errorf("get_tensor(%s)", vs[0].Describe())
		}
		if t, ok := sc.tensors[s.S]; ok {
			return cpp.Val{K: cpp.KTensor, P: t}, nil
		}
		if sc.d.Lookup == nil {
			return cpp.Null, nil
		}
		t, ok := sc.d.Lookup(s.S)
		if !ok {
			return cpp.Null, nil
		}
		return cpp.Val{K: cpp.KTensor, P: sc.tensor(t)}, nil
	}
	return cpp.Void, f.Errorf("llama_model::%s", name)
}

func splitBuiltins() map[string]cpp.Builtin {
	return map[string]cpp.Builtin{
		"ggml_blck_size": func(f *cpp.Frame, args []*ast.Node) (cpp.Val, error) {
			vs, err := cpp.EvalArgs(f, args)
			if err != nil {
				return cpp.Void, err
			}
			if len(vs) != 1 || vs[0].K != cpp.KInt {
				return cpp.Void, f.Errorf("ggml_blck_size arguments")
			}
			t := ggml.Type(vs[0].I)
			if !t.Valid() {
				return cpp.Void, f.Errorf("ggml_blck_size of type %d", vs[0].I)
			}
			return cpp.Int(t.BlockSize(), ast.TI64), nil
		},
	}
}

// hpKey is a llama_hparams method call of at most one integer argument.
type hpKey struct {
	name string
	arg  int64
	n    int
}

// memoHparams calls a llama_hparams method once per arguments: the split
// state asks every layer's kind for every tensor (get_il_eff), and the
// hyperparameters do not change under it.
func (r *Run) memoHparams(f *cpp.Frame, name string, recv cpp.Val, args []*ast.Node) (cpp.Val, error) {
	if len(args) > 1 {
		return r.Invoke(f, r.hparamsProgram(name), recv, args)
	}
	key := hpKey{name: name}
	var vs []cpp.Val
	if len(args) == 1 {
		a, err := f.Eval(args[0])
		if err != nil {
			return cpp.Void, err
		}
		if a.K != cpp.KInt {
			return r.Invoke(f, r.hparamsProgram(name), recv, args)
		}
		key.arg, key.n, vs = a.I, 1, []cpp.Val{a}
	}
	if v, ok := r.hpMemo[key]; ok {
		return v, nil
	}
	p := r.hparamsProgram(name)
	if p == nil {
		return cpp.Void, f.Errorf("llama_hparams has no method %s", name)
	}
	v, err := r.Call(p, recv, vs)
	if err != nil {
		return cpp.Void, err
	}
	r.hpMemo[key] = v
	return v, nil
}
