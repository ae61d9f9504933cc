// Command ggufinfo prints what a GGUF file holds: its architecture, its
// metadata and its tensors. It uses loader/gguf alone, so it builds as a
// static pure-Go program (CGO_ENABLED=0) that needs no native library.
//
//	go run ./examples/ggufinfo model.gguf
package main

import (
	"fmt"
	"os"

	"github.com/ggload/ggload/loader/gguf"
)

func main() {
	if len(os.Args) != 2 {
		fmt.Fprintln(os.Stderr, "usage: ggufinfo MODEL.gguf")
		os.Exit(2)
	}
	m, err := gguf.OpenModel(os.Args[1])
	if err != nil {
		fmt.Fprintln(os.Stderr, "ggufinfo:", err)
		os.Exit(1)
	}
	defer m.Close()
	fmt.Printf("%s: architecture %s, %d tensors, %s, %.2f bits per weight\n",
		os.Args[1], m.Architecture(), len(m.Weights), m.SizeString(), m.BPW())
	for _, kv := range m.Files[0].KV {
		fmt.Printf("  %-50s %s\n", kv.Key, kv.Value.Format(8))
	}
	for _, w := range m.Weights {
		fmt.Printf("  %-50s %-6s %v\n", w.Name, w.Type, w.Shape)
	}
}
