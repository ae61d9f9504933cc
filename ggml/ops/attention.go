package ops

// ropeTypeVision is GGML_ROPE_TYPE_VISION.
const ropeTypeVision = 24

// RopeParams are the numbers of ggml_rope_ext and ggml_rope_multi after
// the tensors.
type RopeParams struct {
	NDims, Mode, NCtxOrig                                          int32
	FreqBase, FreqScale, ExtFactor, AttnFactor, BetaFast, BetaSlow float32
}

// ropeChecks are ggml_rope_impl's asserts.
func ropeChecks(op string, a, b, fr *Tensor, nDims, mode int64) error {
	if err := asserts(op, check{mode&1 == 0, "(mode & 1) == 0"},
		check{b.Ne[1] == 1 && b.Ne[2] == 1 && b.Ne[3] == 1 && b.Type == TypeI32, "ggml_is_vector(b) && b->type == GGML_TYPE_I32"}); err != nil {
		return err
	}
	var err error
	if mode&8 != 0 { // GGML_ROPE_TYPE_MROPE
		err = assert(op, a.Ne[2]*4 == b.Ne[0], "a->ne[2] * 4 == b->ne[0]")
	} else {
		err = assert(op, a.Ne[2] == b.Ne[0], "a->ne[2] == b->ne[0]")
	}
	if err != nil {
		return err
	}
	if fr != nil {
		return assert(op, fr.Type == TypeF32 && fr.Ne[0] >= nDims/2, "c->type == GGML_TYPE_F32 && c->ne[0] >= n_dims / 2")
	}
	return nil
}

// RopeExt is ggml_rope_ext(ctx, a, pos, freq_factors, ...); with back, the
// same rope as ggml_rope_ext_back (ROPE_BACK).
func (l *Lib) RopeExt(c *Context, a, pos, fr *Tensor, p RopeParams, back bool) (*Tensor, error) {
	op := "ggml_rope_ext"
	if back {
		op = "ggml_rope_ext_back"
	}
	if err := l.room(op, c, 1); err != nil {
		return nil, err
	}
	if err := ropeChecks(op, a, pos, fr, int64(p.NDims), int64(p.Mode)); err != nil {
		return nil, err
	}
	rope := l.b.RopeExt
	if back {
		rope = l.b.RopeExtBack
	}
	return wrap(rope(c.h, a.c(), pos.c(), fr.c(), p.NDims, p.Mode, p.NCtxOrig, p.FreqBase, p.FreqScale, p.ExtFactor, p.AttnFactor, p.BetaFast, p.BetaSlow)), nil
}

// RopeExtInplace is ggml_rope_ext_inplace: the rope of a, written over a
// (its result a view of a).
func (l *Lib) RopeExtInplace(c *Context, a, pos, fr *Tensor, p RopeParams) (*Tensor, error) {
	const op = "ggml_rope_ext_inplace"
	if err := l.room(op, c, 1); err != nil {
		return nil, err
	}
	if err := ropeChecks(op, a, pos, fr, int64(p.NDims), int64(p.Mode)); err != nil {
		return nil, err
	}
	return wrap(l.b.RopeExtInplace(c.h, a.c(), pos.c(), fr.c(), p.NDims, p.Mode, p.NCtxOrig, p.FreqBase, p.FreqScale, p.ExtFactor, p.AttnFactor, p.BetaFast, p.BetaSlow)), nil
}

// RopeMulti is ggml_rope_multi(ctx, a, pos, freq_factors, n_dims,
// sections, mode, ...).
func (l *Lib) RopeMulti(c *Context, a, pos, fr *Tensor, sections [4]int32, p RopeParams) (*Tensor, error) {
	const op = "ggml_rope_multi"
	if err := l.room(op, c, 1); err != nil {
		return nil, err
	}
	if err := ropeChecks(op, a, pos, fr, int64(p.NDims), int64(p.Mode)); err != nil {
		return nil, err
	}
	return wrap(l.b.RopeMulti(c.h, a.c(), pos.c(), fr.c(), p.NDims, &sections[0], p.Mode, p.NCtxOrig, p.FreqBase, p.FreqScale, p.ExtFactor, p.AttnFactor, p.BetaFast, p.BetaSlow)), nil
}

// Rope is ggml_rope(ctx, a, pos, n_dims, mode).
func (l *Lib) Rope(c *Context, a, pos *Tensor, nDims, mode int32) (*Tensor, error) {
	const op = "ggml_rope"
	if err := l.room(op, c, 1); err != nil {
		return nil, err
	}
	if err := ropeChecks(op, a, pos, nil, int64(nDims), int64(mode)); err != nil {
		return nil, err
	}
	return wrap(l.b.Rope(c.h, a.c(), pos.c(), nDims, mode)), nil
}

// RopeSetOffset is ggml_rope_set_offset(a, n_offs): a rope whose first
// n_offs dimensions stay unrotated (an op parameter of the rope itself).
func (l *Lib) RopeSetOffset(a *Tensor, n int64) (*Tensor, error) {
	const op = "ggml_rope_set_offset"
	if name := l.OpName(a.Op); name != "ROPE" && name != "ROPE_BACK" {
		return nil, assert(op, false, "a->op == GGML_OP_ROPE || a->op == GGML_OP_ROPE_BACK")
	}
	if err := asserts(op, check{n >= 0, "n_offs >= 0"}, check{a.OpParams[2] != ropeTypeVision, "mode != GGML_ROPE_TYPE_VISION"}); err != nil {
		return nil, err
	}
	return wrap(l.b.RopeSetOffset(a.c(), int32(n))), nil
}

// SoftMaxExt is ggml_soft_max_ext(ctx, a, mask, scale, max_bias).
func (l *Lib) SoftMaxExt(c *Context, a, mask *Tensor, scale, maxBias float32) (*Tensor, error) {
	const op = "ggml_soft_max_ext"
	if err := l.room(op, c, 1); err != nil {
		return nil, err
	}
	if err := assert(op, l.Contiguous(a), "ggml_is_contiguous(a)"); err != nil {
		return nil, err
	}
	if mask != nil {
		ok := (mask.Type == TypeF16 || mask.Type == TypeF32) && l.Contiguous(mask) && mask.Ne[0] == a.Ne[0] &&
			mask.Ne[1] >= a.Ne[1] && a.Ne[2]%mask.Ne[2] == 0 && a.Ne[3]%mask.Ne[3] == 0
		if err := assert(op, ok, "mask->ne[0] == a->ne[0] && mask->ne[1] >= a->ne[1] ..."); err != nil {
			return nil, err
		}
	}
	return wrap(l.b.SoftMaxExt(c.h, a.c(), mask.c(), scale, maxBias)), nil
}

// FlashAttnExt is ggml_flash_attn_ext(ctx, q, k, v, mask, scale, max_bias,
// logit_softcap).
func (l *Lib) FlashAttnExt(c *Context, q, k, v, mask *Tensor, scale, maxBias, softcap float32) (*Tensor, error) {
	const op = "ggml_flash_attn_ext"
	if err := l.room(op, c, 1); err != nil {
		return nil, err
	}
	if err := assert(op, canMulMat(k, q) && q.Ne[3] == k.Ne[3] && q.Ne[3] == v.Ne[3], "ggml_can_mul_mat(k, q)"); err != nil {
		return nil, err
	}
	if mask != nil {
		ok := mask.Type == TypeF16 && l.Contiguous(mask) && q.Ne[2]%mask.Ne[2] == 0 && q.Ne[3]%mask.Ne[3] == 0
		if err := assert(op, ok, "mask->type == GGML_TYPE_F16 && ggml_is_contiguous(mask)"); err != nil {
			return nil, err
		}
	}
	return wrap(l.b.FlashAttnExt(c.h, q.c(), k.c(), v.c(), mask.c(), scale, maxBias, softcap)), nil
}

// addSinks is the check of ggml_NAME_add_sinks(a, sinks): a is an op of
// name whose src slot is free, and the sinks are one f32 per head.
func (l *Lib) addSinks(op, name string, src int, a, sinks *Tensor) error {
	if sinks == nil {
		return nil
	}
	ok := l.OpName(a.Op) == name && a.Src[src] == nil && a.Src[0].Ne[2] == sinks.Ne[0] && sinks.Type == TypeF32
	return assert(op, ok, "a->op == GGML_OP_"+name+" && sinks->type == GGML_TYPE_F32")
}

// FlashAttnSinks is ggml_flash_attn_ext_add_sinks(a, sinks).
func (l *Lib) FlashAttnSinks(a, sinks *Tensor) error {
	if err := l.addSinks("ggml_flash_attn_ext_add_sinks", "FLASH_ATTN_EXT", 4, a, sinks); err != nil {
		return err
	}
	l.b.FlashAttnSinks(a.c(), sinks.c())
	return nil
}

// SoftMaxAddSinks is ggml_soft_max_add_sinks(a, sinks).
func (l *Lib) SoftMaxAddSinks(a, sinks *Tensor) error {
	if err := l.addSinks("ggml_soft_max_add_sinks", "SOFT_MAX", 2, a, sinks); err != nil {
		return err
	}
	l.b.SoftMaxAddSinks(a.c(), sinks.c())
	return nil
}
