// Port of llama.cpp src/llama-batch.cpp (v0.5.0): llama_batch_allocr's
// splits of a batch into ubatches (split_simple, split_equal, split_seq).

package infer

import (
	"fmt"
	"slices"

	"github.com/ggload/ggload/internal/replay/graph"
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

// seqSetOf is a token's set of sequences (llama_batch_allocr's seq_set).
func seqSetOf(ids []int32) seqSet {
	var s seqSet
	for _, id := range ids {
		s.add(id)
	}
	return s
}

func (s *seqSet) overlaps(t *seqSet) bool {
	for i := range s {
		if s[i]&t[i] != 0 {
			return true
		}
	}
	return false
}

// splitEqual is llama_batch_allocr::split_equal, as a KV cache of several
// streams, a unified iSWA or hybrid memory and a recurrent state split:
// each ubatch takes the same number of tokens from each of its sequence
// sets (the sets of sequences its tokens belong to, none overlapping
// another; with sequential, single sequences of consecutive ids), at most
// n tokens in all, its tokens grouped by set. keepTail > 0 keeps each
// set's last keepTail tokens in one ubatch (a recurrent state's rollback
// snapshots are of one ubatch's last tokens).
func splitEqual(b *graph.Ubatch, n int, sequential bool, keepTail int) ([]*ubatch, error) {
	if keepTail > 0 && n <= keepTail {
		return nil, fmt.Errorf("infer: decode: a ubatch of %d tokens cannot keep a sequence's last %d together (n_rs_seq + 1): raise -ub above it (llama.cpp would abort: GGML_ASSERT(n_ubatch > n_keep_tail))", n, keepTail)
	}
	sets := make([]seqSet, len(b.Tokens))
	bySet := map[seqSet][]int{} // each set's tokens, in batch order
	for i, ids := range b.SeqIDs {
		if len(ids) != 1 && sequential {
			return nil, fmt.Errorf("infer: decode: token %d is in %d sequences: a sequential split does not take coupled sequences (llama.cpp: you may need to use the -kvu flag)", i, len(ids))
		}
		sets[i] = seqSetOf(ids)
		bySet[sets[i]] = append(bySet[sets[i]], i)
	}
	used := make([]bool, len(b.Tokens))
	var out []*ubatch
	for {
		// the sets of this ubatch: from the first unused token on, each
		// overlapping none before it (and, sequential, the sequence after
		// the last)
		var cur []seqSet
		last := int32(-1)
		for i := range b.Tokens {
			if used[i] {
				continue
			}
			add := true
			for k := range cur {
				if cur[k].overlaps(&sets[i]) {
					add = false
					break
				}
			}
			if sequential && len(cur) > 0 && b.SeqIDs[i][0] != last+1 {
				add = false
			}
			if !add {
				continue
			}
			cur = append(cur, sets[i])
			last = b.SeqIDs[i][0]
			if len(cur) > n {
				break
			}
		}
		if len(cur) == 0 {
			return out, nil
		}
		next := make([]int, len(cur)) // each set's first unused token, in bySet
		for k, t := range cur {
			for used[bySet[t][next[k]]] {
				next[k]++
			}
		}
		per := make([][]int, len(cur))
		for {
			expand := true
			for k, t := range cur {
				expand = expand && next[k] < len(bySet[t])
			}
			if !expand {
				break
			}
			for k, t := range cur {
				i := bySet[t][next[k]]
				per[k] = append(per[k], i)
				used[i] = true
				next[k]++
			}
			if (len(per[0])+1)*len(cur) > n {
				break
			}
		}
		if keepTail > 0 {
			cur, per = keepTails(cur, per, bySet, next, used, n, keepTail)
		}
		var idxs []int
		for _, p := range per {
			idxs = append(idxs, p...)
		}
		out = append(out, pick(b, idxs, len(cur), true))
	}
}

// keepTails is split_equal's last step with n_keep_tail: of the ubatch's
// sets, the longest prefix each of which ends here or leaves at least
// keepTail tokens for later; the others' tokens go back. Where the first
// set alone breaks the rule, it takes all its tokens when they fit, else
// gives back enough to leave keepTail.
func keepTails(cur []seqSet, per [][]int, bySet map[seqSet][]int, next []int, used []bool, n, keepTail int) ([]seqSet, [][]int) {
	left := func(k int) int { return len(bySet[cur[k]]) - next[k] }
	keep := 0
	for keep < len(cur) {
		if r := left(keep); r != 0 && r < keepTail {
			break
		}
		keep++
	}
	if keep == 0 {
		all := bySet[cur[0]]
		if len(per[0])+left(0) <= n {
			for left(0) > 0 {
				i := all[next[0]]
				per[0] = append(per[0], i)
				used[i] = true
				next[0]++
			}
		} else {
			for left(0) < keepTail {
				last := len(per[0]) - 1
				used[per[0][last]] = false
				per[0] = per[0][:last]
				next[0]--
			}
		}
		keep = 1
	}
	for k := keep; k < len(cur); k++ {
		for _, i := range per[k] {
			used[i] = false
		}
	}
	return cur[:keep], per[:keep]
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
