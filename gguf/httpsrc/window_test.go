package httpsrc_test

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"sync"
	"testing"

	"github.com/ggload/ggload/ggml"
	"github.com/ggload/ggload/gguf"
	"github.com/ggload/ggload/gguf/httpsrc"
)

// scanAhead is the most the header's parse reads ahead of what it needs
// (gguf's scanner reads windows of 256 KiB).
const scanAhead = 256 << 10

// The header window doubles as the parse reads on: it fetches at most
// twice what the parse reads (or the first window), and once the header
// is parsed keeps only that. A header of 600 KiB before 8 MiB of tensor
// data, from a first window of 64 KiB.
func TestHeaderWindowGrowsByWhatTheParseReads(t *testing.T) {
	w := gguf.NewWriter()
	if err := w.Set("test.pad", gguf.String(string(bytes.Repeat([]byte{'p'}, 600<<10)))); err != nil {
		t.Fatal(err)
	}
	if err := w.AddTensorBytes("big", ggml.TypeF32, []int64{2 << 20}, make([]byte, 8<<20)); err != nil {
		t.Fatal(err)
	}
	var file bytes.Buffer
	if _, err := w.WriteTo(&file); err != nil {
		t.Fatal(err)
	}
	fs := &fileServer{data: file.Bytes(), etag: `"v1"`}
	srv, _ := served(t, fs, false)
	const first = 64 << 10
	gm, err := httpsrc.OpenModel(context.Background(), srv.URL+"/model.gguf", httpsrc.Options{HeaderWindow: first})
	if err != nil {
		t.Fatal(err)
	}
	defer gm.Close()
	r := gm.Files[0].Source().Reader.(*httpsrc.Reader)
	read := gm.Files[0].DataOffset + scanAhead // the most the parse read
	if got := r.Received(); got > 2*read+first {
		t.Fatalf("the header window fetched %d bytes for a parse of at most %d", got, read)
	}
	if kept := httpsrc.WindowBytes(r); kept > read {
		t.Fatalf("the parsed header keeps %d bytes, the parse read at most %d", kept, read)
	}
	t.Logf("header of %d bytes: %d requests, %d bytes fetched, %d kept", gm.Files[0].DataOffset, r.Requests(), r.Received(), httpsrc.WindowBytes(r))
}

// watched is a reader whose window's memory is measured at every read.
type watched struct {
	r    *httpsrc.Reader
	mu   sync.Mutex
	peak int64
}

func (w *watched) ReadAt(p []byte, off int64) (int, error) {
	n, err := w.r.ReadAt(p, off)
	w.mu.Lock()
	w.peak = max(w.peak, httpsrc.WindowBytes(w.r))
	w.mu.Unlock()
	return n, err
}

// A key name of 8 MiB: the window keeps at most its limit and the slide
// past it, and each byte is fetched about once, in slides, however long
// the name the header claims; the parse ends in a model or a clean error.
func TestHugeKeyCostsItsBytes(t *testing.T) {
	const head, slide, first = 1 << 20, 1 << 20, 64 << 10
	defer httpsrc.SetWindowLimits(head, slide)()
	const keyLen = 8 << 20
	var file bytes.Buffer
	le := binary.LittleEndian
	file.WriteString("GGUF")
	binary.Write(&file, le, uint32(3))      // version
	binary.Write(&file, le, uint64(0))      // tensors
	binary.Write(&file, le, uint64(1))      // pairs
	binary.Write(&file, le, uint64(keyLen)) // the key's length
	file.Write(bytes.Repeat([]byte{'k'}, keyLen))
	binary.Write(&file, le, uint32(gguf.TypeUint8))
	file.WriteByte(1)
	fs := &fileServer{data: file.Bytes(), etag: `"v1"`}
	srv, open := served(t, fs, false)
	r, err := httpsrc.Open(context.Background(), srv.URL+"/model.gguf", httpsrc.Options{HeaderWindow: first})
	if err != nil {
		t.Fatal(err)
	}
	w := &watched{r: r}
	f, err := gguf.NewReader(w, r.Size())
	var fe *gguf.FormatError
	switch {
	case err == nil:
		if k := f.KV[0].Key; len(k) != keyLen {
			t.Fatalf("a key of %d bytes read back as %d", keyLen, len(k))
		}
	case !errors.As(err, &fe):
		t.Fatalf("not a clean refusal: %v", err)
	}
	r.Close()
	size := int64(file.Len())
	if w.peak > head+slide+first {
		t.Errorf("the window held up to %d bytes (limit %d, slide %d)", w.peak, head, slide)
	}
	if got := r.Received(); got > size+head {
		t.Errorf("%d bytes fetched for a file of %d", got, size)
	}
	if n := r.Requests(); n > size/slide+8 {
		t.Errorf("%d requests for a file of %d bytes in slides of %d", n, size, slide)
	}
	t.Logf("parse: %v; window up to %d bytes; %d requests, %d bytes fetched of %d", err, w.peak, r.Requests(), r.Received(), size)
	if n := settle(open.Load, 0); n != 0 {
		t.Fatalf("%d connections left open", n)
	}
}
