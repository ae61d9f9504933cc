package main

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"

	"github.com/ggload/ggload/lab/testenv"
	"github.com/ggload/ggload/native"
)

func TestMain(m *testing.M) { testenv.Main(m) }

// The committed programs and tables are what the generator makes of the
// pinned source: regenerating is the mechanical step for a later pin
// (PIN.md), and nothing was edited by hand.
func TestGeneratedFromThePin(t *testing.T) {
	src := testenv.SourceTree(t)
	out := t.TempDir()
	pin := native.Load().LlamaCppTag
	if err := run(src, out, pin); err != nil {
		t.Fatalf("gen: %v", err)
	}
	for _, f := range []string{"arch/programs.sx", "arch/tables_gen.go", "arch/converter_gen.go", "graph/tables_gen.go", "clip/programs.sx", "clip/tables_gen.go"} {
		want, err := os.ReadFile(filepath.Join(testenv.RepoRoot(), "internal", "replay", f))
		if err != nil {
			t.Fatal(err)
		}
		got, err := os.ReadFile(filepath.Join(out, f))
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(got, want) {
			t.Errorf("%s differs from what scripts/gen-archs.sh makes of llama.cpp %s: run it", f, pin)
		}
	}
	// and a tree without the pin's sources is an error naming what is missing
	if err := run(t.TempDir(), t.TempDir(), pin); err == nil {
		t.Error("an empty source tree generated")
	}
}
