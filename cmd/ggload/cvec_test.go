package main

import (
	"encoding/binary"
	"encoding/json"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/ggload/ggload/ggml"
	"github.com/ggload/ggload/gguf"
	"github.com/ggload/ggload/infer"
	"github.com/ggload/ggload/lab/cxx"
	"github.com/ggload/ggload/lab/llama"
	"github.com/ggload/ggload/lab/synth"
	"github.com/ggload/ggload/lab/testenv"
	"github.com/ggload/ggload/place"
)

// writeDirections writes a control vector file: direction.1 ..
// direction.n of width nEmbd, pseudo-random.
func writeDirections(t *testing.T, path string, n, nEmbd int) {
	t.Helper()
	w := gguf.NewWriter()
	x := uint32(12345 + 7*n + nEmbd)
	for il := 1; il <= n; il++ {
		b := make([]byte, 4*nEmbd)
		for i := range nEmbd {
			x = x*1664525 + 1013904223
			binary.LittleEndian.PutUint32(b[4*i:], math.Float32bits(float32(int32(x>>8)%1000)/1000))
		}
		if err := w.AddTensorBytes("direction."+string(rune('0'+il)), ggml.TypeF32, []int64{int64(nEmbd)}, b); err != nil {
			t.Fatal(err)
		}
	}
	if err := w.WriteFile(path); err != nil {
		t.Fatal(err)
	}
}

// run with --control-vector-scaled and a layer range: the logits are
// libllama's with the same vector applied by llama_set_adapter_cvec over
// the same layers; plan says where the vector lives; a vector of another
// width is refused naming its file.
func TestRunControlVector(t *testing.T) {
	rt := testenv.Runtime(t)
	l, err := llama.Open(rt)
	if err != nil {
		testenv.Missing(t, "llama", "%v", err)
	}
	path := writeSynth(t, synth.Spec{Layers: 3, Embd: 128, FF: 256, Heads: 2, Vocab: 300, Distinct: true, Seed: 5})
	dir := t.TempDir()
	cv, wide := filepath.Join(dir, "cv.gguf"), filepath.Join(dir, "wide.gguf")
	writeDirections(t, cv, 3, 128)
	writeDirections(t, wide, 2, 64)
	logits := filepath.Join(dir, "logits.f32")
	tokens := []int32{1, 7, 42, 250}
	if _, err := runCLI(t, "run", path, "-dev", "none", "-t", "2", "--tokens", "1,7,42,250", "-n", "2", "--logits-out", logits,
		"--control-vector-scaled", cv+":0.5", "--control-vector-layer-range", "1", "2"); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(logits)
	if err != nil {
		t.Fatal(err)
	}
	if len(b) != 3*300*4 {
		t.Fatalf("logits file of %d bytes", len(b))
	}
	vec, err := infer.LoadControlVectors([]infer.ControlVectorFile{{Path: cv, Scale: 0.5}})
	if err != nil {
		t.Fatal(err)
	}
	lm, ctx, err := l.OpenContext(rt, path, place.Params{DeviceNames: []string{"none"}}, 2)
	if err != nil {
		t.Fatal(err)
	}
	defer lm.Free()
	defer ctx.Free()
	if err := ctx.SetControlVector(vec.Data, int32(vec.NEmbd), 1, 2); err != nil {
		t.Fatal(err)
	}
	for step := range 3 {
		if err := ctx.Decode(tokens, nil, nil, nil); err != nil {
			t.Fatal(err)
		}
		lg, err := ctx.Logits(-1, 300)
		if err != nil {
			t.Fatal(err)
		}
		for i, v := range lg {
			if got := binary.LittleEndian.Uint32(b[(step*300+i)*4:]); got != math.Float32bits(v) {
				t.Fatalf("output %d, logit %d: ggload run %v, libllama %v", step, i, math.Float32frombits(got), v)
			}
		}
		tokens = []int32{int32(infer.Argmax(lg))}
	}
	out, err := runCLI(t, "plan", path, "-dev", "none", "--control-vector", cv)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(out, "1 control vector (n_embd 128, directions for layers 1 to 3) on layers 1 to n_layer: a control vector is the context's") {
		t.Errorf("plan does not say where the control vector goes:\n%s", out)
	}
	_, err = runCLI(t, "run", path, "-dev", "none", "--tokens", "1", "--control-vector", wide)
	if err == nil || !strings.Contains(err.Error(), wide) || !strings.Contains(err.Error(), "n_embd is 128") {
		t.Errorf("a control vector of width 64 on a model of 128: %v", err)
	}
	_, err = runCLI(t, "run", path, "-dev", "none", "--tokens", "1", "--control-vector-scaled", cv)
	if err == nil || !strings.Contains(err.Error(), "FNAME:SCALE") {
		t.Errorf("--control-vector-scaled without a scale: %v", err)
	}
}

// ggload run -p with control vectors prints what llama-completion
// prints with the same options: the files loaded, scaled, summed and
// applied over the range by the pin's own common library on one side,
// by ggload on the other.
func TestRunTextControlVectorMatchesLlamaCompletion(t *testing.T) {
	bin := cxx.Build(t, "llama-completion", []string{"tools/completion/completion.cpp", "tools/completion/main.cpp"})
	path := textModel(t, "llama", "llama-spm")
	m, err := gguf.OpenModel(path)
	if err != nil {
		t.Fatal(err)
	}
	nEmbd, err := m.Uint("llama.embedding_length")
	m.Close()
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	a, b := filepath.Join(dir, "a.gguf"), filepath.Join(dir, "b.gguf")
	writeDirections(t, a, 2, int(nEmbd))
	writeDirections(t, b, 1, int(nEmbd))
	plain := []string{"-p", "Hello world", "-n", "12", "--temp", "0"}
	var outs []string
	for _, c := range [][]string{
		plain,
		append([]string{"--control-vector", a}, plain...),
		append([]string{"--control-vector-scaled", a + ":2," + b + ":-3", "--control-vector-layer-range", "1", "1"}, plain...),
		append([]string{"--control-vector", a + "," + b, "--control-vector-scaled", b + ":4"}, plain...),
	} {
		args := append([]string{"-m", path, "-t", "2", "-dev", "none", "-no-cnv"}, c...)
		want, err := cxx.Command(t, bin, args...).Output()
		if err != nil {
			t.Fatalf("llama-completion %s: %v", strings.Join(args, " "), err)
		}
		got, err := runCLI(t, append([]string{"run", path, "-t", "2", "-dev", "none"}, c...)...)
		if err != nil {
			t.Fatal(err)
		}
		if got != string(want) {
			t.Fatalf("%s: ggload run printed\n%q\nllama-completion printed\n%q", strings.Join(c, " "), got, want)
		}
		outs = append(outs, got)
	}
	if outs[0] == outs[1] && outs[0] == outs[2] && outs[0] == outs[3] {
		t.Errorf("the control vectors changed no token")
	}
}

// plan --json lists the control vector among the adapters ("kind":
// "cvec"): a direction per layer from 1 to n_layer-1 on the buffer type
// llama.cpp picks for it, and one buffer per buffer type, each the size
// of the buffer run's context then allocates for it.
func TestPlanControlVectorJSON(t *testing.T) {
	path := writeSynth(t, synth.Spec{Layers: 3, Embd: 128, FF: 256, Heads: 2, Vocab: 300, Distinct: true, Seed: 5})
	cv := filepath.Join(t.TempDir(), "cv.gguf")
	writeDirections(t, cv, 3, 128)
	configs := [][]string{{"-dev", "none"}}
	if v := testenv.Vulkan(t); v != nil {
		configs = append(configs, []string{"-dev", v.Name(), "-ngl", "2"})
	}
	for _, c := range configs {
		args := append(append([]string{}, c...), "--control-vector", cv)
		out, err := runCLI(t, append([]string{"plan", path, "--json"}, args...)...)
		if err != nil {
			t.Fatal(err)
		}
		var plan struct {
			Adapters []adapterReport `json:"adapters"`
		}
		if err := json.Unmarshal([]byte(out), &plan); err != nil {
			t.Fatal(err)
		}
		if len(plan.Adapters) != 1 || plan.Adapters[0].Kind != "cvec" || plan.Adapters[0].Path != cv {
			t.Fatalf("%v: adapters %+v", c, plan.Adapters)
		}
		a := plan.Adapters[0]
		if len(a.Tensors) != 2 || a.Tensors[0].Name != "direction.1" || a.Tensors[1].Name != "direction.2" {
			t.Errorf("%v: tensors %+v, want direction.1 and direction.2", c, a.Tensors)
		}
		out, err = runCLI(t, append([]string{"run", path, "--json", "--tokens", "1", "-n", "1"}, args...)...)
		if err != nil {
			t.Fatal(err)
		}
		var run struct {
			Memory []infer.Allocation `json:"context_memory"`
		}
		if err := json.Unmarshal([]byte(out), &run); err != nil {
			t.Fatal(err)
		}
		var made []adapterBufferReport
		for _, m := range run.Memory {
			if m.What == "control vector" {
				made = append(made, adapterBufferReport{Name: m.BufferType, BufferType: m.BufferType, Size: m.Bytes})
			}
		}
		if len(made) != len(a.Buffers) {
			t.Fatalf("%v: plan %+v, the context allocated %+v", c, a.Buffers, made)
		}
		for i, b := range a.Buffers {
			if b.BufferType != made[i].BufferType || b.Size != made[i].Size {
				t.Errorf("%v: buffer %d: plan %s of %d bytes, the context %s of %d", c, i, b.BufferType, b.Size, made[i].BufferType, made[i].Size)
			}
		}
		t.Logf("%v: %+v", c, a.Buffers)
	}
}
