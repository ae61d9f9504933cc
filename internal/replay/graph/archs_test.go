package graph_test

import (
	"errors"
	"slices"
	"sort"
	"strings"
	"testing"

	"github.com/ggload/ggload/ggml"
	"github.com/ggload/ggload/ggml/ops"
	"github.com/ggload/ggload/gguf"
	"github.com/ggload/ggload/internal/replay/arch"
	"github.com/ggload/ggload/internal/replay/graph"
	"github.com/ggload/ggload/lab/synth"
	"github.com/ggload/ggload/lab/testenv"
)

// countingPlacer counts the tensors the loader creates.
type countingPlacer struct{ n int }

func (c *countingPlacer) Place(cr *arch.Creation) error {
	if !cr.Skip {
		c.n++
	}
	return nil
}

// archRun is an architecture's synthesized model, loaded, with a
// context and its memory.
type archRun struct {
	r        *arch.Run
	cx       *arch.Context
	mem      *arch.Memory
	nTensors int
}

// memClass names a memory module, "none" for a model that keeps none.
func memClass(mem *arch.Memory) string {
	if mem == nil || len(mem.Caches) == 0 {
		return "none"
	}
	return mem.Class
}

// loadArch loads a model and makes its context of params.
func loadArch(t *testing.T, gm *gguf.Model, p arch.ContextParams) (*archRun, error) {
	t.Helper()
	r, err := arch.Load(gm, arch.Options{})
	if err != nil {
		return nil, err
	}
	var c countingPlacer
	if err := r.CreateTensors(&c); err != nil {
		return nil, err
	}
	cx, err := r.InitContext(p, nil)
	if err != nil {
		return nil, err
	}
	mem, err := r.CreateMemory(cx.Memory())
	if err != nil {
		return nil, err
	}
	return &archRun{r: r, cx: cx, mem: mem, nTensors: c.n}, nil
}

// contextDefaults are llama.cpp's defaults with flash attention on.
var contextDefaults = arch.ContextParams{NBatch: 2048, NUBatch: 512, NSeqMax: 1, FlashAttn: 1,
	TypeK: ggml.TypeF16, TypeV: ggml.TypeF16, OffloadKQV: true}

// archRefusals are the architectures whose model, context or graphs
// llama.cpp itself refuses, and what it says: the projector, the draft
// models without their target's context, and the graphs the pin's own
// code aborts on.
var archRefusals = map[string]string{
	"clip":             "CLIP cannot be used as main model",
	"dflash":           "dflash requires ctx_other to be set",
	"eagle3":           "eagle3 requires ctx_other to be set",
	"gemma4-assistant": "Gemma4Assistant requires ctx_other to be set",
	"plm":              "GGML_ASSERT(a->ne[0] == b->ne[0]) failed (in ggml_set_rows)",
	"t5":               "GGML_ASSERT(ggml_can_repeat(b, a)) failed (in ggml_add)",
}

// memoryClasses are the memory modules of the pin's architectures.
var memoryClasses = []string{"llama_kv_cache", "llama_kv_cache_dsa", "llama_kv_cache_dsa_iswa", "llama_kv_cache_dsv4",
	"llama_kv_cache_iswa", "llama_kv_cache_msa", "llama_memory_hybrid", "llama_memory_hybrid_idx", "llama_memory_hybrid_iswa",
	"llama_memory_recurrent", "none"}

// archModel synthesizes an architecture's model, mended until its
// graphs build, with extra metadata set.
func archModel(t *testing.T, lib *ops.Lib, a string, extra ...gguf.KV) (*gguf.Model, error) {
	t.Helper()
	n := 64
	if a == "chameleon" {
		n = 8200 // its graph masks the logits of the image tokens, 4 to 8196
	}
	vf, err := synth.Vocab(n)
	if err != nil {
		t.Fatal(err)
	}
	m, err := synth.NewArchModel(a, vf, synth.ArchOptions{Graph: lib})
	if err != nil {
		return nil, err
	}
	m.KV = append(m.KV, extra...)
	return m.Model(false)
}

// graphShape is a reserve ubatch: its tokens, sequences and outputs.
type graphShape struct{ tokens, seqs, outputs uint32 }

// promptShape is the context's prompt graph's: as many tokens as the
// context has, up to n_ubatch, all outputs; generationShape is one token.
func promptShape(cx *arch.Context) graphShape {
	n := min(cx.NCtx, cx.NUBatch)
	return graphShape{n, 1, n}
}

var generationShape = graphShape{1, 1, 1}

// builtGraph is what a graph was: its nodes, its flash attention nodes
// and its size.
type builtGraph struct{ nodes, flash, size int }

func buildArchGraph(t *testing.T, lib *ops.Lib, ar *archRun, sh graphShape, fa bool) (builtGraph, error) {
	t.Helper()
	g, err := graph.BuildGraph(ar.r, graph.GraphParams{Lib: lib, NTokens: sh.tokens, NSeqs: sh.seqs, NOutputs: sh.outputs,
		FlashAttn: fa, Memory: ar.mem, NTensors: ar.nTensors})
	if err != nil {
		return builtGraph{}, err
	}
	defer g.Free()
	b := builtGraph{nodes: g.Nodes, size: g.G.Size()}
	if n := lib.NNodes(g.G); n != g.Nodes {
		t.Errorf("the graph says %d nodes, ggml %d", g.Nodes, n)
	}
	for i := 0; i < g.Nodes; i++ {
		if lib.OpName(lib.Node(g.G, i).Op) == "FLASH_ATTN_EXT" {
			b.flash++
		}
	}
	return b, nil
}

// checkArchGraphs builds a model's prompt and generation graphs with
// flash attention on and off: each has nodes, within the graph's size;
// without flash attention none is a FLASH_ATTN_EXT, with it the prompt
// and the generation graph have as many (one per attention layer, and a
// recurrent state has none). It returns the prompt and generation graphs
// with flash attention.
func checkArchGraphs(t *testing.T, lib *ops.Lib, a string, ar *archRun) (pp, tg builtGraph) {
	t.Helper()
	for _, fa := range []bool{true, false} {
		var flash []int
		for i, sh := range []graphShape{promptShape(ar.cx), generationShape} {
			b, err := buildArchGraph(t, lib, ar, sh, fa)
			if err != nil {
				t.Errorf("%s: %+v, flash attention %v: %v", a, sh, fa, err)
				return
			}
			if b.nodes <= 0 || b.nodes > b.size {
				t.Errorf("%s: %+v, flash attention %v: %d nodes in a graph of %d", a, sh, fa, b.nodes, b.size)
			}
			if fa && i == 0 {
				pp = b
			} else if fa {
				tg = b
			}
			flash = append(flash, b.flash)
		}
		switch {
		case !fa && (flash[0] != 0 || flash[1] != 0):
			t.Errorf("%s: flash attention nodes %v without flash attention", a, flash)
		case memClass(ar.mem) == "llama_memory_recurrent" && (flash[0] != 0 || flash[1] != 0):
			t.Errorf("%s: flash attention nodes %v over a recurrent state", a, flash)
		case flash[0] != flash[1]:
			t.Errorf("%s: %d flash attention nodes in the prompt graph, %d in the generation graph", a, flash[0], flash[1])
		}
	}
	return pp, tg
}

// reserveCPU reserves the context's compute buffer on the CPU, every
// weight and cache tensor in CPU memory, the layers on layerDev.
func reserveCPU(lib *ops.Lib, ar *archRun, layerDev ops.Dev) (*graph.Reservation, error) {
	cpu := lib.DevByType(ops.DevTypeCPU)
	buft := lib.DevBufferType(cpu)
	return graph.Reserve(ar.r, graph.ReserveParams{Lib: lib, Memory: ar.mem, NTensors: ar.nTensors,
		At:          graph.Placement{Weight: func(*arch.Tensor) ops.Buft { return buft }, Cache: func(int, int) ops.Buft { return buft }},
		LayerDevice: func(int) ops.Dev { return layerDev }})
}

// checkReserve reserves a model's context on the CPU: one buffer, one
// split, the prompt and generation graphs those BuildGraph builds.
func checkReserve(t *testing.T, lib *ops.Lib, a string, ar *archRun, pp, tg builtGraph) {
	t.Helper()
	cpu := lib.DevByType(ops.DevTypeCPU)
	res, err := reserveCPU(lib, ar, cpu)
	if err != nil {
		t.Errorf("%s: reserve: %v", a, err)
		return
	}
	if len(res.Buffers) != 1 || res.Buffers[0].Dev != cpu || res.Buffers[0].Bytes == 0 || res.SplitsPP != 1 || res.SplitsTG != 1 || !res.FlashAttn {
		t.Errorf("%s: reserve: %+v", a, *res)
	}
	if res.NodesPP != pp.nodes || res.NodesTG != tg.nodes || res.MaxNodes != pp.size {
		t.Errorf("%s: reserve: %d and %d nodes in graphs of %d; BuildGraph: %d and %d in %d", a, res.NodesPP, res.NodesTG, res.MaxNodes, pp.nodes, tg.nodes, pp.size)
	}
	if !slices.ContainsFunc(res.Log, func(l string) bool { return strings.HasPrefix(l, "INFO sched_reserve: graph") }) {
		t.Errorf("%s: reserve logs %q", a, res.Log)
	}
}

// Every architecture's synthesized model (as lab/synth makes it, mended
// until its graphs build) builds its prompt and generation graphs over
// its memory module, with flash attention and without; a model of each
// memory module reserves its compute buffer on the CPU with the graphs
// BuildGraph builds. What llama.cpp itself refuses is refused with its
// words.
func TestEveryArchitectureGraphs(t *testing.T) {
	lib := testenv.Runtime(t).Ops()
	names := arch.Architectures()
	sort.Strings(names)
	reserved := map[string]string{} // a memory class: the architecture reserved
	for _, a := range names {
		gm, err := archModel(t, lib, a)
		var ar *archRun
		if err == nil {
			ar, err = loadArch(t, gm, contextDefaults)
		}
		if want, ok := archRefusals[a]; ok {
			if err == nil || !strings.Contains(err.Error(), want) {
				t.Errorf("%s: %v, want llama.cpp's %q", a, err, want)
			}
			continue
		}
		if err != nil {
			t.Errorf("%s: %v", a, err)
			continue
		}
		class := memClass(ar.mem)
		if !slices.Contains(memoryClasses, class) {
			t.Errorf("%s: memory %s", a, class)
		}
		if ok, why := graph.Replayed(ar.r, ar.mem); !ok {
			t.Errorf("%s: not replayed: %s", a, why)
			continue
		}
		pp, tg := checkArchGraphs(t, lib, a, ar)
		if _, done := reserved[class]; !done && pp.nodes > 0 {
			reserved[class] = a
			checkReserve(t, lib, a, ar, pp, tg)
		}
	}
	// no architecture's defaults make the hybrid of an iSWA cache and a
	// recurrent state: LFM2's with a sliding window does
	gm, err := archModel(t, lib, "lfm2", gguf.KV{Key: "lfm2.attention.sliding_window", Value: gguf.Uint32(64)})
	if err != nil {
		t.Fatal(err)
	}
	ar, err := loadArch(t, gm, contextDefaults)
	if err != nil {
		t.Fatal(err)
	}
	if c := memClass(ar.mem); c != "llama_memory_hybrid_iswa" || len(ar.mem.Caches) != 3 {
		t.Errorf("LFM2 with a sliding window: %s of %d caches", c, len(ar.mem.Caches))
	}
	pp, tg := checkArchGraphs(t, lib, "lfm2 with a sliding window", ar)
	checkReserve(t, lib, "lfm2 with a sliding window", ar, pp, tg)
	reserved[memClass(ar.mem)] = "lfm2"

	var got []string
	for c := range reserved {
		got = append(got, c)
	}
	sort.Strings(got)
	if !slices.Equal(got, memoryClasses) {
		t.Errorf("memory modules reserved: %v, want %v", got, memoryClasses)
	}
}

// Flash attention asked for automatically stays on where every layer's
// attention runs on the layer's device (the CPU here), and is turned off,
// as llama.cpp logs it, where a layer's device is another.
func TestReserveResolvesFlashAttention(t *testing.T) {
	lib := testenv.Runtime(t).Ops()
	gm, err := archModel(t, lib, "qwen3")
	if err != nil {
		t.Fatal(err)
	}
	auto := contextDefaults
	auto.FlashAttn = -1
	for _, c := range []struct {
		layerDev ops.Dev
		on       bool
		log      string
	}{
		{lib.DevByType(ops.DevTypeCPU), true, "INFO resolve_fused_ops: Flash Attention enabled"},
		{0, false, "WARN resolve_fused_ops: layer 0 is assigned to device none but Flash Attention is assigned to device CPU"},
	} {
		ar, err := loadArch(t, gm, auto)
		if err != nil {
			t.Fatal(err)
		}
		res, err := reserveCPU(lib, ar, c.layerDev)
		if err != nil {
			t.Fatal(err)
		}
		if res.FlashAttn != c.on || !slices.ContainsFunc(res.Log, func(l string) bool { return strings.HasPrefix(l, c.log) }) {
			t.Errorf("layers on %d: flash attention %v, log %q; want %v, %q", c.layerDev, res.FlashAttn, res.Log, c.on, c.log)
		}
	}
}

// llamaError reports whether err is llama.cpp's own (a throw, a failed
// assertion).
func llamaError(err error) bool {
	var th *arch.Throw
	var a *arch.Abort
	return errors.As(err, &th) || errors.As(err, &a)
}

// What the graphs need first, and what they refuse: the native library,
// a context, a memory whose views are replayed, a graph of some size.
func TestGraphPreconditions(t *testing.T) {
	lib := testenv.Runtime(t).Ops()
	gm, err := archModel(t, lib, "qwen3")
	if err != nil {
		t.Fatal(err)
	}
	r, err := arch.Load(gm, arch.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if err := r.CreateTensors(&countingPlacer{}); err != nil {
		t.Fatal(err)
	}
	if _, err := graph.NewGraphSession(r, lib, nil, true, graph.Placement{}); err == nil || !strings.Contains(err.Error(), "before InitContext") {
		t.Errorf("a session before InitContext: %v", err)
	}
	if _, err := graph.Reserve(r, graph.ReserveParams{Lib: lib}); err == nil || !strings.Contains(err.Error(), "needs the native library and InitContext") {
		t.Errorf("a reservation before InitContext: %v", err)
	}
	two := contextDefaults
	two.NSeqMax = 2
	ar, err := loadArch(t, gm, two)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := graph.NewGraphSession(ar.r, nil, ar.mem, true, graph.Placement{}); err == nil || !strings.Contains(err.Error(), "needs the native library") {
		t.Errorf("a session without the library: %v", err)
	}
	if _, err := graph.Reserve(ar.r, graph.ReserveParams{Lib: lib, Memory: ar.mem}); err == nil || !strings.Contains(err.Error(), "each layer's device") {
		t.Errorf("a reservation without the layers' devices: %v", err)
	}
	other := &arch.Memory{Class: "llama_kv_cache_other", Caches: ar.mem.Caches}
	if ok, why := graph.Replayed(ar.r, other); ok || why != "the views of memory llama_kv_cache_other are not replayed yet" {
		t.Errorf("Replayed of another memory: %v, %q", ok, why)
	}
	if _, err := graph.BuildGraph(ar.r, graph.GraphParams{Lib: lib, NTokens: 1, NSeqs: 1, NOutputs: 1, Memory: other}); err == nil || !strings.Contains(err.Error(), "not replayed yet") {
		t.Errorf("a graph over another memory: %v", err)
	}
	generic, err := arch.LoadGeneric(gm, arch.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if ok, why := graph.Replayed(generic, nil); ok || why != "the generic path has no graph" {
		t.Errorf("Replayed of the generic path: %v, %q", ok, why)
	}

	s, err := graph.NewGraphSession(ar.r, lib, ar.mem, true, graph.Placement{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	for _, c := range []struct{ tokens, seqs, outputs uint32 }{{4, 0, 1}, {4, 1, 0}} {
		if _, err := s.Build(c.tokens, c.seqs, c.outputs, 1024); err == nil {
			t.Errorf("a graph of %+v", c)
		}
	}
	if _, err := s.Build(4, 1, 1, 0); err == nil {
		t.Error("a graph of no nodes")
	}
	// a ubatch's tokens are split evenly among its sequences: five tokens
	// of two sequences are six
	var nodes []int
	for _, n := range []uint32{5, 6} {
		g, err := s.Build(n, 2, 2, 1024)
		if err != nil {
			t.Fatalf("%d tokens of 2 sequences: %v", n, err)
		}
		nodes = append(nodes, g.Nodes)
		g.Free()
	}
	if nodes[0] == 0 || nodes[0] != nodes[1] {
		t.Errorf("5 and 6 tokens of 2 sequences: %v nodes", nodes)
	}
}
