package loader

import (
	"bytes"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/ggload/ggload/gguf"
	"github.com/ggload/ggload/lab/testenv"
	"github.com/ggload/ggload/loader/internal/hashindex"
)

// A window read to confirm a tensor the load does not otherwise read
// brings in the window's pages only. Through the load's own descriptor,
// the same read just past bytes already in the page cache (other reads of
// the file left them there) has the kernel read ahead of it as of a
// stream.
func TestReadWindowReadsNoMore(t *testing.T) {
	const size, at = 32 << 20, 8 << 20 // the window, just past what other reads brought in
	path, data := scatteredFile(t, size)
	read := func(window bool) int64 {
		t.Helper()
		return broughtIn(t, path, size, at, func(f *modelFile) {
			got := make([]byte, 64)
			var err error
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
		})
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

// The samples of the hash index's identity check bring in their own pages
// only, one of them just past bytes already in the page cache; through the
// load's own descriptor the kernel reads ahead of the head and of that
// sample.
func TestIdentitySamplesReadNoMore(t *testing.T) {
	const size = 32 << 20
	path, _ := scatteredFile(t, size)
	at := int64(size*5/(hashindex.Samples+1)) &^ (hashindex.SamplePage - 1)
	read := func(scattered bool) (int64, uint64) {
		t.Helper()
		var sample uint64
		n := broughtIn(t, path, size, at, func(f *modelFile) {
			r := io.ReaderAt(f.f)
			if scattered {
				r = f.scattered()
			}
			id, err := hashindex.Identify(f.f, r)
			if err != nil {
				t.Fatal(err)
			}
			sample = id.Sample
		})
		return n, sample
	}
	// the head, the samples and the tail
	want := int64(hashindex.SampleHead + (hashindex.Samples+1)*hashindex.SamplePage)
	loadN, loadSample := read(false)
	if loadN <= want+16*int64(os.Getpagesize()) {
		t.Fatalf("the load's descriptor read %d bytes for the samples: no readahead here to avoid", loadN)
	}
	t.Logf("the load's descriptor read %d bytes for the samples", loadN)
	n, sample := read(true)
	t.Logf("their own descriptor read %d bytes", n)
	if n > want {
		t.Errorf("the samples brought %d bytes of the file into the page cache, want at most their %d", n, want)
	}
	if sample != loadSample {
		t.Errorf("the samples read through their own descriptor hash to %#x, through the load's %#x", sample, loadSample)
	}
}

// scatteredFile writes a file of size bytes of a pattern that differs
// from page to page.
func scatteredFile(t *testing.T, size int) (path string, data []byte) {
	t.Helper()
	data = make([]byte, size)
	for i := range data {
		data[i] = byte(i*7 + i>>12)
	}
	path = filepath.Join(t.TempDir(), "model.bin")
	if err := os.WriteFile(path, data, 0o644); err != nil {
		t.Fatal(err)
	}
	return path, data
}

// broughtIn opens path as a model file, drops its pages from the page
// cache, has another descriptor (which reads nothing more) read the 4 MiB
// before at, and returns how many bytes of the file read(f) then brought
// into the page cache.
func broughtIn(t *testing.T, path string, size, at int64, read func(f *modelFile)) int64 {
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
	h, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer h.Close()
	if err := unix.Fadvise(int(h.Fd()), 0, 0, unix.FADV_RANDOM); err != nil {
		t.Fatal(err)
	}
	buf := make([]byte, 64<<10)
	for off := max(at-4<<20, 0); off < at; off += int64(len(buf)) {
		if _, err := h.ReadAt(buf, off); err != nil {
			t.Fatal(err)
		}
	}
	before := testenv.Resident(t, path, 0, size)
	read(f)
	return testenv.Resident(t, path, 0, size) - before
}
