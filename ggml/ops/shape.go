package ops

import "fmt"

// Reshape is ggml_reshape_Nd(ctx, a, ne0..) for nd (1 to 4) dimensions.
func (l *Lib) Reshape(c *Context, a *Tensor, nd int, ne [4]int64) (*Tensor, error) {
	op := fmt.Sprintf("ggml_reshape_%dd", nd)
	if err := l.room(op, c, 1); err != nil {
		return nil, err
	}
	for i := nd; i < 4; i++ {
		ne[i] = 1
	}
	if err := asserts(op, check{l.Contiguous(a), "ggml_is_contiguous(a)"},
		check{NElements(a) == ne[0]*ne[1]*ne[2]*ne[3], "ggml_nelements(a) == ne0*ne1*..."}); err != nil {
		return nil, err
	}
	switch nd {
	case 1:
		return wrap(l.b.Reshape1D(c.h, a.c(), ne[0])), nil
	case 2:
		return wrap(l.b.Reshape2D(c.h, a.c(), ne[0], ne[1])), nil
	case 3:
		return wrap(l.b.Reshape3D(c.h, a.c(), ne[0], ne[1], ne[2])), nil
	}
	return wrap(l.b.Reshape4D(c.h, a.c(), ne[0], ne[1], ne[2], ne[3])), nil
}

// View is ggml_view_Nd(ctx, a, ne0.., nb1.., offset) for nd (1 to 4)
// dimensions: nb[1:nd] are the strides.
func (l *Lib) View(c *Context, a *Tensor, nd int, ne [4]int64, nb [4]uintptr, offset uintptr) (*Tensor, error) {
	op := fmt.Sprintf("ggml_view_%dd", nd)
	if err := l.room(op, c, 1); err != nil {
		return nil, err
	}
	for i := nd; i < 4; i++ {
		ne[i] = 1
	}
	if err := l.viewFits(op, a, nd, ne, uint64(offset)); err != nil {
		return nil, err
	}
	switch nd {
	case 1:
		return wrap(l.b.View1D(c.h, a.c(), ne[0], offset)), nil
	case 2:
		return wrap(l.b.View2D(c.h, a.c(), ne[0], ne[1], nb[1], offset)), nil
	case 3:
		return wrap(l.b.View3D(c.h, a.c(), ne[0], ne[1], ne[2], nb[1], nb[2], offset)), nil
	}
	return wrap(l.b.View4D(c.h, a.c(), ne[0], ne[1], ne[2], ne[3], nb[1], nb[2], nb[3], offset)), nil
}

// Permute is ggml_permute(ctx, a, ax0, ax1, ax2, ax3).
func (l *Lib) Permute(c *Context, a *Tensor, ax [4]int64) (*Tensor, error) {
	const op = "ggml_permute"
	if err := l.room(op, c, 1); err != nil {
		return nil, err
	}
	var seen [4]bool
	for _, x := range ax {
		if err := assert(op, x >= 0 && x < 4 && !seen[x&3], "axis0 != axis1 ..."); err != nil {
			return nil, err
		}
		seen[x] = true
	}
	return wrap(l.b.Permute(c.h, a.c(), int32(ax[0]), int32(ax[1]), int32(ax[2]), int32(ax[3]))), nil
}

// ContND is ggml_cont_Nd(ctx, a, ne0..) for nd (1 to 4) dimensions.
func (l *Lib) ContND(c *Context, a *Tensor, nd int, ne [4]int64) (*Tensor, error) {
	op := fmt.Sprintf("ggml_cont_%dd", nd)
	if err := l.room(op, c, 1); err != nil {
		return nil, err
	}
	for i := nd; i < 4; i++ {
		ne[i] = 1
	}
	if err := assert(op, NElements(a) == ne[0]*ne[1]*ne[2]*ne[3], "ggml_nelements(a) == (ne0*ne1*ne2*ne3)"); err != nil {
		return nil, err
	}
	switch nd {
	case 2:
		return wrap(l.b.Cont2D(c.h, a.c(), ne[0], ne[1])), nil
	case 3:
		return wrap(l.b.Cont3D(c.h, a.c(), ne[0], ne[1], ne[2])), nil
	}
	return wrap(l.b.Cont4D(c.h, a.c(), ne[0], ne[1], ne[2], ne[3])), nil
}

// Cast is ggml_cast(ctx, a, type).
func (l *Lib) Cast(c *Context, a *Tensor, typ int32) (*Tensor, error) {
	if err := l.room("ggml_cast", c, 1); err != nil {
		return nil, err
	}
	return wrap(l.b.Cast(c.h, a.c(), typ)), nil
}

// repeatable is ggml_can_repeat of a to ne.
func repeatable(a *Tensor, ne [4]int64) bool {
	if NElements(a) == 0 {
		return true
	}
	for i := range ne {
		if a.Ne[i] == 0 || ne[i]%a.Ne[i] != 0 {
			return false
		}
	}
	return true
}

// Repeat is ggml_repeat(ctx, a, b): a repeated to b's shape.
func (l *Lib) Repeat(c *Context, a, b *Tensor) (*Tensor, error) {
	const op = "ggml_repeat"
	if err := l.room(op, c, 1); err != nil {
		return nil, err
	}
	if err := assert(op, repeatable(a, b.Ne), "ggml_can_repeat(a, b)"); err != nil {
		return nil, err
	}
	return wrap(l.b.Repeat(c.h, a.c(), b.c())), nil
}

// Repeat4D is ggml_repeat_4d(ctx, a, ne0, ne1, ne2, ne3).
func (l *Lib) Repeat4D(c *Context, a *Tensor, ne [4]int64) (*Tensor, error) {
	const op = "ggml_repeat_4d"
	if err := l.room(op, c, 1); err != nil {
		return nil, err
	}
	if err := assert(op, repeatable(a, ne), "can_repeat"); err != nil {
		return nil, err
	}
	return wrap(l.b.Repeat4D(c.h, a.c(), ne[0], ne[1], ne[2], ne[3])), nil
}

// Concat is ggml_concat(ctx, a, b, dim).
func (l *Lib) Concat(c *Context, a, b *Tensor, dim int64) (*Tensor, error) {
	const op = "ggml_concat"
	if err := l.room(op, c, 1); err != nil {
		return nil, err
	}
	ok := dim >= 0 && dim < 4 && a.Type == b.Type
	for d := 0; ok && d < 4; d++ {
		ok = int64(d) == dim || a.Ne[d] == b.Ne[d]
	}
	if err := assert(op, ok, "dim >= 0 && dim < GGML_MAX_DIMS && a->type == b->type && a->ne[d] == b->ne[d]"); err != nil {
		return nil, err
	}
	return wrap(l.b.Concat(c.h, a.c(), b.c(), int32(dim))), nil
}

// Pad is ggml_pad(ctx, a, p0, p1, p2, p3).
func (l *Lib) Pad(c *Context, a *Tensor, p [4]int32) (*Tensor, error) {
	if err := l.room("ggml_pad", c, 1); err != nil {
		return nil, err
	}
	return wrap(l.b.Pad(c.h, a.c(), p[0], p[1], p[2], p[3])), nil
}

// PadExt is ggml_pad_ext(ctx, a, lp0, rp0, lp1, rp1, lp2, rp2, lp3, rp3).
func (l *Lib) PadExt(c *Context, a *Tensor, p [8]int32) (*Tensor, error) {
	const op = "ggml_pad_ext"
	if err := l.room(op, c, 1); err != nil {
		return nil, err
	}
	for d := 0; d < 4; d++ {
		if err := assert(op, a.Ne[d]+int64(p[2*d])+int64(p[2*d+1]) >= 0, "a padded length >= 0"); err != nil {
			return nil, err
		}
	}
	return wrap(l.b.PadExt(c.h, a.c(), p[0], p[1], p[2], p[3], p[4], p[5], p[6], p[7])), nil
}
