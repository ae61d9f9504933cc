package loader

import (
	"bytes"
	"log/slog"
	"os"
	"path/filepath"
	"testing"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/ggload/ggload/loader/gguf"
)

// A window read to confirm a tensor the load does not otherwise read
// brings in the window's pages only. Through the load's own descriptor,
// the same read just past bytes already in the page cache (other reads of
// the file left them there) has the kernel read ahead of it as of a
// stream.
func TestReadWindowReadsNoMore(t *testing.T) {
	const size = 32 << 20
	data := make([]byte, size)
	for i := range data {
		data[i] = byte(i*7 + i>>12)
	}
	path := filepath.Join(t.TempDir(), "model.bin")
	if err := os.WriteFile(path, data, 0o644); err != nil {
		t.Fatal(err)
	}
	const at = 8 << 20 // the window, just past what other reads brought in
	read := func(window bool) int64 {
		t.Helper()
		f, err := openModelFile(gguf.Source{Name: path, Path: path, Size: size}, false, slog.New(slog.DiscardHandler))
		if err != nil {
			t.Fatal(err)
		}
		defer f.Close()
		dropPages(t, path)
		if n := pagesIn(t, path, size); n != 0 {
			t.Skipf("%s keeps %d bytes of a file in memory after they are dropped (tmpfs?): set TMPDIR to a disk's filesystem", path, n)
		}
		// the bytes before the window, read by another descriptor that
		// reads nothing more
		h, err := os.Open(path)
		if err != nil {
			t.Fatal(err)
		}
		defer h.Close()
		if err := unix.Fadvise(int(h.Fd()), 0, 0, unix.FADV_RANDOM); err != nil {
			t.Fatal(err)
		}
		buf := make([]byte, 64<<10)
		for off := int64(at - 4<<20); off < at; off += int64(len(buf)) {
			if _, err := h.ReadAt(buf, off); err != nil {
				t.Fatal(err)
			}
		}
		before := pagesIn(t, path, size)
		got := make([]byte, 64)
		if window {
			err = f.readWindow(got, at)
		} else {
			err = f.readFull(got, at)
		}
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(got, data[at:at+64]) {
			t.Fatalf("the window read other bytes than the file's")
		}
		return pagesIn(t, path, size) - before
	}
	page := int64(os.Getpagesize())
	if n := read(false); n < 16*page {
		t.Fatalf("the load's descriptor read %d bytes for the window: no readahead here to avoid", n)
	} else {
		t.Logf("the load's descriptor read %d bytes for the window", n)
	}
	if n := read(true); n > 2*page {
		t.Errorf("the window brought %d bytes of the file into the page cache, want its page", n)
	}
}

// dropPages drops a file's pages from the page cache.
func dropPages(t *testing.T, path string) {
	t.Helper()
	g, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer g.Close()
	if err := g.Sync(); err != nil { // dirty pages stay
		t.Fatal(err)
	}
	if err := unix.Fadvise(int(g.Fd()), 0, 0, unix.FADV_DONTNEED); err != nil {
		t.Fatal(err)
	}
}

// pagesIn is how many bytes of the first size of a file are in the page
// cache.
func pagesIn(t *testing.T, path string, size int64) int64 {
	t.Helper()
	g, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer g.Close()
	m, err := unix.Mmap(int(g.Fd()), 0, int(size), unix.PROT_READ, unix.MAP_SHARED)
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Munmap(m)
	page := int64(os.Getpagesize())
	vec := make([]byte, (size+page-1)/page)
	if _, _, e := unix.Syscall(unix.SYS_MINCORE, uintptr(unsafe.Pointer(&m[0])), uintptr(len(m)), uintptr(unsafe.Pointer(&vec[0]))); e != 0 {
		t.Fatal(e)
	}
	var n int64
	for _, v := range vec {
		n += int64(v&1) * page
	}
	return n
}
