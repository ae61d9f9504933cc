package place_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/ggload/ggload/ggml"
	"github.com/ggload/ggload/gguf"
	"github.com/ggload/ggload/lab/synth"
	"github.com/ggload/ggload/lab/testenv"
	"github.com/ggload/ggload/place"
)

// benchModel writes a model of layers layers with 100 tensors each (100k
// in all for 1000): every layer template of llama.cpp's tensor table,
// weights and biases, under an architecture the pin does not know (the
// generic path).
func benchModel(b *testing.B, layers int) string {
	dir, err := os.MkdirTemp("", "place-bench-")
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { os.RemoveAll(dir) })
	var tmpls []string
	for _, tmpl := range place.TensorTemplates() {
		if strings.HasPrefix(tmpl, "blk.%d.") && strings.Count(tmpl, "%d") == 1 {
			// kinds with an info (some names llama.cpp lists have none)
			if _, _, ok := place.LookupTensor(strings.Replace(tmpl, "%d", "0", 1) + ".weight"); ok {
				tmpls = append(tmpls, tmpl)
			}
		}
	}
	sort.Strings(tmpls)
	w := gguf.NewWriter()
	must := func(err error) {
		if err != nil {
			b.Fatal(err)
		}
	}
	must(w.Set("general.architecture", gguf.String("bench")))
	must(w.Set("bench.block_count", gguf.Uint32(uint32(layers))))
	must(w.Set("bench.context_length", gguf.Uint32(4096)))
	must(w.Set("tokenizer.ggml.model", gguf.String("none")))
	must(w.Set("bench.embedding_length", gguf.Uint32(64)))
	must(w.Set("bench.attention.head_count", gguf.Uint32(2)))
	must(w.Set("bench.expert_count", gguf.Uint32(4)))
	must(w.Set("bench.expert_used_count", gguf.Uint32(2)))
	must(w.Set("bench.ssm.state_size", gguf.Uint32(16)))
	must(w.Set("bench.ssm.inner_size", gguf.Uint32(64)))
	data := make([]byte, 64*4)
	must(w.AddTensorBytes("token_embd.weight", ggml.TypeF32, []int64{64, 1}, data))
	must(w.AddTensorBytes("output.weight", ggml.TypeF32, []int64{64, 1}, data))
	for il := 0; il < layers; il++ {
		n := 0
		for _, suffix := range []string{"weight", "bias"} {
			for _, tmpl := range tmpls {
				if n == 100 {
					break
				}
				name := strings.Replace(tmpl, "%d", fmt.Sprint(il), 1) + "." + suffix
				shape := []int64{64}
				switch {
				case strings.Contains(tmpl, "exps"):
					shape = []int64{32, 2, 4} // experts: 3-d
				case strings.Contains(tmpl, "ssm_a"):
					shape = []int64{1, 2}
				case strings.Contains(tmpl, "ssm_conv1d") && suffix == "weight":
					shape = []int64{4, 64}
				}
				var s ggml.Shape = ggml.Shape{1, 1, 1, 1}
				copy(s[:], shape)
				nb, _ := ggml.TypeF32.Bytes(s)
				must(w.AddTensorBytes(name, ggml.TypeF32, shape, make([]byte, nb)))
				n++
			}
		}
	}
	path := filepath.Join(dir, "bench.gguf")
	must(w.WriteFile(path))
	return path
}

// Planning 1k, 10k and 100k tensors on the real devices; the probe cache
// keeps the number of supports_op calls to a few hundred.
//
//	go test -run XXX -bench PlanTensors ./place
func BenchmarkPlanTensors(b *testing.B) {
	rt := testenv.Runtime(b)
	for _, layers := range []int{10, 100, 1000} {
		b.Run(fmt.Sprintf("%dk", layers/10), func(b *testing.B) {
			path := benchModel(b, layers)
			m, err := gguf.OpenModel(path)
			if err != nil {
				b.Fatal(err)
			}
			defer m.Close()
			b.ReportMetric(float64(len(m.Weights)), "tensors")
			var p *place.Plan
			for b.Loop() {
				if p, err = place.New(context.Background(), rt, m, place.Params{}); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(p.Probes), "probes")
			b.ReportMetric(float64(p.ProbeQuestions), "questions")
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/float64(len(m.Weights)), "ns/tensor")
		})
	}
}

// Planning 1000-layer models of several architectures (the exact path:
// llama.cpp's own tensor creation, replayed) on the real devices.
//
//	go test -run XXX -bench Plan1000Layers ./place
func BenchmarkPlan1000Layers(b *testing.B) {
	rt := testenv.Runtime(b)
	vocab, err := synth.Vocab(1000)
	if err != nil {
		b.Fatal(err)
	}
	for _, a := range []string{"llama", "qwen3moe", "deepseek2", "gemma4", "qwen3next", "jamba", "t5", "rwkv7", "rwkv6", "bert", "bloom", "kimi-linear", "qwen3vl", "qwen35moe", "afmoe", "qwen4exp", "gemma3n", "deepseek32"} {
		b.Run(a, func(b *testing.B) {
			am, err := synth.NewArchModel(a, vocab, synth.ArchOptions{Layers: 1000})
			if err != nil {
				b.Fatal(err)
			}
			path := filepath.Join(b.TempDir(), a+".gguf")
			if err := am.WriteFile(path); err != nil {
				b.Fatal(err)
			}
			m, err := gguf.OpenModel(path)
			if err != nil {
				b.Fatal(err)
			}
			defer m.Close()
			b.ReportMetric(float64(len(m.Weights)), "tensors")
			params := place.Params{}
			for b.Loop() {
				if _, err := place.New(context.Background(), rt, m, params); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// Planning a 1000-layer model of every architecture of the pin (the
// synthesizer's models, 1000 layers), best of three each; it reports the
// slowest architecture's time and logs the ten slowest. Setting up takes
// about a minute.
//
//	go test -run XXX -bench Plan1000LayersEvery -benchtime 1x -v ./place
func BenchmarkPlan1000LayersEvery(b *testing.B) {
	rt := testenv.Runtime(b)
	vocab, err := synth.Vocab(1000)
	if err != nil {
		b.Fatal(err)
	}
	type timing struct {
		arch    string
		tensors int
		best    time.Duration
	}
	var ts []timing
	dir := b.TempDir()
	for _, a := range place.Architectures() {
		am, err := synth.NewArchModel(a, vocab, synth.ArchOptions{Layers: 1000})
		if err != nil {
			b.Logf("%s: no 1000-layer model: %.160v", a, err) // clip; granite-switch refuses > 512 layers itself
			continue
		}
		path := filepath.Join(dir, a+".gguf")
		if err := am.WriteFile(path); err != nil {
			b.Fatal(err)
		}
		m, err := gguf.OpenModel(path)
		if err != nil {
			b.Fatal(err)
		}
		best := time.Duration(1 << 62)
		for range 3 {
			start := time.Now()
			if _, err := place.New(context.Background(), rt, m, place.Params{}); err != nil {
				b.Fatalf("%s: %v", a, err)
			}
			best = min(best, time.Since(start))
		}
		ts = append(ts, timing{a, len(m.Weights), best})
		m.Close()
		os.Remove(path)
	}
	sort.Slice(ts, func(i, j int) bool { return ts[i].best > ts[j].best })
	for _, t := range ts[:min(10, len(ts))] {
		b.Logf("%-16s %6d tensors %6.1f ms", t.arch, t.tensors, float64(t.best)/1e6)
	}
	b.ReportMetric(float64(len(ts)), "architectures")
	b.ReportMetric(float64(ts[0].best)/1e6, "slowest-ms")
}

// Planning an 80-layer model with its context (the KV cache and the
// compute buffers, llama.cpp's graph replayed and reserved), and -fit
// over it with a target that makes it search, on the real devices.
//
//	go test -run XXX -bench 'PlanContext80Layers|Fit80Layers' ./place
func BenchmarkPlanContext80Layers(b *testing.B) {
	rt := testenv.Runtime(b)
	for _, a := range []string{"llama", "qwen3moe", "gemma3"} {
		m := model80(b, a)
		for _, devs := range [][]string{{"none"}, nil} {
			name := a + "/default-devices"
			if devs != nil {
				name = a + "/cpu"
			}
			b.Run(name, func(b *testing.B) {
				params := place.Params{DeviceNames: devs}
				for b.Loop() {
					p, err := place.New(context.Background(), rt, m, params)
					if err != nil {
						b.Fatal(err)
					}
					if p.Context == nil || !p.Context.ComputeKnown {
						b.Fatalf("no compute planned: %+v", p.Context)
					}
				}
			})
		}
	}
}

func BenchmarkFit80Layers(b *testing.B) {
	rt := testenv.Runtime(b)
	vk := testenv.Vulkan(b)
	m := model80(b, "llama")
	free, _ := vk.Memory()
	full, err := place.New(context.Background(), rt, m, place.Params{DeviceNames: []string{vk.Name()}, LoadMode: place.LoadNone})
	if err != nil {
		b.Fatal(err)
	}
	var used uint64
	for _, e := range full.Breakdown() {
		if d, ok := e.BufferType.Device(); ok && d == vk && !e.BufferType.IsHost() {
			used += e.Model + e.Context + e.Compute
		}
	}
	target := free - used/2
	var res *place.FitResult
	for b.Loop() {
		if res, err = place.Fit(context.Background(), rt, m, place.Params{DeviceNames: []string{vk.Name()}, Context: place.ContextParams{NCtx: 256}}, place.FitOptions{Targets: []uint64{target}}); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(res.Trials), "placements")
}

// model80 writes the synthesizer's model of arch with 80 layers.
func model80(b *testing.B, a string) *gguf.Model {
	vocab, err := synth.Vocab(1000)
	if err != nil {
		b.Fatal(err)
	}
	am, err := synth.NewArchModel(a, vocab, synth.ArchOptions{Layers: 80})
	if err != nil {
		b.Fatal(err)
	}
	path := filepath.Join(b.TempDir(), a+".gguf")
	if err := am.WriteFile(path); err != nil {
		b.Fatal(err)
	}
	m, err := gguf.OpenModel(path)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { m.Close() })
	return m
}
