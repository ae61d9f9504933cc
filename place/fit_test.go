package place_test

import (
	"context"
	"reflect"
	"regexp"
	"strings"
	"testing"

	"github.com/ggload/ggload/ggml"
	"github.com/ggload/ggload/lab/synth"
	"github.com/ggload/ggload/lab/testenv"
	"github.com/ggload/ggload/place"
)

var fitDense = synth.Spec{Layers: 10, Embd: 512, FF: 1024, Heads: 4, Vocab: 1024, Weights: ggml.TypeQ8_0}

// vkParams places on Vulkan0 alone, reading the file (so that every
// weight of an offloaded layer is in Vulkan0's memory).
func vkParams() place.Params {
	params := place.Params{}
	params.DeviceNames = []string{"Vulkan0"}
	params.LoadMode = place.LoadNone
	return params
}

// Fit on Vulkan0 with a target that leaves room for only part of the
// model: the largest -ngl that fits is chosen, one more layer would not
// fit, and only n_gpu_layers changed.
func TestFitDense(t *testing.T) {
	rt := testenv.Runtime(t)
	vk := testenv.Vulkan(t)
	m := writeModel(t, rt, fitDense)
	params := vkParams()
	all, err := place.New(context.Background(), rt, m, params)
	if err != nil {
		t.Fatal(err)
	}
	need := vkUse(all, vk)
	free, _ := vk.Memory()
	// leave room for about 60% of the full offload
	target := free - need*6/10
	res, err := place.Fit(context.Background(), rt, m, params, place.FitOptions{Targets: []uint64{target}})
	if err != nil {
		t.Fatal(err)
	}
	why := strings.Join(res.Reasoning, "\n")
	ngl, _ := res.Plan.Params.NGPULayers.Count()
	if res.Status != place.FitAdjusted || ngl <= 0 || ngl >= 11 || vkUse(res.Plan, vk) > free-target {
		t.Fatalf("%s: chose -ngl %d using %d of %d:\n%s", res.Status, ngl, vkUse(res.Plan, vk), free-target, why)
	}
	if len(res.Changed) != 1 || res.Changed[0] != "n_gpu_layers" || len(res.Plan.Params.Overrides) != 0 {
		t.Fatalf("changed %v, overrides %v", res.Changed, res.Plan.Params.Overrides)
	}
	if res.Plan.LoadMode != place.LoadNone || len(res.Devices) != 1 || res.Devices[0].Before != need || res.Devices[0].After != vkUse(res.Plan, vk) {
		t.Fatalf("devices %+v, load mode %s", res.Devices, res.Plan.LoadMode)
	}
	params.NGPULayers = place.NLayers(ngl + 1)
	more, err := place.New(context.Background(), rt, m, params)
	if err != nil {
		t.Fatal(err)
	}
	if vkUse(more, vk) <= free-target {
		t.Fatalf("-ngl %d would fit too:\n%s", ngl+1, why)
	}
	for _, want := range []string{"misses it by", "the model's context of 4096 is <= the smallest fit may set, 4096: no change", "chose -c 4096 -ngl"} {
		if !strings.Contains(why, want) {
			t.Errorf("reasoning lacks %q:\n%s", want, why)
		}
	}
	// with no target, everything fits at once and nothing changes
	params.NGPULayers = place.AutoLayers()
	res, err = place.Fit(context.Background(), rt, m, params, place.FitOptions{Targets: []uint64{0}})
	if err != nil || res.Status != place.FitUnchanged || !res.Plan.Params.NGPULayers.IsAuto() || res.Plan.GPULayers != 11 || len(res.Changed) != 0 {
		t.Fatalf("no target: %v %+v %v", err, res, res.Reasoning)
	}
}

// Fit changes only what the user left unset: an explicit -ngl, a tensor
// split or a tensor override stays, and the fit says why it gave up.
func TestFitKeepsWhatTheUserSet(t *testing.T) {
	rt := testenv.Runtime(t)
	vk := testenv.Vulkan(t)
	m := writeModel(t, rt, fitDense)
	free, _ := vk.Memory()
	tight := place.FitOptions{Targets: []uint64{free - 1<<20}} // 1 MiB for weights: nothing fits
	for _, c := range []struct {
		name string
		set  func(*place.Params)
		why  string
		ngl  int
	}{
		{"ngl", func(p *place.Params) { p.NGPULayers = place.NLayers(3) }, "n_gpu_layers already set by user to 3, abort", 3},
		{"ngl-all", func(p *place.Params) { p.NGPULayers = place.AllLayers() }, "n_gpu_layers already set by user to -2, abort", 11},
		{"ot", func(p *place.Params) { p.Overrides = []place.Override{{Pattern: `ffn_down`, BufferType: "CPU"}} }, "tensor_buft_overrides already set by user, abort", 11},
		{"cpu-moe", func(p *place.Params) { p.CPUMoE = true }, "tensor_buft_overrides already set by user, abort", 11},
	} {
		t.Run(c.name, func(t *testing.T) {
			params := vkParams()
			c.set(&params)
			res, err := place.Fit(context.Background(), rt, m, params, tight)
			if err != nil {
				t.Fatal(err)
			}
			why := strings.Join(res.Reasoning, "\n")
			if res.Status != place.FitFailed || !strings.Contains(why, c.why) || res.Plan.GPULayers != c.ngl || len(res.Changed) != 0 {
				t.Fatalf("%s, %d layers offloaded:\n%s", res.Status, res.Plan.GPULayers, why)
			}
			if res.Plan.Params.NGPULayers != params.NGPULayers || len(res.Plan.Params.Overrides) != len(params.Overrides) {
				t.Fatalf("params changed: %+v", res.Plan.Params)
			}
		})
	}
	// the same -ngl where the model fits: no change needed, -ngl kept
	params := vkParams()
	params.NGPULayers = place.NLayers(3)
	res, err := place.Fit(context.Background(), rt, m, params, place.FitOptions{Targets: []uint64{0}})
	if err != nil || res.Status != place.FitUnchanged || res.Plan.GPULayers != 3 {
		t.Fatalf("%v %s %d", err, res.Status, res.Plan.GPULayers)
	}
}

// Without devices, fit compares the weights with the host's memory: a
// small model needs no change.
func TestFitNoDevices(t *testing.T) {
	rt := testenv.Runtime(t)
	m := writeModel(t, rt, fitDense)
	params := place.Params{}
	params.DeviceNames = []string{"none"}
	res, err := place.Fit(context.Background(), rt, m, params, place.FitOptions{})
	if err != nil || res.Status != place.FitUnchanged || len(res.Plan.Devices) != 0 || !strings.Contains(strings.Join(res.Reasoning, "\n"), "host memory") {
		t.Fatalf("%v %+v", err, res)
	}
}

// The plan fit returns has the context its measure planned: replayed
// once, and as a plan of the chosen parameters has it (its memory, its
// compute buffers and llama.cpp's lines), though fit measured with load
// mode none and an unset context.
func TestFitPlansTheContextOnce(t *testing.T) {
	rt := testenv.Runtime(t)
	m := writeModel(t, rt, fitDense)
	params := place.Params{DeviceNames: []string{"none"}, LoadMode: place.LoadMmap}
	before := place.MemoryReplays()
	res, err := place.Fit(context.Background(), rt, m, params, place.FitOptions{})
	if err != nil || res.Status != place.FitUnchanged {
		t.Fatalf("%v %+v", err, res)
	}
	if n := place.MemoryReplays() - before; n != 1 {
		t.Errorf("fit planned the context's memory %d times, want 1", n)
	}
	fresh, err := place.New(context.Background(), rt, m, res.Plan.Params)
	if err != nil {
		t.Fatal(err)
	}
	got, want := res.Plan.Context, fresh.Context
	if got == nil || want == nil || !got.ComputeKnown || !reflect.DeepEqual(got, want) {
		t.Fatalf("fit's context %+v, a plan's %+v", got, want)
	}
	if !reflect.DeepEqual(res.Plan.Log, fresh.Log) {
		t.Errorf("fit's plan logs %d lines, a plan %d", len(res.Plan.Log), len(fresh.Log))
	}
	// another context size is planned anew
	other := res.Plan.Params
	other.Context.NCtx = 512
	before = place.MemoryReplays()
	p, err := place.New(context.Background(), rt, m, other)
	if err != nil {
		t.Fatal(err)
	}
	if n := place.MemoryReplays() - before; n != 1 || p.Context.NCtx != 512 {
		t.Errorf("a plan of -c 512: %d replays, n_ctx %d", n, p.Context.NCtx)
	}
}

// For a mixture-of-experts model whose dense weights fit, fit keeps every
// layer offloaded and sends the expert weights of the layers that do not
// fit to host memory, by overrides that name those layers.
func TestFitMoE(t *testing.T) {
	rt := testenv.Runtime(t)
	vk := testenv.Vulkan(t)
	m := writeModel(t, rt, synth.Spec{Layers: 8, Embd: 256, FF: 512, Heads: 4, Vocab: 256, Experts: 8, ExpertsUsed: 2})
	params := vkParams()
	all, err := place.New(context.Background(), rt, m, params)
	if err != nil {
		t.Fatal(err)
	}
	free, _ := vk.Memory()
	target := free - vkUse(all, vk)*7/10
	res, err := place.Fit(context.Background(), rt, m, params, place.FitOptions{Targets: []uint64{target}})
	if err != nil {
		t.Fatal(err)
	}
	why := strings.Join(res.Reasoning, "\n")
	p := res.Plan.Params
	if res.Status != place.FitAdjusted || p.NGPULayers != place.NLayers(9) || len(p.Overrides) == 0 || vkUse(res.Plan, vk) > free-target {
		t.Fatalf("%s: -ngl %s, %d overrides, %d of %d:\n%s", res.Status, p.NGPULayers, len(p.Overrides), vkUse(res.Plan, vk), free-target, why)
	}
	if !strings.Contains(why, "dense weights leave") || !strings.Contains(why, "converting dense-only layers") {
		t.Fatalf("reasoning:\n%s", why)
	}
	layer := regexp.MustCompile(`^blk\\\.(\d+)\\\.`)
	var res2 []*regexp.Regexp
	for _, o := range p.Overrides {
		if !layer.MatchString(o.Pattern) || o.BufferType != "CPU" {
			t.Fatalf("override %+v", o)
		}
		res2 = append(res2, regexp.MustCompile(o.Pattern))
	}
	// the expert weights an override names are off Vulkan0, the others on
	// it (a layer that overflows keeps its attention and up weights)
	off := 0
	for _, tp := range res.Plan.Tensors {
		if !strings.Contains(tp.Name, "_exps") {
			continue
		}
		named := false
		for _, re := range res2 {
			named = named || re.MatchString(tp.Name)
		}
		if onVK := tp.Device == vk && !tp.BufferType.IsHost(); onVK == named {
			t.Fatalf("%s in %s, named by an override: %v", tp.Name, tp.BufferType.Name(), named)
		}
		if named {
			off++
		}
	}
	if off == 0 {
		t.Fatal("no expert weight left Vulkan0")
	}
}

// vkUse is what -fit counts on a device: the weights, the context and
// the compute buffers of its own (not host) buffer types.
func vkUse(p *place.Plan, vk *ggml.Device) uint64 {
	n := uint64(0)
	for _, e := range p.Breakdown() {
		if d, ok := e.BufferType.Device(); ok && d == vk && !e.BufferType.IsHost() {
			n += e.Model + e.Context + e.Compute
		}
	}
	return n
}

// An unset context shrinks first: between -fitc and the trained context,
// on 256-token steps, and nothing else changes when that is enough.
func TestFitShrinksContext(t *testing.T) {
	rt := testenv.Runtime(t)
	vk := testenv.Vulkan(t)
	m := writeModel(t, rt, fitDense) // trained on 4096 tokens
	params := vkParams()
	full, err := place.New(context.Background(), rt, m, params)
	if err != nil {
		t.Fatal(err)
	}
	if full.Context == nil || full.Context.NCtx != 4096 || !full.Context.ComputeKnown {
		t.Fatalf("context %+v", full.Context)
	}
	params.Context.NCtx = 256
	least, err := place.New(context.Background(), rt, m, params)
	if err != nil {
		t.Fatal(err)
	}
	params.Context.NCtx = 0
	free, _ := vk.Memory()
	hi, lo := vkUse(full, vk), vkUse(least, vk)
	target := free - (lo + (hi-lo)/2)
	res, err := place.Fit(context.Background(), rt, m, params, place.FitOptions{Targets: []uint64{target}, MinCtx: 256})
	if err != nil {
		t.Fatal(err)
	}
	why := strings.Join(res.Reasoning, "\n")
	if res.Status != place.FitAdjusted || len(res.Changed) != 1 || res.Changed[0] != "n_ctx" || !res.Plan.Params.NGPULayers.IsAuto() {
		t.Fatalf("%s %v:\n%s", res.Status, res.Changed, why)
	}
	if res.NCtx <= 256 || res.NCtx >= 4096 || res.NCtx%256 != 0 || res.Plan.Context.NCtx != res.NCtx || vkUse(res.Plan, vk) >= hi {
		t.Fatalf("n_ctx %d (plan %d), %d used:\n%s", res.NCtx, res.Plan.Context.NCtx, vkUse(res.Plan, vk), why)
	}
	if !strings.Contains(why, "context reduced from 4096 to") || !strings.Contains(why, "fits with the smaller context") {
		t.Fatalf("reasoning:\n%s", why)
	}
	// a context the user set stays, and the layers go instead
	params.Context.NCtx = 4096
	res, err = place.Fit(context.Background(), rt, m, params, place.FitOptions{Targets: []uint64{target}, MinCtx: 256})
	if err != nil {
		t.Fatal(err)
	}
	why = strings.Join(res.Reasoning, "\n")
	if res.Status != place.FitAdjusted || res.NCtx != 4096 || res.Changed[0] != "n_gpu_layers" || !strings.Contains(why, "context size set by user to 4096") {
		t.Fatalf("%s n_ctx %d %v:\n%s", res.Status, res.NCtx, res.Changed, why)
	}
	// -c 0 given explicitly: the full context, the layers go
	params.Context.NCtx = 0
	res, err = place.Fit(context.Background(), rt, m, params, place.FitOptions{Targets: []uint64{target}, MinCtx: place.FitFullCtx})
	if err != nil {
		t.Fatal(err)
	}
	if why = strings.Join(res.Reasoning, "\n"); res.NCtx != 4096 || !strings.Contains(why, "the full context of 4096 was asked for") {
		t.Fatalf("n_ctx %d:\n%s", res.NCtx, why)
	}
}

// Over two devices (an RPC server, then Vulkan0), fit fills the last
// device first, back to front, and writes the layers of each as the tensor
// split; each device keeps its own target free.
func TestFitTwoDevices(t *testing.T) {
	rt := testenv.Runtime(t)
	vk := testenv.Vulkan(t)
	testenv.RPC(t, 2)
	m := writeModel(t, rt, fitDense)
	params := vkParams()
	all, err := place.New(context.Background(), rt, m, params)
	if err != nil {
		t.Fatal(err)
	}
	need := vkUse(all, vk)
	params.DeviceNames = []string{"RPC0", "Vulkan0"}
	rpc, err := rt.DeviceByName("RPC0")
	if err != nil {
		t.Fatal(err)
	}
	rpcFree, _ := rpc.Memory()
	vkFree, _ := vk.Memory()
	// room for about a quarter of the weights on each
	o := place.FitOptions{Targets: []uint64{rpcFree - need/4, vkFree - need/4}}
	res, err := place.Fit(context.Background(), rt, m, params, o)
	if err != nil {
		t.Fatal(err)
	}
	why := strings.Join(res.Reasoning, "\n")
	p := res.Plan.Params
	t.Log(why)
	if res.Status != place.FitAdjusted || len(p.TensorSplit) != 2 || len(res.Changed) != 2 || res.Changed[1] != "tensor_split" {
		t.Fatalf("%s %v split %v:\n%s", res.Status, res.Changed, p.TensorSplit, why)
	}
	if n, _ := p.NGPULayers.Count(); int(p.TensorSplit[0]+p.TensorSplit[1]) != n || n >= 11 || p.TensorSplit[1] == 0 {
		t.Fatalf("-ngl %s split %v:\n%s", p.NGPULayers, p.TensorSplit, why)
	}
	for i, d := range res.Devices {
		used := vkUse(res.Plan, d.Device)
		if used != d.After || used+d.Target > d.Free {
			t.Fatalf("%s uses %d (after %d) of %d free, target %d:\n%s", d.Device.Name(), used, d.After, d.Free, d.Target, why)
		}
		if d.Target != o.Targets[i] {
			t.Fatalf("%s target %d", d.Device.Name(), d.Target)
		}
	}
}

// A draft model beside the main one (FitExtra) counts in every measure,
// its context following the main one's: the same target leaves a smaller
// context than without it, and the reasoning says what it took.
func TestFitCountsTheDraftModel(t *testing.T) {
	rt := testenv.Runtime(t)
	vk := testenv.Vulkan(t)
	m := writeModel(t, rt, fitDense)
	params := vkParams()
	full, err := place.New(context.Background(), rt, m, params)
	if err != nil {
		t.Fatal(err)
	}
	params.Context.NCtx = 256
	least, err := place.New(context.Background(), rt, m, params)
	if err != nil {
		t.Fatal(err)
	}
	params.Context.NCtx = 0
	free, _ := vk.Memory()
	hi, lo := vkUse(full, vk), vkUse(least, vk)
	o := place.FitOptions{Targets: []uint64{free - (lo + (hi-lo)*3/4)}, MinCtx: 256}
	alone, err := place.Fit(context.Background(), rt, m, params, o)
	if err != nil {
		t.Fatal(err)
	}
	draft := params
	draft.Context.NOutputsMax = 1
	o.Extra = &place.FitExtra{Model: m, Params: draft}
	with, err := place.Fit(context.Background(), rt, m, params, o)
	if err != nil {
		t.Fatal(err)
	}
	why := strings.Join(with.Reasoning, "\n")
	if alone.Status != place.FitAdjusted || with.NCtx >= alone.NCtx || !strings.Contains(why, "the extra model at -c 4096") {
		t.Fatalf("n_ctx %d alone, %d with the draft (%s):\n%s", alone.NCtx, with.NCtx, with.Status, why)
	}
	// one sharing the main model's weights (an MTP context) counts less
	o.Extra.SharesModel = true
	mtp, err := place.Fit(context.Background(), rt, m, params, o)
	if err != nil {
		t.Fatal(err)
	}
	if mtp.NCtx < with.NCtx || mtp.NCtx > alone.NCtx {
		t.Fatalf("n_ctx %d with an MTP context, %d alone, %d with a draft", mtp.NCtx, alone.NCtx, with.NCtx)
	}
	// an extra model that cannot be planned is fitted without, and said
	bad := draft
	bad.DeviceNames = []string{"nonexistent"}
	o.Extra = &place.FitExtra{Model: m, Params: bad}
	res, err := place.Fit(context.Background(), rt, m, params, o)
	if err != nil {
		t.Fatal(err)
	}
	if res.NCtx != alone.NCtx || !strings.Contains(strings.Join(res.Reasoning, "\n"), "failed to measure the memory of the extra model, fitting without it") {
		t.Fatalf("unplannable extra: n_ctx %d:\n%s", res.NCtx, strings.Join(res.Reasoning, "\n"))
	}
}
