package serve_test

import (
	"context"
	"os"
	"path/filepath"
	"testing"

	"github.com/ggload/ggload/bindings"
	"github.com/ggload/ggload/gguf"
	"github.com/ggload/ggload/infer"
	"github.com/ggload/ggload/lab/synth"
	"github.com/ggload/ggload/lab/testenv"
	"github.com/ggload/ggload/loader"
	"github.com/ggload/ggload/place"
	"github.com/ggload/ggload/sample"
	"github.com/ggload/ggload/serve"
	"github.com/ggload/ggload/vocab"
)

func TestMain(m *testing.M) {
	if arg := os.Getenv(rssChildEnv); arg != "" {
		os.Exit(rssChild(arg))
	}
	testenv.Main(m)
}

// all says whether the whole suite runs (GGLOAD_SERVE_ALL=1), not its
// sample.
func all() bool { return os.Getenv("GGLOAD_SERVE_ALL") == "1" }

// oracleOnly skips a comparison with llama-server or ggload run under
// the race detector (raceOn), which runs the concurrent paths.
func oracleOnly(t *testing.T) {
	t.Helper()
	if raceOn {
		t.Skip("a comparison with llama.cpp: it runs without the race detector")
	}
}

// threads is every context's CPU threads, ggload's and llama-server's.
const threads = 2

// textModel is a synthesized model of arch with vocabulary voc (cached).
func textModel(t testing.TB, arch, voc string, layers int) string {
	t.Helper()
	rt := testenv.Runtime(t)
	cache, err := bindings.CacheDir()
	if err != nil {
		t.Fatal(err)
	}
	o := synth.ArchOptions{Layers: layers, Keys: []gguf.KV{{Key: arch + ".context_length", Value: gguf.Uint32(4096)}}}
	p, err := synth.TextModel(rt, filepath.Join(cache, "models", "text"), testenv.SourceTree(t), arch, voc, o, 7)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// load loads the model with the context options on the CPU alone.
func load(t testing.TB, path string, cp place.ContextParams) *loader.Model {
	t.Helper()
	rt := testenv.Runtime(t)
	m, err := gguf.OpenModel(path)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { m.Close() })
	plan, err := place.New(context.Background(), rt, m, place.Params{DeviceNames: []string{"none"}, Context: cp})
	if err != nil {
		t.Fatal(err)
	}
	if plan.ContextErr != nil {
		t.Fatal(plan.ContextErr)
	}
	lm, err := loader.Load(context.Background(), plan, loader.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { lm.Close() })
	return lm
}

// newEngine makes an engine on the model: llama-server's defaults (-np
// 4, -kvu) with n_ctx, and p.
func newEngine(t testing.TB, path string, nCtx int, p serve.Params, cp ...func(*place.ContextParams)) *serve.Engine {
	t.Helper()
	c := place.ContextParams{NCtx: nCtx, NParallel: 4, KVUnified: true}
	for _, f := range cp {
		f(&c)
	}
	p.Threads = threads
	e, err := serve.New(load(t, path, c), p)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { e.Close() })
	return e
}

// runTokens is ggload run's generation on its own context (-np 1, n_ctx
// as given): the prompt accepted by the sampler and decoded in batches of
// n_batch, then each step samples, accepts, and decodes the token; it
// stops at an end of generation, after n tokens, or when the context is
// full.
func runTokens(t testing.TB, path string, nCtx int, prompt []int32, sp sample.Params, n int) []int32 {
	t.Helper()
	lm := load(t, path, place.ContextParams{NCtx: nCtx})
	v, err := vocab.Load(lm.Plan.Model)
	if err != nil {
		t.Fatal(err)
	}
	smpl, err := sample.New(v, sp)
	if err != nil {
		t.Fatal(err)
	}
	ic, err := infer.New(lm, infer.Params{Threads: threads})
	if err != nil {
		t.Fatal(err)
	}
	defer ic.Close()
	for _, tok := range prompt {
		smpl.Accept(tok)
	}
	nBatch := int(lm.Plan.Context.NBatch)
	for i := 0; i < len(prompt); i += nBatch {
		if err := ic.Decode(infer.Batch{Tokens: prompt[i:min(i+nBatch, len(prompt))]}); err != nil {
			t.Fatal(err)
		}
	}
	var out []int32
	nPast := len(prompt)
	for len(out) < n {
		lg, err := ic.Logits(-1)
		if err != nil {
			t.Fatal(err)
		}
		id, err := smpl.Sample(lg)
		if err != nil {
			t.Fatal(err)
		}
		smpl.Accept(id)
		out = append(out, id)
		if v.IsEOG(id) || len(out) == n || nPast+1 >= int(lm.Plan.Context.NCtx) {
			break
		}
		if err := ic.Decode(infer.Batch{Tokens: []int32{id}}); err != nil {
			t.Fatal(err)
		}
		nPast++
	}
	return out
}

// tokens tokenizes text as llama-server tokenizes a prompt (BOS added,
// special tokens parsed).
func tokens(t testing.TB, e *serve.Engine, text string) []int32 {
	t.Helper()
	toks, err := e.Vocab().Tokenize(text, true, true)
	if err != nil {
		t.Fatal(err)
	}
	return toks
}

// engineNoCleanup is newEngine whose engine, model and file the caller
// closes (closeAll), for counts of what stays open.
func engineNoCleanup(t *testing.T, path string) (*serve.Engine, func()) {
	t.Helper()
	rt := testenv.Runtime(t)
	m, err := gguf.OpenModel(path)
	if err != nil {
		t.Fatal(err)
	}
	plan, err := place.New(context.Background(), rt, m, place.Params{DeviceNames: []string{"none"}, Context: place.ContextParams{NCtx: 1024, NParallel: 4, KVUnified: true}})
	if err != nil {
		m.Close()
		t.Fatal(err)
	}
	lm, err := loader.Load(context.Background(), plan, loader.Options{})
	if err != nil {
		m.Close()
		t.Fatal(err)
	}
	e, err := serve.New(lm, serve.Params{Threads: threads})
	if err != nil {
		lm.Close()
		m.Close()
		t.Fatal(err)
	}
	return e, func() {
		e.Close()
		lm.Close()
		m.Close()
	}
}
