package sample

import (
	"math"
	"math/rand/v2"
	"reflect"
	"sync"
	"testing"
)

// Params{} is llama.cpp's defaults; a zero named in Explicit is kept.
func TestZeroParamsAreDefaults(t *testing.T) {
	if got := (Params{}).Resolved(); !reflect.DeepEqual(got, DefaultParams()) {
		t.Errorf("Params{}.Resolved() = %+v\nwant DefaultParams() %+v", got, DefaultParams())
	}
	p := Params{Temp: 0, TopK: 0, Seed: 0, Samplers: nil}.Resolved()
	if p.Temp != 0.8 || p.TopK != 40 || p.Seed != DefaultSeed || len(p.Samplers) != 9 {
		t.Errorf("unset zeros: %+v", p)
	}
	p = Params{Explicit: SetTemp | SetTopK | SetSeed | SetSamplers | SetDrySequenceBreakers}.Resolved()
	if p.Temp != 0 || p.TopK != 0 || p.Seed != 0 || len(p.Samplers) != 0 || len(p.DrySequenceBreakers) != 0 {
		t.Errorf("explicit zeros: %+v", p)
	}
	// a value given is kept, explicit or not
	if p := (Params{Temp: 0.2, TopNSigma: 1.5}).Resolved(); p.Temp != 0.2 || p.TopNSigma != 1.5 || p.TopK != 40 {
		t.Errorf("values given: %+v", p)
	}
}

// What a program may do wrong, or a model give, ends in an error or a
// token, never a panic: no vocabulary, candidates before any sample,
// logits of the wrong width, NaN and infinities under every chain.
func TestHostileUse(t *testing.T) {
	if _, err := New(nil, Params{}); err == nil {
		t.Error("New(nil, ...): no error")
	}
	_, _, v := oracle(t)
	s, err := New(v, Params{})
	if err != nil {
		t.Fatal(err)
	}
	if c, sel := s.Candidates(true); c != nil || sel != -1 {
		t.Errorf("Candidates before Sample: %d candidates, selected %d", len(c), sel)
	}
	if _, err := s.Sample(nil); err == nil {
		t.Error("Sample(nil): no error")
	}
	if c, sel := s.Candidates(true); c != nil || sel != -1 {
		t.Errorf("Candidates after a failed Sample: %d candidates, selected %d", len(c), sel)
	}
	n := v.NTokens()
	nan, inf := float32(math.NaN()), float32(math.Inf(1))
	rows := map[string]func(r *rand.Rand) []float32{
		"all NaN":  func(*rand.Rand) []float32 { return fill(n, nan) },
		"all +Inf": func(*rand.Rand) []float32 { return fill(n, inf) },
		"all -Inf": func(*rand.Rand) []float32 { return fill(n, -inf) },
		"some NaN": func(r *rand.Rand) []float32 {
			l := randomLogits(r, n)
			for range 1 + r.IntN(n) {
				l[r.IntN(n)] = nan
			}
			return l
		},
		"NaN and infinities": func(r *rand.Rand) []float32 {
			l := randomLogits(r, n)
			for i := range l {
				switch r.IntN(4) {
				case 0:
					l[i] = nan
				case 1:
					l[i] = inf
				case 2:
					l[i] = -inf
				}
			}
			return l
		},
		"huge": func(r *rand.Rand) []float32 {
			l := randomLogits(r, n)
			for i := range l {
				l[i] *= 1e37
			}
			return l
		},
	}
	chains := map[string]Params{
		"default":   {Seed: 1},
		"greedy":    {Temp: 0, Explicit: SetTemp},
		"mirostat":  {Mirostat: 1, Seed: 2},
		"mirostat2": {Mirostat: 2, Seed: 3},
		"everything": {Seed: 4, PenaltyRepeat: 1.2, PenaltyFreq: 0.3, PenaltyPresent: 0.2, DryMultiplier: 0.8, TopNSigma: 1,
			XTCProbability: 0.5, TypP: 0.9, DynatempRange: 0.5, MinKeep: 3},
		"adaptive":  {Seed: 5, Samplers: []Kind{KindTopK, KindAdaptiveP}, AdaptiveTarget: 0.3},
		"infill":    {Seed: 6, Samplers: []Kind{KindTopK, KindInfill}},
		"no chain":  {Seed: 7, Explicit: SetSamplers},
		"min-keep":  {Seed: 8, MinKeep: math.MaxInt32, TopK: -5},
		"biased":    {Seed: 9, LogitBias: []LogitBias{{-1, 3}, {int32(n), 2}, {math.MaxInt32, nan}}},
		"top-k big": {Seed: 10, TopK: math.MaxInt32},
	}
	r := rand.New(rand.NewPCG(1, 2))
	for cn, p := range chains {
		s, err := New(v, p)
		if err != nil {
			t.Errorf("%s: %v", cn, err)
			continue
		}
		for rn, row := range rows {
			for range 3 {
				tok, err := s.Sample(row(r))
				if err == nil && (tok < 0 || int(tok) >= n) {
					t.Errorf("%s, %s: token %d of %d", cn, rn, tok, n)
				}
				if err == nil {
					s.Accept(tok)
				}
				s.Candidates(true)
			}
		}
		s.Accept(-1)
		s.Accept(int32(n + 5))
		s.Reset()
	}
}

func fill(n int, v float32) []float32 {
	l := make([]float32, n)
	for i := range l {
		l[i] = v
	}
	return l
}

// The package's functions, and Samplers of their own over one Vocab (a
// Vocab is safe for concurrent use; a Sampler serves one generation),
// from many goroutines at once (run with -race).
func TestConcurrentSamplers(t *testing.T) {
	_, _, v := oracle(t)
	var wg sync.WaitGroup
	for g := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			r := rand.New(rand.NewPCG(uint64(g), 9))
			_ = DefaultParams()
			if _, err := ParseSamplers("top_k;min_p;temp"); err != nil {
				t.Error(err)
			}
			ParseSamplingSeq("kmt?")
			p := Params{Seed: uint32(g), DryMultiplier: 0.5, PenaltyRepeat: 1.1}.Resolved()
			s, err := New(v, p)
			if err != nil {
				t.Error(err)
				return
			}
			for range 20 {
				tok, err := s.Sample(randomLogits(r, v.NTokens()))
				if err != nil {
					t.Error(err)
					return
				}
				s.Accept(tok)
				s.Candidates(g%2 == 0)
				_ = s.String()
				_ = s.Seed()
			}
		}()
	}
	wg.Wait()
}
