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
