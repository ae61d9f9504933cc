package loader

import (
	"bytes"
	"log/slog"
	"os"
	"path/filepath"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/ggload/ggload/internal/testenv"
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
		testenv.Evict(t, path)
		if n := testenv.Resident(t, path, 0, size); n != 0 {
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
		before := testenv.Resident(t, path, 0, size)
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
		return testenv.Resident(t, path, 0, size) - before
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
