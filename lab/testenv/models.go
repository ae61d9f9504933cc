package testenv

import (
	"path/filepath"
	"testing"

	"github.com/ggload/ggload/ggml"
	"github.com/ggload/ggload/gguf"
	"github.com/ggload/ggload/lab/synth"
)

// ModelFile writes spec's model into the test's temporary directory and
// returns its path (the first split's, for split models).
func ModelFile(t testing.TB, rt *ggml.Runtime, spec synth.Spec) string {
	t.Helper()
	path, err := spec.Write(rt, filepath.Join(t.TempDir(), "model.gguf"))
	if err != nil {
		t.Fatal(err)
	}
	return path
}

// OpenModel opens the model at path for the rest of the test.
func OpenModel(t testing.TB, path string) *gguf.Model {
	t.Helper()
	m, err := gguf.OpenModel(path)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { m.Close() })
	return m
}
