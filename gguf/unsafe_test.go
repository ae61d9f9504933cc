package gguf_test

import (
	"encoding/binary"
	"os"
	"unsafe"

	"github.com/ggload/ggload/ggml"
)

func int32Bytes(x []int32) []byte {
	b := make([]byte, 4*len(x))
	for i, v := range x {
		binary.LittleEndian.PutUint32(b[4*i:], uint32(v))
	}
	return b
}

// unsafeBytes is the data of a tensor in an allocating context.
func unsafeBytes(t *ggml.Tensor) []byte {
	var p unsafe.Pointer
	_ = t.WithData(func(d unsafe.Pointer) error { p = d; return nil })
	return unsafe.Slice((*byte)(p), t.NBytes())
}

func mkdirTemp() (string, error) { return os.MkdirTemp("", "gguf-bench-") }
