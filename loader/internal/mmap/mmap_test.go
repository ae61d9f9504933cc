//go:build unix

package mmap

import (
	"bytes"
	"log/slog"
	"os"
	"path/filepath"
	"testing"
)

// A mapping reads the file's bytes at its offsets (a GGUF inside a bigger
// file included), unmaps whole pages from its fragment list, and Copy out
// of a file that shrank is an error, not a crash.
func TestMapUnmapCopy(t *testing.T) {
	page := os.Getpagesize()
	data := make([]byte, 8*page+100)
	for i := range data {
		data[i] = byte(i * 7)
	}
	path := filepath.Join(t.TempDir(), "f")
	if err := os.WriteFile(path, data, 0o644); err != nil {
		t.Fatal(err)
	}
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	base := int64(page + 10) // the GGUF starts inside a page
	m, err := Map(f, base, int64(len(data))-base, true, [][2]int64{{0, 50}}, false, slog.Default())
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	if m.Size() != int64(len(data))-base || m.Path() != path {
		t.Fatalf("size %d, path %s", m.Size(), m.Path())
	}
	got := make([]byte, 300)
	if fault, err := Copy(got, m.Addr(1000)); err != nil || fault != -1 {
		t.Fatal(fault, err)
	}
	if !bytes.Equal(got, data[base+1000:base+1300]) {
		t.Fatal("the mapping's bytes are not the file's")
	}
	// unmapping [10, 3 pages + 20) takes the whole pages inside it only
	if err := m.UnmapFragment(10, int64(3*page+20)); err != nil {
		t.Fatal(err)
	}
	lo := int64(page) - 10 // the first page boundary after the GGUF's byte 10
	hi := int64(3*page) - 10
	if fr := m.Fragments(); len(fr) != 2 || fr[0] != [2]int64{0, lo} || fr[1] != [2]int64{hi, m.Size()} {
		t.Fatalf("fragments %v, want [0 %d] [%d %d]", fr, lo, hi, m.Size())
	}
	// what stays mapped still reads
	if _, err := Copy(got[:5], m.Addr(lo-5)); err != nil || !bytes.Equal(got[:5], data[base+lo-5:base+lo]) {
		t.Fatal("the kept partial page does not read", err)
	}
	// the file shrinks under the mapping: a read past its new end faults
	if err := os.Truncate(path, base+int64(4*page)); err != nil {
		t.Fatal(err)
	}
	fault, err := Copy(got, m.Addr(int64(6*page)))
	if err == nil || fault < 0 {
		t.Fatalf("a read past the end of a shrunk file: fault %d, %v", fault, err)
	}
	if err := m.Close(); err != nil || m.Fragments() != nil {
		t.Fatal(err, m.Fragments())
	}
	if fault, err := Copy(nil, nil); fault != -1 || err != nil {
		t.Fatal("an empty copy", fault, err)
	}
	if PopulatesAll(true, [][2]int64{{0, 1}}) || PopulatesAll(false, nil) {
		t.Error("a lazy range or no prefetch populates the whole mapping")
	}
}
