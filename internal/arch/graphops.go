package arch

import (
	"fmt"
	"math"
	"unsafe"

	"github.com/ggload/ggload/bindings"
	"github.com/ggload/ggload/internal/arch/ast"
)

// The ggml functions the graph programs call, through the bindings, each
// checked first as ggml.c checks its arguments: a GGML_ASSERT that would
// fail is an Abort here, worded as ggml words it, and the native call is
// never made.

// gcall is one call's evaluated arguments.
type gcall struct {
	f  *frame
	fn string
	v  []Val
	g  *graphState
}

func (c *gcall) lib() *bindings.Lib { return c.g.lib }

// assert is GGML_ASSERT(cond) of ggml.c.
func (c *gcall) assert(ok bool, cond string) error {
	if ok {
		return nil
	}
	return &Abort{Msg: "GGML_ASSERT(" + cond + ") failed", Where: c.fn}
}

func (c *gcall) ctx(i int) (bindings.Context, error) {
	if n, ok := c.v[i].P.(nativeCtx); ok && c.v[i].K == KNative {
		return n.h, c.room(n.h)
	}
	return 0, c.f.errorf("%s: argument %d is %s, not a ggml context", c.fn, i, c.v[i].describe())
}

// room checks that the context has room for one more tensor: ggml_new_object
// aborts when it has not.
func (c *gcall) room(ctx bindings.Context) error { return c.roomFor(ctx, 1) }

func (c *gcall) graph(i int) (bindings.Graph, error) {
	if n, ok := c.v[i].P.(nativeGraph); ok && c.v[i].K == KNative {
		return n.h, nil
	}
	return 0, c.f.errorf("%s: argument %d is %s, not a graph", c.fn, i, c.v[i].describe())
}

// ctxTensors is the context argument 0 and the n tensor arguments after
// it.
func (c *gcall) ctxTensors(n int) (bindings.Context, []*bindings.Tensor, error) {
	ctx, err := c.ctx(0)
	if err != nil {
		return 0, nil, err
	}
	ts := make([]*bindings.Tensor, n)
	for i := range ts {
		if ts[i], err = c.t(i + 1); err != nil {
			return 0, nil, err
		}
	}
	return ctx, ts, nil
}

// opt is a tensor argument that may be null.
func (c *gcall) opt(i int) (*bindings.Tensor, error) {
	if i >= len(c.v) {
		return nil, nil
	}
	return c.g.native(c.f, c.v[i])
}

// t is a tensor argument: ggml dereferences it.
func (c *gcall) t(i int) (*bindings.Tensor, error) {
	t, err := c.opt(i)
	if err == nil && t == nil {
		err = &Abort{Msg: fmt.Sprintf("null tensor passed to %s (argument %d)", c.fn, i), Where: c.f.fn}
	}
	return t, err
}

func (c *gcall) i(i int) int64 {
	v, _ := convert(c.v[i], ast.TI64)
	return v.I
}

func (c *gcall) f32(i int) float32 {
	v, _ := convert(c.v[i], ast.TF32)
	return float32(v.F)
}

// native is the tensor a value names: a native tensor, a model weight
// (made on the weights' context on first use), or null.
func (g *graphState) native(f *frame, v Val) (*bindings.Tensor, error) {
	switch v.K {
	case KNull:
		return nil, nil
	case KNative:
		if t, ok := v.P.(*bindings.Tensor); ok {
			return t, nil
		}
	case KTensor:
		w := v.P.(*Tensor)
		if t, ok := g.weights[w]; ok {
			return t, nil
		}
		l := g.lib
		if l.UsedMem(g.wctx)+l.TensorOverhead() > l.GetMemSize(g.wctx) {
			return nil, f.errorf("the weights' context is full")
		}
		ne := w.Ne
		nd := int32(4)
		for nd > 1 && ne[nd-1] == 1 {
			nd--
		}
		t := l.NewTensor(g.wctx, int32(w.Type), nd, &ne[0])
		if t == nil {
			return nil, f.errorf("ggml_new_tensor of weight %s", w.Name)
		}
		l.SetName(t, w.Name)
		var bt bindings.Buft
		if g.at.Weight != nil {
			bt = g.at.Weight(w)
		}
		if err := g.place(t, bt, true); err != nil {
			return nil, err
		}
		g.weights[w] = t
		return t, nil
	}
	return nil, f.errorf("%s is no tensor", v.describe())
}

func tval(t *bindings.Tensor) Val {
	if t == nil {
		return vNull
	}
	return Val{K: KNative, P: t}
}

// the shape predicates of ggml.c
func nelements(t *bindings.Tensor) int64 { return t.Ne[0] * t.Ne[1] * t.Ne[2] * t.Ne[3] }

func canRepeat(t0, t1 *bindings.Tensor) bool {
	if nelements(t0) == 0 {
		return nelements(t1) == 0
	}
	for i := 0; i < 4; i++ {
		if t1.Ne[i]%t0.Ne[i] != 0 {
			return false
		}
	}
	return true
}

func canMulMat(t0, t1 *bindings.Tensor) bool {
	return t0.Ne[0] == t1.Ne[0] && t1.Ne[2]%t0.Ne[2] == 0 && t1.Ne[3]%t0.Ne[3] == 0
}

func sameShape(a, b *bindings.Tensor) bool { return a.Ne == b.Ne }

func (g *graphState) contiguousN(t *bindings.Tensor, n int) bool {
	l := g.lib
	next := uintptr(l.TypeSize(t.Type))
	if t.Ne[0] != l.BlckSize(t.Type) && t.Nb[0] != next {
		return false
	}
	next *= uintptr(t.Ne[0] / l.BlckSize(t.Type))
	for i := 1; i < 4; i++ {
		if t.Ne[i] != 1 {
			if i > n {
				if t.Nb[i] != next {
					return false
				}
				next *= uintptr(t.Ne[i])
			} else {
				next = uintptr(t.Ne[i]) * t.Nb[i]
			}
		}
	}
	return true
}

func (g *graphState) contiguous(t *bindings.Tensor) bool { return g.contiguousN(t, 0) }

// contiguousRows is ggml_is_contiguous_rows: the elements of a row are
// adjacent (the rows themselves may lie anywhere).
func (g *graphState) contiguousRows(t *bindings.Tensor) bool {
	return t.Ne[0] == g.lib.BlckSize(t.Type) || t.Nb[0] == uintptr(g.lib.TypeSize(t.Type))
}

// nbytes is ggml_nbytes.
func (g *graphState) nbytes(t *bindings.Tensor) uint64 {
	for i := 0; i < 4; i++ {
		if t.Ne[i] <= 0 {
			return 0
		}
	}
	l := g.lib
	blck := l.BlckSize(t.Type)
	var n uint64
	if blck == 1 {
		n = uint64(l.TypeSize(t.Type))
		for i := 0; i < 4; i++ {
			n += uint64(t.Ne[i]-1) * uint64(t.Nb[i])
		}
		return n
	}
	n = uint64(t.Ne[0]) * uint64(t.Nb[0]) / uint64(blck)
	for i := 1; i < 4; i++ {
		n += uint64(t.Ne[i]-1) * uint64(t.Nb[i])
	}
	return n
}

// viewFits is ggml_new_tensor_impl's check of a view of nd dimensions:
// the data of a contiguous tensor of its shape, at its offset from the
// base tensor (a view of a view is checked against the view's source),
// within the base's bytes. The size is computed in size_t as ggml does:
// a negative length wraps around to a size that fails the check.
func (c *gcall) viewFits(a *bindings.Tensor, nd int, ne [4]int64, offset uint64) error {
	if a.ViewSrc != nil {
		offset += uint64(a.ViewOffs)
		a = a.ViewSrc
	}
	l := c.lib()
	size := uint64(l.TypeSize(a.Type)) * uint64(ne[0]) / uint64(l.BlckSize(a.Type))
	for i := 1; i < nd; i++ {
		size *= uint64(ne[i])
	}
	return c.assert(size == 0 || size+offset <= c.g.nbytes(a) && size+offset >= size, "view_src == NULL || data_size == 0 || data_size + view_offs <= ggml_nbytes(view_src)")
}

type opFn func(c *gcall) (Val, error)

// op registers a ggml function of n arguments (-1: any).
func op(out map[string]builtinFunc, name string, n int, fn opFn) {
	out[name] = func(f *frame, args []*ast.Node) (Val, error) {
		if f.r.graph == nil {
			return vVoid, f.errorf("%s outside BuildGraph", name)
		}
		if n >= 0 && len(args) != n {
			return vVoid, f.errorf("%s: %d arguments, not %d", name, len(args), n)
		}
		vs, err := evalArgs(f, args)
		if err != nil {
			return vVoid, err
		}
		return fn(&gcall{f: f, fn: name, v: append([]Val(nil), vs...), g: f.r.graph})
	}
}

// unary registers ggml_NAME(ctx, a).
func unary(out map[string]builtinFunc, name string, call func(l *bindings.Lib) func(bindings.Context, *bindings.Tensor) *bindings.Tensor) {
	op(out, name, 2, func(c *gcall) (Val, error) {
		ctx, err := c.ctx(0)
		if err != nil {
			return vVoid, err
		}
		a, err := c.t(1)
		if err != nil {
			return vVoid, err
		}
		if ggmlUnary[name] {
			// ggml_unary_impl's
			if err := c.assert(c.g.contiguousRows(a), "ggml_is_contiguous_rows(a)"); err != nil {
				return vVoid, err
			}
		}
		return tval(call(c.lib())(ctx, a)), nil
	})
}

// ggmlUnary are the ops ggml makes with ggml_unary (GGML_OP_UNARY).
var ggmlUnary = map[string]bool{"ggml_silu": true, "ggml_gelu": true, "ggml_relu": true, "ggml_tanh": true, "ggml_sigmoid": true,
	"ggml_softplus": true, "ggml_exp": true, "ggml_neg": true, "ggml_round": true, "ggml_abs": true, "ggml_sgn": true}

// binary registers ggml_NAME(ctx, a, b) with its check.
func binary(out map[string]builtinFunc, name string, check func(c *gcall, a, b *bindings.Tensor) error, call func(l *bindings.Lib) func(bindings.Context, *bindings.Tensor, *bindings.Tensor) *bindings.Tensor) {
	op(out, name, 3, func(c *gcall) (Val, error) {
		ctx, ts, err := c.ctxTensors(2)
		if err != nil {
			return vVoid, err
		}
		a, b := ts[0], ts[1]
		if check != nil {
			if err := check(c, a, b); err != nil {
				return vVoid, err
			}
		}
		return tval(call(c.lib())(ctx, a, b)), nil
	})
}

func repeats(c *gcall, a, b *bindings.Tensor) error {
	return c.assert(canRepeat(b, a), "ggml_can_repeat(b, a)")
}

func glu(c *gcall, a, b *bindings.Tensor) error {
	if err := c.assert(c.g.contiguousN(a, 1) && c.g.contiguousN(b, 1), "ggml_is_contiguous_1(a)"); err != nil {
		return err
	}
	return c.assert(sameShape(a, b) && a.Type == b.Type, "ggml_are_same_shape(a, b)")
}

func ggmlBuiltins() map[string]builtinFunc {
	out := map[string]builtinFunc{}
	elementwiseOps(out)
	shapeOps(out)
	layoutOps(out)
	attentionOps(out)
	rowOps(out)
	attributeOps(out)
	sizeOps(out)
	graphBuildOps(out)
	moeOps(out)
	fusedOps(out)
	extraOps(out)
	return out
}

// roomFor checks that ctx has room for n more tensors (more than one: an
// op that makes more than its result, argsort_top_k's sort and view).
func (c *gcall) roomFor(ctx bindings.Context, n int) error {
	l, g := c.lib(), c.g
	size := g.ctxSize
	if ctx != g.ctx {
		size = l.GetMemSize(ctx)
	}
	return c.assert(l.UsedMem(ctx)+uintptr(n)*g.overhead <= size, "obj_new (not enough space in the context's memory pool)")
}

// moeOps registers the ops of the mixture-of-experts layers: the expert
// selection, the experts' matrices and biases, and the GLUs with
// parameters.
func moeOps(out map[string]builtinFunc) {
	op(out, "ggml_argsort_top_k", 3, func(c *gcall) (Val, error) {
		ctx, ts, err := c.ctxTensors(1)
		if err != nil {
			return vVoid, err
		}
		a := ts[0]
		k := c.i(2)
		if err := c.assert(a.Ne[0] <= math.MaxInt32 && a.Ne[0] >= k && k >= 0, "a->ne[0] >= k"); err != nil {
			return vVoid, err
		}
		if err := c.roomFor(ctx, 2); err != nil {
			return vVoid, err
		}
		return tval(c.lib().ArgsortTopK(ctx, a, int32(k))), nil
	})
	op(out, "ggml_top_k", 3, func(c *gcall) (Val, error) {
		ctx, ts, err := c.ctxTensors(1)
		if err != nil {
			return vVoid, err
		}
		a, k := ts[0], c.i(2)
		if err := c.assert(a.Ne[0] <= math.MaxInt32 && a.Ne[0] >= k && k >= 0, "a->ne[0] >= k"); err != nil {
			return vVoid, err
		}
		return tval(c.lib().TopK(ctx, a, int32(k))), nil
	})
	op(out, "ggml_mul_mat_id", 4, func(c *gcall) (Val, error) {
		ctx, ts, err := c.ctxTensors(3)
		if err != nil {
			return vVoid, err
		}
		as, b, ids := ts[0], ts[1], ts[2]
		ok := !(as.Nb[0] > as.Nb[1]) && ids.Type == typeI32 && as.Ne[3] == 1 && b.Ne[3] == 1 &&
			ids.Ne[2] == 1 && ids.Ne[3] == 1 && ids.Ne[1] == b.Ne[2] && as.Ne[0] == b.Ne[0] && b.Ne[1] != 0 && ids.Ne[0]%b.Ne[1] == 0
		if err := c.assert(ok, "as->ne[0] == b->ne[0] && ids->ne[1] == b->ne[2] && ids->ne[0] % b->ne[1] == 0 ..."); err != nil {
			return vVoid, err
		}
		return tval(c.lib().MulMatID(ctx, as, b, ids)), nil
	})
	op(out, "ggml_add_id", 4, func(c *gcall) (Val, error) {
		ctx, ts, err := c.ctxTensors(3)
		if err != nil {
			return vVoid, err
		}
		a, b, ids := ts[0], ts[1], ts[2]
		ok := a.Ne[0] == b.Ne[0] && a.Ne[1] == ids.Ne[0] && a.Ne[2] == ids.Ne[1] && ids.Type == typeI32
		if err := c.assert(ok, "a->ne[0] == b->ne[0] && a->ne[1] == ids->ne[0] && a->ne[2] == ids->ne[1]"); err != nil {
			return vVoid, err
		}
		return tval(c.lib().AddID(ctx, a, b, ids)), nil
	})
	op(out, "ggml_clamp", 4, func(c *gcall) (Val, error) {
		ctx, ts, err := c.ctxTensors(1)
		if err != nil {
			return vVoid, err
		}
		a := ts[0]
		return tval(c.lib().Clamp(ctx, a, c.f32(2), c.f32(3))), nil
	})
	op(out, "ggml_fill", 3, func(c *gcall) (Val, error) {
		ctx, ts, err := c.ctxTensors(1)
		if err != nil {
			return vVoid, err
		}
		a := ts[0]
		if err := c.assert((a.Type == typeF32 || a.Type == typeF16) && c.g.contiguous(a), "a->type == GGML_TYPE_F32 || a->type == GGML_TYPE_F16; ggml_is_contiguous(a)"); err != nil {
			return vVoid, err
		}
		return tval(c.lib().Fill(ctx, a, c.f32(2))), nil
	})
	op(out, "ggml_repeat_4d", 6, func(c *gcall) (Val, error) {
		ctx, ts, err := c.ctxTensors(1)
		if err != nil {
			return vVoid, err
		}
		a := ts[0]
		ne := [4]int64{c.i(2), c.i(3), c.i(4), c.i(5)}
		ok := nelements(a) == 0
		if !ok {
			ok = true
			for i := range ne {
				ok = ok && a.Ne[i] != 0 && ne[i]%a.Ne[i] == 0
			}
		}
		if err := c.assert(ok, "can_repeat"); err != nil {
			return vVoid, err
		}
		return tval(c.lib().Repeat4D(ctx, a, ne[0], ne[1], ne[2], ne[3])), nil
	})
	for _, n := range []string{"ggml_swiglu", "ggml_geglu", "ggml_reglu"} {
		op(out, n, 2, func(c *gcall) (Val, error) {
			ctx, ts, err := c.ctxTensors(1)
			if err != nil {
				return vVoid, err
			}
			if err := c.assert(c.g.contiguousN(ts[0], 1), "ggml_is_contiguous_1(a)"); err != nil {
				return vVoid, err
			}
			switch n {
			case "ggml_geglu":
				return tval(c.lib().Geglu(ctx, ts[0])), nil
			case "ggml_reglu":
				return tval(c.lib().Reglu(ctx, ts[0])), nil
			}
			return tval(c.lib().Swiglu(ctx, ts[0])), nil
		})
	}
	op(out, "ggml_concat", 4, func(c *gcall) (Val, error) {
		ctx, ts, err := c.ctxTensors(2)
		if err != nil {
			return vVoid, err
		}
		a, b, dim := ts[0], ts[1], c.i(3)
		ok := dim >= 0 && dim < 4 && a.Type == b.Type
		for d := 0; ok && d < 4; d++ {
			ok = int64(d) == dim || a.Ne[d] == b.Ne[d]
		}
		if err := c.assert(ok, "dim >= 0 && dim < GGML_MAX_DIMS && a->type == b->type && a->ne[d] == b->ne[d]"); err != nil {
			return vVoid, err
		}
		return tval(c.lib().Concat(ctx, a, b, int32(dim))), nil
	})
	op(out, "ggml_swiglu_oai", 5, func(c *gcall) (Val, error) {
		ctx, ts, err := c.ctxTensors(2)
		if err != nil {
			return vVoid, err
		}
		if err := glu(c, ts[0], ts[1]); err != nil {
			return vVoid, err
		}
		return tval(c.lib().SwigluOAI(ctx, ts[0], ts[1], c.f32(3), c.f32(4))), nil
	})
	op(out, "ggml_swiglu_clamp", 4, func(c *gcall) (Val, error) {
		ctx, ts, err := c.ctxTensors(2)
		if err != nil {
			return vVoid, err
		}
		if err := glu(c, ts[0], ts[1]); err != nil {
			return vVoid, err
		}
		return tval(c.lib().SwigluClamp(ctx, ts[0], ts[1], c.f32(3))), nil
	})
}

// elementwiseOps registers the unary, binary and GLU ops.
func elementwiseOps(out map[string]builtinFunc) {
	L := func(f func(l *bindings.Lib) func(bindings.Context, *bindings.Tensor) *bindings.Tensor) func(l *bindings.Lib) func(bindings.Context, *bindings.Tensor) *bindings.Tensor {
		return f
	}
	unary(out, "ggml_cont", L(func(l *bindings.Lib) func(bindings.Context, *bindings.Tensor) *bindings.Tensor { return l.Cont }))
	unary(out, "ggml_transpose", L(func(l *bindings.Lib) func(bindings.Context, *bindings.Tensor) *bindings.Tensor { return l.Transpose }))
	unary(out, "ggml_silu", L(func(l *bindings.Lib) func(bindings.Context, *bindings.Tensor) *bindings.Tensor { return l.Silu }))
	unary(out, "ggml_gelu", L(func(l *bindings.Lib) func(bindings.Context, *bindings.Tensor) *bindings.Tensor { return l.Gelu }))
	unary(out, "ggml_relu", L(func(l *bindings.Lib) func(bindings.Context, *bindings.Tensor) *bindings.Tensor { return l.Relu }))
	unary(out, "ggml_tanh", L(func(l *bindings.Lib) func(bindings.Context, *bindings.Tensor) *bindings.Tensor { return l.Tanh }))
	unary(out, "ggml_sigmoid", L(func(l *bindings.Lib) func(bindings.Context, *bindings.Tensor) *bindings.Tensor { return l.Sigmoid }))
	unary(out, "ggml_sqr", L(func(l *bindings.Lib) func(bindings.Context, *bindings.Tensor) *bindings.Tensor { return l.Sqr }))
	unary(out, "ggml_sqrt", L(func(l *bindings.Lib) func(bindings.Context, *bindings.Tensor) *bindings.Tensor { return l.Sqrt }))
	unary(out, "ggml_sum_rows", L(func(l *bindings.Lib) func(bindings.Context, *bindings.Tensor) *bindings.Tensor { return l.SumRows }))
	unary(out, "ggml_round", L(func(l *bindings.Lib) func(bindings.Context, *bindings.Tensor) *bindings.Tensor { return l.Round }))
	unary(out, "ggml_exp", L(func(l *bindings.Lib) func(bindings.Context, *bindings.Tensor) *bindings.Tensor { return l.Exp }))
	unary(out, "ggml_neg", L(func(l *bindings.Lib) func(bindings.Context, *bindings.Tensor) *bindings.Tensor { return l.Neg }))
	unary(out, "ggml_mean", L(func(l *bindings.Lib) func(bindings.Context, *bindings.Tensor) *bindings.Tensor { return l.Mean }))
	unary(out, "ggml_softplus", L(func(l *bindings.Lib) func(bindings.Context, *bindings.Tensor) *bindings.Tensor { return l.Softplus }))
	unary(out, "ggml_abs", L(func(l *bindings.Lib) func(bindings.Context, *bindings.Tensor) *bindings.Tensor { return l.Abs }))
	unary(out, "ggml_sgn", L(func(l *bindings.Lib) func(bindings.Context, *bindings.Tensor) *bindings.Tensor { return l.Sgn }))
	unary(out, "ggml_soft_max", L(func(l *bindings.Lib) func(bindings.Context, *bindings.Tensor) *bindings.Tensor { return l.SoftMax }))

	binary(out, "ggml_add", repeats, func(l *bindings.Lib) func(bindings.Context, *bindings.Tensor, *bindings.Tensor) *bindings.Tensor {
		return l.Add
	})
	binary(out, "ggml_add_inplace", repeats, func(l *bindings.Lib) func(bindings.Context, *bindings.Tensor, *bindings.Tensor) *bindings.Tensor {
		return l.AddInplace
	})
	binary(out, "ggml_mul", repeats, func(l *bindings.Lib) func(bindings.Context, *bindings.Tensor, *bindings.Tensor) *bindings.Tensor {
		return l.Mul
	})
	binary(out, "ggml_sub", repeats, func(l *bindings.Lib) func(bindings.Context, *bindings.Tensor, *bindings.Tensor) *bindings.Tensor {
		return l.Sub
	})
	binary(out, "ggml_div", repeats, func(l *bindings.Lib) func(bindings.Context, *bindings.Tensor, *bindings.Tensor) *bindings.Tensor {
		return l.Div
	})
	binary(out, "ggml_mul_mat", func(c *gcall, a, b *bindings.Tensor) error {
		if err := c.assert(canMulMat(a, b), "ggml_can_mul_mat(a, b)"); err != nil {
			return err
		}
		return c.assert(!(a.Nb[0] > a.Nb[1]), "!ggml_is_transposed(a)")
	}, func(l *bindings.Lib) func(bindings.Context, *bindings.Tensor, *bindings.Tensor) *bindings.Tensor {
		return l.MulMat
	})
	binary(out, "ggml_get_rows", func(c *gcall, a, b *bindings.Tensor) error {
		return c.assert(a.Ne[2] == b.Ne[1] && a.Ne[3] == b.Ne[2] && b.Ne[3] == 1 && b.Type == typeI32, "a->ne[2] == b->ne[1] && b->type == GGML_TYPE_I32")
	}, func(l *bindings.Lib) func(bindings.Context, *bindings.Tensor, *bindings.Tensor) *bindings.Tensor {
		return l.GetRows
	})
	binary(out, "ggml_cpy", func(c *gcall, a, b *bindings.Tensor) error {
		return c.assert(nelements(a) == nelements(b), "ggml_nelements(a) == ggml_nelements(b)")
	}, func(l *bindings.Lib) func(bindings.Context, *bindings.Tensor, *bindings.Tensor) *bindings.Tensor {
		return l.Cpy
	})
	binary(out, "ggml_swiglu_split", glu, func(l *bindings.Lib) func(bindings.Context, *bindings.Tensor, *bindings.Tensor) *bindings.Tensor {
		return l.SwigluSplit
	})
	binary(out, "ggml_geglu_split", glu, func(l *bindings.Lib) func(bindings.Context, *bindings.Tensor, *bindings.Tensor) *bindings.Tensor {
		return l.GegluSplit
	})
	binary(out, "ggml_reglu_split", glu, func(l *bindings.Lib) func(bindings.Context, *bindings.Tensor, *bindings.Tensor) *bindings.Tensor {
		return l.RegluSplit
	})

}

// shapeOps registers the new tensors, reshapes and views.
func shapeOps(out map[string]builtinFunc) {
	// new tensors
	for nd := 1; nd <= 4; nd++ {
		nd := nd
		op(out, fmt.Sprintf("ggml_new_tensor_%dd", nd), 2+nd, func(c *gcall) (Val, error) {
			ctx, err := c.ctx(0)
			if err != nil {
				return vVoid, err
			}
			typ := int32(c.i(1))
			ne := [4]int64{1, 1, 1, 1}
			for i := 0; i < nd; i++ {
				ne[i] = c.i(2 + i)
				if err := c.assert(ne[i] >= 0, "ne >= 0"); err != nil {
					return vVoid, err
				}
			}
			if err := c.assert(typ >= 0 && typ < typeCount, "type >= 0 && type < GGML_TYPE_COUNT"); err != nil {
				return vVoid, err
			}
			return tval(c.lib().NewTensor(ctx, typ, int32(nd), &ne[0])), nil
		})
	}
	// reshapes and views
	for nd := 1; nd <= 4; nd++ {
		nd := nd
		op(out, fmt.Sprintf("ggml_reshape_%dd", nd), 2+nd, func(c *gcall) (Val, error) {
			ctx, err := c.ctx(0)
			if err != nil {
				return vVoid, err
			}
			a, err := c.t(1)
			if err != nil {
				return vVoid, err
			}
			ne := [4]int64{1, 1, 1, 1}
			for i := 0; i < nd; i++ {
				ne[i] = c.i(2 + i)
			}
			if err := c.assert(c.g.contiguous(a), "ggml_is_contiguous(a)"); err != nil {
				return vVoid, err
			}
			if err := c.assert(nelements(a) == ne[0]*ne[1]*ne[2]*ne[3], "ggml_nelements(a) == ne0*ne1*..."); err != nil {
				return vVoid, err
			}
			l := c.lib()
			switch nd {
			case 1:
				return tval(l.Reshape1D(ctx, a, ne[0])), nil
			case 2:
				return tval(l.Reshape2D(ctx, a, ne[0], ne[1])), nil
			case 3:
				return tval(l.Reshape3D(ctx, a, ne[0], ne[1], ne[2])), nil
			}
			return tval(l.Reshape4D(ctx, a, ne[0], ne[1], ne[2], ne[3])), nil
		})
	}
	for nd := 1; nd <= 4; nd++ {
		nd := nd
		// ggml_view_Nd(ctx, a, ne0..ne(N-1), nb1..nb(N-1), offset)
		op(out, fmt.Sprintf("ggml_view_%dd", nd), 2+nd+(nd-1)+1, func(c *gcall) (Val, error) {
			ctx, err := c.ctx(0)
			if err != nil {
				return vVoid, err
			}
			a, err := c.t(1)
			if err != nil {
				return vVoid, err
			}
			ne := [4]int64{1, 1, 1, 1}
			var nb [4]uintptr
			for i := 0; i < nd; i++ {
				ne[i] = c.i(2 + i)
			}
			for i := 1; i < nd; i++ {
				nb[i] = uintptr(c.i(2 + nd + i - 1))
			}
			offset := uintptr(c.i(2 + nd + nd - 1))
			if err := c.viewFits(a, nd, ne, uint64(offset)); err != nil {
				return vVoid, err
			}
			l := c.lib()
			switch nd {
			case 1:
				return tval(l.View1D(ctx, a, ne[0], offset)), nil
			case 2:
				return tval(l.View2D(ctx, a, ne[0], ne[1], nb[1], offset)), nil
			case 3:
				return tval(l.View3D(ctx, a, ne[0], ne[1], ne[2], nb[1], nb[2], offset)), nil
			}
			return tval(l.View4D(ctx, a, ne[0], ne[1], ne[2], ne[3], nb[1], nb[2], nb[3], offset)), nil
		})
	}
}

// layoutOps registers permute, cont_2d, cast, scale and the norms.
func layoutOps(out map[string]builtinFunc) {
	op(out, "ggml_permute", 6, func(c *gcall) (Val, error) {
		ctx, err := c.ctx(0)
		if err != nil {
			return vVoid, err
		}
		a, err := c.t(1)
		if err != nil {
			return vVoid, err
		}
		ax := [4]int64{c.i(2), c.i(3), c.i(4), c.i(5)}
		seen := map[int64]bool{}
		for _, x := range ax {
			if err := c.assert(x >= 0 && x < 4 && !seen[x], "axis0 != axis1 ..."); err != nil {
				return vVoid, err
			}
			seen[x] = true
		}
		return tval(c.lib().Permute(ctx, a, int32(ax[0]), int32(ax[1]), int32(ax[2]), int32(ax[3]))), nil
	})
	op(out, "ggml_cont_3d", 5, func(c *gcall) (Val, error) {
		ctx, err := c.ctx(0)
		if err != nil {
			return vVoid, err
		}
		a, err := c.t(1)
		if err != nil {
			return vVoid, err
		}
		if err := c.assert(nelements(a) == c.i(2)*c.i(3)*c.i(4), "ggml_nelements(a) == (ne0*ne1*ne2*ne3)"); err != nil {
			return vVoid, err
		}
		return tval(c.lib().Cont3D(ctx, a, c.i(2), c.i(3), c.i(4))), nil
	})
	op(out, "ggml_cont_2d", 4, func(c *gcall) (Val, error) {
		ctx, err := c.ctx(0)
		if err != nil {
			return vVoid, err
		}
		a, err := c.t(1)
		if err != nil {
			return vVoid, err
		}
		if err := c.assert(nelements(a) == c.i(2)*c.i(3), "ggml_nelements(a) == (ne0*ne1*ne2*ne3)"); err != nil {
			return vVoid, err
		}
		return tval(c.lib().Cont2D(ctx, a, c.i(2), c.i(3))), nil
	})
	op(out, "ggml_cast", 3, func(c *gcall) (Val, error) {
		ctx, err := c.ctx(0)
		if err != nil {
			return vVoid, err
		}
		a, err := c.t(1)
		if err != nil {
			return vVoid, err
		}
		return tval(c.lib().Cast(ctx, a, int32(c.i(2)))), nil
	})
	// ggml_conv_1d_ph and ggml_conv_1d_dw_ph (stride s, padding half
	// the kernel, dilation d): im2col, then a product, checked as each
	// step checks
	op(out, "ggml_conv_1d_ph", 5, func(c *gcall) (Val, error) {
		ctx, ts, err := c.ctxTensors(2)
		if err != nil {
			return vVoid, err
		}
		a, b, s0, d0 := ts[0], ts[1], c.i(3), c.i(4)
		if err := im2col1D(c, a, b, s0, a.Ne[0]/2, d0); err != nil {
			return vVoid, err
		}
		if err := c.assert(c.g.contiguous(a) && a.Ne[3] == 1, "ggml_is_contiguous(a) && ggml_nelements(a) == ne0*ne1 (ggml_reshape_2d)"); err != nil {
			return vVoid, err
		}
		return tval(c.lib().Conv1DPh(ctx, a, b, int32(s0), int32(d0))), nil
	})
	op(out, "ggml_conv_1d_dw_ph", 5, func(c *gcall) (Val, error) {
		ctx, ts, err := c.ctxTensors(2)
		if err != nil {
			return vVoid, err
		}
		a, b, s0, d0 := ts[0], ts[1], c.i(3), c.i(4)
		if err := c.assert(c.g.contiguous(b) && b.Ne[3] == 1, "ggml_is_contiguous(b) && ggml_nelements(b) == ne0*ne1*ne2*ne3 (ggml_reshape_4d)"); err != nil {
			return vVoid, err
		}
		nb := *b
		nb.Ne = [4]int64{b.Ne[0], 1, b.Ne[1], b.Ne[2]}
		if err := im2col1D(c, a, &nb, s0, a.Ne[0]/2, d0); err != nil {
			return vVoid, err
		}
		if err := c.assert(a.Ne[2]%b.Ne[1] == 0 && a.Ne[3] == 1, "ggml_can_mul_mat(im2col, a) && ggml_nelements(result) == ne0*ne1*ne2"); err != nil {
			return vVoid, err
		}
		return tval(c.lib().Conv1DDwPh(ctx, a, b, int32(s0), int32(d0))), nil
	})
	op(out, "ggml_group_norm", 4, func(c *gcall) (Val, error) {
		ctx, err := c.ctx(0)
		if err != nil {
			return vVoid, err
		}
		a, err := c.t(1)
		if err != nil {
			return vVoid, err
		}
		return tval(c.lib().GroupNorm(ctx, a, int32(c.i(2)), c.f32(3))), nil
	})
	op(out, "ggml_l2_norm", 3, func(c *gcall) (Val, error) {
		ctx, err := c.ctx(0)
		if err != nil {
			return vVoid, err
		}
		a, err := c.t(1)
		if err != nil {
			return vVoid, err
		}
		return tval(c.lib().L2Norm(ctx, a, c.f32(2))), nil
	})
	op(out, "ggml_repeat", 3, func(c *gcall) (Val, error) {
		ctx, ts, err := c.ctxTensors(2)
		if err != nil {
			return vVoid, err
		}
		a, b := ts[0], ts[1]
		ok := nelements(a) == 0
		if !ok {
			ok = true
			for i := range a.Ne {
				ok = ok && a.Ne[i] != 0 && b.Ne[i]%a.Ne[i] == 0
			}
		}
		if err := c.assert(ok, "ggml_can_repeat(a, b)"); err != nil {
			return vVoid, err
		}
		return tval(c.lib().Repeat(ctx, a, b)), nil
	})
	op(out, "ggml_rwkv_wkv6", 7, func(c *gcall) (Val, error) {
		ctx, ts, err := c.ctxTensors(6)
		if err == nil {
			err = linearAttn(c, ts, []string{"k", "v", "r", "tf", "td", "state"}, 0, []int{1, 2, 4})
		}
		if err != nil {
			return vVoid, err
		}
		return tval(c.lib().RWKVWKV6(ctx, ts[0], ts[1], ts[2], ts[3], ts[4], ts[5])), nil
	})
	op(out, "ggml_gated_linear_attn", 7, func(c *gcall) (Val, error) {
		ctx, ts, err := c.ctxTensors(5)
		if err == nil {
			err = linearAttn(c, ts, []string{"k", "v", "q", "g", "state"}, 0, []int{1, 2, 3})
		}
		if err != nil {
			return vVoid, err
		}
		return tval(c.lib().GatedLinearAttn(ctx, ts[0], ts[1], ts[2], ts[3], ts[4], c.f32(6))), nil
	})
	op(out, "ggml_rwkv_wkv7", 8, func(c *gcall) (Val, error) {
		ctx, ts, err := c.ctxTensors(7)
		if err == nil {
			err = linearAttn(c, ts, []string{"r", "w", "k", "v", "a", "b", "state"}, 2, []int{1, 2, 3, 4, 5})
		}
		if err != nil {
			return vVoid, err
		}
		return tval(c.lib().RWKVWKV7(ctx, ts[0], ts[1], ts[2], ts[3], ts[4], ts[5], ts[6])), nil
	})
	op(out, "ggml_ssm_conv", 3, func(c *gcall) (Val, error) {
		ctx, ts, err := c.ctxTensors(2)
		if err != nil {
			return vVoid, err
		}
		sx, w := ts[0], ts[1]
		if err := c.assert(sx.Ne[3] == 1, "ggml_is_3d(sx)"); err != nil {
			return vVoid, err
		}
		if err := c.assert(w.Ne[2] == 1 && w.Ne[3] == 1, "ggml_is_matrix(c)"); err != nil {
			return vVoid, err
		}
		nt := sx.Ne[0] - w.Ne[0] + 1
		if err := c.assert(sx.Ne[1] == w.Ne[1], "sx->ne[1] == d_inner"); err != nil {
			return vVoid, err
		}
		if err := c.assert(nt >= 0, "n_t >= 0"); err != nil {
			return vVoid, err
		}
		return tval(c.lib().SSMConv(ctx, sx, w)), nil
	})
	op(out, "ggml_ssm_scan", 9, func(c *gcall) (Val, error) {
		ctx, ts, err := c.ctxTensors(7)
		if err != nil {
			return vVoid, err
		}
		st, x, dt, A, B, C, ids := ts[0], ts[1], ts[2], ts[3], ts[4], ts[5], ts[6]
		K := c.i(8)
		size := func(t *bindings.Tensor) uintptr { return c.lib().TypeSize(t.Type) }
		checks := []struct {
			ok   bool
			cond string
		}{
			{K >= 1 && K <= math.MaxInt32, "K >= 1 && K <= INT32_MAX"},
			{c.g.contiguous(st), "ggml_is_contiguous(s)"},
			{c.g.contiguous(dt), "ggml_is_contiguous(dt)"},
			{c.g.contiguous(A), "ggml_is_contiguous(A)"},
			{x.Nb[0] == size(x), "x->nb[0] == ggml_type_size(x->type)"},
			{B.Nb[0] == size(B), "B->nb[0] == ggml_type_size(B->type)"},
			{C.Nb[0] == size(C), "C->nb[0] == ggml_type_size(C->type)"},
			{x.Nb[1] == uintptr(x.Ne[0])*x.Nb[0], "x->nb[1] == x->ne[0]*x->nb[0]"},
			{B.Nb[1] == uintptr(B.Ne[0])*B.Nb[0], "B->nb[1] == B->ne[0]*B->nb[0]"},
			{C.Nb[1] == uintptr(C.Ne[0])*C.Nb[0], "C->nb[1] == C->ne[0]*C->nb[0]"},
			{B.Ne == C.Ne, "ggml_are_same_shape(B, C)"},
			{ids.Type == typeI32, "ids->type == GGML_TYPE_I32"},
			{dt.Ne[0] == x.Ne[1] && dt.Ne[1] == x.Ne[2] && dt.Ne[2] == x.Ne[3] && dt.Ne[3] == 1, "dt->ne[0] == n_head && dt->ne[1] == n_seq_tokens && dt->ne[2] == n_seqs && ggml_is_3d(dt)"},
			{st.Ne[1] == x.Ne[0] && st.Ne[2] == x.Ne[1], "s->ne[1] == head_dim && s->ne[2] == n_head"},
			{B.Ne[0] == st.Ne[0] && B.Ne[2] == x.Ne[2] && B.Ne[3] == x.Ne[3], "B->ne[0] == d_state && B->ne[2] == n_seq_tokens && B->ne[3] == n_seqs"},
			{ids.Ne[0] == x.Ne[3] && ids.Ne[1] == 1 && ids.Ne[2] == 1 && ids.Ne[3] == 1, "ids->ne[0] == n_seqs && ggml_is_vector(ids)"},
			{A.Ne[1] == x.Ne[1] && A.Ne[2] == 1 && A.Ne[3] == 1, "A->ne[1] == n_head && ggml_is_matrix(A)"},
			{A.Ne[0] == 1 || A.Ne[0] == st.Ne[0] && K == 1, "A->ne[0] == d_state && K == 1"},
		}
		for _, ch := range checks {
			if err := c.assert(ch.ok, ch.cond); err != nil {
				return vVoid, err
			}
		}
		return tval(c.lib().SSMScan(ctx, st, x, dt, A, B, C, ids, K)), nil
	})
	op(out, "ggml_set_1d", 4, func(c *gcall) (Val, error) {
		ctx, ts, err := c.ctxTensors(2)
		if err != nil {
			return vVoid, err
		}
		a, b, offset := ts[0], ts[1], c.i(3)
		if err := c.assert(nelements(a) >= nelements(b), "ggml_nelements(a) >= ggml_nelements(b)"); err != nil {
			return vVoid, err
		}
		if err := c.assert(offset >= 0 && offset < 1<<30, "offset < (size_t)(1 << 30)"); err != nil {
			return vVoid, err
		}
		return tval(c.lib().Set1D(ctx, a, b, uintptr(offset))), nil
	})
	op(out, "ggml_xielu", 6, func(c *gcall) (Val, error) {
		ctx, err := c.ctx(0)
		if err != nil {
			return vVoid, err
		}
		a, err := c.t(1)
		if err != nil {
			return vVoid, err
		}
		return tval(c.lib().Xielu(ctx, a, c.f32(2), c.f32(3), c.f32(4), c.f32(5))), nil
	})
	op(out, "ggml_scale_bias", 4, func(c *gcall) (Val, error) {
		ctx, err := c.ctx(0)
		if err != nil {
			return vVoid, err
		}
		a, err := c.t(1)
		if err != nil {
			return vVoid, err
		}
		return tval(c.lib().ScaleBias(ctx, a, c.f32(2), c.f32(3))), nil
	})
	for _, n := range []string{"ggml_scale", "ggml_scale_inplace"} {
		op(out, n, 3, func(c *gcall) (Val, error) {
			ctx, err := c.ctx(0)
			if err != nil {
				return vVoid, err
			}
			a, err := c.t(1)
			if err != nil {
				return vVoid, err
			}
			if n == "ggml_scale_inplace" {
				return tval(c.lib().ScaleInplace(ctx, a, c.f32(2))), nil
			}
			return tval(c.lib().Scale(ctx, a, c.f32(2))), nil
		})
	}
	for _, n := range []string{"ggml_rms_norm", "ggml_norm"} {
		n := n
		op(out, n, 3, func(c *gcall) (Val, error) {
			ctx, err := c.ctx(0)
			if err != nil {
				return vVoid, err
			}
			a, err := c.t(1)
			if err != nil {
				return vVoid, err
			}
			if n == "ggml_norm" {
				return tval(c.lib().Norm(ctx, a, c.f32(2))), nil
			}
			return tval(c.lib().RMSNorm(ctx, a, c.f32(2))), nil
		})
	}
}

// im2col1D is ggml_im2col's asserts for a 1D convolution of b by the
// kernel a.
func im2col1D(c *gcall, a, b *bindings.Tensor, s0, p0, d0 int64) error {
	if err := c.assert(b.Ne[1] == a.Ne[1] && b.Ne[3] == 1, "b->ne[1] == a->ne[1] && b->ne[3] == 1"); err != nil {
		return err
	}
	ow := int64(-1)
	if s0 != 0 {
		ow = (b.Ne[0]+2*p0-d0*(a.Ne[0]-1)-1)/s0 + 1
	}
	return c.assert(ow > 0, `(OW > 0) && "b too small compared to a"`)
}

// ropeChecks are ggml_rope_impl's asserts.
// linearAttn is the checks that ggml's linear attention ops (rwkv_wkv6,
// gated_linear_attn, rwkv_wkv7) make of their arguments, named names
// (the state last): every one contiguous; S, H and n_tokens from the one
// at k, which those at same share; the state S*S*H per sequence.
func linearAttn(c *gcall, ts []*bindings.Tensor, names []string, k int, same []int) error {
	for i, n := range names {
		if err := c.assert(c.g.contiguous(ts[i]), "ggml_is_contiguous("+n+")"); err != nil {
			return err
		}
	}
	st := ts[len(ts)-1]
	S, H, nt, ns := ts[k].Ne[0], ts[k].Ne[1], ts[k].Ne[2], st.Ne[1]
	for _, i := range same {
		t, n := ts[i], names[i]
		if err := c.assert(t.Ne[0] == S && t.Ne[1] == H && t.Ne[2] == nt, n+"->ne[0] == S && "+n+"->ne[1] == H && "+n+"->ne[2] == n_tokens"); err != nil {
			return err
		}
	}
	return c.assert(nelements(st) == S*S*H*ns, "ggml_nelements(state) == S * S * H * n_seqs")
}

// ropeTypeVision is GGML_ROPE_TYPE_VISION.
const ropeTypeVision = 24

func ropeChecks(c *gcall, a, b, fr *bindings.Tensor, nDims, mode int64) error {
	if err := c.assert(mode&1 == 0, "(mode & 1) == 0"); err != nil {
		return err
	}
	if err := c.assert(b.Ne[1] == 1 && b.Ne[2] == 1 && b.Ne[3] == 1 && b.Type == typeI32, "ggml_is_vector(b) && b->type == GGML_TYPE_I32"); err != nil {
		return err
	}
	var err error
	if mode&8 != 0 { // GGML_ROPE_TYPE_MROPE
		err = c.assert(a.Ne[2]*4 == b.Ne[0], "a->ne[2] * 4 == b->ne[0]")
	} else {
		err = c.assert(a.Ne[2] == b.Ne[0], "a->ne[2] == b->ne[0]")
	}
	if err != nil {
		return err
	}
	if fr != nil {
		return c.assert(fr.Type == typeF32 && fr.Ne[0] >= nDims/2, "c->type == GGML_TYPE_F32 && c->ne[0] >= n_dims / 2")
	}
	return nil
}

// attentionOps registers rope, soft_max_ext and flash attention.
func attentionOps(out map[string]builtinFunc) {
	// ggml_rope_ext and ggml_rope_ext_back (the same rope, as ROPE_BACK)
	for _, name := range []string{"ggml_rope_ext", "ggml_rope_ext_back"} {
		op(out, name, 13, func(c *gcall) (Val, error) {
			ctx, ts, err := c.ctxTensors(2)
			if err != nil {
				return vVoid, err
			}
			a, b := ts[0], ts[1]
			fr, err := c.opt(3)
			if err != nil {
				return vVoid, err
			}
			nDims, mode := c.i(4), c.i(5)
			if err := ropeChecks(c, a, b, fr, nDims, mode); err != nil {
				return vVoid, err
			}
			rope := c.lib().RopeExt
			if name == "ggml_rope_ext_back" {
				rope = c.lib().RopeExtBack
			}
			return tval(rope(ctx, a, b, fr, int32(nDims), int32(mode), int32(c.i(6)), c.f32(7), c.f32(8), c.f32(9), c.f32(10), c.f32(11), c.f32(12))), nil
		})
	}
	op(out, "ggml_rope_multi", 14, func(c *gcall) (Val, error) {
		ctx, ts, err := c.ctxTensors(2)
		if err != nil {
			return vVoid, err
		}
		fr, err := c.opt(3)
		if err != nil {
			return vVoid, err
		}
		nDims, mode := c.i(4), c.i(6)
		if err := ropeChecks(c, ts[0], ts[1], fr, nDims, mode); err != nil {
			return vVoid, err
		}
		// int sections[GGML_MROPE_SECTIONS]: four, read from the array
		var sections [4]int32
		v := c.v[5]
		if v.K == KIter {
			v = Val{K: KArr, P: v.P}
		}
		a, ok := v.P.(*Array)
		if v.K != KArr || !ok || len(a.cells) < 4 {
			return vVoid, c.f.errorf("ggml_rope_multi: sections are %s, not an array of 4", c.v[5].describe())
		}
		for i := range sections {
			x, err := convert(a.cells[i].V, ast.TI32)
			if err != nil {
				return vVoid, err
			}
			sections[i] = int32(x.I)
		}
		return tval(c.lib().RopeMulti(ctx, ts[0], ts[1], fr, int32(nDims), &sections[0], int32(mode), int32(c.i(7)), c.f32(8), c.f32(9), c.f32(10), c.f32(11), c.f32(12), c.f32(13))), nil
	})
	// ggml_rope_set_offset(a, n_offs): a rope whose first n_offs
	// dimensions stay unrotated (an op parameter of the rope itself)
	op(out, "ggml_rope_set_offset", 2, func(c *gcall) (Val, error) {
		a, err := c.t(0)
		if err != nil {
			return vVoid, err
		}
		l := c.lib()
		if name := l.OpName(a.Op); name != "ROPE" && name != "ROPE_BACK" {
			return vVoid, c.assert(false, "a->op == GGML_OP_ROPE || a->op == GGML_OP_ROPE_BACK")
		}
		n := c.i(1)
		if err := c.assert(n >= 0, "n_offs >= 0"); err != nil {
			return vVoid, err
		}
		if err := c.assert(a.OpParams[2] != ropeTypeVision, "mode != GGML_ROPE_TYPE_VISION"); err != nil {
			return vVoid, err
		}
		return tval(l.RopeSetOffset(a, int32(n))), nil
	})
	op(out, "ggml_rope", 5, func(c *gcall) (Val, error) {
		ctx, ts, err := c.ctxTensors(2)
		if err != nil {
			return vVoid, err
		}
		nDims, mode := c.i(3), c.i(4)
		if err := ropeChecks(c, ts[0], ts[1], nil, nDims, mode); err != nil {
			return vVoid, err
		}
		return tval(c.lib().Rope(ctx, ts[0], ts[1], int32(nDims), int32(mode))), nil
	})
	op(out, "ggml_soft_max_ext", 5, func(c *gcall) (Val, error) {
		ctx, err := c.ctx(0)
		if err != nil {
			return vVoid, err
		}
		a, err := c.t(1)
		if err != nil {
			return vVoid, err
		}
		mask, err := c.opt(2)
		if err != nil {
			return vVoid, err
		}
		if err := c.assert(c.g.contiguous(a), "ggml_is_contiguous(a)"); err != nil {
			return vVoid, err
		}
		if mask != nil {
			ok := (mask.Type == typeF16 || mask.Type == typeF32) && c.g.contiguous(mask) && mask.Ne[0] == a.Ne[0] &&
				mask.Ne[1] >= a.Ne[1] && a.Ne[2]%mask.Ne[2] == 0 && a.Ne[3]%mask.Ne[3] == 0
			if err := c.assert(ok, "mask->ne[0] == a->ne[0] && mask->ne[1] >= a->ne[1] ..."); err != nil {
				return vVoid, err
			}
		}
		return tval(c.lib().SoftMaxExt(ctx, a, mask, c.f32(3), c.f32(4))), nil
	})
	op(out, "ggml_flash_attn_ext", 8, func(c *gcall) (Val, error) {
		ctx, ts, err := c.ctxTensors(3)
		if err != nil {
			return vVoid, err
		}
		q, k, v := ts[0], ts[1], ts[2]
		mask, err := c.opt(4)
		if err != nil {
			return vVoid, err
		}
		if err := c.assert(canMulMat(k, q) && q.Ne[3] == k.Ne[3] && q.Ne[3] == v.Ne[3], "ggml_can_mul_mat(k, q)"); err != nil {
			return vVoid, err
		}
		if mask != nil {
			ok := mask.Type == typeF16 && c.g.contiguous(mask) && q.Ne[2]%mask.Ne[2] == 0 && q.Ne[3]%mask.Ne[3] == 0
			if err := c.assert(ok, "mask->type == GGML_TYPE_F16 && ggml_is_contiguous(mask)"); err != nil {
				return vVoid, err
			}
		}
		return tval(c.lib().FlashAttnExt(ctx, q, k, v, mask, c.f32(5), c.f32(6), c.f32(7))), nil
	})
}

// rowOps registers set_rows and pad.
func rowOps(out map[string]builtinFunc) {
	op(out, "ggml_set_rows", 4, func(c *gcall) (Val, error) {
		ctx, ts, err := c.ctxTensors(3)
		if err != nil {
			return vVoid, err
		}
		a, b, ix := ts[0], ts[1], ts[2]
		// ggml_set_rows' asserts, in its order
		if err := c.asserts(
			check{a.Ne[0] == b.Ne[0], "a->ne[0] == b->ne[0]"},
			check{a.Ne[2] == b.Ne[2], "a->ne[2] == b->ne[2]"},
			check{a.Ne[3] == b.Ne[3], "a->ne[3] == b->ne[3]"},
			check{b.Ne[1] == ix.Ne[0], "b->ne[1] == c->ne[0]"},
			check{ix.Ne[1] != 0 && b.Ne[2]%ix.Ne[1] == 0, "b->ne[2] % c->ne[1] == 0"},
			check{ix.Ne[2] != 0 && b.Ne[3]%ix.Ne[2] == 0, "b->ne[3] % c->ne[2] == 0"},
			check{ix.Ne[3] == 1, "c->ne[3] == 1"},
			check{b.Type == typeF32 || b.Type == typeF16, "b->type == GGML_TYPE_F32 || b->type == GGML_TYPE_F16"},
			check{ix.Type == typeI64 || ix.Type == typeI32, "c->type == GGML_TYPE_I64 || c->type == GGML_TYPE_I32"},
			check{c.g.contiguousRows(a), "ggml_is_contiguous_rows(a)"},
			check{c.g.contiguousRows(b), "ggml_is_contiguous_rows(b)"},
		); err != nil {
			return vVoid, err
		}
		return tval(c.lib().SetRows(ctx, a, b, ix)), nil
	})
	op(out, "ggml_pad", 6, func(c *gcall) (Val, error) {
		ctx, err := c.ctx(0)
		if err != nil {
			return vVoid, err
		}
		a, err := c.t(1)
		if err != nil {
			return vVoid, err
		}
		return tval(c.lib().Pad(ctx, a, int32(c.i(2)), int32(c.i(3)), int32(c.i(4)), int32(c.i(5)))), nil
	})

}

// attributeOps registers the ops on a tensor's flags, name and hints.
func attributeOps(out map[string]builtinFunc) {
	// tensor flags, names and attributes
	op(out, "ggml_set_input", 1, func(c *gcall) (Val, error) {
		t, err := c.t(0)
		if err == nil {
			c.lib().SetInput(t)
		}
		return vVoid, err
	})
	op(out, "ggml_set_output", 1, func(c *gcall) (Val, error) {
		t, err := c.t(0)
		if err == nil {
			c.lib().SetOutput(t)
		}
		return vVoid, err
	})
	op(out, "ggml_set_name", 2, func(c *gcall) (Val, error) {
		t, err := c.t(0)
		if err != nil {
			return vVoid, err
		}
		s, err := convert(c.v[1], ast.TStr)
		if err != nil {
			return vVoid, err
		}
		return tval(c.lib().SetName(t, s.S)), nil
	})
	op(out, "ggml_format_name", -1, func(c *gcall) (Val, error) {
		t, err := c.t(0)
		if err != nil {
			return vVoid, err
		}
		s, err := convert(c.v[1], ast.TStr)
		if err != nil {
			return vVoid, err
		}
		return tval(c.lib().SetName(t, cformat(s.S, c.v[2:]))), nil
	})
	op(out, "ggml_prec_set_acc", 2, func(c *gcall) (Val, error) {
		t, err := c.t(0)
		if err != nil {
			return vVoid, err
		}
		return vBool(c.lib().PrecSetAcc(t, int32(c.i(1)))), nil
	})
	op(out, "ggml_prec_set_src", 3, func(c *gcall) (Val, error) {
		t, err := c.t(0)
		if err != nil {
			return vVoid, err
		}
		idx := c.i(2)
		if err := c.assert(idx >= 0 && idx < bindings.MaxSrc, "idx >= 0 && idx < GGML_MAX_SRC"); err != nil {
			return vVoid, err
		}
		return vBool(c.lib().PrecSetSrc(t, int32(c.i(1)), int32(idx))), nil
	})
	op(out, "ggml_mul_mat_set_hint", 2, func(c *gcall) (Val, error) {
		t, err := c.t(0)
		if err == nil {
			c.lib().MulMatSetHint(t, int32(c.i(1)))
		}
		return vVoid, err
	})
	op(out, "ggml_flash_attn_ext_set_n_kv_max", 2, func(c *gcall) (Val, error) {
		t, err := c.t(0)
		if err == nil {
			c.lib().FlashAttnKVMax(t, int32(c.i(1)))
		}
		return vVoid, err
	})
}

// sizeOps registers the questions on sizes and shapes, and the sinks.
func sizeOps(out map[string]builtinFunc) {
	op(out, "ggml_row_size", 2, func(c *gcall) (Val, error) {
		typ, ne := int32(c.i(0)), c.i(1)
		if err := c.assert(ne%c.lib().BlckSize(typ) == 0, "ne % ggml_blck_size(type) == 0"); err != nil {
			return vVoid, err
		}
		return vInt(int64(c.lib().RowSize(typ, ne)), ast.TU64), nil
	})
	op(out, "ggml_element_size", 1, func(c *gcall) (Val, error) {
		t, err := c.t(0)
		if err != nil {
			return vVoid, err
		}
		return vInt(int64(c.lib().TypeSize(t.Type)), ast.TU64), nil
	})
	op(out, "ggml_nelements", 1, func(c *gcall) (Val, error) {
		t, err := c.t(0)
		if err != nil {
			return vVoid, err
		}
		return vInt(nelements(t), ast.TI64), nil
	})
	op(out, "ggml_is_contiguous", 1, func(c *gcall) (Val, error) {
		t, err := c.t(0)
		if err != nil {
			return vVoid, err
		}
		return vBool(c.g.contiguous(t)), nil
	})
	op(out, "ggml_are_same_shape", 2, func(c *gcall) (Val, error) {
		a, err := c.t(0)
		if err != nil {
			return vVoid, err
		}
		b, err := c.t(1)
		if err != nil {
			return vVoid, err
		}
		return vBool(sameShape(a, b)), nil
	})
	op(out, "ggml_are_same_stride", 2, func(c *gcall) (Val, error) {
		a, err := c.t(0)
		if err != nil {
			return vVoid, err
		}
		b, err := c.t(1)
		if err != nil {
			return vVoid, err
		}
		return vBool(a.Nb == b.Nb), nil
	})

	for _, x := range []struct {
		name, op string
		src      int
	}{{"ggml_flash_attn_ext_add_sinks", "FLASH_ATTN_EXT", 4}, {"ggml_soft_max_add_sinks", "SOFT_MAX", 2}} {
		x := x
		op(out, x.name, 2, func(c *gcall) (Val, error) {
			a, err := c.t(0)
			if err != nil {
				return vVoid, err
			}
			sinks, err := c.opt(1)
			if err != nil {
				return vVoid, err
			}
			if sinks != nil {
				ok := c.lib().OpName(a.Op) == x.op && a.Src[x.src] == nil && a.Src[0].Ne[2] == sinks.Ne[0] && sinks.Type == typeF32
				if err := c.assert(ok, "a->op == GGML_OP_"+x.op+" && sinks->type == GGML_TYPE_F32"); err != nil {
					return vVoid, err
				}
			}
			if x.src == 4 {
				c.lib().FlashAttnSinks(a, sinks)
			} else {
				c.lib().SoftMaxAddSinks(a, sinks)
			}
			return vVoid, nil
		})
	}

}

// graphBuildOps registers the ops on the graph.
func graphBuildOps(out map[string]builtinFunc) {
	// the graph
	op(out, "ggml_build_forward_expand", 2, func(c *gcall) (Val, error) {
		gf, err := c.graph(0)
		if err != nil {
			return vVoid, err
		}
		t, err := c.t(1)
		if err != nil {
			return vVoid, err
		}
		if err := c.g.fits(c, t); err != nil {
			return vVoid, err
		}
		c.lib().BuildForwardExpand(gf, t)
		return vVoid, nil
	})
	op(out, "ggml_build_forward_select", 4, func(c *gcall) (Val, error) {
		gf, err := c.graph(0)
		if err != nil {
			return vVoid, err
		}
		arr, ok := c.v[1].P.(*Array)
		if c.v[1].K != KArr || !ok {
			return vVoid, c.f.errorf("ggml_build_forward_select of %s", c.v[1].describe())
		}
		n, idx := c.i(2), c.i(3)
		if err := c.assert(n > 0 && n <= int64(len(arr.cells)) && idx >= 0 && idx < n, "idx >= 0 && idx < n_tensors"); err != nil {
			return vVoid, err
		}
		ts := make([]*bindings.Tensor, n)
		for i := range ts {
			if ts[i], err = c.t0(arr.cells[i].V); err != nil {
				return vVoid, err
			}
			if err := c.g.fits(c, ts[i]); err != nil {
				return vVoid, err
			}
		}
		return tval(c.lib().BuildForwardSel(gf, (**bindings.Tensor)(unsafe.Pointer(&ts[0])), int32(n), int32(idx))), nil
	})
}

func (c *gcall) t0(v Val) (*bindings.Tensor, error) {
	t, err := c.g.native(c.f, v)
	if err == nil && t == nil {
		err = &Abort{Msg: "null tensor passed to " + c.fn, Where: c.f.fn}
	}
	return t, err
}

// fits checks that expanding the graph by t stays within its size, as
// ggml_visit_parents asserts (its nodes and its leafs both count up to
// the graph's size).
func (g *graphState) fits(c *gcall, t *bindings.Tensor) error {
	var add []*bindings.Tensor
	seen := map[*bindings.Tensor]bool{}
	var visit func(t *bindings.Tensor)
	visit = func(t *bindings.Tensor) {
		if t == nil || g.inGraph[t] || seen[t] {
			return
		}
		seen[t] = true
		for _, s := range t.Src {
			visit(s)
		}
		add = append(add, t)
	}
	visit(t)
	nodes, leafs := g.nNodes, g.nLeafs
	for _, t := range add {
		if t.Op == 0 {
			leafs++
		} else {
			nodes++
		}
	}
	if err := c.assert(nodes <= g.size && leafs <= g.size, "cgraph->n_nodes < cgraph->size"); err != nil {
		return err
	}
	for _, t := range add {
		g.inGraph[t] = true
	}
	g.nNodes, g.nLeafs = nodes, leafs
	return nil
}

// ggml's types the checks name
const (
	typeF32   = 0
	typeF16   = 1
	typeI32   = 26
	typeI64   = 27
	typeCount = 43 // GGML_TYPE_COUNT
)
