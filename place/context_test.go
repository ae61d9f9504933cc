package place_test

import (
	"testing"

	"github.com/ggload/ggload/lab/synth"
	"github.com/ggload/ggload/lab/testenv"
	"github.com/ggload/ggload/place"
)

// An engine of its own says what it needs instead of llama.cpp's
// context: each layer's bytes go with the layer, each device's on it, and
// the breakdown counts them (its compute known).
func TestCustomContextMemory(t *testing.T) {
	rt := testenv.Runtime(t)
	vk := testenv.Vulkan(t)
	m := writeModel(t, rt, synth.Spec{Layers: 6, Embd: 128, FF: 256, Heads: 2, Vocab: 128})
	params := place.Params{Devices: []string{vk.Name()}, NGPULayers: place.NLayers(4),
		Context: place.ContextParams{Custom: &place.CustomMemory{PerLayer: 1 << 20, PerDevice: map[string]uint64{"CPU": 3 << 20, vk.Name(): 5 << 20}}}}
	p, err := place.New(rt, m, params)
	if err != nil {
		t.Fatal(err)
	}
	got := map[string][2]uint64{}
	for _, e := range p.Breakdown() {
		if !e.ComputeKnown {
			t.Fatalf("%s: compute unknown for a custom engine", e.BufferType.Name())
		}
		got[e.BufferType.Name()] = [2]uint64{e.Context, e.Compute}
	}
	// -ngl 4 of 6 layers + output: layers 0-2 on the CPU, 3-5 on Vulkan0
	cpu, gpu := got[rt.CPUDevice().BufferType().Name()], got[vk.BufferType().Name()]
	if cpu != [2]uint64{3 << 20, 3 << 20} || gpu != [2]uint64{3 << 20, 5 << 20} {
		t.Fatalf("context, compute per buffer type: %v", got)
	}
	if _, err := place.New(rt, m, place.Params{Context: place.ContextParams{Custom: &place.CustomMemory{PerDevice: map[string]uint64{"Nowhere0": 1}}}}); err == nil {
		t.Fatal("an unknown device accepted")
	}
}
