// Port of llama.cpp src/models/qwen4exp.cpp (v0.5.0): the input of
// Qwen4-Exp's own graph, its n-gram hash embeddings' rows
// (llm_graph_input_ple::set_input). Its memory's inputs are
// hybrid_idx.go's.

package infer

import (
	"cmp"
	"fmt"

	"github.com/ggload/ggload/internal/replay/cpp"
)

// hparamArray is a member array of llama_hparams, as integers.
func (c *Context) hparamArray(name string) ([]int64, error) {
	cell, ok := c.rep.Run.Hparams().Object().Fields[name]
	if !ok || cell.V.K != cpp.KArr {
		return nil, fmt.Errorf("llama_hparams has no array %s", name)
	}
	a := cell.V.P.(*cpp.Array)
	out := make([]int64, len(a.Cells))
	for i, x := range a.Cells {
		out[i] = x.V.I
	}
	return out, nil
}

// setPLE is Qwen4-Exp's llm_graph_input_ple::set_input: for each token,
// the rows of the n-gram hash embedding's heads. A token's n-gram is it
// and the tokens before it in its sequence, read back from the attention
// cache's cells (which hold the ubatch already); an end-of-sequence
// token, or a missing one, cuts the n-gram there, the rest taken as the
// end-of-sequence token. Each n-gram of 2..n tokens mixes them by the
// layer multipliers (xor of products, in 64 bits), and each of its heads
// takes the row mixed % the head's vocabulary + its offset.
func (c *Context) setPLE(in *cpp.Object, u *ubatch) error {
	t := member(in, "rows")
	if t == nil {
		return nil
	}
	if len(c.caches) == 0 {
		return fmt.Errorf("n-gram embeddings without an attention cache")
	}
	hp := c.rep.Run.Hparams()
	field := func(name string) int64 { v, _ := hp.Field(name); return v }
	nGram, nHeads, perGram, eos := field("ple_ngram_size"), field("ple_n_heads"), field("ple_heads_per_ngram"), field("ple_eos_token_id")
	mult, err := c.hparamArray("ple_layer_multipliers")
	if err != nil {
		return err
	}
	offsets, err := c.hparamArray("ple_head_offsets")
	if err != nil {
		return err
	}
	vocab, err := c.hparamArray("ple_head_vocab_sizes")
	if err != nil {
		return err
	}
	n := int64(len(u.Tokens))
	if nGram < 2 || nHeads <= 0 || int64(len(mult)) < nGram || int64(len(offsets)) < nHeads || int64(len(vocab)) < nHeads || (nGram-1)*perGram > nHeads {
		return fmt.Errorf("n-gram embeddings of %d-grams and %d heads", nGram, nHeads)
	}
	for _, ids := range u.SeqIDs {
		if len(ids) != 1 {
			return &cpp.Abort{Msg: "GGML_ASSERT(ubatch->n_seq_id[i] == 1 && \"PLE n-gram embeddings do not support tokens shared by multiple sequences\") failed", Where: "llm_graph_input_ple::set_input"}
		}
	}
	imgTok := cmp.Or(field("ple_image_token_id"), eos)
	nPrev := nGram - 1
	prev := c.prevTokens(c.caches[0], u, nPrev)
	rows := make([]int32, nHeads*n)
	gram := make([]int64, nGram)
	for i := range n {
		gram[0] = imgTok
		if u.Embd == nil {
			gram[0] = int64(u.Tokens[i])
		}
		cut := false
		for s := int64(1); s < nGram; s++ {
			tok := int64(-1)
			if !cut {
				tok = int64(prev[i*nPrev+nPrev-s])
			}
			cut = cut || tok < 0 || tok == eos
			gram[s] = tok
			if cut {
				gram[s] = eos
			}
		}
		for k := int64(2); k <= nGram; k++ {
			mixed := uint64(gram[0]) * uint64(mult[0])
			for j := int64(1); j < k; j++ {
				mixed ^= uint64(gram[j]) * uint64(mult[j])
			}
			base := (k - 2) * perGram
			for g := range perGram {
				h := base + g
				rows[i*nHeads+h] = int32(mixed%uint64(uint32(vocab[h])) + uint64(uint32(offsets[h])))
			}
		}
	}
	return c.set(t, typeI32, i32s(rows), 4)
}

// prevTokens is llama_kv_cache::get_prev_tokens: for each token of the
// ubatch, the n tokens before it in its sequence, oldest first, as the
// cache's cells hold them (the cell at the greatest position not after
// each; -1 where there is none). A ubatch of embeddings, whose positions
// may repeat, counts back in the ubatch's own order of each sequence.
func (c *Context) prevTokens(kc *kvCache, u *ubatch, n int64) []int32 {
	nTok := int64(len(u.Tokens))
	res := make([]int32, nTok*n)
	for i := range res {
		res[i] = -1
	}
	if n == 0 {
		return res
	}
	var ord []int64
	bySeq := map[int32][]int64{}
	if u.Embd != nil {
		ord = make([]int64, nTok)
		for i := range nTok {
			s := u.SeqIDs[i][0]
			ord[i] = int64(len(bySeq[s]))
			bySeq[s] = append(bySeq[s], i)
		}
	}
	for i := range nTok {
		seq := u.SeqIDs[i][0]
		for j := range n {
			d := n - j
			var p int64
			if u.Embd != nil {
				v := bySeq[seq]
				if k := ord[i] - d; k >= 0 {
					p = int64(u.Pos[v[k]])
				} else {
					p = int64(u.Pos[v[0]]) + k
				}
			} else {
				p = int64(u.Pos[i]) - d
			}
			if p < 0 {
				continue
			}
			res[i*n+j] = kc.stream(seq).seqPosTokLE(seq, int32(p))
		}
	}
	return res
}
