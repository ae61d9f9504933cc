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

// BenchmarkLoad loads a 256 MiB model (file in the page cache) by each
// load mode onto the CPU and, where present, Vulkan0; MB/s is the file's
// bytes over the whole Load call. `ggload-bench` compares with llama.cpp
// process against process.
func BenchmarkLoad(b *testing.B) {
	rt := testenv.Runtime(b)
	spec := synth.BenchSpec(256<<20, ggml.TypeQ8_0)
	path := testenv.ModelFile(b, rt, spec)
	targets := []string{"none"}
	if _, err := rt.DeviceByName("Vulkan0"); err == nil {
		targets = append(targets, "Vulkan0")
	}
	for _, mode := range []place.LoadMode{place.LoadNone, place.LoadMmap, place.LoadDirectIO} {
		for _, target := range targets {
			for _, readers := range []int{1, 0} {
				name := mode.String() + "/" + target + "/readers=auto"
				if readers == 1 {
					name = mode.String() + "/" + target + "/readers=1"
				}
				b.Run(name, func(b *testing.B) {
					gm := testenv.OpenModel(b, path)
					params := place.Params{}
					params.LoadMode, params.DeviceNames = mode, []string{target}
					p, err := place.New(context.Background(), rt, gm, params)
					if err != nil {
						b.Fatal(err)
					}
					b.SetBytes(spec.Bytes())
					for b.Loop() {
						lm, err := loader.Load(context.Background(), p, loader.Options{Readers: readers})
						if err != nil {
							b.Fatal(err)
						}
						lm.Close()
					}
				})
			}
		}
	}
}

// BenchmarkLoadFromMapping times the mmap loads whose bytes are copied out
// of the mapping rather than used in place: a q4_0 model onto the CPU with
// its extra buffer types (CPU_REPACK repacks every matrix) and onto
// Vulkan0.
func BenchmarkLoadFromMapping(b *testing.B) {
	rt := testenv.Runtime(b)
	spec := synth.BenchSpec(256<<20, ggml.TypeQ4_0)
	path := testenv.ModelFile(b, rt, spec)
	targets := []string{"none"}
	if _, err := rt.DeviceByName("Vulkan0"); err == nil {
		targets = append(targets, "Vulkan0")
	}
	for _, target := range targets {
		name := "mmap/" + target
		if target == "none" {
			name = "mmap/CPU_REPACK"
		}
		b.Run(name, func(b *testing.B) {
			gm := testenv.OpenModel(b, path)
			params := place.Params{}
			params.LoadMode, params.DeviceNames = place.LoadMmap, []string{target}
			p, err := place.New(context.Background(), rt, gm, params)
			if err != nil {
				b.Fatal(err)
			}
			b.SetBytes(spec.Bytes())
			for b.Loop() {
				lm, err := loader.Load(context.Background(), p, loader.Options{})
				if err != nil {
					b.Fatal(err)
				}
				lm.Close()
			}
		})
	}
}
