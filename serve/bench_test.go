package serve_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"runtime"
	"runtime/debug"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/ggload/ggload/bindings"
	"github.com/ggload/ggload/ggml"
	"github.com/ggload/ggload/gguf"
	"github.com/ggload/ggload/lab/llamaserver"
	"github.com/ggload/ggload/lab/synth"
	"github.com/ggload/ggload/lab/testenv"
	"github.com/ggload/ggload/loader"
	"github.com/ggload/ggload/place"
	"github.com/ggload/ggload/serve"
	"github.com/ggload/ggload/vocab"
)

// The benchmarks hold ggload's engine to llama-server of the pin on the
// same synthesized model (llama, 4 layers of 256, llama-spm's 32000
// tokens), the same machine and the same flags (-c 4096 -np 4 -kvu -t 2,
// the CPU alone). ggload is measured through the engine directly (no HTTP
// layer yet), llama-server through its HTTP API (streaming):
//
//	go test -run '^$' -bench 'Serve|IdleSlot' -benchtime 3x ./serve

const (
	benchCtx     = 4096
	benchSlots   = 4
	benchPrompt  = 48 // tokens
	benchPredict = 32
)

// benchModel is the benchmarks' model (cached).
func benchModel(b testing.TB) string {
	rt := testenv.Runtime(b)
	cache, err := bindings.CacheDir()
	if err != nil {
		b.Fatal(err)
	}
	o := synth.ArchOptions{Layers: 4, Embd: 256, Keys: []gguf.KV{{Key: "llama.context_length", Value: gguf.Uint32(benchCtx)}}}
	p, err := synth.TextModel(rt, cache+"/models/text", testenv.SourceTree(b), "llama", "llama-spm", o, 11)
	if err != nil {
		b.Fatal(err)
	}
	return p
}

// benchPrompts are one prompt per client: different, of benchPrompt
// tokens.
func benchPrompts(v *vocab.Vocab, clients int) [][]int32 {
	out := make([][]int32, clients)
	for i := range out {
		toks, _ := v.Tokenize(fmt.Sprintf("Client %d opens a conversation that goes on", i), true, true)
		for len(toks) < benchPrompt {
			toks = append(toks, int32(300+(i*37+len(toks)*11)%20000))
		}
		out[i] = toks[:benchPrompt]
	}
	return out
}

// round is one request per client at once: its generated tokens, its
// time to first token, each.
type round func(clients int, prompts [][]int32) (tokens int, ttft []time.Duration, err error)

// side is one server's measurements over the rounds.
type side struct {
	tokens int
	el     time.Duration
	ttft   []time.Duration
}

func (s *side) add(r round, clients int, prompts [][]int32) error {
	t0 := time.Now()
	n, ttft, err := r(clients, prompts)
	s.el += time.Since(t0)
	s.tokens += n
	s.ttft = append(s.ttft, ttft...)
	return err
}

func (s *side) tokPerS() float64 { return float64(s.tokens) / s.el.Seconds() }

func (s *side) pct(p float64) float64 {
	slices.Sort(s.ttft)
	i := min(len(s.ttft)-1, int(p*float64(len(s.ttft))))
	return float64(s.ttft[i].Microseconds()) / 1000
}

// BenchmarkServe: aggregate tokens a second and time to first token with
// 1, 4 and 16 clients at once, each asking for benchPredict tokens of its
// prompt (the default sampler chain, seeded, end of generation ignored).
// Each iteration runs a round on ggload and one on llama-server, in
// turns, so that both meet the same load of the machine; the ratios are
// ggload's over llama-server's.
func BenchmarkServe(b *testing.B) {
	path := benchModel(b)
	bin := llamaserver.Build(b)
	e := newEngine(b, path, benchCtx, serve.Params{}, func(cp *place.ContextParams) { cp.NParallel = benchSlots })
	srv := llamaserver.Start(b, bin, "-m", path, "--device", "none", "-t", fmt.Sprint(threads), "-c", fmt.Sprint(benchCtx), "-np", fmt.Sprint(benchSlots), "-kvu")
	// a connection per request: llama-server may close an idle one just
	// as a POST goes out on it, which Go does not retry
	client := &http.Client{Transport: &http.Transport{DisableKeepAlives: true}}
	var ours round = func(clients int, prompts [][]int32) (int, []time.Duration, error) {
		return fanOut(clients, func(i int) (int, time.Duration, error) {
			o := e.Defaults()
			o.NPredict, o.Stream = benchPredict, true
			o.Sampling.Seed, o.Sampling.IgnoreEOS = uint32(i+1), true
			t0 := time.Now()
			var first time.Duration
			r, err := e.Complete(context.Background(), prompts[i], o, func(ev serve.Event) error {
				if ev.Token != nil && first == 0 {
					first = time.Since(t0)
				}
				return nil
			})
			if err != nil {
				return 0, 0, err
			}
			return r.NDecoded, first, nil
		})
	}
	var theirs round = func(clients int, prompts [][]int32) (int, []time.Duration, error) {
		return fanOut(clients, func(i int) (int, time.Duration, error) {
			return streamCompletion(client, srv.URL, prompts[i], uint32(i+1))
		})
	}
	for _, clients := range []int{1, 4, 16} {
		prompts := benchPrompts(e.Vocab(), clients)
		b.Run(fmt.Sprintf("clients=%d", clients), func(b *testing.B) {
			var g, l side
			for i := range b.N {
				first, second, fr, sr := &g, &l, ours, theirs
				if i%2 == 1 {
					first, second, fr, sr = &l, &g, theirs, ours
				}
				// each round starts on a quiet machine: what a server
				// does after its last answer (saving idle slots' prompts,
				// its threads' spin before they sleep) is not counted
				// against the other
				time.Sleep(settle)
				if err := first.add(fr, clients, prompts); err != nil {
					b.Fatal(err)
				}
				time.Sleep(settle)
				if err := second.add(sr, clients, prompts); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(g.tokPerS(), "ggload-tok/s")
			b.ReportMetric(l.tokPerS(), "llama-tok/s")
			b.ReportMetric(g.tokPerS()/l.tokPerS(), "tok/s-ratio")
			b.ReportMetric(g.pct(0.5), "ggload-ttft-p50-ms")
			b.ReportMetric(l.pct(0.5), "llama-ttft-p50-ms")
			b.ReportMetric(g.pct(0.99), "ggload-ttft-p99-ms")
			b.ReportMetric(l.pct(0.99), "llama-ttft-p99-ms")
			b.ReportMetric(g.pct(0.99)/l.pct(0.99), "ttft-p99-ratio")
		})
	}
}

// settle is the pause before each round.
const settle = 250 * time.Millisecond

// fanOut runs one request per client at once.
func fanOut(clients int, one func(i int) (int, time.Duration, error)) (int, []time.Duration, error) {
	var wg sync.WaitGroup
	toks := make([]int, clients)
	ttft := make([]time.Duration, clients)
	errs := make([]error, clients)
	for i := range clients {
		wg.Add(1)
		go func() {
			defer wg.Done()
			toks[i], ttft[i], errs[i] = one(i)
		}()
	}
	wg.Wait()
	n := 0
	for i := range clients {
		if errs[i] != nil {
			return 0, nil, errs[i]
		}
		n += toks[i]
	}
	return n, ttft, nil
}

// streamCompletion asks llama-server for a streamed completion: the
// tokens it generated and the time to its first.
func streamCompletion(client *http.Client, url string, prompt []int32, seed uint32) (int, time.Duration, error) {
	body, _ := json.Marshal(map[string]any{"prompt": prompt, "n_predict": benchPredict, "seed": seed, "ignore_eos": true, "stream": true})
	t0 := time.Now()
	resp, err := client.Post(url+"/completion", "application/json", bytes.NewReader(body))
	if err != nil {
		return 0, 0, err
	}
	defer resp.Body.Close()
	var first time.Duration
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		line, ok := strings.CutPrefix(sc.Text(), "data: ")
		if !ok {
			continue
		}
		var ev struct {
			Tokens    []int32 `json:"tokens"`
			Stop      bool    `json:"stop"`
			Predicted int     `json:"tokens_predicted"`
		}
		if err := json.Unmarshal([]byte(line), &ev); err != nil {
			return 0, 0, err
		}
		if len(ev.Tokens) > 0 && first == 0 {
			first = time.Since(t0)
		}
		if ev.Stop {
			return ev.Predicted, first, nil
		}
	}
	return 0, 0, fmt.Errorf("llama-server's stream ended early: %v", sc.Err())
}

// BenchmarkIdleSlotRSS: the resident memory an idle slot adds, as the
// difference between a server of 16 slots and one of 1 (the same -c and
// unified cache: the KV cache is the same size), after one request each;
// ggload's engine in a process of its own.
func BenchmarkIdleSlotRSS(b *testing.B) {
	path := benchModel(b)
	bin := llamaserver.Build(b)
	libDir := testenv.Runtime(b).Location().Dir
	ggloadRSS := func(np int) uint64 {
		cmd := exec.Command(os.Args[0], "-test.run=^$")
		cmd.Env = append(os.Environ(), rssChildEnv+"="+fmt.Sprintf("%d %s", np, path))
		out, err := cmd.CombinedOutput()
		if err != nil {
			b.Fatalf("the child: %v\n%s", err, out)
		}
		return parseRSS(b, string(out))
	}
	serverRSS := func(np int) uint64 {
		s, err := llamaserver.StartServer(libDir, bin, 5*time.Minute, "-m", path, "--device", "none", "-t", fmt.Sprint(threads), "-c", fmt.Sprint(benchCtx), "-np", fmt.Sprint(np), "-kvu")
		if err != nil {
			b.Fatal(err)
		}
		defer s.Close()
		if _, _, err := streamCompletion(http.DefaultClient, s.URL, []int32{1, 500, 600, 700}, 1); err != nil {
			b.Fatal(err)
		}
		st, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", s.PID()))
		if err != nil {
			b.Skip("no /proc")
		}
		return parseRSS(b, string(st))
	}
	for _, side := range []struct {
		name string
		rss  func(int) uint64
	}{{"ggload", ggloadRSS}, {"llama-server", serverRSS}} {
		b.Run(side.name, func(b *testing.B) {
			var one, many uint64
			for range b.N {
				one, many = side.rss(1), side.rss(16)
			}
			b.ReportMetric(float64(int64(many)-int64(one))/15, "bytes/idle-slot")
			b.ReportMetric(float64(one)/(1<<20), "MiB-rss-1-slot")
		})
	}
}

// rssChildEnv makes the test binary a child that loads the benchmark's
// model, serves one request with np slots and prints its RSS ("np path").
const rssChildEnv = "GGLOAD_SERVE_RSS_CHILD"

func parseRSS(b *testing.B, s string) uint64 {
	for _, l := range strings.Split(s, "\n") {
		if f := strings.Fields(l); len(f) >= 2 && f[0] == "VmRSS:" {
			kb, err := strconv.ParseUint(f[1], 10, 64)
			if err == nil {
				return kb << 10
			}
		}
	}
	b.Fatalf("no VmRSS in %q", s)
	return 0
}

// rssChild is the child's work; its exit code.
func rssChild(arg string) int {
	var np int
	var path string
	if _, err := fmt.Sscan(arg, &np, &path); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 2
	}
	fail := func(err error) int { fmt.Fprintln(os.Stderr, err); return 1 }
	if _, ok := os.LookupEnv("GGML_VK_VISIBLE_DEVICES"); !ok {
		_ = bindings.Setenv("GGML_VK_VISIBLE_DEVICES", "0")
	}
	rt, err := ggml.Open(context.Background(), ggml.Options{})
	if err != nil {
		return fail(err)
	}
	m, err := gguf.OpenModel(path)
	if err != nil {
		return fail(err)
	}
	plan, err := place.New(context.Background(), rt, m, place.Params{DeviceNames: []string{"none"}, Context: place.ContextParams{NCtx: benchCtx, NParallel: np, KVUnified: true}})
	if err != nil {
		return fail(err)
	}
	lm, err := loader.Load(context.Background(), plan, loader.Options{})
	if err != nil {
		return fail(err)
	}
	e, err := serve.New(lm, serve.Params{Threads: threads})
	if err != nil {
		return fail(err)
	}
	o := e.Defaults()
	o.NPredict = benchPredict
	if _, err := e.Complete(context.Background(), []int32{1, 500, 600, 700}, o, nil); err != nil {
		return fail(err)
	}
	// (the Go heap's garbage returned first: what stays is what is held)
	runtime.GC()
	debug.FreeOSMemory()
	st, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return fail(err)
	}
	fmt.Print(string(st))
	return 0
}
