package rpcrelay

import (
	"encoding/binary"
	"github.com/ggload/ggload/ggml/gtype"
	"testing"
)

// A GET_ALLOC_SIZE answered for a dead server gives the tensor's bytes:
// 4096 q8_0 values in 32-value blocks of 34 bytes, two rows.
func TestRPCTensorBytes(t *testing.T) {
	req := make([]byte, 4+296+10*296)
	ne := []uint32{4096, 2, 1, 1}
	nb := []uint32{34, 4352, 8704, 8704}
	binary.LittleEndian.PutUint32(req[4+8:], uint32(gtype.TypeQ8_0))
	for i := range 4 {
		binary.LittleEndian.PutUint32(req[24+4*i:], ne[i])
		binary.LittleEndian.PutUint32(req[40+4*i:], nb[i])
	}
	if got := tensorBytes(req); got != 8704 {
		t.Fatalf("got %d, want 8704", got)
	}
	if got := tensorBytes(req[:20]); got != 0 {
		t.Fatalf("short request: %d", got)
	}
}
