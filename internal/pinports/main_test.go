package main

import (
	"bytes"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/ggload/ggload/lab/testenv"
	"github.com/ggload/ggload/native"
)

func TestMain(m *testing.M) { testenv.Main(m) }

// The headers of the tree's hand ports parse, name the pin's release, and
// name files the pinned source has: a header that names a file the pin
// lacks, or an older release than the pin's, is a port nobody has held to
// this pin yet.
func TestPortsAreOfThePin(t *testing.T) {
	ports, err := Scan(testenv.RepoRoot())
	if err != nil {
		t.Fatal(err)
	}
	if len(ports) < 50 {
		t.Fatalf("%d ports found: the headers are not being read", len(ports))
	}
	tag := native.Load().LlamaCppTag
	src := testenv.SourceTree(t)
	for _, p := range ports {
		if p.Tag != tag {
			t.Errorf("%s: ported from llama.cpp %s, the pin is %s (PIN.md: review it against the upstream diff, then say %s)", p.File, p.Tag, tag, tag)
		}
		for _, f := range p.PinFiles {
			if _, err := os.Stat(filepath.Join(src, f)); err != nil {
				t.Errorf("%s: the pin has no %s", p.File, f)
			}
		}
	}
}

func TestParseHeader(t *testing.T) {
	for _, c := range []struct {
		src   string
		tag   string
		files []string
		ok    bool
		err   string
	}{
		{"// Port of llama.cpp src/llama-vocab.cpp (v0.5.0): llm_tokenizer_bpe.\n\npackage vocab\n", "v0.5.0", []string{"src/llama-vocab.cpp"}, true, ""},
		{"// Port of llama.cpp common/jinja/caps.h and caps.cpp (v0.6.1): what a\n// template supports.\n\npackage jinja\n", "v0.6.1", []string{"common/jinja/caps.h", "common/jinja/caps.cpp"}, true, ""},
		{"// Port of glibc's expf, as llama.cpp\n// src/llama-sampler.cpp (v0.5.0) calls it; not src/other.cpp.\n\npackage sample\n", "v0.5.0", []string{"src/llama-sampler.cpp"}, true, ""},
		{"// Port of llama.cpp src/a.cpp, src/a.cpp and include/llama.h (v1.2.3).\n//go:build linux\n\npackage x\n", "v1.2.3", []string{"src/a.cpp", "include/llama.h"}, true, ""},
		{"// Package x does things.\npackage x\n", "", nil, false, ""},
		{"package x\n\n// Port of llama.cpp src/a.cpp (v0.5.0).\n", "", nil, false, ""},
		{"// Port of llama.cpp src/a.cpp.\n\npackage x\n", "", nil, true, "names no release"},
		{"// Port of llama.cpp's sampler (v0.5.0).\n\npackage x\n", "", nil, true, "names no file"},
	} {
		tag, files, ok, err := parseHeader([]byte(c.src))
		if ok != c.ok || tag != c.tag || !slices.Equal(files, c.files) || (err == nil) != (c.err == "") || err != nil && !strings.Contains(err.Error(), c.err) {
			t.Errorf("%q: %q %q %v %v; want %q %q %v %q", c.src, tag, files, ok, err, c.tag, c.files, c.ok, c.err)
		}
	}
}

// diff names every pin file that changed or went between two trees, with
// the ports that shadow it, and prints the changes; an unchanged file is
// not named.
func TestDiff(t *testing.T) {
	old, new := t.TempDir(), t.TempDir()
	write := func(dir, f, s string) {
		t.Helper()
		p := filepath.Join(dir, f)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(s), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write(old, "src/same.cpp", "int a;\n")
	write(new, "src/same.cpp", "int a;\n")
	write(old, "src/changed.cpp", "int b = 1;\nint c;\n")
	write(new, "src/changed.cpp", "int b = 2;\nint c;\n")
	write(old, "src/gone.h", "x\n")
	ports := []Port{
		{File: "a/one.go", Tag: "v1", PinFiles: []string{"src/same.cpp", "src/changed.cpp"}},
		{File: "b/two.go", Tag: "v1", PinFiles: []string{"src/changed.cpp", "src/gone.h"}},
	}
	var out bytes.Buffer
	n, err := diff(&out, ports, old, new)
	if err != nil {
		t.Fatal(err)
	}
	s := out.String()
	for _, want := range []string{
		"2 of the 3 pin files that 2 ports shadow differ",
		"src/changed.cpp", "changed: a/one.go, b/two.go",
		"src/gone.h", "gone upstream: b/two.go",
		"-int b = 1;\n+int b = 2;",
	} {
		if !strings.Contains(s, want) {
			t.Errorf("the diff lacks %q:\n%s", want, s)
		}
	}
	if n != 2 || strings.Contains(s, "src/same.cpp") {
		t.Errorf("%d changed; an unchanged file named:\n%s", n, s)
	}
	out.Reset()
	if n, err := diff(&out, ports, old, old); err != nil || n != 0 || !strings.Contains(out.String(), "0 of the 3") {
		t.Errorf("a tree against itself: %d %v\n%s", n, err, out.String())
	}
}
