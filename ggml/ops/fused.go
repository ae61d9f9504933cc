package ops

// The fused ops of sparse attention's lightning indexer (DeepSeek-V3.2,
// GLM-DSA) and of DeepSeek V4's hyper-connections.

// LightningIndexer is ggml_lightning_indexer(ctx, q, k, weights, mask).
func (l *Lib) LightningIndexer(c *Context, q, k, w, m *Tensor) (*Tensor, error) {
	const op = "ggml_lightning_indexer"
	if err := l.room(op, c, 1); err != nil {
		return nil, err
	}
	if err := asserts(op,
		check{q.Type == TypeF32, "q->type == GGML_TYPE_F32"},
		check{w.Type == TypeF32, "weights->type == GGML_TYPE_F32"},
		check{m.Type == TypeF16, "mask->type == GGML_TYPE_F16"},
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
		return nil, err
	}
	return wrap(l.b.LightningIndexer(c.h, q.c(), k.c(), w.c(), m.c())), nil
}

// DSV4HCComb is ggml_dsv4_hc_comb(ctx, mixes, scale, base, eps, n_iter).
func (l *Lib) DSV4HCComb(c *Context, mixes, scale, base *Tensor, eps float32, nIter int64) (*Tensor, error) {
	const op = "ggml_dsv4_hc_comb"
	if err := l.room(op, c, 1); err != nil {
		return nil, err
	}
	dim := mixes.Ne[0]
	hc := int64(0)
	for i := int64(1); i*i+2*i <= dim; i++ {
		if (2+i)*i == dim {
			hc = i
			break
		}
	}
	if err := asserts(op,
		check{mixes.Type == TypeF32, "mixes->type == GGML_TYPE_F32"},
		check{scale.Type == TypeF32, "scale->type == GGML_TYPE_F32"},
		check{base.Type == TypeF32, "base->type == GGML_TYPE_F32"},
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
		return nil, err
	}
	return wrap(l.b.DSV4HCComb(c.h, mixes.c(), scale.c(), base.c(), eps, int32(nIter))), nil
}

// hcPre is the checks of ggml_dsv4_hc_pre(ctx, x, weights) and
// ggml_dsv4_hc_pre_gated(ctx, x, gate, scale).
func hcPre(op string, x, w *Tensor, gated bool) error {
	n, hc, nt := x.Ne[0], x.Ne[1], x.Ne[2]
	cs := []check{
		{x.Type == TypeF32, "x->type == GGML_TYPE_F32"},
		{w.Type == TypeF32, "weights->type == GGML_TYPE_F32"},
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
	return asserts(op, append(cs, check{w.Ne[3] == 1, "weights->ne[3] == 1"})...)
}

// DSV4HCPre is ggml_dsv4_hc_pre(ctx, x, weights).
func (l *Lib) DSV4HCPre(c *Context, x, w *Tensor) (*Tensor, error) {
	const op = "ggml_dsv4_hc_pre"
	if err := l.room(op, c, 1); err != nil {
		return nil, err
	}
	if err := hcPre(op, x, w, false); err != nil {
		return nil, err
	}
	return wrap(l.b.DSV4HCPre(c.h, x.c(), w.c())), nil
}

// DSV4HCPreGated is ggml_dsv4_hc_pre_gated(ctx, x, gate, scale).
func (l *Lib) DSV4HCPreGated(c *Context, x, gate *Tensor, scale float32) (*Tensor, error) {
	const op = "ggml_dsv4_hc_pre_gated"
	if err := l.room(op, c, 1); err != nil {
		return nil, err
	}
	if err := hcPre(op, x, gate, true); err != nil {
		return nil, err
	}
	return wrap(l.b.DSV4HCPreGated(c.h, x.c(), gate.c(), scale)), nil
}

// DSV4HCPost is ggml_dsv4_hc_post(ctx, x, residual, post, comb); comb may
// be nil.
func (l *Lib) DSV4HCPost(c *Context, x, res, post, comb *Tensor) (*Tensor, error) {
	const op = "ggml_dsv4_hc_post"
	if err := l.room(op, c, 1); err != nil {
		return nil, err
	}
	n, nt, hc := x.Ne[0], x.Ne[1], res.Ne[1]
	cs := []check{
		{x.Type == TypeF32, "x->type == GGML_TYPE_F32"},
		{res.Type == TypeF32, "residual->type == GGML_TYPE_F32"},
		{post.Type == TypeF32, "post->type == GGML_TYPE_F32"},
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
		cs = append(cs, check{comb.Type == TypeF32, "comb->type == GGML_TYPE_F32"},
			check{comb.Ne[0] == hc, "comb->ne[0] == hc"}, check{comb.Ne[1] == hc, "comb->ne[1] == hc"},
			check{comb.Ne[2] == nt, "comb->ne[2] == n_tokens"}, check{comb.Ne[3] == 1, "comb->ne[3] == 1"})
	}
	if err := asserts(op, cs...); err != nil {
		return nil, err
	}
	return wrap(l.b.DSV4HCPost(c.h, x.c(), res.c(), post.c(), comb.c())), nil
}
