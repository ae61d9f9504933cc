package place_test

import (
	"context"
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
	params := place.Params{DeviceNames: []string{vk.Name()}, NGPULayers: place.NLayers(4),
		Context: place.ContextParams{Custom: &place.CustomMemory{PerLayer: 1 << 20, PerDevice: map[string]uint64{"CPU": 3 << 20, vk.Name(): 5 << 20}}}}
	p, err := place.New(context.Background(), rt, m, params)
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
	if _, err := place.New(context.Background(), rt, m, place.Params{Context: place.ContextParams{Custom: &place.CustomMemory{PerDevice: map[string]uint64{"Nowhere0": 1}}}}); err == nil {
		t.Fatal("an unknown device accepted")
	}
}

// DeviceMemory gathers the breakdown's buffer types by device, the host's
// row naming the CPU device; its rows add up to the breakdown.
func TestDeviceMemory(t *testing.T) {
	rt := testenv.Runtime(t)
	m := writeModel(t, rt, small)
	var devices [][]string
	devices = append(devices, []string{"none"})
	if _, err := rt.DeviceByName("Vulkan0"); err == nil {
		devices = append(devices, []string{"Vulkan0"})
	}
	for _, devs := range devices {
		p, err := place.New(context.Background(), rt, m, place.Params{DeviceNames: devs, Context: place.ContextParams{NCtx: 512}})
		if err != nil {
			t.Fatal(err)
		}
		var want, got, host uint64
		for _, e := range p.Breakdown() {
			want += e.Model + e.Context + e.Compute
			if e.BufferType.IsHost() {
				host += e.Model + e.Context + e.Compute
			}
		}
		rows := p.DeviceMemory()
		if len(rows) != len(p.Devices)+1 {
			t.Fatalf("%v: %d rows for %d devices and the host", devs, len(rows), len(p.Devices))
		}
		for i, r := range rows {
			got += r.Self()
			if i < len(p.Devices) && (r.Device != p.Devices[i] || r.Host || r.Total == 0 || !r.ComputeKnown) {
				t.Errorf("%v: row %d %+v", devs, i, r)
			}
		}
		h := rows[len(rows)-1]
		if !h.Host || h.Device != p.CPU || h.Self() != host || host == 0 {
			t.Errorf("%v: host row %+v, %d bytes of host buffer types", devs, h, host)
		}
		if got != want || want == 0 {
			t.Errorf("%v: rows hold %d bytes, the breakdown %d", devs, got, want)
		}
	}
}
