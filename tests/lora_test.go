package tests

import (
	"context"
	"encoding/binary"
	"errors"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/ggload/ggload/ggml"
	"github.com/ggload/ggload/gguf"
	"github.com/ggload/ggload/infer"
	"github.com/ggload/ggload/internal/replay/arch"
	"github.com/ggload/ggload/lab/llama"
	"github.com/ggload/ggload/lab/synth"
	"github.com/ggload/ggload/lab/testenv"
	"github.com/ggload/ggload/loader"
	"github.com/ggload/ggload/place"
)

// LoRA adapters against libllama's: synthesized adapters for a dense, a
// MoE and a hybrid model, placed by ggload and by llama_adapter_lora_init
// (every pair's buffer type, every buffer's name and size), refused for
// the same reasons.
//
//	go test -run 'TestLoRA' -v ./tests

// loraSpec says which model tensors an adapter adapts and how.
type loraSpec struct {
	rank   int64
	alpha  float32 // 0: no adapter.lora.alpha
	tokens []uint32
	pick   func(name string) bool
	typ    ggml.Type // of lora_a and lora_b (f32 or f16)
	seed   uint64
	// edit, if set, changes the file before it is written (bad input)
	edit func(w *gguf.Writer, m *gguf.Model)
}

// loraMatrices picks the matrices llama.cpp adapts through build_lora_mm
// (and _id): attention, FFN, the experts', the token embedding.
func loraMatrices(name string) bool {
	for _, s := range []string{"attn_q.weight", "attn_k.weight", "attn_v.weight", "attn_output.weight", "attn_qkv.weight",
		"ffn_up.weight", "ffn_gate.weight", "ffn_down.weight",
		"ffn_up_exps.weight", "ffn_gate_exps.weight", "ffn_down_exps.weight",
		"ffn_up_shexp.weight", "ffn_gate_shexp.weight", "ffn_down_shexp.weight",
		"in_proj.weight", "out_proj.weight", "token_embd.weight", "output.weight"} {
		if strings.HasSuffix(name, s) {
			return true
		}
	}
	return false
}

// writeLoRA writes an adapter for the model at modelPath into dir.
func writeLoRA(t *testing.T, modelPath, dir, name string, s loraSpec) string {
	t.Helper()
	m := testenv.OpenModel(t, modelPath)
	w := gguf.NewWriter()
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	must(w.Set("general.type", gguf.String("adapter")))
	must(w.Set(gguf.KeyArchitecture, gguf.String(m.Architecture())))
	must(w.Set("adapter.type", gguf.String("lora")))
	if s.alpha != 0 {
		must(w.Set("adapter.lora.alpha", gguf.Float32(s.alpha)))
	}
	if s.tokens != nil {
		v, err := gguf.Array(s.tokens)
		must(err)
		must(w.Set("adapter.alora.invocation_tokens", v))
	}
	if s.typ == 0 {
		s.typ = ggml.TypeF32
	}
	rng := rand.New(rand.NewPCG(s.seed, 77))
	data := func(n int64) []byte {
		if s.typ == ggml.TypeF16 {
			out := make([]byte, 2*n)
			for i := range n {
				binary.LittleEndian.PutUint16(out[2*i:], f16bits(float32(rng.Float64()-0.5)*0.2))
			}
			return out
		}
		out := make([]byte, 4*n)
		for i := range n {
			binary.LittleEndian.PutUint32(out[4*i:], math.Float32bits(float32(rng.Float64()-0.5)*0.2))
		}
		return out
	}
	pick := s.pick
	if pick == nil {
		pick = loraMatrices
	}
	r := s.rank
	_, untied := m.Weight("output.weight")
	for _, wt := range m.Weights {
		if !pick(wt.Name) || wt.Shape[1] <= 1 {
			continue
		}
		if wt.Name == "token_embd.weight" && !untied {
			// a tied output reads the token embedding's pair as an
			// output's, which does not fit (llama.cpp aborts on it)
			continue
		}
		ne := wt.Shape
		var a, b []int64
		switch {
		case strings.HasSuffix(wt.Name, "token_embd.weight"):
			a, b = []int64{r, ne[1]}, []int64{r, ne[0]}
		case ne[2] > 1: // experts: one pair per expert
			a, b = []int64{ne[0], r, ne[2]}, []int64{r, ne[1], ne[2]}
		default:
			a, b = []int64{ne[0], r}, []int64{r, ne[1]}
		}
		base := strings.TrimSuffix(wt.Name, ".weight") + ".weight"
		must(w.AddTensorBytes(base+".lora_a", s.typ, a, data(prod(a))))
		must(w.AddTensorBytes(base+".lora_b", s.typ, b, data(prod(b))))
	}
	if s.edit != nil {
		s.edit(w, m)
	}
	path := filepath.Join(dir, name+".gguf")
	must(w.WriteFile(path))
	return path
}

func prod(ne []int64) int64 {
	n := int64(1)
	for _, x := range ne {
		n *= x
	}
	return n
}

// f16bits rounds x to the nearest half (no subnormals needed here).
func f16bits(x float32) uint16 {
	b := math.Float32bits(x)
	sign := uint16(b>>16) & 0x8000
	exp := int((b>>23)&0xff) - 127 + 15
	mant := b & 0x7fffff
	if exp <= 0 {
		return sign
	}
	h := sign | uint16(exp)<<10 | uint16(mant>>13)
	if mant&0x1000 != 0 {
		h++
	}
	return h
}

// loraModelSet is the dense, MoE and hybrid models of a test.
type loraModelSet struct{ dense, moe, hybrid string }

// loraModels writes the dense, MoE and hybrid (jamba) models into the
// test's temporary directory.
func loraModels(t *testing.T, rt *ggml.Runtime) loraModelSet {
	t.Helper()
	dir := t.TempDir()
	var s loraModelSet
	var err error
	if s.dense, err = (synth.Spec{Layers: 2, Embd: 128, FF: 256, Heads: 4, HeadsKV: 2, Vocab: 300, Distinct: true, Seed: 11,
		Weights: ggml.TypeQ4_0, Embeddings: ggml.TypeQ8_0}).Write(rt, filepath.Join(dir, "dense.gguf")); err != nil {
		t.Fatal(err)
	}
	if s.moe, err = (synth.Spec{Layers: 2, Embd: 128, FF: 128, Heads: 4, HeadsKV: 2, Vocab: 300, Distinct: true, Seed: 12,
		Experts: 4, ExpertsUsed: 2, Weights: ggml.TypeF16}).Write(rt, filepath.Join(dir, "moe.gguf")); err != nil {
		t.Fatal(err)
	}
	cache, err := os.UserCacheDir()
	if err != nil {
		cache = os.TempDir()
	}
	files, err := synth.ArchFiles(filepath.Join(cache, "ggload", "archs", arch.Pin), testenv.SourceTree(t), synth.ArchOptions{
		Graph: rt.Ops(), Only: func(a string) bool { return a == "jamba" }})
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range files {
		if f.Name == "jamba" {
			s.hybrid = filepath.Join(dir, "hybrid.gguf")
			if err := synth.FillFile(rt, f.Path, s.hybrid, 1); err != nil {
				t.Fatal(err)
			}
		}
	}
	if s.hybrid == "" {
		t.Fatal("no jamba model")
	}
	return s
}

// loraPlacementLines are the lines both sides write about where the
// adapter's tensors go and the buffers they make.
func loraPlacementLines(lines []string) []string {
	var out []string
	for _, ln := range lines {
		ln = strings.TrimSpace(ln)
		if strings.Contains(ln, "lora for '") || strings.Contains(ln, "LoRA buffer size") || strings.Contains(ln, "tensors from lora file") {
			out = append(out, ln)
		}
	}
	return out
}

func TestLoRAPlacement(t *testing.T) {
	rt := testenv.Runtime(t)
	l := openLlama(t, rt)
	models := loraModels(t, rt)
	gpu := ""
	for _, d := range rt.Devices() {
		if d.Registry().Name() == "Vulkan" && gpu == "" {
			gpu = d.Name()
		}
	}
	if gpu == "" && testenv.Required("vulkan") {
		testenv.Vulkan(t)
	}
	dir := t.TempDir()
	type cfg struct {
		name   string
		params place.Params
	}
	cfgs := []cfg{
		{"cpu", place.Params{DeviceNames: []string{"none"}}},
		{"cpu-no-mmap", place.Params{DeviceNames: []string{"none"}, LoadMode: place.LoadNone}},
	}
	if gpu != "" {
		cfgs = append(cfgs,
			cfg{"ngl0", place.Params{DeviceNames: []string{gpu}, NGPULayers: place.NLayers(0)}},
			cfg{"full", place.Params{DeviceNames: []string{gpu}}},
			cfg{"ngl1", place.Params{DeviceNames: []string{gpu}, NGPULayers: place.NLayers(1)}},
			// read, not mapped: the CPU's weights in the Vulkan host type
			cfg{"ngl1-no-mmap", place.Params{DeviceNames: []string{gpu}, NGPULayers: place.NLayers(1), LoadMode: place.LoadNone}},
			// split mode tensor: the adapter on the meta device, mirrored
			cfg{"sm-tensor", place.Params{DeviceNames: []string{gpu}, SplitMode: place.SplitTensor}},
			cfg{"sm-tensor-rpc-vulkan", place.Params{DeviceNames: []string{"RPC0", gpu}, SplitMode: place.SplitTensor, TensorSplit: []float32{1, 1}}},
		)
		testenv.RPC(t, 1)
	}
	for _, mc := range []struct{ name, path string }{{"dense", models.dense}, {"moe", models.moe}, {"hybrid", models.hybrid}} {
		adapter := writeLoRA(t, mc.path, dir, mc.name, loraSpec{rank: 4, alpha: 8, tokens: []uint32{3, 5, 7}, seed: 1})
		for _, c := range cfgs {
			t.Run(mc.name+"/"+c.name, func(t *testing.T) {
				m := testenv.OpenModel(t, mc.path)
				plan, err := place.New(context.Background(), rt, m, c.params)
				if mc.name == "hybrid" && c.params.SplitMode == place.SplitTensor {
					// llama.cpp refuses the model itself
					if err == nil || !strings.Contains(err.Error(), "LLAMA_SPLIT_MODE_TENSOR not implemented for architecture 'jamba'") {
						t.Fatalf("planned: %v", err)
					}
					return
				}
				if err != nil {
					t.Fatal(err)
				}
				ours, err := plan.PlanLoRA(adapter)
				if err != nil {
					t.Fatal(err)
				}
				ld, err := llama.LoadFor(rt, mc.path, c.params)
				if err != nil {
					t.Fatal(err)
				}
				lm, _, err := l.LoadModel(ld)
				if err != nil {
					t.Fatal(err)
				}
				defer lm.Free()
				theirs, lines, err := lm.LoadLoRA(adapter)
				if err != nil {
					t.Fatal(err)
				}
				defer theirs.Free()
				var want []string
				for _, ln := range lines {
					want = append(want, ln.Text)
				}
				var got []string
				for _, ln := range ours.Log {
					got = append(got, ln.Text)
				}
				g, w := loraPlacementLines(got), loraPlacementLines(want)
				t.Logf("%d pairs, %d lines alike; buffers %v", len(ours.Pairs), len(w), theirs.Buffers())
				if !slices.Equal(g, w) || !slices.ContainsFunc(w, func(s string) bool { return strings.Contains(s, "lora for") }) {
					t.Errorf("lines differ:\nggload:\n  %s\nllama.cpp:\n  %s", strings.Join(g, "\n  "), strings.Join(w, "\n  "))
				}
				var gotBufs []llama.LoRABuffer
				for _, b := range ours.Buffers {
					gotBufs = append(gotBufs, llama.LoRABuffer{Name: b.Name, Size: b.Size})
				}
				if w := theirs.Buffers(); !slices.Equal(gotBufs, w) {
					t.Errorf("buffers: ggload %v, llama.cpp %v", gotBufs, w)
				}
				if got, want := ours.InvocationTokens, theirs.InvocationTokens(); !slices.Equal(got, want) {
					t.Errorf("invocation tokens: ggload %v, llama.cpp %v", got, want)
				}
				if len(ours.Pairs) == 0 {
					t.Error("no pairs")
				}
			})
		}
	}
}

// TestLoRARefused: what llama_adapter_lora_init refuses, ggload refuses
// with an error naming the file and the reason.
func TestLoRARefused(t *testing.T) {
	rt := testenv.Runtime(t)
	l := openLlama(t, rt)
	models := loraModels(t, rt)
	dir := t.TempDir()
	params := place.Params{DeviceNames: []string{"none"}}
	m := testenv.OpenModel(t, models.dense)
	plan, err := place.New(context.Background(), rt, m, params)
	if err != nil {
		t.Fatal(err)
	}
	ld, err := llama.LoadFor(rt, models.dense, params)
	if err != nil {
		t.Fatal(err)
	}
	lm, _, err := l.LoadModel(ld)
	if err != nil {
		t.Fatal(err)
	}
	defer lm.Free()
	set := func(key string, v gguf.Value) func(*gguf.Writer, *gguf.Model) {
		return func(w *gguf.Writer, _ *gguf.Model) {
			if err := w.Set(key, v); err != nil {
				t.Fatal(err)
			}
		}
	}
	add := func(name string, ne ...int64) func(*gguf.Writer, *gguf.Model) {
		return func(w *gguf.Writer, _ *gguf.Model) {
			if err := w.AddTensorBytes(name, ggml.TypeF32, ne, make([]byte, 4*prod(ne))); err != nil {
				t.Fatal(err)
			}
		}
	}
	attnQ := func(n string) bool { return strings.HasSuffix(n, "blk.0.attn_q.weight") }
	for _, c := range []struct {
		name string
		spec loraSpec
		want string
	}{
		{"arch", loraSpec{rank: 2, pick: attnQ, edit: set(gguf.KeyArchitecture, gguf.String("qwen2"))}, "model arch and LoRA arch mismatch"},
		{"general-type", loraSpec{rank: 2, pick: attnQ, edit: set("general.type", gguf.String("model"))}, "expect general.type to be 'adapter', but got: model"},
		{"adapter-type", loraSpec{rank: 2, pick: attnQ, edit: set("adapter.type", gguf.String("cvec"))}, "expect adapter.type to be 'lora', but got: cvec"},
		{"alora-type", loraSpec{rank: 2, pick: attnQ, edit: set("adapter.alora.invocation_tokens", gguf.Uint32(4))}, "invalid gguf type for adapter.alora.invocation_tokens"},
		{"shape", loraSpec{rank: 2, pick: attnQ, edit: add("blk.1.attn_k.weight.lora_a", 7, 2)}, "LoRA tensor pair for 'blk.1.attn_k.weight' is missing one component"},
		{"shape-b", loraSpec{rank: 2, pick: attnQ, edit: func(w *gguf.Writer, m *gguf.Model) {
			add("blk.1.attn_k.weight.lora_a", 128, 2)(w, m)
			add("blk.1.attn_k.weight.lora_b", 2, 5)(w, m)
		}}, "tensor 'blk.1.attn_k.weight' has incorrect shape"},
		{"transposed", loraSpec{rank: 2, pick: attnQ, edit: func(w *gguf.Writer, m *gguf.Model) {
			add("blk.1.attn_k.weight.lora_a", 128, 3)(w, m)
			add("blk.1.attn_k.weight.lora_b", 2, 64)(w, m)
		}}, "lora_a tensor is not transposed"},
		{"missing", loraSpec{rank: 2, pick: attnQ, edit: func(w *gguf.Writer, m *gguf.Model) {
			add("blk.7.attn_q.weight.lora_a", 128, 2)(w, m)
			add("blk.7.attn_q.weight.lora_b", 2, 128)(w, m)
		}}, "LoRA tensor 'blk.7.attn_q.weight' does not exist in base model"},
		{"suffix", loraSpec{rank: 2, pick: attnQ, edit: add("blk.0.attn_q.weight.lora_c", 4)}, "LoRA tensor 'blk.0.attn_q.weight.lora_c' has unexpected suffix"},
	} {
		t.Run(c.name, func(t *testing.T) {
			path := writeLoRA(t, models.dense, dir, c.name, c.spec)
			_, err := plan.PlanLoRA(path)
			if err == nil || !strings.Contains(err.Error(), c.want) || !strings.Contains(err.Error(), path) || !errors.Is(err, place.ErrBadLoRA) {
				t.Errorf("ggload: %v, want an error naming %s and %q", err, path, c.want)
			}
			a, _, lerr := lm.LoadLoRA(path)
			if lerr == nil {
				a.Free()
				t.Fatalf("llama.cpp loads the adapter")
			}
			if !strings.Contains(lerr.Error(), c.want) {
				t.Errorf("llama.cpp: %v, want %q", lerr, c.want)
			}
		})
	}
}

// TestLoRADecode: logits with an adapter applied at scale 1 and at
// another scale, then removed, equal to libllama's bit for bit, for the
// dense, MoE and hybrid models, on the CPU and offloaded to Vulkan0.
func TestLoRADecode(t *testing.T) {
	rt := testenv.Runtime(t)
	l := openLlama(t, rt)
	models := loraModels(t, rt)
	gpu := ""
	for _, d := range rt.Devices() {
		if d.Registry().Name() == "Vulkan" && gpu == "" {
			gpu = d.Name()
		}
	}
	dir := t.TempDir()
	type cfg struct {
		name   string
		params place.Params
		scales []float32 // applied in turn (0: the adapter removed)
	}
	cfgs := []cfg{{"cpu", place.Params{DeviceNames: []string{"none"}}, []float32{1, 0.5, 0}}}
	if gpu != "" {
		// one scale: with the compute buffers reserved again and again,
		// the pin's Vulkan backend on lavapipe corrupts the heap, under
		// libllama as under ggload
		cfgs = append(cfgs, cfg{"full", place.Params{DeviceNames: []string{gpu}}, []float32{0.75}},
			// split mode tensor: an adapter of the token embedding alone
			// (mirrored on every device, as the adapter is); one of split
			// weights llama.cpp aborts on (TestLoRASplitTensorRefused)
			cfg{"sm-tensor-rpc-vulkan", place.Params{DeviceNames: []string{"RPC0", gpu}, SplitMode: place.SplitTensor, TensorSplit: []float32{1, 1}}, []float32{0.75}})
		testenv.RPC(t, 1)
	}
	for _, mc := range []struct{ name, path string }{{"dense", models.dense}, {"moe", models.moe}, {"hybrid", models.hybrid}} {
		adapter := writeLoRA(t, mc.path, dir, mc.name+"-decode", loraSpec{rank: 8, alpha: 16, seed: 3})
		embd := writeLoRA(t, mc.path, dir, mc.name+"-embd", loraSpec{rank: 8, alpha: 16, seed: 3, pick: func(n string) bool { return n == "token_embd.weight" }})
		for _, c := range cfgs {
			adapter := adapter
			if c.params.SplitMode == place.SplitTensor {
				if mc.name == "hybrid" {
					continue // llama.cpp refuses split mode tensor for jamba
				}
				adapter = embd
			}
			t.Run(mc.name+"/"+c.name, func(t *testing.T) {
				ours := loraLogitsOurs(t, rt, mc.path, adapter, c.params, c.scales)
				theirs := loraLogitsTheirs(t, rt, l, mc.path, adapter, c.params, c.scales)
				if d := firstDifference(ours, theirs, "ggload", "llama.cpp"); d != "" {
					t.Fatalf("scales %v: %s", c.scales, d)
				}
				if len(ours) > 2 && firstDifference(ours[:1], ours[2:], "", "") == "" {
					t.Fatal("the adapter changes no logit")
				}
			})
		}
	}
}

// loraContext loads the model at path with params, and the adapters
// beside it (each buffer as planned), and makes a context on it; all are
// closed when the test ends.
func loraContext(t *testing.T, rt *ggml.Runtime, path string, params place.Params, adapters []string) (*infer.Context, []*loader.LoRA) {
	t.Helper()
	m := testenv.OpenModel(t, path)
	plan, err := place.New(context.Background(), rt, m, params)
	if err != nil {
		t.Fatal(err)
	}
	mdl, err := loader.Load(context.Background(), plan, loader.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { mdl.Close() })
	var as []*loader.LoRA
	for _, adapter := range adapters {
		lp, err := plan.PlanLoRA(adapter)
		if err != nil {
			t.Fatal(err)
		}
		a, err := loader.LoadLoRA(context.Background(), mdl, lp)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { a.Close() })
		for i, b := range a.Buffers() {
			if b.Size() != lp.Buffers[i].Size || b.Name() != lp.Buffers[i].Name {
				t.Errorf("buffer %d: %s %d bytes, planned %s %d", i, b.Name(), b.Size(), lp.Buffers[i].Name, lp.Buffers[i].Size)
			}
		}
		as = append(as, a)
	}
	ctx, err := infer.New(mdl, infer.Params{Threads: decodeThreads})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ctx.Close() })
	return ctx, as
}

// TestLoRASplitTensorRefused: under split mode tensor, llama.cpp's meta
// backend aborts the decode of an adapter of a split weight (its
// mirrored product added to the weight's split one, ggml-backend-meta.cpp
// asserts); ggload places and loads it as llama.cpp does, and refuses to
// apply it, naming the adapter and the tensor.
func TestLoRASplitTensorRefused(t *testing.T) {
	rt := testenv.Runtime(t)
	models := loraModels(t, rt)
	gpu := testenv.Vulkan(t).Name()
	for _, c := range []struct{ name, base string }{
		{"output", "output.weight"},           // split along dimension 1
		{"ffn_down", "blk.0.ffn_down.weight"}, // along dimension 0
	} {
		t.Run(c.name, func(t *testing.T) {
			adapter := writeLoRA(t, models.dense, t.TempDir(), c.name, loraSpec{rank: 4, alpha: 4, seed: 2, pick: func(n string) bool { return n == c.base }})
			ctx, as := loraContext(t, rt, models.dense, place.Params{DeviceNames: []string{gpu}, SplitMode: place.SplitTensor}, []string{adapter})
			a := as[0]
			err := ctx.SetLoRAs([]*loader.LoRA{a}, []float32{1})
			if err == nil || !errors.Is(err, errors.ErrUnsupported) || !strings.Contains(err.Error(), adapter) || !strings.Contains(err.Error(), "'"+c.base+"'") {
				t.Fatalf("applied: %v", err)
			}
			t.Log(err)
			// at scale 0 the adapter is not in the graph, as in llama.cpp
			if err := ctx.SetLoRAs([]*loader.LoRA{a}, []float32{0}); err != nil {
				t.Fatal(err)
			}
			if err := ctx.Decode(infer.Batch{Tokens: loraPrompt}); err != nil {
				t.Fatal(err)
			}
		})
	}
}

// loraPrompt is the prompt of TestLoRADecode.
var loraPrompt = []int32{1, 17, 42, 99, 5, 250, 3, 77}

func loraLogitsOurs(t *testing.T, rt *ggml.Runtime, path, adapter string, params place.Params, scales []float32) [][]float32 {
	t.Helper()
	steps := make([][]float32, len(scales))
	for i, s := range scales {
		steps[i] = []float32{s}
	}
	return loraLogitsOursN(t, rt, path, []string{adapter}, params, steps)
}

// loraLogitsOursN applies the adapters with each step's scales in turn,
// decoding the prompt after each (the memory cleared).
func loraLogitsOursN(t *testing.T, rt *ggml.Runtime, path string, adapters []string, params place.Params, steps [][]float32) [][]float32 {
	t.Helper()
	ctx, as := loraContext(t, rt, path, params, adapters)
	var out [][]float32
	for _, sc := range steps {
		if err := ctx.Clear(); err != nil {
			t.Fatal(err)
		}
		if err := ctx.SetLoRAs(as, sc); err != nil {
			t.Fatal(err)
		}
		if err := ctx.Decode(infer.Batch{Tokens: loraPrompt}); err != nil {
			t.Fatal(err)
		}
		lg, err := ctx.Logits(-1)
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, lg)
	}
	return out
}

func loraLogitsTheirs(t *testing.T, rt *ggml.Runtime, l *llama.Lib, path, adapter string, params place.Params, scales []float32) [][]float32 {
	t.Helper()
	steps := make([][]float32, len(scales))
	for i, s := range scales {
		steps[i] = []float32{s}
	}
	return loraLogitsTheirsN(t, rt, l, path, []string{adapter}, params, steps)
}

// loraLogitsTheirsN is loraLogitsOursN with libllama.
func loraLogitsTheirsN(t *testing.T, rt *ggml.Runtime, l *llama.Lib, path string, adapters []string, params place.Params, steps [][]float32) [][]float32 {
	t.Helper()
	lm, ctx, err := l.OpenContext(rt, path, params, decodeThreads)
	if err != nil {
		t.Fatal(err)
	}
	defer lm.Free()
	defer ctx.Free()
	var as []*llama.LoRA
	for _, adapter := range adapters {
		a, _, err := lm.LoadLoRA(adapter)
		if err != nil {
			t.Fatal(err)
		}
		defer a.Free()
		as = append(as, a)
	}
	nVocab, err := lm.NVocab()
	if err != nil {
		t.Fatal(err)
	}
	var out [][]float32
	for _, sc := range steps {
		if err := ctx.Clear(); err != nil {
			t.Fatal(err)
		}
		if err := ctx.SetLoRAs(as, sc); err != nil {
			t.Fatal(err)
		}
		if err := ctx.Decode(loraPrompt, nil, nil, nil); err != nil {
			t.Fatal(err)
		}
		lg, err := ctx.Logits(-1, nVocab)
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, lg)
	}
	return out
}

// TestLoRALoad: the adapter's tensors hold the file's bytes (read back
// from each buffer, Vulkan0's included), its buffers are freed on Close,
// and a load that fails (a file cut short after planning) frees what it
// made and names the file and the tensor.
func TestLoRALoad(t *testing.T) {
	rt := testenv.Runtime(t)
	models := loraModels(t, rt)
	dir := t.TempDir()
	adapter := writeLoRA(t, models.moe, dir, "load", loraSpec{rank: 4, alpha: 4, seed: 5, typ: ggml.TypeF16})
	params := place.Params{DeviceNames: []string{"none"}}
	for _, d := range rt.Devices() {
		if d.Registry().Name() == "Vulkan" {
			params = place.Params{DeviceNames: []string{d.Name()}, NGPULayers: place.NLayers(1)}
			break
		}
	}
	m := testenv.OpenModel(t, models.moe)
	plan, err := place.New(context.Background(), rt, m, params)
	if err != nil {
		t.Fatal(err)
	}
	lp, err := plan.PlanLoRA(adapter)
	if err != nil {
		t.Fatal(err)
	}
	mdl, err := loader.Load(context.Background(), plan, loader.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer mdl.Close()
	f, err := gguf.Open(adapter)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	live := ggml.LiveBuffers()
	a, err := loader.LoadLoRA(context.Background(), mdl, lp)
	if err != nil {
		t.Fatal(err)
	}
	if n := ggml.LiveBuffers() - live; n != int64(len(lp.Buffers)) {
		t.Errorf("%d buffers made, planned %d", n, len(lp.Buffers))
	}
	for _, pr := range lp.Pairs {
		ta, tb, ok := a.Weight(pr.Base)
		if !ok {
			t.Fatalf("no pair for %s", pr.Base)
		}
		for _, x := range []struct {
			t    *ggml.Tensor
			name string
		}{{ta, pr.A.Name}, {tb, pr.B.Name}} {
			got, err := x.t.Bytes()
			if err != nil {
				t.Fatal(err)
			}
			ti, _ := f.Tensor(x.name)
			want := make([]byte, ti.Size)
			if _, err := f.Data(ti).ReadAt(want, 0); err != nil {
				t.Fatal(err)
			}
			if !slices.Equal(got, want) {
				t.Fatalf("%s: the buffer's bytes are not the file's", x.name)
			}
		}
	}
	a.Close()
	if n := ggml.LiveBuffers(); n != live {
		t.Errorf("%d buffers live after Close, %d before the load", n, live)
	}
	if _, _, ok := a.Weight(lp.Pairs[0].Base); ok {
		t.Error("a closed adapter still gives its tensors")
	}

	// the file cut short after planning
	cut := filepath.Join(dir, "cut.gguf")
	b, err := os.ReadFile(adapter)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(cut, b[:len(b)-64], 0o644); err != nil {
		t.Fatal(err)
	}
	lpCut := *lp
	lpCut.Path = cut
	_, err = loader.LoadLoRA(context.Background(), mdl, &lpCut)
	if err == nil || !strings.Contains(err.Error(), cut) || !strings.Contains(err.Error(), "not within the file bounds") {
		t.Errorf("a file cut short: %v", err)
	}
	if n := ggml.LiveBuffers(); n != live {
		t.Errorf("%d buffers live after a failed load, %d before", n, live)
	}
}

// TestLoRADecodeTwo: two adapters on the same tensors, applied together
// (either order of the arguments), then one of them alone: the logits are
// libllama's bit for bit.
func TestLoRADecodeTwo(t *testing.T) {
	rt := testenv.Runtime(t)
	l := openLlama(t, rt)
	path := testenv.ModelFile(t, rt, synth.Spec{Layers: 2, Embd: 128, FF: 256, Heads: 4, HeadsKV: 2, Vocab: 300, Distinct: true, Seed: 21, Weights: ggml.TypeF16})
	dir := t.TempDir()
	a := writeLoRA(t, path, dir, "a", loraSpec{rank: 4, alpha: 8, seed: 6})
	b := writeLoRA(t, path, dir, "b", loraSpec{rank: 8, seed: 7, typ: ggml.TypeF16})
	params := place.Params{DeviceNames: []string{"none"}}
	steps := [][]float32{{1, 0.5}, {0.5, 1}, {0, 1}, {0.25, 0}}
	for _, order := range [][]string{{a, b}, {b, a}} {
		ours := loraLogitsOursN(t, rt, path, order, params, steps)
		theirs := loraLogitsTheirsN(t, rt, l, path, order, params, steps)
		if d := firstDifference(ours, theirs, "ggload", "llama.cpp"); d != "" {
			t.Fatalf("adapters %v, scales %v: %s", order, steps, d)
		}
	}
}
