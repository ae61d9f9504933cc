// Port of llama.cpp src/llama-sampler.cpp (v0.5.0): the samplers.

package sample

import (
	"bytes"
	"math"
	"slices"
	"strings"

	"github.com/ggload/ggload/vocab"
)

// sampler is one llama_sampler of a chain: its name as llama_sampler_name
// gives it, and its accept, apply and reset.
type sampler interface {
	name() string
	accept(t vocab.Token)
	apply(c *candidates)
	reset()
}

// noState is embedded by the samplers without accept or reset.
type noState struct{}

func (noState) accept(vocab.Token) {}
func (noState) reset()             {}

// empty is llama_sampler_init_empty: a disabled sampler that keeps its
// place (and its "?name") in the chain.
type empty struct {
	noState
	label string
}

func (e *empty) name() string        { return e.label }
func (e *empty) apply(c *candidates) {}

// greedy is llama_sampler_init_greedy.
type greedy struct{ noState }

func (*greedy) name() string { return "greedy" }
func (*greedy) apply(c *candidates) {
	c.selected = 0
	for i := 1; i < len(c.data); i++ {
		if c.data[i].logit > c.data[c.selected].logit {
			c.selected = i
		}
	}
}

// dist is llama_sampler_init_dist.
type dist struct {
	seed, seedCur uint32
	rng           mt19937
}

func newDist(seed uint32) *dist {
	d := &dist{seed: seed, seedCur: rngSeed(seed)}
	d.rng.seed(d.seedCur)
	return d
}

func (*dist) name() string       { return "dist" }
func (*dist) accept(vocab.Token) {}
func (d *dist) reset()           { d.seedCur = rngSeed(d.seed); d.rng.seed(d.seedCur) }
func (d *dist) apply(c *candidates) {
	if len(c.data) == 0 {
		c.selected = -1
		return
	}
	c.selected = 0
	if len(c.data) == 1 {
		d.rng.canonical64()
		c.data[0].p = 1
		return
	}
	maxl := c.data[0].logit
	if !c.sorted {
		for i := 1; i < len(c.data); i++ {
			maxl = fmax(maxl, c.data[i].logit)
		}
	}
	var sum float64
	for i := range c.data {
		p := expf(c.data[i].logit - maxl)
		c.data[i].p = p
		sum += float64(p)
	}
	target := sum * d.rng.canonical64()
	var run float64
	found := false
	for i := range c.data {
		if !found {
			run += float64(c.data[i].p)
			if run >= target {
				c.selected = i
				found = true
			}
		}
		c.data[i].p = float32(float64(c.data[i].p) / sum)
	}
	if !found {
		c.selected = len(c.data) - 1
	}
}

// topK is llama_sampler_init_top_k.
type topK struct {
	noState
	k int32
}

func (*topK) name() string          { return "top-k" }
func (s *topK) apply(c *candidates) { topKImpl(c, int(s.k)) }

// topP is llama_sampler_init_top_p.
type topP struct {
	noState
	p       float32
	minKeep int
	buf     []tokenData
}

func (*topP) name() string { return "top-p" }
func (s *topP) apply(c *candidates) {
	if s.p >= 1 {
		return
	}
	softmax(c, false)
	if c.err != nil {
		return
	}
	k := len(c.data)
	pdata := c.data
	if !c.sorted && len(c.data) > 1024 {
		k = min(256, len(c.data))
		s.buf = bucketSort(c, k, s.buf)
		pdata = s.buf
	} else if !c.sorted {
		partialSortInPlace(c, k)
		pdata = c.data
	}
	var cum float32
	last := len(c.data)
	for i := 0; i < len(c.data); i++ {
		cum += pdata[i].p
		if cum >= s.p && i+1 >= s.minKeep {
			last = i + 1
			break
		}
		if !c.sorted && i == k-1 {
			k = len(c.data)
			s.buf = bucketSort(c, k, s.buf)
			pdata = s.buf
		}
	}
	if !c.sorted {
		copy(c.data, s.buf[:last])
		c.sorted = true
	}
	c.data = c.data[:last]
}

// minP is llama_sampler_init_min_p.
type minP struct {
	noState
	p       float32
	minKeep int
}

func (*minP) name() string { return "min-p" }
func (s *minP) apply(c *candidates) {
	if s.p <= 0 || len(c.data) == 0 {
		return
	}
	applied := false
	if !c.sorted {
		m := float32(-math.MaxFloat32)
		for i := range c.data {
			m = fmax(m, c.data[i].logit)
		}
		minl := m + logf(s.p)
		var kept []tokenData
		for i := range c.data {
			if c.data[i].logit >= minl {
				kept = append(kept, c.data[i])
			}
		}
		if len(kept) > 0 && len(kept) >= s.minKeep {
			copy(c.data, kept)
			c.data = c.data[:len(kept)]
			applied = true
		}
	}
	if !applied {
		if !c.sorted {
			partialSortInPlace(c, len(c.data))
		}
		minl := c.data[0].logit + logf(s.p)
		i := 1
		for ; i < len(c.data); i++ {
			if c.data[i].logit < minl && i >= s.minKeep {
				break
			}
		}
		c.data = c.data[:i]
	}
}

// typical is llama_sampler_init_typical.
type typical struct {
	noState
	p       float32
	minKeep int
}

func (*typical) name() string { return "typical" }
func (s *typical) apply(c *candidates) {
	if s.p >= 1 {
		return
	}
	softmax(c, true)
	if c.err != nil {
		return
	}
	var entropy float32
	for i := range c.data {
		entropy += -c.data[i].p * logf(c.data[i].p)
	}
	shifted := make([]float32, len(c.data))
	for i := range c.data {
		shifted[i] = float32(math.Abs(float64(-logf(c.data[i].p) - entropy)))
	}
	idx := make([]int, len(c.data))
	for i := range idx {
		idx[i] = i
	}
	stdSort(idx, func(a, b *int) bool { return shifted[*a] < shifted[*b] })
	var cum float32
	last := len(idx)
	for i, j := range idx {
		cum += c.data[j].p
		if cum > s.p && (s.minKeep == 0 || i >= s.minKeep-1) {
			last = i + 1
			break
		}
	}
	kept := make([]tokenData, last)
	for i := range kept {
		kept[i] = c.data[idx[i]]
	}
	copy(c.data, kept)
	c.data = c.data[:last]
	c.sorted = false
}

// temp is llama_sampler_init_temp.
type temp struct {
	noState
	t float32
}

func (*temp) name() string          { return "temp" }
func (s *temp) apply(c *candidates) { tempImpl(c, s.t) }

// tempExt is llama_sampler_init_temp_ext (dynamic temperature).
type tempExt struct {
	noState
	t, delta, exponent float32
}

func (*tempExt) name() string { return "temp-ext" }
func (s *tempExt) apply(c *candidates) {
	if !(s.delta > 0) {
		tempImpl(c, s.t)
		return
	}
	minT := fmax(0, s.t-s.delta)
	maxT := s.t + s.delta
	if len(c.data) <= 1 {
		return
	}
	maxEntropy := -logf(1 / float32(len(c.data)))
	softmax(c, true)
	var entropy float32
	for i := range c.data {
		if p := c.data[i].p; p > 0 {
			entropy -= p * logf(p)
		}
	}
	norm := entropy / maxEntropy
	dyn := minT + (maxT-minT)*powf(norm, s.exponent)
	tempImpl(c, dyn)
	maxl := float64(c.data[0].logit)
	var sum float64
	for i := range c.data {
		p := exp64(float64(c.data[i].logit) - maxl)
		c.data[i].p = float32(p)
		sum += p
	}
	for i := range c.data {
		c.data[i].p = float32(float64(c.data[i].p) / sum)
	}
}

// xtc is llama_sampler_init_xtc.
type xtc struct {
	probability, threshold float32
	minKeep                int
	seed, seedCur          uint32
	rng                    mt19937
}

func (*xtc) name() string       { return "xtc" }
func (*xtc) accept(vocab.Token) {}
func (s *xtc) reset()           { s.seedCur = rngSeed(s.seed); s.rng.seed(s.seedCur) }
func (s *xtc) apply(c *candidates) {
	if s.probability <= 0 || s.threshold > 0.5 || len(c.data) < 2 {
		return
	}
	if s.rng.canonical32() > s.probability {
		return
	}
	softmax(c, true)
	last := 0
	for i := range c.data {
		if c.data[i].p >= s.threshold {
			last = i
		} else {
			break
		}
	}
	if len(c.data)-last >= s.minKeep && last > 0 {
		c.data = c.data[last:]
	}
}

// mirostat is llama_sampler_init_mirostat.
type mirostat struct {
	nVocab        int32
	seed, seedCur uint32
	tau, eta      float32
	m             int32
	mu            float32
	rng           mt19937
}

func (*mirostat) name() string       { return "mirostat" }
func (*mirostat) accept(vocab.Token) {}
func (s *mirostat) reset() {
	s.mu = 2 * s.tau
	s.seedCur = rngSeed(s.seed)
	s.rng.seed(s.seedCur)
}
func (s *mirostat) apply(c *candidates) {
	softmax(c, true)
	if c.err != nil {
		return
	}
	var sumTiBi, sumTiSq float32
	for i := 0; i < int(s.m-1) && i < len(c.data)-1; i++ {
		ti := logf(float32(i+2) / float32(i+1))
		bi := logf(c.data[i].p / c.data[i+1].p)
		sumTiBi += ti * bi
		sumTiSq += ti * ti
	}
	sHat := sumTiBi / sumTiSq
	eps := sHat - 1
	k := powf((eps*powf(2, s.mu))/(1-powf(float32(s.nVocab), -eps)), 1/sHat)
	topKImpl(c, int(max(toInt32(k), 1)))
	softmax(c, true)
	idx := sampleDiscrete(c, &s.rng)
	c.selected = idx
	surprise := -log2f(c.data[idx].p)
	s.mu = s.mu - s.eta*(surprise-s.tau)
}

// mirostatV2 is llama_sampler_init_mirostat_v2.
type mirostatV2 struct {
	seed, seedCur uint32
	tau, eta      float32
	mu            float32
	rng           mt19937
}

func (*mirostatV2) name() string       { return "mirostat-v2" }
func (*mirostatV2) accept(vocab.Token) {}
func (s *mirostatV2) reset() {
	s.mu = 2 * s.tau
	s.seedCur = rngSeed(s.seed)
	s.rng.seed(s.seedCur)
}
func (s *mirostatV2) apply(c *candidates) {
	softmax(c, true)
	if c.err != nil {
		return
	}
	n := len(c.data)
	for i := range c.data {
		if -log2f(c.data[i].p) > s.mu {
			n = i
			break
		}
	}
	if n == 0 {
		n = 1
	}
	c.data = c.data[:n]
	softmax(c, true)
	idx := sampleDiscrete(c, &s.rng)
	c.selected = idx
	surprise := -log2f(c.data[idx].p)
	s.mu = s.mu - s.eta*(surprise-s.tau)
}

// ring is the fixed-capacity ring_buffer of llama-sampler.cpp.
type ring struct {
	data           []vocab.Token
	sz, first, pos int
}

func newRing(n int) ring { return ring{data: make([]vocab.Token, n)} }

func (r *ring) push(t vocab.Token) {
	if len(r.data) == 0 {
		return
	}
	if r.sz == len(r.data) {
		r.first = (r.first + 1) % len(r.data)
	} else {
		r.sz++
	}
	r.data[r.pos] = t
	r.pos = (r.pos + 1) % len(r.data)
}

func (r *ring) front() vocab.Token { return r.data[r.first] }

// rat is the i-th token from the end.
func (r *ring) rat(i int) vocab.Token { return r.data[(r.first+r.sz-i-1)%len(r.data)] }

func (r *ring) clear() { r.sz, r.first, r.pos = 0, 0, 0 }

// penalties is llama_sampler_init_penalties.
type penalties struct {
	lastN                 int32
	repeat, freq, present float32
	prev                  ring
	count                 map[vocab.Token]int
}

func (*penalties) name() string { return "penalties" }
func (s *penalties) accept(t vocab.Token) {
	if s.lastN == 0 {
		return
	}
	s.count[t]++
	if s.prev.sz >= int(s.lastN) {
		old := s.prev.front()
		s.count[old]--
		if s.count[old] == 0 {
			delete(s.count, old)
		}
	}
	s.prev.push(t)
}
func (s *penalties) reset() {
	s.prev.clear()
	clear(s.count)
}
func (s *penalties) apply(c *candidates) {
	for i := range c.data {
		n, ok := s.count[c.data[i].id]
		if !ok {
			continue
		}
		if c.data[i].logit <= 0 {
			c.data[i].logit *= s.repeat
		} else {
			c.data[i].logit /= s.repeat
		}
		var present float32
		if n > 0 {
			present = 1
		}
		c.data[i].logit -= float32(n)*s.freq + present*s.present
	}
	c.sorted = false
}

// topNSigma is llama_sampler_init_top_n_sigma.
type topNSigma struct {
	noState
	n float32
}

func (*topNSigma) name() string { return "top-n-sigma" }
func (s *topNSigma) apply(c *candidates) {
	if s.n <= 0 || len(c.data) <= 1 {
		return
	}
	m := c.data[0].logit
	var sum float32
	valid := 0
	for i := range c.data {
		if l := c.data[i].logit; l != negInf {
			m = fmax(m, l)
			sum += l
			valid++
		}
	}
	var mean float32
	if valid > 0 {
		mean = sum / float32(valid)
	}
	var acc float32
	for i := range c.data {
		if l := c.data[i].logit; l != negInf {
			d := float64(l - mean)
			acc = float32(float64(acc) + d*d)
		}
	}
	var std float32
	if valid > 0 {
		std = float32(math.Sqrt(float64(acc / float32(valid))))
	}
	for i := range c.data {
		if c.data[i].logit < m-s.n*std {
			c.data[i].logit = negInf
		}
	}
}

// dry is llama_sampler_init_dry.
type dry struct {
	multiplier, base float32
	allowed, lastN   int32
	breakers         map[vocab.Token][][]vocab.Token
	repeatCount      []int
	maxRepeat        map[vocab.Token]int
	last             ring
}

func (*dry) name() string { return "dry" }
func (s *dry) accept(t vocab.Token) {
	if s.multiplier == 0 || s.base < 1 || s.lastN == 0 {
		return
	}
	s.last.push(t)
}
func (s *dry) reset() {
	s.last.clear()
	s.repeatCount = s.repeatCount[:0]
	clear(s.maxRepeat)
}

// dryBreakers is get_overlapping_token_sequences for each breaker: the
// tokens whose text contains a breaker (with an empty tail), and those
// whose text ends with a breaker's head (with the tokens of the rest,
// at most maxTail of them).
func dryBreakers(v *vocab.Vocab, breakers []string) (map[vocab.Token][][]vocab.Token, error) {
	const maxChars, maxTail = 40, 20
	out := map[vocab.Token][][]vocab.Token{}
	var words [][]byte
	for _, b := range breakers {
		if b == "" {
			continue
		}
		if i := strings.IndexByte(b, 0); i >= 0 {
			// a C string ends at its first NUL
			b = b[:i]
			if b == "" {
				continue
			}
		}
		if len(b) > maxChars {
			b = b[:maxChars]
		}
		if words == nil {
			words = make([][]byte, v.NTokens())
			for id := range words {
				w, err := v.Detokenize([]vocab.Token{vocab.Token(id)}, false, true)
				if err != nil {
					return nil, err
				}
				words[id] = w
			}
		}
		str := []byte(b)
		for id, word := range words {
			tok := vocab.Token(id)
			if bytes.Contains(word, str) {
				out[tok] = append(out[tok], []vocab.Token{})
				continue
			}
			for pos := 0; pos < len(word); pos++ {
				if word[pos] != str[0] {
					continue
				}
				match := true
				i := 1
				for ; i < len(str) && i+pos < len(word); i++ {
					if word[pos+i] != str[i] {
						match = false
						break
					}
				}
				if !match {
					continue
				}
				tail, err := v.Tokenize(string(str[i:]), false, false)
				if err != nil {
					return nil, err
				}
				if len(tail) > maxTail {
					tail = tail[:maxTail]
				}
				if tail == nil {
					tail = []vocab.Token{}
				}
				dup := false
				for _, t := range out[tok] {
					if slices.Equal(t, tail) {
						dup = true
						break
					}
				}
				if !dup {
					out[tok] = append(out[tok], tail)
				}
			}
		}
	}
	return out, nil
}

func (s *dry) apply(c *candidates) {
	if s.multiplier == 0 || s.base < 1 || s.lastN == 0 {
		return
	}
	lastN := min(s.last.sz, int(s.lastN))
	if lastN <= int(s.allowed) {
		return
	}
	s.repeatCount = slices.Grow(s.repeatCount[:0], lastN)[:lastN]
	clear(s.repeatCount)
	clear(s.maxRepeat)

	repLimit := lastN
	for i := 0; i < lastN; i++ {
		seqs, ok := s.breakers[s.last.rat(i)]
		if !ok {
			continue
		}
		longest := -1
		for _, seq := range seqs {
			n := len(seq)
			if n > longest && n <= i {
				match := true
				for off := 0; off < n; off++ {
					if seq[off] != s.last.rat(i-off-1) {
						match = false
						break
					}
				}
				if match {
					longest = n
				}
			}
		}
		if longest >= 0 {
			repLimit = i - longest
			break
		}
	}
	if repLimit < int(s.allowed) {
		return
	}

	last := lastN - 1
	rt, lt := 0, 0
	for k := 1; k < lastN; k++ {
		if k > rt {
			n := 0
			for n+k < lastN && s.last.rat(n) == s.last.rat(n+k) {
				n++
			}
			s.repeatCount[last-k] = min(n, repLimit)
			if n > 0 {
				lt = k
				rt = k + n - 1
			}
		} else {
			p := k - lt
			right := rt - k + 1
			if s.repeatCount[last-p] < right {
				s.repeatCount[last-k] = min(s.repeatCount[last-p], repLimit)
			} else {
				i := rt + 1
				for i < lastN && s.last.rat(i) == s.last.rat(i-k) {
					i++
				}
				s.repeatCount[last-k] = min(i-k, repLimit)
				lt = k
				rt = i - 1
			}
		}
	}

	for i := 0; i < lastN-1; i++ {
		n := s.repeatCount[i]
		if n >= int(s.allowed) {
			t := s.last.rat(lastN - 2 - i)
			if old, ok := s.maxRepeat[t]; !ok || old < n {
				s.maxRepeat[t] = n
			}
		}
	}

	const floatMaxLog = float32(88.7228391)
	maxExp := int32(0)
	if s.base > 1.000001 {
		maxExp = toInt32(floatMaxLog / logf(s.base))
	}
	for i := range c.data {
		n, ok := s.maxRepeat[c.data[i].id]
		if !ok {
			continue
		}
		single := false
		for _, seq := range s.breakers[c.data[i].id] {
			if len(seq) == 0 {
				single = true
				break
			}
		}
		if single {
			continue
		}
		e := int32(n) - s.allowed
		if maxExp > 0 && e > maxExp {
			e = maxExp
		}
		penalty := float32(float64(s.multiplier) * math.Pow(float64(s.base), float64(e)))
		c.data[i].logit -= penalty
	}
	c.sorted = false
}

// Adaptive-p's transform: a peak of 5 at the target, width 0.3,
// sharpness 10.
var (
	adaptiveWidth    = float32(0.3)
	adaptivePeak     = float32(5)
	adaptiveSharp    = float32(10)
	adaptiveInvWidth = 1 / adaptiveWidth
)

// adaptiveP is llama_sampler_init_adaptive_p.
type adaptiveP struct {
	target, decay      float32
	seed, seedCur      uint32
	rng                mt19937
	weightedSum, total float32
	orig               []float32
	pendingID          vocab.Token
	pendingIdx         int
}

func newAdaptiveP(target, decay float32, seed uint32) *adaptiveP {
	decay = clampf(decay, 0, 0.99)
	s := &adaptiveP{target: target, decay: decay, seed: seed, seedCur: rngSeed(seed), pendingID: vocab.Null, pendingIdx: -1}
	s.rng.seed(s.seedCur)
	s.weightedSum = target / (1 - decay)
	s.total = 1 / (1 - decay)
	return s
}

func (*adaptiveP) name() string { return "adaptive-p" }
func (s *adaptiveP) accept(t vocab.Token) {
	// (llama.cpp asserts on a token of none pending: vocab.Null)
	if s.pendingID == t && s.pendingIdx >= 0 && s.pendingIdx < len(s.orig) {
		s.weightedSum = s.orig[s.pendingIdx] + s.decay*s.weightedSum
		s.total = 1 + s.decay*s.total
	}
	s.pendingID = vocab.Null
	s.pendingIdx = -1
}
func (s *adaptiveP) reset() {
	s.weightedSum = s.target / (1 - s.decay)
	s.total = 1 / (1 - s.decay)
	s.pendingID = vocab.Null
	s.pendingIdx = -1
	s.seedCur = rngSeed(s.seed)
	s.rng.seed(s.seedCur)
}
func (s *adaptiveP) apply(c *candidates) {
	softmax(c, false)
	if c.err != nil {
		return
	}
	if s.target < 0 {
		c.selected = sampleDiscrete(c, &s.rng)
		return
	}
	s.orig = slices.Grow(s.orig[:0], len(c.data))[:len(c.data)]
	for i := range c.data {
		s.orig[i] = c.data[i].p
	}
	target := clampf(s.target, 0, 1)
	var t float32
	if s.total == 0 {
		t = target
	} else {
		t = 2*target - s.weightedSum/s.total
	}
	adapted := clampf(t, 0, 1)
	for i := range c.data {
		if c.data[i].logit == negInf {
			continue
		}
		d := float32(math.Abs(float64((c.data[i].p - adapted) * adaptiveInvWidth)))
		c.data[i].logit = adaptivePeak - adaptiveSharp*d*d/(1+d)
	}
	softmax(c, false)
	idx := sampleDiscrete(c, &s.rng)
	c.selected = idx
	s.pendingID = c.data[idx].id
	s.pendingIdx = idx
}

// clampf is std::clamp(v, lo, hi).
func clampf(v, lo, hi float32) float32 {
	if v < lo {
		return lo
	}
	if hi < v {
		return hi
	}
	return v
}

// LogitBias is llama_logit_bias: a bias added to one token's logit.
type LogitBias struct {
	Token vocab.Token
	Bias  float32
}

// logitBias is llama_sampler_init_logit_bias.
type logitBias struct {
	noState
	biases []LogitBias
	search []LogitBias
}

func (*logitBias) name() string { return "logit-bias" }
func (s *logitBias) apply(c *candidates) {
	if len(s.biases) == 0 {
		return
	}
	s.search = s.search[:0]
	for _, b := range s.biases {
		if b.Token >= 0 && len(c.data) > int(b.Token) && c.data[b.Token].id == b.Token {
			c.data[b.Token].logit += b.Bias
		} else {
			s.search = append(s.search, b)
		}
	}
	if len(s.search) == 0 {
		return
	}
	for i := range c.data {
		for _, b := range s.search {
			if c.data[i].id == b.Token {
				c.data[i].logit += b.Bias
				break
			}
		}
	}
}

// infill is llama_sampler_init_infill.
type infill struct {
	noState
	v *vocab.Vocab
}

func (*infill) name() string { return "infill" }
func (s *infill) piece(t vocab.Token) []byte {
	b, err := s.v.AppendPiece(nil, t, 0, false)
	if err != nil {
		return nil
	}
	return b
}
func (s *infill) apply(c *candidates) {
	softmax(c, true)
	if c.err != nil {
		return
	}
	var pTxt, pEOG float32
	for i := range c.data {
		if s.v.IsEOG(c.data[i].id) {
			pEOG += c.data[i].p
		} else {
			pTxt += c.data[i].p
		}
	}
	if 3*pEOG*float32(len(c.data)) > pTxt {
		n := 0
		var sum float32
		for i := range c.data {
			if s.v.IsEOG(c.data[i].id) {
				sum += c.data[i].p
				c.data[n] = c.data[i]
				n++
			}
		}
		c.data = c.data[:n]
		for i := range c.data {
			c.data[i].p /= sum
		}
		return
	}
	for i0 := range c.data {
		for i1 := range c.data {
			if c.data[i0].logit == negInf {
				break
			}
			if i0 == i1 || c.data[i1].logit == negInf {
				continue
			}
			p0 := s.piece(c.data[i0].id)
			p1 := s.piece(c.data[i1].id)
			if len(p0) > 0 && len(p0) <= len(p1) && bytes.Equal(p0, p1[:len(p0)]) {
				dst, src := i0, i1
				if c.data[i1].p > c.data[i0].p {
					dst, src = src, dst
				}
				c.data[dst].p += c.data[src].p
				c.data[src].logit = negInf
				c.data[src].p = 0
			}
		}
	}
	nonEOG := 0
	var sum float32
	thold := float32(0.2)
	n := 0
	for i := range c.data {
		eog := s.v.IsEOG(c.data[i].id)
		if c.data[i].p < thold && !eog {
			continue
		}
		if !eog {
			nonEOG++
		}
		sum += c.data[i].p
		c.data[n] = c.data[i]
		n++
	}
	c.data = c.data[:n]
	if nonEOG == 0 {
		c.data = c.data[:1]
		c.data[0].id = s.v.EOT()
		if c.data[0].id == vocab.Null {
			c.data[0].id = s.v.EOS()
		}
		c.data[0].logit = 1
		return
	}
	for i := range c.data {
		c.data[i].p /= sum
	}
	sum = 0
	thold = float32(1.0 / float64(nonEOG+1))
	n = 0
	for i := range c.data {
		eog := s.v.IsEOG(c.data[i].id)
		if c.data[i].p < thold && !eog {
			continue
		}
		sum += c.data[i].p
		c.data[n] = c.data[i]
		n++
	}
	c.data = c.data[:n]
	for i := range c.data {
		c.data[i].p /= sum
	}
}
