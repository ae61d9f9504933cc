package loader_test

import (
	"context"
	"testing"

	"github.com/ggload/ggload/ggml"
	"github.com/ggload/ggload/gguf"
	"github.com/ggload/ggload/lab/synth"
	"github.com/ggload/ggload/lab/testenv"
	"github.com/ggload/ggload/loader"
	"github.com/ggload/ggload/place"
)

// verify reads every tensor back from its buffer and compares it with the
// file's bytes.
func verify(t *testing.T, gm *gguf.Model, lm *loader.Model) {
	t.Helper()
	v, err := lm.Verify()
	if err != nil {
		t.Fatal(err)
	}
	if v.Tensors == 0 || v.Repacked != 0 {
		t.Fatalf("verified %+v", v)
	}
}

var smallSpec = synth.Spec{Layers: 5, Embd: 256, FF: 512, Heads: 4, Vocab: 300, Tied: true, RopeFreqs: true, Weights: ggml.TypeQ4_K, Embeddings: ggml.TypeQ8_0}

// Every load mode onto the CPU, every local GPU, an RPC server and the
// automatic device list; the CPU cases need nothing but the CPU backend.
func TestLoadModesOnEveryDevice(t *testing.T) {
	rt := testenv.Runtime(t)
	path := testenv.ModelFile(t, rt, smallSpec)
	targets := [][]string{{"none"}, nil}
	for _, d := range testenv.GPUs(t) { // Vulkan0, and CUDA0 on GPU runners
		targets = append(targets, []string{d.Name()})
	}
	if len(targets) == 2 {
		t.Log("no GPU device here: the CPU, automatic and RPC cases only")
	}
	targets = append(targets, []string{"RPC0"})
	for _, mode := range []place.LoadMode{place.LoadMmap, place.LoadNone, place.LoadMlock, place.LoadMmapMlock, place.LoadDirectIO, place.LoadAuto} {
		for _, devs := range targets {
			name := mode.String() + "/" + "auto"
			if devs != nil {
				name = mode.String() + "/" + devs[0]
			}
			t.Run(name, func(t *testing.T) {
				if devs != nil && devs[0] == "RPC0" {
					testenv.RPC(t, 1)
				}
				gm := testenv.OpenModel(t, path)
				params := place.Params{}
				params.LoadMode = mode
				params.DeviceNames = devs
				// CPU_REPACK stores repacked data that cannot be read back;
				// TestRepackedTensors covers it
				params.NoExtraBufts = true
				p, err := place.New(context.Background(), rt, gm, params)
				if err != nil {
					t.Fatal(err)
				}
				lm, err := loader.Load(context.Background(), p, loader.Options{})
				if err != nil {
					t.Fatal(err)
				}
				defer lm.Close()
				verify(t, gm, lm)
				// zero copy where the plan maps: data inside the mapping
				for pl := range lm.Placements() {
					if pl.Path != loader.PathZeroCopy {
						continue
					}
					mp := lm.Mappings()[pl.Plan.Weight.File]
					if testenv.DataAddr(pl.Tensor) != mp.Addr(pl.Plan.Weight.Offset) {
						t.Fatalf("%s: data %p is not the mapping %p", pl.Plan.Name, testenv.DataAddr(pl.Tensor), mp.Addr(pl.Plan.Weight.Offset))
					}
				}
				t.Logf("%v", lm.Stats.Moved)
			})
		}
	}
}
