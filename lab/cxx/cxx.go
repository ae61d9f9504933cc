// Package cxx builds small C++ programs from the pinned llama.cpp source
// against the native set's own libllama and libllama-common, so that tests
// can hold ggload to llama.cpp's tools (llama-tokenize, llama-completion)
// and to its common library (common_sampler_init) as they ship, not to a
// reimplementation. A program is built once per source, flags and native
// set, into the user cache.
package cxx

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/ggload/ggload/bindings"
	"github.com/ggload/ggload/lab/testenv"
)

var buildMu sync.Mutex

// Build compiles sources (absolute, or relative to the pinned source tree)
// into an executable named name, linked with the set's libllama-common,
// libllama and libggml-base, and returns its path. A missing C++ compiler,
// libllama-common or source tree skips the test with what to install, or
// fails it where GGLOAD_REQUIRE names "llama".
func Build(t testing.TB, name string, sources []string, flags ...string) string {
	t.Helper()
	rt := testenv.Runtime(t)
	src := testenv.SourceTree(t)
	loc := rt.Location()
	if loc.Llama == "" {
		testenv.Missing(t, "llama", "the native set %s has no libllama (scripts/fetch-native.sh)", loc.Dir)
	}
	common := filepath.Join(loc.Dir, "libllama-common.so")
	if _, err := os.Stat(common); err != nil {
		testenv.Missing(t, "llama", "the native set %s has no libllama-common.so (scripts/fetch-native.sh)", loc.Dir)
	}
	cxx, err := exec.LookPath("g++")
	if err != nil {
		testenv.Missing(t, "llama", "no C++ compiler to build llama.cpp's %s (apt-get install g++)", name)
	}
	h := sha256.New()
	io.WriteString(h, strings.Join(flags, "\x00")+"\x01"+loc.Dir+"\x01")
	var abs []string
	for _, s := range sources {
		if !filepath.IsAbs(s) {
			s = filepath.Join(src, s)
		}
		b, err := os.ReadFile(s)
		if err != nil {
			t.Fatalf("cxx: %v", err)
		}
		h.Write(b)
		abs = append(abs, s)
	}
	for _, lib := range []string{common, loc.Llama, loc.Base} {
		if fi, err := os.Stat(lib); err == nil {
			io.WriteString(h, fi.ModTime().String())
		}
	}
	cache, err := bindings.CacheDir()
	if err != nil {
		t.Fatalf("cxx: %v", err)
	}
	dir := filepath.Join(cache, "cxx", hex.EncodeToString(h.Sum(nil))[:16])
	bin := filepath.Join(dir, name)
	buildMu.Lock()
	defer buildMu.Unlock()
	if _, err := os.Stat(bin); err == nil {
		return bin
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatalf("cxx: %v", err)
	}
	// one build at a time across the test processes (go test runs
	// packages at once): the others wait for its program
	lock := bin + ".lock"
	for {
		f, err := os.OpenFile(lock, os.O_CREATE|os.O_EXCL|os.O_WRONLY, 0o644)
		if err == nil {
			f.Close()
			defer os.Remove(lock)
			break
		}
		if _, err := os.Stat(bin); err == nil {
			return bin
		}
		if fi, err := os.Stat(lock); err == nil && time.Since(fi.ModTime()) > 20*time.Minute {
			os.Remove(lock) // left by a process that died building
			continue
		}
		time.Sleep(500 * time.Millisecond)
	}
	if _, err := os.Stat(bin); err == nil {
		return bin
	}
	tmp := fmt.Sprintf("%s.tmp%d", bin, os.Getpid())
	args := []string{"-std=c++17", "-O1", "-o", tmp}
	for _, inc := range []string{"include", "common", "ggml/include", "vendor", "tools/mtmd"} {
		args = append(args, "-I", filepath.Join(src, inc))
	}
	args = append(args, flags...)
	args = append(args, abs...)
	args = append(args, common, loc.Llama, loc.Base, "-Wl,-rpath,"+loc.Dir, "-lpthread")
	cmd := exec.Command(cxx, args...)
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("cxx: building %s: %v\n%s", name, err, out)
	}
	if err := os.Rename(tmp, bin); err != nil {
		t.Fatalf("cxx: %v", err)
	}
	return bin
}

// Command runs a program Build made, from the native set's directory so
// that ggml finds its backend modules there, with lavapipe visible as the
// tests' runtime sees it.
func Command(t testing.TB, bin string, args ...string) *exec.Cmd {
	t.Helper()
	loc := testenv.Runtime(t).Location()
	cmd := exec.Command(bin, args...)
	cmd.Dir = loc.Dir
	cmd.Env = append(os.Environ(), "LD_LIBRARY_PATH="+loc.Dir)
	if _, ok := os.LookupEnv("GGML_VK_VISIBLE_DEVICES"); !ok {
		cmd.Env = append(cmd.Env, "GGML_VK_VISIBLE_DEVICES=0")
	}
	return cmd
}
