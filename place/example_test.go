package place_test

import (
	"context"
	"fmt"
	"log"

	"github.com/ggload/ggload/ggml"
	"github.com/ggload/ggload/gguf"
	"github.com/ggload/ggload/place"
)

// Plan a model as llama.cpp would place it, without allocating anything:
// each tensor's buffer type and the reason, and the memory of the weights
// and of a context of 256 tokens. Here on the CPU alone (-dev none), and
// without the CPU's repacked buffers (--no-repack), whose use depends on
// the CPU.
func ExampleNew() {
	ctx := context.Background()
	rt, err := ggml.Open(ctx, ggml.Options{})
	if err != nil {
		log.Fatal(err)
	}
	defer rt.Close()
	m, err := gguf.OpenModel("../loader/testdata/tiny-words.gguf")
	if err != nil {
		log.Fatal(err)
	}
	defer m.Close()
	p, err := place.New(ctx, rt, m, place.Params{
		DeviceNames:  []string{"none"},
		NoExtraBufts: true,
		Context:      place.ContextParams{NCtx: 256},
	})
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("load mode", p.LoadMode, "for", len(p.Tensors), "tensors")
	for _, t := range p.Tensors[:3] {
		fmt.Println(t.Name, t.BufferType.Name(), t.Reason)
	}
	for _, d := range p.DeviceMemory() {
		if d.Host {
			fmt.Printf("host memory: model %d KiB, context %d KiB\n", d.Model>>10, d.Context>>10)
		}
	}
	// Output:
	// load mode mmap for 21 tensors
	// token_embd.weight CPU default
	// output_norm.weight CPU default
	// output.weight CPU default
	// host memory: model 182 KiB, context 128 KiB
}
