package infer

import (
	"fmt"
	"slices"

	"github.com/ggload/ggload/internal/graph"
)

// ubatch is a ubatch and, for each of its tokens, its index in the batch.
type ubatch struct {
	*graph.Ubatch
	index []int
}

// seqsUnq are the ubatch's sequences in increasing order (seq_id_unq).
func (u *ubatch) seqsUnq() []int32 {
	var seen [maxSeq]bool
	for _, ids := range u.SeqIDs {
		for _, s := range ids {
			seen[s] = true
		}
	}
	var out []int32
	for s, ok := range seen {
		if ok {
			out = append(out, int32(s))
		}
	}
	return out
}

// pick makes the ubatch of the batch's tokens idxs, in that order: nSeqs
// sequence sets, split equally or not.
func pick(b *graph.Ubatch, idxs []int, nSeqs int, equal bool) *ubatch {
	u := &ubatch{Ubatch: &graph.Ubatch{}, index: idxs}
	for _, i := range idxs {
		if b.Embd != nil {
			u.Embd = append(u.Embd, b.Embd[i])
		}
		u.Tokens = append(u.Tokens, b.Tokens[i])
		u.Pos = append(u.Pos, b.Pos[i])
		u.SeqIDs = append(u.SeqIDs, b.SeqIDs[i])
		u.Output = append(u.Output, b.Output[i])
	}
	u.NSeqs, u.Equal = nSeqs, equal
	return u
}

// splitSimple is llama_batch_allocr::split_simple: the tokens in order,
// n at a time.
func splitSimple(b *graph.Ubatch, n int) []*ubatch {
	var out []*ubatch
	for i := 0; i < len(b.Tokens); i += n {
		j := min(len(b.Tokens), i+n)
		idxs := make([]int, 0, j-i)
		for k := i; k < j; k++ {
			idxs = append(idxs, k)
		}
		out = append(out, pick(b, idxs, len(idxs), false))
	}
	return out
}

// splitEqual is llama_batch_allocr::split_equal, as a KV cache of several
// streams and a recurrent state split: each ubatch takes the same number
// of tokens from each of its sequences (at most n tokens in all; with
// sequential, a run of consecutive sequence ids), its tokens grouped by
// sequence.
func splitEqual(b *graph.Ubatch, n int, sequential bool) ([]*ubatch, error) {
	bySeq := map[int32][]int{} // each sequence's tokens, in batch order
	for i, ids := range b.SeqIDs {
		if len(ids) != 1 {
			if !sequential {
				return nil, fmt.Errorf("infer: decode: token %d is in %d sequences: an equal split of coupled sequences is not run by ggload yet", i, len(ids))
			}
			return nil, fmt.Errorf("infer: decode: token %d is in %d sequences: a sequential split does not take coupled sequences (llama.cpp: you may need to use the -kvu flag)", i, len(ids))
		}
		bySeq[ids[0]] = append(bySeq[ids[0]], i)
	}
	used := make([]bool, len(b.Tokens))
	next := map[int32]int{} // each sequence's first unused token, in bySeq
	var out []*ubatch
	for {
		// the sequences of this ubatch: from the first unused token on,
		// each the one after the last
		var seqs []int32
		last := int32(-1)
		for i := range b.Tokens {
			if used[i] {
				continue
			}
			s := b.SeqIDs[i][0]
			dup := false
			for _, t := range seqs {
				dup = dup || t == s
			}
			if dup || (sequential && len(seqs) > 0 && s != last+1) {
				continue
			}
			seqs = append(seqs, s)
			last = s
			if len(seqs) > n {
				break
			}
		}
		if len(seqs) == 0 {
			return out, nil
		}
		per := make([][]int, len(seqs))
		for {
			expand := true
			for _, s := range seqs {
				expand = expand && next[s] < len(bySeq[s])
			}
			if !expand {
				break
			}
			for k, s := range seqs {
				i := bySeq[s][next[s]]
				per[k] = append(per[k], i)
				used[i] = true
				next[s]++
			}
			if (len(per[0])+1)*len(seqs) > n {
				break
			}
		}
		var idxs []int
		for _, p := range per {
			idxs = append(idxs, p...)
		}
		out = append(out, pick(b, idxs, len(seqs), true))
	}
}

// splitSeq is llama_batch_allocr::split_seq, as a recurrent state splits
// a batch whose every token outputs: one sequence set per ubatch, the
// tokens after the first whose sequences are a subset of the ones before
// (at most n).
func splitSeq(b *graph.Ubatch, n int) []*ubatch {
	used := make([]bool, len(b.Tokens))
	subset := func(a, of []int32) bool {
		for _, s := range a {
			if !slices.Contains(of, s) {
				return false
			}
		}
		return true
	}
	var out []*ubatch
	for {
		cur := slices.Index(used, false)
		if cur < 0 {
			return out
		}
		set := b.SeqIDs[cur]
		var idxs []int
		for {
			idxs = append(idxs, cur)
			used[cur] = true
			if len(idxs) >= n {
				break
			}
			for cur++; cur < len(b.Tokens) && (used[cur] || !subset(b.SeqIDs[cur], set)); cur++ {
			}
			if cur == len(b.Tokens) {
				break
			}
			set = b.SeqIDs[cur]
		}
		out = append(out, pick(b, idxs, 1, true))
	}
}
