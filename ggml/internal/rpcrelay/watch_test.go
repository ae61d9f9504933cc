package rpcrelay

import (
	"encoding/binary"
	"fmt"
	"io"
	"net"
	"slices"
	"sync"
	"testing"
	"time"
)

// A watch that withholds clears keeps back from the server exactly the
// clears to zero of the tensor it names, as many as it was told, and
// records them with the others; every other request reaches the server
// in order.
func TestWatchWithholdsClears(t *testing.T) {
	srv, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Close()
	var mu sync.Mutex
	var seen []string // the clears the server got: name/value
	go func() {
		c, err := srv.Accept()
		if err != nil {
			return
		}
		defer c.Close()
		hdr := make([]byte, 9)
		for {
			if _, err := io.ReadFull(c, hdr); err != nil {
				return
			}
			body := make([]byte, binary.LittleEndian.Uint64(hdr[1:]))
			if _, err := io.ReadFull(c, body); err != nil {
				return
			}
			if hdr[0] == CmdMemsetTensor {
				mu.Lock()
				seen = append(seen, clearOf(body))
				mu.Unlock()
			}
		}
	}()
	g, c := clientThrough(t, srv.Addr().String())
	w := g.Watch()
	w.Withhold("blk.0.attn_q.weight", 8, 2) // q8_0
	sends := []struct {
		name  string
		typ   uint32
		value byte
	}{
		{"blk.0.attn_q.weight", 8, 0},  // withheld
		{"blk.0.attn_k.weight", 8, 0},  // another tensor
		{"blk.0.attn_q.weight", 8, 1},  // not a clear to zero
		{"blk.0.attn_q.weight", 2, 0},  // another type
		{"blk.0.attn_q.weightx", 8, 0}, // a longer name
		{"blk.0.attn_q.weight", 8, 0},  // withheld
		{"blk.0.attn_q.weight", 8, 0},  // past the count
	}
	for _, s := range sends {
		req := make([]byte, MemsetValue+1)
		binary.LittleEndian.PutUint32(req[TensorType:], s.typ)
		copy(req[TensorName:], s.name)
		req[MemsetValue] = s.value
		msg := append([]byte{CmdMemsetTensor}, binary.LittleEndian.AppendUint64(nil, uint64(len(req)))...)
		if _, err := c.Write(append(msg, req...)); err != nil {
			t.Fatal(err)
		}
	}
	w.Wait(len(sends), 5*time.Second)
	got := w.Stop()
	if len(got) != len(sends) {
		t.Fatalf("the watch recorded %d requests, want %d", len(got), len(sends))
	}
	for i, r := range got {
		if !TensorNamed(r[:], sends[i].name) {
			t.Errorf("request %d recorded as another tensor's", i)
		}
	}
	want := []string{"blk.0.attn_k.weight/0", "blk.0.attn_q.weight/1", "blk.0.attn_q.weight/0", "blk.0.attn_q.weightx/0", "blk.0.attn_q.weight/0"}
	deadline := time.Now().Add(5 * time.Second)
	for {
		mu.Lock()
		have := slices.Clone(seen)
		mu.Unlock()
		if len(have) >= len(want) || time.Now().After(deadline) {
			if !slices.Equal(have, want) {
				t.Fatalf("the server got clears %q, want %q", have, want)
			}
			break
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// clearOf names a MEMSET_TENSOR request's tensor and value, as name/value.
func clearOf(body []byte) string {
	name := body[TensorName : TensorName+TensorNameMax]
	if i := slices.Index(name, 0); i >= 0 {
		name = name[:i]
	}
	return fmt.Sprintf("%s/%d", name, body[MemsetValue])
}

// clientThrough makes a guard for the server at addr and connects to it
// as the native client does; both end with the test.
func clientThrough(t *testing.T, addr string) (*Guard, net.Conn) {
	t.Helper()
	g, err := New(addr, 2*time.Second, 1)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { g.ln.Close() })
	c, err := net.Dial("tcp", g.local)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return g, c
}
