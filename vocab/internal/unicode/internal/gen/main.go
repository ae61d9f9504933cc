// Command gen writes package unicode's generated tables from the pinned
// llama.cpp source tree: tables_gen.go from src/unicode-data.cpp and
// preregex_gen.go from the pre-tokenizer lists in src/llama-vocab.cpp.
//
// The tree is GGLOAD_LLAMA_SRC, or the cache's unpacked release as
// lab/testenv.SourceTree finds it. Run it with go generate in the package
// directory.
package main

import (
	"flag"
	"fmt"
	"os"
	"path/filepath"

	"github.com/ggload/ggload/vocab/internal/unicode/internal/gen/gentables"
)

func main() {
	src := flag.String("src", "", "llama.cpp source tree (default: GGLOAD_LLAMA_SRC or the cache's)")
	out := flag.String("o", ".", "output directory")
	flag.Parse()
	dir := *src
	if dir == "" {
		dir = gentables.DefaultSource()
	}
	files, err := gentables.Generate(dir)
	if err != nil {
		fmt.Fprintln(os.Stderr, "gen:", err)
		os.Exit(1)
	}
	for name, b := range files {
		if err := os.WriteFile(filepath.Join(*out, name), b, 0o644); err != nil {
			fmt.Fprintln(os.Stderr, "gen:", err)
			os.Exit(1)
		}
	}
}
