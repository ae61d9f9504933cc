package sample

import "math"

// TokenProbabilities is llama-server's get_token_probabilities
// (tools/server/server-common.cpp) over one row of logits: every token
// with its probability (a softmax in float32, glibc's expf), the nTop
// greatest logits first (std::partial_sort's order), the others after in
// the order partial_sort leaves them: the n_probs of a request that asks
// for the probabilities before sampling.
func TokenProbabilities(logits []float32, nTop int) []TokenData {
	cur := make([]tokenData, len(logits))
	for i, l := range logits {
		cur[i] = tokenData{id: int32(i), logit: l}
	}
	nTop = min(max(nTop, 0), len(cur))
	if nTop > 0 {
		stdPartialSort(cur, nTop, byLogitDesc)
	}
	maxL := float32(math.Inf(-1))
	if nTop > 0 {
		maxL = cur[0].logit
	} else {
		for _, t := range cur {
			maxL = fmax(maxL, t.logit)
		}
	}
	var sum float32
	for i := range cur {
		cur[i].p = expf(cur[i].logit - maxL)
		sum += cur[i].p
	}
	out := make([]TokenData, len(cur))
	for i, t := range cur {
		out[i] = TokenData{ID: t.id, Logit: t.logit, P: t.p / sum}
	}
	return out
}
