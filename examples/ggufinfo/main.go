// Command ggufinfo prints what a GGUF file holds: its architecture, its
// metadata and its tensors. It uses gguf alone, so it builds as a
// static pure-Go program (CGO_ENABLED=0) that needs no native library.
//
//	go run ./examples/ggufinfo model.gguf
package main

import (
	"fmt"
	"io"
	"os"

	"github.com/ggload/ggload/gguf"
)

func main() {
	if len(os.Args) != 2 {
		fmt.Fprintln(os.Stderr, "usage: ggufinfo MODEL.gguf")
		os.Exit(2)
	}
	if err := info(os.Stdout, os.Args[1]); err != nil {
		fmt.Fprintln(os.Stderr, "ggufinfo:", err)
		os.Exit(1)
	}
}

// info prints the model at path.
func info(w io.Writer, path string) error {
	m, err := gguf.OpenModel(path)
	if err != nil {
		return err
	}
	defer m.Close()
	fmt.Fprintf(w, "%s: architecture %s, %d tensors, %s, %.2f bits per weight\n",
		path, m.Architecture(), len(m.Weights), m.SizeString(), m.BPW())
	for key, v := range m.Files[0].Pairs() {
		fmt.Fprintf(w, "  %-50s %s\n", key, v.Format(8))
	}
	for wt := range m.All() {
		fmt.Fprintf(w, "  %-50s %-6s %v\n", wt.Name, wt.Type, wt.Shape)
	}
	return nil
}
