package arch

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/ggload/ggload/ggml"
	"github.com/ggload/ggload/internal/arch/ast"
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
	v, err := r.Call(p, Void, []Val{r.model.Fields["arch"].V})
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
	ud := NewObject("llama_meta_device_get_split_state_userdata")
	ud.Fields["n_devices"] = &Cell{V: Int(int64(d.N), ast.TU64)}
	ud.Fields["model"] = &Cell{V: Val{K: KObj, P: r.model}}
	if r.hpMemo == nil {
		// kept for the next tensor: after CreateTensors the
		// hyperparameters no longer change
		r.hpMemo = map[hpKey]Val{}
	}
	r.split = sc
	defer func() { r.split = nil }()
	v, err := r.Call(p, Void, []Val{{K: KTensor, P: sc.tensor(t)}, {K: KObj, P: ud}})
	if err != nil {
		return ggml.SplitState{}, err
	}
	return splitStateOf(v, d.N)
}

// splitStateOf reads a ggml_backend_meta_split_state.
func splitStateOf(v Val, n int) (ggml.SplitState, error) {
	o, ok := v.P.(*Object)
	if v.K != KObj || !ok || o.Class != "ggml_backend_meta_split_state" {
		return ggml.SplitState{}, fmt.Errorf("arch: the split state callback returned %s", v.Describe())
	}
	st := ggml.SplitState{Axis: ggml.SplitAxis(o.Fields["axis"].V.I)}
	if !st.Axis.IsDim() && st.Axis != ggml.SplitPartial {
		return st, nil
	}
	ne, nr := o.Fields["ne"].V.P.(*Array), o.Fields["nr"].V.P.(*Array)
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
func (r *Run) splitMethod(f *Frame, name string, args []*ast.Node) (Val, error) {
	sc := r.split
	if sc == nil {
		return Void, f.Errorf("llama_model::%s outside a split state", name)
	}
	switch name {
	case "tensor_split":
		a := NewArray(ast.TF32, len(sc.d.Split), true)
		for i, x := range sc.d.Split {
			a.Cells[i].V = Val{K: KFloat, T: ast.TF32, F: float64(x)}
		}
		return Val{K: KArr, P: a}, nil
	case "get_tensor":
		vs, err := evalArgs(f, args)
		if err != nil {
			return Void, err
		}
		if len(vs) != 1 {
			return Void, f.Errorf("get_tensor with %d arguments", len(vs))
		}
		s, err := Convert(vs[0], ast.TStr)
		if err != nil {
			return Void, f.Errorf("get_tensor(%s)", vs[0].Describe())
		}
		if t, ok := sc.tensors[s.S]; ok {
			return Val{K: KTensor, P: t}, nil
		}
		if sc.d.Lookup == nil {
			return Null, nil
		}
		t, ok := sc.d.Lookup(s.S)
		if !ok {
			return Null, nil
		}
		return Val{K: KTensor, P: sc.tensor(t)}, nil
	}
	return Void, f.Errorf("llama_model::%s", name)
}

func splitBuiltins() map[string]Builtin {
	return map[string]Builtin{
		"ggml_blck_size": func(f *Frame, args []*ast.Node) (Val, error) {
			vs, err := evalArgs(f, args)
			if err != nil {
				return Void, err
			}
			if len(vs) != 1 || vs[0].K != KInt {
				return Void, f.Errorf("ggml_blck_size arguments")
			}
			t := ggml.Type(vs[0].I)
			if !t.Valid() {
				return Void, f.Errorf("ggml_blck_size of type %d", vs[0].I)
			}
			return Int(t.BlockSize(), ast.TI64), nil
		},
		"std::stoull": func(f *Frame, args []*ast.Node) (Val, error) {
			vs, err := evalArgs(f, args)
			if err != nil {
				return Void, err
			}
			if len(vs) != 1 || vs[0].K != KStr {
				return Void, f.Errorf("std::stoull arguments")
			}
			// the leading digits, after white space; none is std::invalid_argument
			s := strings.TrimLeft(vs[0].S, " \t\n")
			end := 0
			for end < len(s) && s[end] >= '0' && s[end] <= '9' {
				end++
			}
			u, err := strconv.ParseUint(s[:end], 10, 64)
			if err != nil {
				return Void, &Throw{Msg: "stoull"}
			}
			return Int(int64(u), ast.TU64), nil
		},
		"std::vector": func(f *Frame, args []*ast.Node) (Val, error) {
			vs, err := evalArgs(f, args)
			if err != nil {
				return Void, err
			}
			if len(vs) != 2 || vs[0].K != KInt {
				return Void, f.Errorf("std::vector(n, value) arguments")
			}
			a := &Array{Elem: ast.TAuto, Cells: make([]Cell, vs[0].I)}
			for i := range a.Cells {
				a.Cells[i].V = vs[1]
			}
			return Val{K: KArr, P: a}, nil
		},
	}
}

// memsetBuiltins are memset and sizeof, as the split state uses them.
func memsetBuiltins() map[string]Builtin {
	return map[string]Builtin{
		"memset": func(f *Frame, args []*ast.Node) (Val, error) {
			// memset(&x, 0, sizeof(x)) or memset(array, 0, sizeof(array)):
			// value-initializes x; the size is x's own
			if len(args) != 3 {
				return Void, f.Errorf("memset with %d arguments", len(args))
			}
			dst := args[0]
			if dst.Op == ast.OpUnary && dst.S == "&" {
				dst = dst.Kids[0]
			}
			v, err := f.Eval(dst)
			if err != nil {
				return Void, err
			}
			if z, err := f.Eval(args[1]); err != nil || z.K != KInt || z.I != 0 {
				return Void, f.Errorf("memset to other than 0")
			}
			if s := args[2]; s.Op != ast.OpCall || len(s.Kids) != 2 || s.Kids[0].S != "sizeof" || ExprString(s.Kids[1]) != ExprString(dst) {
				return Void, f.Errorf("memset of %s with a size other than its own", ExprString(dst))
			}
			return Void, zeroValue(v)
		},
		"sizeof": func(f *Frame, args []*ast.Node) (Val, error) {
			// of a scalar type; an object's size is only memset's, which
			// does not read it
			if len(args) == 1 && args[0].Op == ast.OpIdent {
				if n, ok := scalarSizes[args[0].S]; ok {
					return Int(n, ast.TU64), nil
				}
			}
			return Void, f.Errorf("sizeof(%s): only of a scalar type, or as memset's size", ExprString(args[0]))
		},
	}
}

// scalarSizes are sizeof of the scalar types the pin's code measures.
var scalarSizes = map[string]int64{"float": 4, "double": 8, "int32_t": 4, "uint32_t": 4, "int": 4, "llama_token": 4,
	"int64_t": 8, "uint64_t": 8, "size_t": 8, "int8_t": 1, "uint8_t": 1, "int16_t": 2, "uint16_t": 2}

// zeroValue sets every scalar inside a struct or array to zero.
func zeroValue(v Val) error {
	switch v.K {
	case KObj:
		for _, c := range v.P.(*Object).Fields {
			if err := zeroCell(c); err != nil {
				return err
			}
		}
	case KArr:
		a := v.P.(*Array)
		for i := range a.Cells {
			if err := zeroCell(&a.Cells[i]); err != nil {
				return err
			}
		}
	default:
		return fmt.Errorf("memset of %s", v.Describe())
	}
	return nil
}

func zeroCell(c *Cell) error {
	switch c.V.K {
	case KInt:
		c.V = Int(0, c.V.T)
	case KFloat:
		c.V = Val{K: KFloat, T: c.V.T}
	case KObj, KArr:
		return zeroValue(c.V)
	default:
		c.V = Null
	}
	return nil
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
func (r *Run) memoHparams(f *Frame, name string, recv Val, args []*ast.Node) (Val, error) {
	if len(args) > 1 {
		return r.Invoke(f, r.hparamsProgram(name), recv, args)
	}
	key := hpKey{name: name}
	var vs []Val
	if len(args) == 1 {
		a, err := f.Eval(args[0])
		if err != nil {
			return Void, err
		}
		if a.K != KInt {
			return r.Invoke(f, r.hparamsProgram(name), recv, args)
		}
		key.arg, key.n, vs = a.I, 1, []Val{a}
	}
	if v, ok := r.hpMemo[key]; ok {
		return v, nil
	}
	p := r.hparamsProgram(name)
	if p == nil {
		return Void, f.Errorf("llama_hparams has no method %s", name)
	}
	v, err := r.Call(p, recv, vs)
	if err != nil {
		return Void, err
	}
	r.hpMemo[key] = v
	return v, nil
}
