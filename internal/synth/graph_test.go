package synth_test

import (
	"errors"
	"os"
	"slices"
	"strings"
	"testing"

	"github.com/ggload/ggload/internal/synth"
	"github.com/ggload/ggload/internal/testenv"
)

func TestMain(m *testing.M) { testenv.Main(m) }

// Every architecture's synthesized model builds its compute graphs, as
// the replay judges them (it refuses what ggml and llama.cpp assert):
// the defaults with flash attention on and off, four sequences, one
// token. llama.cpp then judges the same files (tests/context_test.go).
//
//	GGLOAD_ARCHS=qwen35,phi3 go test -run TestArchGraphs -v ./internal/synth
func TestArchGraphs(t *testing.T) {
	rt := testenv.Runtime(t)
	src := testenv.SourceTree(t)
	only := os.Getenv("GGLOAD_ARCHS")
	var built, refused int
	for _, embd := range []int64{0, 256} { // as tests/ synthesizes them
		files, err := synth.ArchFiles(t.TempDir(), src, synth.ArchOptions{Embd: embd, Graph: testenv.Lib(rt),
			Only: func(a string) bool { return only == "" || slices.Contains(strings.Split(only, ","), a) }})
		if err != nil {
			t.Fatal(err)
		}
		for _, f := range files {
			var ge *synth.GraphError
			switch {
			case f.Err == nil:
				built++
			case errors.As(f.Err, &ge):
				refused++
				t.Errorf("%s (embd %d): %v", f.Name, embd, f.Err)
			default:
				// a model the loader refuses is llama.cpp's verdict
				// (tests/archs_test.go lists each)
				t.Logf("%s: no loadable model: %v", f.Name, f.Err)
			}
		}
	}
	t.Logf("%d models' graphs build, %d refused", built, refused)
}
