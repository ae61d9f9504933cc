package tests

import (
	"testing"

	"github.com/ggload/ggload/ggml"
	"github.com/ggload/ggload/internal/arch"
	"github.com/ggload/ggload/internal/synth"
	"github.com/ggload/ggload/internal/testenv"
	"github.com/ggload/ggload/loader/gguf"
	"github.com/ggload/ggload/place"
)

type placeNothing struct{}

func (placeNothing) Place(*arch.Creation) error { return nil }

// The compute buffer of a CPU context, reserved by replaying the pin's
// graph builders and sched_reserve, is libllama's own, byte for byte
// (the demo llama, n_ctx 4096, flash attention on and off, and a smaller
// ubatch).
func TestComputeBufferMatchesLlamaCpp(t *testing.T) {
	rt := testenv.Runtime(t)
	l := openLlama(t, rt)
	path, err := synth.DemoModel(rt)
	if err != nil {
		t.Fatal(err)
	}
	lib := testenv.Lib(rt)
	for _, c := range []struct {
		name string
		cp   place.ContextParams
	}{
		{"fa on", place.ContextParams{NCtx: 4096, FlashAttn: place.FlashAttnOn}},
		{"fa off", place.ContextParams{NCtx: 4096, FlashAttn: place.FlashAttnOff}},
		{"fa off -ub 256", place.ContextParams{NCtx: 2048, FlashAttn: place.FlashAttnOff, NUBatch: 256}},
	} {
		params := place.Params{LoadMode: place.LoadNone, Devices: []string{"none"}, Context: c.cp}
		// libllama: a no_alloc load and its context's breakdown
		ld := llamaLoad(t, rt, path, params)
		ld.NoAlloc = true
		lm, _, err := l.LoadModel(ld)
		if err != nil {
			t.Fatalf("%s: libllama: %v", c.name, err)
		}
		lcp, err := l.ContextParamsFor(c.cp)
		if err != nil {
			t.Fatal(err)
		}
		ctx, _, err := lm.NewContext(lcp)
		if err != nil {
			lm.Free()
			t.Fatalf("%s: libllama context: %v", c.name, err)
		}
		var theirs uint64
		for _, e := range ctx.MemoryBreakdown() {
			theirs += e.Compute
		}
		ctx.Free()
		lm.Free()

		// ggload: the replay
		m, err := gguf.OpenModel(path)
		if err != nil {
			t.Fatal(err)
		}
		r, err := arch.Load(m, arch.Options{})
		if err != nil {
			t.Fatal(err)
		}
		if err := r.CreateTensors(placeNothing{}); err != nil {
			t.Fatal(err)
		}
		ub := place.DefaultNUBatch
		if c.cp.NUBatch > 0 {
			ub = c.cp.NUBatch
		}
		cx, err := r.InitContext(arch.ContextParams{NCtx: uint32(c.cp.NCtx), NBatch: uint32(place.DefaultNBatch),
			NUBatch: uint32(ub), NSeqMax: 1,
			FlashAttn: c.cp.FlashAttn.Llama(), TypeK: ggml.TypeF16, TypeV: ggml.TypeF16, OffloadKQV: true}, nil)
		if err != nil {
			t.Fatal(err)
		}
		mem, err := r.CreateMemory(arch.MemoryParams{TypeK: cx.TypeK, TypeV: cx.TypeV, FlashAttn: cx.FlashAttn,
			OffloadKQV: cx.OffloadKQV, KVUnified: cx.KVUnified, NCtxSeq: cx.NCtxSeq, NSeqMax: cx.NSeqMax, NUBatch: cx.NUBatch})
		if err != nil {
			t.Fatal(err)
		}
		res, err := r.ReserveCPU(arch.ReserveParams{Lib: lib, NUBatch: min(cx.NCtx, cx.NUBatch), NSeqs: cx.NSeqMax,
			NOutputsMax: cx.NBatch, FlashAttn: cx.FlashAttn, MaxNodes: 1024, Memory: mem})
		m.Close()
		if err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		t.Logf("%s: compute %d bytes (libllama %d), %d nodes, %d splits", c.name, res.ComputeBytes, theirs, res.NodesPP, res.SplitsPP)
		if res.ComputeBytes != theirs || theirs == 0 {
			t.Errorf("%s: compute buffer %d bytes, libllama's %d", c.name, res.ComputeBytes, theirs)
		}
	}
}
