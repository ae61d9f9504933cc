// Port of llama.cpp src/llama-sampler.cpp (v0.5.0): the samplers'
// constructors (llama_sampler_init_*).

package sample

import (
	"github.com/ggload/ggload/vocab"
)

// The constructors are llama_sampler_init_*: a disabled sampler is an
// empty one named "?name".

func newTopK(k int32) sampler {
	if k <= 0 {
		return &empty{label: "?top-k"}
	}
	return &topK{k: k}
}

func newTopP(p float32, minKeep int) sampler {
	if p >= 1 {
		return &empty{label: "?top-p"}
	}
	return &topP{p: p, minKeep: minKeep}
}

func newMinP(p float32, minKeep int) sampler {
	if p <= 0 {
		return &empty{label: "?min-p"}
	}
	return &minP{p: p, minKeep: minKeep}
}

func newTypical(p float32, minKeep int) sampler {
	if p >= 1 {
		return &empty{label: "?typical"}
	}
	return &typical{p: p, minKeep: minKeep}
}

func newTemp(t float32) sampler {
	if t == 1 {
		return &empty{label: "?temp"}
	}
	return &temp{t: t}
}

func newTempExt(t, delta, exponent float32) sampler {
	if t == 1 && delta <= 0 {
		return &empty{label: "?temp-ext"}
	}
	return &tempExt{t: t, delta: delta, exponent: exponent}
}

func newXTC(p, t float32, minKeep int, seed uint32) sampler {
	if p <= 0 || t > 0.5 {
		return &empty{label: "?xtc"}
	}
	s := &xtc{probability: p, threshold: t, minKeep: minKeep, seed: seed, seedCur: rngSeed(seed)}
	s.rng.seed(s.seedCur)
	return s
}

func newMirostat(nVocab int32, seed uint32, tau, eta float32, m int32) sampler {
	s := &mirostat{nVocab: nVocab, seed: seed, seedCur: rngSeed(seed), tau: tau, eta: eta, m: m, mu: 2 * tau}
	s.rng.seed(s.seedCur)
	return s
}

func newMirostatV2(seed uint32, tau, eta float32) sampler {
	s := &mirostatV2{seed: seed, seedCur: rngSeed(seed), tau: tau, eta: eta, mu: 2 * tau}
	s.rng.seed(s.seedCur)
	return s
}

func newPenalties(lastN int32, repeat, freq, present float32) sampler {
	lastN = max(lastN, 0)
	if lastN == 0 || (repeat == 1 && freq == 0 && present == 0) {
		return &empty{label: "?penalties"}
	}
	return &penalties{lastN: lastN, repeat: repeat, freq: freq, present: present,
		prev: newRing(int(lastN)), count: map[vocab.Token]int{}}
}

func newTopNSigma(n float32) sampler {
	if n <= 0 {
		return &empty{label: "?top-n-sigma"}
	}
	return &topNSigma{n: n}
}

func newDRY(v *vocab.Vocab, p Params) (sampler, error) {
	lastN := max(p.DryPenaltyLastN, 0)
	if p.DryMultiplier == 0 || !(p.DryBase >= 1) || lastN == 0 {
		return &empty{label: "?dry"}, nil
	}
	br, err := dryBreakers(v, p.DrySequenceBreakers)
	if err != nil {
		return nil, err
	}
	return newDRYTables(p.DryMultiplier, p.DryBase, p.DryAllowedLength, lastN, br), nil
}

func newDRYTables(mult, base float32, allowed, lastN int32, br map[vocab.Token][][]vocab.Token) *dry {
	return &dry{multiplier: mult, base: base, allowed: allowed, lastN: lastN, breakers: br,
		repeatCount: make([]int, lastN), maxRepeat: map[vocab.Token]int{}, last: newRing(int(lastN))}
}
