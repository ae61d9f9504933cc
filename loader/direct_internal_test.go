package loader

import (
	"bytes"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"unsafe"

	"github.com/ggload/ggload/loader/gguf"
)

// A direct read the kernel refuses (here: into a misaligned buffer, EINVAL)
// switches the file to buffered reads with a warning; the data is still
// right.
func TestDirectIOFallsBackWhenRefused(t *testing.T) {
	if oDirect == 0 {
		t.Skip("no O_DIRECT on this system")
	}
	path := filepath.Join(t.TempDir(), "f.bin")
	data := make([]byte, 1<<16)
	for i := range data {
		data[i] = byte(i * 7)
	}
	if err := os.WriteFile(path, data, 0o644); err != nil {
		t.Fatal(err)
	}
	var log bytes.Buffer
	f, err := openModelFile(gguf.Source{Name: path, Path: path, Size: int64(len(data))}, true, slog.New(slog.NewTextHandler(&log, nil)))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if f.alignment() < 512 {
		t.Skipf("the filesystem refused O_DIRECT at open (%s)", log.String())
	}
	// an aligned read through O_DIRECT works
	buf := alignedBuffer(8192, f.alignment())
	if err := f.readChunk(buf, 4096); err != nil || !bytes.Equal(buf, data[4096:4096+8192]) {
		t.Fatalf("aligned direct read: %v", err)
	}
	// a misaligned destination is refused by the kernel: fall back
	raw := alignedBuffer(8192+1, f.alignment())[1:]
	if err := f.readChunk(raw, 4096); err != nil || !bytes.Equal(raw, data[4096:4096+8192]) {
		t.Fatalf("fallback read: %v", err)
	}
	if f.alignment() != 1 || !strings.Contains(log.String(), "falling back to buffered I/O") {
		t.Fatalf("no fallback: alignment %d, log %q", f.alignment(), log.String())
	}
	// unaligned reads of any size go through the bounce buffer when direct
	g, _ := openModelFile(gguf.Source{Name: path, Path: path, Size: int64(len(data))}, true, slog.New(slog.NewTextHandler(&log, nil)))
	defer g.Close()
	out := make([]byte, 1000)
	if err := g.readAt(out, 12345); err != nil || !bytes.Equal(out, data[12345:13345]) {
		t.Fatalf("bounce read: %v", err)
	}
}

// alignedBuffer returns n bytes whose start is aligned to align.
func alignedBuffer(n, align int64) []byte {
	raw := make([]byte, n+align)
	skip := (align - int64(uintptr(unsafe.Pointer(&raw[0])))&(align-1)) & (align - 1)
	return raw[skip : skip+n]
}
