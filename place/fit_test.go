package place_test

import (
	"strings"
	"testing"

	"github.com/ggload/ggload/ggml"
	"github.com/ggload/ggload/internal/synth"
	"github.com/ggload/ggload/internal/testenv"
	"github.com/ggload/ggload/place"
)

// Fit on Vulkan0 with a reserve that leaves room for only part of the
// model: the largest -ngl that fits is chosen, and one more layer would not
// fit.
func TestFitDense(t *testing.T) {
	rt := testenv.Runtime(t)
	vk := testenv.Vulkan(t)
	m := writeModel(t, rt, synth.Spec{Layers: 10, Embd: 512, FF: 1024, Heads: 4, Vocab: 1024, Weights: ggml.TypeQ8_0})
	params := place.DefaultParams()
	params.Devices = []string{"Vulkan0"}
	params.LoadMode = place.LoadNone
	all, err := place.New(rt, m, params)
	if err != nil {
		t.Fatal(err)
	}
	need := vkUse(all, vk)
	free, _ := vk.Memory()
	// leave room for about 60% of the full offload
	reserve := free - need*6/10
	res, err := place.Fit(rt, m, params, reserve)
	if err != nil {
		t.Fatal(err)
	}
	ngl := res.Plan.Params.NGPULayers
	if ngl <= 0 || ngl >= 11 || vkUse(res.Plan, vk) > free-reserve {
		t.Fatalf("chose -ngl %d using %d of %d: %s", ngl, vkUse(res.Plan, vk), free-reserve, strings.Join(res.Reasoning, "\n"))
	}
	params.NGPULayers = ngl + 1
	more, err := place.New(rt, m, params)
	if err != nil {
		t.Fatal(err)
	}
	if vkUse(more, vk) <= free-reserve {
		t.Fatalf("-ngl %d would fit too", ngl+1)
	}
	if !strings.Contains(strings.Join(res.Reasoning, "\n"), "does not fit") {
		t.Fatalf("reasoning %q", res.Reasoning)
	}
	// with no reserve, everything fits at once
	res, err = place.Fit(rt, m, params, 0)
	if err != nil || res.Plan.Params.NGPULayers != 11 || !strings.HasSuffix(res.Reasoning[0], ": fits") {
		t.Fatalf("no reserve: %v %v", err, res.Reasoning)
	}
}

// For MoE models Fit keeps every layer offloaded and moves the experts of
// the fewest first layers to the CPU.
func TestFitMoE(t *testing.T) {
	rt := testenv.Runtime(t)
	vk := testenv.Vulkan(t)
	m := writeModel(t, rt, synth.Spec{Layers: 8, Embd: 256, FF: 512, Heads: 4, Vocab: 256, Experts: 8, ExpertsUsed: 2})
	params := place.DefaultParams()
	params.Devices = []string{"Vulkan0"}
	params.LoadMode = place.LoadNone
	all, err := place.New(rt, m, params)
	if err != nil {
		t.Fatal(err)
	}
	free, _ := vk.Memory()
	reserve := free - vkUse(all, vk)*7/10
	res, err := place.Fit(rt, m, params, reserve)
	if err != nil {
		t.Fatal(err)
	}
	p := res.Plan.Params
	if p.NGPULayers != 9 || p.NCPUMoE <= 0 || p.NCPUMoE >= 8 {
		t.Fatalf("chose -ngl %d --n-cpu-moe %d:\n%s", p.NGPULayers, p.NCPUMoE, strings.Join(res.Reasoning, "\n"))
	}
	for _, tp := range res.Plan.Tensors {
		// an override to the CPU goes through the CPU list, whose first
		// choice without mmap is Vulkan0's pinned host memory
		onHost := tp.BufferType.IsHost() || tp.Device == rt.CPUDevice()
		if strings.Contains(tp.Name, "_exps") && (tp.Layer < p.NCPUMoE) != onHost {
			t.Fatalf("%s (layer %d) in %s", tp.Name, tp.Layer, tp.BufferType.Name())
		}
	}
}

func vkUse(p *place.Plan, vk *ggml.Device) uint64 {
	for _, u := range p.Usage {
		if u.Device == vk {
			return u.Allocated
		}
	}
	return 0
}
