package ops

// The convolutions, im2col and col2im, pooling, windows, resampling,
// reflection padding and roll of the multimodal projectors' graphs.
//
// ggml's convolutions built on im2col are several ops in a row (im2col, a
// product, reshapes, a permutation): each is checked here as ggml checks
// it, and the room for every tensor the whole call makes is checked
// first. Where ggml divides by a stride or a window size, a zero would end
// the process with a division fault rather than an assert: it is refused
// as one, the condition naming the divisor.

// TypeBF16 is GGML_TYPE_BF16.
const TypeBF16 = 30

// Interpolation modes and flags of ggml_interpolate and ggml_upscale (enum
// ggml_scale_mode, enum ggml_scale_flag).
const (
	ScaleNearest      = 0      // GGML_SCALE_MODE_NEAREST
	ScaleBilinear     = 1      // GGML_SCALE_MODE_BILINEAR
	ScaleBicubic      = 2      // GGML_SCALE_MODE_BICUBIC
	scaleModeCount    = 3      // GGML_SCALE_MODE_COUNT
	ScaleAlignCorners = 1 << 8 // GGML_SCALE_FLAG_ALIGN_CORNERS
	ScaleAntialias    = 1 << 9 // GGML_SCALE_FLAG_ANTIALIAS
)

// Pooling kinds of ggml_pool_1d and ggml_pool_2d (enum ggml_op_pool).
const (
	PoolMax = 0 // GGML_OP_POOL_MAX
	PoolAvg = 1 // GGML_OP_POOL_AVG
)

// convOut is the length of a convolution's output along one dimension
// (ggml_calc_conv_output_size): an input of n, a kernel of k, stride s (not
// zero), padding p on both sides and dilation d. The division truncates
// toward zero, as C's does; 2*p is an int product in C and wraps as one.
func convOut(n, k int64, s, p, d int32) int64 {
	return (n+int64(2*p)-int64(d)*(k-1)-1)/int64(s) + 1
}

// poolOut is the length of a pooling's output (ggml_calc_pool_output_size),
// computed in float as ggml computes it, then truncated.
func poolOut(n int64, k, s int32, p float32) int64 {
	return int64((float32(n)+2*p-float32(k))/float32(s) + 1)
}

// shaped is a copy of t's header with the shape ne and the strides of a
// contiguous tensor of t's type: what a reshape of t is, for the checks of
// the ops that follow it.
func (l *Lib) shaped(t *Tensor, ne [4]int64) *Tensor {
	r := *t
	r.Ne = ne
	r.Nb[0] = l.TypeSize(t.Type)
	r.Nb[1] = r.Nb[0] * uintptr(ne[0]/l.BlckSize(t.Type))
	for i := 2; i < 4; i++ {
		r.Nb[i] = r.Nb[i-1] * uintptr(ne[i-1])
	}
	return &r
}

// colType is the type of the columns ggml's im2col convolutions make of a
// kernel of type t: F16, or F32 for a BF16 kernel.
func colType(t int32) int32 {
	if t == TypeBF16 {
		return TypeF32
	}
	return TypeF16
}

// im2colShape is ggml_im2col's checks of the kernel a over the data b, and
// the shape of its result: [IC*KH*KW, OW, OH, N] in 2D, [IC*K, OW, N, 1] in
// 1D (where b is [W, IC, N, 1]).
func im2colShape(op string, a, b *Tensor, s0, s1, p0, p1, d0, d1 int32, is2D bool) ([4]int64, error) {
	var cs []check
	if is2D {
		cs = append(cs, check{a.Ne[2] == b.Ne[2], "a->ne[2] == b->ne[2]"},
			check{s1 != 0, "s1 != 0 (ggml divides by the stride)"})
	} else {
		cs = append(cs, check{b.Ne[1] == a.Ne[1], "b->ne[1] == a->ne[1]"}, check{b.Ne[3] == 1, "b->ne[3] == 1"})
	}
	cs = append(cs, check{s0 != 0, "s0 != 0 (ggml divides by the stride)"})
	if err := asserts(op, cs...); err != nil {
		return [4]int64{}, err
	}
	var oh int64
	if is2D {
		oh = convOut(b.Ne[1], a.Ne[1], s1, p1, d1)
	}
	ow := convOut(b.Ne[0], a.Ne[0], s0, p0, d0)
	if err := asserts(op, check{!is2D || oh > 0, `(!is_2D || OH > 0) && "b too small compared to a"`},
		check{ow > 0, `(OW > 0) && "b too small compared to a"`}); err != nil {
		return [4]int64{}, err
	}
	if is2D {
		return [4]int64{a.Ne[2] * a.Ne[1] * a.Ne[0], ow, oh, b.Ne[3]}, nil
	}
	return [4]int64{a.Ne[1] * a.Ne[0], ow, b.Ne[2], 1}, nil
}

// mulMatChecks are ggml_mul_mat's asserts of x times y, x and y as the
// convolutions make them. A zero divisor of ggml_can_mul_mat's broadcast
// fails the check (ggml would fault).
func mulMatChecks(op string, x, y *Tensor) error {
	ok := x.Ne[0] == y.Ne[0] && x.Ne[2] != 0 && x.Ne[3] != 0 && canMulMat(x, y)
	return asserts(op, check{ok, "ggml_can_mul_mat(a, b) (ggml_mul_mat)"}, check{!(x.Nb[0] > x.Nb[1]), "!ggml_is_transposed(a) (ggml_mul_mat)"})
}

// Im2Col is ggml_im2col(ctx, a, b, s0, s1, p0, p1, d0, d1, is_2D, dst_type):
// the patches of b that the kernel a covers, as rows of dst_type.
func (l *Lib) Im2Col(c *Context, a, b *Tensor, s0, s1, p0, p1, d0, d1 int32, is2D bool, dstType int32) (*Tensor, error) {
	const op = "ggml_im2col"
	if err := l.room(op, c, 1); err != nil {
		return nil, err
	}
	if _, err := im2colShape(op, a, b, s0, s1, p0, p1, d0, d1, is2D); err != nil {
		return nil, err
	}
	if err := assert(op, dstType >= 0 && dstType < TypeCount, "type >= 0 && type < GGML_TYPE_COUNT"); err != nil {
		return nil, err
	}
	return wrap(l.b.IM2Col(c.h, a.c(), b.c(), s0, s1, p0, p1, d0, d1, is2D, dstType)), nil
}

// Conv2D is ggml_conv_2d(ctx, a, b, s0, s1, p0, p1, d0, d1): the kernel a
// [KW, KH, IC, OC] over the data b [W, H, IC, N], as im2col, a product
// with the kernel's rows, a reshape and a permutation made contiguous: the
// result [OW, OH, OC, N] and six tensors before it.
func (l *Lib) Conv2D(c *Context, a, b *Tensor, s0, s1, p0, p1, d0, d1 int32) (*Tensor, error) {
	const op = "ggml_conv_2d"
	if err := l.room(op, c, 7); err != nil {
		return nil, err
	}
	ne, err := im2colShape(op, a, b, s0, s1, p0, p1, d0, d1, true)
	if err != nil {
		return nil, err
	}
	// the product's operands: im2col's rows, and the kernel reshaped to
	// [KW*KH*IC, OC] (ggml_reshape_2d wants it contiguous)
	if err := assert(op, l.Contiguous(a), "ggml_is_contiguous(a) (ggml_reshape_2d)"); err != nil {
		return nil, err
	}
	cols := l.shaped(&Tensor{Type: colType(a.Type)}, [4]int64{ne[0], ne[3] * ne[2] * ne[1], 1, 1})
	kern := l.shaped(a, [4]int64{a.Ne[0] * a.Ne[1] * a.Ne[2], a.Ne[3], 1, 1})
	if err := mulMatChecks(op, cols, kern); err != nil {
		return nil, err
	}
	return wrap(l.b.Conv2D(c.h, a.c(), b.c(), s0, s1, p0, p1, d0, d1)), nil
}

// Conv2DDw is ggml_conv_2d_dw(ctx, a, b, s0, s1, p0, p1, d0, d1): the
// depthwise convolution of b [W, H, C, N] by a [KW, KH, 1, C], one kernel
// per channel, through im2col and a product: the result [OW, OH, C, N] and
// six tensors before it.
func (l *Lib) Conv2DDw(c *Context, a, b *Tensor, s0, s1, p0, p1, d0, d1 int32) (*Tensor, error) {
	const op = "ggml_conv_2d_dw"
	if err := l.room(op, c, 7); err != nil {
		return nil, err
	}
	// the kernel and the data reshaped to one channel of a batch of
	// channels (ggml_reshape_4d wants them contiguous)
	if err := asserts(op, check{l.Contiguous(a), "ggml_is_contiguous(a) (ggml_reshape_4d)"}, check{l.Contiguous(b), "ggml_is_contiguous(b) (ggml_reshape_4d)"}); err != nil {
		return nil, err
	}
	na := l.shaped(a, [4]int64{a.Ne[0], a.Ne[1], 1, a.Ne[2] * a.Ne[3]})
	nb := l.shaped(b, [4]int64{b.Ne[0], b.Ne[1], 1, b.Ne[2] * b.Ne[3]})
	ne, err := im2colShape(op, na, nb, s0, s1, p0, p1, d0, d1, true)
	if err != nil {
		return nil, err
	}
	// the product of the kernels [KW*KH, 1, C] and the patches
	// [KW*KH, OW*OH, C, N]
	kern := l.shaped(a, [4]int64{a.Ne[0] * a.Ne[1], 1, a.Ne[2] * a.Ne[3], 1})
	cols := l.shaped(&Tensor{Type: colType(a.Type)}, [4]int64{ne[0], ne[2] * ne[1], b.Ne[2], b.Ne[3]})
	if err := mulMatChecks(op, kern, cols); err != nil {
		return nil, err
	}
	return wrap(l.b.Conv2DDw(c.h, a.c(), b.c(), s0, s1, p0, p1, d0, d1)), nil
}

// convDirectShape is the output shape of the direct 2D convolutions: an
// output of a negative length, which ggml would make without a check, is
// refused too.
func convDirectShape(op string, a, b *Tensor, s0, s1, p0, p1, d0, d1 int32, ne2 int64) ([4]int64, error) {
	if err := asserts(op, check{s0 != 0, "s0 != 0 (ggml divides by the stride)"}, check{s1 != 0, "s1 != 0 (ggml divides by the stride)"}); err != nil {
		return [4]int64{}, err
	}
	ne := [4]int64{convOut(b.Ne[0], a.Ne[0], s0, p0, d0), convOut(b.Ne[1], a.Ne[1], s1, p1, d1), ne2, b.Ne[3]}
	return ne, assert(op, ne[0] >= 0 && ne[1] >= 0, "ne[0] >= 0 && ne[1] >= 0 (an output of a negative length)")
}

// Conv2DDirect is ggml_conv_2d_direct(ctx, a, b, s0, s1, p0, p1, d0, d1):
// the kernel a [KW, KH, IC, OC] over b [W, H, IC, N] as one op
// (GGML_OP_CONV_2D), the result [OW, OH, OC, N] of b's type.
func (l *Lib) Conv2DDirect(c *Context, a, b *Tensor, s0, s1, p0, p1, d0, d1 int32) (*Tensor, error) {
	const op = "ggml_conv_2d_direct"
	if err := l.room(op, c, 1); err != nil {
		return nil, err
	}
	if err := assert(op, a.Ne[2] == b.Ne[2], "a->ne[2] == b->ne[2]"); err != nil {
		return nil, err
	}
	if _, err := convDirectShape(op, a, b, s0, s1, p0, p1, d0, d1, a.Ne[3]); err != nil {
		return nil, err
	}
	return wrap(l.b.Conv2DDirect(c.h, a.c(), b.c(), s0, s1, p0, p1, d0, d1)), nil
}

// contiguousChannels is ggml_is_contiguous_channels: the channels
// (dimension 2) of each element adjacent, as a permuted WHCN tensor has
// them.
func (l *Lib) contiguousChannels(t *Tensor) bool {
	return t.Nb[0] > t.Nb[2] && t.Nb[1] > t.Nb[0] && t.Nb[2] == l.TypeSize(t.Type)
}

// Conv2DDwDirect is ggml_conv_2d_dw_direct(ctx, a, b, s0, s1, p0, p1, d0,
// d1): the depthwise convolution of b [W, H, C, N] by a [KW, KH, 1, C] as
// one op (GGML_OP_CONV_2D_DW), the result [OW, OH, C, N] of b's type, laid
// out channels first where b is.
func (l *Lib) Conv2DDwDirect(c *Context, a, b *Tensor, s0, s1, p0, p1, d0, d1 int32) (*Tensor, error) {
	const op = "ggml_conv_2d_dw_direct"
	if err := l.room(op, c, 1); err != nil {
		return nil, err
	}
	if err := asserts(op, check{a.Ne[2] == 1, "a->ne[2] == 1"}, check{a.Ne[3] == b.Ne[2], "a->ne[3] == b->ne[2]"}); err != nil {
		return nil, err
	}
	if _, err := convDirectShape(op, a, b, s0, s1, p0, p1, d0, d1, b.Ne[2]); err != nil {
		return nil, err
	}
	if l.contiguousChannels(b) {
		if err := assert(op, l.BlckSize(b.Type) == 1, "ggml_blck_size(result->type) == 1"); err != nil {
			return nil, err
		}
	}
	return wrap(l.b.Conv2DDwDirect(c.h, a.c(), b.c(), s0, s1, p0, p1, d0, d1)), nil
}

// Conv1D is ggml_conv_1d(ctx, a, b, s0, p0, d0): the kernel a [K, IC, OC]
// over b [L, IC, N], as im2col, a product with the kernel's rows and a
// reshape: the result [OL, OC, N] and four tensors before it.
func (l *Lib) Conv1D(c *Context, a, b *Tensor, s0, p0, d0 int32) (*Tensor, error) {
	const op = "ggml_conv_1d"
	if err := l.room(op, c, 5); err != nil {
		return nil, err
	}
	ne, err := im2colShape(op, a, b, s0, 0, p0, 0, d0, 0, false)
	if err != nil {
		return nil, err
	}
	// the kernel reshaped to [K*IC, OC]
	if err := asserts(op, check{l.Contiguous(a), "ggml_is_contiguous(a) (ggml_reshape_2d)"},
		check{NElements(a) == a.Ne[0]*a.Ne[1]*a.Ne[2], "ggml_nelements(a) == ne0*ne1 (ggml_reshape_2d)"}); err != nil {
		return nil, err
	}
	cols := l.shaped(&Tensor{Type: colType(a.Type)}, [4]int64{ne[0], ne[2] * ne[1], 1, 1})
	kern := l.shaped(a, [4]int64{a.Ne[0] * a.Ne[1], a.Ne[2], 1, 1})
	if err := mulMatChecks(op, cols, kern); err != nil {
		return nil, err
	}
	return wrap(l.b.Conv1D(c.h, a.c(), b.c(), s0, p0, d0)), nil
}

// Conv1DDw is ggml_conv_1d_dw(ctx, a, b, s0, p0, d0): the depthwise 1D
// convolution of b [L, C, 1] by a [K, 1, C], one kernel per channel, as a
// reshape, im2col, a product and a reshape: the result [OL, C, 1] and three
// tensors before it.
func (l *Lib) Conv1DDw(c *Context, a, b *Tensor, s0, p0, d0 int32) (*Tensor, error) {
	const op = "ggml_conv_1d_dw"
	if err := l.room(op, c, 4); err != nil {
		return nil, err
	}
	// b reshaped to [L, 1, C, N]
	if err := asserts(op, check{l.Contiguous(b), "ggml_is_contiguous(b) (ggml_reshape_4d)"},
		check{NElements(b) == b.Ne[0]*b.Ne[1]*b.Ne[2], "ggml_nelements(b) == ne0*ne1*ne2*ne3 (ggml_reshape_4d)"}); err != nil {
		return nil, err
	}
	nb := l.shaped(b, [4]int64{b.Ne[0], 1, b.Ne[1], b.Ne[2]})
	ne, err := im2colShape(op, a, nb, s0, 0, p0, 0, d0, 0, false)
	if err != nil {
		return nil, err
	}
	// the product of the columns [K, OL, C] and the kernel, reshaped to
	// [OL, C, 1]
	cols := l.shaped(&Tensor{Type: colType(a.Type)}, ne)
	if err := mulMatChecks(op, cols, a); err != nil {
		return nil, err
	}
	if err := assert(op, ne[1]*a.Ne[1]*a.Ne[2]*a.Ne[3] == ne[1]*a.Ne[2], "ggml_nelements(a) == ne0*ne1*ne2 (ggml_reshape_3d)"); err != nil {
		return nil, err
	}
	return wrap(l.b.Conv1DDw(c.h, a.c(), b.c(), s0, p0, d0)), nil
}

// Col2Im1D is ggml_col2im_1d(ctx, a, s0, oc, p0): the columns a [K*OC, T]
// of a transposed 1D convolution summed back into a signal [T_out, OC],
// T_out = (T-1)*s0 + K - 2*p0.
func (l *Lib) Col2Im1D(c *Context, a *Tensor, s0, oc, p0 int32) (*Tensor, error) {
	const op = "ggml_col2im_1d"
	if err := l.room(op, c, 1); err != nil {
		return nil, err
	}
	if err := asserts(op,
		check{a.Ne[2] == 1 && a.Ne[3] == 1, "ggml_is_matrix(a)"},
		check{l.Contiguous(a), "ggml_is_contiguous(a)"},
		check{a.Type == TypeF32 || a.Type == TypeF16 || a.Type == TypeBF16, "a->type == GGML_TYPE_F32 || a->type == GGML_TYPE_F16 || a->type == GGML_TYPE_BF16"},
		check{s0 > 0, "s0 > 0"},
		check{oc > 0, "oc > 0"},
		check{p0 >= 0, "p0 >= 0"},
	); err != nil {
		return nil, err
	}
	k := a.Ne[0] / int64(oc)
	tOut := (a.Ne[1]-1)*int64(s0) + k - 2*int64(p0)
	if err := asserts(op, check{a.Ne[0] == k*int64(oc), "K_OC == K * oc"}, check{k > 0 && tOut > 0, "K > 0 && T_out > 0"}); err != nil {
		return nil, err
	}
	return wrap(l.b.Col2Im1D(c.h, a.c(), s0, oc, p0)), nil
}

// Pool1D is ggml_pool_1d(ctx, a, op, k0, s0, p0): max or average (PoolMax,
// PoolAvg) over windows of k0 along dimension 0, an F32 result.
func (l *Lib) Pool1D(c *Context, a *Tensor, pool, k0, s0, p0 int32) (*Tensor, error) {
	const op = "ggml_pool_1d"
	if err := l.room(op, c, 1); err != nil {
		return nil, err
	}
	// (a zero stride makes ggml's length a NaN or an infinity, converted
	// to an integer as the machine does: refused as the assert)
	if err := assert(op, s0 != 0 && poolOut(a.Ne[0], k0, s0, float32(p0)) > 0, "ne[0] > 0"); err != nil {
		return nil, err
	}
	return wrap(l.b.Pool1D(c.h, a.c(), pool, k0, s0, p0)), nil
}

// PadReflect1D is ggml_pad_reflect_1d(ctx, a, p0, p1): dimension 0 padded
// by p0 and p1 elements mirrored from its ends.
func (l *Lib) PadReflect1D(c *Context, a *Tensor, p0, p1 int32) (*Tensor, error) {
	const op = "ggml_pad_reflect_1d"
	if err := l.room(op, c, 1); err != nil {
		return nil, err
	}
	if err := asserts(op,
		check{p0 >= 0, "p0 >= 0"},
		check{p1 >= 0, "p1 >= 0"},
		check{int64(p0) < a.Ne[0], "p0 < a->ne[0]"},
		check{int64(p1) < a.Ne[0], "p1 < a->ne[0]"},
		check{l.Contiguous(a), "ggml_is_contiguous(a)"},
		check{a.Type == TypeF32, "a->type == GGML_TYPE_F32"},
	); err != nil {
		return nil, err
	}
	return wrap(l.b.PadReflect1D(c.h, a.c(), p0, p1)), nil
}

// Roll is ggml_roll(ctx, a, shift0, shift1, shift2, shift3): a's elements
// shifted circularly along each dimension.
func (l *Lib) Roll(c *Context, a *Tensor, shift [4]int32) (*Tensor, error) {
	const op = "ggml_roll"
	if err := l.room(op, c, 1); err != nil {
		return nil, err
	}
	abs := func(x int32) int64 {
		if x < 0 {
			return -int64(x)
		}
		return int64(x)
	}
	if err := asserts(op,
		check{a.Nb[0] == l.TypeSize(a.Type), "a->nb[0] == ggml_type_size(a->type)"},
		check{abs(shift[0]) < a.Ne[0], "abs(shift0) < a->ne[0]"},
		check{abs(shift[1]) < a.Ne[1], "abs(shift1) < a->ne[1]"},
		check{abs(shift[2]) < a.Ne[2], "abs(shift2) < a->ne[2]"},
		check{abs(shift[3]) < a.Ne[3], "abs(shift3) < a->ne[3]"},
	); err != nil {
		return nil, err
	}
	return wrap(l.b.Roll(c.h, a.c(), shift[0], shift[1], shift[2], shift[3])), nil
}

// interpolateChecks are ggml_interpolate_impl's asserts, and the refusal
// of a negative length (a tensor ggml would make without a check).
func interpolateChecks(op string, a *Tensor, ne [4]int64, mode uint32) error {
	return asserts(op,
		check{mode&0xFF < scaleModeCount, "(mode & 0xFF) < GGML_SCALE_MODE_COUNT"},
		check{mode&ScaleAntialias == 0 || mode&0xFF == ScaleBilinear, "!(mode & GGML_SCALE_FLAG_ANTIALIAS) || (mode & 0xFF) == GGML_SCALE_MODE_BILINEAR"},
		check{a.Type == TypeF32, "a->type == GGML_TYPE_F32"},
		check{ne[0] >= 0 && ne[1] >= 0 && ne[2] >= 0 && ne[3] >= 0, "ne >= 0 (a tensor of a negative length)"},
	)
}

// Interpolate is ggml_interpolate(ctx, a, ne0, ne1, ne2, ne3, mode): a
// resampled to the shape ne, mode a scale mode (ScaleNearest,
// ScaleBilinear, ScaleBicubic) with its flags.
func (l *Lib) Interpolate(c *Context, a *Tensor, ne [4]int64, mode uint32) (*Tensor, error) {
	const op = "ggml_interpolate"
	if err := l.room(op, c, 1); err != nil {
		return nil, err
	}
	if err := interpolateChecks(op, a, ne, mode); err != nil {
		return nil, err
	}
	return wrap(l.b.Interpolate(c.h, a.c(), ne[0], ne[1], ne[2], ne[3], mode)), nil
}

// Upscale is ggml_upscale(ctx, a, scale_factor, mode): dimensions 0 and 1
// of a scaled by the factor.
func (l *Lib) Upscale(c *Context, a *Tensor, factor, mode int32) (*Tensor, error) {
	const op = "ggml_upscale"
	if err := l.room(op, c, 1); err != nil {
		return nil, err
	}
	if err := assert(op, factor > 1, "scale_factor > 1"); err != nil {
		return nil, err
	}
	ne := [4]int64{a.Ne[0] * int64(factor), a.Ne[1] * int64(factor), a.Ne[2], a.Ne[3]}
	if err := interpolateChecks(op, a, ne, uint32(mode)); err != nil {
		return nil, err
	}
	return wrap(l.b.Upscale(c.h, a.c(), factor, mode)), nil
}

// WinPart is ggml_win_part(ctx, a, w): a [C, W, H] cut into windows of w by
// w (padded to whole windows), [C, w, w, windows].
func (l *Lib) WinPart(c *Context, a *Tensor, w int32) (*Tensor, error) {
	const op = "ggml_win_part"
	if err := l.room(op, c, 1); err != nil {
		return nil, err
	}
	if err := asserts(op, check{a.Ne[3] == 1, "a->ne[3] == 1"}, check{a.Type == TypeF32, "a->type == GGML_TYPE_F32"},
		check{w > 0, "w > 0 (ggml divides by the window size)"}); err != nil {
		return nil, err
	}
	return wrap(l.b.WinPart(c.h, a.c(), w)), nil
}

// WinUnpart is ggml_win_unpart(ctx, a, w0, h0, w): windows of w by w put
// back together into [C, w0, h0], the padding dropped.
func (l *Lib) WinUnpart(c *Context, a *Tensor, w0, h0, w int32) (*Tensor, error) {
	const op = "ggml_win_unpart"
	if err := l.room(op, c, 1); err != nil {
		return nil, err
	}
	if err := asserts(op, check{a.Type == TypeF32, "a->type == GGML_TYPE_F32"},
		check{w0 >= 0 && h0 >= 0, "w0 >= 0 && h0 >= 0 (a tensor of a negative length)"}); err != nil {
		return nil, err
	}
	return wrap(l.b.WinUnpart(c.h, a.c(), w0, h0, w)), nil
}
