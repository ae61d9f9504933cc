package loader_test

import (
	"context"
	"errors"
	"fmt"
	"log"

	"github.com/ggload/ggload/ggml"
	"github.com/ggload/ggload/gguf"
	"github.com/ggload/ggload/loader"
	"github.com/ggload/ggload/place"
)

// Open the native libraries, plan with llama.cpp's defaults, load, and
// read weights back. testdata/tiny-llama.gguf is a two-layer llama model
// (q4_0 matrices, q8_0 embeddings) made by lab/synth.
func Example() {
	ctx := context.Background()
	rt, err := ggml.Open(ctx, ggml.Options{})
	if err != nil {
		log.Fatal(err)
	}
	defer rt.Close()
	m, err := gguf.OpenModel("testdata/tiny-llama.gguf")
	if err != nil {
		log.Fatal(err)
	}
	defer m.Close()
	p, err := place.New(context.Background(), rt, m, place.Params{}) // the zero Params are llama.cpp's defaults
	if err != nil {
		log.Fatal(err)
	}
	lm, err := loader.Load(ctx, p, loader.Options{})
	if err != nil {
		log.Fatal(err)
	}
	defer lm.Close()

	// The token embedding stays in host memory, whatever the devices.
	emb, _ := lm.Tensor("token_embd.weight")
	b, err := emb.Bytes()
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(emb.Name(), emb.Type(), emb.Shape(), len(b), "bytes")

	// A matrix kept on the CPU goes to CPU_REPACK by default where the CPU
	// has faster kernels for it; repacked bytes cannot be read back. Plan
	// with Params.NoExtraBufts (--no-repack) to keep them readable.
	q, _ := lm.Tensor("blk.0.attn_q.weight")
	if _, err := q.Bytes(); err != nil && !errors.Is(err, ggml.ErrWriteOnly) {
		log.Fatal(err)
	}

	// After Close, the tensors answer ErrClosed.
	lm.Close()
	_, err = emb.Bytes()
	fmt.Println(errors.Is(err, ggml.ErrClosed))
	// Output:
	// token_embd.weight q8_0 [64 256 1 1] 17408 bytes
	// true
}
