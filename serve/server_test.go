package serve_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"net/http"
	"slices"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/ggload/ggload/lab/llamaserver"
	"github.com/ggload/ggload/place"
	"github.com/ggload/ggload/sample"
	"github.com/ggload/ggload/serve"
)

// srvResult is llama-server's /completion answer, the fields compared.
type srvResult struct {
	Content      string  `json:"content"`
	Tokens       []int32 `json:"tokens"`
	IDSlot       int     `json:"id_slot"`
	StopType     string  `json:"stop_type"`
	StoppingWord string  `json:"stopping_word"`
	Predicted    int     `json:"tokens_predicted"`
	Evaluated    int     `json:"tokens_evaluated"`
	Cached       int     `json:"tokens_cached"`
	Truncated    bool    `json:"truncated"`
	Timings      struct {
		CacheN  int `json:"cache_n"`
		PromptN int `json:"prompt_n"`
	} `json:"timings"`
	Probs []struct {
		ID      int32    `json:"id"`
		Prob    *float32 `json:"prob"`
		LogProb *float32 `json:"logprob"`
		Top     []struct {
			ID      int32    `json:"id"`
			Prob    *float32 `json:"prob"`
			LogProb *float32 `json:"logprob"`
		} `json:"top_probs"`
		TopLog []struct {
			ID      int32    `json:"id"`
			Prob    *float32 `json:"prob"`
			LogProb *float32 `json:"logprob"`
		} `json:"top_logprobs"`
	} `json:"completion_probabilities"`
	// an error's
	Error *struct {
		Code    int    `json:"code"`
		Message string `json:"message"`
		Type    string `json:"type"`
	} `json:"error"`
}

// request is one completion, asked of both.
type request struct {
	prompt []int32
	o      serve.Options
	// stopFromLast takes a stop string from the reply before (both
	// sides': they are the same)
	stopFromLast bool
}

// body is the request as llama-server's JSON takes it.
func (r request) body(stream bool) []byte {
	sp := &r.o.Sampling
	m := map[string]any{
		"prompt": r.prompt, "n_predict": r.o.NPredict, "seed": sp.Seed, "temperature": sp.Temp, "top_k": sp.TopK, "top_p": sp.TopP,
		"min_p": sp.MinP, "repeat_penalty": sp.PenaltyRepeat, "repeat_last_n": sp.PenaltyLastN, "dry_multiplier": sp.DryMultiplier,
		"return_tokens": true, "cache_prompt": r.o.CachePrompt, "n_keep": r.o.NKeep, "n_cache_reuse": r.o.NCacheReuse,
		"ignore_eos": sp.IgnoreEOS, "stream": stream, "n_indent": r.o.NIndent,
	}
	if r.o.Stop != nil {
		m["stop"] = r.o.Stop
	}
	if sp.NProbs > 0 {
		m["n_probs"] = sp.NProbs
		m["post_sampling_probs"] = r.o.PostSamplingProbs
	}
	if r.o.IDSlot >= 0 {
		m["id_slot"] = r.o.IDSlot
	}
	b, _ := json.Marshal(m)
	return b
}

// ask sends the request to llama-server; stream: the contents of its
// partial answers too.
func ask(t testing.TB, s *llamaserver.Server, r request, stream bool) (srvResult, []string) {
	t.Helper()
	resp, err := http.Post(s.URL+"/completion", "application/json", bytes.NewReader(r.body(stream)))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var res srvResult
	if !stream {
		b, _ := io.ReadAll(resp.Body)
		if err := json.Unmarshal(b, &res); err != nil {
			t.Fatalf("llama-server answered %d: %s", resp.StatusCode, b)
		}
		return res, nil
	}
	var pieces []string
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 1<<20), 1<<24)
	for sc.Scan() {
		line, ok := strings.CutPrefix(sc.Text(), "data: ")
		if !ok {
			continue
		}
		var ev struct {
			srvResult
			Stop bool `json:"stop"`
		}
		if err := json.Unmarshal([]byte(line), &ev); err != nil {
			t.Fatalf("llama-server's stream: %q: %v", line, err)
		}
		if ev.Stop {
			res = ev.srvResult
			break
		}
		if len(ev.Tokens) > 0 {
			pieces = append(pieces, ev.Content)
		}
	}
	return res, pieces
}

// compare holds the engine's result to llama-server's.
func compare(t testing.TB, what string, r *serve.Result, w srvResult) {
	t.Helper()
	var diffs []string
	if !slices.Equal(r.Tokens, w.Tokens) {
		diffs = append(diffs, fmt.Sprintf("tokens %v, llama-server %v", r.Tokens, w.Tokens))
	}
	if c := jsonText(r.Content); c != w.Content {
		i := 0
		for i < min(len(c), len(w.Content)) && c[i] == w.Content[i] {
			i++
		}
		diffs = append(diffs, fmt.Sprintf("content %q, llama-server %q (as JSON, from byte %d: %q, llama-server %q)", r.Content, w.Content, i, c[i:min(i+12, len(c))], w.Content[i:min(i+12, len(w.Content))]))
	}
	if r.Stop.String() != w.StopType || r.StoppingWord != w.StoppingWord {
		diffs = append(diffs, fmt.Sprintf("stop %v %q, llama-server %s %q", r.Stop, r.StoppingWord, w.StopType, w.StoppingWord))
	}
	if r.Slot != w.IDSlot || r.NDecoded != w.Predicted || r.NPromptTokens != w.Evaluated || r.NTokensCached != w.Cached || r.Truncated != w.Truncated {
		diffs = append(diffs, fmt.Sprintf("slot %d decoded %d evaluated %d cached %d truncated %v, llama-server %d %d %d %d %v",
			r.Slot, r.NDecoded, r.NPromptTokens, r.NTokensCached, r.Truncated, w.IDSlot, w.Predicted, w.Evaluated, w.Cached, w.Truncated))
	}
	if r.Timings.CacheN != w.Timings.CacheN || r.Timings.PromptN != w.Timings.PromptN {
		diffs = append(diffs, fmt.Sprintf("prompt cached %d processed %d, llama-server %d %d", r.Timings.CacheN, r.Timings.PromptN, w.Timings.CacheN, w.Timings.PromptN))
	}
	if len(r.Probs) != len(w.Probs) {
		diffs = append(diffs, fmt.Sprintf("%d probs, llama-server %d", len(r.Probs), len(w.Probs)))
	} else {
		for i, p := range r.Probs {
			q := w.Probs[i]
			top := q.Top
			if q.LogProb != nil {
				top = q.TopLog
			}
			if p.ID != q.ID || !sameProb(p.Prob, q.Prob, q.LogProb) || len(p.Probs) != len(top) {
				diffs = append(diffs, fmt.Sprintf("token %d's probs: %d %v (%d), llama-server %d %v (%d)", i, p.ID, p.Prob, len(p.Probs), q.ID, q.Prob, len(top)))
				break
			}
			for k, c := range p.Probs {
				if c.ID != top[k].ID || !sameProb(c.Prob, top[k].Prob, top[k].LogProb) {
					diffs = append(diffs, fmt.Sprintf("token %d's candidate %d: %d %v, llama-server %d", i, k, c.ID, c.Prob, top[k].ID))
					break
				}
			}
		}
	}
	if len(diffs) > 0 {
		t.Errorf("%s:\n  %s", what, strings.Join(diffs, "\n  "))
	}
}

// sameProb holds a probability to llama-server's: the same float after
// sampling; before, its log as llama-server writes it (logf: the same to
// a unit of the last place, the log being the HTTP layer's, not the
// engine's).
func sameProb(p float32, prob, logprob *float32) bool {
	switch {
	case prob != nil:
		return math.Float32bits(p) == math.Float32bits(*prob)
	case logprob != nil:
		want := float64(*logprob)
		if p == 0 {
			return *logprob == -math.MaxFloat32
		}
		return math.Abs(math.Log(float64(p))-want) <= 1e-6*max(1, math.Abs(want))
	}
	return false
}

// jsonText is s as llama-server's JSON (nlohmann's dump, errors
// replaced) writes it: each maximal part of an invalid UTF-8 sequence
// one U+FFFD.
func jsonText(s string) string {
	var b strings.Builder
	for i := 0; i < len(s); {
		if r, n := utf8.DecodeRuneInString(s[i:]); r != utf8.RuneError || n > 1 {
			b.WriteString(s[i : i+n])
			i += n
			continue
		}
		// the lead byte's length and its first continuation's range
		c, n, lo, hi := s[i], 0, byte(0x80), byte(0xBF)
		switch {
		case c >= 0xC2 && c <= 0xDF:
			n = 2
		case c == 0xE0:
			n, lo = 3, 0xA0
		case c >= 0xE1 && c <= 0xEC, c == 0xEE, c == 0xEF:
			n = 3
		case c == 0xED:
			n, hi = 3, 0x9F
		case c == 0xF0:
			n, lo = 4, 0x90
		case c >= 0xF1 && c <= 0xF3:
			n = 4
		case c == 0xF4:
			n, hi = 4, 0x8F
		}
		k := 1
		for k < n && i+k < len(s) && s[i+k] >= lo && s[i+k] <= hi {
			k++
			lo, hi = 0x80, 0xBF
		}
		b.WriteRune(utf8.RuneError)
		i += k
	}
	return b.String()
}

var serverBin = func(t testing.TB) string { return llamaserver.Build(t) }

// serverCase is a model, the server's flags, and requests sent in turn.
type serverCase struct {
	name   string
	arch   string
	layers int
	nCtx   int
	flags  []string
	p      serve.Params
	reqs   func(e *serve.Engine) []request
}

// Requests sent one after another give the tokens llama-server gives
// them, on the same model and flags: the same slots chosen, the same
// prompt cached (common prefix, the prompt cache in host memory, cache
// reuse, checkpoints of a recurrent or hybrid memory), the same stop
// strings, limits, probabilities and context shifts.
func TestSequentialIsLlamaServer(t *testing.T) {
	oracleOnly(t)
	cases := []serverCase{
		{name: "llama", arch: "llama", layers: 2, nCtx: 1024, reqs: basicRequests},
		{name: "jamba", arch: "jamba", layers: 4, nCtx: 1024, reqs: basicRequests},
		{name: "cache-reuse", arch: "llama", layers: 2, nCtx: 1024, flags: []string{"--cache-reuse", "4"}, p: serve.Params{CacheReuse: 4}, reqs: reuseRequests},
		{name: "context-shift", arch: "llama", layers: 2, nCtx: 256, flags: []string{"--context-shift", "-np", "1"}, p: serve.Params{ContextShift: true}, reqs: shiftRequests},
		{name: "no-cache-ram", arch: "llama", layers: 2, nCtx: 1024, flags: []string{"--cache-ram", "0"}, p: serve.Params{NoCacheRAM: true}, reqs: basicRequests},
		{name: "context-full", arch: "llama", layers: 2, nCtx: 256, flags: []string{"-np", "1"}, reqs: shiftRequests},
		{name: "mamba", arch: "mamba", layers: 2, nCtx: 1024, reqs: basicRequests},
	}
	if !all() {
		cases = cases[:2]
	}
	bin := serverBin(t)
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			path := textModel(t, c.arch, "llama-spm", c.layers)
			flags := append([]string{"-m", path, "--device", "none", "-t", fmt.Sprint(threads), "-c", fmt.Sprint(c.nCtx)}, c.flags...)
			srv := llamaserver.Start(t, bin, flags...)
			np := 4
			if slices.Contains(c.flags, "-np") {
				np = 1
			}
			e := newEngine(t, path, c.nCtx, c.p, func(cp *place.ContextParams) { cp.NParallel = np })
			var last *serve.Result
			for i, r := range c.reqs(e) {
				if r.stopFromLast {
					stop := asciiPair(last)
					if stop == "" {
						t.Logf("request %d: no stop string in the reply before", i)
						continue
					}
					r.o.Stop = []string{stop}
				}
				got, err := e.Complete(context.Background(), r.prompt, r.o, nil)
				if err != nil {
					t.Fatalf("request %d: %v", i, err)
				}
				want, _ := ask(t, srv, r, false)
				if want.Error != nil {
					t.Fatalf("request %d: llama-server: %s", i, want.Error.Message)
				}
				compare(t, fmt.Sprintf("request %d", i), got, want)
				last = got
			}
		})
	}
}

// asciiPair is two printable ASCII characters of a reply, past its
// first (a stop string that JSON carries as it is), "" where none.
func asciiPair(r *serve.Result) string {
	if r == nil {
		return ""
	}
	c := r.Content
	for i := 1; i+2 <= len(c); i++ {
		if c[i] >= 0x20 && c[i] < 0x7f && c[i+1] >= 0x20 && c[i+1] < 0x7f {
			return c[i : i+2]
		}
	}
	return ""
}

// opts are the engine's defaults with n_predict and the tokens returned.
func opts(e *serve.Engine, n int, set func(*sample.Params)) serve.Options {
	o := e.Defaults()
	o.NPredict = n
	o.ReturnTokens = true
	if set != nil {
		set(&o.Sampling)
	}
	return o
}

// basicRequests: greedy and seeded prompts, one the prefix of the next,
// the same prompt again (the whole prompt cached), another prompt (the
// slot chosen by least recent use), a stop string taken from a reply,
// n_probs after sampling.
func basicRequests(e *serve.Engine) []request {
	tk := func(s string) []int32 { t, _ := e.Vocab().Tokenize(s, true, true); return t }
	a := tk("Once upon a time there was a little robot")
	b := tk("Once upon a time there was a little robot who liked to paint the sky")
	c := tk("In a galaxy far away")
	greedy := func(p *sample.Params) { p.Temp = 0 }
	seeded := func(seed uint32) func(*sample.Params) { return func(p *sample.Params) { p.Seed = seed } }
	reqs := []request{
		{a, opts(e, 8, greedy), false},
		{b, opts(e, 8, seeded(5)), false},
		{a, opts(e, 8, greedy), false},
		{c, opts(e, 8, seeded(7)), false},
		{b, opts(e, 8, seeded(11)), false},
	}
	// a stop string: a piece of what the greedy reply to a says
	reqs = append(reqs, request{a, opts(e, 8, greedy), false}, request{a, opts(e, 8, greedy), true})
	o := opts(e, 4, seeded(3))
	o.Sampling.NProbs, o.PostSamplingProbs = 3, true
	reqs = append(reqs, request{c, o, false})
	o = opts(e, 4, seeded(4))
	o.Sampling.NProbs = 5
	reqs = append(reqs, request{a, o, false})
	return reqs
}

// reuseRequests: a prompt, then one that drops its middle: the tail's
// chunk is shifted into place (--cache-reuse).
func reuseRequests(e *serve.Engine) []request {
	tk := func(s string) []int32 { t, _ := e.Vocab().Tokenize(s, true, true); return t }
	a := tk("alpha beta gamma delta epsilon zeta eta theta iota kappa lambda mu nu xi omicron pi rho sigma tau upsilon")
	b := append(slices.Clone(a[:5]), a[9:]...)
	greedy := func(p *sample.Params) { p.Temp = 0 }
	o := opts(e, 6, greedy)
	o.NCacheReuse = 4
	return []request{{a, o, false}, {b, o, false}}
}

// shiftRequests: a generation past the slot's context (-c 256, one
// slot), shifted with n_keep.
func shiftRequests(e *serve.Engine) []request {
	tk := func(s string) []int32 { t, _ := e.Vocab().Tokenize(s, true, true); return t }
	a := tk("A long story begins here and goes on")
	o := opts(e, 300, func(p *sample.Params) { p.Seed, p.IgnoreEOS = 9, true })
	o.NKeep = 4
	return []request{{a, o, false}}
}

// Streamed, each token's text is llama-server's: pieces held back while
// a UTF-8 character is incomplete or a stop string may be forming, and
// released as the pin releases them.
func TestStreamIsLlamaServer(t *testing.T) {
	oracleOnly(t)
	bin := serverBin(t)
	path := textModel(t, "llama", "llama-spm", 2)
	srv := llamaserver.Start(t, bin, "-m", path, "--device", "none", "-t", fmt.Sprint(threads), "-c", "1024")
	e := newEngine(t, path, 1024, serve.Params{})
	var last *serve.Result
	held := false
	reqs := basicRequests(e)
	if !all() {
		reqs = reqs[:1]
		reqs = append(reqs, request{reqs[0].prompt, opts(e, 8, func(p *sample.Params) { p.Temp = 0 }), true})
	}
	for i, r := range reqs {
		r.o.Stream = true
		if r.stopFromLast {
			stop := asciiPair(last)
			if stop == "" {
				continue
			}
			r.o.Stop = []string{stop}
		}
		var pieces []string
		got, err := e.Complete(context.Background(), r.prompt, r.o, func(ev serve.Event) error {
			if ev.Token != nil {
				pieces = append(pieces, jsonText(ev.Token.Text))
			}
			return nil
		})
		if err != nil {
			t.Fatalf("request %d: %v", i, err)
		}
		want, wantPieces := ask(t, srv, r, true)
		if !slices.Equal(pieces, wantPieces) {
			t.Errorf("request %d: pieces %q, llama-server %q", i, pieces, wantPieces)
		}
		if got.Stop.String() != want.StopType || got.StoppingWord != want.StoppingWord || got.NDecoded != want.Predicted {
			t.Errorf("request %d: stop %v %q after %d, llama-server %s %q after %d", i, got.Stop, got.StoppingWord, got.NDecoded, want.StopType, want.StoppingWord, want.Predicted)
		}
		if len(pieces) < got.NDecoded || slices.Contains(pieces, "") {
			held = true
		}
		last = got
	}
	if !held {
		t.Error("no request held a piece back: the comparison does not see the cutting")
	}
}
