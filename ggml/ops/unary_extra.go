package ops

import "math"

// The activations, elementwise functions and reductions of the vision and
// audio encoders (tools/mtmd's graphs): ggml_unary ops, which want rows of
// adjacent elements, the plain elementwise ops, which take any layout, the
// GLU variants, argsort and the sum of all elements.

// unaryInplace makes op(ctx, a) of a ggml_unary op that writes into a: its
// result is a view of a, which ggml makes only within a's base tensor.
func (l *Lib) unaryInplace(op string, c *Context, a *Tensor, f unaryFn) (*Tensor, error) {
	if err := l.room(op, c, 1); err != nil {
		return nil, err
	}
	if err := assert(op, l.ContiguousRows(a), "ggml_is_contiguous_rows(a)"); err != nil {
		return nil, err
	}
	if err := l.viewFits(op, a, 4, a.Ne, 0); err != nil {
		return nil, err
	}
	return wrap(f(c.h, a.c())), nil
}

// GeluErf is ggml_gelu_erf(ctx, a): GELU computed with the error function.
func (l *Lib) GeluErf(c *Context, a *Tensor) (*Tensor, error) {
	return l.unary("ggml_gelu_erf", c, a, l.b.GeluErf, true)
}

// GeluQuick is ggml_gelu_quick(ctx, a): GELU's sigmoid approximation.
func (l *Lib) GeluQuick(c *Context, a *Tensor) (*Tensor, error) {
	return l.unary("ggml_gelu_quick", c, a, l.b.GeluQuick, true)
}

// GeluInplace is ggml_gelu_inplace(ctx, a): GELU written over a.
func (l *Lib) GeluInplace(c *Context, a *Tensor) (*Tensor, error) {
	return l.unaryInplace("ggml_gelu_inplace", c, a, l.b.GeluInplace)
}

// ReluInplace is ggml_relu_inplace(ctx, a): ReLU written over a.
func (l *Lib) ReluInplace(c *Context, a *Tensor) (*Tensor, error) {
	return l.unaryInplace("ggml_relu_inplace", c, a, l.b.ReluInplace)
}

// Step is ggml_step(ctx, a): 1 where an element is positive, else 0.
func (l *Lib) Step(c *Context, a *Tensor) (*Tensor, error) {
	return l.unary("ggml_step", c, a, l.b.Step, true)
}

// Elu is ggml_elu(ctx, a).
func (l *Lib) Elu(c *Context, a *Tensor) (*Tensor, error) {
	return l.unary("ggml_elu", c, a, l.b.Elu, true)
}

// Hardswish is ggml_hardswish(ctx, a).
func (l *Lib) Hardswish(c *Context, a *Tensor) (*Tensor, error) {
	return l.unary("ggml_hardswish", c, a, l.b.Hardswish, true)
}

// Hardsigmoid is ggml_hardsigmoid(ctx, a).
func (l *Lib) Hardsigmoid(c *Context, a *Tensor) (*Tensor, error) {
	return l.unary("ggml_hardsigmoid", c, a, l.b.Hardsigmoid, true)
}

// Sin is ggml_sin(ctx, a); any layout.
func (l *Lib) Sin(c *Context, a *Tensor) (*Tensor, error) {
	return l.unary("ggml_sin", c, a, l.b.Sin, false)
}

// Cos is ggml_cos(ctx, a); any layout.
func (l *Lib) Cos(c *Context, a *Tensor) (*Tensor, error) {
	return l.unary("ggml_cos", c, a, l.b.Cos, false)
}

// Log is ggml_log(ctx, a), the natural logarithm; any layout.
func (l *Lib) Log(c *Context, a *Tensor) (*Tensor, error) {
	return l.unary("ggml_log", c, a, l.b.Log, false)
}

// Sum is ggml_sum(ctx, a): the sum of all of a's elements, one element of
// a's type.
func (l *Lib) Sum(c *Context, a *Tensor) (*Tensor, error) {
	return l.unary("ggml_sum", c, a, l.b.Sum, false)
}

// Sort orders of ggml_argsort (enum ggml_sort_order).
const (
	SortAsc  = 0 // GGML_SORT_ORDER_ASC
	SortDesc = 1 // GGML_SORT_ORDER_DESC
)

// Argsort is ggml_argsort(ctx, a, order): for each row of a, the I32
// indices of its elements in the order given (SortAsc, SortDesc).
func (l *Lib) Argsort(c *Context, a *Tensor, order int32) (*Tensor, error) {
	const op = "ggml_argsort"
	if err := l.room(op, c, 1); err != nil {
		return nil, err
	}
	if err := assert(op, a.Ne[0] <= math.MaxInt32, "a->ne[0] <= INT32_MAX"); err != nil {
		return nil, err
	}
	return wrap(l.b.Argsort(c.h, a.c(), order)), nil
}

// SwigluSwapped is ggml_swiglu_swapped(ctx, a): the SwiGLU of a's two
// halves with their roles exchanged, SiLU of the second half times the
// first.
func (l *Lib) SwigluSwapped(c *Context, a *Tensor) (*Tensor, error) {
	return l.glu1("ggml_swiglu_swapped", c, a, l.b.SwigluSwapped)
}

// GegluQuickSplit is ggml_geglu_quick_split(ctx, a, b): GELU-quick of a
// times b.
func (l *Lib) GegluQuickSplit(c *Context, a, b *Tensor) (*Tensor, error) {
	return l.gluSplit("ggml_geglu_quick_split", c, a, b, l.b.GegluQuickSplit)
}

// GegluErfSplit is ggml_geglu_erf_split(ctx, a, b): GELU (with the error
// function) of a times b.
func (l *Lib) GegluErfSplit(c *Context, a, b *Tensor) (*Tensor, error) {
	return l.gluSplit("ggml_geglu_erf_split", c, a, b, l.b.GegluErfSplit)
}
