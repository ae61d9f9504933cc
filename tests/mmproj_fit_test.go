package tests

import (
	"context"
	"testing"

	"github.com/ggload/ggload/gguf"
	"github.com/ggload/ggload/lab/llama"
	"github.com/ggload/ggload/lab/mtmd"
	"github.com/ggload/ggload/lab/synth"
	"github.com/ggload/ggload/lab/testenv"
	"github.com/ggload/ggload/place"
)

// TestMmprojFit: -fit beside a projector decides as llama-server does.
// The server measures the projector (mtmd_get_memory_usage: its weights
// and its warm-up's compute buffers), adds each device's share to the fit
// target of that device's place in ggml's registry, and fits the model
// with common_fit_params. Here libmtmd measures, libllama-common fits,
// and the targets are tight enough that the projector costs layers.
func TestMmprojFit(t *testing.T) {
	rt := testenv.Runtime(t)
	gpu := testenv.Vulkan(t)
	l := openLlama(t, rt)
	if err := l.HaveCommon(); err != nil {
		testenv.Missing(t, "llama", "%v", err)
	}
	o := mtmd.Start(t)
	files := mmprojWarmSynth(t, o, t.TempDir(), []string{"gemma3", "ultravox"})
	path := testenv.ModelFile(t, rt, synth.Spec{Layers: 12, Embd: 256, FF: 1024, Heads: 4, Vocab: 300, Seed: 7})
	m, err := gguf.OpenModel(path)
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	params := place.Params{DeviceNames: []string{gpu.Name()}}
	params.Context.NCtx = 256
	free, _ := gpu.Memory()
	for _, typ := range []string{"gemma3", "ultravox"} {
		mm, ok := files[typ]
		if !ok {
			t.Fatalf("%s: no projector that warms up", typ)
		}
		mp, err := place.PlanMmproj(rt, mm, place.MmprojOptions{Devices: params.DeviceNames})
		if err != nil {
			t.Fatal(err)
		}
		mem, err := mp.Memory()
		if err != nil {
			t.Fatal(err)
		}
		onGPU := mem[gpu]
		// what the model takes on the device with every layer there
		res0, err := place.Fit(context.Background(), rt, m, params, place.FitOptions{Targets: []uint64{1 << 30}})
		if err != nil {
			t.Fatal(err)
		}
		full := res0.Devices[0].Before
		// enough for the model alone, not beside the projector
		margin := free - full - onGPU/2
		targets := place.MmprojFitTargets(rt, []uint64{margin}, mem)
		// llama-server's targets, from libmtmd's measure
		want, err := o.Memory(mm, mtmd.Load{UseGPU: true, Device: gpu.Name()})
		if err != nil {
			t.Fatal(err)
		}
		server := make([]uint64, 16)
		for i := range server {
			server[i] = margin
		}
		for i, d := range rt.Devices() {
			if i < len(server) {
				server[i] += uint64(want[d.Name()])
			}
		}
		if len(targets) != len(server) {
			t.Fatalf("%s: targets %v, llama-server's %v", typ, targets, server)
		}
		for i := range server {
			if targets[i] != server[i] {
				t.Fatalf("%s: targets %v, llama-server's %v", typ, targets, server)
			}
		}
		res, err := place.Fit(context.Background(), rt, m, params, place.FitOptions{Targets: targets})
		if err != nil {
			t.Fatal(err)
		}
		ld, err := llama.LoadFor(rt, path, params)
		if err != nil {
			t.Fatal(err)
		}
		cp, err := l.ContextParamsFor(params.Context)
		if err != nil {
			t.Fatal(err)
		}
		theirs, _, err := l.Fit(ld, cp, server, 0)
		if err != nil {
			t.Fatal(err)
		}
		ngl := int32(res.Plan.Params.NGPULayers.Llama())
		if ngl != theirs.NGPULayers || res.NCtx != theirs.NCtx {
			t.Errorf("%s: ggload -ngl %d -c %d, llama-server -ngl %d -c %d", typ, ngl, res.NCtx, theirs.NGPULayers, theirs.NCtx)
		}
		alone, _, err := l.Fit(ld, cp, []uint64{margin}, 0)
		if err != nil {
			t.Fatal(err)
		}
		if alone.NGPULayers == theirs.NGPULayers {
			t.Errorf("%s: the projector (%d bytes on %s) changed nothing: -ngl %d either way", typ, onGPU, gpu.Name(), alone.NGPULayers)
		}
		t.Logf("%s: %d bytes on %s; -ngl %d beside it, %d alone", typ, onGPU, gpu.Name(), theirs.NGPULayers, alone.NGPULayers)
	}
}
