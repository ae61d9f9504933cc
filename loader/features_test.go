package loader_test

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"os"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/ggload/ggload/ggml"
	"github.com/ggload/ggload/gguf"
	"github.com/ggload/ggload/lab/synth"
	"github.com/ggload/ggload/lab/testenv"
	"github.com/ggload/ggload/loader"
	"github.com/ggload/ggload/place"
)

func planFor(t *testing.T, rt *ggml.Runtime, gm *gguf.Model, set func(*place.Params)) *place.Plan {
	t.Helper()
	params := place.Params{}
	params.NoExtraBufts = true
	if set != nil {
		set(&params)
	}
	p, err := place.New(context.Background(), rt, gm, params)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// Per-layer embeddings marked lazy by the architecture stay in the mapping
// whatever the load mode, on the CPU buffer type.
func TestLazyTensorsStayMapped(t *testing.T) {
	rt := testenv.Runtime(t)
	testenv.Vulkan(t)
	path := testenv.ModelFile(t, rt, synth.Spec{Arch: "gemma4", Layers: 3, Embd: 128, FF: 256, Heads: 2, Vocab: 256, PerLayer: 32})
	for _, mode := range []place.LoadMode{place.LoadNone, place.LoadMmap} {
		gm := testenv.OpenModel(t, path)
		p := planFor(t, rt, gm, func(p *place.Params) { p.LoadMode = mode; p.Lazy = place.LazyOn })
		lm, err := loader.Load(context.Background(), p, loader.Options{})
		if err != nil {
			t.Fatal(err)
		}
		found := false
		for pl := range lm.Placements() {
			if pl.Plan.Name != "per_layer_token_embd.weight" {
				continue
			}
			found = true
			if !pl.Plan.Lazy || pl.Path != loader.PathLazy || pl.Plan.BufferType != rt.CPUBufferType() {
				t.Fatalf("%s: lazy %v path %s buffer type %s", mode, pl.Plan.Lazy, pl.Path, pl.Plan.BufferType.Name())
			}
			mp := lm.Mappings()[pl.Plan.Weight.File]
			if mp == nil || testenv.DataAddr(pl.Tensor) != mp.Addr(pl.Plan.Weight.Offset) {
				t.Fatalf("%s: lazy tensor not in the mapping", mode)
			}
		}
		if !found {
			t.Fatal("no per-layer embedding")
		}
		verify(t, gm, lm)
		lm.Close()
	}
	// auto: only tensors above 4 GiB are lazy
	gm := testenv.OpenModel(t, path)
	p := planFor(t, rt, gm, func(p *place.Params) { p.Lazy = place.LazyAuto })
	for _, tp := range p.Tensors {
		if tp.Lazy {
			t.Fatalf("%s lazy under auto", tp.Name)
		}
	}
}

// After an mmap load with layers offloaded, the parts of the mapping that
// no zero-copy tensor uses are unmapped: the fragment list and the
// process's own maps agree.
func TestUnusedFragmentsReleased(t *testing.T) {
	rt := testenv.Runtime(t)
	testenv.Vulkan(t)
	path := testenv.ModelFile(t, rt, synth.Spec{Layers: 6, Embd: 512, FF: 1024, Heads: 4, Vocab: 4096})
	gm := testenv.OpenModel(t, path)
	// token_embd (the first weight in the file) stays on the CPU; the
	// layers and the output go to Vulkan0: only the start stays mapped
	p := planFor(t, rt, gm, func(p *place.Params) { p.LoadMode = place.LoadMmap; p.DeviceNames = []string{"Vulkan0"} })
	lm, err := loader.Load(context.Background(), p, loader.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer lm.Close()
	verify(t, gm, lm)
	mp := lm.Mappings()[0]
	frags := mp.Fragments()
	var mapped int64
	for _, f := range frags {
		mapped += f[1] - f[0]
	}
	if len(frags) == 0 || mapped >= mp.Size()/2 {
		t.Fatalf("fragments %v of %d bytes still mapped", frags, mp.Size())
	}
	// the kernel agrees: the file's mappings in /proc/self/maps cover only
	// the fragments (rounded to pages)
	var kernel int64
	f, err := os.Open("/proc/self/maps")
	if err != nil {
		t.Skip("no /proc/self/maps")
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		fields := strings.Fields(sc.Text())
		if len(fields) >= 6 && fields[5] == path {
			var lo, hi uint64
			fmt.Sscanf(fields[0], "%x-%x", &lo, &hi)
			kernel += int64(hi - lo)
		}
	}
	if kernel == 0 || kernel > mapped+2*4096 || kernel < mapped-4096 {
		t.Fatalf("kernel maps %d bytes of %s, fragments say %d", kernel, path, mapped)
	}
}

// The staging ring with tiny slots: many cycles, tensors spanning slots,
// tensor offsets that are not slot-aligned.
func TestStagingRingCycles(t *testing.T) {
	rt := testenv.Runtime(t)
	testenv.Vulkan(t)
	path := testenv.ModelFile(t, rt, smallSpec)
	for _, mode := range []place.LoadMode{place.LoadNone, place.LoadDirectIO} {
		gm := testenv.OpenModel(t, path)
		p := planFor(t, rt, gm, func(p *place.Params) { p.LoadMode = mode; p.DeviceNames = []string{"Vulkan0"} })
		size := uint64(3000)
		if mode == place.LoadDirectIO {
			size = 3 * 4096 // room for aligned 4 KiB reads
		}
		lm, err := loader.Load(context.Background(), p, loader.Options{StagingSlots: 2, StagingSize: size})
		if err != nil {
			t.Fatal(err)
		}
		if lm.Stats.Moved[loader.PathStaged] == 0 || lm.Stats.StagingSize != size {
			t.Fatalf("%s: staging not used: %+v", mode, lm.Stats)
		}
		verify(t, gm, lm)
		lm.Close()
	}
}

// plantNaN overwrites the scale of the first block of a q4_K tensor with a
// NaN (f16 0x7e00) in a copy of the model.
func plantNaN(t *testing.T, path, tensor string) string {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	gm := testenv.OpenModel(t, path)
	w, ok := gm.Weight(tensor)
	if !ok {
		t.Fatalf("no %s", tensor)
	}
	data[w.Offset], data[w.Offset+1] = 0x00, 0x7e
	out := strings.TrimSuffix(path, ".gguf") + "-nan.gguf"
	if err := os.WriteFile(out, data, 0o644); err != nil {
		t.Fatal(err)
	}
	return out
}

func TestCheckTensorsFindsNaN(t *testing.T) {
	rt := testenv.Runtime(t)
	testenv.Vulkan(t)
	path := plantNaN(t, testenv.ModelFile(t, rt, smallSpec), "blk.2.ffn_down.weight")
	for _, c := range []struct {
		mode place.LoadMode
		devs []string
	}{{place.LoadMmap, []string{"none"}}, {place.LoadNone, []string{"none"}}, {place.LoadNone, []string{"Vulkan0"}}, {place.LoadMmap, []string{"Vulkan0"}}} {
		gm := testenv.OpenModel(t, path)
		p := planFor(t, rt, gm, func(p *place.Params) { p.LoadMode = c.mode; p.DeviceNames = c.devs })
		before := testenv.LiveBuffers()
		_, err := loader.Load(context.Background(), p, loader.Options{CheckTensors: true})
		if !errors.Is(err, loader.ErrInvalidData) || !strings.Contains(err.Error(), "'blk.2.ffn_down.weight'") || strings.Contains(err.Error(), "ffn_up") {
			t.Fatalf("%s on %v: %v", c.mode, c.devs, err)
		}
		w, _ := gm.Weight("blk.2.ffn_down.weight")
		wantPlace(t, fmt.Sprintf("%s on %v", c.mode, c.devs), err, loader.Error{Op: "validate", Path: path, Tensor: w.Name, Off: w.Offset})
		if after := testenv.LiveBuffers(); after != before {
			t.Fatalf("%d buffers leaked", after-before)
		}
		// the clean model passes
		_ = gm
	}
}

// Cancelling mid-load (context or progress callback) frees every buffer and
// every goroutine the load started.
func TestCancelFreesEverything(t *testing.T) {
	rt := testenv.Runtime(t)
	testenv.Vulkan(t)
	path := testenv.ModelFile(t, rt, smallSpec)
	for _, mode := range []place.LoadMode{place.LoadNone, place.LoadMmap} {
		for _, how := range []string{"callback", "context"} {
			gm := testenv.OpenModel(t, path)
			p := planFor(t, rt, gm, func(p *place.Params) { p.LoadMode = mode; p.TensorSplit = nil })
			buffers, goroutines := testenv.LiveBuffers(), runtime.NumGoroutine()
			ctx, cancel := context.WithCancel(context.Background())
			calls := 0
			opts := loader.Options{Readers: 4, ChunkSize: 4096, Progress: func(done, total uint64) bool {
				calls++
				if calls == 5 {
					if how == "context" {
						cancel()
					} else {
						return false
					}
				}
				return true
			}}
			_, err := loader.Load(ctx, p, opts)
			cancel()
			if !errors.Is(err, loader.ErrCanceled) {
				t.Fatalf("%s/%s: %v", mode, how, err)
			}
			if e, ok := err.(*loader.Error); !ok || e.Op != "load" || e.Path != path {
				t.Fatalf("%s/%s: the place %+v: %v", mode, how, e, err)
			}
			if b := testenv.LiveBuffers(); b != buffers {
				t.Fatalf("%s/%s: %d buffers leaked", mode, how, b-buffers)
			}
			deadline := time.Now().Add(2 * time.Second)
			for runtime.NumGoroutine() > goroutines && time.Now().Before(deadline) {
				time.Sleep(10 * time.Millisecond)
			}
			if g := runtime.NumGoroutine(); g > goroutines {
				t.Fatalf("%s/%s: %d goroutines leaked", mode, how, g-goroutines)
			}
		}
	}
}

func TestProgressIsMonotonic(t *testing.T) {
	rt := testenv.Runtime(t)
	testenv.Vulkan(t)
	path := testenv.ModelFile(t, rt, smallSpec)
	gm := testenv.OpenModel(t, path)
	p := planFor(t, rt, gm, func(p *place.Params) { p.LoadMode = place.LoadNone; p.NGPULayers = place.NLayers(3) })
	var seen []uint64
	var total uint64
	lm, err := loader.Load(context.Background(), p, loader.Options{Readers: 3, ChunkSize: 8192, Progress: func(done, t uint64) bool {
		seen = append(seen, done)
		total = t
		return true
	}})
	if err != nil {
		t.Fatal(err)
	}
	defer lm.Close()
	if len(seen) < 3 || seen[len(seen)-1] != total || total != lm.Stats.Bytes {
		t.Fatalf("progress %v of %d (loaded %d)", seen, total, lm.Stats.Bytes)
	}
	for i := 1; i < len(seen); i++ {
		if seen[i] < seen[i-1] {
			t.Fatalf("progress went back: %v", seen)
		}
	}
}

// A file truncated after the model was opened: an error that names the
// tensor, in every mode, and no crash.
func TestTruncatedAfterOpen(t *testing.T) {
	rt := testenv.Runtime(t)
	for _, mode := range []place.LoadMode{place.LoadMmap, place.LoadNone} {
		path := testenv.ModelFile(t, rt, smallSpec)
		gm := testenv.OpenModel(t, path)
		p := planFor(t, rt, gm, func(p *place.Params) { p.LoadMode = mode; p.DeviceNames = []string{"none"} })
		last := gm.Weights[0]
		for _, w := range gm.Weights {
			if w.Offset > last.Offset {
				last = w
			}
		}
		if err := os.Truncate(path, last.Offset+last.Size/2); err != nil {
			t.Fatal(err)
		}
		_, err := loader.Load(context.Background(), p, loader.Options{})
		if err == nil || !strings.Contains(err.Error(), "'"+last.Name+"'") || !strings.Contains(err.Error(), "truncated") {
			t.Fatalf("%s: %v", mode, err)
		}
		wantPlace(t, mode.String(), err, loader.Error{Op: "open", Path: path, Tensor: last.Name, Off: last.Offset}, loader.ErrTruncated, loader.ErrFileChanged)
	}
}

// The file shrinks while the load runs: reads (none) and mapped copies
// (mmap to a device) fail with the tensor's name instead of a SIGBUS.
func TestShrinksDuringLoad(t *testing.T) {
	rt := testenv.Runtime(t)
	testenv.Vulkan(t)
	for _, mode := range []place.LoadMode{place.LoadNone, place.LoadMmap} {
		path := testenv.ModelFile(t, rt, smallSpec)
		gm := testenv.OpenModel(t, path)
		p := planFor(t, rt, gm, func(p *place.Params) { p.LoadMode = mode; p.DeviceNames = []string{"Vulkan0"} })
		calls := 0
		_, err := loader.Load(context.Background(), p, loader.Options{Readers: 1, Progress: func(done, total uint64) bool {
			calls++
			if calls == 3 {
				if err := os.Truncate(path, 4096); err != nil {
					t.Error(err)
				}
			}
			return true
		}})
		if err == nil || !strings.Contains(err.Error(), "tensor '") || !(strings.Contains(err.Error(), "shrink") || strings.Contains(err.Error(), "shrank")) {
			t.Fatalf("%s: %v", mode, err)
		}
		// the tensor the error names is its place
		var e *loader.Error
		if !errors.As(err, &e) || e.Path != path || e.Tensor == "" || !strings.Contains(err.Error(), "'"+e.Tensor+"'") || !errors.Is(err, loader.ErrTruncated) {
			t.Fatalf("%s: the place %+v: %v", mode, e, err)
		}
		if w, _ := gm.Weight(e.Tensor); e.Off != w.Offset {
			t.Fatalf("%s: tensor %s at %d, its data at %d", mode, e.Tensor, e.Off, w.Offset)
		}
	}
}

// With the CPU's extra buffer types on (llama.cpp's default), weights the
// CPU backend repacks land in CPU_REPACK: the load succeeds in every mode,
// the other tensors read back exactly, and reading a repacked one is refused
// with an error instead of a native abort.
func TestRepackedTensors(t *testing.T) {
	rt := testenv.Runtime(t)
	cpu := rt.CPUDevice()
	if len(cpu.ExtraBufferTypes()) == 0 {
		t.Skip("this CPU backend has no extra buffer types (no CPU_REPACK on this CPU)")
	}
	spec := smallSpec
	spec.Weights = ggml.TypeQ4_0
	path := testenv.ModelFile(t, rt, spec)
	for _, mode := range []place.LoadMode{place.LoadNone, place.LoadMmap, place.LoadDirectIO} {
		t.Run(mode.String(), func(t *testing.T) {
			gm := testenv.OpenModel(t, path)
			p := planFor(t, rt, gm, func(p *place.Params) {
				p.NoExtraBufts = false
				p.LoadMode = mode
				p.DeviceNames = []string{"none"}
			})
			lm, err := loader.Load(context.Background(), p, loader.Options{})
			if err != nil {
				t.Fatal(err)
			}
			defer lm.Close()
			repacked, plain := 0, 0
			for pl := range lm.Placements() {
				if pl.Tensor == nil {
					continue
				}
				got, err := pl.Tensor.Bytes()
				if pl.Plan.BufferType.Name() == "CPU_REPACK" {
					repacked++
					if err == nil || !strings.Contains(err.Error(), "cannot be read back") || !strings.Contains(err.Error(), pl.Plan.Name) {
						t.Fatalf("%s: reading a repacked tensor: %v", pl.Plan.Name, err)
					}
					continue
				}
				if err != nil {
					t.Fatalf("%s: %v", pl.Plan.Name, err)
				}
				w := pl.Plan.Weight
				want := make([]byte, w.Size)
				if _, err := gm.Files[w.File].ReaderAt().ReadAt(want, w.Offset); err != nil {
					t.Fatal(err)
				}
				if string(got) != string(want) {
					t.Fatalf("%s: bytes differ from the file", pl.Plan.Name)
				}
				plain++
			}
			if repacked == 0 || plain == 0 {
				t.Fatalf("repacked %d, plain %d: want both", repacked, plain)
			}
			t.Logf("%d tensors repacked, %d read back", repacked, plain)
		})
	}
}

// Verify finds a tensor whose bytes on its device no longer match the file.
func TestVerifyFindsDifferences(t *testing.T) {
	rt := testenv.Runtime(t)
	testenv.Vulkan(t)
	path := testenv.ModelFile(t, rt, smallSpec)
	gm := testenv.OpenModel(t, path)
	p := planFor(t, rt, gm, func(p *place.Params) { p.LoadMode = place.LoadNone; p.DeviceNames = []string{"Vulkan0"} })
	lm, err := loader.Load(context.Background(), p, loader.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer lm.Close()
	v, err := lm.Verify()
	if err != nil || v.Tensors == 0 || v.ByDevice["Vulkan0"] == 0 {
		t.Fatalf("verify of a good load: %+v, %v", v, err)
	}
	x, _ := lm.Tensor("blk.3.ffn_down.weight")
	if err := x.Set([]byte{0xff, 0xee}, 100); err != nil {
		t.Fatal(err)
	}
	_, err = lm.Verify()
	if err == nil || !strings.Contains(err.Error(), "blk.3.ffn_down.weight") {
		t.Fatalf("verify after a change: %v", err)
	}
	w, _ := gm.Weight("blk.3.ffn_down.weight")
	wantPlace(t, "verify", err, loader.Error{Op: "verify", Path: path, Tensor: w.Name, Off: w.Offset}, loader.ErrMismatch)
}
