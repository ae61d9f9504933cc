package ops

import "math"

// The recurrent and linear-attention ops: RWKV's, gated linear attention,
// Mamba's convolution and scan, and the gated delta net (Qwen3-Next,
// Qwen3.5, Kimi's KDA).

// linearAttn is the checks that ggml's linear attention ops (rwkv_wkv6,
// gated_linear_attn, rwkv_wkv7) make of their arguments, named names (the
// state last): every one contiguous; S, H and n_tokens from the one at k,
// which those at same share; the state S*S*H per sequence.
func (l *Lib) linearAttn(op string, ts []*Tensor, names []string, k int, same []int) error {
	for i, n := range names {
		if err := assert(op, l.Contiguous(ts[i]), "ggml_is_contiguous("+n+")"); err != nil {
			return err
		}
	}
	st := ts[len(ts)-1]
	S, H, nt, ns := ts[k].Ne[0], ts[k].Ne[1], ts[k].Ne[2], st.Ne[1]
	for _, i := range same {
		t, n := ts[i], names[i]
		if err := assert(op, t.Ne[0] == S && t.Ne[1] == H && t.Ne[2] == nt, n+"->ne[0] == S && "+n+"->ne[1] == H && "+n+"->ne[2] == n_tokens"); err != nil {
			return err
		}
	}
	return assert(op, NElements(st) == S*S*H*ns, "ggml_nelements(state) == S * S * H * n_seqs")
}

// RWKVWKV6 is ggml_rwkv_wkv6(ctx, k, v, r, tf, td, state).
func (l *Lib) RWKVWKV6(c *Context, k, v, r, tf, td, state *Tensor) (*Tensor, error) {
	const op = "ggml_rwkv_wkv6"
	if err := l.room(op, c, 1); err != nil {
		return nil, err
	}
	if err := l.linearAttn(op, []*Tensor{k, v, r, tf, td, state}, []string{"k", "v", "r", "tf", "td", "state"}, 0, []int{1, 2, 4}); err != nil {
		return nil, err
	}
	return wrap(l.b.RWKVWKV6(c.h, k.c(), v.c(), r.c(), tf.c(), td.c(), state.c())), nil
}

// GatedLinearAttn is ggml_gated_linear_attn(ctx, k, v, q, g, state, scale).
func (l *Lib) GatedLinearAttn(c *Context, k, v, q, g, state *Tensor, scale float32) (*Tensor, error) {
	const op = "ggml_gated_linear_attn"
	if err := l.room(op, c, 1); err != nil {
		return nil, err
	}
	if err := l.linearAttn(op, []*Tensor{k, v, q, g, state}, []string{"k", "v", "q", "g", "state"}, 0, []int{1, 2, 3}); err != nil {
		return nil, err
	}
	return wrap(l.b.GatedLinearAttn(c.h, k.c(), v.c(), q.c(), g.c(), state.c(), scale)), nil
}

// RWKVWKV7 is ggml_rwkv_wkv7(ctx, r, w, k, v, a, b, state).
func (l *Lib) RWKVWKV7(c *Context, r, w, k, v, a, b, state *Tensor) (*Tensor, error) {
	const op = "ggml_rwkv_wkv7"
	if err := l.room(op, c, 1); err != nil {
		return nil, err
	}
	if err := l.linearAttn(op, []*Tensor{r, w, k, v, a, b, state}, []string{"r", "w", "k", "v", "a", "b", "state"}, 2, []int{1, 2, 3, 4, 5}); err != nil {
		return nil, err
	}
	return wrap(l.b.RWKVWKV7(c.h, r.c(), w.c(), k.c(), v.c(), a.c(), b.c(), state.c())), nil
}

// SSMConv is ggml_ssm_conv(ctx, sx, c).
func (l *Lib) SSMConv(c *Context, sx, w *Tensor) (*Tensor, error) {
	const op = "ggml_ssm_conv"
	if err := l.room(op, c, 1); err != nil {
		return nil, err
	}
	if err := asserts(op, check{sx.Ne[3] == 1, "ggml_is_3d(sx)"}, check{w.Ne[2] == 1 && w.Ne[3] == 1, "ggml_is_matrix(c)"},
		check{sx.Ne[1] == w.Ne[1], "sx->ne[1] == d_inner"}, check{sx.Ne[0]-w.Ne[0]+1 >= 0, "n_t >= 0"}); err != nil {
		return nil, err
	}
	return wrap(l.b.SSMConv(c.h, sx.c(), w.c())), nil
}

// SSMScan is ggml_ssm_scan(ctx, s, x, dt, A, B, C, ids, K).
func (l *Lib) SSMScan(c *Context, st, x, dt, A, B, C, ids *Tensor, K int64) (*Tensor, error) {
	const op = "ggml_ssm_scan"
	if err := l.room(op, c, 1); err != nil {
		return nil, err
	}
	size := func(t *Tensor) uintptr { return l.TypeSize(t.Type) }
	if err := asserts(op,
		check{K >= 1 && K <= math.MaxInt32, "K >= 1 && K <= INT32_MAX"},
		check{l.Contiguous(st), "ggml_is_contiguous(s)"},
		check{l.Contiguous(dt), "ggml_is_contiguous(dt)"},
		check{l.Contiguous(A), "ggml_is_contiguous(A)"},
		check{x.Nb[0] == size(x), "x->nb[0] == ggml_type_size(x->type)"},
		check{B.Nb[0] == size(B), "B->nb[0] == ggml_type_size(B->type)"},
		check{C.Nb[0] == size(C), "C->nb[0] == ggml_type_size(C->type)"},
		check{x.Nb[1] == uintptr(x.Ne[0])*x.Nb[0], "x->nb[1] == x->ne[0]*x->nb[0]"},
		check{B.Nb[1] == uintptr(B.Ne[0])*B.Nb[0], "B->nb[1] == B->ne[0]*B->nb[0]"},
		check{C.Nb[1] == uintptr(C.Ne[0])*C.Nb[0], "C->nb[1] == C->ne[0]*C->nb[0]"},
		check{B.Ne == C.Ne, "ggml_are_same_shape(B, C)"},
		check{ids.Type == TypeI32, "ids->type == GGML_TYPE_I32"},
		check{dt.Ne[0] == x.Ne[1] && dt.Ne[1] == x.Ne[2] && dt.Ne[2] == x.Ne[3] && dt.Ne[3] == 1, "dt->ne[0] == n_head && dt->ne[1] == n_seq_tokens && dt->ne[2] == n_seqs && ggml_is_3d(dt)"},
		check{st.Ne[1] == x.Ne[0] && st.Ne[2] == x.Ne[1], "s->ne[1] == head_dim && s->ne[2] == n_head"},
		check{B.Ne[0] == st.Ne[0] && B.Ne[2] == x.Ne[2] && B.Ne[3] == x.Ne[3], "B->ne[0] == d_state && B->ne[2] == n_seq_tokens && B->ne[3] == n_seqs"},
		check{ids.Ne[0] == x.Ne[3] && ids.Ne[1] == 1 && ids.Ne[2] == 1 && ids.Ne[3] == 1, "ids->ne[0] == n_seqs && ggml_is_vector(ids)"},
		check{A.Ne[1] == x.Ne[1] && A.Ne[2] == 1 && A.Ne[3] == 1, "A->ne[1] == n_head && ggml_is_matrix(A)"},
		check{A.Ne[0] == 1 || A.Ne[0] == st.Ne[0] && K == 1, "A->ne[0] == d_state && K == 1"},
	); err != nil {
		return nil, err
	}
	return wrap(l.b.SSMScan(c.h, st.c(), x.c(), dt.c(), A.c(), B.c(), C.c(), ids.c(), K)), nil
}

// GatedDeltaNet is ggml_gated_delta_net(ctx, q, k, v, g, beta, state, K).
func (l *Lib) GatedDeltaNet(c *Context, q, k, v, g, beta, st *Tensor, K int64) (*Tensor, error) {
	const op = "ggml_gated_delta_net"
	if err := l.room(op, c, 1); err != nil {
		return nil, err
	}
	sv, h, nSeqs := v.Ne[0], v.Ne[1], v.Ne[3]
	if err := asserts(op,
		check{l.ContiguousRows(q), "ggml_is_contiguous_rows(q)"},
		check{l.ContiguousRows(k), "ggml_is_contiguous_rows(k)"},
		check{l.ContiguousRows(v), "ggml_is_contiguous_rows(v)"},
		check{l.Contiguous(g), "ggml_is_contiguous(g)"},
		check{l.Contiguous(beta), "ggml_is_contiguous(beta)"},
		check{l.Contiguous(st), "ggml_is_contiguous(state)"},
		check{q.Type == TypeF32, "q->type == GGML_TYPE_F32"},
		check{k.Type == TypeF32, "k->type == GGML_TYPE_F32"},
		check{v.Type == TypeF32, "v->type == GGML_TYPE_F32"},
		check{g.Type == TypeF32, "g->type == GGML_TYPE_F32"},
		check{beta.Type == TypeF32, "beta->type == GGML_TYPE_F32"},
		check{st.Type == TypeF32, "state->type == GGML_TYPE_F32"},
		check{g.Ne[0] == 1 || g.Ne[0] == sv, "g->ne[0] == 1 || g->ne[0] == S_v"},
		check{beta.Ne[0] == 1, "beta->ne[0] == 1"},
		check{st.Ne[0] == sv, "state->ne[0] == S_v"},
		check{st.Ne[1] == sv, "state->ne[1] == S_v"},
		check{st.Ne[2] == h, "state->ne[2] == H"},
		check{st.Ne[3] == nSeqs, "state->ne[3] == n_seqs"},
		check{K >= 1, "K >= 1"},
	); err != nil {
		return nil, err
	}
	return wrap(l.b.GatedDeltaNet(c.h, q.c(), k.c(), v.c(), g.c(), beta.c(), st.c(), K)), nil
}
