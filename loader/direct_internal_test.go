package loader

import (
	"bytes"
	"errors"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"unsafe"

	"github.com/ggload/ggload/gguf"
)

// A direct read the kernel refuses (here: into a misaligned buffer, EINVAL)
// switches the file to buffered reads with a warning; the data is still
// right.
func TestDirectIOFallsBackWhenRefused(t *testing.T) {
	f, path, data, log := directFile(t, 1<<16)
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
	g, _ := openModelFile(gguf.Source{Name: path, Path: path, Size: int64(len(data))}, true, slog.New(slog.NewTextHandler(log, nil)))
	defer g.Close()
	out := make([]byte, 1000)
	if err := g.readAt(out, 12345); err != nil || !bytes.Equal(out, data[12345:13345]) {
		t.Fatalf("bounce read: %v", err)
	}
}

// directFile writes n bytes of a pattern to a file and opens it for direct
// reads (closed at the test's end), its warnings logged to log; it skips
// where the system or the filesystem refuses O_DIRECT.
func directFile(t *testing.T, n int) (f *modelFile, path string, data []byte, log *bytes.Buffer) {
	t.Helper()
	if oDirect == 0 {
		t.Skip("no O_DIRECT on this system")
	}
	path = filepath.Join(t.TempDir(), "f.bin")
	data = make([]byte, n)
	for i := range data {
		data[i] = byte(i*7 + i>>9)
	}
	if err := os.WriteFile(path, data, 0o644); err != nil {
		t.Fatal(err)
	}
	log = new(bytes.Buffer)
	f, err := openModelFile(gguf.Source{Name: path, Path: path, Size: int64(n)}, true, slog.New(slog.NewTextHandler(log, nil)))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { f.Close() })
	if f.alignment() < 2 {
		t.Skipf("the filesystem refused O_DIRECT at open (%s)", log.String())
	}
	return f, path, data, log
}

// alignedBuffer returns n bytes whose start is aligned to align.
func alignedBuffer(n, align int64) []byte {
	raw := make([]byte, n+align)
	skip := (align - int64(uintptr(unsafe.Pointer(&raw[0])))&(align-1)) & (align - 1)
	return raw[skip : skip+n]
}

// With direct I/O, the whole blocks of a read go straight into the
// destination where its memory lines up with them; only the partial blocks
// at either end, or all of a read into memory that does not line up, are
// copied out of a bounce buffer. The bytes are right either way.
func TestDirectReadsStraightIntoLinedUpMemory(t *testing.T) {
	f, _, data, log := directFile(t, 1<<20)
	a := f.alignment()
	size := int64(len(data))
	for _, c := range []struct {
		name   string
		off, n int64
		lined  bool
		copied int64
	}{
		{"whole blocks, lined up", 4 * a, 64 * a, true, 0},
		{"partial blocks at both ends, lined up", 4*a + 100, 64 * a, true, a},
		{"partial blocks at both ends, not lined up", 4*a + 100, 64 * a, false, 64 * a},
		{"inside one block", 4*a + 100, a / 2, true, a / 2},
		{"to the file's end, lined up", size - 3*a - 7, 3*a + 7, true, 7},
	} {
		if !c.lined && f.memAlign < 2 {
			continue // any memory lines up
		}
		// dst's first whole block starts on an aligned address (+1 when
		// it must not line up)
		shift := c.off & (a - 1)
		if !c.lined {
			shift++
		}
		dst := alignedBuffer(c.n+a+1, a)[shift : shift+c.n]
		before := f.copied.Load()
		if err := f.readAt(dst, c.off); err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		if !bytes.Equal(dst, data[c.off:c.off+c.n]) {
			t.Fatalf("%s: wrong bytes", c.name)
		}
		if got := f.copied.Load() - before; got != c.copied {
			t.Errorf("%s: %d bytes copied out of bounce buffers, want %d", c.name, got, c.copied)
		}
	}
	if f.alignment() != a {
		t.Fatalf("the file fell back to buffered reads: %s", log.String())
	}
	// a read past the end of the file (it shrank) is an error that says so
	dst := alignedBuffer(4*a, a)
	if err := f.readAt(dst, size-2*a); !errors.Is(err, ErrTruncated) {
		t.Fatalf("a read past the end: %v, want ErrTruncated", err)
	}
}
