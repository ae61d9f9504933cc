// Port of llama.cpp tools/mtmd/clip.cpp (v0.5.0): clip_model_loader's
// metadata getters and the tensors the programs read.

package clip

import (
	"fmt"
	"math"
	"strings"

	"github.com/ggload/ggload/ggml/gtype"
	"github.com/ggload/ggload/gguf"
	"github.com/ggload/ggload/internal/replay/cpp"
	"github.com/ggload/ggload/internal/replay/cpp/ast"
)

// tensorVal is a tensor of the projector file as the programs see it:
// the metadata context's tensor (ggml_get_tensor of ctx_meta).
type tensorVal struct {
	info gguf.TensorInfo
}

func (t *tensorVal) Member(name string) (cpp.Val, bool) {
	switch name {
	case "name":
		return cpp.Str(t.info.Name), true
	case "type":
		return cpp.Int(int64(t.info.Type), ast.TI32), true
	case "ne":
		var d [4]int64
		copy(d[:], t.info.Shape[:])
		return cpp.Dims(ast.TI64, d), true
	case "nb":
		// ggml_new_tensor's strides: a row of blocks, then the rows
		ty := t.info.Type
		var nb [4]int64
		nb[0] = ty.TypeSize()
		nb[1] = nb[0] * (t.info.Shape[0] / max(ty.BlockSize(), 1))
		for i := 2; i < 4; i++ {
			nb[i] = nb[i-1] * t.info.Shape[i-1]
		}
		return cpp.Dims(ast.TU64, nb), true
	}
	return cpp.Void, false
}

func (t *tensorVal) Describe() string { return "tensor " + t.info.Name }

func run(f *cpp.Frame) *Run { return f.I.Host.(*Run) }

func evalArgs(f *cpp.Frame, args []*ast.Node, n int, name string) ([]cpp.Val, error) {
	vs, err := cpp.EvalArgs(f, args)
	if err != nil {
		return nil, err
	}
	if len(vs) < n {
		return nil, f.Errorf("%s with %d arguments", name, len(vs))
	}
	return vs, nil
}

// index is a tensor index argument, checked against the file.
func (r *Run) index(f *cpp.Frame, v cpp.Val, name string) (*gguf.TensorInfo, error) {
	if v.K != cpp.KInt || v.I < 0 || v.I >= int64(len(r.f.Tensors)) {
		return nil, &cpp.Abort{Msg: fmt.Sprintf("%s: tensor index %s out of range", name, v.Describe()), Where: f.Fn}
	}
	return &r.f.Tensors[v.I], nil
}

func (r *Run) tensorIndex(name string) int {
	for i := range r.f.Tensors {
		if r.f.Tensors[i].Name == name {
			return i
		}
	}
	return -1
}

var builtins = map[string]cpp.Builtin{
	"string_format": cpp.Format,
	"clip_projector_type_from_string": func(f *cpp.Frame, args []*ast.Node) (cpp.Val, error) {
		vs, err := evalArgs(f, args, 1, "clip_projector_type_from_string")
		if err != nil {
			return cpp.Void, err
		}
		for _, p := range projectorNames {
			if p[1] == vs[0].S {
				return cpp.Int(enumConsts[p[0]], ast.TI32), nil
			}
		}
		return cpp.Int(enumConsts["PROJECTOR_TYPE_UNKNOWN"], ast.TI32), nil
	},
	"open_ifstream_binary": func(f *cpp.Frame, args []*ast.Node) (cpp.Val, error) { return handle("fin"), nil },
	"string_replace_all": func(f *cpp.Frame, args []*ast.Node) (cpp.Val, error) {
		if len(args) != 3 {
			return cpp.Void, f.Errorf("string_replace_all arguments")
		}
		c, err := f.Ref(args[0])
		if err != nil {
			return cpp.Void, err
		}
		vs, err := evalArgs(f, args[1:], 2, "string_replace_all")
		if err != nil {
			return cpp.Void, err
		}
		if vs[0].S == "" {
			return cpp.Void, nil
		}
		return cpp.Void, c.Set(cpp.Str(strings.ReplaceAll(c.V.S, vs[0].S, vs[1].S)))
	},
	"string_ends_with": func(f *cpp.Frame, args []*ast.Node) (cpp.Val, error) {
		vs, err := evalArgs(f, args, 2, "string_ends_with")
		if err != nil {
			return cpp.Void, err
		}
		return cpp.Bool(strings.HasSuffix(vs[0].S, vs[1].S)), nil
	},
	"gguf_get_n_tensors": func(f *cpp.Frame, args []*ast.Node) (cpp.Val, error) {
		return cpp.Int(int64(len(run(f).f.Tensors)), ast.TI64), nil
	},
	"gguf_get_tensor_name": func(f *cpp.Frame, args []*ast.Node) (cpp.Val, error) {
		vs, err := evalArgs(f, args, 2, "gguf_get_tensor_name")
		if err != nil {
			return cpp.Void, err
		}
		t, err := run(f).index(f, vs[1], "gguf_get_tensor_name")
		if err != nil {
			return cpp.Void, err
		}
		return cpp.Str(t.Name), nil
	},
	"gguf_get_data_offset": func(f *cpp.Frame, args []*ast.Node) (cpp.Val, error) {
		return cpp.Int(run(f).f.DataOffset, ast.TU64), nil
	},
	"gguf_get_tensor_offset": func(f *cpp.Frame, args []*ast.Node) (cpp.Val, error) {
		vs, err := evalArgs(f, args, 2, "gguf_get_tensor_offset")
		if err != nil {
			return cpp.Void, err
		}
		t, err := run(f).index(f, vs[1], "gguf_get_tensor_offset")
		if err != nil {
			return cpp.Void, err
		}
		return cpp.Int(int64(t.Offset), ast.TU64), nil
	},
	"gguf_find_tensor": func(f *cpp.Frame, args []*ast.Node) (cpp.Val, error) {
		vs, err := evalArgs(f, args, 2, "gguf_find_tensor")
		if err != nil {
			return cpp.Void, err
		}
		return cpp.Int(int64(run(f).tensorIndex(vs[1].S)), ast.TI64), nil
	},
	"gguf_get_tensor_type": func(f *cpp.Frame, args []*ast.Node) (cpp.Val, error) {
		vs, err := evalArgs(f, args, 2, "gguf_get_tensor_type")
		if err != nil {
			return cpp.Void, err
		}
		t, err := run(f).index(f, vs[1], "gguf_get_tensor_type")
		if err != nil {
			return cpp.Void, err
		}
		return cpp.Int(int64(t.Type), ast.TI32), nil
	},
	"gguf_get_tensor_size": func(f *cpp.Frame, args []*ast.Node) (cpp.Val, error) {
		vs, err := evalArgs(f, args, 2, "gguf_get_tensor_size")
		if err != nil {
			return cpp.Void, err
		}
		t, err := run(f).index(f, vs[1], "gguf_get_tensor_size")
		if err != nil {
			return cpp.Void, err
		}
		return cpp.Int(t.Size, ast.TU64), nil
	},
	"ggml_type_name": func(f *cpp.Frame, args []*ast.Node) (cpp.Val, error) {
		vs, err := evalArgs(f, args, 1, "ggml_type_name")
		if err != nil {
			return cpp.Void, err
		}
		return cpp.Str(gtype.Type(vs[0].I).String()), nil
	},
	"ggml_tensor_overhead": func(f *cpp.Frame, args []*ast.Node) (cpp.Val, error) {
		return cpp.Int(368, ast.TU64), nil
	},
	"ggml_get_tensor": func(f *cpp.Frame, args []*ast.Node) (cpp.Val, error) {
		vs, err := evalArgs(f, args, 2, "ggml_get_tensor")
		if err != nil {
			return cpp.Void, err
		}
		r := run(f)
		i := r.tensorIndex(vs[1].S)
		if i < 0 {
			// null, naming the tensor the file lacks
			return cpp.Val{K: cpp.KNull, S: "the absent tensor " + vs[1].S}, nil
		}
		return cpp.Val{K: cpp.KTensor, P: &tensorVal{info: r.f.Tensors[i]}}, nil
	},
	// the weight context's copy of a tensor: what clip loads
	"ggml_dup_tensor": func(f *cpp.Frame, args []*ast.Node) (cpp.Val, error) {
		vs, err := evalArgs(f, args, 2, "ggml_dup_tensor")
		if err != nil {
			return cpp.Void, err
		}
		t, ok := vs[1].P.(*tensorVal)
		if vs[1].K != cpp.KTensor || !ok {
			return cpp.Void, f.Errorf("ggml_dup_tensor of %s", vs[1].Describe())
		}
		r := run(f)
		r.loaded = append(r.loaded, t.info)
		return vs[1], nil
	},
	// std::find(first, last, value) over a vector: the iterator of the
	// first element equal to value, else last
	"std::find": func(f *cpp.Frame, args []*ast.Node) (cpp.Val, error) {
		vs, err := evalArgs(f, args, 3, "std::find")
		if err != nil {
			return cpp.Void, err
		}
		a, ok := vs[0].P.(*cpp.Array)
		if vs[0].K != cpp.KIter || vs[1].K != cpp.KIter || !ok || vs[0].P != vs[1].P || vs[0].I < 0 || vs[1].I > int64(len(a.Cells)) {
			return cpp.Void, f.Errorf("std::find over %s and %s", vs[0].Describe(), vs[1].Describe())
		}
		for i := vs[0].I; i < vs[1].I; i++ {
			if cpp.Same(a.Cells[i].V, vs[2]) {
				return cpp.Val{K: cpp.KIter, P: a, I: i}, nil
			}
		}
		return vs[1], nil
	},
	// CLIP_ALIGN(x, n): x rounded up to a multiple of n
	"CLIP_ALIGN": func(f *cpp.Frame, args []*ast.Node) (cpp.Val, error) {
		vs, err := evalArgs(f, args, 2, "CLIP_ALIGN")
		if err != nil {
			return cpp.Void, err
		}
		if vs[1].I == 0 {
			return cpp.Void, &cpp.Abort{Msg: "CLIP_ALIGN: division by zero", Where: f.Fn}
		}
		return cpp.Arith("*", cpp.Int((vs[0].I+vs[1].I-1)/vs[1].I, vs[0].T), vs[1])
	},
	// GGML_PAD(x, n): x rounded up to a multiple of n, a power of two
	"GGML_PAD": func(f *cpp.Frame, args []*ast.Node) (cpp.Val, error) {
		vs, err := evalArgs(f, args, 2, "GGML_PAD")
		if err != nil {
			return cpp.Void, err
		}
		return cpp.Int((vs[0].I+vs[1].I-1)&^(vs[1].I-1), cpp.Common(vs[0].T, vs[1].T)), nil
	},
	"sqrt": func(f *cpp.Frame, args []*ast.Node) (cpp.Val, error) {
		vs, err := evalArgs(f, args, 1, "sqrt")
		if err != nil {
			return cpp.Void, err
		}
		return cpp.Val{K: cpp.KFloat, T: ast.TF64, F: math.Sqrt(vs[0].Float())}, nil
	},
	"ggml_set_name": cpp.Nop,
	"ggml_nbytes": func(f *cpp.Frame, args []*ast.Node) (cpp.Val, error) {
		vs, err := evalArgs(f, args, 1, "ggml_nbytes")
		if err != nil {
			return cpp.Void, err
		}
		t, ok := vs[0].P.(*tensorVal)
		if vs[0].K != cpp.KTensor || !ok {
			return cpp.Void, f.Errorf("ggml_nbytes of %s", vs[0].Describe())
		}
		return cpp.Int(t.info.Size, ast.TU64), nil
	},
	"ggml_backend_get_device":              func(f *cpp.Frame, args []*ast.Node) (cpp.Val, error) { return cpp.Str("device"), nil },
	"ggml_backend_get_default_buffer_type": func(f *cpp.Frame, args []*ast.Node) (cpp.Val, error) { return handle("buft"), nil },
	"ggml_backend_alloc_ctx_tensors_from_buft": func(f *cpp.Frame, args []*ast.Node) (cpp.Val, error) {
		return handle("buffer"), nil
	},
	"ggml_backend_buffer_set_usage": cpp.Nop,
	"ggml_backend_buft_is_host":     func(f *cpp.Frame, args []*ast.Node) (cpp.Val, error) { return cpp.True, nil },
	"ggml_backend_tensor_set":       cpp.Nop,
	"progress_callback": func(f *cpp.Frame, args []*ast.Node) (cpp.Val, error) {
		return cpp.True, nil
	},
}

func init() {
	for name := range loaderGetters {
		builtins[name] = func(f *cpp.Frame, args []*ast.Node) (cpp.Val, error) { return run(f).getter(f, name, args) }
	}
}

// getter is clip_model_loader's get_bool, get_i32, get_u32, get_f32,
// get_string, get_arr_f32 and get_arr_int: a metadata value into a
// variable, a missing required key thrown, a value of another type
// refused as gguf's accessors assert.
func (r *Run) getter(f *cpp.Frame, name string, args []*ast.Node) (cpp.Val, error) {
	if len(args) < 2 || len(args) > 3 {
		return cpp.Void, f.Errorf("%s with %d arguments", name, len(args))
	}
	k, err := f.Eval(args[0])
	if err != nil {
		return cpp.Void, err
	}
	key := k.S
	out, err := f.Ref(args[1])
	if err != nil {
		return cpp.Void, err
	}
	required := true
	if len(args) == 3 {
		v, err := f.Eval(args[2])
		if err != nil {
			return cpp.Void, err
		}
		required = v.Truthy()
	}
	v, ok := r.f.Lookup(key)
	if !ok {
		if required {
			return cpp.Void, &cpp.Throw{Msg: "Key not found: " + key}
		}
		return cpp.Void, nil
	}
	wrong := func(want gguf.ValueType) error {
		return &cpp.Abort{Msg: fmt.Sprintf("%s: key %s is of type %s, not %s", name, key, v.TypeName(), want), Where: f.Fn}
	}
	scalar := func(want gguf.ValueType) error {
		if v.IsArray() || v.Kind() != want {
			return wrong(want)
		}
		return nil
	}
	switch name {
	case "get_bool":
		if err := scalar(gguf.TypeBool); err != nil {
			return cpp.Void, err
		}
		b, _ := v.Bool()
		return cpp.Void, out.Set(cpp.Bool(b))
	case "get_i32":
		if err := scalar(gguf.TypeInt32); err != nil {
			return cpp.Void, err
		}
		i, _ := v.Int()
		return cpp.Void, out.Set(cpp.Int(i, ast.TI32))
	case "get_u32":
		if err := scalar(gguf.TypeUint32); err != nil {
			return cpp.Void, err
		}
		u, _ := v.Uint()
		if u > math.MaxInt32 {
			return cpp.Void, &cpp.Throw{Msg: fmt.Sprintf("get_u32: value %d for key '%s' exceeds INT32_MAX\n", u, key)}
		}
		return cpp.Void, out.Set(cpp.Int(int64(u), ast.TI32))
	case "get_f32":
		if err := scalar(gguf.TypeFloat32); err != nil {
			return cpp.Void, err
		}
		x, _ := v.Float()
		return cpp.Void, out.Set(cpp.Val{K: cpp.KFloat, T: ast.TF32, F: x})
	case "get_string":
		if err := scalar(gguf.TypeString); err != nil {
			return cpp.Void, err
		}
		s, _ := v.Str()
		// std::string of a C string: up to its first NUL
		if i := strings.IndexByte(s, 0); i >= 0 {
			s = s[:i]
		}
		return cpp.Void, out.Set(cpp.Str(s))
	case "get_arr_f32", "get_arr_int":
		want, wantName := gguf.TypeFloat32, "GGUF_TYPE_FLOAT32"
		if name == "get_arr_int" {
			want, wantName = gguf.TypeInt32, "GGUF_TYPE_INT32"
		}
		if !v.IsArray() {
			return cpp.Void, &cpp.Throw{Msg: fmt.Sprintf("%s: key '%s' is not an array\n", name, key)}
		}
		if v.ElemType() != want {
			return cpp.Void, &cpp.Throw{Msg: fmt.Sprintf("%s: array '%s' has type %d, expected %d (%s)\n", name, key, v.ElemType(), want, wantName)}
		}
		a, ok := out.V.P.(*cpp.Array)
		if out.V.K != cpp.KArr || !ok {
			return cpp.Void, f.Errorf("%s into %s", name, out.V.Describe())
		}
		var vals []cpp.Val
		if want == gguf.TypeFloat32 {
			xs, err := v.Floats()
			if err != nil {
				return cpp.Void, &cpp.Throw{Msg: fmt.Sprintf("%s: %s: %v", name, key, err)}
			}
			for _, x := range xs {
				vals = append(vals, cpp.Val{K: cpp.KFloat, T: ast.TF32, F: x})
			}
		} else {
			is, err := v.Ints()
			if err != nil {
				return cpp.Void, &cpp.Throw{Msg: fmt.Sprintf("%s: %s: %v", name, key, err)}
			}
			for _, i := range is {
				vals = append(vals, cpp.Int(i, ast.TI32))
			}
		}
		if err := a.Resize(int64(len(vals))); err != nil {
			return cpp.Void, err
		}
		for i, x := range vals {
			if err := a.Cells[i].Set(x); err != nil {
				return cpp.Void, err
			}
		}
		return cpp.Void, nil
	}
	return cpp.Void, f.Errorf("getter %s", name)
}
