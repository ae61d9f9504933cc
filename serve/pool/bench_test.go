package pool_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/ggload/ggload/bindings"
	"github.com/ggload/ggload/gguf"
	"github.com/ggload/ggload/lab/llamaserver"
	"github.com/ggload/ggload/lab/synth"
	"github.com/ggload/ggload/lab/testenv"
	"github.com/ggload/ggload/place"
	"github.com/ggload/ggload/serve"
	"github.com/ggload/ggload/serve/pool"
)

// The benchmarks hold the pool to llama-server's router of the pin on
// the same models (llama, 4 layers of 256, llama-spm's 32000 tokens,
// weights of two seeds), the same machine and the same flags (-c 4096
// -np 4 -kvu, the CPU alone, -t 1 or -t 2). ggload is measured through
// the pool directly (no HTTP layer), llama-server through its HTTP API
// (streaming):
//
//	go test -run '^$' -bench . -benchtime 8x ./serve/pool
//
// With -t 2 on a machine whose cores other processes keep busy, ggml's
// CPU threads wait for each other at every node of the graph (they spin,
// then sleep), and a decode takes what the scheduler gives: both sides
// pay it at each decode, and the times measure the scheduler more than
// the load. -t 1 has no such wait.

const benchCtx = 4096

// benchModels are the benchmarks' two models (cached), in a directory of
// their own, named a and b.
func benchModels(b testing.TB) (dir string, paths []string) {
	rt := testenv.Runtime(b)
	cache, err := bindings.CacheDir()
	if err != nil {
		b.Fatal(err)
	}
	o := synth.ArchOptions{Layers: 4, Embd: 256, Keys: []gguf.KV{{Key: "llama.context_length", Value: gguf.Uint32(benchCtx)}}}
	dir = b.TempDir()
	for i, seed := range []uint64{11, 12} {
		p, err := synth.TextModel(rt, filepath.Join(cache, "models", "text"), testenv.SourceTree(b), "llama", "llama-spm", o, seed)
		if err != nil {
			b.Fatal(err)
		}
		link := filepath.Join(dir, string(rune('a'+i))+".gguf")
		if err := os.Symlink(p, link); err != nil {
			b.Fatal(err)
		}
		paths = append(paths, link)
	}
	return dir, paths
}

// benchOptions are llama-server's options of the benchmarks as the pool
// takes them.
func benchOptions(threads int) pool.Options {
	return pool.Options{Place: place.Params{DeviceNames: []string{"none"}, Context: place.ContextParams{NCtx: benchCtx, NParallel: 4, KVUnified: true}},
		Serve: serve.Params{Threads: threads}}
}

// benchFlags are the same options on llama-server's command line.
func benchFlags(threads int) []string {
	return []string{"--device", "none", "-t", fmt.Sprint(threads), "-c", fmt.Sprint(benchCtx), "-np", "4", "-kvu"}
}

var benchPrompt = []int32{1, 450, 4996, 17354, 1701, 432, 17204, 975, 278, 17366, 11203}

// BenchmarkSwitch: the time from a request for a model that is not
// resident to its first token, two models alternating in memory that
// holds one: the pool with a host budget short of two models, the
// router with --models-max 1. Each iteration asks ggload and llama-server
// in turns (one request each, for the model the last one did not use),
// so that both meet the same load of the machine; the ratio is
// ggload's over llama-server's.
func BenchmarkSwitch(b *testing.B) {
	dir, paths := benchModels(b)
	bin := llamaserver.Build(b)
	for _, threads := range []int{1, 2} {
		b.Run(fmt.Sprintf("t=%d", threads), func(b *testing.B) { benchSwitch(b, dir, paths, bin, threads) })
	}
}

func benchSwitch(b *testing.B, dir string, paths []string, bin string, threads int) {
	// the pool: a budget that holds one model
	p0 := newPool(b, pool.Params{ModelsMax: -1})
	var need []uint64
	for i, path := range paths {
		o := benchOptions(threads)
		o.Path = path
		name := string(rune('a' + i))
		p0.Add(name, o)
		l := acquire(b, p0, name)
		in, _ := p0.Model(name)
		l.Release()
		need = append(need, in.Memory[0].Bytes)
	}
	p0.Close()
	p := newPool(b, pool.Params{ModelsDir: dir, ModelsMax: -1, Defaults: benchOptions(threads),
		Budgets: []pool.Budget{{Device: pool.HostDevice, Bytes: max(need[0], need[1]) + min(need[0], need[1])/2}}})
	srv := llamaserver.Start(b, bin, append([]string{"--models-dir", dir, "--models-max", "1"}, benchFlags(threads)...)...)
	client := &http.Client{}
	ours := func(name string) (time.Duration, error) {
		t0 := time.Now()
		l, err := p.Acquire(context.Background(), name, true)
		if err != nil {
			return 0, err
		}
		defer l.Release()
		e := l.Engine()
		o := e.Defaults()
		o.NPredict, o.Stream = 1, true
		var first time.Duration
		_, err = e.Complete(context.Background(), benchPrompt, o, func(ev serve.Event) error {
			if ev.Token != nil && first == 0 {
				first = time.Since(t0)
			}
			return nil
		})
		return first, err
	}
	theirs := func(name string) (time.Duration, error) {
		return routerFirstToken(client, srv.URL, name)
	}
	var g, l []time.Duration
	var own, engine []time.Duration // the pool's steps, the engine's making
	// (both start with a resident, so that every measured request switches)
	if _, err := ours("b"); err != nil {
		b.Fatal(err)
	}
	if _, err := theirs("b"); err != nil {
		b.Fatal(err)
	}
	b.ResetTimer()
	for i := range b.N {
		name := []string{"a", "b"}[i%2]
		first, second, fr, sr := &g, &l, ours, theirs
		if i%4 >= 2 {
			first, second, fr, sr = &l, &g, theirs, ours
		}
		for _, side := range []struct {
			d *[]time.Duration
			f func(string) (time.Duration, error)
		}{{first, fr}, {second, sr}} {
			d, err := side.f(name)
			if err != nil {
				b.Fatal(err)
			}
			*side.d = append(*side.d, d)
		}
		in, _ := p.Model(name)
		own = append(own, in.Took.Plan+in.Took.Admit+in.Took.Load)
		engine = append(engine, in.Took.Engine)
	}
	b.StopTimer()
	for _, in := range p.Models() {
		if in.Status == pool.Loaded && held(p) > p.Memory()[0].Budget {
			b.Fatalf("over the budget")
		}
	}
	gm, lm := median(g), median(l)
	b.ReportMetric(gm, "ggload-switch-ms")
	b.ReportMetric(lm, "llama-switch-ms")
	b.ReportMetric(gm/lm, "switch-ratio")
	b.ReportMetric(median(own), "ggload-plan+evict+load-ms")
	b.ReportMetric(median(engine), "ggload-engine-ms")
}

func median(d []time.Duration) float64 {
	s := slices.Clone(d)
	slices.Sort(s)
	return float64(s[len(s)/2].Microseconds()) / 1000
}

// routerFirstToken asks llama-server's router for one streamed token of
// the named model: the time to it.
func routerFirstToken(client *http.Client, url, model string) (time.Duration, error) {
	body, _ := json.Marshal(map[string]any{"model": model, "prompt": benchPrompt, "n_predict": 1, "stream": true})
	t0 := time.Now()
	resp, err := client.Post(url+"/completion", "application/json", bytes.NewReader(body))
	if err != nil {
		return 0, err
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
			Tokens []int32 `json:"tokens"`
			Stop   bool    `json:"stop"`
			Error  any     `json:"error"`
		}
		if err := json.Unmarshal([]byte(line), &ev); err != nil {
			return 0, err
		}
		if ev.Error != nil {
			return 0, fmt.Errorf("llama-server: %s", line)
		}
		if len(ev.Tokens) > 0 && first == 0 {
			first = time.Since(t0)
		}
		if ev.Stop {
			return first, nil
		}
	}
	return 0, fmt.Errorf("llama-server's stream ended early (%s): %v", resp.Status, sc.Err())
}

// BenchmarkResidentRSS: the resident memory each resident model adds, as
// the difference between four models resident and one, divided by three
// (each model after one request; no prompt cache, --cache-ram 0, whose
// limit the pool would hold for each model): ggload's pool in a process
// of its own, llama-server's router and its children together. Beside it, the
// memory the pool counts per model (its plan, to the byte: what it
// allocated, of which a process touches only part), and the part of the
// resident memory per model that is not the model's buffers at all:
// ggload's engine and bookkeeping (the Go heap), llama-server's child
// process.
func BenchmarkResidentRSS(b *testing.B) {
	_, paths := benchModels(b)
	bin := llamaserver.Build(b)
	libDir := testenv.Runtime(b).Location().Dir
	// four models: the two files, each twice (the pool and the router
	// see four names; a file mapped twice is paged in once)
	dir := b.TempDir()
	var names []string
	for i := range 4 {
		n := fmt.Sprintf("m%d", i)
		os.Symlink(paths[i%2], filepath.Join(dir, n+".gguf"))
		names = append(names, n)
	}
	ggload := func(n int) (rss, counted, heap uint64) {
		cmd := exec.Command(os.Args[0], "-test.run=^$")
		cmd.Env = append(os.Environ(), childEnv+"="+dir+" "+strings.Join(names[:n], ","))
		out, err := cmd.CombinedOutput()
		if err != nil {
			b.Fatalf("the child: %v\n%s", err, out)
		}
		if _, err := fmt.Sscan(string(out), &rss, &counted, &heap); err != nil {
			b.Fatalf("the child said %q: %v", out, err)
		}
		return rss, counted, heap
	}
	router := func(n int) (rss, counted, heap uint64) {
		s, err := llamaserver.StartServer(libDir, bin, 5*time.Minute, append([]string{"--models-dir", dir, "--models-max", "4", "--cache-ram", "0"}, benchFlags(1)...)...)
		if err != nil {
			b.Fatal(err)
		}
		defer s.Close()
		for _, name := range names[:n] {
			if _, err := routerFirstToken(http.DefaultClient, s.URL, name); err != nil {
				b.Fatal(err)
			}
		}
		pids := append([]int{s.PID()}, childrenOf(s.PID())...)
		if len(pids) != n+1 {
			b.Fatalf("%d children for %d models", len(pids)-1, n)
		}
		for _, pid := range pids {
			rss += rss0(b, strconv.Itoa(pid))
		}
		return rss, 0, 0
	}
	for _, side := range []struct {
		name string
		rss  func(int) (uint64, uint64, uint64)
	}{{"ggload", ggload}, {"llama-server", router}} {
		b.Run(side.name, func(b *testing.B) {
			var one, four, counted, heap1, heap4 uint64
			for range b.N {
				one, _, heap1 = side.rss(1)
				four, counted, heap4 = side.rss(4)
			}
			per := float64(int64(four)-int64(one)) / 3
			b.ReportMetric(per/(1<<20), "MiB-rss/model")
			b.ReportMetric(float64(one)/(1<<20), "MiB-rss-1-model")
			if counted > 0 {
				b.ReportMetric(float64(counted)/4/(1<<20), "MiB-counted/model")
				b.ReportMetric(float64(int64(heap4)-int64(heap1))/3/(1<<20), "MiB-go-heap/model")
			}
		})
	}
}

// childrenOf are a process's child processes.
func childrenOf(pid int) []int {
	var out []int
	es, _ := os.ReadDir("/proc")
	for _, e := range es {
		c, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		st, err := os.ReadFile("/proc/" + e.Name() + "/stat")
		if err != nil {
			continue
		}
		// pid (comm) state ppid ...
		s := string(st)
		if i := strings.LastIndexByte(s, ')'); i >= 0 {
			if f := strings.Fields(s[i+1:]); len(f) > 1 && f[1] == strconv.Itoa(pid) {
				out = append(out, c)
			}
		}
	}
	return out
}

// rss0 is rss without a test.
func rss0(b *testing.B, pid string) uint64 { return rss(b, pid) }

// BenchmarkAcquire: what the pool adds to a request for a resident
// model: the lease, the check of its files, the release.
func BenchmarkAcquire(b *testing.B) {
	_, paths := benchModels(b)
	p := newPool(b, pool.Params{})
	o := benchOptions(1)
	o.Path = paths[0]
	p.Add("a", o)
	acquire(b, p, "a").Release()
	b.ResetTimer()
	for range b.N {
		l, err := p.Acquire(context.Background(), "a", true)
		if err != nil {
			b.Fatal(err)
		}
		l.Release()
	}
}
