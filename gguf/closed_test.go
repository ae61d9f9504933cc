package gguf_test

import (
	"errors"
	"io"
	"os"
	"testing"

	"github.com/ggload/ggload/gguf"
)

// After Close, what was parsed stays readable and what needs the file
// fails with os.ErrClosed; closing twice does nothing.
func TestFileAfterClose(t *testing.T) {
	f, err := gguf.Open(writeSample(t, 32))
	if err != nil {
		t.Fatal(err)
	}
	arr, ok := f.Lookup("a.str")
	if !ok {
		t.Fatal("no a.str")
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
	if err := f.Close(); err != nil {
		t.Errorf("second Close: %v", err)
	}
	if s, ok := f.Lookup("t.str"); !ok || s.String() == "" || len(f.Tensors) == 0 {
		t.Errorf("metadata lost after Close: %v %v", s, ok)
	}
	if _, err := io.ReadAll(f.Data(f.Tensors[0])); !errors.Is(err, os.ErrClosed) {
		t.Errorf("tensor data after Close: %v", err)
	}
	if _, err := arr.Strings(); !errors.Is(err, os.ErrClosed) {
		t.Errorf("a string array after Close: %v", err)
	}
}

// Close of a nil File or Model does nothing; Closed tells a closed model,
// or one with a closed file, from an open one, and ErrClosed is
// os.ErrClosed too.
func TestClosedAndNilClose(t *testing.T) {
	var nf *gguf.File
	var nm *gguf.Model
	if err := nf.Close(); err != nil {
		t.Errorf("nil File: %v", err)
	}
	if err := nm.Close(); err != nil {
		t.Errorf("nil Model: %v", err)
	}
	if !nf.Closed() || !nm.Closed() {
		t.Errorf("nil File and Model: Closed %v %v, want true", nf.Closed(), nm.Closed())
	}
	path := writeSample(t, 32)
	m, err := gguf.OpenModel(path)
	if err != nil {
		t.Fatal(err)
	}
	if m.Closed() || m.Files[0].Closed() {
		t.Fatal("an open model says it is closed")
	}
	if err := m.Close(); err != nil {
		t.Fatal(err)
	}
	if !m.Closed() || !m.Files[0].Closed() {
		t.Fatal("a closed model says it is open")
	}
	m, err = gguf.OpenModel(path)
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	m.Files[0].Close()
	if !m.Closed() {
		t.Error("a model whose file was closed says it is open")
	}
	if !errors.Is(gguf.ErrClosed, os.ErrClosed) {
		t.Error("ErrClosed is not os.ErrClosed")
	}
}
