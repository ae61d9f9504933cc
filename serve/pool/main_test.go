package pool_test

import (
	"context"
	"net/http"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/ggload/ggload/bindings"
	"github.com/ggload/ggload/gguf"
	"github.com/ggload/ggload/lab/synth"
	"github.com/ggload/ggload/lab/testenv"
	"github.com/ggload/ggload/place"
	"github.com/ggload/ggload/serve"
	"github.com/ggload/ggload/serve/pool"
)

func TestMain(m *testing.M) {
	if arg := os.Getenv(childEnv); arg != "" {
		os.Exit(child(arg))
	}
	// a connection per request: llama-server closes a kept connection
	// after its hundredth request or when idle, and a POST that goes out
	// on it just then fails with EOF, which Go does not retry
	http.DefaultTransport.(*http.Transport).DisableKeepAlives = true
	testenv.Main(m)
}

// all says whether the whole suite runs (GGLOAD_POOL_ALL=1), not its
// sample.
func all() bool { return os.Getenv("GGLOAD_POOL_ALL") == "1" }

// threads is the tests' engines' CPU threads (one: ggml's threads spin
// while they wait, which a shared machine pays for); the benchmarks give
// ggload and llama-server two each.
const threads = 1

// modelFile is a synthesized llama model with the pin's SentencePiece
// vocabulary, its weights from seed (cached across runs).
func modelFile(t testing.TB, seed uint64) string {
	t.Helper()
	rt := testenv.Runtime(t)
	cache, err := bindings.CacheDir()
	if err != nil {
		t.Fatal(err)
	}
	o := synth.ArchOptions{Layers: 2, Keys: []gguf.KV{{Key: "llama.context_length", Value: gguf.Uint32(4096)}}}
	p, err := synth.TextModel(rt, filepath.Join(cache, "models", "text"), testenv.SourceTree(t), "llama", "llama-spm", o, seed)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// copyModel copies a model file into dir under name (the pool's tests
// change and remove their own files, never the cache's).
func copyModel(t testing.TB, src, dir, name string) string {
	t.Helper()
	b, err := os.ReadFile(src)
	if err != nil {
		t.Fatal(err)
	}
	dst := filepath.Join(dir, name)
	if err := os.MkdirAll(filepath.Dir(dst), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(dst, b, 0o644); err != nil {
		t.Fatal(err)
	}
	return dst
}

// cpuOptions are a model's options on the CPU alone: -c 1024, 4 slots,
// no prompt cache (its limit would be the host's biggest share).
func cpuOptions(path string) pool.Options {
	return pool.Options{Path: path, Place: place.Params{DeviceNames: []string{"none"}, Context: place.ContextParams{NCtx: 1024}},
		Serve: serve.Params{Threads: threads, NoCacheRAM: true}}
}

// newPool opens a pool that the test closes at its end.
func newPool(t testing.TB, p pool.Params) *pool.Pool {
	t.Helper()
	pl, err := pool.New(testenv.Runtime(t), p)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { pl.Close() })
	return pl
}

// greedy is n greedy tokens of the prompt on the leased model.
func greedy(t testing.TB, l *pool.Lease, prompt []int32, n int) []int32 {
	t.Helper()
	e := l.Engine()
	o := e.Defaults()
	o.NPredict, o.ReturnTokens = n, true
	o.Sampling.Temp, o.Sampling.IgnoreEOS = 0, true
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	r, err := e.Complete(ctx, prompt, o, nil)
	if err != nil {
		t.Fatal(err)
	}
	return r.Tokens
}

// acquire is a lease on the model, loaded if need be.
func acquire(t testing.TB, p *pool.Pool, name string) *pool.Lease {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	l, err := p.Acquire(ctx, name, true)
	if err != nil {
		t.Fatal(err)
	}
	return l
}

// held is the pool's memory held on the host.
func held(p *pool.Pool) uint64 { return p.Memory()[0].Held }

// status is the model's status.
func status(t testing.TB, p *pool.Pool, name string) pool.Status {
	t.Helper()
	in, err := p.Model(name)
	if err != nil {
		t.Fatal(err)
	}
	return in.Status
}

// waitStatus waits (within a minute) for the model's status.
func waitStatus(t testing.TB, p *pool.Pool, name string, want pool.Status) {
	t.Helper()
	deadline := time.Now().Add(time.Minute)
	for status(t, p, name) != want {
		if time.Now().After(deadline) {
			t.Fatalf("%s stays %s, not %s", name, status(t, p, name), want)
		}
		time.Sleep(5 * time.Millisecond)
	}
}
