package arch_test

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"github.com/ggload/ggload/internal/replay/arch"
	"github.com/ggload/ggload/lab/testenv"
)

// The committed programs and tables are what the generator makes of the
// pinned source: regenerating is the mechanical step for a later pin, and
// nothing was edited by hand.
func TestGeneratedFromThePin(t *testing.T) {
	src := testenv.SourceTree(t)
	if _, err := exec.LookPath("go"); err != nil {
		t.Skip("the go command is not on PATH")
	}
	out := t.TempDir()
	cmd := exec.Command("go", "run", "./internal/replay/gen", "-src", src, "-out", out, "-pin", arch.Pin)
	cmd.Dir = testenv.RepoRoot()
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
	if b, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("gen: %v\n%s", err, b)
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
			t.Errorf("%s differs from what scripts/gen-archs.sh makes of llama.cpp %s: run it", f, arch.Pin)
		}
	}
}
