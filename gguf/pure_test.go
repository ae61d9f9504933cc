package gguf_test

import (
	"debug/elf"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"

	"github.com/ggload/ggload/lab/testenv"
)

// gguf depends on the standard library alone (and ggml's pure-Go type
// traits, and its own regular-file open): a program that only reads GGUF
// files is a static binary with no native library and no cgo.
func TestGGUFIsPureGo(t *testing.T) {
	if _, err := exec.LookPath("go"); err != nil {
		t.Skip("the go command is not on PATH")
	}
	root := testenv.RepoRoot()
	list := exec.Command("go", "list", "-deps", "./gguf")
	list.Dir = root
	out, err := list.CombinedOutput()
	if err != nil {
		t.Fatalf("go list: %v\n%s", err, out)
	}
	for _, p := range strings.Fields(string(out)) {
		if strings.Contains(p, "purego") || strings.HasPrefix(p, "github.com/ggload/ggload/") &&
			p != "github.com/ggload/ggload/gguf" && p != "github.com/ggload/ggload/ggml/gtype" && p != "github.com/ggload/ggload/gguf/internal/osfile" {
			t.Errorf("gguf depends on %s", p)
		}
	}
	if runtime.GOOS != "linux" {
		t.Skip("the static check reads an ELF binary")
	}
	bin := filepath.Join(t.TempDir(), "ggufinfo")
	cmd := exec.Command("go", "build", "-o", bin, "./examples/ggufinfo")
	cmd.Dir = root
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	f, err := elf.Open(bin)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	for _, p := range f.Progs {
		if p.Type == elf.PT_INTERP || p.Type == elf.PT_DYNAMIC {
			t.Errorf("ggufinfo is dynamically linked (%v)", p.Type)
		}
	}
	if libs, _ := f.ImportedLibraries(); len(libs) > 0 {
		t.Errorf("ggufinfo needs %v", libs)
	}
	// and it works
	run, err := exec.Command(bin, filepath.Join(testenv.SourceTree(t), "models", "ggml-vocab-llama-spm.gguf")).CombinedOutput()
	if err != nil || !strings.Contains(string(run), "architecture llama") {
		t.Fatalf("ggufinfo: %v\n%.500s", err, run)
	}
}
