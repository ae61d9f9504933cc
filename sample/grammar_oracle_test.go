package sample

import (
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/ggload/ggload/grammar"
	"github.com/ggload/ggload/internal/ojson"
	"github.com/ggload/ggload/lab/llama"
	"github.com/ggload/ggload/lab/testenv"
	"github.com/ggload/ggload/vocab"
)

// pinnedSampler is common_sampler_sample and common_sampler_accept over
// libllama's own samplers: the chain common_sampler_init builds of the
// default parameters, and llama_sampler_init_grammar beside it.
type pinnedSampler struct {
	l         *llama.SamplerLib
	chain     uintptr
	grammar   uintptr
	cur       []llama.TokenData
	one       []llama.TokenData
	resampled int // the tokens the grammar refused, sampled again
}

func newPinnedSampler(l *llama.SamplerLib, vh uintptr, v *vocab.Vocab, grammar string, seed uint32) *pinnedSampler {
	return newPinnedSamplerWith(l, vh, v, seed, l.InitGrammar(vh, grammar, "root"))
}

func newPinnedSamplerWith(l *llama.SamplerLib, vh uintptr, v *vocab.Vocab, seed uint32, grammar uintptr) *pinnedSampler {
	p := DefaultParams()
	s := &pinnedSampler{l: l, chain: l.ChainInit(true), one: make([]llama.TokenData, 1)}
	n := int32(v.NTokens())
	var biases []llama.LogitBias
	for _, t := range v.SuppressTokens() {
		biases = append(biases, llama.LogitBias{Token: t, Bias: float32(math.Inf(-1))})
	}
	if len(biases) > 0 {
		l.ChainAdd(s.chain, l.LogitBias(n, biases))
	}
	for _, smpl := range []uintptr{
		l.InitPenalties(n, p.PenaltyLastN, p.PenaltyRepeat, p.PenaltyFreq, p.PenaltyPresent),
		l.DRY(vh, p.DryMultiplier, p.DryBase, p.DryAllowedLength, p.DryPenaltyLastN, p.DrySequenceBreakers),
		l.InitTopNSigma(p.TopNSigma),
		l.InitTopK(p.TopK),
		l.InitTypical(p.TypP, 0),
		l.InitTopP(p.TopP, 0),
		l.InitMinP(p.MinP, 0),
		l.InitXTC(p.XTCProbability, p.XTCThreshold, 0, seed),
		l.InitTempExt(p.Temp, p.DynatempRange, p.DynatempExponent),
		l.InitDist(seed),
	} {
		l.ChainAdd(s.chain, smpl)
	}
	s.grammar = grammar
	s.cur = make([]llama.TokenData, n)
	return s
}

func (s *pinnedSampler) fill(logits []float32) {
	for i, x := range logits {
		s.cur[i] = llama.TokenData{ID: int32(i), Logit: x}
	}
}

// sampleGrammarFirst is common_sampler_sample with grammar_first set.
func (s *pinnedSampler) sampleGrammarFirst(logits []float32) int32 {
	s.fill(logits)
	data, sel, sorted := s.l.ApplyTo(s.grammar, s.cur, -1, false)
	data, sel, _ = s.l.ApplyTo(s.chain, data, sel, sorted)
	return data[sel].ID
}

// sample is common_sampler_sample with grammar_first false.
func (s *pinnedSampler) sample(logits []float32) int32 {
	s.fill(logits)
	data, sel, _ := s.l.ApplyTo(s.chain, s.cur, -1, false)
	id := data[sel].ID
	s.one[0] = llama.TokenData{ID: id, Logit: 1}
	if one, _, _ := s.l.ApplyTo(s.grammar, s.one, -1, false); !math.IsInf(float64(one[0].Logit), -1) {
		return id
	}
	s.resampled++
	s.fill(logits)
	data, sel, sorted := s.l.ApplyTo(s.grammar, s.cur, -1, false)
	data, sel, _ = s.l.ApplyTo(s.chain, data, sel, sorted)
	return data[sel].ID
}

func (s *pinnedSampler) accept(t int32) {
	s.l.Accept(s.grammar, t)
	s.l.Accept(s.chain, t)
}

func (s *pinnedSampler) free() {
	s.l.Free(s.grammar)
	s.l.Free(s.chain)
}

var (
	bigOnce  sync.Once
	bigVocab uintptr
	bigGo    *vocab.Vocab
	bigErr   error
)

// bigOracle is libllama's samplers and the pin's ggml-vocab-qwen2.gguf
// (151,936 tokens) on both sides.
func bigOracle(t testing.TB) (*llama.SamplerLib, uintptr, *vocab.Vocab) {
	t.Helper()
	rt := testenv.Runtime(t)
	path := filepath.Join(testenv.SourceTree(t), "models", "ggml-vocab-qwen2.gguf")
	bigOnce.Do(func() {
		l, err := llama.Open(rt)
		if err != nil {
			bigErr = err
			return
		}
		if _, bigVocab, bigErr = l.VocabOnly(path); bigErr != nil {
			return
		}
		bigGo, bigErr = vocab.Open(path)
	})
	if bigErr != nil {
		testenv.Missing(t, "llama", "libllama's samplers: %v", bigErr)
	}
	l, err := llama.Open(rt)
	if err != nil {
		testenv.Missing(t, "llama", "libllama: %v", err)
	}
	s, err := l.Samplers()
	if err != nil {
		testenv.Missing(t, "llama", "libllama's samplers: %v", err)
	}
	return s, bigVocab, bigGo
}

func jsonGrammar(t testing.TB) string {
	b, err := os.ReadFile(filepath.Join(testenv.SourceTree(t), "grammars", "json.gbnf"))
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// grammarRows are rows of random logits for a generation (seeded).
func grammarRows(n, rows int, seed uint64) [][]float32 {
	r := rand.New(rand.NewPCG(seed, 58))
	out := make([][]float32, rows)
	for i := range out {
		out[i] = make([]float32, n)
		for j := range out[i] {
			out[i][j] = float32(r.NormFloat64() * 3)
		}
	}
	return out
}

// genSteps is the tokens of one generation before both sides start over.
const genSteps = 48

// A generation under the JSON grammar over a 151k-token vocabulary at the
// default chain: the tokens common_sampler_sample picks with libllama's
// samplers and grammar, and those Sample picks, the same at every step
// (the resampling path included), seeded with several seeds.
func TestGrammarSampleMatchesLibllama(t *testing.T) {
	l, vh, v := bigOracle(t)
	text := jsonGrammar(t)
	rows := grammarRows(v.NTokens(), genSteps, 1)
	resampled, steps := 0, 0
	for seed := range uint32(4) {
		first := seed == 3 // grammar_first
		p := DefaultParams()
		p.Seed = seed
		p.Grammar = text
		ours, err := New(v, p)
		if err != nil {
			t.Fatal(err)
		}
		pin := newPinnedSampler(l, vh, v, text, seed)
		for i, row := range rows {
			var want, got vocab.Token
			var err error
			if first {
				want = pin.sampleGrammarFirst(row)
				got, err = ours.SampleGrammarFirst(row)
			} else {
				want = pin.sample(row)
				got, err = ours.Sample(row)
			}
			if err != nil {
				t.Fatal(err)
			}
			if got != want {
				t.Fatalf("seed %d (grammar first %v) step %d: token %d, libllama %d", seed, first, i, got, want)
			}
			steps++
			if err := ours.Accept(got); err != nil {
				t.Fatal(err)
			}
			pin.accept(want)
			if v.IsEOG(got) {
				break
			}
		}
		resampled += pin.resampled
		pin.free()
	}
	t.Logf("%d steps, %d of them resampled under the grammar", steps, resampled)
	if resampled == 0 || resampled == steps {
		t.Errorf("the resampling path taken %d times of %d", resampled, steps)
	}
}

// BenchmarkGrammarSample is one token of a generation under the JSON
// grammar (grammars/json.gbnf) over the 151,936 tokens of the pin's
// ggml-vocab-qwen2.gguf at the default chain, sampled and accepted as
// common_sampler_sample and common_sampler_accept do: ggload's Sampler,
// and libllama's chain and grammar sampler (through its C API, driven the
// same way). Both start over every 48 tokens; the logits are random
// (seeded), the same rows for both, and the tokens are the same
// (TestGrammarSampleMatchesLibllama).
//
//	go test ./sample -run XXX -bench GrammarSample
func BenchmarkGrammarSample(b *testing.B) {
	l, vh, v := bigOracle(b)
	text := jsonGrammar(b)
	rows := grammarRows(v.NTokens(), genSteps, 1)
	b.Run("ggload", func(b *testing.B) {
		defer cpuPerOp(b)()
		p := DefaultParams()
		p.Seed = 1
		p.Grammar = text
		if _, err := New(v, p); err != nil { // the vocabulary's index, built once
			b.Fatal(err)
		}
		var s *Sampler
		step := genSteps
		for b.Loop() {
			if step == genSteps {
				var err error
				if s, err = New(v, p); err != nil {
					b.Fatal(err)
				}
				step = 0
			}
			tok, err := s.Sample(rows[step])
			if err != nil {
				b.Fatal(err)
			}
			if err := s.Accept(tok); err != nil {
				b.Fatal(err)
			}
			step++
			if v.IsEOG(tok) {
				step = genSteps
			}
		}
	})
	b.Run("libllama", func(b *testing.B) {
		defer cpuPerOp(b)()
		var s *pinnedSampler
		step := genSteps
		for b.Loop() {
			if step == genSteps {
				if s != nil {
					s.free()
				}
				s = newPinnedSampler(l, vh, v, text, 1)
				step = 0
			}
			tok := s.sample(rows[step])
			s.accept(tok)
			step++
			if v.IsEOG(tok) {
				step = genSteps
			}
		}
		s.free()
	})
}

// A lazy grammar, as a chat format's tool call makes one: free text until
// a trigger (a word, a pattern, a full pattern, a token), then the
// grammar from the trigger on. The tokens libllama's lazy grammar sampler
// and chain pick (its patterns made as common_sampler_init makes them of
// the triggers) and those Sample picks are the same, before, at and after
// the trigger.
func TestLazyGrammarSampleMatchesLibllama(t *testing.T) {
	l, vh, v := oracle(t)
	text := `root ::= " "? "{" [a-z ":,]* "}"`
	brace, err := v.Tokenize("{", false, false)
	if err != nil || len(brace) == 0 {
		t.Fatalf("tokenizing {: %v %v", brace, err)
	}
	tok := brace[len(brace)-1]
	rows := grammarRows(v.NTokens(), 40, 2)
	for i := 6; i < len(rows); i += 17 {
		rows[i][tok] += 60 // the trigger comes
	}
	for _, c := range []struct {
		trigger  GrammarTrigger
		patterns []string
		tokens   []int32
	}{
		{GrammarTrigger{Type: TriggerWord, Value: "{"}, []string{`\{`}, nil},
		{GrammarTrigger{Type: TriggerPattern, Value: `([a-z]*)\{`}, []string{`([a-z]*)\{`}, nil},
		{GrammarTrigger{Type: TriggerPatternFull, Value: `[\s\S]*?(\{)[\s\S]*`}, []string{`^[\s\S]*?(\{)[\s\S]*$`}, nil},
		{GrammarTrigger{Type: TriggerToken, Token: tok}, nil, []int32{tok}},
	} {
		p := DefaultParams()
		p.Seed = 4
		p.Grammar, p.GrammarLazy, p.GrammarTriggers = text, true, []GrammarTrigger{c.trigger}
		ours, err := New(v, p)
		if err != nil {
			t.Fatal(err)
		}
		pin := newPinnedSamplerWith(l, vh, v, 4, l.GrammarLazy(vh, text, "root", c.patterns, c.tokens))
		triggered := -1
		for i, row := range rows {
			want := pin.sample(row)
			got, err := ours.Sample(row)
			if err != nil {
				t.Fatal(err)
			}
			if got != want {
				t.Fatalf("%+v step %d: token %d, libllama %d", c.trigger, i, got, want)
			}
			if err := ours.Accept(got); err != nil {
				t.Fatalf("%+v step %d: %v", c.trigger, i, err)
			}
			pin.accept(want)
			if triggered < 0 && !ours.Grammar().Awaiting() {
				triggered = i
			}
			if v.IsEOG(got) {
				break
			}
		}
		pin.free()
		if triggered < 0 {
			t.Errorf("%+v: the grammar never triggered", c.trigger)
		}
		t.Logf("%+v: triggered at step %d, %d tokens resampled after", c.trigger, triggered, pin.resampled)
	}
}

// An output-format grammar takes the generation prompt's tokens first
// (what a chat template already wrote), a user's grammar never does; a
// grammar and a schema at once, a schema that does not convert and a
// grammar that does not parse are refused.
func TestGrammarParams(t *testing.T) {
	_, _, v := bigOracle(t) // a BPE vocabulary: no space before the prompt
	schema := `{"type":"object","properties":{"a":{"type":"integer"}},"required":["a"]}`
	p := DefaultParams()
	p.JSONSchema, p.GenerationPrompt = schema, `{"a`
	s, err := New(v, p)
	if err != nil {
		t.Fatal(err)
	}
	// the same grammar, the prompt's tokens accepted by hand
	sv, _ := ojsonParse(schema)
	text, err := grammarFromSchema(sv)
	if err != nil {
		t.Fatal(err)
	}
	want, err := newGrammar(v, text)
	if err != nil {
		t.Fatal(err)
	}
	toks, _ := v.Tokenize(`{"a`, false, true)
	for _, tok := range toks {
		if err := want.Accept(tok); err != nil {
			t.Fatal(err)
		}
	}
	if got := s.Grammar().String(); got != want.String() || got == "" {
		t.Fatalf("prefilled stacks\n%s\nwant\n%s", got, want)
	}
	p.GrammarType, p.JSONSchema, p.Grammar = GrammarUser, "", text
	if s, err = New(v, p); err != nil || s.Grammar().String() == want.String() {
		t.Fatalf("a user's grammar prefilled: %v", err)
	}
	for _, c := range []struct {
		mod  func(*Params)
		want string
	}{
		{func(p *Params) { p.Grammar, p.JSONSchema = `root ::= "a"`, schema }, "a grammar and a JSON schema"},
		{func(p *Params) { p.Grammar, p.JSONSchema = "", `{"type": 5}` }, "type must be a string"},
		{func(p *Params) { p.Grammar, p.JSONSchema = `root ::= [a`, "" }, "failed to parse grammar"},
		{func(p *Params) {
			p.Grammar, p.GrammarLazy = `root ::= "a"`, true
			p.GrammarTriggers = []GrammarTrigger{{Type: TriggerPattern, Value: "("}}
		}, "trigger pattern"},
		{func(p *Params) { p.Grammar = "%llguidance {}" }, "llguidance"},
	} {
		q := DefaultParams()
		c.mod(&q)
		if _, err := New(v, q); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("grammar %q schema %q: %v, want an error saying %q", q.Grammar, q.JSONSchema, err, c.want)
		}
	}
}

func ojsonParse(s string) (ojson.Value, error)        { return ojson.ParseString(s) }
func grammarFromSchema(v ojson.Value) (string, error) { return grammar.FromJSONSchema(v, false) }
func newGrammar(v *vocab.Vocab, text string) (*grammar.Grammar, error) {
	return grammar.New(v, text, "root")
}
