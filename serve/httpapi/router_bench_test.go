package httpapi_test

import (
	"bufio"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/ggload/ggload/bindings"
	"github.com/ggload/ggload/gguf"
	"github.com/ggload/ggload/lab/llamaserver"
	"github.com/ggload/ggload/lab/synth"
	"github.com/ggload/ggload/lab/testenv"
	"github.com/ggload/ggload/serve/pool"
)

// firstToken asks a router for one streamed token of the named model:
// the time to it (the model's load included where it is not resident).
func firstToken(b *testing.B, c *http.Client, base, model string) time.Duration {
	body := fmt.Sprintf(`{"model":%q,"prompt":"Once upon a time","n_predict":1,"stream":true,"temperature":0}`, model)
	t0 := time.Now()
	resp, err := c.Post(base+"/completion", "application/json", strings.NewReader(body))
	if err != nil {
		b.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != 200 {
		b.Fatalf("%s: status %d", base, resp.StatusCode)
	}
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		if strings.HasPrefix(sc.Text(), "data: ") {
			return time.Since(t0)
		}
	}
	b.Fatalf("%s: the stream ended without a token: %v", base, sc.Err())
	return 0
}

// BenchmarkRouterSwitch is the pool's switch through HTTP: the time
// from a request for a model that is not resident to its first token,
// two models (8 layers of 512) alternating in memory that holds one;
// ggload's router over a pool whose host budget holds one model,
// llama-server's router with --models-max 1, the same models directory
// and options. The two are asked in turns, so that both meet the same
// load of the machine; switch-ratio is ggload's median over
// llama-server's.
func BenchmarkRouterSwitch(b *testing.B) {
	rt := testenv.Runtime(b)
	cache, err := bindings.CacheDir()
	if err != nil {
		b.Fatal(err)
	}
	dir := b.TempDir()
	for name, seed := range map[string]uint64{"a.gguf": 7, "b.gguf": 11} {
		o := synth.ArchOptions{Layers: 8, Embd: 512, Keys: []gguf.KV{{Key: "llama.context_length", Value: gguf.Uint32(8192)}}}
		p, err := synth.TextModel(rt, filepath.Join(cache, "models", "text"), testenv.SourceTree(b), "llama", "llama-spm", o, seed)
		if err != nil {
			b.Fatal(err)
		}
		if err := os.Symlink(p, filepath.Join(dir, name)); err != nil {
			b.Fatal(err)
		}
	}
	// the budget: one model's memory and half of the other's
	probe, pp := newRouter(b, dir, routerConfig{modelsMax: -1})
	var need []uint64
	c := &http.Client{}
	for _, m := range []string{"a", "b"} {
		firstToken(b, c, probe.URL, m)
		in, _ := pp.Model(m)
		need = append(need, in.Memory[0].Bytes)
	}
	ours, p := newRouter(b, dir, routerConfig{modelsMax: -1, budget: max(need[0], need[1]) + min(need[0], need[1])/2})
	theirs := llamaserver.Start(b, llamaserver.Build(b), routerConfig{modelsMax: 1}.flags(dir)...)
	firstToken(b, c, ours.URL, "b")
	firstToken(b, c, theirs.URL, "b")
	var g, l []time.Duration
	b.ResetTimer()
	for i := range b.N {
		m := []string{"a", "b"}[i%2]
		if i%4 < 2 {
			g = append(g, firstToken(b, c, ours.URL, m))
			l = append(l, firstToken(b, c, theirs.URL, m))
		} else {
			l = append(l, firstToken(b, c, theirs.URL, m))
			g = append(g, firstToken(b, c, ours.URL, m))
		}
	}
	b.StopTimer()
	for _, in := range p.Models() {
		if in.Status == pool.Loaded && in.Name == []string{"a", "b"}[b.N%2] {
			b.Fatalf("the model not asked last is resident: the pool did not switch")
		}
	}
	med := func(d []time.Duration) float64 {
		s := slices.Clone(d)
		slices.Sort(s)
		return float64(s[len(s)/2].Microseconds()) / 1000
	}
	b.ReportMetric(med(g), "ggload-switch-ms")
	b.ReportMetric(med(l), "llama-switch-ms")
	b.ReportMetric(med(g)/med(l), "switch-ratio")
}
