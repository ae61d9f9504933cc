// Port of llama.cpp common/sampling.cpp (v0.5.0): common_sampler_init's
// chain of samplers.

// Package sample is llama.cpp's token sampling: the samplers of
// src/llama-sampler.cpp and the chain that common_sampler_init builds from
// common_params_sampling (common/sampling.cpp), with its grammar (package
// grammar's: a GBNF grammar, a JSON schema's, or a lazy one with
// triggers), checked against the chain's token and sampled again where
// it refuses it, as common_sampler_sample does. With the same seed, the
// same logits give the same token as llama.cpp: the same Mersenne Twister
// and libstdc++ distributions, the same sort orders of equal logits, and
// float32 arithmetic in the C++ order of operations.
package sample

import (
	"errors"
	"fmt"
	"math"
	"slices"
	"strings"

	"github.com/ggload/ggload/grammar"
	"github.com/ggload/ggload/vocab"
)

// Kind is common_sampler_type: one sampler of the configurable chain.
type Kind int

// The kinds, with common_sampler_type's values.
const (
	KindNone        Kind = 0
	KindDRY         Kind = 1
	KindTopK        Kind = 2
	KindTopP        Kind = 3
	KindMinP        Kind = 4
	KindTypicalP    Kind = 6
	KindTemperature Kind = 7
	KindXTC         Kind = 8
	KindInfill      Kind = 9
	KindPenalties   Kind = 10
	KindTopNSigma   Kind = 11
	KindAdaptiveP   Kind = 12
)

var kindNames = map[Kind]string{
	KindDRY: "dry", KindTopK: "top_k", KindTypicalP: "typ_p", KindTopP: "top_p",
	KindTopNSigma: "top_n_sigma", KindMinP: "min_p", KindTemperature: "temperature",
	KindXTC: "xtc", KindInfill: "infill", KindPenalties: "penalties", KindAdaptiveP: "adaptive_p",
}

var kindChars = map[Kind]byte{
	KindDRY: 'd', KindTopK: 'k', KindTypicalP: 'y', KindTopP: 'p', KindTopNSigma: 's',
	KindMinP: 'm', KindTemperature: 't', KindXTC: 'x', KindInfill: 'i', KindPenalties: 'e',
	KindAdaptiveP: 'a',
}

// String is common_sampler_type_to_str: "" for an unknown kind.
func (k Kind) String() string { return kindNames[k] }

// Char is common_sampler_type_to_chr: '?' for an unknown kind.
func (k Kind) Char() byte {
	if c, ok := kindChars[k]; ok {
		return c
	}
	return '?'
}

// Params mirrors common_params_sampling: the fields llama.cpp's command
// line sets, with the same meanings.
//
// The zero value is llama.cpp's defaults (those of its command line, as
// DefaultParams lists them): a field left at zero (a list: empty) takes
// its default, so Params{Temp: 0.2} changes the temperature alone. A
// zero that is meant, where llama.cpp gives zero a meaning of its own
// (Temp 0: the greatest logit; TopK 0: top-k off; Seed 0: the random
// generator started from 0; no samplers at all), is said by naming the field in Explicit:
//
//	p := sample.Params{Temp: 0, Explicit: sample.SetTemp} // greedy
//
// Explicit also marks the fields the user chose, which a model's own
// sampling defaults leave alone (FromModel), as llama.cpp's
// user_sampling_config does.
type Params struct {
	Seed             uint32 // DefaultSeed: a random one
	NPrev            int32
	NProbs           int32
	MinKeep          int32
	TopK             int32
	TopP             float32
	MinP             float32
	XTCProbability   float32
	XTCThreshold     float32
	TypP             float32
	Temp             float32
	DynatempRange    float32
	DynatempExponent float32
	PenaltyLastN     int32
	PenaltyRepeat    float32
	PenaltyFreq      float32
	PenaltyPresent   float32
	DryMultiplier    float32
	DryBase          float32
	DryAllowedLength int32
	DryPenaltyLastN  int32
	AdaptiveTarget   float32
	AdaptiveDecay    float32
	Mirostat         int32
	TopNSigma        float32
	MirostatTau      float32
	MirostatEta      float32
	IgnoreEOS        bool
	NoPerf           bool

	DrySequenceBreakers []string
	Samplers            []Kind
	LogitBias           []LogitBias

	// Grammar is a GBNF grammar the generated text must follow (--grammar,
	// from the rule "root"); JSONSchema, a JSON schema whose grammar it
	// must follow (--json-schema, converted as json_schema_to_grammar
	// converts it). One of the two at most.
	Grammar    string
	JSONSchema string
	// GrammarType says where Grammar comes from (a JSON schema's grammar
	// is GrammarOutputFormat); an output-format or tool-call grammar takes
	// the tokens of GenerationPrompt first.
	GrammarType      GrammarType
	GenerationPrompt string
	// GrammarLazy makes the grammar wait for one of GrammarTriggers (a
	// chat format's tool call) before it constrains anything.
	GrammarLazy     bool
	GrammarTriggers []GrammarTrigger

	// Explicit names the fields whose value is meant as it is, zero
	// included; see Params.
	Explicit Set
}

// DefaultParams is common_params_sampling's defaults, those of llama.cpp's
// command line: what Params{} stands for, every field spelled out and
// named in Explicit, so that a field set to zero afterwards (a seed of 0,
// a temperature of 0) is meant as it is.
func DefaultParams() Params {
	return Params{
		Explicit:            SetAll,
		Seed:                DefaultSeed,
		NPrev:               64,
		TopK:                40,
		TopP:                0.95,
		MinP:                0.05,
		XTCThreshold:        0.10,
		TypP:                1.00,
		Temp:                0.80,
		DynatempExponent:    1.00,
		PenaltyLastN:        64,
		PenaltyRepeat:       1.00,
		DryBase:             1.75,
		DryAllowedLength:    2,
		DryPenaltyLastN:     64,
		AdaptiveTarget:      -1.0,
		AdaptiveDecay:       0.90,
		TopNSigma:           -1.00,
		MirostatTau:         5.00,
		MirostatEta:         0.10,
		DrySequenceBreakers: []string{"\n", ":", "\"", "*"},
		Samplers: []Kind{KindPenalties, KindDRY, KindTopNSigma, KindTopK, KindTypicalP,
			KindTopP, KindMinP, KindXTC, KindTemperature},
	}
}

// Resolved is p as New takes it: every field left at zero (a list: empty)
// and not named in Explicit given its default; every field is then
// explicit.
func (p Params) Resolved() Params {
	d := DefaultParams()
	x := p.Explicit
	if p.Seed == 0 && x&SetSeed == 0 {
		p.Seed = d.Seed
	}
	for _, f := range []struct {
		v   *int32
		def int32
		set Set
	}{
		{&p.NPrev, d.NPrev, SetNPrev}, {&p.TopK, d.TopK, SetTopK}, {&p.PenaltyLastN, d.PenaltyLastN, SetPenaltyLastN},
		{&p.DryAllowedLength, d.DryAllowedLength, SetDryAllowedLength}, {&p.DryPenaltyLastN, d.DryPenaltyLastN, SetDryPenaltyLastN},
	} {
		if *f.v == 0 && x&f.set == 0 {
			*f.v = f.def
		}
	}
	for _, f := range []struct {
		v   *float32
		def float32
		set Set
	}{
		{&p.TopP, d.TopP, SetTopP}, {&p.MinP, d.MinP, SetMinP}, {&p.XTCThreshold, d.XTCThreshold, SetXTCThreshold},
		{&p.TypP, d.TypP, SetTypP}, {&p.Temp, d.Temp, SetTemp}, {&p.DynatempExponent, d.DynatempExponent, SetDynatempExponent},
		{&p.PenaltyRepeat, d.PenaltyRepeat, SetPenaltyRepeat}, {&p.DryBase, d.DryBase, SetDryBase},
		{&p.AdaptiveTarget, d.AdaptiveTarget, SetAdaptiveTarget}, {&p.AdaptiveDecay, d.AdaptiveDecay, SetAdaptiveDecay},
		{&p.TopNSigma, d.TopNSigma, SetTopNSigma}, {&p.MirostatTau, d.MirostatTau, SetMirostatTau},
		{&p.MirostatEta, d.MirostatEta, SetMirostatEta},
	} {
		if *f.v == 0 && x&f.set == 0 {
			*f.v = f.def
		}
	}
	if len(p.DrySequenceBreakers) == 0 && x&SetDrySequenceBreakers == 0 {
		p.DrySequenceBreakers = d.DrySequenceBreakers
	}
	if len(p.Samplers) == 0 && x&SetSamplers == 0 {
		p.Samplers = d.Samplers
	}
	p.Explicit = SetAll
	return p
}

// UnknownError lists the names or characters that ParseSamplers or
// ParseSamplingSeq skipped, as llama.cpp skips them with a warning.
type UnknownError struct {
	Names []string
}

func (e *UnknownError) Error() string {
	return "sample: unable to match sampler " + strings.Join(e.Names, ", ")
}

var samplerNames = func() map[string]Kind {
	m := map[string]Kind{}
	for k, n := range kindNames {
		m[n] = k
		if strings.Contains(n, "_") {
			m[strings.ReplaceAll(n, "_", "-")] = k
			m[strings.ReplaceAll(n, "_", "")] = k
		}
	}
	m["nucleus"] = KindTopP
	m["temp"] = KindTemperature
	m["typ"] = KindTypicalP
	return m
}()

// ParseSamplers is --samplers: names separated by ';', matched without
// regard to ASCII case, canonical ("top_k"), kebab-case ("top-k"), without
// the underscore ("topk"), or "nucleus", "temp", "typ"
// (common_sampler_types_from_names). The kinds are those llama.cpp uses;
// names it cannot match it skips, and they come back in an *UnknownError
// beside the kinds.
func ParseSamplers(names string) ([]Kind, error) {
	kinds := []Kind{}
	var unknown []string
	for _, n := range strings.Split(names, ";") {
		lower := []byte(n)
		for i, c := range lower {
			if 'A' <= c && c <= 'Z' {
				lower[i] = c + 'a' - 'A'
			}
		}
		if k, ok := samplerNames[string(lower)]; ok {
			kinds = append(kinds, k)
			continue
		}
		unknown = append(unknown, fmt.Sprintf("%q", lower))
	}
	if unknown != nil {
		return kinds, &UnknownError{unknown}
	}
	return kinds, nil
}

// ParseSamplingSeq is --sampling-seq: one character a sampler
// (common_sampler_types_from_chars: "edskypmxt" is the default chain).
// Characters it cannot match llama.cpp skips; they come back in an
// *UnknownError beside the kinds.
func ParseSamplingSeq(chars string) ([]Kind, error) {
	byChar := map[byte]Kind{}
	for k, c := range kindChars {
		byChar[c] = k
	}
	kinds := []Kind{}
	var unknown []string
	for i := 0; i < len(chars); i++ {
		if k, ok := byChar[chars[i]]; ok {
			kinds = append(kinds, k)
		} else {
			unknown = append(unknown, fmt.Sprintf("%q", chars[i]))
		}
	}
	if unknown != nil {
		return kinds, &UnknownError{unknown}
	}
	return kinds, nil
}

// Sampler is common_sampler: the chain of samplers, the grammar, and the
// last accepted tokens. Like llama.cpp's, it serves one generation at
// a time: it is not safe for concurrent use.
type Sampler struct {
	params Params
	v      *vocab.Vocab
	chain  []sampler
	prev   ring
	buf    []tokenData
	cur    candidates
	grm    *grammar.Grammar // the grammar sampler, nil without one
}

// New is common_sampler_init, after the adjustments common_init_from_params
// makes to the parameters: IgnoreEOS (dropped where the vocabulary has no
// EOS) biases every end-of-generation token by -inf. The parameters are
// p.Resolved(): zero fields take llama.cpp's defaults. It refuses the
// parameters common_sampler_init refuses, and a grammar or a JSON schema
// that does not parse or convert.
func New(v *vocab.Vocab, p Params) (*Sampler, error) {
	if v == nil {
		return nil, errors.New("sample: no vocabulary")
	}
	p = p.Resolved()
	if isInf32(p.PenaltyRepeat) || p.PenaltyRepeat != p.PenaltyRepeat || p.PenaltyRepeat <= 0 || isInf32(1/p.PenaltyRepeat) {
		return nil, errors.New("sample: penalty_repeat must be finite and greater than 0")
	}
	if isInf32(p.PenaltyFreq) || p.PenaltyFreq != p.PenaltyFreq {
		return nil, errors.New("sample: penalty_freq must be finite")
	}
	if isInf32(p.PenaltyPresent) || p.PenaltyPresent != p.PenaltyPresent {
		return nil, errors.New("sample: penalty_present must be finite")
	}
	if p.Mirostat < 0 || p.Mirostat > 2 {
		return nil, fmt.Errorf("sample: unknown mirostat version %d", p.Mirostat)
	}
	nVocab := v.NTokens()
	biases := slices.Clone(p.LogitBias)
	if p.IgnoreEOS && v.EOS() != vocab.Null {
		for t := 0; t < nVocab; t++ {
			if v.IsEOG(vocab.Token(t)) {
				biases = append(biases, LogitBias{vocab.Token(t), negInf})
			}
		}
	}
	for _, t := range v.SuppressTokens() {
		biases = append(biases, LogitBias{t, negInf})
	}

	var chain []sampler
	if len(biases) > 0 {
		chain = append(chain, &logitBias{biases: biases})
	}
	minKeep := int(p.MinKeep)
	switch p.Mirostat {
	case 0:
		adaptive := false
		for _, k := range p.Samplers {
			var s sampler
			var err error
			switch k {
			case KindDRY:
				s, err = newDRY(v, p)
			case KindTopK:
				s = newTopK(p.TopK)
			case KindTopP:
				s = newTopP(p.TopP, minKeep)
			case KindTopNSigma:
				s = newTopNSigma(p.TopNSigma)
			case KindMinP:
				s = newMinP(p.MinP, minKeep)
			case KindXTC:
				s = newXTC(p.XTCProbability, p.XTCThreshold, minKeep, p.Seed)
			case KindTypicalP:
				s = newTypical(p.TypP, minKeep)
			case KindTemperature:
				s = newTempExt(p.Temp, p.DynatempRange, p.DynatempExponent)
			case KindInfill:
				s = &infill{v: v}
			case KindPenalties:
				s = newPenalties(p.PenaltyLastN, p.PenaltyRepeat, p.PenaltyFreq, p.PenaltyPresent)
			case KindAdaptiveP:
				adaptive = true
				continue
			default:
				return nil, fmt.Errorf("sample: unknown sampler type %d", k)
			}
			if err != nil {
				return nil, err
			}
			chain = append(chain, s)
		}
		if adaptive {
			chain = append(chain, newAdaptiveP(p.AdaptiveTarget, p.AdaptiveDecay, p.Seed))
		} else {
			chain = append(chain, newDist(p.Seed))
		}
	case 1:
		chain = append(chain, newTemp(p.Temp), newMirostat(int32(nVocab), p.Seed, p.MirostatTau, p.MirostatEta, 100))
	case 2:
		chain = append(chain, newTemp(p.Temp), newMirostatV2(p.Seed, p.MirostatTau, p.MirostatEta))
	}
	grm, err := grammarOf(v, p)
	if err != nil {
		return nil, err
	}
	return &Sampler{params: p, v: v, chain: chain, prev: newRing(max(32, int(p.NPrev))), grm: grm}, nil
}

func isInf32(f float32) bool { return math.IsInf(float64(f), 0) }

// Sample is common_sampler_sample for one row of logits (one a token of
// the vocabulary): the chain's token, and with a grammar, the token the
// grammar allows (where it refuses the chain's, the chain again over the
// tokens it allows). The candidates stay for Candidates.
func (s *Sampler) Sample(logits []float32) (vocab.Token, error) {
	id, err := s.sample(logits, nil)
	if err != nil {
		return id, err
	}
	return s.grammarCheck(logits, id)
}

// sample runs the chain over the logits, those of the tokens mask
// refuses (where there is a mask) at -inf.
func (s *Sampler) sample(logits []float32, mask *grammar.Mask) (vocab.Token, error) {
	if n := s.v.NTokens(); len(logits) != n {
		return vocab.Null, fmt.Errorf("sample: %d logits for a vocabulary of %d tokens", len(logits), n)
	}
	if cap(s.buf) < len(logits) {
		s.buf = make([]tokenData, len(logits))
	}
	s.buf = s.buf[:len(logits)]
	for i, l := range logits {
		s.buf[i] = tokenData{vocab.Token(i), l, 0}
	}
	if mask != nil {
		for i := range s.buf {
			if !mask.Allows(vocab.Token(i)) {
				s.buf[i].logit = negInf
			}
		}
	}
	s.cur = candidates{data: s.buf, selected: -1}
	c := &s.cur
	for _, smpl := range s.chain {
		smpl.apply(c)
		if c.err != nil {
			return vocab.Null, c.err
		}
	}
	if c.selected < 0 || c.selected >= len(c.data) {
		return vocab.Null, fmt.Errorf("sample: no token selected (the chain %s left %d candidates)", s, len(c.data))
	}
	return c.data[c.selected].id, nil
}

// Accept is common_sampler_accept of a generated token: the grammar
// takes it (an error where it cannot), every sampler of the chain sees
// it, and it joins the last tokens. A prompt's tokens go to AcceptPrompt.
func (s *Sampler) Accept(t vocab.Token) error {
	if s.grm != nil {
		if err := s.grm.Accept(t); err != nil {
			return err
		}
	}
	s.AcceptPrompt(t)
	return nil
}

// Reset is common_sampler_reset: the last tokens and every sampler's
// state cleared, the random generators seeded again. The grammar stays
// where it stands, as llama.cpp's does.
func (s *Sampler) Reset() {
	s.prev.clear()
	for _, smpl := range s.chain {
		smpl.reset()
	}
}

// String is common_sampler_print: "logits " and "-> name " for each
// sampler of the chain, "?name" for those its parameters disabled.
func (s *Sampler) String() string {
	var b strings.Builder
	b.WriteString("logits ")
	for _, smpl := range s.chain {
		b.WriteString("-> ")
		b.WriteString(smpl.name())
		b.WriteString(" ")
	}
	return b.String()
}

// Seed is common_sampler_get_seed: the RNG seed in use by the last dist or
// mirostat sampler of the chain, or DefaultSeed.
func (s *Sampler) Seed() uint32 {
	for i := len(s.chain) - 1; i >= 0; i-- {
		seed := DefaultSeed
		switch x := s.chain[i].(type) {
		case *dist:
			seed = x.seedCur
		case *mirostat:
			seed = x.seedCur
		case *mirostatV2:
			seed = x.seedCur
		}
		if seed != DefaultSeed {
			return seed
		}
	}
	return DefaultSeed
}

// TokenData is llama_token_data: a candidate token, its logit and its
// probability as the chain left them.
type TokenData struct {
	ID    vocab.Token
	Logit float32
	P     float32
}

// Candidates is common_sampler_get_candidates after Sample: the
// candidates the chain left and the index of the selected one (none and
// -1 before a Sample that selected a token); sorted by
// descending probability (std::sort, as llama.cpp sorts them) when sort
// is true and the chain left them unsorted.
func (s *Sampler) Candidates(sort bool) ([]TokenData, int) {
	c := &s.cur
	if c.selected < 0 || c.selected >= len(c.data) {
		return nil, -1 // (no Sample yet, or the last one failed)
	}
	if sort && !c.sorted && c.selected >= 0 {
		id := c.data[c.selected].id
		stdSort(c.data, func(a, b *tokenData) bool { return a.p > b.p })
		for i := range c.data {
			if c.data[i].id == id {
				c.selected = i
				break
			}
		}
		c.sorted = true
	}
	out := make([]TokenData, len(c.data))
	for i, d := range c.data {
		out[i] = TokenData{d.id, d.logit, d.p}
	}
	return out, c.selected
}
