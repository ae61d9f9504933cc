package synth_test

import (
	"errors"
	"os"
	"slices"
	"strings"
	"testing"

	"github.com/ggload/ggload/internal/replay/arch"
	"github.com/ggload/ggload/lab/synth"
	"github.com/ggload/ggload/lab/testenv"
)

func TestMain(m *testing.M) { testenv.Main(m) }

// pinAborts are the graphs the pin's own code cannot build, whatever the
// file says (llama.cpp aborts on them too: tests/context_test.go).
var pinAborts = map[string]string{
	// llama_kv_cache::cpy_v reads the tokens from ne[2] of the value, and
	// PLM's value is 2-D with flash attention
	"plm": "synth: plm: the fa on graph: GGML_ASSERT(a->ne[0] == b->ne[0]) failed (in ggml_set_rows)",
	// T5's relative position bias has no stream axis to add to one
	// sequence's scores of several
	"t5": "synth: t5: the -np 4 graph: GGML_ASSERT(ggml_can_repeat(b, a)) failed (in ggml_add)",
}

// Every architecture's synthesized model builds its compute graphs, as
// the replay judges them (it refuses what ggml and llama.cpp assert):
// the defaults with flash attention on and off, four sequences, one
// token. llama.cpp then judges the same files (tests/context_test.go).
//
//	GGLOAD_ARCHS=qwen35,phi3 go test -run TestArchGraphs -v ./lab/synth
func TestArchGraphs(t *testing.T) {
	rt := testenv.Runtime(t)
	src := testenv.SourceTree(t)
	only := os.Getenv("GGLOAD_ARCHS")
	var built, refused int
	for _, embd := range []int64{0, 256} { // as tests/ synthesizes them
		files, err := synth.ArchFiles(t.TempDir(), src, synth.ArchOptions{Embd: embd, Graph: rt.Ops(),
			Only: func(a string) bool { return only == "" || slices.Contains(strings.Split(only, ","), a) }})
		if err != nil {
			t.Fatal(err)
		}
		for _, f := range files {
			var ge *synth.GraphError
			switch {
			case f.Err == nil:
				built++
				if why := pinAborts[f.Arch]; why != "" {
					t.Errorf("%s (embd %d): the graphs build, where llama.cpp %s aborted (%s): take it out of pinAborts", f.Name, embd, arch.Pin, why)
				}
			case errors.As(f.Err, &ge) && pinAborts[f.Arch] != "":
				if f.Err.Error() != pinAborts[f.Arch] {
					t.Errorf("%s (embd %d): %v, where llama.cpp %s aborts with %s", f.Name, embd, f.Err, arch.Pin, pinAborts[f.Arch])
				}
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
