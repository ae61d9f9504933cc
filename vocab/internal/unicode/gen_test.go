package unicode

import (
	"bytes"
	"os"
	"sort"
	"testing"

	"github.com/ggload/ggload/lab/testenv"
	"github.com/ggload/ggload/vocab/internal/unicode/internal/gen/gentables"
)

// TestGenerated renders the tables again from the pinned source tree and
// holds the committed files to them.
func TestGenerated(t *testing.T) {
	t.Parallel()
	src := testenv.SourceTree(t)
	files, err := gentables.Generate(src)
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range sortedKeys(files) {
		have, err := os.ReadFile(name)
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(have, files[name]) {
			t.Errorf("%s differs from what internal/gen makes of %s: run go generate", name, src)
		}
	}
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}
