package loader_test

import (
	"context"
	"testing"

	"github.com/ggload/ggload/ggml"
	"github.com/ggload/ggload/lab/synth"
	"github.com/ggload/ggload/lab/testenv"
	"github.com/ggload/ggload/loader"
	"github.com/ggload/ggload/place"
)

// Progress moves inside a large tensor on every path that copies bytes
// (reads into host buffers, staged and synchronous uploads, whole-tensor
// sets for repacking; with mmap as without): a tensor of many
// pieces gives many distinct reports, never one per tensor alone. (With
// parallel readers the reports sample what the readers have done; one
// reader makes the count exact.)
func TestProgressMovesInsideTensors(t *testing.T) {
	rt := testenv.Runtime(t)
	const piece = 32 << 10
	// one layer whose FFN matrices are ~2.2 MiB each: ~70 pieces apiece
	spec := synth.Spec{Layers: 1, Embd: 512, FF: 4096, Heads: 4, Vocab: 256, Weights: ggml.TypeQ4_0, Embeddings: ggml.TypeQ8_0}
	path := testenv.ModelFile(t, rt, spec)
	type tcase struct {
		name   string
		vulkan bool
		repack bool
		params func(*place.Params)
		opts   loader.Options
		path   loader.Path // the path the big tensors take
	}
	cases := []tcase{
		{"read/CPU", false, false, func(p *place.Params) { p.LoadMode = place.LoadNone; p.DeviceNames = []string{"none"} },
			loader.Options{Readers: 1}, loader.PathRead},
		{"mmap/CPU_REPACK", false, true, func(p *place.Params) {
			p.LoadMode = place.LoadMmap
			p.DeviceNames = []string{"none"}
			p.NoExtraBufts = false
		},
			loader.Options{}, loader.PathSync},
		{"staged/Vulkan0", true, false, func(p *place.Params) { p.LoadMode = place.LoadNone; p.DeviceNames = []string{"Vulkan0"} },
			loader.Options{StagingSize: piece}, loader.PathStaged},
		{"mmap/Vulkan0", true, false, func(p *place.Params) { p.LoadMode = place.LoadMmap; p.DeviceNames = []string{"Vulkan0"} },
			loader.Options{StagingSize: piece}, loader.PathStaged},
		{"sync-upload/Vulkan0", true, false, func(p *place.Params) { p.LoadMode = place.LoadNone; p.DeviceNames = []string{"Vulkan0"} },
			loader.Options{CheckTensors: true}, loader.PathSync},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			if c.vulkan {
				testenv.Vulkan(t)
			}
			if c.repack && len(rt.CPUDevice().ExtraBufferTypes()) == 0 {
				t.Skip("this CPU backend has no extra buffer types (no CPU_REPACK on this CPU)")
			}
			gm := testenv.OpenModel(t, path)
			p := planFor(t, rt, gm, func(p *place.Params) { p.NoExtraBufts = true; c.params(p) })
			var reports []uint64
			var total uint64
			o := c.opts
			o.ChunkSize = piece
			o.Progress = func(done, tot uint64) bool {
				reports = append(reports, done)
				total = tot
				return true
			}
			lm, err := loader.Load(context.Background(), p, o)
			if err != nil {
				t.Fatal(err)
			}
			defer lm.Close()
			var big int64
			for pl := range lm.Placements() {
				if pl.Path == c.path {
					big = max(big, pl.Plan.Bytes)
				}
			}
			if big < 16*piece {
				t.Fatalf("no tensor of at least %d bytes took the %s path (largest %d)", 16*piece, c.path, big)
			}
			distinct := map[uint64]bool{}
			for i, d := range reports {
				if i > 0 && d < reports[i-1] {
					t.Fatalf("progress went back from %d to %d", reports[i-1], d)
				}
				distinct[d] = true
			}
			if reports[len(reports)-1] != total {
				t.Fatalf("last report %d of %d", reports[len(reports)-1], total)
			}
			// tensors alone would give at most one report each (plus the
			// start and the end)
			if min := len(p.Tensors) + 2 + int(big/piece)/2; len(distinct) < min {
				t.Fatalf("%d distinct progress reports for %d tensors whose largest is %d pieces: want at least %d", len(distinct), len(p.Tensors), big/piece, min)
			}
		})
	}
}
