package bindings

import (
	"bytes"
	"errors"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/ggload/ggload/native"
)

func openOrSkip(t *testing.T) *Lib {
	t.Helper()
	l, err := Open(FindOptions{})
	if err != nil {
		if os.Getenv("GGLOAD_REQUIRE") != "" {
			t.Fatal(err)
		}
		t.Skipf("native libraries missing (scripts/fetch-native.sh): %v", err)
	}
	return l
}

func TestOpenChecksPinAndLayout(t *testing.T) {
	l := openOrSkip(t)
	if l.Version != native.Load().GGMLVersion {
		t.Fatalf("version %s", l.Version)
	}
	// Open ran checkLayout; run it again to prove it is not vacuous on this set
	if err := l.checkLayout(); err != nil {
		t.Fatal(err)
	}
	if l.DevCount() == 0 || l.DevByType(DevTypeCPU) == 0 {
		t.Fatal("no CPU device registered")
	}
	// a second Open returns the same set; a different directory is refused
	if l2, err := Open(FindOptions{}); err != nil || l2 != l {
		t.Fatalf("second open: %v", err)
	}
	if _, err := Open(FindOptions{Dir: t.TempDir()}); err == nil || !strings.Contains(err.Error(), "already open") {
		t.Fatalf("other dir: %v", err)
	}
	if err := checkSingleBase(); err != nil {
		t.Fatal(err)
	}
}

func TestLogRoutedToSlog(t *testing.T) {
	l := openOrSkip(t)
	var buf bytes.Buffer
	SetLogger(slog.New(slog.NewTextHandler(&buf, &slog.HandlerOptions{Level: slog.LevelDebug})))
	defer SetLogger(slog.Default())
	// loading a module that does not exist makes ggml log an error
	missing := filepath.Join(t.TempDir(), "libggml-nothing.so")
	if r := l.Load(missing); r != 0 {
		t.Fatal("a missing module loaded")
	}
	if !strings.Contains(buf.String(), "level=ERROR") || !strings.Contains(buf.String(), "src=ggml") || !strings.Contains(buf.String(), missing) {
		t.Fatalf("no ggml error in slog output: %q", buf.String())
	}
}

func TestProcAddress(t *testing.T) {
	l := openOrSkip(t)
	cpu := l.DevBackendReg(l.DevByType(DevTypeCPU))
	setThreads, ok := Proc[func(Backend, int32)](l, cpu, "ggml_backend_set_n_threads")
	if !ok || setThreads == nil {
		t.Fatal("CPU backend has no ggml_backend_set_n_threads")
	}
	if _, ok := Proc[func()](l, cpu, "no_such_entry_point"); ok {
		t.Fatal("unknown entry point found")
	}
	// cached answers are the same
	if _, ok := Proc[func(Backend, int32)](l, cpu, "ggml_backend_set_n_threads"); !ok {
		t.Fatal("cache lost the entry point")
	}
}

// TestVersionMismatch opens a copy of the set whose libggml-base reports
// another version, in a child process (a process can open one set only).
func TestVersionMismatch(t *testing.T) {
	if dir := os.Getenv("GGLOAD_TEST_MISMATCH_DIR"); dir != "" {
		_, err := Open(FindOptions{Dir: dir})
		if err == nil {
			os.Stdout.WriteString("OPENED\n")
			os.Exit(0)
		}
		os.Stdout.WriteString(err.Error() + "\n")
		if errors.Is(err, ErrVersion) {
			os.Exit(3)
		}
		os.Exit(4)
	}
	l := openOrSkip(t)
	dir := t.TempDir()
	base, err := os.ReadFile(l.Loc.Base)
	if err != nil {
		t.Fatal(err)
	}
	pin := native.Load().GGMLVersion
	if bytes.Count(base, []byte(pin+"\x00")) != 1 {
		t.Skipf("the version string %q is not unique in %s", pin, l.Loc.Base)
	}
	fake := strings.Repeat("9", len(pin)-2) + ".9"
	base = bytes.Replace(base, []byte(pin+"\x00"), []byte(fake+"\x00"), 1)
	if err := os.WriteFile(filepath.Join(dir, filepath.Base(l.Loc.Base)), base, 0o755); err != nil {
		t.Fatal(err)
	}
	core, _ := os.ReadFile(l.Loc.Core)
	if err := os.WriteFile(filepath.Join(dir, filepath.Base(l.Loc.Core)), core, 0o755); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(os.Args[0], "-test.run=^TestVersionMismatch$")
	cmd.Env = append(os.Environ(), "GGLOAD_TEST_MISMATCH_DIR="+dir)
	out, err := cmd.CombinedOutput()
	var ee *exec.ExitError
	if !errors.As(err, &ee) || ee.ExitCode() != 3 {
		t.Fatalf("child: %v\n%s", err, out)
	}
	if !strings.Contains(string(out), "is ggml "+fake) || !strings.Contains(string(out), "the pin is ggml "+pin) {
		t.Fatalf("error does not name both versions:\n%s", out)
	}
}

func TestAddedModulesOfAnotherPinRefused(t *testing.T) {
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, ".added"), []byte("v0.4.9 libggml-rpc.so\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	err := checkAdded(Location{Dir: dir}, native.Load())
	if !errors.Is(err, ErrVersion) || !strings.Contains(err.Error(), "v0.4.9") || !strings.Contains(err.Error(), "libggml-rpc.so") {
		t.Fatalf("got %v", err)
	}
	if err := os.WriteFile(filepath.Join(dir, ".added"), []byte(native.Load().LlamaCppTag+" libggml-rpc.so\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := checkAdded(Location{Dir: dir}, native.Load()); err != nil {
		t.Fatal(err)
	}
}
