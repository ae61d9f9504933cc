package sample

import (
	"bufio"
	"bytes"
	"encoding/binary"
	"fmt"
	"math"
	"math/rand/v2"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/ggload/ggload/lab/cxx"
	"github.com/ggload/ggload/lab/llama"
	"github.com/ggload/ggload/lab/testenv"
	"github.com/ggload/ggload/vocab"
)

const vocabFile = "ggml-vocab-llama-spm.gguf"

var (
	oracleOnce sync.Once
	oracleLib  *llama.SamplerLib
	oracleVoc  uintptr
	goVoc      *vocab.Vocab
	oracleErr  error
)

// oracle opens libllama's sampler API and the pinned vocabulary on both
// sides.
func oracle(t *testing.T) (*llama.SamplerLib, uintptr, *vocab.Vocab) {
	t.Helper()
	rt := testenv.Runtime(t)
	path := filepath.Join(testenv.SourceTree(t), "models", vocabFile)
	oracleOnce.Do(func() {
		l, err := llama.Open(rt)
		if err != nil {
			oracleErr = err
			return
		}
		oracleLib, err = l.Samplers()
		if err != nil {
			oracleErr = err
			return
		}
		_, oracleVoc, oracleErr = l.VocabOnly(path)
		if oracleErr != nil {
			return
		}
		goVoc, oracleErr = vocab.Open(path)
	})
	if oracleErr != nil {
		testenv.Missing(t, "llama", "libllama's samplers: %v", oracleErr)
	}
	return oracleLib, oracleVoc, goVoc
}

// randomLogits draws n logits with ties, -inf and huge values mixed in.
func randomLogits(r *rand.Rand, n int) []float32 {
	out := make([]float32, n)
	mode := r.IntN(4)
	for i := range out {
		x := float32(r.NormFloat64() * 3)
		switch mode {
		case 1: // many ties
			x = float32(math.Round(float64(x)))
		case 2: // a wide range
			x = float32(r.NormFloat64() * 30)
		}
		switch u := r.IntN(100); {
		case u < 3:
			x = float32(math.Inf(-1))
		case u < 4:
			x = []float32{1e9, -1e9, 3e38, -3e38, 1e-30, 0}[r.IntN(6)]
		}
		out[i] = x
	}
	return out
}

type config struct {
	name string
	mk   func(l *llama.SamplerLib, vh uintptr, v *vocab.Vocab, seed uint32) ([]sampler, []uintptr)
	full bool // the candidates are the whole vocabulary
}

func one(g sampler, c uintptr) ([]sampler, []uintptr) { return []sampler{g}, []uintptr{c} }

var configs = []config{
	{"greedy", func(l *llama.SamplerLib, _ uintptr, _ *vocab.Vocab, _ uint32) ([]sampler, []uintptr) {
		return one(&greedy{}, l.InitGreedy())
	}, false},
	{"dist", func(l *llama.SamplerLib, _ uintptr, _ *vocab.Vocab, s uint32) ([]sampler, []uintptr) {
		return one(newDist(s), l.InitDist(s))
	}, false},
	{"top-k", func(l *llama.SamplerLib, _ uintptr, _ *vocab.Vocab, s uint32) ([]sampler, []uintptr) {
		k := int32(s%300) + 1
		return one(newTopK(k), l.InitTopK(k))
	}, false},
	{"top-p", func(l *llama.SamplerLib, _ uintptr, _ *vocab.Vocab, s uint32) ([]sampler, []uintptr) {
		p := float32(s%100) / 100
		return one(newTopP(p, int(s%3)), l.InitTopP(p, uintptr(s%3)))
	}, false},
	{"min-p", func(l *llama.SamplerLib, _ uintptr, _ *vocab.Vocab, s uint32) ([]sampler, []uintptr) {
		p := float32(s%100) / 100
		return one(newMinP(p, int(s%5)), l.InitMinP(p, uintptr(s%5)))
	}, false},
	{"typical", func(l *llama.SamplerLib, _ uintptr, _ *vocab.Vocab, s uint32) ([]sampler, []uintptr) {
		p := float32(s%100) / 100
		return one(newTypical(p, int(s%3)), l.InitTypical(p, uintptr(s%3)))
	}, false},
	{"temp", func(l *llama.SamplerLib, _ uintptr, _ *vocab.Vocab, s uint32) ([]sampler, []uintptr) {
		t := float32(s%30)/10 - 0.5
		return one(newTemp(t), l.InitTemp(t))
	}, false},
	{"temp-ext", func(l *llama.SamplerLib, _ uintptr, _ *vocab.Vocab, s uint32) ([]sampler, []uintptr) {
		t, d, e := float32(s%20)/10, float32(s%7)/10, float32(s%4)/2
		return one(newTempExt(t, d, e), l.InitTempExt(t, d, e))
	}, false},
	{"xtc", func(l *llama.SamplerLib, _ uintptr, _ *vocab.Vocab, s uint32) ([]sampler, []uintptr) {
		p, th := float32(s%10)/10+0.05, float32(s%6)/10
		return one(newXTC(p, th, int(s%3), s), l.InitXTC(p, th, uintptr(s%3), s))
	}, false},
	{"top-n-sigma", func(l *llama.SamplerLib, _ uintptr, _ *vocab.Vocab, s uint32) ([]sampler, []uintptr) {
		n := float32(s%30) / 10
		return one(newTopNSigma(n), l.InitTopNSigma(n))
	}, false},
	{"mirostat", func(l *llama.SamplerLib, _ uintptr, _ *vocab.Vocab, s uint32) ([]sampler, []uintptr) {
		return one(newMirostat(32000, s, 5, 0.1, 100), l.InitMirostat(32000, s, 5, 0.1, 100))
	}, false},
	{"mirostat-v2", func(l *llama.SamplerLib, _ uintptr, _ *vocab.Vocab, s uint32) ([]sampler, []uintptr) {
		tau := float32(s%8) + 1
		return one(newMirostatV2(s, tau, 0.1), l.InitMirostatV2(s, tau, 0.1))
	}, false},
	{"penalties", func(l *llama.SamplerLib, _ uintptr, _ *vocab.Vocab, s uint32) ([]sampler, []uintptr) {
		n, rp, f, pr := int32(s%20), 1+float32(s%5)/10, float32(s%3)/10, float32(s%4)/10
		return one(newPenalties(n, rp, f, pr), l.InitPenalties(32000, n, rp, f, pr))
	}, false},
	{"adaptive-p", func(l *llama.SamplerLib, _ uintptr, _ *vocab.Vocab, s uint32) ([]sampler, []uintptr) {
		tg, d := float32(s%12)/10-0.1, float32(s%10)/10
		return one(newAdaptiveP(tg, d, s), l.InitAdaptiveP(tg, d, s))
	}, false},
	{"logit-bias", func(l *llama.SamplerLib, _ uintptr, _ *vocab.Vocab, s uint32) ([]sampler, []uintptr) {
		r := rand.New(rand.NewPCG(uint64(s), 7))
		var gb []LogitBias
		var cb []llama.LogitBias
		for range r.IntN(8) + 1 {
			b := LogitBias{int32(r.IntN(3000) - 10), float32(r.NormFloat64() * 5)}
			gb = append(gb, b)
			cb = append(cb, llama.LogitBias{Token: b.Token, Bias: b.Bias})
		}
		return one(&logitBias{biases: gb}, l.LogitBias(32000, cb))
	}, false},
	{"dry", func(l *llama.SamplerLib, vh uintptr, v *vocab.Vocab, s uint32) ([]sampler, []uintptr) {
		br := [][]string{{"\n", ":", "\"", "*"}, {"the", " and", "ing"}, {}}[s%3]
		m, b, a, n := 0.8+float32(s%3)/10, float32(1.75), int32(s%3), int32(s%50)+1
		p := Params{DryMultiplier: m, DryBase: b, DryAllowedLength: a, DryPenaltyLastN: n, DrySequenceBreakers: br}
		g, err := newDRY(v, p)
		if err != nil {
			panic(err)
		}
		return one(g, l.DRY(vh, m, b, a, n, br))
	}, true},
	{"infill", func(l *llama.SamplerLib, vh uintptr, v *vocab.Vocab, s uint32) ([]sampler, []uintptr) {
		return []sampler{newTopK(20), &infill{v: v}}, []uintptr{l.InitTopK(20), l.InitInfill(vh)}
	}, true},
	{"top-k+top-p+min-p+temp+dist", func(l *llama.SamplerLib, _ uintptr, _ *vocab.Vocab, s uint32) ([]sampler, []uintptr) {
		return []sampler{newTopK(0), newTopP(0.9, 0), newMinP(0.02, 0), newTemp(0.7), newDist(s)},
			[]uintptr{l.InitTopK(0), l.InitTopP(0.9, 0), l.InitMinP(0.02, 0), l.InitTemp(0.7), l.InitDist(s)}
	}, false},
}

// TestSamplersMatchLibllama runs each sampler over random candidates next
// to libllama's, accepting a token between the steps, and compares the
// candidates left, their order, logits and probabilities bit for bit,
// the selected index and the sorted flag.
func TestSamplersMatchLibllama(t *testing.T) {
	t.Parallel()
	l, vh, v := oracle(t)
	nVocab := v.NTokens()
	sizes := []int{1, 2, 3, 17, 130, 1100, 5000}
	total := 0
	for _, cfg := range configs {
		t.Run(cfg.name, func(t *testing.T) {
			for s := uint32(0); s < 6; s++ {
				r := rand.New(rand.NewPCG(uint64(s), uint64(len(cfg.name))))
				gs, cs := cfg.mk(l, vh, v, s*7919+1)
				chain := l.ChainInit(true)
				for _, c := range cs {
					l.ChainAdd(chain, c)
				}
				for step := 0; step < 25; step++ {
					n := sizes[r.IntN(len(sizes))]
					if cfg.full {
						n = nVocab
					}
					logits := randomLogits(r, n)
					ids := make([]int32, n)
					for i := range ids {
						ids[i] = int32(i)
					}
					if !cfg.full && r.IntN(3) == 0 {
						r.Shuffle(n, func(i, j int) { ids[i], ids[j] = ids[j], ids[i] })
					}
					gd := make([]tokenData, n)
					cd := make([]llama.TokenData, n)
					for i := range gd {
						gd[i] = tokenData{ids[i], logits[i], 0}
						cd[i] = llama.TokenData{ID: ids[i], Logit: logits[i]}
					}
					gc := &candidates{data: gd, selected: -1}
					for _, g := range gs {
						g.apply(gc)
					}
					cw, csel, csorted := l.ApplyTo(chain, cd, -1, false)
					if gc.err != nil {
						t.Fatalf("seed %d step %d: %v", s, step, gc.err)
					}
					if err := sameCandidates(gc, cw, csel, csorted); err != nil {
						t.Fatalf("seed %d step %d (n %d): %v", s, step, n, err)
					}
					total++
					var tok int32
					if gc.selected >= 0 {
						tok = gc.data[gc.selected].id
					} else if len(gc.data) > 0 {
						tok = gc.data[r.IntN(len(gc.data))].id
					}
					if r.IntN(4) > 0 {
						tok = int32(r.IntN(8)) // repeats for penalties and DRY
					}
					for _, g := range gs {
						g.accept(tok)
					}
					l.Accept(chain, tok)
					if step == 17 {
						for _, g := range gs {
							g.reset()
						}
						l.Reset(chain)
					}
				}
				l.Free(chain)
			}
		})
	}
	t.Logf("%d applications compared", total)
}

func sameCandidates(g *candidates, c []llama.TokenData, csel int64, csorted bool) error {
	if len(g.data) != len(c) {
		return fmt.Errorf("%d candidates, libllama %d", len(g.data), len(c))
	}
	if int64(g.selected) != csel || g.sorted != csorted {
		return fmt.Errorf("selected %d sorted %v, libllama %d %v", g.selected, g.sorted, csel, csorted)
	}
	for i := range c {
		a, b := g.data[i], c[i]
		if a.id != b.ID || math.Float32bits(a.logit) != math.Float32bits(b.Logit) || math.Float32bits(a.p) != math.Float32bits(b.P) {
			return fmt.Errorf("candidate %d: {%d %g %g}, libllama {%d %g %g}", i, a.id, a.logit, a.p, b.ID, b.Logit, b.P)
		}
	}
	return nil
}

// TestChainMatchesCommon builds chains with common_sampler_init (through
// a harness linked with libllama-common) and with New from the same
// parameters, compares common_sampler_print with String, then samples the
// same rows of logits on both sides.
func TestChainMatchesCommon(t *testing.T) {
	t.Parallel()
	_, _, v := oracle(t)
	bin := cxx.Build(t, "sampler-harness", []string{harnessPath(t)})
	path := filepath.Join(testenv.SourceTree(t), "models", vocabFile)
	cases := [][]string{
		{"seed=1"},
		{"seed=2", "temp=0"},
		{"seed=3", "temp=-1", "top_k=5"},
		{"seed=4", "penalty_repeat=1.3", "penalty_freq=0.2", "penalty_present=0.1", "dry_multiplier=0.8"},
		{"seed=5", "xtc_probability=0.5", "xtc_threshold=0.1", "min_keep=2", "top_k=100"},
		{"seed=6", "mirostat=1"},
		{"seed=7", "mirostat=2", "temp=0.9"},
		{"seed=8", "samplers=top_k;TOP-P;minp;temp;nucleus;bogus", "top_p=0.8"},
		{"seed=9", "sampling_seq=kmyt?a", "adaptive_target=0.4", "typ_p=0.9"},
		{"seed=10", "dynatemp_range=0.5", "dynatemp_exponent=1.5", "top_n_sigma=1.5"},
		{"seed=11", "bias=5:4.5", "bias=100:-inf", "top_k=0", "top_p=1", "min_p=0"},
		// zeros meant, where llama.cpp's defaults are not zero
		{"seed=0", "top_p=0", "xtc_probability=0.3", "xtc_threshold=0", "dynatemp_exponent=0", "dynatemp_range=0.4"},
		{"seed=12", "samplers=", "top_k=0"},
	}
	const rows = 12
	n := v.NTokens()
	// the keys' fields, named in Explicit: a zero given is meant (Params{}
	// is llama.cpp's defaults, which the harness starts from)
	explicit := map[string]Set{"seed": SetSeed, "temp": SetTemp, "top_k": SetTopK, "top_p": SetTopP, "min_p": SetMinP,
		"typ_p": SetTypP, "penalty_repeat": SetPenaltyRepeat, "xtc_probability": SetXTCProbability, "xtc_threshold": SetXTCThreshold,
		"mirostat": SetMirostat, "adaptive_target": SetAdaptiveTarget, "dynatemp_exponent": SetDynatempExponent,
		"top_n_sigma": SetTopNSigma, "samplers": SetSamplers, "sampling_seq": SetSamplers}
	for ci, args := range cases {
		p := Params{}
		for _, a := range args {
			k, val, _ := strings.Cut(a, "=")
			p.Explicit |= explicit[k]
			f := func() float32 {
				var x float64
				if val == "-inf" {
					return float32(math.Inf(-1))
				}
				fmt.Sscan(val, &x)
				return float32(x)
			}
			i := func() int32 { var x int32; fmt.Sscan(val, &x); return x }
			switch k {
			case "seed":
				p.Seed = uint32(i())
			case "temp":
				p.Temp = f()
			case "top_k":
				p.TopK = i()
			case "top_p":
				p.TopP = f()
			case "min_p":
				p.MinP = f()
			case "typ_p":
				p.TypP = f()
			case "min_keep":
				p.MinKeep = i()
			case "penalty_repeat":
				p.PenaltyRepeat = f()
			case "penalty_freq":
				p.PenaltyFreq = f()
			case "penalty_present":
				p.PenaltyPresent = f()
			case "dry_multiplier":
				p.DryMultiplier = f()
			case "xtc_probability":
				p.XTCProbability = f()
			case "xtc_threshold":
				p.XTCThreshold = f()
			case "mirostat":
				p.Mirostat = i()
			case "adaptive_target":
				p.AdaptiveTarget = f()
			case "dynatemp_range":
				p.DynatempRange = f()
			case "dynatemp_exponent":
				p.DynatempExponent = f()
			case "top_n_sigma":
				p.TopNSigma = f()
			case "samplers":
				p.Samplers, _ = ParseSamplers(val)
			case "sampling_seq":
				p.Samplers, _ = ParseSamplingSeq(val)
			case "bias":
				tok, b, _ := strings.Cut(val, ":")
				var id int32
				fmt.Sscan(tok, &id)
				val = b
				p.LogitBias = append(p.LogitBias, LogitBias{id, f()})
			default:
				t.Fatalf("unknown key %s", k)
			}
		}
		s, err := New(v, p)
		if err != nil {
			t.Fatal(err)
		}
		r := rand.New(rand.NewPCG(uint64(ci), 3))
		var in bytes.Buffer
		binary.Write(&in, binary.LittleEndian, int32(rows))
		all := make([][]float32, rows)
		for i := range all {
			all[i] = randomLogits(r, n)
			binary.Write(&in, binary.LittleEndian, all[i])
		}
		cmd := cxx.Command(t, bin, append([]string{path}, args...)...)
		cmd.Stdin = &in
		out, err := cmd.Output()
		if err != nil {
			t.Fatalf("%v: %v", args, err)
		}
		sc := bufio.NewScanner(bytes.NewReader(out))
		sc.Buffer(nil, 1<<20)
		sc.Scan()
		if got, want := s.String(), sc.Text(); got != want {
			t.Errorf("%v: chain %q, common_sampler_print %q", args, got, want)
		}
		for row := range rows {
			tok, err := s.Sample(all[row])
			if err != nil {
				t.Fatal(err)
			}
			sc.Scan()
			var sel int64
			var id int32
			var size, sorted int
			fmt.Sscan(sc.Text(), &sel, &id, &size, &sorted)
			cands, gsel := s.Candidates(false)
			if tok != id || int64(gsel) != sel || len(cands) != size || s.cur.sorted != (sorted == 1) {
				t.Fatalf("%v row %d: token %d (index %d of %d, sorted %v), llama.cpp %d (%d of %d, %d)", args, row, tok, gsel, len(cands), s.cur.sorted, id, sel, size, sorted)
			}
			for i := range size {
				sc.Scan()
				var cid int32
				var lb, pb uint32
				fmt.Sscanf(sc.Text(), "%d %x %x", &cid, &lb, &pb)
				c := cands[i]
				if c.ID != cid || math.Float32bits(c.Logit) != lb || math.Float32bits(c.P) != pb {
					t.Fatalf("%v row %d candidate %d: {%d %08x %08x}, llama.cpp {%d %08x %08x}", args, row, i, c.ID, math.Float32bits(c.Logit), math.Float32bits(c.P), cid, lb, pb)
				}
			}
			s.Accept(tok)
		}
	}
}

func harnessPath(t *testing.T) string {
	p, err := filepath.Abs(filepath.Join("testdata", "harness.cpp"))
	if err != nil {
		t.Fatal(err)
	}
	return p
}
