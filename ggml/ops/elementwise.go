package ops

import "github.com/ggload/ggload/bindings"

type (
	unaryFn  func(bindings.Context, *bindings.Tensor) *bindings.Tensor
	binaryFn func(bindings.Context, *bindings.Tensor, *bindings.Tensor) *bindings.Tensor
)

// unary makes op(ctx, a); the ops ggml makes with ggml_unary
// (GGML_OP_UNARY) want rows of adjacent elements.
func (l *Lib) unary(op string, c *Context, a *Tensor, f unaryFn, ggmlUnary bool) (*Tensor, error) {
	if err := l.room(op, c, 1); err != nil {
		return nil, err
	}
	if ggmlUnary {
		if err := assert(op, l.ContiguousRows(a), "ggml_is_contiguous_rows(a)"); err != nil {
			return nil, err
		}
	}
	return wrap(f(c.h, a.c())), nil
}

// Unary ops (ggml_NAME(ctx, a)).
func (l *Lib) Cont(c *Context, a *Tensor) (*Tensor, error) {
	return l.unary("ggml_cont", c, a, l.b.Cont, false)
}
func (l *Lib) Transpose(c *Context, a *Tensor) (*Tensor, error) {
	return l.unary("ggml_transpose", c, a, l.b.Transpose, false)
}
func (l *Lib) Silu(c *Context, a *Tensor) (*Tensor, error) {
	return l.unary("ggml_silu", c, a, l.b.Silu, true)
}
func (l *Lib) Gelu(c *Context, a *Tensor) (*Tensor, error) {
	return l.unary("ggml_gelu", c, a, l.b.Gelu, true)
}
func (l *Lib) Relu(c *Context, a *Tensor) (*Tensor, error) {
	return l.unary("ggml_relu", c, a, l.b.Relu, true)
}
func (l *Lib) Tanh(c *Context, a *Tensor) (*Tensor, error) {
	return l.unary("ggml_tanh", c, a, l.b.Tanh, true)
}
func (l *Lib) Sigmoid(c *Context, a *Tensor) (*Tensor, error) {
	return l.unary("ggml_sigmoid", c, a, l.b.Sigmoid, true)
}
func (l *Lib) Sqr(c *Context, a *Tensor) (*Tensor, error) {
	return l.unary("ggml_sqr", c, a, l.b.Sqr, false)
}
func (l *Lib) Sqrt(c *Context, a *Tensor) (*Tensor, error) {
	return l.unary("ggml_sqrt", c, a, l.b.Sqrt, false)
}
func (l *Lib) SumRows(c *Context, a *Tensor) (*Tensor, error) {
	return l.unary("ggml_sum_rows", c, a, l.b.SumRows, false)
}
func (l *Lib) Round(c *Context, a *Tensor) (*Tensor, error) {
	return l.unary("ggml_round", c, a, l.b.Round, true)
}
func (l *Lib) Exp(c *Context, a *Tensor) (*Tensor, error) {
	return l.unary("ggml_exp", c, a, l.b.Exp, true)
}
func (l *Lib) Neg(c *Context, a *Tensor) (*Tensor, error) {
	return l.unary("ggml_neg", c, a, l.b.Neg, true)
}
func (l *Lib) Mean(c *Context, a *Tensor) (*Tensor, error) {
	return l.unary("ggml_mean", c, a, l.b.Mean, false)
}
func (l *Lib) Softplus(c *Context, a *Tensor) (*Tensor, error) {
	return l.unary("ggml_softplus", c, a, l.b.Softplus, true)
}
func (l *Lib) Abs(c *Context, a *Tensor) (*Tensor, error) {
	return l.unary("ggml_abs", c, a, l.b.Abs, true)
}
func (l *Lib) Sgn(c *Context, a *Tensor) (*Tensor, error) {
	return l.unary("ggml_sgn", c, a, l.b.Sgn, true)
}
func (l *Lib) SoftMax(c *Context, a *Tensor) (*Tensor, error) {
	return l.unary("ggml_soft_max", c, a, l.b.SoftMax, false)
}

// binary makes op(ctx, a, b) after its check.
func (l *Lib) binary(op string, c *Context, a, b *Tensor, ok bool, cond string, f binaryFn) (*Tensor, error) {
	if err := l.room(op, c, 1); err != nil {
		return nil, err
	}
	if err := assert(op, ok, cond); err != nil {
		return nil, err
	}
	return wrap(f(c.h, a.c(), b.c())), nil
}

// Binary ops (ggml_NAME(ctx, a, b)): b repeats to a's shape.
func (l *Lib) Add(c *Context, a, b *Tensor) (*Tensor, error) {
	return l.binary("ggml_add", c, a, b, CanRepeat(b, a), "ggml_can_repeat(b, a)", l.b.Add)
}
func (l *Lib) AddInplace(c *Context, a, b *Tensor) (*Tensor, error) {
	return l.binary("ggml_add_inplace", c, a, b, CanRepeat(b, a), "ggml_can_repeat(b, a)", l.b.AddInplace)
}
func (l *Lib) Mul(c *Context, a, b *Tensor) (*Tensor, error) {
	return l.binary("ggml_mul", c, a, b, CanRepeat(b, a), "ggml_can_repeat(b, a)", l.b.Mul)
}
func (l *Lib) Sub(c *Context, a, b *Tensor) (*Tensor, error) {
	return l.binary("ggml_sub", c, a, b, CanRepeat(b, a), "ggml_can_repeat(b, a)", l.b.Sub)
}
func (l *Lib) Div(c *Context, a, b *Tensor) (*Tensor, error) {
	return l.binary("ggml_div", c, a, b, CanRepeat(b, a), "ggml_can_repeat(b, a)", l.b.Div)
}

// MulMat is ggml_mul_mat(ctx, a, b).
func (l *Lib) MulMat(c *Context, a, b *Tensor) (*Tensor, error) {
	if err := l.room("ggml_mul_mat", c, 1); err != nil {
		return nil, err
	}
	if err := asserts("ggml_mul_mat", check{canMulMat(a, b), "ggml_can_mul_mat(a, b)"}, check{!(a.Nb[0] > a.Nb[1]), "!ggml_is_transposed(a)"}); err != nil {
		return nil, err
	}
	return wrap(l.b.MulMat(c.h, a.c(), b.c())), nil
}

// GetRows is ggml_get_rows(ctx, a, b): a's rows at b's indices.
func (l *Lib) GetRows(c *Context, a, b *Tensor) (*Tensor, error) {
	return l.binary("ggml_get_rows", c, a, b, a.Ne[2] == b.Ne[1] && a.Ne[3] == b.Ne[2] && b.Ne[3] == 1 && b.Type == TypeI32,
		"a->ne[2] == b->ne[1] && b->type == GGML_TYPE_I32", l.b.GetRows)
}

// Cpy is ggml_cpy(ctx, a, b): a copied into b.
func (l *Lib) Cpy(c *Context, a, b *Tensor) (*Tensor, error) {
	return l.binary("ggml_cpy", c, a, b, NElements(a) == NElements(b), "ggml_nelements(a) == ggml_nelements(b)", l.b.Cpy)
}

// glu is the check of the split GLUs: rows of adjacent elements, a and b
// alike.
func (l *Lib) glu(op string, a, b *Tensor) error {
	return asserts(op, check{l.ContiguousN(a, 1) && l.ContiguousN(b, 1), "ggml_is_contiguous_1(a)"},
		check{SameShape(a, b) && a.Type == b.Type, "ggml_are_same_shape(a, b)"})
}

// gluSplit makes op(ctx, a, b) of a split GLU.
func (l *Lib) gluSplit(op string, c *Context, a, b *Tensor, f binaryFn) (*Tensor, error) {
	if err := l.room(op, c, 1); err != nil {
		return nil, err
	}
	if err := l.glu(op, a, b); err != nil {
		return nil, err
	}
	return wrap(f(c.h, a.c(), b.c())), nil
}

// The split GLUs (ggml_NAME_split(ctx, a, b)).
func (l *Lib) SwigluSplit(c *Context, a, b *Tensor) (*Tensor, error) {
	return l.gluSplit("ggml_swiglu_split", c, a, b, l.b.SwigluSplit)
}
func (l *Lib) GegluSplit(c *Context, a, b *Tensor) (*Tensor, error) {
	return l.gluSplit("ggml_geglu_split", c, a, b, l.b.GegluSplit)
}
func (l *Lib) RegluSplit(c *Context, a, b *Tensor) (*Tensor, error) {
	return l.gluSplit("ggml_reglu_split", c, a, b, l.b.RegluSplit)
}

// glu1 makes op(ctx, a): a GLU of a's two halves.
func (l *Lib) glu1(op string, c *Context, a *Tensor, f unaryFn) (*Tensor, error) {
	if err := l.room(op, c, 1); err != nil {
		return nil, err
	}
	if err := assert(op, l.ContiguousN(a, 1), "ggml_is_contiguous_1(a)"); err != nil {
		return nil, err
	}
	return wrap(f(c.h, a.c())), nil
}

// The GLUs of one tensor's halves (ggml_NAME(ctx, a)).
func (l *Lib) Swiglu(c *Context, a *Tensor) (*Tensor, error) {
	return l.glu1("ggml_swiglu", c, a, l.b.Swiglu)
}
func (l *Lib) Geglu(c *Context, a *Tensor) (*Tensor, error) {
	return l.glu1("ggml_geglu", c, a, l.b.Geglu)
}
func (l *Lib) Reglu(c *Context, a *Tensor) (*Tensor, error) {
	return l.glu1("ggml_reglu", c, a, l.b.Reglu)
}

// SwigluOAI is ggml_swiglu_oai(ctx, a, b, alpha, limit).
func (l *Lib) SwigluOAI(c *Context, a, b *Tensor, alpha, limit float32) (*Tensor, error) {
	const op = "ggml_swiglu_oai"
	if err := l.room(op, c, 1); err != nil {
		return nil, err
	}
	if err := l.glu(op, a, b); err != nil {
		return nil, err
	}
	return wrap(l.b.SwigluOAI(c.h, a.c(), b.c(), alpha, limit)), nil
}

// SwigluClamp is ggml_swiglu_clamp(ctx, a, b, limit).
func (l *Lib) SwigluClamp(c *Context, a, b *Tensor, limit float32) (*Tensor, error) {
	const op = "ggml_swiglu_clamp"
	if err := l.room(op, c, 1); err != nil {
		return nil, err
	}
	if err := l.glu(op, a, b); err != nil {
		return nil, err
	}
	return wrap(l.b.SwigluClamp(c.h, a.c(), b.c(), limit)), nil
}
