package probe_test

import (
	"context"
	"strings"
	"testing"

	"github.com/ggload/ggload/ggml"
	"github.com/ggload/ggload/lab/testenv"
	"github.com/ggload/ggload/place/internal/probe"
)

func TestMain(m *testing.M) { testenv.Main(m) }

// Every op llama.cpp probes is built with the pin's shapes and answered
// by the CPU backend for an f32 weight in the CPU's buffer type: all of
// them run there. Answers are cached by what they depend on; an op with
// no probe, a bad weight shape and an ended context are errors.
func TestProbes(t *testing.T) {
	rt := testenv.Runtime(t)
	cpu, err := rt.DeviceByName("CPU")
	if err != nil {
		t.Fatal(err)
	}
	bt := cpu.BufferType()
	h := probe.Model{Arch: "test", ExpertUsedMax: 2, RouterLayer: -1, EmbdHeadV: 64, Head0: 4, SSMDState: 16, SSMDInner: 128, SSMNGroup: 1, EmbdInp: 256}
	p := probe.New(context.Background(), rt, h, false)
	for _, c := range []struct {
		op ggml.Op
		ne ggml.Shape
	}{
		{ggml.OpNone, ggml.Shape{64, 64, 1, 1}},
		{ggml.OpGetRows, ggml.Shape{256, 1000, 1, 1}},
		{ggml.OpMulMat, ggml.Shape{256, 64, 1, 1}},
		{ggml.OpMulMatID, ggml.Shape{256, 64, 4, 1}},
		{ggml.OpAddID, ggml.Shape{256, 4, 1, 1}},
		{ggml.OpAdd, ggml.Shape{256, 1, 1, 1}},
		{ggml.OpMul, ggml.Shape{256, 1, 1, 1}},
		{ggml.OpDiv, ggml.Shape{256, 1, 1, 1}},
		{ggml.OpRope, ggml.Shape{32, 1, 1, 1}},
		{ggml.OpSSMConv, ggml.Shape{4, 128, 1, 1}},
		{ggml.OpSSMScan, ggml.Shape{16, 8, 1, 1}},
		{ggml.OpRWKVWKV6, ggml.Shape{64, 123, 1, 1}},
		{ggml.OpIm2Col, ggml.Shape{3, 3, 1, 1}},
		{ggml.OpScale, ggml.Shape{256, 1, 1, 1}},
	} {
		ok, err := p.Supported("w", ggml.TypeF32, c.ne, c.op, bt, cpu)
		if err != nil || !ok {
			t.Errorf("%s over %v: %v, %v; the CPU runs every probe of an f32 weight", rt.OpName(c.op), c.ne, ok, err)
		}
	}
	asked, probes := p.Asked, p.Probes
	if asked != 13 || probes != 13 {
		t.Fatalf("%d questions, %d probes: want 13 of each (OpNone asks nothing)", asked, probes)
	}
	// the same question again is answered from the cache; another shape
	// asks the device
	if ok, err := p.Supported("w", ggml.TypeF32, ggml.Shape{256, 64, 1, 1}, ggml.OpMulMat, bt, cpu); !ok || err != nil || p.Probes != probes {
		t.Errorf("a cached question: %v %v, probes %d -> %d", ok, err, probes, p.Probes)
	}
	if _, err := p.Supported("w", ggml.TypeF32, ggml.Shape{512, 64, 1, 1}, ggml.OpMulMat, bt, cpu); err != nil || p.Probes != probes+1 {
		t.Errorf("a new shape: %v, probes %d -> %d", err, probes, p.Probes)
	}
	// without the cache every question reaches the device
	fresh := probe.New(context.Background(), rt, h, true)
	for range 2 {
		fresh.Supported("w", ggml.TypeF32, ggml.Shape{256, 64, 1, 1}, ggml.OpMulMat, bt, cpu)
	}
	if fresh.Probes != 2 {
		t.Errorf("uncached: %d probes of 2 questions", fresh.Probes)
	}
	// errors: no probe for the op, experts without a count, a weight
	// ggml cannot make, a context ended
	if _, err := p.Supported("w", ggml.TypeF32, ggml.Shape{4, 4, 1, 1}, ggml.Op(1), bt, cpu); err == nil || !strings.Contains(err.Error(), "no probe for op") {
		t.Errorf("an op without a probe: %v", err)
	}
	noExperts := probe.New(context.Background(), rt, probe.Model{Arch: "moe", RouterLayer: -1}, false)
	if _, err := noExperts.Supported("w", ggml.TypeF32, ggml.Shape{256, 64, 4, 1}, ggml.OpMulMatID, bt, cpu); err == nil || !strings.Contains(err.Error(), "moe.expert_used_count is 0") {
		t.Errorf("experts with no count: %v", err)
	}
	if _, err := p.Supported("w", ggml.TypeQ4_0, ggml.Shape{33, 1, 1, 1}, ggml.OpAdd, bt, cpu); err == nil || !strings.Contains(err.Error(), `tensor "w"`) {
		t.Errorf("a q4_0 row of 33: %v", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	ended := probe.New(ctx, rt, h, false)
	if _, err := ended.Supported("w", ggml.TypeF32, ggml.Shape{256, 64, 1, 1}, ggml.OpMulMat, bt, cpu); err == nil || ended.Err() == nil {
		t.Errorf("an ended context: %v", err)
	}
}
