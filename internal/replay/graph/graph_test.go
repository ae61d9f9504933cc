package graph_test

import (
	"testing"

	"github.com/ggload/ggload/ggml"
	"github.com/ggload/ggload/ggml/ops"
	"github.com/ggload/ggload/internal/replay/arch"
	"github.com/ggload/ggload/internal/replay/graph"
	"github.com/ggload/ggload/internal/synthmodel"
	"github.com/ggload/ggload/lab/testenv"
)

type nopPlacer struct{}

func (nopPlacer) Place(*arch.Creation) error { return nil }

// demoContext is the demo model's run, context (n_ctx 4096, one
// sequence) and memory.
func demoContext(t *testing.T, path string, flash int) (*arch.Run, *arch.Context, *arch.Memory) {
	t.Helper()
	m := testenv.OpenModel(t, path)
	r, err := arch.Load(m, arch.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if err := r.CreateTensors(nopPlacer{}); err != nil {
		t.Fatal(err)
	}
	cx, err := r.InitContext(arch.ContextParams{NCtx: 4096, NBatch: 2048, NUBatch: 512, NSeqMax: 1, FlashAttn: flash,
		TypeK: ggml.TypeF16, TypeV: ggml.TypeF16, OffloadKQV: true}, nil)
	if err != nil {
		t.Fatal(err)
	}
	mem, err := r.CreateMemory(cx.Memory())
	if err != nil {
		t.Fatal(err)
	}
	return r, cx, mem
}

// The demo model's reserve graph, built by replaying the pin's graph
// builders with real ggml ops, has the nodes libllama's has (n_ctx 4096,
// one sequence, n_ubatch 512, the CPU: 254 nodes with flash attention,
// 294 without).
func TestBuildGraphDemoLlama(t *testing.T) {
	rt := testenv.Runtime(t)
	path, err := synthmodel.DemoModel(rt)
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		fa    bool
		nodes int
	}{{true, 254}, {false, 294}} {
		flash := 0
		if c.fa {
			flash = 1
		}
		r, cx, mem := demoContext(t, path, flash)
		g, err := graph.BuildGraph(r, graph.GraphParams{Lib: rt.Ops(), NTokens: cx.NUBatch, NSeqs: 1, NOutputs: cx.NUBatch,
			FlashAttn: cx.FlashAttn, Memory: mem})
		if err != nil {
			t.Fatalf("flash attention %v: %v", c.fa, err)
		}
		t.Logf("flash attention %v: %d nodes (libllama: %d)", c.fa, g.Nodes, c.nodes)
		if g.Nodes != c.nodes {
			t.Errorf("flash attention %v: %d nodes, libllama has %d", c.fa, g.Nodes, c.nodes)
		}
		g.Free()
	}
}

// The demo model's CPU context, reserved as llama_context::sched_reserve
// reserves it, has libllama's compute buffer: 17,840,128 bytes with flash
// attention (asked for, or auto and resolved on, as the CPU runs it),
// 81,799,168 without, in one split.
func TestReserveCPUDemoLlama(t *testing.T) {
	rt := testenv.Runtime(t)
	path, err := synthmodel.DemoModel(rt)
	if err != nil {
		t.Fatal(err)
	}
	lib := rt.Ops()
	cpu := lib.DevByType(ops.DevTypeCPU)
	buft := lib.DevBufferType(cpu)
	for _, c := range []struct {
		fa    int
		nodes int
		bytes uint64
	}{{1, 254, 17840128}, {0, 294, 81799168}, {-1, 254, 17840128}} {
		r, _, mem := demoContext(t, path, c.fa)
		res, err := graph.Reserve(r, graph.ReserveParams{Lib: lib, Memory: mem, NTensors: 75,
			At:          graph.Placement{Weight: func(*arch.Tensor) ops.Buft { return buft }, Cache: func(int, int) ops.Buft { return buft }},
			LayerDevice: func(int) ops.Dev { return cpu }})
		if err != nil {
			t.Fatalf("flash attention %d: %v", c.fa, err)
		}
		t.Logf("flash attention %d: %+v", c.fa, *res)
		if len(res.Buffers) != 1 || res.NodesPP != c.nodes || res.SplitsPP != 1 || res.Buffers[0].Bytes != c.bytes || res.MaxNodes != 1024 {
			t.Errorf("flash attention %d: %d nodes, %d splits, %+v, max nodes %d; libllama: %d, 1, %d, 1024", c.fa, res.NodesPP, res.SplitsPP, res.Buffers, res.MaxNodes, c.nodes, c.bytes)
		}
	}
}
