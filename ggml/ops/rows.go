package ops

import "math"

// SetRows is ggml_set_rows(ctx, a, b, ix): b's rows into a at ix.
func (l *Lib) SetRows(c *Context, a, b, ix *Tensor) (*Tensor, error) {
	const op = "ggml_set_rows"
	if err := l.room(op, c, 1); err != nil {
		return nil, err
	}
	if err := asserts(op,
		check{a.Ne[0] == b.Ne[0], "a->ne[0] == b->ne[0]"},
		check{a.Ne[2] == b.Ne[2], "a->ne[2] == b->ne[2]"},
		check{a.Ne[3] == b.Ne[3], "a->ne[3] == b->ne[3]"},
		check{b.Ne[1] == ix.Ne[0], "b->ne[1] == c->ne[0]"},
		check{ix.Ne[1] != 0 && b.Ne[2]%ix.Ne[1] == 0, "b->ne[2] % c->ne[1] == 0"},
		check{ix.Ne[2] != 0 && b.Ne[3]%ix.Ne[2] == 0, "b->ne[3] % c->ne[2] == 0"},
		check{ix.Ne[3] == 1, "c->ne[3] == 1"},
		check{b.Type == TypeF32 || b.Type == TypeF16, "b->type == GGML_TYPE_F32 || b->type == GGML_TYPE_F16"},
		check{ix.Type == TypeI64 || ix.Type == TypeI32, "c->type == GGML_TYPE_I64 || c->type == GGML_TYPE_I32"},
		check{l.ContiguousRows(a), "ggml_is_contiguous_rows(a)"},
		check{l.ContiguousRows(b), "ggml_is_contiguous_rows(b)"},
	); err != nil {
		return nil, err
	}
	return wrap(l.b.SetRows(c.h, a.c(), b.c(), ix.c())), nil
}

// Set1D is ggml_set_1d(ctx, a, b, offset).
func (l *Lib) Set1D(c *Context, a, b *Tensor, offset int64) (*Tensor, error) {
	const op = "ggml_set_1d"
	if err := l.room(op, c, 1); err != nil {
		return nil, err
	}
	if err := asserts(op, check{NElements(a) >= NElements(b), "ggml_nelements(a) >= ggml_nelements(b)"},
		check{offset >= 0 && offset < 1<<30, "offset < (size_t)(1 << 30)"}); err != nil {
		return nil, err
	}
	return wrap(l.b.Set1D(c.h, a.c(), b.c(), uintptr(offset))), nil
}

// SetInplace is ggml_set_inplace(ctx, a, b, nb1, nb2, nb3, offset).
func (l *Lib) SetInplace(c *Context, a, b *Tensor, nb1, nb2, nb3 uintptr, offset int64) (*Tensor, error) {
	const op = "ggml_set_inplace"
	if err := l.room(op, c, 1); err != nil {
		return nil, err
	}
	if err := asserts(op, check{NElements(a) >= NElements(b), "ggml_nelements(a) >= ggml_nelements(b)"},
		check{uint64(offset) < 1<<30, "offset < (size_t)(1 << 30)"}); err != nil {
		return nil, err
	}
	return wrap(l.b.SetInplace(c.h, a.c(), b.c(), nb1, nb2, nb3, uintptr(offset))), nil
}

// ArgsortTopK is ggml_argsort_top_k(ctx, a, k): it makes two tensors.
func (l *Lib) ArgsortTopK(c *Context, a *Tensor, k int64) (*Tensor, error) {
	const op = "ggml_argsort_top_k"
	if err := l.room(op, c, 1); err != nil {
		return nil, err
	}
	if err := assert(op, a.Ne[0] <= math.MaxInt32 && a.Ne[0] >= k && k >= 0, "a->ne[0] >= k"); err != nil {
		return nil, err
	}
	if err := l.room(op, c, 2); err != nil {
		return nil, err
	}
	return wrap(l.b.ArgsortTopK(c.h, a.c(), int32(k))), nil
}

// TopK is ggml_top_k(ctx, a, k).
func (l *Lib) TopK(c *Context, a *Tensor, k int64) (*Tensor, error) {
	const op = "ggml_top_k"
	if err := l.room(op, c, 1); err != nil {
		return nil, err
	}
	if err := assert(op, a.Ne[0] <= math.MaxInt32 && a.Ne[0] >= k && k >= 0, "a->ne[0] >= k"); err != nil {
		return nil, err
	}
	return wrap(l.b.TopK(c.h, a.c(), int32(k))), nil
}

// MulMatID is ggml_mul_mat_id(ctx, as, b, ids): the experts ids name.
func (l *Lib) MulMatID(c *Context, as, b, ids *Tensor) (*Tensor, error) {
	const op = "ggml_mul_mat_id"
	if err := l.room(op, c, 1); err != nil {
		return nil, err
	}
	ok := !(as.Nb[0] > as.Nb[1]) && ids.Type == TypeI32 && as.Ne[3] == 1 && b.Ne[3] == 1 &&
		ids.Ne[2] == 1 && ids.Ne[3] == 1 && ids.Ne[1] == b.Ne[2] && as.Ne[0] == b.Ne[0] && b.Ne[1] != 0 && ids.Ne[0]%b.Ne[1] == 0
	if err := assert(op, ok, "as->ne[0] == b->ne[0] && ids->ne[1] == b->ne[2] && ids->ne[0] % b->ne[1] == 0 ..."); err != nil {
		return nil, err
	}
	return wrap(l.b.MulMatID(c.h, as.c(), b.c(), ids.c())), nil
}

// AddID is ggml_add_id(ctx, a, b, ids).
func (l *Lib) AddID(c *Context, a, b, ids *Tensor) (*Tensor, error) {
	const op = "ggml_add_id"
	if err := l.room(op, c, 1); err != nil {
		return nil, err
	}
	ok := a.Ne[0] == b.Ne[0] && a.Ne[1] == ids.Ne[0] && a.Ne[2] == ids.Ne[1] && ids.Type == TypeI32
	if err := assert(op, ok, "a->ne[0] == b->ne[0] && a->ne[1] == ids->ne[0] && a->ne[2] == ids->ne[1]"); err != nil {
		return nil, err
	}
	return wrap(l.b.AddID(c.h, a.c(), b.c(), ids.c())), nil
}

// Argmax is ggml_argmax(ctx, a).
func (l *Lib) Argmax(c *Context, a *Tensor) (*Tensor, error) {
	const op = "ggml_argmax"
	if err := l.room(op, c, 1); err != nil {
		return nil, err
	}
	if err := asserts(op, check{a.Ne[2] == 1 && a.Ne[3] == 1, "ggml_is_matrix(a)"}, check{a.Ne[0] <= 1<<31-1, "a->ne[0] <= INT32_MAX"}); err != nil {
		return nil, err
	}
	return wrap(l.b.Argmax(c.h, a.c())), nil
}

// Arange is ggml_arange(ctx, start, stop, step). (A step that makes no
// element passes ggml's check and would make a tensor of a negative
// length: refused too.)
func (l *Lib) Arange(c *Context, start, stop, step float32) (*Tensor, error) {
	const op = "ggml_arange"
	if err := l.room(op, c, 1); err != nil {
		return nil, err
	}
	if err := asserts(op, check{stop > start, "stop > start"}, check{step > 0, "step > 0"}); err != nil {
		return nil, err
	}
	return wrap(l.b.Arange(c.h, start, stop, step)), nil
}

// Diag is ggml_diag(ctx, a).
func (l *Lib) Diag(c *Context, a *Tensor) (*Tensor, error) {
	const op = "ggml_diag"
	if err := l.room(op, c, 1); err != nil {
		return nil, err
	}
	if err := assert(op, a.Ne[1] == 1, "a->ne[1] == 1"); err != nil {
		return nil, err
	}
	return wrap(l.b.Diag(c.h, a.c())), nil
}

// Cumsum is ggml_cumsum(ctx, a).
func (l *Lib) Cumsum(c *Context, a *Tensor) (*Tensor, error) {
	const op = "ggml_cumsum"
	if err := l.room(op, c, 1); err != nil {
		return nil, err
	}
	if err := assert(op, a.Type == TypeF32, "a->type == GGML_TYPE_F32"); err != nil {
		return nil, err
	}
	return wrap(l.b.Cumsum(c.h, a.c())), nil
}

// Tri is ggml_tri(ctx, a, type).
func (l *Lib) Tri(c *Context, a *Tensor, typ int32) (*Tensor, error) {
	const op = "ggml_tri"
	if err := l.room(op, c, 1); err != nil {
		return nil, err
	}
	if err := asserts(op, check{a.Type == TypeF32, "a->type == GGML_TYPE_F32"}, check{l.Contiguous(a), "ggml_is_contiguous(a)"},
		check{a.Ne[0] == a.Ne[1], "a->ne[0] == a->ne[1]"}); err != nil {
		return nil, err
	}
	return wrap(l.b.Tri(c.h, a.c(), typ)), nil
}

// SolveTri is ggml_solve_tri(ctx, a, b, left, lower, uni).
func (l *Lib) SolveTri(c *Context, a, b *Tensor, left, lower, uni bool) (*Tensor, error) {
	const op = "ggml_solve_tri"
	if err := l.room(op, c, 1); err != nil {
		return nil, err
	}
	if err := asserts(op,
		check{a.Type == TypeF32, "a->type == GGML_TYPE_F32"},
		check{b.Type == TypeF32, "b->type == GGML_TYPE_F32"},
		check{a.Ne[0] == a.Ne[1], "a->ne[0] == a->ne[1]"},
		check{a.Ne[1] == b.Ne[1], "a->ne[1] == b->ne[1]"},
		check{a.Ne[2] == b.Ne[2], "a->ne[2] == b->ne[2]"},
		check{a.Ne[3] == b.Ne[3], "a->ne[3] == b->ne[3]"},
		check{l.Contiguous(a), "ggml_is_contiguous(a)"},
		check{l.Contiguous(b), "ggml_is_contiguous(b)"},
		check{lower && left && !uni, "lower && left && !uni"},
	); err != nil {
		return nil, err
	}
	return wrap(l.b.SolveTri(c.h, a.c(), b.c(), left, lower, uni)), nil
}

// Pool2D is ggml_pool_2d(ctx, a, op, k0, k1, s0, s1, p0, p1).
func (l *Lib) Pool2D(c *Context, a *Tensor, pool int32, k0, k1, s0, s1 int64, p0, p1 float32) (*Tensor, error) {
	const op = "ggml_pool_2d"
	if err := l.room(op, c, 1); err != nil {
		return nil, err
	}
	if err := asserts(op, check{s0 != 0 && s1 != 0, "s0 != 0 && s1 != 0 (ggml divides by the strides)"}); err != nil {
		return nil, err
	}
	// ggml_calc_pool_output_size, in float as ggml computes it
	size := func(ins, ks, s int64, p float32) int64 { return int64((float32(ins)+2*p-float32(ks))/float32(s) + 1) }
	if err := asserts(op, check{size(a.Ne[0], k0, s0, p0) > 0, "ne[0] > 0"}, check{size(a.Ne[1], k1, s1, p1) > 0, "ne[1] > 0"}); err != nil {
		return nil, err
	}
	return wrap(l.b.Pool2D(c.h, a.c(), pool, int32(k0), int32(k1), int32(s0), int32(s1), p0, p1)), nil
}
