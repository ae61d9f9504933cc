package place

import (
	"slices"
	"testing"

	"github.com/ggload/ggload/ggml"
)

// llama.cpp's arithmetic: -ngl N on a model of L layers starts offloading
// at L+1-N; the split points are cumulative shares; upper_bound picks the
// device.
func TestGPULayers(t *testing.T) {
	for _, c := range []struct {
		nLayer, ngl, devs int
		start, act        int
	}{
		{32, 20, 1, 13, 20},
		{32, -1, 1, 0, 33},
		{32, 99, 2, 0, 33},
		{32, 0, 1, 33, 0},
		{32, 33, 1, 0, 33},
		{32, 20, 0, 13, 0}, // no devices: nothing is offloaded
		{1, 1, 1, 1, 1},
	} {
		start, act := gpuLayers(c.nLayer, c.ngl, c.devs)
		if start != c.start || act != c.act {
			t.Errorf("n_layer %d, ngl %d, %d devices: start %d act %d; want %d %d", c.nLayer, c.ngl, c.devs, start, act, c.start, c.act)
		}
	}
}

func TestSplitPointsAndLayerDevice(t *testing.T) {
	// 24 GB and 12 GB free with 21 offloaded layers: the first device takes
	// 14 of them (2/3), layer 13 of the offload is the last on device 0
	splits := splitPoints([]float32{24e9, 12e9})
	if splits[1] != 1 || splits[0] < 0.666 || splits[0] > 0.667 {
		t.Fatalf("splits %v", splits)
	}
	start, act := gpuLayers(32, 21, 2) // i_gpu_start 12
	var devs []int
	for il := 0; il <= 32; il++ {
		devs = append(devs, layerDevice(il, start, act, splits))
	}
	if start != 12 || devs[11] != -1 || devs[12] != 0 {
		t.Fatalf("start %d: %v", start, devs)
	}
	// offload index 13 (13/21 = 0.619) is on device 0, index 14 (0.667) on device 1
	if devs[12+13] != 0 || devs[12+14] != 1 || devs[32] != 1 {
		t.Fatalf("devices %v", devs)
	}
	// a worked case: offload positions 13 and 14 of 21
	if d := layerDevice(13, 0, 21, splits); d != 0 {
		t.Errorf("layer 13: device %d", d)
	}
	if d := layerDevice(14, 0, 21, splits); d != 1 {
		t.Errorf("layer 14: device %d", d)
	}
	// explicit split 3:1 over 8 layers: 6 and 2
	var got []int
	for il := 0; il < 8; il++ {
		got = append(got, layerDevice(il, 0, 8, splitPoints([]float32{3, 1})))
	}
	if want := []int{0, 0, 0, 0, 0, 0, 1, 1}; !slices.Equal(got, want) {
		t.Errorf("3:1 split: %v", got)
	}
	// all-zero shares: uniform (llama.cpp v0.5.0 divides by zero here)
	if u := splitPoints([]float32{0, 0, 0, 0}); !slices.Equal(u, []float32{0.25, 0.5, 0.75, 1}) {
		t.Errorf("uniform %v", u)
	}
	// a device with a zero share never gets a layer
	for il := 0; il < 10; il++ {
		if d := layerDevice(il, 0, 10, splitPoints([]float32{1, 0, 1})); d == 1 {
			t.Errorf("layer %d on the zero-share device", il)
		}
	}
}

func TestResolveModesAutoFallback(t *testing.T) {
	yes, no := ggml.Caps{MmapSupport: true}, ggml.Caps{}
	for _, c := range []struct {
		mode     LoadMode
		lazy     LazyMode
		caps     []ggml.Caps
		wantMode LoadMode
		mmap     bool
		wantLazy LazyMode
	}{
		{LoadAuto, LazyAuto, []ggml.Caps{yes, yes}, LoadMmap, true, LazyAuto},
		{LoadAuto, LazyAuto, []ggml.Caps{yes, no}, LoadNone, false, LazyOff}, // an iGPU without mmap support
		{LoadAuto, LazyOn, []ggml.Caps{no}, LoadNone, false, LazyOn},         // lazy ON is kept
		{LoadAuto, LazyAuto, nil, LoadMmap, true, LazyAuto},                  // CPU only
		{LoadMmap, LazyAuto, []ggml.Caps{no}, LoadMmap, true, LazyOff},       // explicit mmap is kept
		{LoadMmapMlock, LazyOff, []ggml.Caps{yes}, LoadMmapMlock, true, LazyOff},
		{LoadMlock, LazyOff, []ggml.Caps{yes}, LoadMlock, false, LazyOff},
		{LoadDirectIO, LazyAuto, []ggml.Caps{yes}, LoadDirectIO, false, LazyAuto},
	} {
		m, mmap, lz := autoModes(c.mode, c.lazy, c.caps)
		if m != c.wantMode || mmap != c.mmap || lz != c.wantLazy {
			t.Errorf("%s/%s over %v: %s mmap=%v lazy %s", c.mode, c.lazy, c.caps, m, mmap, lz)
		}
	}
}
