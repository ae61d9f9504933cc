// Port of llama.cpp ggml/src/ggml.c (v0.5.0): the checks of the ggml
// functions the graph programs call.

package graph

import (
	"errors"
	"fmt"

	"github.com/ggload/ggload/ggml/ops"
	"github.com/ggload/ggload/internal/replay/arch"
	"github.com/ggload/ggload/internal/replay/cpp"
	"github.com/ggload/ggload/internal/replay/cpp/ast"
)

// The ggml functions the graph programs call. Each is package ops' op of
// the same name, which checks its arguments as ggml.c checks them: a
// GGML_ASSERT that would fail is an Abort here, worded as ggml words it,
// and the native call is never made. What is the evaluator's is the
// arguments' conversion from its values, and the null tensors a program
// passes (an Abort too: ggml would dereference them).

// gcall is one call's evaluated arguments.
type gcall struct {
	f  *cpp.Frame
	fn string
	v  []cpp.Val
	g  OpSession
}

// OpSession is what the op builtins (OpBuiltins) build with, the
// interpreter's Session while they run: the op library, and the native
// tensor of a value (a host's tensor made native; null: nil).
type OpSession interface {
	OpLib() *ops.Lib
	NativeTensor(f *cpp.Frame, v cpp.Val) (*ops.Tensor, error)
}

// OpLib is the session's op library.
func (g *graphState) OpLib() *ops.Lib { return g.lib }

// NativeTensor is the native tensor of a value: a weight's made on first
// use.
func (g *graphState) NativeTensor(f *cpp.Frame, v cpp.Val) (*ops.Tensor, error) {
	return g.native(f, v)
}

// OpBuiltins are ggml's functions as builtins of the evaluator, for
// another library's programs (the projector's graphs): they build with
// the OpSession the interpreter's Session is.
func OpBuiltins() map[string]cpp.Builtin { return ggmlBuiltins() }

func (c *gcall) lib() *ops.Lib { return c.g.OpLib() }

// abort is an op's failed check, as the Abort it is for llama.cpp.
func (c *gcall) abort(err error) error {
	var a *ops.AssertError
	if errors.As(err, &a) {
		return &cpp.Abort{Msg: a.Error(), Where: c.fn}
	}
	return err
}

// result is an op's tensor, or its failed check.
func (c *gcall) result(t *ops.Tensor, err error) (cpp.Val, error) {
	if err != nil {
		return cpp.Void, c.abort(err)
	}
	return tval(t), nil
}

func (c *gcall) ctx(i int) (*ops.Context, error) {
	if n, ok := c.v[i].P.(*ops.Context); ok && c.v[i].K == cpp.KNative {
		return n, nil
	}
	return nil, c.f.Errorf("%s: argument %d is %s, not a ggml context", c.fn, i, c.v[i].Describe())
}

func (c *gcall) graph(i int) (*ops.Graph, error) {
	if n, ok := c.v[i].P.(*ops.Graph); ok && c.v[i].K == cpp.KNative {
		return n, nil
	}
	return nil, c.f.Errorf("%s: argument %d is %s, not a graph", c.fn, i, c.v[i].Describe())
}

// ctxTensors is the context argument 0 and the n tensor arguments after
// it.
func (c *gcall) ctxTensors(n int) (*ops.Context, []*ops.Tensor, error) {
	ctx, err := c.ctx(0)
	if err != nil {
		return nil, nil, err
	}
	ts := make([]*ops.Tensor, n)
	for i := range ts {
		if ts[i], err = c.t(i + 1); err != nil {
			return nil, nil, err
		}
	}
	return ctx, ts, nil
}

// opt is a tensor argument that may be null.
func (c *gcall) opt(i int) (*ops.Tensor, error) {
	if i >= len(c.v) {
		return nil, nil
	}
	return c.g.NativeTensor(c.f, c.v[i])
}

// t is a tensor argument: ggml dereferences it.
func (c *gcall) t(i int) (*ops.Tensor, error) {
	t, err := c.opt(i)
	if err == nil && t == nil {
		err = &cpp.Abort{Msg: fmt.Sprintf("null tensor passed to %s (argument %d)", c.fn, i), Where: c.f.Fn}
	}
	return t, err
}

// t0 is the tensor a value names, not null.
func (c *gcall) t0(v cpp.Val) (*ops.Tensor, error) {
	t, err := c.g.NativeTensor(c.f, v)
	if err == nil && t == nil {
		err = &cpp.Abort{Msg: "null tensor passed to " + c.fn, Where: c.f.Fn}
	}
	return t, err
}

func (c *gcall) i(i int) int64 {
	v, _ := cpp.Convert(c.v[i], ast.TI64)
	return v.I
}

func (c *gcall) i32(i int) int32 { return int32(c.i(i)) }

func (c *gcall) f32(i int) float32 {
	v, _ := cpp.Convert(c.v[i], ast.TF32)
	return float32(v.F)
}

// ne is the n integer arguments from i as a shape, 1 beyond them.
func (c *gcall) ne(i, n int) [4]int64 {
	ne := [4]int64{1, 1, 1, 1}
	for k := 0; k < n; k++ {
		ne[k] = c.i(i + k)
	}
	return ne
}

// native is the tensor a value names: a native tensor, a model weight
// (made on the weights' context on first use), or null.
func (g *graphState) native(f *cpp.Frame, v cpp.Val) (*ops.Tensor, error) {
	if t, ok := Native(v); ok {
		return t, nil
	}
	if v.K == cpp.KTensor {
		return g.weight(f, v.P.(*arch.Tensor))
	}
	return nil, f.Errorf("%s is no tensor", v.Describe())
}

// Native is the tensor of a value that holds one already: a native
// tensor, or nil for null. ok is false for any other value (a weight of
// the file, made on first use, is the session's to make).
func Native(v cpp.Val) (t *ops.Tensor, ok bool) {
	switch v.K {
	case cpp.KNull:
		return nil, true
	case cpp.KNative:
		t, ok = v.P.(*ops.Tensor)
		return t, ok
	}
	return nil, false
}

// NewWeight makes the tensor of a weight named name, of type typ and
// shape ne, on the weights' context wctx, with as many dimensions as its
// shape has before the trailing ones, as the model's loader creates it.
func NewWeight(l *ops.Lib, wctx *ops.Context, name string, typ int32, ne [4]int64) (*ops.Tensor, error) {
	if !l.Room(wctx, 1) {
		return nil, fmt.Errorf("the weights' context is full")
	}
	nd := 4
	for nd > 1 && ne[nd-1] == 1 {
		nd--
	}
	t, err := l.NewTensor(wctx, typ, nd, ne)
	if err != nil || t == nil {
		return nil, fmt.Errorf("ggml_new_tensor of weight %s: %v", name, err)
	}
	l.SetName(t, name)
	return t, nil
}

// weight is the session's tensor of a model weight, made on first use.
func (g *graphState) weight(f *cpp.Frame, w *arch.Tensor) (*ops.Tensor, error) {
	if t, ok := g.weights[w]; ok {
		return t, nil
	}
	if real := g.at.WeightTensor; real != nil {
		t := real(w)
		if t == nil {
			return nil, f.Errorf("the weight %s is not loaded", w.Name)
		}
		g.weights[w] = t
		return t, nil
	}
	t, err := NewWeight(g.lib, g.wctx, w.Name, int32(w.Type), w.Ne)
	if err != nil {
		return nil, f.Errorf("%v", err)
	}
	var bt ops.Buft
	if g.at.Weight != nil {
		bt = g.at.Weight(w)
	}
	if err := g.place(t, bt, true); err != nil {
		return nil, err
	}
	g.weights[w] = t
	return t, nil
}

func tval(t *ops.Tensor) cpp.Val {
	if t == nil {
		return cpp.Null
	}
	return cpp.Val{K: cpp.KNative, P: t}
}

type opFn func(c *gcall) (cpp.Val, error)

// tensorOp registers name(ctx, t1, ..., tnt, ...) of n arguments (any
// number where n < 0) whose first nt after the context are tensors; build
// makes the result from them and the remaining arguments.
func tensorOp(out map[string]cpp.Builtin, name string, n, nt int, build func(c *gcall, ctx *ops.Context, ts []*ops.Tensor) (*ops.Tensor, error)) {
	op(out, name, n, func(c *gcall) (cpp.Val, error) {
		ctx, ts, err := c.ctxTensors(nt)
		if err != nil {
			return cpp.Void, err
		}
		return c.result(build(c, ctx, ts))
	})
}

// op registers a ggml function of n arguments (-1: any).
func op(out map[string]cpp.Builtin, name string, n int, fn opFn) {
	out[name] = func(f *cpp.Frame, args []*ast.Node) (cpp.Val, error) {
		s, _ := f.I.Session.(OpSession)
		if s == nil {
			return cpp.Void, f.Errorf("%s outside BuildGraph", name)
		}
		if n >= 0 && len(args) != n {
			return cpp.Void, f.Errorf("%s: %d arguments, not %d", name, len(args), n)
		}
		vs, err := cpp.EvalArgs(f, args)
		if err != nil {
			return cpp.Void, err
		}
		return fn(&gcall{f: f, fn: name, v: append([]cpp.Val(nil), vs...), g: s})
	}
}

// The shapes of ops, by their arguments after the context: the typed
// helpers that register most of them.
type (
	op1    func(*ops.Lib, *ops.Context, *ops.Tensor) (*ops.Tensor, error)
	op2    func(*ops.Lib, *ops.Context, *ops.Tensor, *ops.Tensor) (*ops.Tensor, error)
	op1f   func(*ops.Lib, *ops.Context, *ops.Tensor, float32) (*ops.Tensor, error)
	op2f   func(*ops.Lib, *ops.Context, *ops.Tensor, *ops.Tensor, float32) (*ops.Tensor, error)
	op1i   func(*ops.Lib, *ops.Context, *ops.Tensor, int64) (*ops.Tensor, error)
	op3    func(*ops.Lib, *ops.Context, *ops.Tensor, *ops.Tensor, *ops.Tensor) (*ops.Tensor, error)
	opNone func(*ops.Lib, *ops.Tensor, *ops.Tensor) error
)

// ggml_NAME(ctx, a)
func unary(out map[string]cpp.Builtin, name string, fn op1) {
	tensorOp(out, name, 2, 1, func(c *gcall, ctx *ops.Context, ts []*ops.Tensor) (*ops.Tensor, error) {
		return fn(c.lib(), ctx, ts[0])
	})
}

// ggml_NAME(ctx, a, b)
func binary(out map[string]cpp.Builtin, name string, fn op2) {
	tensorOp(out, name, 3, 2, func(c *gcall, ctx *ops.Context, ts []*ops.Tensor) (*ops.Tensor, error) {
		return fn(c.lib(), ctx, ts[0], ts[1])
	})
}

// ggml_NAME(ctx, a, b, c)
func ternary(out map[string]cpp.Builtin, name string, fn op3) {
	tensorOp(out, name, 4, 3, func(c *gcall, ctx *ops.Context, ts []*ops.Tensor) (*ops.Tensor, error) {
		return fn(c.lib(), ctx, ts[0], ts[1], ts[2])
	})
}

// ggml_NAME(ctx, a, x) of a float x
func unaryF(out map[string]cpp.Builtin, name string, fn op1f) {
	tensorOp(out, name, 3, 1, func(c *gcall, ctx *ops.Context, ts []*ops.Tensor) (*ops.Tensor, error) {
		return fn(c.lib(), ctx, ts[0], c.f32(2))
	})
}

// ggml_NAME(ctx, a, b, x) of a float x
func binaryF(out map[string]cpp.Builtin, name string, fn op2f) {
	tensorOp(out, name, 4, 2, func(c *gcall, ctx *ops.Context, ts []*ops.Tensor) (*ops.Tensor, error) {
		return fn(c.lib(), ctx, ts[0], ts[1], c.f32(3))
	})
}

// ggml_NAME(ctx, a, n) of an integer n
func unaryI(out map[string]cpp.Builtin, name string, fn op1i) {
	tensorOp(out, name, 3, 1, func(c *gcall, ctx *ops.Context, ts []*ops.Tensor) (*ops.Tensor, error) {
		return fn(c.lib(), ctx, ts[0], c.i(2))
	})
}

func ggmlBuiltins() map[string]cpp.Builtin {
	out := map[string]cpp.Builtin{}
	elementwiseOps(out)
	shapeOps(out)
	layoutOps(out)
	attentionOps(out)
	rowOps(out)
	attributeOps(out)
	sizeOps(out)
	graphBuildOps(out)
	linearOps(out)
	fusedOps(out)
	extraOps(out)
	clipOps(out)
	return out
}

// elementwiseOps registers the unary, binary and GLU ops.
func elementwiseOps(out map[string]cpp.Builtin) {
	for name, fn := range map[string]op1{
		"ggml_cont": (*ops.Lib).Cont, "ggml_transpose": (*ops.Lib).Transpose, "ggml_silu": (*ops.Lib).Silu,
		"ggml_gelu": (*ops.Lib).Gelu, "ggml_relu": (*ops.Lib).Relu, "ggml_tanh": (*ops.Lib).Tanh,
		"ggml_sigmoid": (*ops.Lib).Sigmoid, "ggml_sqr": (*ops.Lib).Sqr, "ggml_sqrt": (*ops.Lib).Sqrt,
		"ggml_sum_rows": (*ops.Lib).SumRows, "ggml_round": (*ops.Lib).Round, "ggml_exp": (*ops.Lib).Exp,
		"ggml_neg": (*ops.Lib).Neg, "ggml_mean": (*ops.Lib).Mean, "ggml_softplus": (*ops.Lib).Softplus,
		"ggml_abs": (*ops.Lib).Abs, "ggml_sgn": (*ops.Lib).Sgn, "ggml_soft_max": (*ops.Lib).SoftMax,
		"ggml_swiglu": (*ops.Lib).Swiglu, "ggml_geglu": (*ops.Lib).Geglu, "ggml_reglu": (*ops.Lib).Reglu,
		"ggml_argmax": (*ops.Lib).Argmax, "ggml_diag": (*ops.Lib).Diag, "ggml_cumsum": (*ops.Lib).Cumsum,
	} {
		unary(out, name, fn)
	}
	for name, fn := range map[string]op2{
		"ggml_add": (*ops.Lib).Add, "ggml_add_inplace": (*ops.Lib).AddInplace, "ggml_mul": (*ops.Lib).Mul,
		"ggml_sub": (*ops.Lib).Sub, "ggml_div": (*ops.Lib).Div, "ggml_mul_mat": (*ops.Lib).MulMat,
		"ggml_get_rows": (*ops.Lib).GetRows, "ggml_cpy": (*ops.Lib).Cpy, "ggml_repeat": (*ops.Lib).Repeat,
		"ggml_swiglu_split": (*ops.Lib).SwigluSplit, "ggml_geglu_split": (*ops.Lib).GegluSplit,
		"ggml_reglu_split": (*ops.Lib).RegluSplit, "ggml_dsv4_hc_pre": (*ops.Lib).DSV4HCPre,
	} {
		binary(out, name, fn)
	}
	for name, fn := range map[string]op3{
		"ggml_mul_mat_id": (*ops.Lib).MulMatID, "ggml_add_id": (*ops.Lib).AddID, "ggml_set_rows": (*ops.Lib).SetRows,
	} {
		ternary(out, name, fn)
	}
	for name, fn := range map[string]op1f{
		"ggml_rms_norm": (*ops.Lib).RMSNorm, "ggml_norm": (*ops.Lib).Norm, "ggml_l2_norm": (*ops.Lib).L2Norm,
		"ggml_scale": (*ops.Lib).Scale, "ggml_scale_inplace": (*ops.Lib).ScaleInplace, "ggml_fill": (*ops.Lib).Fill,
	} {
		unaryF(out, name, fn)
	}
	for name, fn := range map[string]op2f{
		"ggml_swiglu_clamp": (*ops.Lib).SwigluClamp, "ggml_dsv4_hc_pre_gated": (*ops.Lib).DSV4HCPreGated,
	} {
		binaryF(out, name, fn)
	}
	for name, fn := range map[string]op1i{
		"ggml_argsort_top_k": (*ops.Lib).ArgsortTopK, "ggml_top_k": (*ops.Lib).TopK,
	} {
		unaryI(out, name, fn)
	}
	tensorOp(out, "ggml_swiglu_oai", 5, 2, func(c *gcall, ctx *ops.Context, ts []*ops.Tensor) (*ops.Tensor, error) {
		return c.lib().SwigluOAI(ctx, ts[0], ts[1], c.f32(3), c.f32(4))
	})
	tensorOp(out, "ggml_clamp", 4, 1, func(c *gcall, ctx *ops.Context, ts []*ops.Tensor) (*ops.Tensor, error) {
		return c.lib().Clamp(ctx, ts[0], c.f32(2), c.f32(3))
	})
}

// shapeOps registers the new tensors, reshapes, views and the ops that
// only change a tensor's layout.
func shapeOps(out map[string]cpp.Builtin) {
	for nd := 1; nd <= 4; nd++ {
		op(out, fmt.Sprintf("ggml_new_tensor_%dd", nd), 2+nd, func(c *gcall) (cpp.Val, error) {
			ctx, err := c.ctx(0)
			if err != nil {
				return cpp.Void, err
			}
			return c.result(c.lib().NewTensor(ctx, c.i32(1), nd, c.ne(2, nd)))
		})
		tensorOp(out, fmt.Sprintf("ggml_reshape_%dd", nd), 2+nd, 1, func(c *gcall, ctx *ops.Context, ts []*ops.Tensor) (*ops.Tensor, error) {
			return c.lib().Reshape(ctx, ts[0], nd, c.ne(2, nd))
		})
		// ggml_view_Nd(ctx, a, ne0..ne(N-1), nb1..nb(N-1), offset)
		tensorOp(out, fmt.Sprintf("ggml_view_%dd", nd), 2+nd+(nd-1)+1, 1, func(c *gcall, ctx *ops.Context, ts []*ops.Tensor) (*ops.Tensor, error) {
			var nb [4]uintptr
			for i := 1; i < nd; i++ {
				nb[i] = uintptr(c.i(2 + nd + i - 1))
			}
			return c.lib().View(ctx, ts[0], nd, c.ne(2, nd), nb, uintptr(c.i(2+nd+nd-1)))
		})
		tensorOp(out, fmt.Sprintf("ggml_cont_%dd", nd), 2+nd, 1, func(c *gcall, ctx *ops.Context, ts []*ops.Tensor) (*ops.Tensor, error) {
			return c.lib().ContND(ctx, ts[0], nd, c.ne(2, nd))
		})
	}
	tensorOp(out, "ggml_permute", 6, 1, func(c *gcall, ctx *ops.Context, ts []*ops.Tensor) (*ops.Tensor, error) {
		return c.lib().Permute(ctx, ts[0], c.ne(2, 4))
	})
	tensorOp(out, "ggml_cast", 3, 1, func(c *gcall, ctx *ops.Context, ts []*ops.Tensor) (*ops.Tensor, error) {
		return c.lib().Cast(ctx, ts[0], c.i32(2))
	})
	tensorOp(out, "ggml_repeat_4d", 6, 1, func(c *gcall, ctx *ops.Context, ts []*ops.Tensor) (*ops.Tensor, error) {
		return c.lib().Repeat4D(ctx, ts[0], c.ne(2, 4))
	})
	tensorOp(out, "ggml_concat", 4, 2, func(c *gcall, ctx *ops.Context, ts []*ops.Tensor) (*ops.Tensor, error) {
		return c.lib().Concat(ctx, ts[0], ts[1], c.i(3))
	})
}

// layoutOps registers the convolutions, the norms with parameters and the
// other ops of a tensor and numbers.
func layoutOps(out map[string]cpp.Builtin) {
	for name, conv := range map[string]func(*ops.Lib, *ops.Context, *ops.Tensor, *ops.Tensor, int64, int64) (*ops.Tensor, error){
		"ggml_conv_1d_ph": (*ops.Lib).Conv1DPh, "ggml_conv_1d_dw_ph": (*ops.Lib).Conv1DDwPh,
	} {
		// (stride s, padding half the kernel, dilation d)
		tensorOp(out, name, 5, 2, func(c *gcall, ctx *ops.Context, ts []*ops.Tensor) (*ops.Tensor, error) {
			return conv(c.lib(), ctx, ts[0], ts[1], c.i(3), c.i(4))
		})
	}
	tensorOp(out, "ggml_group_norm", 4, 1, func(c *gcall, ctx *ops.Context, ts []*ops.Tensor) (*ops.Tensor, error) {
		return c.lib().GroupNorm(ctx, ts[0], c.i32(2), c.f32(3))
	})
	tensorOp(out, "ggml_xielu", 6, 1, func(c *gcall, ctx *ops.Context, ts []*ops.Tensor) (*ops.Tensor, error) {
		return c.lib().Xielu(ctx, ts[0], c.f32(2), c.f32(3), c.f32(4), c.f32(5))
	})
	tensorOp(out, "ggml_scale_bias", 4, 1, func(c *gcall, ctx *ops.Context, ts []*ops.Tensor) (*ops.Tensor, error) {
		return c.lib().ScaleBias(ctx, ts[0], c.f32(2), c.f32(3))
	})
}

// ropeParams are the numbers of a rope's call from argument i on: n_dims
// at nDims, mode at mode, then n_ctx_orig and the six floats.
func (c *gcall) ropeParams(nDims, mode, from int) ops.RopeParams {
	return ops.RopeParams{NDims: c.i32(nDims), Mode: c.i32(mode), NCtxOrig: c.i32(from),
		FreqBase: c.f32(from + 1), FreqScale: c.f32(from + 2), ExtFactor: c.f32(from + 3),
		AttnFactor: c.f32(from + 4), BetaFast: c.f32(from + 5), BetaSlow: c.f32(from + 6)}
}

// attentionOps registers rope, soft_max_ext and flash attention.
func attentionOps(out map[string]cpp.Builtin) {
	// ggml_rope_ext and ggml_rope_ext_back (the same rope, as ROPE_BACK)
	for _, name := range []string{"ggml_rope_ext", "ggml_rope_ext_back"} {
		tensorOp(out, name, 13, 2, func(c *gcall, ctx *ops.Context, ts []*ops.Tensor) (*ops.Tensor, error) {
			fr, err := c.opt(3)
			if err != nil {
				return nil, err
			}
			return c.lib().RopeExt(ctx, ts[0], ts[1], fr, c.ropeParams(4, 5, 6), name == "ggml_rope_ext_back")
		})
	}
	tensorOp(out, "ggml_rope_ext_inplace", 13, 2, func(c *gcall, ctx *ops.Context, ts []*ops.Tensor) (*ops.Tensor, error) {
		fr, err := c.opt(3)
		if err != nil {
			return nil, err
		}
		return c.lib().RopeExtInplace(ctx, ts[0], ts[1], fr, c.ropeParams(4, 5, 6))
	})
	tensorOp(out, "ggml_rope_multi", 14, 2, func(c *gcall, ctx *ops.Context, ts []*ops.Tensor) (*ops.Tensor, error) {
		fr, err := c.opt(3)
		if err != nil {
			return nil, err
		}
		// int sections[GGML_MROPE_SECTIONS]: four, read from the array
		var sections [4]int32
		v := c.v[5]
		if v.K == cpp.KIter {
			v = cpp.Val{K: cpp.KArr, P: v.P}
		}
		a, ok := v.P.(*cpp.Array)
		if v.K != cpp.KArr || !ok || len(a.Cells) < 4 {
			return nil, c.f.Errorf("ggml_rope_multi: sections are %s, not an array of 4", c.v[5].Describe())
		}
		for i := range sections {
			x, err := cpp.Convert(a.Cells[i].V, ast.TI32)
			if err != nil {
				return nil, err
			}
			sections[i] = int32(x.I)
		}
		return c.lib().RopeMulti(ctx, ts[0], ts[1], fr, sections, c.ropeParams(4, 6, 7))
	})
	// ggml_rope_set_offset(a, n_offs): a rope whose first n_offs
	// dimensions stay unrotated (an op parameter of the rope itself)
	op(out, "ggml_rope_set_offset", 2, func(c *gcall) (cpp.Val, error) {
		a, err := c.t(0)
		if err != nil {
			return cpp.Void, err
		}
		return c.result(c.lib().RopeSetOffset(a, c.i(1)))
	})
	tensorOp(out, "ggml_rope", 5, 2, func(c *gcall, ctx *ops.Context, ts []*ops.Tensor) (*ops.Tensor, error) {
		return c.lib().Rope(ctx, ts[0], ts[1], c.i32(3), c.i32(4))
	})
	tensorOp(out, "ggml_soft_max_ext", 5, 1, func(c *gcall, ctx *ops.Context, ts []*ops.Tensor) (*ops.Tensor, error) {
		mask, err := c.opt(2)
		if err != nil {
			return nil, err
		}
		return c.lib().SoftMaxExt(ctx, ts[0], mask, c.f32(3), c.f32(4))
	})
	tensorOp(out, "ggml_flash_attn_ext", 8, 3, func(c *gcall, ctx *ops.Context, ts []*ops.Tensor) (*ops.Tensor, error) {
		mask, err := c.opt(4)
		if err != nil {
			return nil, err
		}
		return c.lib().FlashAttnExt(ctx, ts[0], ts[1], ts[2], mask, c.f32(5), c.f32(6), c.f32(7))
	})
}

// rowOps registers the ops that write into a tensor and the pads.
func rowOps(out map[string]cpp.Builtin) {
	tensorOp(out, "ggml_set_1d", 4, 2, func(c *gcall, ctx *ops.Context, ts []*ops.Tensor) (*ops.Tensor, error) {
		return c.lib().Set1D(ctx, ts[0], ts[1], c.i(3))
	})
	// ggml_set_inplace(ctx, a, b, nb1, nb2, nb3, offset)
	tensorOp(out, "ggml_set_inplace", 7, 2, func(c *gcall, ctx *ops.Context, ts []*ops.Tensor) (*ops.Tensor, error) {
		return c.lib().SetInplace(ctx, ts[0], ts[1], uintptr(c.i(3)), uintptr(c.i(4)), uintptr(c.i(5)), c.i(6))
	})
	tensorOp(out, "ggml_pad", 6, 1, func(c *gcall, ctx *ops.Context, ts []*ops.Tensor) (*ops.Tensor, error) {
		return c.lib().Pad(ctx, ts[0], [4]int32{c.i32(2), c.i32(3), c.i32(4), c.i32(5)})
	})
	tensorOp(out, "ggml_pad_ext", 10, 1, func(c *gcall, ctx *ops.Context, ts []*ops.Tensor) (*ops.Tensor, error) {
		var p [8]int32
		for i := range p {
			p[i] = c.i32(2 + i)
		}
		return c.lib().PadExt(ctx, ts[0], p)
	})
}

// attributeOps registers the ops on a tensor's flags, name and hints.
func attributeOps(out map[string]cpp.Builtin) {
	for name, set := range map[string]func(*ops.Lib, *ops.Tensor){"ggml_set_input": (*ops.Lib).SetInput, "ggml_set_output": (*ops.Lib).SetOutput} {
		op(out, name, 1, func(c *gcall) (cpp.Val, error) {
			t, err := c.t(0)
			if err == nil {
				set(c.lib(), t)
			}
			return cpp.Void, err
		})
	}
	op(out, "ggml_set_name", 2, func(c *gcall) (cpp.Val, error) {
		t, err := c.t(0)
		if err != nil {
			return cpp.Void, err
		}
		s, err := cpp.Convert(c.v[1], ast.TStr)
		if err != nil {
			return cpp.Void, err
		}
		return tval(c.lib().SetName(t, s.S)), nil
	})
	op(out, "ggml_format_name", -1, func(c *gcall) (cpp.Val, error) {
		t, err := c.t(0)
		if err != nil {
			return cpp.Void, err
		}
		s, err := cpp.Convert(c.v[1], ast.TStr)
		if err != nil {
			return cpp.Void, err
		}
		return tval(c.lib().SetName(t, cpp.CFormat(s.S, c.v[2:]))), nil
	})
	op(out, "ggml_prec_set_acc", 2, func(c *gcall) (cpp.Val, error) {
		t, err := c.t(0)
		if err != nil {
			return cpp.Void, err
		}
		return cpp.Bool(c.lib().PrecSetAcc(t, c.i32(1))), nil
	})
	op(out, "ggml_prec_set_src", 3, func(c *gcall) (cpp.Val, error) {
		t, err := c.t(0)
		if err != nil {
			return cpp.Void, err
		}
		ok, err := c.lib().PrecSetSrc(t, c.i32(1), c.i(2))
		if err != nil {
			return cpp.Void, c.abort(err)
		}
		return cpp.Bool(ok), nil
	})
	for name, set := range map[string]func(*ops.Lib, *ops.Tensor, int32){
		"ggml_mul_mat_set_hint": (*ops.Lib).MulMatSetHint, "ggml_flash_attn_ext_set_n_kv_max": (*ops.Lib).FlashAttnKVMax,
	} {
		op(out, name, 2, func(c *gcall) (cpp.Val, error) {
			t, err := c.t(0)
			if err == nil {
				set(c.lib(), t, c.i32(1))
			}
			return cpp.Void, err
		})
	}
	for name, add := range map[string]opNone{
		"ggml_flash_attn_ext_add_sinks": (*ops.Lib).FlashAttnSinks, "ggml_soft_max_add_sinks": (*ops.Lib).SoftMaxAddSinks,
	} {
		op(out, name, 2, func(c *gcall) (cpp.Val, error) {
			a, err := c.t(0)
			if err != nil {
				return cpp.Void, err
			}
			sinks, err := c.opt(1)
			if err != nil {
				return cpp.Void, err
			}
			return cpp.Void, c.abort(add(c.lib(), a, sinks))
		})
	}
}

// sizeOps registers the questions on sizes and shapes.
func sizeOps(out map[string]cpp.Builtin) {
	op(out, "ggml_row_size", 2, func(c *gcall) (cpp.Val, error) {
		n, err := c.lib().RowSize(c.i32(0), c.i(1))
		if err != nil {
			return cpp.Void, c.abort(err)
		}
		return cpp.Int(int64(n), ast.TU64), nil
	})
	op(out, "ggml_element_size", 1, func(c *gcall) (cpp.Val, error) {
		t, err := c.t(0)
		if err != nil {
			return cpp.Void, err
		}
		return cpp.Int(int64(c.lib().TypeSize(t.Type)), ast.TU64), nil
	})
	op(out, "ggml_nelements", 1, func(c *gcall) (cpp.Val, error) {
		t, err := c.t(0)
		if err != nil {
			return cpp.Void, err
		}
		return cpp.Int(ops.NElements(t), ast.TI64), nil
	})
	op(out, "ggml_is_contiguous", 1, func(c *gcall) (cpp.Val, error) {
		t, err := c.t(0)
		if err != nil {
			return cpp.Void, err
		}
		return cpp.Bool(c.lib().Contiguous(t)), nil
	})
	for name, same := range map[string]func(a, b *ops.Tensor) bool{
		"ggml_are_same_shape":  ops.SameShape,
		"ggml_are_same_stride": func(a, b *ops.Tensor) bool { return a.Nb == b.Nb },
	} {
		op(out, name, 2, func(c *gcall) (cpp.Val, error) {
			a, err := c.t(0)
			if err != nil {
				return cpp.Void, err
			}
			b, err := c.t(1)
			if err != nil {
				return cpp.Void, err
			}
			return cpp.Bool(same(a, b)), nil
		})
	}
}

// graphBuildOps registers the ops on the graph.
func graphBuildOps(out map[string]cpp.Builtin) {
	// ggml_build_forward_expand and _order(gf, t): t and its parents in
	// the graph, to compute or in order only
	for name, add := range map[string]func(*ops.Lib, *ops.Graph, *ops.Tensor) error{
		"ggml_build_forward_expand": (*ops.Lib).Expand, "ggml_build_forward_order": (*ops.Lib).Order,
	} {
		op(out, name, 2, func(c *gcall) (cpp.Val, error) {
			gf, err := c.graph(0)
			if err != nil {
				return cpp.Void, err
			}
			t, err := c.t(1)
			if err != nil {
				return cpp.Void, err
			}
			return cpp.Void, c.abort(add(c.lib(), gf, t))
		})
	}
	op(out, "ggml_build_forward_select", 4, func(c *gcall) (cpp.Val, error) {
		gf, err := c.graph(0)
		if err != nil {
			return cpp.Void, err
		}
		arr, ok := c.v[1].P.(*cpp.Array)
		if c.v[1].K != cpp.KArr || !ok {
			return cpp.Void, c.f.Errorf("ggml_build_forward_select of %s", c.v[1].Describe())
		}
		n, idx := c.i(2), c.i(3)
		if n <= 0 || n > int64(len(arr.Cells)) || idx < 0 || idx >= n {
			return cpp.Void, &cpp.Abort{Msg: "GGML_ASSERT(idx >= 0 && idx < n_tensors) failed", Where: c.fn}
		}
		ts := make([]*ops.Tensor, n)
		for i := range ts {
			if ts[i], err = c.t0(arr.Cells[i].V); err != nil {
				return cpp.Void, err
			}
		}
		return c.result(c.lib().Select(gf, ts, int(idx)))
	})
}
