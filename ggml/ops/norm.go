package ops

import "github.com/ggload/ggload/bindings"

// scalarOp makes op(ctx, a, f): an op of a tensor and one float.
func (l *Lib) scalarOp(op string, c *Context, a *Tensor, x float32, fn func(bindings.Context, *bindings.Tensor, float32) *bindings.Tensor) (*Tensor, error) {
	if err := l.room(op, c, 1); err != nil {
		return nil, err
	}
	return wrap(fn(c.h, a.c(), x)), nil
}

// Norms and scales (ggml_NAME(ctx, a, x)).
func (l *Lib) RMSNorm(c *Context, a *Tensor, eps float32) (*Tensor, error) {
	return l.scalarOp("ggml_rms_norm", c, a, eps, l.b.RMSNorm)
}
func (l *Lib) Norm(c *Context, a *Tensor, eps float32) (*Tensor, error) {
	return l.scalarOp("ggml_norm", c, a, eps, l.b.Norm)
}
func (l *Lib) L2Norm(c *Context, a *Tensor, eps float32) (*Tensor, error) {
	return l.scalarOp("ggml_l2_norm", c, a, eps, l.b.L2Norm)
}
func (l *Lib) Scale(c *Context, a *Tensor, s float32) (*Tensor, error) {
	return l.scalarOp("ggml_scale", c, a, s, l.b.Scale)
}
func (l *Lib) ScaleInplace(c *Context, a *Tensor, s float32) (*Tensor, error) {
	return l.scalarOp("ggml_scale_inplace", c, a, s, l.b.ScaleInplace)
}

// GroupNorm is ggml_group_norm(ctx, a, n_groups, eps).
func (l *Lib) GroupNorm(c *Context, a *Tensor, groups int32, eps float32) (*Tensor, error) {
	if err := l.room("ggml_group_norm", c, 1); err != nil {
		return nil, err
	}
	return wrap(l.b.GroupNorm(c.h, a.c(), groups, eps)), nil
}

// ScaleBias is ggml_scale_bias(ctx, a, s, b).
func (l *Lib) ScaleBias(c *Context, a *Tensor, s, b float32) (*Tensor, error) {
	if err := l.room("ggml_scale_bias", c, 1); err != nil {
		return nil, err
	}
	return wrap(l.b.ScaleBias(c.h, a.c(), s, b)), nil
}

// Xielu is ggml_xielu(ctx, a, alpha_n, alpha_p, beta, eps).
func (l *Lib) Xielu(c *Context, a *Tensor, alphaN, alphaP, beta, eps float32) (*Tensor, error) {
	if err := l.room("ggml_xielu", c, 1); err != nil {
		return nil, err
	}
	return wrap(l.b.Xielu(c.h, a.c(), alphaN, alphaP, beta, eps)), nil
}

// Clamp is ggml_clamp(ctx, a, min, max).
func (l *Lib) Clamp(c *Context, a *Tensor, lo, hi float32) (*Tensor, error) {
	if err := l.room("ggml_clamp", c, 1); err != nil {
		return nil, err
	}
	return wrap(l.b.Clamp(c.h, a.c(), lo, hi)), nil
}

// Fill is ggml_fill(ctx, a, x).
func (l *Lib) Fill(c *Context, a *Tensor, x float32) (*Tensor, error) {
	const op = "ggml_fill"
	if err := l.room(op, c, 1); err != nil {
		return nil, err
	}
	if err := assert(op, (a.Type == TypeF32 || a.Type == TypeF16) && l.Contiguous(a), "a->type == GGML_TYPE_F32 || a->type == GGML_TYPE_F16; ggml_is_contiguous(a)"); err != nil {
		return nil, err
	}
	return wrap(l.b.Fill(c.h, a.c(), x)), nil
}

// im2col1D is ggml_im2col's asserts for a 1D convolution of b by the
// kernel a.
func im2col1D(op string, a, b *Tensor, s0, p0, d0 int64) error {
	if err := assert(op, b.Ne[1] == a.Ne[1] && b.Ne[3] == 1, "b->ne[1] == a->ne[1] && b->ne[3] == 1"); err != nil {
		return err
	}
	ow := int64(-1)
	if s0 != 0 {
		ow = (b.Ne[0]+2*p0-d0*(a.Ne[0]-1)-1)/s0 + 1
	}
	return assert(op, ow > 0, `(OW > 0) && "b too small compared to a"`)
}

// Conv1DPh is ggml_conv_1d_ph(ctx, a, b, s, d): stride s, padding half the
// kernel, dilation d; im2col, then a product, checked as each step checks.
func (l *Lib) Conv1DPh(c *Context, a, b *Tensor, s0, d0 int64) (*Tensor, error) {
	const op = "ggml_conv_1d_ph"
	if err := l.room(op, c, 1); err != nil {
		return nil, err
	}
	if err := im2col1D(op, a, b, s0, a.Ne[0]/2, d0); err != nil {
		return nil, err
	}
	if err := assert(op, l.Contiguous(a) && a.Ne[3] == 1, "ggml_is_contiguous(a) && ggml_nelements(a) == ne0*ne1 (ggml_reshape_2d)"); err != nil {
		return nil, err
	}
	return wrap(l.b.Conv1DPh(c.h, a.c(), b.c(), int32(s0), int32(d0))), nil
}

// Conv1DDwPh is ggml_conv_1d_dw_ph(ctx, a, b, s, d), the depthwise one.
func (l *Lib) Conv1DDwPh(c *Context, a, b *Tensor, s0, d0 int64) (*Tensor, error) {
	const op = "ggml_conv_1d_dw_ph"
	if err := l.room(op, c, 1); err != nil {
		return nil, err
	}
	if err := assert(op, l.Contiguous(b) && b.Ne[3] == 1, "ggml_is_contiguous(b) && ggml_nelements(b) == ne0*ne1*ne2*ne3 (ggml_reshape_4d)"); err != nil {
		return nil, err
	}
	nb := *b
	nb.Ne = [4]int64{b.Ne[0], 1, b.Ne[1], b.Ne[2]}
	if err := im2col1D(op, a, &nb, s0, a.Ne[0]/2, d0); err != nil {
		return nil, err
	}
	if err := assert(op, b.Ne[1] != 0 && a.Ne[2]%b.Ne[1] == 0 && a.Ne[3] == 1, "ggml_can_mul_mat(im2col, a) && ggml_nelements(result) == ne0*ne1*ne2"); err != nil {
		return nil, err
	}
	return wrap(l.b.Conv1DDwPh(c.h, a.c(), b.c(), int32(s0), int32(d0))), nil
}
