package tests

// CUDA: ggload against llama.cpp of the pin on CUDA0, loads in every mode
// read back from the device, --check-tensors on the device paths, and the
// split modes. These tests need a CUDA device (GPU runners:
// scripts/gpu-pack.sh and its run.sh); elsewhere they skip, or fail where
// GGLOAD_REQUIRE names cuda.

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/ggload/ggload/bindings"
	"github.com/ggload/ggload/ggml"
	"github.com/ggload/ggload/lab/llama"
	"github.com/ggload/ggload/lab/synth"
	"github.com/ggload/ggload/lab/testenv"
	"github.com/ggload/ggload/loader"
	"github.com/ggload/ggload/place"
	"github.com/google/go-cmp/cmp"
)

var cudaModels = map[string]synth.Spec{
	"dense8": {Layers: 8, Embd: 256, FF: 512, Heads: 4, HeadsKV: 2, Vocab: 512, RopeFreqs: true, Weights: ggml.TypeQ4_K, Embeddings: ggml.TypeQ6_K, Seed: 11},
	"moe8":   {Layers: 8, Embd: 256, FF: 256, Heads: 4, Vocab: 256, Experts: 4, ExpertsUsed: 2, Seed: 12},
	"tied6":  {Layers: 6, Embd: 128, FF: 256, Heads: 2, Vocab: 300, Tied: true, Weights: ggml.TypeQ4_0, Seed: 13},
}

// cudaModelFiles writes every model of cudaModels once per test.
func cudaModelFiles(t *testing.T, rt *ggml.Runtime) map[string]string {
	t.Helper()
	dir := t.TempDir()
	paths := map[string]string{}
	for name, spec := range cudaModels {
		p, err := spec.Write(rt, filepath.Join(dir, name+".gguf"))
		if err != nil {
			t.Fatal(err)
		}
		paths[name] = p
	}
	return paths
}

// cudaPlacement is what a load is compared on: where every layer went, the
// buffer type of every tensor as the tensor's own buffer reports it, and
// every buffer with its exact size. It is read from the live ggml objects of
// both loaders in the same way.
type cudaPlacement struct {
	layers  map[int]string
	tensors []string // "name buffer-type"
	buffers []string // "buffer-name size"
}

type cudaNamedTensor struct {
	name string
	c    *bindings.Tensor
}

func cudaPlacementOf(rt *ggml.Runtime, layers map[int]string, ts []cudaNamedTensor) cudaPlacement {
	lib := testenv.Lib(rt)
	r := cudaPlacement{layers: layers}
	seen := map[bindings.Buffer]bool{}
	for _, t := range ts {
		b := t.c.Buffer
		r.tensors = append(r.tensors, t.name+" "+lib.BuftName(lib.BufferGetType(b)))
		if !seen[b] {
			seen[b] = true
			r.buffers = append(r.buffers, fmt.Sprintf("%s %d", lib.BufferName(b), lib.BufferGetSize(b)))
		}
	}
	slices.Sort(r.tensors)
	slices.Sort(r.buffers)
	return r
}

var cudaLayerLine = regexp.MustCompile(`^load_tensors: layer +(\d+) assigned to device (\S+),`)

func cudaLlamaPlacement(rt *ggml.Runtime, m *llama.Model, lines []llama.LogLine) cudaPlacement {
	layers := map[int]string{}
	for _, ln := range lines {
		if sm := cudaLayerLine.FindStringSubmatch(ln.Text); sm != nil {
			var il int
			fmt.Sscan(sm[1], &il)
			layers[il] = sm[2]
		}
	}
	var ts []cudaNamedTensor
	for _, t := range m.Tensors() {
		ts = append(ts, cudaNamedTensor{t.Name, t.C})
	}
	return cudaPlacementOf(rt, layers, ts)
}

func cudaOurPlacement(rt *ggml.Runtime, p *place.Plan, lm *loader.Model) cudaPlacement {
	layers := map[int]string{}
	for il, d := range p.LayerDevices {
		layers[il] = d.Name()
	}
	var ts []cudaNamedTensor
	for pl := range lm.Placements() {
		if pl.Tensor == nil || pl.Path == loader.PathShared {
			continue
		}
		ts = append(ts, cudaNamedTensor{pl.Plan.Name, testenv.TensorC(pl.Tensor)})
	}
	return cudaPlacementOf(rt, layers, ts)
}

func cudaComparePlacements(t *testing.T, ours, theirs cudaPlacement) {
	t.Helper()
	if len(theirs.layers) == 0 {
		t.Error("llama.cpp's log named no layer assignment")
	}
	for _, d := range []struct {
		what         string
		ours, theirs any
	}{{"layer devices", ours.layers, theirs.layers}, {"per-tensor buffer types", ours.tensors, theirs.tensors}, {"buffers", ours.buffers, theirs.buffers}} {
		if diff := cmp.Diff(d.theirs, d.ours); diff != "" {
			t.Errorf("%s differ (-llama.cpp +ggload):\n%s", d.what, diff)
		}
	}
}

// cudaLlamaLoad turns placement parameters into the same llama.cpp load.
func cudaLlamaLoad(rt *ggml.Runtime, path string, params place.Params, check bool) (llama.Load, error) {
	ld, err := llama.LoadFor(rt, path, params)
	ld.Check = check
	return ld, err
}

// cudaLlamaSaid reports whether llama.cpp logged a line containing text
// (its load errors name the reason in an earlier line than the last).
func cudaLlamaSaid(lines []llama.LogLine, text string) bool {
	for _, ln := range lines {
		if strings.Contains(ln.Text, text) {
			return true
		}
	}
	return false
}

func cudaOpenLlama(t *testing.T, rt *ggml.Runtime) *llama.Lib {
	t.Helper()
	l, err := llama.Open(rt)
	if err != nil {
		testenv.Missing(t, "llama", "%v", err)
	}
	return l
}

// Every case is planned and loaded by ggload and loaded by llama.cpp in the
// same process onto CUDA0: the layers, every tensor's buffer type and every
// buffer's exact size agree, and ggload's copy reads back equal to the file.
func TestCUDAConformanceWithLlamaCpp(t *testing.T) {
	rt := testenv.Runtime(t)
	cuda := testenv.CUDA(t)
	l := cudaOpenLlama(t, rt)
	paths := cudaModelFiles(t, rt)
	on := []string{cuda.Name()}
	cases := []struct {
		name   string
		model  string
		check  bool
		params func(p *place.Params)
	}{
		{"all-layers", "dense8", false, nil},
		{"auto-devices", "dense8", false, func(p *place.Params) { p.DeviceNames = nil }},
		{"ngl-half", "dense8", false, func(p *place.Params) { p.NGPULayers = place.NLayers(4) }},
		{"ngl0", "tied6", false, func(p *place.Params) { p.NGPULayers = place.NLayers(0) }},
		{"ngl-over", "tied6", false, func(p *place.Params) { p.NGPULayers = place.NLayers(99) }},
		// the partial offload a MoE model gets on one GPU: half the layers,
		// every expert tensor kept on the CPU (-ngl 4 -ot exps=CPU)
		{"moe-ngl-half-exps-cpu", "moe8", false, func(p *place.Params) {
			p.NGPULayers = place.NLayers(4)
			p.Overrides = []place.Override{{Pattern: `exps`, BufferType: "CPU"}}
		}},
		{"moe-cpu-moe", "moe8", false, func(p *place.Params) { p.CPUMoE = true }},
		{"moe-n-cpu-moe", "moe8", false, func(p *place.Params) { p.NCPUMoE = 3 }},
		{"sm-none", "tied6", false, func(p *place.Params) { p.SplitMode = place.SplitNone; p.MainGPU = 0 }},
		{"no-host", "dense8", false, func(p *place.Params) { p.NoHost = true; p.NGPULayers = place.NLayers(5) }},
		{"no-extra-bufts", "dense8", false, func(p *place.Params) { p.NoExtraBufts = true; p.NGPULayers = place.NLayers(3) }},
		{"ot-layers-cpu", "dense8", false, func(p *place.Params) {
			p.Overrides = []place.Override{{Pattern: `blk\.[67]\.`, BufferType: "CPU"}}
		}},
		{"ot-to-cuda", "dense8", false, func(p *place.Params) {
			p.NGPULayers = place.NLayers(2)
			p.Overrides = []place.Override{{Pattern: `attn_q`, BufferType: cuda.Name()}}
		}},
		// ggml's meta device over the one GPU; each tensor's split is
		// compared with libllama's own too
		{"sm-tensor", "dense8", false, func(p *place.Params) { p.SplitMode = place.SplitTensor }},
		{"sm-tensor-moe", "moe8", false, func(p *place.Params) { p.SplitMode = place.SplitTensor; p.NGPULayers = place.NLayers(5) }},
		{"check-tensors", "dense8", true, func(p *place.Params) { p.NGPULayers = place.NLayers(5) }},
		{"check-tensors-moe", "moe8", true, func(p *place.Params) {
			p.NGPULayers = place.NLayers(4)
			p.Overrides = []place.Override{{Pattern: `exps`, BufferType: "CPU"}}
		}},
	}
	for _, c := range cases {
		for _, mode := range []place.LoadMode{place.LoadMmap, place.LoadNone, place.LoadDirectIO} {
			t.Run(c.name+"/"+mode.String(), func(t *testing.T) {
				params := place.Params{}
				params.LoadMode = mode
				params.DeviceNames = on
				if c.params != nil {
					c.params(&params)
				}
				gm := testenv.OpenModel(t, paths[c.model])
				plan, err := place.New(context.Background(), rt, gm, params)
				if err != nil {
					t.Fatal(err)
				}
				lm, err := loader.Load(context.Background(), plan, loader.Options{CheckTensors: c.check})
				if err != nil {
					t.Fatal(err)
				}
				defer lm.Close()
				ours := cudaOurPlacement(rt, plan, lm)
				v, err := lm.Verify()
				if err != nil {
					t.Fatal(err)
				}
				if v.Tensors == 0 {
					t.Fatalf("nothing verified: %+v", v)
				}
				offloaded := params.NGPULayers != place.NLayers(0) || len(params.Overrides) > 0
				on := cuda.Name()
				if plan.TensorDevices != nil {
					on = plan.Devices[0].Name() // the meta device over it
				}
				if offloaded && v.ByDevice[on] == 0 {
					t.Errorf("no tensor read back from %s: %+v", on, v.ByDevice)
				}

				ld, err := cudaLlamaLoad(rt, paths[c.model], params, c.check)
				if err != nil {
					t.Fatal(err)
				}
				m, lines, err := l.LoadModel(ld)
				if err != nil {
					t.Fatal(err)
				}
				defer m.Free()
				var theirDevs, ourDevs []string
				for _, d := range m.Devices() {
					theirDevs = append(theirDevs, testenv.Lib(rt).DevName(d))
				}
				for _, d := range plan.Devices {
					ourDevs = append(ourDevs, d.Name())
				}
				if !slices.Equal(ourDevs, theirDevs) {
					t.Errorf("devices: ours %v, llama.cpp %v", ourDevs, theirDevs)
				}
				cudaComparePlacements(t, ours, cudaLlamaPlacement(rt, m, lines))
				if plan.TensorDevices != nil {
					for _, d := range splitDiff(plan, m) {
						t.Error(d)
					}
				}
			})
		}
	}
}

// Every load mode onto CUDA0: the device's tensors arrive by the path
// llama.cpp uses for a device with async uploads, events and pinned host
// buffers, and read back equal to the file.
func TestCUDALoadModes(t *testing.T) {
	rt := testenv.Runtime(t)
	cuda := testenv.CUDA(t)
	caps := cuda.Props().Caps
	if !caps.Async || !caps.HostBuffer || !caps.Events {
		t.Fatalf("%s lacks async uploads, host buffers or events: %+v", cuda.Name(), caps)
	}
	path := testenv.ModelFile(t, rt, cudaModels["moe8"])
	for _, mode := range []place.LoadMode{place.LoadAuto, place.LoadNone, place.LoadMmap, place.LoadMlock, place.LoadMmapMlock, place.LoadDirectIO} {
		for _, check := range []bool{false, true} {
			t.Run(fmt.Sprintf("%s/check=%v", mode, check), func(t *testing.T) {
				gm := testenv.OpenModel(t, path)
				params := place.Params{}
				params.LoadMode = mode
				params.DeviceNames = []string{cuda.Name()}
				params.NGPULayers = place.NLayers(5)
				params.Overrides = []place.Override{{Pattern: `blk\.[34]\.ffn_(up|down)_exps`, BufferType: "CPU"}}
				params.NoExtraBufts = true // CPU_REPACK cannot be read back
				p, err := place.New(context.Background(), rt, gm, params)
				if err != nil {
					t.Fatal(err)
				}
				before := testenv.LiveBuffers()
				lm, err := loader.Load(context.Background(), p, loader.Options{CheckTensors: check})
				if err != nil {
					t.Fatal(err)
				}
				v, err := lm.Verify()
				if err != nil {
					t.Fatal(err)
				}
				if v.Tensors == 0 || v.Repacked != 0 {
					t.Errorf("verified %+v", v)
				}
				onDevice, onHost := 0, 0
				for pl := range lm.Placements() {
					if pl.Tensor == nil || pl.Buffer == nil {
						continue
					}
					// CPU-side tensors live in host buffers (CUDA_Host pinned
					// memory, CPU, CPU_Mapped); the rest in CUDA0's own memory
					if pl.Buffer.Buffer.IsHost() {
						onHost++
						continue
					}
					if pl.Buffer.Device != cuda {
						t.Errorf("%s is in a device buffer of %v", pl.Plan.Name, pl.Buffer.Device)
						continue
					}
					onDevice++
					// with mmap as without: read from the file, not
					// copied out of the mapping
					want := loader.PathStaged
					if check {
						want = loader.PathSync
					}
					if pl.Path != want && pl.Path != loader.PathShared {
						t.Errorf("%s on %s came by %s, want %s", pl.Plan.Name, cuda.Name(), pl.Path, want)
					}
				}
				if onDevice == 0 || onHost == 0 {
					t.Errorf("%d tensors in %s memory, %d in host memory: want both", onDevice, cuda.Name(), onHost)
				}
				t.Logf("%s: %v", mode, lm.Stats.Moved)
				if err := lm.Close(); err != nil {
					t.Fatal(err)
				}
				if after := testenv.LiveBuffers(); after != before {
					t.Errorf("%d buffers left after Close", after-before)
				}
			})
		}
	}
}

// cudaPlantNaN copies the model with the first block scale of tensor set to
// a NaN (f16 0x7e00).
func cudaPlantNaN(t *testing.T, path, tensor string) string {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	gm := testenv.OpenModel(t, path)
	w, ok := gm.Weight(tensor)
	if !ok {
		t.Fatalf("no %s in %s", tensor, path)
	}
	data[w.Offset], data[w.Offset+1] = 0x00, 0x7e
	out := strings.TrimSuffix(path, ".gguf") + "-nan.gguf"
	if err := os.WriteFile(out, data, 0o644); err != nil {
		t.Fatal(err)
	}
	return out
}

// --check-tensors finds a NaN in a tensor bound for CUDA0 on every device
// path (staged uploads are off with checks: synchronous uploads; copies
// from the mapping), frees everything, and llama.cpp refuses the same file.
func TestCUDACheckTensorsFindsNaN(t *testing.T) {
	rt := testenv.Runtime(t)
	cuda := testenv.CUDA(t)
	l := cudaOpenLlama(t, rt)
	const bad = "blk.6.ffn_down.weight" // q4_K, in a layer on CUDA0
	path := cudaPlantNaN(t, testenv.ModelFile(t, rt, cudaModels["dense8"]), bad)
	for _, mode := range []place.LoadMode{place.LoadNone, place.LoadMmap, place.LoadDirectIO} {
		t.Run(mode.String(), func(t *testing.T) {
			gm := testenv.OpenModel(t, path)
			params := place.Params{}
			params.LoadMode = mode
			params.DeviceNames = []string{cuda.Name()}
			p, err := place.New(context.Background(), rt, gm, params)
			if err != nil {
				t.Fatal(err)
			}
			if d := p.LayerDevices[6]; d != cuda {
				t.Fatalf("layer 6 planned on %s, want %s", d.Name(), cuda.Name())
			}
			before := testenv.LiveBuffers()
			lm, err := loader.Load(context.Background(), p, loader.Options{CheckTensors: true})
			if err == nil {
				lm.Close()
				t.Fatal("a NaN in a CUDA0 tensor passed --check-tensors")
			}
			if !errors.Is(err, loader.ErrInvalidData) || !strings.Contains(err.Error(), "'"+bad+"'") {
				t.Fatalf("want ErrInvalidData naming '%s', got %v", bad, err)
			}
			if after := testenv.LiveBuffers(); after != before {
				t.Errorf("%d buffers leaked", after-before)
			}
			ld, err := cudaLlamaLoad(rt, path, params, true)
			if err != nil {
				t.Fatal(err)
			}
			m, lines, err := l.LoadModel(ld)
			if err == nil {
				m.Free()
				t.Fatal("llama.cpp loaded the file with a NaN under check_tensors: the planted value is not a NaN it checks")
			}
			if !cudaLlamaSaid(lines, "tensor '"+bad+"' has invalid data") {
				t.Errorf("llama.cpp refused the file without naming %s: %v", bad, err)
			}
		})
	}
}

// Split mode row on CUDA0: ggload does what llama.cpp of the pin does. The
// pinned CUDA backend publishes no ggml_backend_split_buffer_type (row
// splitting moved to the meta device), so llama.cpp refuses with "device
// CUDA0 does not support split buffers" and ggload must refuse in the same
// way; should a later pin publish it again, both must load the same
// placement.
func TestCUDASplitRowMatchesLlamaCpp(t *testing.T) {
	rt := testenv.Runtime(t)
	cuda := testenv.CUDA(t)
	l := cudaOpenLlama(t, rt)
	path := testenv.ModelFile(t, rt, cudaModels["dense8"])
	_, splitErr := cuda.SplitBufferType(nil)
	for _, mode := range []place.LoadMode{place.LoadMmap, place.LoadNone} {
		t.Run(mode.String(), func(t *testing.T) {
			params := place.Params{}
			params.LoadMode = mode
			params.SplitMode = place.SplitRow
			params.DeviceNames = []string{cuda.Name()}
			ld, err := cudaLlamaLoad(rt, path, params, false)
			if err != nil {
				t.Fatal(err)
			}
			m, lines, llamaErr := l.LoadModel(ld)
			if m != nil {
				defer m.Free()
			}
			gm := testenv.OpenModel(t, path)
			plan, err := place.New(context.Background(), rt, gm, params)
			if llamaErr != nil {
				if !cudaLlamaSaid(lines, "does not support split buffers") {
					t.Fatalf("llama.cpp refused -sm row for another reason: %v", llamaErr)
				}
				if !errors.Is(splitErr, ggml.ErrNoSplitBufferType) {
					t.Errorf("llama.cpp finds no split buffer type on %s, ggml.Device.SplitBufferType says %v", cuda.Name(), splitErr)
				}
				if err == nil {
					t.Fatalf("llama.cpp refuses -sm row on %s (%v); ggload planned it", cuda.Name(), llamaErr)
				}
				if !errors.Is(err, ggml.ErrNoSplitBufferType) || !strings.Contains(err.Error(), cuda.Name()) {
					t.Errorf("want ggml.ErrNoSplitBufferType naming %s, got %v", cuda.Name(), err)
				}
				return
			}
			if err != nil {
				t.Fatalf("llama.cpp loads -sm row on %s; ggload: %v", cuda.Name(), err)
			}
			lm, err := loader.Load(context.Background(), plan, loader.Options{})
			if err != nil {
				t.Fatal(err)
			}
			defer lm.Close()
			if _, err := lm.Verify(); err != nil {
				t.Fatal(err)
			}
			cudaComparePlacements(t, cudaOurPlacement(rt, plan, lm), cudaLlamaPlacement(rt, m, lines))
		})
	}
}
