package httpapi_test

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/ggload/ggload/bindings"
	"github.com/ggload/ggload/gguf"
	"github.com/ggload/ggload/lab/llamaserver"
	"github.com/ggload/ggload/lab/synth"
	"github.com/ggload/ggload/lab/testenv"
	"github.com/ggload/ggload/place"
	"github.com/ggload/ggload/serve"
	"github.com/ggload/ggload/serve/httpapi"
	"github.com/ggload/ggload/serve/pool"
)

// seededModel is textModel with the weights of seed.
func seededModel(t testing.TB, voc string, seed uint64) string {
	t.Helper()
	rt := testenv.Runtime(t)
	cache, err := bindings.CacheDir()
	if err != nil {
		t.Fatal(err)
	}
	o := synth.ArchOptions{Layers: 2, Keys: []gguf.KV{{Key: "llama.context_length", Value: gguf.Uint32(4096)}}}
	p, err := synth.TextModel(rt, filepath.Join(cache, "models", "text"), testenv.SourceTree(t), "llama", voc, o, seed)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// routerDir is a models directory of two models, alpha (SentencePiece)
// and beta (StarCoder's vocabulary), and the path of a third model
// beside the directory, outside it.
func routerDir(t testing.TB) (dir, outside string) {
	t.Helper()
	root := t.TempDir()
	dir = filepath.Join(root, "models")
	os.MkdirAll(dir, 0o755)
	for name, src := range map[string]string{"alpha.gguf": seededModel(t, "llama-spm", 7), "beta.gguf": seededModel(t, "starcoder", 7)} {
		if err := os.Symlink(src, filepath.Join(dir, name)); err != nil {
			t.Fatal(err)
		}
	}
	outside = filepath.Join(root, "outside.gguf")
	if err := os.Symlink(seededModel(t, "llama-spm", 11), outside); err != nil {
		t.Fatal(err)
	}
	return dir, outside
}

// routerConfig is a router's options, given to both servers alike: each
// model's context as llama-server's children get it (-c 512 -np 1 -kvu,
// the CPU alone).
type routerConfig struct {
	modelsMax  int
	noAutoload bool
	sleepIdle  int    // seconds
	budget     uint64 // the host's, 0: the pool's default
	nPredict   int    // -n (0: llama-server's)
	logger     *slog.Logger
}

func (c routerConfig) flags(dir string) []string {
	f := []string{"--models-dir", dir, "--device", "none", "-t", "2", "-c", "512", "-np", "1", "-kvu", "--cache-ram", "0"}
	if c.modelsMax != 0 {
		f = append(f, "--models-max", itoa(c.modelsMax))
	}
	if c.noAutoload {
		f = append(f, "--no-models-autoload")
	}
	if c.sleepIdle > 0 {
		f = append(f, "--sleep-idle-seconds", itoa(c.sleepIdle))
	}
	return f
}

// newRouter is ggload's handler over a pool of the directory's models,
// as a program builds it: pool.New, httpapi.NewRouter, httpapi.New.
func newRouter(t testing.TB, dir string, c routerConfig) (*httptest.Server, *pool.Pool) {
	t.Helper()
	pp := pool.Params{ModelsDir: dir, ModelsMax: c.modelsMax, MaxWait: time.Minute, SleepIdle: time.Duration(c.sleepIdle) * time.Second,
		Defaults: pool.Options{
			Place: place.Params{DeviceNames: []string{"none"}, Context: place.ContextParams{NCtx: 512, NParallel: 1, KVUnified: true}},
			Serve: serve.Params{Threads: threads, NoCacheRAM: true, NPredict: c.nPredict},
		}}
	if c.budget > 0 {
		pp.Budgets = []pool.Budget{{Device: pool.HostDevice, Bytes: c.budget}}
	}
	p, err := pool.New(testenv.Runtime(t), pp)
	if err != nil {
		t.Fatal(err)
	}
	logger := c.logger
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	h := httpapi.New(httpapi.NewRouter(p, httpapi.RouterOptions{NoAutoload: c.noAutoload, Settings: httpapi.Settings{UI: true, NPredict: c.nPredict}}), httpapi.Options{Logger: logger})
	h.SetReady()
	srv := httptest.NewServer(h)
	t.Cleanup(func() {
		srv.Close()
		p.Close()
	})
	return srv, p
}

// status is a model's status in a router's GET /models.
func status(t testing.TB, base, model string) string {
	t.Helper()
	resp, err := http.Get(base + "/models")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var list struct {
		Data []struct {
			ID     string `json:"id"`
			Status struct {
				Value string `json:"value"`
			} `json:"status"`
		} `json:"data"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&list); err != nil {
		t.Fatal(err)
	}
	for _, m := range list.Data {
		if m.ID == model {
			return m.Status.Value
		}
	}
	t.Fatalf("%s lists no model %s", base, model)
	return ""
}

// waitStatus waits until the model has the status on the server (the
// router's loads and unloads end after their answers).
func waitStatus(t testing.TB, base, model, want string) {
	t.Helper()
	deadline := time.Now().Add(2 * time.Minute)
	for {
		got := status(t, base, model)
		if got == want {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: model %s stays %s, not %s", base, model, got, want)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// step is an exchange and what both servers should show after it.
type step struct {
	x exchange
	// then: model -> status, waited for on both servers before the next
	// step
	then map[string]string
}

// compareSteps is compareAnswers with the waits in between.
func compareSteps(t *testing.T, ours, theirs string, steps []step) {
	t.Helper()
	for _, s := range steps {
		compareAnswers(t, ours, theirs, []exchange{s.x})
		for m, st := range s.then {
			waitStatus(t, theirs, m, st)
			waitStatus(t, ours, m, st)
		}
	}
}

// routerMasked are the router's fields a comparison leaves out:
// status.args, the child process's command line (llama-server's path,
// the port it gave the child) and "preset", the child's options as the
// pin renders them; both say how a child process is started, which
// ggload does not start.
var routerMasked = map[string]bool{"args": true, "preset": true}

// The router answers as llama-server's router of the pin on the same
// models directory, request by request: GET /models and /v1/models
// before and after loads, /props, completions through each of two
// models (autoloaded, and loaded by POST /models/load), loads and
// unloads and their errors, unknown models and names that are paths,
// ?autoload=false for a model not loaded; with --no-models-autoload, a
// request for a model not loaded and one that asks to load it; with
// --models-max 1, the least recently used model evicted; with
// --sleep-idle-seconds, an idle model asleep and woken by a request.
func TestRouterIsLlamaServers(t *testing.T) {
	if raceOn {
		t.Skip("a comparison with llama-server: it runs without the race detector")
	}
	dir, outside := routerDir(t)
	bin := llamaserver.Build(t)
	alsoMasked = routerMasked
	t.Cleanup(func() { alsoMasked = map[string]bool{} })
	post := func(path, body string) exchange { return exchange{method: "POST", path: path, body: body} }
	get := func(path string) exchange { return exchange{method: "GET", path: path} }
	cmpl := func(model string) string {
		return fmt.Sprintf(`{"model":%q,"prompt":"Hello world","n_predict":6,"temperature":0}`, model)
	}
	t.Run("autoload", func(t *testing.T) {
		c := routerConfig{}
		ours, _ := newRouter(t, dir, c)
		theirs := llamaserver.Start(t, bin, c.flags(dir)...)
		compareSteps(t, ours.URL, theirs.URL, []step{
			{x: get("/models")},
			{x: get("/v1/models")},
			{x: get("/props")},
			{x: post("/completion", cmpl("alpha")), then: map[string]string{"alpha": "loaded"}},
			{x: get("/models")},
			{x: post("/models/load", `{"model":"alpha"}`)},
			{x: post("/models/load", `{"model":"beta"}`), then: map[string]string{"beta": "loaded"}},
			{x: get("/models")},
			{x: post("/v1/completions", `{"model":"beta","prompt":"def f(","max_tokens":5,"temperature":0}`)},
			{x: post("/tokenize", `{"model":"beta","content":"def f(x):"}`)},
			{x: get("/props?model=alpha")},
			{x: get("/v1/models")},
			// unknown models, names that are paths, no name
			{x: post("/completion", cmpl("nope"))},
			{x: post("/completion", cmpl("../models/alpha"))},
			{x: post("/completion", cmpl("alpha.gguf"))},
			{x: post("/completion", cmpl(outside))},
			{x: post("/completion", cmpl("../outside"))},
			{x: post("/completion", `{"prompt":"x"}`)},
			{x: get("/props?model=" + url.QueryEscape("../outside.gguf"))},
			{x: post("/models/load", fmt.Sprintf(`{"model":%q}`, outside))},
			{x: post("/models/load", `{"model":"nope"}`)},
			{x: post("/models/unload", `{"model":"nope"}`)},
			{x: exchange{method: "DELETE", path: "/models?model=alpha"}},
			{x: exchange{method: "DELETE", path: "/models?model=nope"}},
			{x: exchange{method: "DELETE", path: "/models"}},
			// unload, and the model not loaded
			{x: post("/models/unload", `{"model":"beta"}`), then: map[string]string{"beta": "unloaded"}},
			{x: post("/models/unload", `{"model":"beta"}`)},
			{x: post("/completion?autoload=false", cmpl("beta"))},
			{x: get("/models")},
		})
	})
	t.Run("no-autoload", func(t *testing.T) {
		c := routerConfig{noAutoload: true}
		ours, _ := newRouter(t, dir, c)
		theirs := llamaserver.Start(t, bin, c.flags(dir)...)
		compareSteps(t, ours.URL, theirs.URL, []step{
			{x: get("/props")},
			{x: post("/completion", cmpl("alpha"))},
			{x: post("/v1/chat/completions", `{"model":"beta","messages":[{"role":"user","content":"hi"}],"max_tokens":2}`)},
			{x: post("/completion?autoload=true", cmpl("alpha")), then: map[string]string{"alpha": "loaded"}},
			{x: post("/completion", cmpl("alpha"))},
		})
	})
	t.Run("models-max", func(t *testing.T) {
		c := routerConfig{modelsMax: 1}
		ours, _ := newRouter(t, dir, c)
		theirs := llamaserver.Start(t, bin, c.flags(dir)...)
		compareSteps(t, ours.URL, theirs.URL, []step{
			{x: post("/completion", cmpl("alpha")), then: map[string]string{"alpha": "loaded"}},
			{x: post("/completion", cmpl("beta")), then: map[string]string{"beta": "loaded", "alpha": "unloaded"}},
			{x: get("/models")},
			{x: get("/props")},
			// alpha loaded again, not used: listed as its new load
			{x: post("/models/load", `{"model":"alpha"}`), then: map[string]string{"alpha": "loaded", "beta": "unloaded"}},
			{x: get("/v1/models")},
			{x: post("/completion", cmpl("alpha"))},
		})
	})
	t.Run("sleep", func(t *testing.T) {
		c := routerConfig{sleepIdle: 1, noAutoload: true}
		ours, _ := newRouter(t, dir, c)
		theirs := llamaserver.Start(t, bin, c.flags(dir)...)
		compareSteps(t, ours.URL, theirs.URL, []step{
			{x: post("/models/load", `{"model":"alpha"}`), then: map[string]string{"alpha": "loaded"}},
			{x: post("/completion", cmpl("alpha")), then: map[string]string{"alpha": "sleeping"}},
			{x: get("/models")},
			{x: post("/models/load", `{"model":"alpha"}`)},
			// (a sleeping model is running: a request wakes it, autoload
			// or not)
			{x: post("/completion", cmpl("alpha")), then: map[string]string{"alpha": "loaded"}},
		})
	})
	t.Run("negative-control", func(t *testing.T) {
		// the comparison sees a model's status differ
		c := routerConfig{}
		ours, _ := newRouter(t, dir, c)
		theirs := llamaserver.Start(t, bin, c.flags(dir)...)
		do(t, ours.URL, post("/models/load", `{"model":"alpha"}`))
		waitStatus(t, ours.URL, "alpha", "loaded")
		g, w := do(t, ours.URL, get("/models")), do(t, theirs.URL, get("/models"))
		if g.body == w.body {
			t.Fatalf("a loaded model's list is the same as an unloaded one's: %s", g.body)
		}
	})
}

// openFiles are the files the process holds open.
func openFiles(t testing.TB) []string {
	t.Helper()
	ents, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		t.Skipf("no /proc/self/fd: %v", err)
	}
	var out []string
	for _, e := range ents {
		if p, err := os.Readlink(filepath.Join("/proc/self/fd", e.Name())); err == nil {
			out = append(out, p)
		}
	}
	return out
}

// No request reaches a file outside the models directory: names that
// are paths (relative, absolute, with .., escaped in a query), the
// file's own name, in every field and route that names a model, are
// refused as unknown models, the pool lists the directory's models
// alone, and the process never opens the file outside. As a control, a
// request naming a model of the directory does open its file.
func TestRouterNamesNoFile(t *testing.T) {
	dir, outside := routerDir(t)
	ours, p := newRouter(t, dir, routerConfig{})
	real, err := filepath.EvalSymlinks(outside)
	if err != nil {
		t.Fatal(err)
	}
	alpha, err := filepath.EvalSymlinks(filepath.Join(dir, "alpha.gguf"))
	if err != nil {
		t.Fatal(err)
	}
	names := []string{outside, real, "../outside", "../outside.gguf", "outside", "outside.gguf", dir + "/../outside.gguf",
		"alpha/../../outside", "./alpha", "alpha.gguf", "/" + filepath.Join(dir, "alpha.gguf"), "%2e%2e/outside", "..", "/", "alpha\x00"}
	for _, n := range names {
		q, _ := json.Marshal(n)
		for _, x := range []exchange{
			{method: "POST", path: "/completion", body: fmt.Sprintf(`{"model":%s,"prompt":"x","n_predict":1}`, q)},
			{method: "POST", path: "/v1/chat/completions", body: fmt.Sprintf(`{"model":%s,"messages":[{"role":"user","content":"x"}]}`, q)},
			{method: "POST", path: "/tokenize", body: fmt.Sprintf(`{"model":%s,"content":"x"}`, q)},
			{method: "POST", path: "/models/load", body: fmt.Sprintf(`{"model":%s}`, q)},
			{method: "POST", path: "/models/unload", body: fmt.Sprintf(`{"model":%s}`, q)},
			{method: "GET", path: "/props?model=" + url.QueryEscape(n)},
			{method: "GET", path: "/slots?model=" + url.QueryEscape(n)},
		} {
			a := do(t, ours.URL, x)
			if a.status != 400 && a.status != 404 {
				t.Errorf("%s %s: %d %s", x.method, x.path, a.status, a.body)
			}
		}
	}
	if slices.Contains(openFiles(t), real) {
		t.Fatalf("the process opened %s", real)
	}
	var listed []string
	for _, in := range p.Models() {
		listed = append(listed, in.Name+":"+in.Status.String())
	}
	if !slices.Equal(listed, []string{"alpha:unloaded", "beta:unloaded"}) {
		t.Fatalf("the pool's models: %v", listed)
	}
	// (the control)
	if a := do(t, ours.URL, exchange{method: "POST", path: "/tokenize", body: `{"model":"alpha","content":"x"}`}); a.status != 200 {
		t.Fatalf("alpha: %d %s", a.status, a.body)
	}
	if !slices.Contains(openFiles(t), alpha) {
		t.Fatalf("the model alpha is loaded but its file %s is not open: the check sees nothing", alpha)
	}
}

// The router serves two models in a host budget that holds one of them:
// clients alternate between the models at once, every request is
// answered, the pool evicts the idle model for the other (never both
// resident), and memory held never passes the budget. The budget is
// measured: one model's exact memory, plus half of it.
func TestRouterEvictsByMemory(t *testing.T) {
	dir, _ := routerDir(t)
	probe, pp := newRouter(t, dir, routerConfig{modelsMax: -1})
	need := map[string]uint64{}
	for _, m := range []string{"alpha", "beta"} {
		if a := do(t, probe.URL, exchange{method: "POST", path: "/tokenize", body: fmt.Sprintf(`{"model":%q,"content":"x"}`, m)}); a.status != 200 {
			t.Fatal(a.body)
		}
		in, err := pp.Model(m)
		if err != nil {
			t.Fatal(err)
		}
		for _, b := range in.Memory {
			if b.Device == pool.HostDevice {
				need[m] = b.Bytes
			}
		}
	}
	budget := max(need["alpha"], need["beta"]) * 3 / 2
	if budget >= need["alpha"]+need["beta"] {
		t.Fatalf("the models' memory %v: a budget of one and a half holds both", need)
	}
	ours, p := newRouter(t, dir, routerConfig{modelsMax: -1, budget: budget})
	ctx, cancel := context.WithCancel(context.Background())
	events := p.Subscribe(ctx)
	loads := make(chan int)
	go func() {
		n := 0
		for ev := range events {
			if ev.Status == pool.Loaded {
				n++
			}
		}
		loads <- n
	}()
	stop := make(chan struct{})
	var peak uint64
	var both bool
	var watch sync.WaitGroup
	watch.Add(1)
	go func() {
		defer watch.Done()
		for {
			select {
			case <-stop:
				return
			case <-time.After(time.Millisecond):
			}
			held, resident := uint64(0), 0
			for _, in := range p.Models() {
				if in.Status == pool.Loaded {
					resident++
				}
			}
			for _, d := range p.Memory() {
				if d.Device == pool.HostDevice {
					held = d.Held
				}
			}
			peak = max(peak, held)
			both = both || resident > 1
		}
	}()
	var wg sync.WaitGroup
	errs := make(chan string, 64)
	n := 3
	if all() {
		n = 10
	}
	for c := range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range n {
				m := []string{"alpha", "beta"}[(c+i)%2]
				a := do(t, ours.URL, exchange{method: "POST", path: "/completion", body: fmt.Sprintf(`{"model":%q,"prompt":"Hello","n_predict":2,"temperature":0}`, m)})
				if a.status != 200 || !strings.Contains(a.body, fmt.Sprintf(`"model":%q`, m)) {
					errs <- fmt.Sprintf("%s: %d %.300s", m, a.status, a.body)
				}
			}
		}()
	}
	wg.Wait()
	close(stop)
	watch.Wait()
	close(errs)
	for e := range errs {
		t.Error(e)
	}
	if peak > budget {
		t.Errorf("the pool held %d bytes of the host, past its budget of %d", peak, budget)
	}
	if both {
		t.Errorf("both models were resident in a budget of %d that holds one (%v)", budget, need)
	}
	if peak == 0 {
		t.Error("the watch saw no memory held: it measures nothing")
	}
	// (the events are delivered before the pool's state changes again:
	// give the subscriber its last ones)
	time.Sleep(50 * time.Millisecond)
	cancel()
	if n := <-loads; n < 3 {
		t.Errorf("%d loads: the models did not take turns in the memory", n)
	}
}
