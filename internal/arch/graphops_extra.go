package arch

// extraOps registers the ops of the chunked linear attention (cumulative
// sums, triangular masks and solves), of the sparse attentions' index
// arithmetic, and the remaining shape ops, each checked as ggml.c checks
// it.
func extraOps(out map[string]builtinFunc) {
	// ggml_cont_1d(ctx, a, ne0) and ggml_cont_4d(ctx, a, ne0, ne1, ne2, ne3)
	for _, nd := range []int{1, 4} {
		name := map[int]string{1: "ggml_cont_1d", 4: "ggml_cont_4d"}[nd]
		op(out, name, 2+nd, func(c *gcall) (Val, error) {
			ctx, ts, err := c.ctxTensors(1)
			if err != nil {
				return vVoid, err
			}
			ne := [4]int64{1, 1, 1, 1}
			for i := 0; i < nd; i++ {
				ne[i] = c.i(2 + i)
			}
			if err := c.assert(nelements(ts[0]) == ne[0]*ne[1]*ne[2]*ne[3], "ggml_nelements(a) == (ne0*ne1*ne2*ne3)"); err != nil {
				return vVoid, err
			}
			return tval(c.lib().Cont4D(ctx, ts[0], ne[0], ne[1], ne[2], ne[3])), nil
		})
	}
	op(out, "ggml_argmax", 2, func(c *gcall) (Val, error) {
		ctx, ts, err := c.ctxTensors(1)
		if err != nil {
			return vVoid, err
		}
		a := ts[0]
		if err := c.asserts(check{a.Ne[2] == 1 && a.Ne[3] == 1, "ggml_is_matrix(a)"}, check{a.Ne[0] <= 1<<31-1, "a->ne[0] <= INT32_MAX"}); err != nil {
			return vVoid, err
		}
		return tval(c.lib().Argmax(ctx, a)), nil
	})
	op(out, "ggml_arange", 4, func(c *gcall) (Val, error) {
		ctx, err := c.ctx(0)
		if err != nil {
			return vVoid, err
		}
		start, stop, step := c.f32(1), c.f32(2), c.f32(3)
		// (a step that makes no element passes ggml's check and would make
		// a tensor of a negative length: refused too)
		if err := c.asserts(check{stop > start, "stop > start"}, check{step > 0, "step > 0"}); err != nil {
			return vVoid, err
		}
		return tval(c.lib().Arange(ctx, start, stop, step)), nil
	})
	op(out, "ggml_diag", 2, func(c *gcall) (Val, error) {
		ctx, ts, err := c.ctxTensors(1)
		if err != nil {
			return vVoid, err
		}
		if err := c.assert(ts[0].Ne[1] == 1, "a->ne[1] == 1"); err != nil {
			return vVoid, err
		}
		return tval(c.lib().Diag(ctx, ts[0])), nil
	})
	op(out, "ggml_pad_ext", 10, func(c *gcall) (Val, error) {
		ctx, ts, err := c.ctxTensors(1)
		if err != nil {
			return vVoid, err
		}
		a := ts[0]
		var p [8]int32
		for i := range p {
			p[i] = int32(c.i(2 + i))
		}
		for d := 0; d < 4; d++ {
			if err := c.assert(a.Ne[d]+int64(p[2*d])+int64(p[2*d+1]) >= 0, "a padded length >= 0"); err != nil {
				return vVoid, err
			}
		}
		return tval(c.lib().PadExt(ctx, a, p[0], p[1], p[2], p[3], p[4], p[5], p[6], p[7])), nil
	})
	// ggml_set_inplace(ctx, a, b, nb1, nb2, nb3, offset)
	op(out, "ggml_set_inplace", 7, func(c *gcall) (Val, error) {
		ctx, ts, err := c.ctxTensors(2)
		if err != nil {
			return vVoid, err
		}
		off := c.i(6)
		if err := c.asserts(check{nelements(ts[0]) >= nelements(ts[1]), "ggml_nelements(a) >= ggml_nelements(b)"},
			check{uint64(off) < 1<<30, "offset < (size_t)(1 << 30)"}); err != nil {
			return vVoid, err
		}
		return tval(c.lib().SetInplace(ctx, ts[0], ts[1], uintptr(c.i(3)), uintptr(c.i(4)), uintptr(c.i(5)), uintptr(off))), nil
	})
	op(out, "ggml_cumsum", 2, func(c *gcall) (Val, error) {
		ctx, ts, err := c.ctxTensors(1)
		if err != nil {
			return vVoid, err
		}
		if err := c.assert(ts[0].Type == typeF32, "a->type == GGML_TYPE_F32"); err != nil {
			return vVoid, err
		}
		return tval(c.lib().Cumsum(ctx, ts[0])), nil
	})
	op(out, "ggml_tri", 3, func(c *gcall) (Val, error) {
		ctx, ts, err := c.ctxTensors(1)
		if err != nil {
			return vVoid, err
		}
		a := ts[0]
		if err := c.asserts(check{a.Type == typeF32, "a->type == GGML_TYPE_F32"}, check{c.g.contiguous(a), "ggml_is_contiguous(a)"},
			check{a.Ne[0] == a.Ne[1], "a->ne[0] == a->ne[1]"}); err != nil {
			return vVoid, err
		}
		return tval(c.lib().Tri(ctx, a, int32(c.i(2)))), nil
	})
	// ggml_solve_tri(ctx, a, b, left, lower, uni)
	op(out, "ggml_solve_tri", 6, func(c *gcall) (Val, error) {
		ctx, ts, err := c.ctxTensors(2)
		if err != nil {
			return vVoid, err
		}
		a, b := ts[0], ts[1]
		left, lower, uni := c.v[3].truthy(), c.v[4].truthy(), c.v[5].truthy()
		if err := c.asserts(
			check{a.Type == typeF32, "a->type == GGML_TYPE_F32"},
			check{b.Type == typeF32, "b->type == GGML_TYPE_F32"},
			check{a.Ne[0] == a.Ne[1], "a->ne[0] == a->ne[1]"},
			check{a.Ne[1] == b.Ne[1], "a->ne[1] == b->ne[1]"},
			check{a.Ne[2] == b.Ne[2], "a->ne[2] == b->ne[2]"},
			check{a.Ne[3] == b.Ne[3], "a->ne[3] == b->ne[3]"},
			check{c.g.contiguous(a), "ggml_is_contiguous(a)"},
			check{c.g.contiguous(b), "ggml_is_contiguous(b)"},
			check{lower && left && !uni, "lower && left && !uni"},
		); err != nil {
			return vVoid, err
		}
		return tval(c.lib().SolveTri(ctx, a, b, left, lower, uni)), nil
	})
	// ggml_pool_2d(ctx, a, op, k0, k1, s0, s1, p0, p1)
	op(out, "ggml_pool_2d", 9, func(c *gcall) (Val, error) {
		ctx, ts, err := c.ctxTensors(1)
		if err != nil {
			return vVoid, err
		}
		a := ts[0]
		k0, k1, s0, s1 := c.i(3), c.i(4), c.i(5), c.i(6)
		p0, p1 := c.f32(7), c.f32(8)
		if err := c.asserts(check{s0 != 0 && s1 != 0, "s0 != 0 && s1 != 0 (ggml divides by the strides)"}); err != nil {
			return vVoid, err
		}
		// ggml_calc_pool_output_size, in float as ggml computes it
		size := func(ins, ks, s int64, p float32) int64 { return int64((float32(ins)+2*p-float32(ks))/float32(s) + 1) }
		if err := c.asserts(check{size(a.Ne[0], k0, s0, p0) > 0, "ne[0] > 0"}, check{size(a.Ne[1], k1, s1, p1) > 0, "ne[1] > 0"}); err != nil {
			return vVoid, err
		}
		return tval(c.lib().Pool2D(ctx, a, int32(c.i(2)), int32(k0), int32(k1), int32(s0), int32(s1), p0, p1)), nil
	})
}
