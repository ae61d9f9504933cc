package arch

import "github.com/ggload/ggload/bindings"

// The fused ops of the newer architectures: the gated delta net (the
// linear attention of Qwen3-Next, Qwen3.5 and Kimi's KDA), the lightning
// indexer of sparse attention (DeepSeek-V3.2, GLM-DSA), and the
// hyper-connections of DeepSeek V4. Each is checked as ggml.c checks it.

// check is one GGML_ASSERT: its condition and its text.
type check struct {
	ok   bool
	cond string
}

// asserts makes ggml's checks in their order: the first that fails is the
// Abort.
func (c *gcall) asserts(cs ...check) error {
	for _, x := range cs {
		if err := c.assert(x.ok, x.cond); err != nil {
			return err
		}
	}
	return nil
}

// fusedOps registers the fused ops.
func fusedOps(out map[string]builtinFunc) {
	// ggml_gated_delta_net(ctx, q, k, v, g, beta, state, K)
	op(out, "ggml_gated_delta_net", 8, func(c *gcall) (Val, error) {
		ctx, ts, err := c.ctxTensors(6)
		if err != nil {
			return vVoid, err
		}
		q, k, v, g, beta, st := ts[0], ts[1], ts[2], ts[3], ts[4], ts[5]
		K := c.i(7)
		gr := c.g
		sv, h, nSeqs := v.Ne[0], v.Ne[1], v.Ne[3]
		if err := c.asserts(
			check{gr.contiguousRows(q), "ggml_is_contiguous_rows(q)"},
			check{gr.contiguousRows(k), "ggml_is_contiguous_rows(k)"},
			check{gr.contiguousRows(v), "ggml_is_contiguous_rows(v)"},
			check{gr.contiguous(g), "ggml_is_contiguous(g)"},
			check{gr.contiguous(beta), "ggml_is_contiguous(beta)"},
			check{gr.contiguous(st), "ggml_is_contiguous(state)"},
			check{q.Type == typeF32, "q->type == GGML_TYPE_F32"},
			check{k.Type == typeF32, "k->type == GGML_TYPE_F32"},
			check{v.Type == typeF32, "v->type == GGML_TYPE_F32"},
			check{g.Type == typeF32, "g->type == GGML_TYPE_F32"},
			check{beta.Type == typeF32, "beta->type == GGML_TYPE_F32"},
			check{st.Type == typeF32, "state->type == GGML_TYPE_F32"},
			check{g.Ne[0] == 1 || g.Ne[0] == sv, "g->ne[0] == 1 || g->ne[0] == S_v"},
			check{beta.Ne[0] == 1, "beta->ne[0] == 1"},
			check{st.Ne[0] == sv, "state->ne[0] == S_v"},
			check{st.Ne[1] == sv, "state->ne[1] == S_v"},
			check{st.Ne[2] == h, "state->ne[2] == H"},
			check{st.Ne[3] == nSeqs, "state->ne[3] == n_seqs"},
			check{K >= 1, "K >= 1"},
		); err != nil {
			return vVoid, err
		}
		return tval(c.lib().GatedDeltaNet(ctx, q, k, v, g, beta, st, K)), nil
	})
	// ggml_lightning_indexer(ctx, q, k, weights, mask)
	op(out, "ggml_lightning_indexer", 5, func(c *gcall) (Val, error) {
		ctx, ts, err := c.ctxTensors(4)
		if err != nil {
			return vVoid, err
		}
		q, k, w, m := ts[0], ts[1], ts[2], ts[3]
		if err := c.asserts(
			check{q.Type == typeF32, "q->type == GGML_TYPE_F32"},
			check{w.Type == typeF32, "weights->type == GGML_TYPE_F32"},
			check{m.Type == typeF16, "mask->type == GGML_TYPE_F16"},
			check{q.Ne[0] == k.Ne[0], "q->ne[0] == k->ne[0]"},
			check{m.Ne[0] == k.Ne[2], "mask->ne[0] == k->ne[2]"},
			check{q.Ne[1] == w.Ne[0], "q->ne[1] == weights->ne[0]"},
			check{k.Ne[1] == 1, "k->ne[1] == 1"},
			check{m.Ne[1] == q.Ne[2], "mask->ne[1] == q->ne[2]"},
			check{q.Ne[2] == w.Ne[1], "q->ne[2] == weights->ne[1]"},
			check{w.Ne[2] == 1, "weights->ne[2] == 1"},
			check{m.Ne[2] == 1, "mask->ne[2] == 1"},
			check{q.Ne[3] == k.Ne[3], "q->ne[3] == k->ne[3]"},
			check{k.Ne[3] == w.Ne[3], "k->ne[3] == weights->ne[3]"},
			check{m.Ne[3] != 0 && w.Ne[3]%m.Ne[3] == 0, "weights->ne[3] % mask->ne[3] == 0"},
		); err != nil {
			return vVoid, err
		}
		return tval(c.lib().LightningIndexer(ctx, q, k, w, m)), nil
	})
	// ggml_dsv4_hc_comb(ctx, mixes, scale, base, eps, n_iter)
	op(out, "ggml_dsv4_hc_comb", 6, func(c *gcall) (Val, error) {
		ctx, ts, err := c.ctxTensors(3)
		if err != nil {
			return vVoid, err
		}
		mixes, scale, base := ts[0], ts[1], ts[2]
		nIter := c.i(5)
		dim := mixes.Ne[0]
		hc := int64(0)
		for i := int64(1); i*i+2*i <= dim; i++ {
			if (2+i)*i == dim {
				hc = i
				break
			}
		}
		if err := c.asserts(
			check{mixes.Type == typeF32, "mixes->type == GGML_TYPE_F32"},
			check{scale.Type == typeF32, "scale->type == GGML_TYPE_F32"},
			check{base.Type == typeF32, "base->type == GGML_TYPE_F32"},
			check{nIter > 0, "n_iter > 0"},
			check{hc > 0, "hc > 0"},
			check{hc == 4, "hc == 4"},
			check{mixes.Ne[2] == 1, "mixes->ne[2] == 1"},
			check{mixes.Ne[3] == 1, "mixes->ne[3] == 1"},
			check{scale.Ne[0] >= 3, "scale->ne[0] >= 3"},
			check{scale.Ne[1] == 1, "scale->ne[1] == 1"},
			check{scale.Ne[2] == 1, "scale->ne[2] == 1"},
			check{scale.Ne[3] == 1, "scale->ne[3] == 1"},
			check{base.Ne[0] == dim, "base->ne[0] == hc_mix_dim"},
			check{base.Ne[1] == 1, "base->ne[1] == 1"},
			check{base.Ne[2] == 1, "base->ne[2] == 1"},
			check{base.Ne[3] == 1, "base->ne[3] == 1"},
		); err != nil {
			return vVoid, err
		}
		return tval(c.lib().DSV4HCComb(ctx, mixes, scale, base, c.f32(4), int32(nIter))), nil
	})
	// ggml_dsv4_hc_pre(ctx, x, weights) and ggml_dsv4_hc_pre_gated(ctx, x, gate, scale)
	hcPre := func(c *gcall, x, w *bindings.Tensor, gated bool) error {
		n, hc, nt := x.Ne[0], x.Ne[1], x.Ne[2]
		cs := []check{
			{x.Type == typeF32, "x->type == GGML_TYPE_F32"},
			{w.Type == typeF32, "weights->type == GGML_TYPE_F32"},
			{hc > 0, "hc > 0"},
			{x.Ne[3] == 1, "x->ne[3] == 1"},
		}
		if gated {
			cs = append(cs, check{w.Ne[0] == n, "weights->ne[0] == n_embd"}, check{w.Ne[1] == hc, "weights->ne[1] == hc"},
				check{w.Ne[2] == nt, "weights->ne[2] == n_tokens"})
		} else {
			cs = append(cs, check{w.Ne[0] == hc, "weights->ne[0] == hc"}, check{w.Ne[1] == nt, "weights->ne[1] == n_tokens"},
				check{w.Ne[2] == 1, "weights->ne[2] == 1"})
		}
		return c.asserts(append(cs, check{w.Ne[3] == 1, "weights->ne[3] == 1"})...)
	}
	op(out, "ggml_dsv4_hc_pre", 3, func(c *gcall) (Val, error) {
		ctx, ts, err := c.ctxTensors(2)
		if err == nil {
			err = hcPre(c, ts[0], ts[1], false)
		}
		if err != nil {
			return vVoid, err
		}
		return tval(c.lib().DSV4HCPre(ctx, ts[0], ts[1])), nil
	})
	op(out, "ggml_dsv4_hc_pre_gated", 4, func(c *gcall) (Val, error) {
		ctx, ts, err := c.ctxTensors(2)
		if err == nil {
			err = hcPre(c, ts[0], ts[1], true)
		}
		if err != nil {
			return vVoid, err
		}
		return tval(c.lib().DSV4HCPreGated(ctx, ts[0], ts[1], c.f32(3))), nil
	})
	// ggml_dsv4_hc_post(ctx, x, residual, post, comb): comb may be null
	op(out, "ggml_dsv4_hc_post", 5, func(c *gcall) (Val, error) {
		ctx, ts, err := c.ctxTensors(3)
		if err != nil {
			return vVoid, err
		}
		comb, err := c.opt(4)
		if err != nil {
			return vVoid, err
		}
		x, res, post := ts[0], ts[1], ts[2]
		n, nt, hc := x.Ne[0], x.Ne[1], res.Ne[1]
		cs := []check{
			{x.Type == typeF32, "x->type == GGML_TYPE_F32"},
			{res.Type == typeF32, "residual->type == GGML_TYPE_F32"},
			{post.Type == typeF32, "post->type == GGML_TYPE_F32"},
			{hc > 0, "hc > 0"},
			{x.Ne[2] == 1, "x->ne[2] == 1"},
			{x.Ne[3] == 1, "x->ne[3] == 1"},
			{res.Ne[0] == n, "residual->ne[0] == n_embd"},
			{res.Ne[2] == nt, "residual->ne[2] == n_tokens"},
			{res.Ne[3] == 1, "residual->ne[3] == 1"},
			{post.Ne[0] == hc, "post->ne[0] == hc"},
			{post.Ne[1] == nt, "post->ne[1] == n_tokens"},
			{post.Ne[2] == 1, "post->ne[2] == 1"},
			{post.Ne[3] == 1, "post->ne[3] == 1"},
		}
		if comb != nil {
			cs = append(cs, check{comb.Type == typeF32, "comb->type == GGML_TYPE_F32"},
				check{comb.Ne[0] == hc, "comb->ne[0] == hc"}, check{comb.Ne[1] == hc, "comb->ne[1] == hc"},
				check{comb.Ne[2] == nt, "comb->ne[2] == n_tokens"}, check{comb.Ne[3] == 1, "comb->ne[3] == 1"})
		}
		if err := c.asserts(cs...); err != nil {
			return vVoid, err
		}
		return tval(c.lib().DSV4HCPost(ctx, x, res, post, comb)), nil
	})
}
