package graph_test

import (
	"context"
	"encoding/binary"
	"math/rand/v2"
	"strings"

	"math"
	"path/filepath"
	"slices"
	"testing"

	"github.com/ggload/ggload/ggml"
	"github.com/ggload/ggload/ggml/ops"

	"github.com/ggload/ggload/gguf"
	"github.com/ggload/ggload/infer"
	"github.com/ggload/ggload/internal/replay/arch"
	"github.com/ggload/ggload/internal/replay/graph"
	"github.com/ggload/ggload/internal/synthmodel"
	"github.com/ggload/ggload/lab/synth"
	"github.com/ggload/ggload/lab/testenv"
	"github.com/ggload/ggload/loader"
	"github.com/ggload/ggload/place"
)

// Running the graphs. Package infer drives a graph.Context for every
// ubatch (build or reuse, allocate, set the inputs, compute, read the
// result, the K-shift); these tests run it on the CPU backend and hold
// what it computes to properties llama.cpp's graphs have by construction,
// without libllama: a sequence's logits are its own (whatever else shares
// the batch, the cache or the graph), a reused graph computes what a new
// one does, and a shifted cache is the cache of the shifted positions.
// (tests/decode_test.go holds the same runs to libllama bit for bit.)

// loaded is the model at path, its weights on the CPU, planned with a
// context of cp.
func loaded(t *testing.T, path string, cp place.ContextParams) *loader.Model {
	t.Helper()
	return loadedWith(t, path, place.Params{DeviceNames: []string{"none"}, Context: cp})
}

// loadedWith is the model at path, planned with params.
func loadedWith(t *testing.T, path string, params place.Params) *loader.Model {
	t.Helper()
	rt := testenv.Runtime(t)
	m, err := gguf.OpenModel(path)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { m.Close() })
	plan, err := place.New(context.Background(), rt, m, params)
	if err != nil {
		t.Fatal(err)
	}
	lm, err := loader.Load(context.Background(), plan, loader.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { lm.Close() })
	return lm
}

// newCtx is a context on lm.
func newCtx(t *testing.T, lm *loader.Model) *infer.Context {
	t.Helper()
	c, err := infer.New(lm, infer.Params{Threads: 2})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// runCtx is a context on the model at path, its weights and context on
// the CPU.
func runCtx(t *testing.T, path string, cp place.ContextParams) *infer.Context {
	t.Helper()
	return newCtx(t, loaded(t, path, cp))
}

func demoPath(t *testing.T) string {
	t.Helper()
	path, err := synthmodel.DemoModel(testenv.Runtime(t))
	if err != nil {
		t.Fatal(err)
	}
	return path
}

// logits are the logits of batch row i, copied.
func logits(t *testing.T, c *infer.Context, i int) []float32 {
	t.Helper()
	l, err := c.Logits(i)
	if err != nil {
		t.Fatal(err)
	}
	return slices.Clone(l)
}

func decode(t *testing.T, c *infer.Context, b infer.Batch) {
	t.Helper()
	if err := c.Decode(b); err != nil {
		t.Fatal(err)
	}
}

// maxDiff is the largest difference of two rows, relative to the largest
// magnitude of a.
func maxDiff(a, b []float32) float64 {
	var d, m float64
	for i := range a {
		d = max(d, math.Abs(float64(a[i]-b[i])))
		m = max(m, math.Abs(float64(a[i])))
	}
	return d / m
}

// sequences is a batch of the prompts, the i-th in sequence i from
// position 0, each its last token's logits out.
func sequences(prompts ...[]int32) infer.Batch {
	var b infer.Batch
	for s, p := range prompts {
		for i, tok := range p {
			b.Tokens = append(b.Tokens, tok)
			b.Pos = append(b.Pos, int32(i))
			b.SeqIDs = append(b.SeqIDs, []int32{int32(s)})
			b.Logits = append(b.Logits, i == len(p)-1)
		}
	}
	return b
}

var prompt = []int32{1, 17, 402, 33, 1800, 5, 977, 64}

// Two sequences with the same prompt in one batch get the same logits, bit
// for bit, as one with a prompt of its own does not; so do their next
// tokens, decoded together. The mask keeps each sequence to its own cells.
func TestRunSequencesAreTheirOwn(t *testing.T) {
	path := demoPath(t)
	for _, unified := range []bool{false, true} {
		c := runCtx(t, path, place.ContextParams{NCtx: 256, NParallel: 3, KVUnified: unified})
		other := slices.Clone(prompt)
		other[2] = 9
		decode(t, c, sequences(prompt, prompt, other))
		l0, l1, l2 := logits(t, c, len(prompt)-1), logits(t, c, 2*len(prompt)-1), logits(t, c, 3*len(prompt)-1)
		if !slices.Equal(l0, l1) {
			t.Fatalf("kvu %v: sequences 0 and 1 of one prompt: logits differ by %g", unified, maxDiff(l0, l1))
		}
		if slices.Equal(l0, l2) {
			t.Fatalf("kvu %v: a sequence of another prompt has the same logits", unified)
		}
		next := int32(infer.Argmax(l0))
		decode(t, c, infer.Batch{Tokens: []int32{next, next}, SeqIDs: [][]int32{{0}, {1}}, Logits: []bool{true, true}})
		if a, b := logits(t, c, 0), logits(t, c, 1); !slices.Equal(a, b) {
			t.Errorf("kvu %v: the next token of sequences 0 and 1: logits differ by %g", unified, maxDiff(a, b))
		}
	}
}

// A generation's logits are the same, bit for bit, with graph reuse (the
// graph of the step before, or the one kept from before that, taken
// again) and with every graph built anew.
func TestRunReusedGraphsComputeTheSame(t *testing.T) {
	path := demoPath(t)
	generate := func() ([][]float32, infer.Timings) {
		c := runCtx(t, path, place.ContextParams{NCtx: 256})
		var out [][]float32
		toks := prompt
		for range 5 {
			decode(t, c, infer.Batch{Tokens: toks})
			l := logits(t, c, -1)
			out = append(out, l)
			toks = []int32{int32(infer.Argmax(l))}
		}
		// a second prompt of the first's shape after the steps: the
		// graph kept from before them, allocated again
		other := slices.Clone(prompt)
		slices.Reverse(other)
		decode(t, c, infer.Batch{Tokens: other})
		out = append(out, logits(t, c, -1))
		return out, c.Timings()
	}
	reused, rt := generate()
	t.Setenv("LLAMA_GRAPH_REUSE_DISABLE", "1")
	built, bt := generate()
	if rt.Reused == 0 || rt.Kept == 0 || bt.Reused != 0 || bt.Kept != 0 || bt.Graphs <= rt.Graphs {
		t.Fatalf("graphs %+v with reuse, %+v without", rt, bt)
	}
	for i := range reused {
		if !slices.Equal(reused[i], built[i]) {
			t.Errorf("step %d: logits with graph reuse differ from those of a new graph by %g", i, maxDiff(reused[i], built[i]))
		}
	}
}

// A sequence copied (seq_cp) continues as its source does, bit for bit;
// one cut back (seq_rm) and given its last tokens again computes, bit for
// bit, what a context that decoded the prompt in those two batches does.
// (The demo's random weights make the rounding of a ubatch of another
// size show: 8 tokens at once and 5 then 3 differ by about 2% of the
// largest logit, which is why the comparison is with the same split.)
func TestRunCopyAndRemove(t *testing.T) {
	path := demoPath(t)
	c := runCtx(t, path, place.ContextParams{NCtx: 256, NParallel: 2})
	decode(t, c, infer.Batch{Tokens: prompt})
	first := logits(t, c, -1)
	if err := c.SeqCp(0, 1, -1, -1); err != nil {
		t.Fatal(err)
	}
	next := int32(infer.Argmax(first))
	decode(t, c, infer.Batch{Tokens: []int32{next, next}, SeqIDs: [][]int32{{0}, {1}}, Logits: []bool{true, true}})
	a, b := logits(t, c, 0), logits(t, c, 1)
	if !slices.Equal(a, b) {
		t.Fatalf("a copied sequence's next logits differ from its source's by %g", maxDiff(a, b))
	}
	if slices.Equal(a, first) {
		t.Fatal("the next token's logits are the prompt's")
	}
	// sequence 1 cut back to 5 tokens, then given the prompt's last 3 again
	if err := c.SeqRm(1, 5, -1); err != nil {
		t.Fatal(err)
	}
	if p := c.SeqPosMax(1); p != 4 {
		t.Fatalf("after seq_rm: position %d", p)
	}
	decode(t, c, infer.Batch{Tokens: prompt[5:], SeqIDs: [][]int32{{1}, {1}, {1}}})
	again := logits(t, c, -1)
	split := runCtx(t, path, place.ContextParams{NCtx: 256})
	decode(t, split, infer.Batch{Tokens: prompt[:5]})
	decode(t, split, infer.Batch{Tokens: prompt[5:]})
	if want := logits(t, split, -1); !slices.Equal(again, want) {
		t.Errorf("the prompt's end decoded again after seq_rm differs by %g from a context that decoded it so", maxDiff(want, again))
	}
}

// The K-shift: a cache whose positions moved by 40 (seq_add, rotated by
// the shift graph at the next decode) attends from position 48 as the
// unmoved cache does from 8, since rotary position embeddings see
// distances alone; the two differ by rounding only (the keys rotated
// twice, in f16), half or less of what a cache of other distances
// (half of it moved) gives.
func TestRunShift(t *testing.T) {
	// the demo's weights without its vocabulary, whose output layer's
	// lean to whole words would swamp the distances compared
	spec := synthmodel.Demo
	spec.Tokenizer = nil
	path, err := spec.Write(testenv.Runtime(t), filepath.Join(t.TempDir(), "demo-novocab.gguf"))
	if err != nil {
		t.Fatal(err)
	}
	const d = 40
	next := int32(5)
	run := func(shift func(c *infer.Context) error) ([]float32, *infer.Context) {
		c := runCtx(t, path, place.ContextParams{NCtx: 256})
		decode(t, c, infer.Batch{Tokens: prompt})
		if shift != nil {
			if !c.CanShift() {
				t.Fatal("the demo's cache cannot shift")
			}
			if err := shift(c); err != nil {
				t.Fatal(err)
			}
		}
		decode(t, c, infer.Batch{Tokens: []int32{next}})
		return logits(t, c, -1), c
	}
	natural, _ := run(nil)
	shifted, c := run(func(c *infer.Context) error { return c.SeqAdd(0, 0, -1, d) })
	if p := c.SeqPosMax(0); p != d+int32(len(prompt)) {
		t.Fatalf("after the shift: position %d", p)
	}
	part, _ := run(func(c *infer.Context) error { return c.SeqAdd(0, 0, 4, d) })
	diff, ctl := maxDiff(natural, shifted), maxDiff(natural, part)
	t.Logf("shifted against unmoved: %g; half of it moved: %g", diff, ctl)
	if diff == 0 || diff > ctl/2 {
		t.Errorf("the shifted cache's logits differ by %g from the unmoved cache's (half moved: %g)", diff, ctl)
	}
}

// A model without memory (BERT's encoder) encodes each batch whole: its
// embeddings per sequence are each sequence's alone, and a token's
// embeddings do not depend on the batch it came in.
func TestRunEncoder(t *testing.T) {
	rt := testenv.Runtime(t)
	src := testenv.SourceTree(t)
	files, err := synth.ArchFiles(t.TempDir(), src, synth.ArchOptions{Graph: rt.Ops(), Only: func(a string) bool { return a == "bert" }})
	if err != nil {
		t.Fatal(err)
	}
	var raw string
	for _, f := range files {
		if f.Arch == "bert" && f.Types == synth.ConverterTypes && f.Err == nil {
			raw = f.Path
		}
	}
	if raw == "" {
		t.Fatalf("no bert model: %+v", files)
	}
	path := filepath.Join(t.TempDir(), "bert.gguf")
	if err := synth.FillFile(rt, raw, path, 1); err != nil {
		t.Fatal(err)
	}
	c := runCtx(t, path, place.ContextParams{NCtx: 128, NParallel: 2, Embeddings: true, Pooling: place.PoolingMean})
	toks := []int32{2, 11, 12, 13, 3}
	var b infer.Batch
	for s := range 2 {
		for i, tok := range toks {
			if s == 1 && i == 2 {
				tok = 14
			}
			b.Tokens = append(b.Tokens, tok)
			b.Pos = append(b.Pos, int32(i))
			b.SeqIDs = append(b.SeqIDs, []int32{int32(s)})
		}
	}
	decode(t, c, b)
	e0, err := c.Embeddings(0)
	if err != nil {
		t.Fatal(err)
	}
	e0 = slices.Clone(e0)
	e1, err := c.Embeddings(1)
	if err != nil {
		t.Fatal(err)
	}
	if slices.Equal(e0, e1) {
		t.Fatal("two sequences of different tokens pooled to the same embeddings")
	}
	// sequence 0 alone
	decode(t, c, infer.Batch{Tokens: toks})
	alone, err := c.Embeddings(0)
	if err != nil {
		t.Fatal(err)
	}
	if d := maxDiff(e0, alone); d > 1e-4 {
		t.Errorf("sequence 0 encoded beside another and alone: embeddings differ by %g", d)
	}
}

// archModels writes the pin's architectures names as synthesized models
// (lab/synth, mended until their graphs build) with pseudo-random weights.
func archModels(t *testing.T, names ...string) map[string]string {
	t.Helper()
	rt := testenv.Runtime(t)
	dir := t.TempDir()
	files, err := synth.ArchFiles(dir, testenv.SourceTree(t), synth.ArchOptions{Graph: rt.Ops(), Only: func(a string) bool { return slices.Contains(names, a) }})
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]string{}
	for _, f := range files {
		if f.Types != synth.ConverterTypes || f.Err != nil {
			continue
		}
		path := filepath.Join(dir, f.Arch+"-filled.gguf")
		if err := synth.FillFile(rt, f.Path, path, 1); err != nil {
			t.Fatal(err)
		}
		out[f.Arch] = path
	}
	for _, n := range names {
		if out[n] == "" {
			t.Fatalf("no model of %s: %+v", n, files)
		}
	}
	return out
}

// Every memory module keeps each sequence to its own: two sequences of one
// prompt decoded in one batch get the same logits, bit for bit, and their
// next tokens too; a third of another prompt does not. The architectures
// are one of each module the pin has besides the demo's KV cache: iSWA
// (gemma2), DSA (deepseek32), DSA with iSWA (dots3note), DeepSeek-V4's
// (deepseek4), MSA (minimax-m3), the hybrid (lfm2) and its iSWA variant,
// the indexed hybrid (qwen4exp) and the recurrent state (mamba, rwkv6).
func TestRunMemories(t *testing.T) {
	names := []string{"gemma2", "deepseek32", "dots3note", "deepseek4", "minimax-m3", "lfm2", "qwen4exp", "mamba", "rwkv6"}
	paths := archModels(t, names...)
	// no architecture's defaults make the hybrid of an iSWA cache and a
	// recurrent state: LFM2's with a sliding window does
	rt := testenv.Runtime(t)
	vf, err := synth.Vocab(64)
	if err != nil {
		t.Fatal(err)
	}
	am, err := synth.NewArchModel("lfm2", vf, synth.ArchOptions{Graph: rt.Ops()})
	if err != nil {
		t.Fatal(err)
	}
	am.KV = append(am.KV, gguf.KV{Key: "lfm2.attention.sliding_window", Value: gguf.Uint32(64)})
	raw := filepath.Join(t.TempDir(), "lfm2-swa.gguf")
	if err := am.WriteFile(raw); err != nil {
		t.Fatal(err)
	}
	paths["lfm2-swa"] = filepath.Join(t.TempDir(), "lfm2-swa-filled.gguf")
	if err := synth.FillFile(rt, raw, paths["lfm2-swa"], 1); err != nil {
		t.Fatal(err)
	}
	names = append(names, "lfm2-swa")
	toks := []int32{1, 5, 9, 14, 3, 7}
	for _, a := range names {
		t.Run(a, func(t *testing.T) {
			c := runCtx(t, paths[a], place.ContextParams{NCtx: 256, NParallel: 3})
			other := slices.Clone(toks)
			other[1] = 11
			decode(t, c, sequences(toks, toks, other))
			n := len(toks)
			l0, l1, l2 := logits(t, c, n-1), logits(t, c, 2*n-1), logits(t, c, 3*n-1)
			if !slices.Equal(l0, l1) {
				t.Fatalf("sequences 0 and 1 of one prompt: logits differ by %g", maxDiff(l0, l1))
			}
			if slices.Equal(l0, l2) {
				t.Fatal("a sequence of another prompt has the same logits")
			}
			next := int32(infer.Argmax(l0))
			decode(t, c, infer.Batch{Tokens: []int32{next, next, next}, SeqIDs: [][]int32{{0}, {1}, {2}}, Logits: []bool{true, true, true}})
			if x, y, z := logits(t, c, 0), logits(t, c, 1), logits(t, c, 2); !slices.Equal(x, y) || slices.Equal(x, z) {
				t.Errorf("the next token: sequences 0 and 1 differ by %g; 0 and 2 by %g", maxDiff(x, y), maxDiff(x, z))
			}
		})
	}
}

// writeLoRA writes an adapter of rank 4 for the attention and FFN
// matrices of the model at modelPath: lora_a pseudo-random, lora_b zero
// or pseudo-random.
func writeLoRA(t *testing.T, modelPath string, zeroB bool) string {
	t.Helper()
	m, err := gguf.OpenModel(modelPath)
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	w := gguf.NewWriter()
	for _, kv := range []struct {
		k string
		v gguf.Value
	}{{"general.type", gguf.String("adapter")}, {gguf.KeyArchitecture, gguf.String(m.Architecture())},
		{"adapter.type", gguf.String("lora")}, {"adapter.lora.alpha", gguf.Float32(8)}} {
		if err := w.Set(kv.k, kv.v); err != nil {
			t.Fatal(err)
		}
	}
	rng := rand.New(rand.NewPCG(5, 9))
	data := func(n int64, zero bool) []byte {
		out := make([]byte, 4*n)
		for i := range n {
			if !zero {
				binary.LittleEndian.PutUint32(out[4*i:], math.Float32bits(float32(rng.Float64()-0.5)*0.2))
			}
		}
		return out
	}
	const r = 4
	for _, wt := range m.Weights {
		if !strings.Contains(wt.Name, ".attn_") && !strings.Contains(wt.Name, ".ffn_") || wt.Shape[1] <= 1 {
			continue
		}
		ne := wt.Shape
		if err := w.AddTensorBytes(wt.Name+".lora_a", ggml.TypeF32, []int64{ne[0], r}, data(ne[0]*r, false)); err != nil {
			t.Fatal(err)
		}
		if err := w.AddTensorBytes(wt.Name+".lora_b", ggml.TypeF32, []int64{r, ne[1]}, data(r*ne[1], zeroB)); err != nil {
			t.Fatal(err)
		}
	}
	path := filepath.Join(t.TempDir(), "lora.gguf")
	if err := w.WriteFile(path); err != nil {
		t.Fatal(err)
	}
	return path
}

// Adapters change the graphs, and what they add is what the graphs
// compute: a control vector of zeros, or a LoRA adapter whose lora_b is
// zero, leaves the logits as they were, bit for bit, as removing an
// adapter does; a control vector or an adapter of other values changes
// them. Each change makes the context reserve and build its graphs anew.
func TestRunAdapters(t *testing.T) {
	path := demoPath(t)
	lm := loaded(t, path, place.ContextParams{NCtx: 256})
	c := newCtx(t, lm)
	step := func() []float32 {
		t.Helper()
		if err := c.SeqRm(-1, -1, -1); err != nil {
			t.Fatal(err)
		}
		decode(t, c, infer.Batch{Tokens: prompt})
		return logits(t, c, -1)
	}
	base := step()

	nEmbd := 512
	nLayer := 8
	zero := &infer.ControlVector{NEmbd: nEmbd, Data: make([]float32, nEmbd*(nLayer-1))}
	if err := c.ApplyControlVector(zero, 0, 0); err != nil {
		t.Fatal(err)
	}
	if got := step(); !slices.Equal(got, base) {
		t.Errorf("a control vector of zeros changed the logits by %g", maxDiff(base, got))
	}
	push := &infer.ControlVector{NEmbd: nEmbd, Data: make([]float32, nEmbd*(nLayer-1))}
	for i := range push.Data {
		push.Data[i] = float32(i%7) * 0.05
	}
	if err := c.ApplyControlVector(push, 2, 5); err != nil {
		t.Fatal(err)
	}
	if got := step(); slices.Equal(got, base) {
		t.Error("a control vector of other values left the logits as they were")
	}
	if err := c.SetControlVector(nil, 0, 0); err != nil {
		t.Fatal(err)
	}
	if got := step(); !slices.Equal(got, base) {
		t.Errorf("with the control vector cleared, the logits differ by %g", maxDiff(base, got))
	}

	var adapters []*loader.LoRA
	for _, zeroB := range []bool{true, false} {
		lp, err := lm.Plan.PlanLoRA(writeLoRA(t, path, zeroB))
		if err != nil {
			t.Fatal(err)
		}
		a, err := loader.LoadLoRA(context.Background(), lm, lp)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { a.Close() })
		adapters = append(adapters, a)
	}
	if err := c.SetLoRAs(adapters[:1], []float32{1}); err != nil {
		t.Fatal(err)
	}
	if got := step(); !slices.Equal(got, base) {
		t.Errorf("an adapter whose lora_b is zero changed the logits by %g", maxDiff(base, got))
	}
	if err := c.SetLoRAs(adapters, []float32{1, 0.5}); err != nil {
		t.Fatal(err)
	}
	if got := step(); slices.Equal(got, base) {
		t.Error("an adapter of other values left the logits as they were")
	}
	if err := c.SetLoRAs(nil, nil); err != nil {
		t.Fatal(err)
	}
	if got := step(); !slices.Equal(got, base) {
		t.Errorf("with the adapters removed, the logits differ by %g", maxDiff(base, got))
	}
}

// Split mode tensor: the weights and the cache on ggml's meta device,
// over Vulkan0, each graph's split states replayed (MetaSplits) before
// the meta backend allocates it. Its logits are those of the weights on
// Vulkan0 alone (one device: every slice is whole) for a prompt and its
// next tokens: the first bit for bit, the next ones to within rounding
// (the meta backend's graphs order some sums otherwise: 1e-6 of the
// largest logit here), the same tokens chosen.
func TestRunSplitTensor(t *testing.T) {
	if err := ggml.MetaDeviceSupported(); err != nil {
		t.Skip(err)
	}
	testenv.Vulkan(t)
	path := demoPath(t)
	run := func(sm place.SplitMode) [][]float32 {
		lm := loadedWith(t, path, place.Params{DeviceNames: []string{"Vulkan0"}, SplitMode: sm, NGPULayers: place.AllLayers(),
			Context: place.ContextParams{NCtx: 256}})
		if sm == place.SplitTensor && len(lm.Plan.TensorDevices) != 1 {
			t.Fatalf("a meta device over %d devices", len(lm.Plan.TensorDevices))
		}
		c := newCtx(t, lm)
		var out [][]float32
		toks := prompt
		for range 3 {
			decode(t, c, infer.Batch{Tokens: toks})
			l := logits(t, c, -1)
			out = append(out, l)
			toks = []int32{int32(infer.Argmax(l))}
		}
		return out
	}
	layer, tensor := run(place.SplitLayer), run(place.SplitTensor)
	if !slices.Equal(layer[0], tensor[0]) {
		t.Errorf("the prompt: the meta device's logits differ from Vulkan0's by %g", maxDiff(layer[0], tensor[0]))
	}
	for i := range layer {
		if d := maxDiff(layer[i], tensor[i]); d > 1e-5 || infer.Argmax(layer[i]) != infer.Argmax(tensor[i]) {
			t.Errorf("step %d: the meta device's logits differ from Vulkan0's by %g", i, d)
		}
	}
}

// q8Rows dequantizes rows of a q8_0 matrix of width n as ggml does
// (dequantize_row_q8_0: each block's f16 scale times its int8 quants, in
// float).
func q8Rows(data []byte, n int, rows []int32) [][]float32 {
	const block = 34 // an f16 scale and 32 quants
	rowBytes := n / 32 * block
	out := make([][]float32, len(rows))
	for i, r := range rows {
		row := data[int(r)*rowBytes:][:rowBytes]
		out[i] = make([]float32, n)
		for b := 0; b < n/32; b++ {
			d := f16(binary.LittleEndian.Uint16(row[b*block:]))
			for j := range 32 {
				out[i][b*32+j] = d * float32(int8(row[b*block+2+j]))
			}
		}
	}
	return out
}

// f16 is an IEEE half's value.
func f16(h uint16) float32 {
	sign, exp, frac := uint32(h>>15), uint32(h>>10)&0x1f, uint32(h)&0x3ff
	switch {
	case exp == 0:
		v := float32(frac) / (1 << 24)
		if sign != 0 {
			v = -v
		}
		return v
	case exp == 31:
		return math.Float32frombits(sign<<31 | 0xff<<23 | frac<<13)
	}
	return math.Float32frombits(sign<<31 | (exp+112)<<23 | frac<<13)
}

// A batch of input embeddings (llama_batch.embd) in place of tokens: the
// token embedding's rows of the prompt's tokens, as get_rows dequantizes
// them, give the logits the tokens give, bit for bit; other rows do not.
func TestRunInputEmbeddings(t *testing.T) {
	path := demoPath(t)
	m, err := gguf.OpenModel(path)
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	w, ok := m.Weight("token_embd.weight")
	if !ok || w.Type != ggml.TypeQ8_0 {
		t.Fatalf("the demo's token embedding: %+v", w)
	}
	data := make([]byte, w.Size)
	if _, err := m.Files[w.File].ReaderAt().ReadAt(data, w.Offset); err != nil {
		t.Fatal(err)
	}
	rows := q8Rows(data, int(w.Shape[0]), prompt)
	c := runCtx(t, path, place.ContextParams{NCtx: 256})
	decode(t, c, infer.Batch{Tokens: prompt})
	want := logits(t, c, -1)
	if err := c.SeqRm(-1, -1, -1); err != nil {
		t.Fatal(err)
	}
	decode(t, c, infer.Batch{Embd: rows})
	if got := logits(t, c, -1); !slices.Equal(got, want) {
		t.Errorf("the prompt's embeddings: logits differ from its tokens' by %g", maxDiff(want, got))
	}
	if err := c.SeqRm(-1, -1, -1); err != nil {
		t.Fatal(err)
	}
	rows[3][5] += 0.5
	decode(t, c, infer.Batch{Embd: rows})
	if got := logits(t, c, -1); slices.Equal(got, want) {
		t.Error("other embeddings gave the prompt's logits")
	}
}

// A context needs the native library, a replayed context, each layer's
// device and its weights and cache allocated.
func TestRunContextPreconditions(t *testing.T) {
	rt := testenv.Runtime(t)
	r, _, mem := demoContext(t, demoPath(t), 1)
	lib := rt.Ops()
	if _, err := graph.NewContext(r, graph.ReserveParams{Memory: mem}); err == nil || !strings.Contains(err.Error(), "needs the native library") {
		t.Errorf("no library: %v", err)
	}
	if _, err := graph.NewContext(r, graph.ReserveParams{Lib: lib, Memory: mem}); err == nil || !strings.Contains(err.Error(), "each layer's device") {
		t.Errorf("no layer devices nor weights: %v", err)
	}
	cpu := lib.DevByType(ops.DevTypeCPU)
	var none *ops.Tensor
	c, err := graph.NewContext(r, graph.ReserveParams{Lib: lib, Memory: mem, Devices: nil,
		LayerDevice: func(int) ops.Dev { return cpu },
		At:          graph.Placement{WeightTensor: func(*arch.Tensor) *ops.Tensor { return none }, CacheTensor: func(int, int) *ops.Tensor { return none }}})
	if err == nil || !strings.Contains(err.Error(), "is not allocated") {
		if c != nil {
			c.Close()
		}
		t.Fatalf("a context over tensors never allocated: %v", err)
	}
}

// -nkvo keeps the KV cache in host memory and pins the attention's nodes
// to the CPU backend (ggml_backend_sched_set_tensor_backend, without
// flash attention): on the CPU alone that moves nothing, and the logits
// are those of the cache offloaded, bit for bit, with flash attention and
// without.
func TestRunNoKVOffload(t *testing.T) {
	path := demoPath(t)
	for _, fa := range []place.FlashAttn{place.FlashAttnOff, place.FlashAttnOn} {
		var out [2][]float32
		for i, nkvo := range []bool{false, true} {
			c := runCtx(t, path, place.ContextParams{NCtx: 256, FlashAttn: fa, NoKVOffload: nkvo})
			decode(t, c, infer.Batch{Tokens: prompt})
			decode(t, c, infer.Batch{Tokens: []int32{7}})
			out[i] = logits(t, c, -1)
		}
		if !slices.Equal(out[0], out[1]) {
			t.Errorf("flash attention %v: -nkvo changed the logits by %g", fa, maxDiff(out[0], out[1]))
		}
	}
}
