//go:build unix

package gguf_test

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/ggload/ggload/gguf"
	"golang.org/x/sys/unix"
)

// A FIFO, a character device or a directory given as the model, or as one
// of its split parts, is refused at once with "not a regular file": a
// FIFO's open would wait for a writer, and /dev/zero would read as an empty
// file.
func TestNotAFileIsRefused(t *testing.T) {
	dir := t.TempDir()
	fifo := filepath.Join(dir, "model.gguf")
	must(t, unix.Mkfifo(fifo, 0o600))
	open := func(name string, f func() error) error {
		t.Helper()
		done := make(chan error, 1)
		go func() { done <- f() }()
		select {
		case err := <-done:
			return err
		case <-time.After(5 * time.Second):
			t.Fatalf("%s blocked", name)
			return nil
		}
	}
	for _, c := range []struct{ path, kind string }{{fifo, "a FIFO"}, {"/dev/zero", "a character device"}, {dir, "a directory"}} {
		err := open(c.path, func() error { m, err := gguf.OpenModel(c.path); closeModel(m); return err })
		if !errors.Is(err, gguf.ErrNotRegular) || !strings.Contains(err.Error(), c.path) || !strings.Contains(err.Error(), c.kind) {
			t.Errorf("OpenModel(%s) = %v", c.path, err)
		}
		if strings.Contains(err.Error(), "magic") {
			t.Errorf("OpenModel(%s) read it: %v", c.path, err)
		}
	}

	// the second of three split parts replaced by a FIFO
	w := modelWriter(t, 4)
	paths, err := w.WriteSplits(filepath.Join(dir, "m"), 3)
	must(t, err)
	must(t, os.Remove(paths[1]))
	must(t, unix.Mkfifo(paths[1], 0o600))
	err = open("split part", func() error { m, err := gguf.OpenModel(paths[0]); closeModel(m); return err })
	if !errors.Is(err, gguf.ErrNotRegular) || !strings.Contains(err.Error(), paths[1]) || !strings.Contains(err.Error(), "a FIFO") {
		t.Errorf("FIFO split part: %v", err)
	}
}

func closeModel(m *gguf.Model) {
	if m != nil {
		m.Close()
	}
}
