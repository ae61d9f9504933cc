package gguf_test

import (
	"fmt"
	"log"

	"github.com/ggload/ggload/gguf"
)

// Open a model and read its header: metadata by key, the weights index.
// No native library is needed. The file is a two-layer llama with a
// vocabulary of 1,024 English word pieces, made by lab/synth.
func ExampleOpenModel() {
	m, err := gguf.OpenModel("../loader/testdata/tiny-words.gguf")
	if err != nil {
		log.Fatal(err)
	}
	defer m.Close()
	layers, err := m.Uint("llama.block_count")
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(m.Architecture(), layers, "layers,", m.FileTypeName())
	w, ok := m.Weight("blk.0.attn_q.weight")
	fmt.Println(ok, w.Type, w.Shape[:2], w.Size, "bytes")
	n := 0
	for range m.All() {
		n++
	}
	fmt.Println(n, "tensors")
	// Output:
	// llama 2 layers, (guessed) Q4_0
	// true q4_0 [64 64] 2304 bytes
	// 21 tensors
}
