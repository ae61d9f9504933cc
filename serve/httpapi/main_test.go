package httpapi_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/ggload/ggload/bindings"
	"github.com/ggload/ggload/gguf"
	"github.com/ggload/ggload/lab/llamaserver"
	"github.com/ggload/ggload/lab/synth"
	"github.com/ggload/ggload/lab/testenv"
	"github.com/ggload/ggload/loader"
	"github.com/ggload/ggload/place"
	"github.com/ggload/ggload/serve"
	"github.com/ggload/ggload/serve/httpapi"
)

func TestMain(m *testing.M) {
	freshConnections()
	testenv.Main(m)
}

// freshConnections makes the default client open a connection per
// request: llama-server closes a kept connection after its hundredth
// request or when idle, and a POST that goes out on it just then fails
// with EOF, which Go does not retry.
func freshConnections() {
	http.DefaultTransport.(*http.Transport).DisableKeepAlives = true
}

// all says whether the whole suite runs (GGLOAD_HTTP_ALL=1), not its
// sample.
func all() bool { return os.Getenv("GGLOAD_HTTP_ALL") == "1" }

// threads is every context's CPU threads, ggload's and llama-server's.
const threads = 2

// textModel is a synthesized model of arch with the pin's vocabulary voc
// (cached across runs).
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

// config is a server's options, given to both servers alike.
type config struct {
	nCtx, nParallel int
	nBatch          int
	embedding       bool
	pooling         place.Pooling
	rerank          bool
	slotSavePath    string
	metrics         bool
	apiKeys         []string
	params          serve.Params
	http            httpapi.Options
	alias           string
	jinja           bool
	// chatTemplateFile is --chat-template-file
	chatTemplateFile string
}

// flags are llama-server's options for c.
func (c config) flags(model string) []string {
	f := []string{"-m", model, "--device", "none", "-t", "2", "-c", itoa(c.nCtx), "-np", itoa(c.nParallel), "-kvu"}
	if !c.jinja {
		f = append(f, "--no-jinja")
	}
	if c.nBatch > 0 {
		f = append(f, "-b", itoa(c.nBatch), "-ub", itoa(c.nBatch))
	}
	if c.embedding {
		f = append(f, "--embedding")
		if c.pooling != 0 {
			f = append(f, "--pooling", c.pooling.String())
		}
	}
	if c.rerank {
		f = append(f, "--reranking")
	}
	if c.slotSavePath != "" {
		f = append(f, "--slot-save-path", c.slotSavePath)
	}
	if c.metrics {
		f = append(f, "--metrics")
	}
	if len(c.apiKeys) > 0 {
		f = append(f, "--api-key", strings.Join(c.apiKeys, ","))
	}
	if c.alias != "" {
		f = append(f, "--alias", c.alias)
	}
	if c.params.NPredict != 0 {
		f = append(f, "-n", itoa(c.params.NPredict))
	}
	if c.chatTemplateFile != "" {
		f = append(f, "--chat-template-file", c.chatTemplateFile)
	}
	return f
}

func itoa(n int) string { return strconv.Itoa(n) }

// newServer is ggload's handler on the model with c, served on loopback.
func newServer(t testing.TB, path string, c config) (*httptest.Server, *httpapi.Handler) {
	t.Helper()
	rt := testenv.Runtime(t)
	m, err := gguf.OpenModel(path)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { m.Close() })
	cp := place.ContextParams{NCtx: c.nCtx, NParallel: c.nParallel, KVUnified: true, NBatch: c.nBatch, NUBatch: c.nBatch, Embeddings: c.embedding || c.rerank, Pooling: c.pooling}
	if c.rerank {
		cp.Pooling = place.PoolingRank
	}
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
	p := c.params
	p.Threads = threads
	p.SlotSavePath = c.slotSavePath
	e, err := serve.New(lm, p)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { e.Close() })
	var aliases []string
	if c.alias != "" {
		aliases = []string{c.alias}
	}
	s := httpapi.Settings{NPredict: p.NPredict, Embedding: c.embedding || c.rerank, Rerank: c.rerank, SlotSavePath: c.slotSavePath, UI: true}
	s.Chat.Server.Legacy = !c.jinja
	if c.chatTemplateFile != "" {
		b, err := os.ReadFile(c.chatTemplateFile)
		if err != nil {
			t.Fatal(err)
		}
		s.Chat.Template, s.Chat.TemplateName = string(b), c.chatTemplateFile
	}
	mo, err := httpapi.NewModel(e, lm, path, aliases, nil, s)
	if err != nil {
		t.Fatal(err)
	}
	o := c.http
	o.APIKeys = c.apiKeys
	o.Metrics = c.metrics
	h := httpapi.New(httpapi.Single{M: mo}, o)
	h.SetReady()
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	return srv, h
}

// startLlama is llama-server of the pin on the model with c: the tests
// that compare with it run without the race detector.
func startLlama(t testing.TB, path string, c config) *llamaserver.Server {
	t.Helper()
	if raceOn {
		t.Skip("a comparison with llama-server: it runs without the race detector")
	}
	return llamaserver.Start(t, llamaserver.Build(t), c.flags(path)...)
}
