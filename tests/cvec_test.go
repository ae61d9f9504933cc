package tests

import (
	"encoding/binary"
	"maps"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/ggload/ggload/ggml"
	"github.com/ggload/ggload/gguf"
	"github.com/ggload/ggload/infer"
	"github.com/ggload/ggload/internal/replay/arch"
	"github.com/ggload/ggload/lab/llama"
	"github.com/ggload/ggload/lab/synth"
	"github.com/ggload/ggload/lab/testenv"
	"github.com/ggload/ggload/place"
)

// Control vectors against libllama's: synthesized direction files loaded
// by infer.LoadControlVectors (common_control_vector_load's rules) and
// applied to ggload's context and to libllama's (llama_set_adapter_cvec)
// over a dense, a mixture-of-experts and a hybrid model; the logits of a
// prompt and greedy steps must be equal bit for bit, with the vector over
// every layer, over a range of layers, and cleared.
//
//	go test -run 'TestControlVector' -v ./tests

// writeCvec writes a control vector file of the given directions (one
// tensor per name), of type typ.
func writeCvec(t *testing.T, path string, typ ggml.Type, dirs map[string][]float32) {
	t.Helper()
	w := gguf.NewWriter()
	if err := w.Set("general.architecture", gguf.String("controlvector")); err != nil {
		t.Fatal(err)
	}
	names := make([]string, 0, len(dirs))
	for n := range dirs {
		names = append(names, n)
	}
	slices.Sort(names)
	for _, n := range names {
		v := dirs[n]
		var b []byte
		switch typ {
		case ggml.TypeF32:
			b = make([]byte, 4*len(v))
			for i, x := range v {
				binary.LittleEndian.PutUint32(b[4*i:], math.Float32bits(x))
			}
		case ggml.TypeF16:
			b = make([]byte, 2*len(v)) // (zeros: the type is what is refused)
		}
		if err := w.AddTensorBytes(n, typ, []int64{int64(len(v))}, b); err != nil {
			t.Fatal(err)
		}
	}
	if err := w.WriteFile(path); err != nil {
		t.Fatal(err)
	}
}

// randomDirs are direction.1 .. direction.n of width nEmbd.
func randomDirs(r *rand.Rand, from, n, nEmbd int, amp float32) map[string][]float32 {
	out := map[string][]float32{}
	for il := from; il <= n; il++ {
		v := make([]float32, nEmbd)
		for i := range v {
			v[i] = amp * float32(r.NormFloat64())
		}
		out["direction."+strconv.Itoa(il)] = v
	}
	return out
}

func TestControlVector(t *testing.T) {
	rt := testenv.Runtime(t)
	l := openLlama(t, rt)
	models := []struct{ name, path string }{
		{"llama", testenv.ModelFile(t, rt, synth.Spec{Layers: 3, Embd: 128, FF: 256, Heads: 2, Vocab: 300, Distinct: true, Seed: 21})},
	}
	work := t.TempDir()
	for _, f := range someArchFiles(t, rt, "qwen3moe", "jamba") {
		if f.Types != synth.ConverterTypes || !slices.Contains([]string{"qwen3moe", "jamba"}, f.Name) {
			continue
		}
		filled := filepath.Join(work, filepath.Base(f.Path))
		if err := synth.FillFile(rt, f.Path, filled, 1); err != nil {
			t.Fatal(err)
		}
		models = append(models, struct{ name, path string }{f.Name, filled})
	}
	if len(models) != 3 {
		t.Fatalf("%d models: a dense, a MoE and a hybrid wanted", len(models))
	}
	cpu := place.Params{DeviceNames: []string{"none"}}
	for _, m := range models {
		t.Run(m.name+"-cpu", func(t *testing.T) { controlVectorCase(t, rt, l, m.path, cpu, true) })
	}
	// Vulkan0 with the last layer and the output offloaded: layer 2's
	// direction on Vulkan0's buffer type, layer 1's on its host buffer
	// type. The vector is applied before the first decode, as llama.cpp's
	// tools apply it: applied after a decode on lavapipe, the compute
	// buffers reserved anew corrupt the heap now and then, libllama's as
	// ggload's.
	t.Run("llama-vulkan-ngl2", func(t *testing.T) {
		gpu := testenv.Vulkan(t)
		p := place.Params{DeviceNames: []string{gpu.Name()}, NGPULayers: place.NLayers(2)}
		controlVectorCase(t, rt, l, models[0].path, p, false)
	})
	// split mode tensor over an RPC server and Vulkan0: the directions on
	// the meta device, mirrored
	t.Run("llama-sm-tensor-rpc-vulkan", func(t *testing.T) {
		gpu := testenv.Vulkan(t)
		testenv.RPC(t, 1)
		p := place.Params{DeviceNames: []string{"RPC0", gpu.Name()}, SplitMode: place.SplitTensor, TensorSplit: []float32{1, 1}}
		controlVectorCase(t, rt, l, models[0].path, p, false)
	})
}

// controlVectorCase runs one model's comparison: the vector applied to
// every layer, then (all) without it, with it, over one layer, cleared,
// and a shorter one.
func controlVectorCase(t *testing.T, rt *ggml.Runtime, l *llama.Lib, path string, params place.Params, all bool) {
	m := testenv.OpenModel(t, path)
	arch := m.Architecture()
	nEmbd, err := m.Uint(arch + ".embedding_length")
	if err != nil {
		t.Fatal(err)
	}
	nLayer, err := m.Uint(arch + ".block_count")
	if err != nil {
		t.Fatal(err)
	}
	nVocabM := vocabOf(m)
	dir := t.TempDir()
	r := rand.New(rand.NewPCG(uint64(nEmbd), nLayer))
	a, b := filepath.Join(dir, "a.gguf"), filepath.Join(dir, "b.gguf")
	writeCvec(t, a, ggml.TypeF32, randomDirs(r, 1, int(nLayer), int(nEmbd), 0.5))
	writeCvec(t, b, ggml.TypeF32, randomDirs(r, 2, 2, int(nEmbd), 1)) // (layer 2 alone)
	cv, err := infer.LoadControlVectors([]infer.ControlVectorFile{{Path: a, Scale: 0.75}, {Path: b, Scale: -1.5}})
	if err != nil {
		t.Fatal(err)
	}
	if cv.NEmbd != int(nEmbd) || cv.Layers() != int(nLayer) {
		t.Fatalf("the control vector: width %d over %d layers, want %d over %d", cv.NEmbd, cv.Layers(), nEmbd, nLayer)
	}
	ours, theirs, nVocab := bothContexts(t, rt, l, path, params)
	if nVocab != nVocabM {
		t.Fatalf("vocabulary %d, libllama %d", nVocabM, nVocab)
	}
	// run decodes the prompt and two greedy steps on both, from an empty
	// memory, and compares each output's logits
	run := func(what string) [][]float32 {
		t.Helper()
		if err := ours.Clear(); err != nil {
			t.Fatal(err)
		}
		if err := theirs.Clear(); err != nil {
			t.Fatal(err)
		}
		tokens := prompt(6, nVocab)
		var out [][]float32
		for step := 0; step <= 2; step++ {
			if err := ours.Decode(infer.Batch{Tokens: tokens}); err != nil {
				t.Fatalf("%s: ggload: %v", what, err)
			}
			if err := theirs.Decode(tokens, nil, nil, nil); err != nil {
				t.Fatalf("%s: llama.cpp: %v", what, err)
			}
			lo, err := ours.Logits(-1)
			if err != nil {
				t.Fatal(err)
			}
			lt, err := theirs.Logits(-1, nVocab)
			if err != nil {
				t.Fatal(err)
			}
			if d := firstDifference([][]float32{lo}, [][]float32{lt}, "ggload", "llama.cpp"); d != "" {
				t.Fatalf("%s: step %d: %s", what, step, d)
			}
			out = append(out, lo)
			tokens = []int32{int32(infer.Argmax(lo))}
		}
		return out
	}
	// the compute buffers, reserved again at the first decode after the
	// vector changed (the graphs add its directions), are llama.cpp's
	compute := func(what string) {
		t.Helper()
		lib := testenv.Lib(rt)
		th, ou := map[string]uint64{}, map[string]uint64{}
		for _, e := range theirs.MemoryBreakdown() {
			if e.Compute > 1 {
				th[lib.BuftName(e.BufferType)] += e.Compute
			}
		}
		for _, a := range ours.Memory {
			if a.What == "compute" {
				ou[a.BufferType] += a.Bytes
			}
		}
		if !maps.Equal(ou, th) {
			t.Errorf("%s: compute buffers: ggload %v, llama.cpp %v", what, ou, th)
		}
	}
	apply := func(what string, cv *infer.ControlVector, start, end int32) [][]float32 {
		t.Helper()
		var data []float32
		var n int32
		if cv != nil {
			data, n = cv.Data, int32(cv.NEmbd)
		}
		if err := ours.SetControlVector(cv, start, end); err != nil {
			t.Fatalf("%s: %v", what, err)
		}
		if err := theirs.SetControlVector(data, n, start, end); err != nil {
			t.Fatalf("%s: llama.cpp: %v", what, err)
		}
		return run(what)
	}
	if !all {
		apply("layers 1..n_layer", cv, 1, int32(nLayer))
		compute("layers 1..n_layer")
		return
	}
	plain := run("no control vector")
	every := apply("layers 1..n_layer", cv, 1, int32(nLayer))
	if firstDifference(plain, every, "", "") == "" {
		t.Fatalf("the control vector changed no logit")
	}
	compute("layers 1..n_layer")
	one := apply("layer 2", cv, 2, 2)
	if firstDifference(every, one, "", "") == "" {
		t.Fatalf("the layer range changed no logit")
	}
	cleared := apply("cleared", nil, -1, -1)
	compute("cleared")
	if d := firstDifference(plain, cleared, "before", "cleared"); d != "" {
		t.Fatalf("cleared: the logits are not those without a control vector: %s", d)
	}
	// a shorter vector over the last: the layers it has no direction for
	// keep theirs, as in llama.cpp
	short := &infer.ControlVector{NEmbd: cv.NEmbd, Data: make([]float32, cv.NEmbd)}
	for i := range short.Data {
		short.Data[i] = 0.25
	}
	apply("a shorter vector", short, 1, int32(nLayer))

	// a width unlike the model's: refused by both, the context unchanged
	wide := &infer.ControlVector{NEmbd: cv.NEmbd + 1, Data: make([]float32, cv.NEmbd+1)}
	err = ours.SetControlVector(wide, 1, int32(nLayer))
	if err == nil || !strings.Contains(err.Error(), "n_embd") {
		t.Fatalf("a control vector of width %d on a model of %d: %v", wide.NEmbd, nEmbd, err)
	}
	if err := theirs.SetControlVector(wide.Data, int32(wide.NEmbd), 1, int32(nLayer)); err == nil {
		t.Fatalf("llama.cpp took a control vector of the wrong width")
	}
}

// TestControlVectorFiles holds the loader to common_control_vector_load's
// rules: the scaled sum, and each file it refuses, named with the reason.
func TestControlVectorFiles(t *testing.T) {
	dir := t.TempDir()
	r := rand.New(rand.NewPCG(1, 2))
	p := func(n string) string { return filepath.Join(dir, n) }
	a, b := randomDirs(r, 1, 3, 8, 1), randomDirs(r, 2, 5, 8, 1)
	writeCvec(t, p("a.gguf"), ggml.TypeF32, a)
	writeCvec(t, p("b.gguf"), ggml.TypeF32, b)
	cv, err := infer.LoadControlVectors([]infer.ControlVectorFile{{Path: p("a.gguf"), Scale: 2}, {Path: p("b.gguf"), Scale: -0.5}})
	if err != nil {
		t.Fatal(err)
	}
	if cv.NEmbd != 8 || cv.Layers() != 5 {
		t.Fatalf("width %d over %d layers, want 8 over 5", cv.NEmbd, cv.Layers())
	}
	for il := 1; il <= 5; il++ {
		for j := range 8 {
			var want float32
			if v, ok := a["direction."+strconv.Itoa(il)]; ok {
				want = float32(v[j] * 2)
			}
			if v, ok := b["direction."+strconv.Itoa(il)]; ok {
				want += float32(v[j] * -0.5)
			}
			if got := cv.Data[(il-1)*8+j]; math.Float32bits(got) != math.Float32bits(want) {
				t.Fatalf("layer %d value %d: %v, want %v", il, j, got, want)
			}
		}
	}
	// a layer number is read as std::stoi reads it: blanks and a sign
	// before the digits, anything after them
	odd := map[string][]float32{"direction. 3": make([]float32, 8), "direction.+2.weight": make([]float32, 8)}
	odd["direction. 3"][0], odd["direction.+2.weight"][1] = 3, 2
	writeCvec(t, p("odd.gguf"), ggml.TypeF32, odd)
	cv, err = infer.LoadControlVectors([]infer.ControlVectorFile{{Path: p("odd.gguf"), Scale: 1}})
	if err != nil {
		t.Fatal(err)
	}
	if cv.Layers() != 3 || cv.Data[16] != 3 || cv.Data[9] != 2 {
		t.Fatalf("direction. 3 and direction.+2.weight: %d layers, %v", cv.Layers(), cv.Data)
	}
	// bad input: each refused, the error naming the file and the reason
	writeCvec(t, p("f16.gguf"), ggml.TypeF16, map[string][]float32{"direction.1": make([]float32, 8)})
	writeCvec(t, p("none.gguf"), ggml.TypeF32, nil)
	writeCvec(t, p("zero.gguf"), ggml.TypeF32, map[string][]float32{"direction.0": make([]float32, 8)})
	writeCvec(t, p("name.gguf"), ggml.TypeF32, map[string][]float32{"blk.1.weight": make([]float32, 8)})
	writeCvec(t, p("neg.gguf"), ggml.TypeF32, map[string][]float32{"direction.-1": make([]float32, 8)})
	writeCvec(t, p("mixed.gguf"), ggml.TypeF32, map[string][]float32{"direction.1": make([]float32, 8), "direction.2": make([]float32, 9)})
	writeCvec(t, p("wide.gguf"), ggml.TypeF32, map[string][]float32{"direction.1": make([]float32, 9)})
	for _, c := range []struct {
		files []string
		bad   string
		why   string
	}{
		{[]string{"f16.gguf"}, "f16.gguf", "non-F32"},
		{[]string{"none.gguf"}, "none.gguf", "no direction tensors"},
		{[]string{"zero.gguf"}, "zero.gguf", "zero"},
		{[]string{"name.gguf"}, "name.gguf", "unparsable"},
		{[]string{"neg.gguf"}, "neg.gguf", "unparsable"},
		{[]string{"mixed.gguf"}, "mixed.gguf", "does not match previous dimensions"},
		{[]string{"a.gguf", "wide.gguf"}, "wide.gguf", "do not match"},
		{[]string{"a.gguf", "missing.gguf"}, "missing.gguf", "failed to load"},
		{nil, "", "no valid control vector files"},
	} {
		var fs []infer.ControlVectorFile
		for _, f := range c.files {
			fs = append(fs, infer.ControlVectorFile{Path: p(f), Scale: 1})
		}
		_, err := infer.LoadControlVectors(fs)
		if err == nil || !strings.Contains(err.Error(), c.bad) || !strings.Contains(err.Error(), c.why) {
			t.Errorf("%v: %v, want an error naming %q: %q", c.files, err, c.bad, c.why)
		}
	}
}

// someArchFiles are archFiles' synthesized models of the named
// architectures: those archFiles made already in this process, else
// these alone, in the same cache.
func someArchFiles(t *testing.T, rt *ggml.Runtime, names ...string) []synth.ArchFile {
	t.Helper()
	archFilesMu.Lock()
	fs, ok := archFilesDone[0]
	archFilesMu.Unlock()
	if ok {
		return fs
	}
	cache, err := os.UserCacheDir()
	if err != nil {
		cache = os.TempDir()
	}
	o := synth.ArchOptions{Graph: rt.Ops(), Only: func(a string) bool { return slices.Contains(names, a) }}
	fs, err = synth.ArchFiles(filepath.Join(cache, "ggload", "archs", arch.Pin), testenv.SourceTree(t), o)
	if err != nil {
		t.Fatal(err)
	}
	return fs
}
