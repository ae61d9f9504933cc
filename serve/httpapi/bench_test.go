package httpapi_test

import (
	"bufio"
	"fmt"
	"net/http"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/ggload/ggload/bindings"
	"github.com/ggload/ggload/gguf"
	"github.com/ggload/ggload/lab/synth"
	"github.com/ggload/ggload/lab/testenv"
)

// benchModel is a synthesized llama of some size (8 layers of 512), so
// that decoding, not the HTTP layer alone, is measured.
func benchModel(b testing.TB) string {
	b.Helper()
	rt := testenv.Runtime(b)
	cache, err := bindings.CacheDir()
	if err != nil {
		b.Fatal(err)
	}
	o := synth.ArchOptions{Layers: 8, Embd: 512, Keys: []gguf.KV{{Key: "llama.context_length", Value: gguf.Uint32(8192)}}}
	p, err := synth.TextModel(rt, filepath.Join(cache, "models", "text"), testenv.SourceTree(b), "llama", "llama-spm", o, 7)
	if err != nil {
		b.Fatal(err)
	}
	return p
}

// streamOne sends one streamed completion; the time to its first token
// and the tokens it generated.
func streamOne(b *testing.B, c *http.Client, base string, i, nPredict int) (time.Duration, int) {
	body := fmt.Sprintf(`{"prompt":"Request %d tells a story about","n_predict":%d,"ignore_eos":true,"stream":true,"temperature":0}`, i, nPredict)
	t0 := time.Now()
	resp, err := c.Post(base+"/completion", "application/json", strings.NewReader(body))
	if err != nil {
		b.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != 200 {
		b.Fatalf("status %d", resp.StatusCode)
	}
	var ttft time.Duration
	n := 0
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 1<<16), 1<<22)
	for sc.Scan() {
		line := sc.Text()
		if !strings.HasPrefix(line, "data: ") {
			continue
		}
		if strings.Contains(line, `"stop":true`) {
			break
		}
		if ttft == 0 {
			ttft = time.Since(t0)
		}
		n++
	}
	return ttft, n
}

// BenchmarkHTTP is the serving engine's figures through HTTP: aggregate
// tokens/s and the time to the first token (p50, p99) of 1, 4 and 16
// clients streaming completions at once, ggload serve's handler against
// llama-server of the pin, the same model, options and threads.
//
//	go test ./serve/httpapi -run '^$' -bench HTTP -benchtime 3x
func BenchmarkHTTP(b *testing.B) {
	path := benchModel(b)
	c := config{nCtx: 16 * 512, nParallel: 16, nBatch: 512}
	ours, _ := newServer(b, path, c)
	theirs := startLlama(b, path, c)
	for _, side := range []struct{ name, url string }{{"ggload", ours.URL}, {"llama-server", theirs.URL}} {
		for _, clients := range []int{1, 4, 16} {
			b.Run(fmt.Sprintf("%s/clients=%d", side.name, clients), func(b *testing.B) {
				hc := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: clients}}
				defer hc.CloseIdleConnections()
				var ttfts []time.Duration
				tokens := 0
				var mu sync.Mutex
				t0 := time.Now()
				for it := 0; it < b.N; it++ {
					var wg sync.WaitGroup
					for k := range clients {
						wg.Add(1)
						go func() {
							defer wg.Done()
							ttft, n := streamOne(b, hc, side.url, it*clients+k, 64)
							mu.Lock()
							ttfts = append(ttfts, ttft)
							tokens += n
							mu.Unlock()
						}()
					}
					wg.Wait()
				}
				el := time.Since(t0)
				slices.Sort(ttfts)
				pct := func(p float64) float64 {
					return float64(ttfts[min(len(ttfts)-1, int(p*float64(len(ttfts))))].Microseconds()) / 1000
				}
				b.ReportMetric(float64(tokens)/el.Seconds(), "tok/s")
				b.ReportMetric(pct(0.5), "ttft-p50-ms")
				b.ReportMetric(pct(0.99), "ttft-p99-ms")
			})
		}
	}
}
