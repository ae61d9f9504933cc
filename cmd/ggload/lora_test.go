package main

import (
	"context"
	"encoding/binary"
	"encoding/json"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/ggload/ggload/ggml"
	"github.com/ggload/ggload/gguf"
	"github.com/ggload/ggload/lab/llama"
	"github.com/ggload/ggload/lab/synth"
	"github.com/ggload/ggload/lab/testenv"
	"github.com/ggload/ggload/place"
)

// writeAdapter writes a LoRA adapter of rank 4 for the attention and FFN
// matrices of the model at model, pseudo-random.
func writeAdapter(t *testing.T, model, path string) {
	t.Helper()
	m, err := gguf.OpenModel(model)
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	w := gguf.NewWriter()
	for k, v := range map[string]gguf.Value{"general.type": gguf.String("adapter"), gguf.KeyArchitecture: gguf.String(m.Architecture()),
		"adapter.type": gguf.String("lora"), "adapter.lora.alpha": gguf.Float32(8)} {
		if err := w.Set(k, v); err != nil {
			t.Fatal(err)
		}
	}
	x := uint32(99)
	data := func(n int64) []byte {
		b := make([]byte, 4*n)
		for i := range n {
			x = x*1664525 + 1013904223
			binary.LittleEndian.PutUint32(b[4*i:], math.Float32bits(float32(int32(x>>8)%1000)/5000))
		}
		return b
	}
	const r = 4
	for _, wt := range m.Weights {
		if !strings.Contains(wt.Name, "attn_") && !strings.Contains(wt.Name, "ffn_") || wt.Shape[1] <= 1 {
			continue
		}
		ne := wt.Shape
		if err := w.AddTensorBytes(wt.Name+".lora_a", ggml.TypeF32, []int64{ne[0], r}, data(ne[0]*r)); err != nil {
			t.Fatal(err)
		}
		if err := w.AddTensorBytes(wt.Name+".lora_b", ggml.TypeF32, []int64{r, ne[1]}, data(ne[1]*r)); err != nil {
			t.Fatal(err)
		}
	}
	if err := w.WriteFile(path); err != nil {
		t.Fatal(err)
	}
}

// run with --lora-scaled: the logits are libllama's with the adapter
// applied by llama_set_adapters_lora at that scale; with
// --lora-init-without-apply they are the model's alone; plan prints the
// adapter's buffers as llama.cpp does and its --json lists them; an
// adapter of another architecture is refused naming its file.
func TestRunLoRA(t *testing.T) {
	rt := testenv.Runtime(t)
	l, err := llama.Open(rt)
	if err != nil {
		testenv.Missing(t, "llama", "%v", err)
	}
	path := writeSynth(t, synth.Spec{Layers: 2, Embd: 128, FF: 256, Heads: 2, Vocab: 300, Distinct: true, Seed: 8})
	dir := t.TempDir()
	adapter := filepath.Join(dir, "lora.gguf")
	writeAdapter(t, path, adapter)
	tokens := []int32{1, 7, 42, 250}
	runLogits := func(extra ...string) []float32 {
		t.Helper()
		out := filepath.Join(dir, "logits.f32")
		args := append([]string{"run", path, "-dev", "none", "-t", "2", "--tokens", "1,7,42,250", "-n", "0", "--logits-out", out}, extra...)
		if _, err := runCLI(t, args...); err != nil {
			t.Fatal(err)
		}
		b, err := os.ReadFile(out)
		if err != nil {
			t.Fatal(err)
		}
		lg := make([]float32, len(b)/4)
		for i := range lg {
			lg[i] = math.Float32frombits(binary.LittleEndian.Uint32(b[4*i:]))
		}
		return lg
	}
	with := runLogits("--lora-scaled", adapter+":0.5")
	without := runLogits()
	unapplied := runLogits("--lora", adapter, "--lora-init-without-apply")

	params := place.Params{DeviceNames: []string{"none"}}
	lm, ctx, err := l.OpenContext(rt, path, params, 2)
	if err != nil {
		t.Fatal(err)
	}
	defer lm.Free()
	defer ctx.Free()
	a, _, err := lm.LoadLoRA(adapter)
	if err != nil {
		t.Fatal(err)
	}
	defer a.Free()
	if err := ctx.SetLoRAs([]*llama.LoRA{a}, []float32{0.5}); err != nil {
		t.Fatal(err)
	}
	if err := ctx.Decode(tokens, nil, nil, nil); err != nil {
		t.Fatal(err)
	}
	want, err := ctx.Logits(-1, 300)
	if err != nil {
		t.Fatal(err)
	}
	if len(with) != len(want) {
		t.Fatalf("%d logits, libllama %d", len(with), len(want))
	}
	same := func(a, b []float32) bool {
		for i := range a {
			if math.Float32bits(a[i]) != math.Float32bits(b[i]) {
				return false
			}
		}
		return len(a) == len(b)
	}
	if !same(with, want) {
		t.Error("run --lora-scaled: logits differ from libllama's")
	}
	if same(with, without) || !same(without, unapplied) {
		t.Error("--lora-init-without-apply: the adapter is applied, or --lora-scaled is not")
	}

	// plan: llama.cpp's lines and the --json adapters
	out, err := runCLI(t, "plan", path, "-dev", "none", "--lora", adapter)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(out, "LoRA buffer size =") || !strings.Contains(out, "loaded 28 tensors from lora file") {
		t.Errorf("plan --lora:\n%s", out)
	}
	out, err = runCLI(t, "load", path, "-dev", "none", "--lora", adapter, "--json")
	if err != nil {
		t.Fatal(err)
	}
	var j struct {
		Adapters []adapterReport `json:"adapters"`
	}
	if err := json.Unmarshal([]byte(out), &j); err != nil {
		t.Fatal(err)
	}
	m := testenv.OpenModel(t, path)
	plan, err := place.New(context.Background(), rt, m, params)
	if err != nil {
		t.Fatal(err)
	}
	lp, err := plan.PlanLoRA(adapter)
	if err != nil {
		t.Fatal(err)
	}
	if len(j.Adapters) != 1 || j.Adapters[0].Kind != "lora" || j.Adapters[0].Path != adapter || len(j.Adapters[0].Tensors) != 28 ||
		len(j.Adapters[0].Buffers) != len(lp.Buffers) || j.Adapters[0].Buffers[0].Size != lp.Buffers[0].Size {
		t.Errorf("load --json adapters: %+v", j.Adapters)
	}

	// another architecture
	other := filepath.Join(dir, "other.gguf")
	f, err := gguf.Open(adapter)
	if err != nil {
		t.Fatal(err)
	}
	w := gguf.NewWriter()
	for _, kv := range f.KV {
		if err := w.Set(kv.Key, kv.Value); err != nil {
			t.Fatal(err)
		}
	}
	f.Close()
	if err := w.Set(gguf.KeyArchitecture, gguf.String("qwen2")); err != nil {
		t.Fatal(err)
	}
	if err := w.WriteFile(other); err != nil {
		t.Fatal(err)
	}
	_, err = runCLI(t, "run", path, "-dev", "none", "--tokens", "1", "--lora", other)
	if err == nil || !strings.Contains(err.Error(), other) || !strings.Contains(err.Error(), "arch mismatch") {
		t.Errorf("an adapter of another architecture: %v", err)
	}
	_, err = runCLI(t, "plan", path, "--lora-scaled", adapter)
	if err == nil || !strings.Contains(err.Error(), "FNAME:SCALE") {
		t.Errorf("--lora-scaled without a scale: %v", err)
	}
}
