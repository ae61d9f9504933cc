package gguf_test

import (
	"bytes"
	"strings"
	"testing"

	"github.com/ggload/ggload/ggml"
	"github.com/ggload/ggload/gguf"
)

// The zero Writer writes files; the zero Value holds nothing and says so.
func TestZeroValues(t *testing.T) {
	var w gguf.Writer
	if err := w.Set(gguf.KeyArchitecture, gguf.String("llama")); err != nil {
		t.Fatal(err)
	}
	if err := w.AddTensorBytes("token_embd.weight", ggml.TypeF32, []int64{4, 2}, make([]byte, 32)); err != nil {
		t.Fatal(err)
	}
	if err := w.AddTensorBytes("token_embd.weight", ggml.TypeF32, []int64{4, 2}, make([]byte, 32)); err == nil {
		t.Error("a duplicate tensor name was accepted")
	}
	w.Delete("no.such.key")
	var buf bytes.Buffer
	if _, err := w.WriteTo(&buf); err != nil {
		t.Fatal(err)
	}
	f, err := gguf.NewReader(bytes.NewReader(buf.Bytes()), int64(buf.Len()))
	if err != nil {
		t.Fatal(err)
	}
	if a, _ := f.Lookup(gguf.KeyArchitecture); a.String() != `"llama"` || len(f.Tensors) != 1 {
		t.Fatalf("read back: %v, %d tensors", a, len(f.Tensors))
	}

	var v gguf.Value
	if v.Kind() != gguf.TypeInvalid || v.ElemType() != gguf.TypeInvalid || v.Len() != 0 || v.String() != "<invalid>" || !strings.Contains(v.TypeName(), "invalid") {
		t.Errorf("the zero Value: kind %v, elem %v, len %d, %q, %q", v.Kind(), v.ElemType(), v.Len(), v.String(), v.TypeName())
	}
	if _, ok := v.Uint(); ok {
		t.Error("the zero Value reads as an unsigned integer")
	}
	if _, ok := v.Int(); ok {
		t.Error("the zero Value reads as an integer")
	}
	if _, ok := v.Bits(); ok {
		t.Error("the zero Value has bits")
	}
	if _, err := v.Ints(); err == nil {
		t.Error("the zero Value reads as an array")
	}
	if err := w.Set("x", v); err == nil || !strings.Contains(err.Error(), "zero Value") {
		t.Errorf("the writer took the zero Value: %v", err)
	}
	if k := gguf.Uint8(0).Kind(); k != gguf.TypeUint8 {
		t.Errorf("Uint8(0) is %v", k)
	}
}
