package testenv

import (
	"os"
	"testing"
	"unsafe"

	"golang.org/x/sys/unix"
)

// Evict drops a file's pages from the page cache, so that what a load
// reads of it afterwards shows (Resident).
func Evict(t testing.TB, path string) {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if err := f.Sync(); err != nil {
		t.Fatal(err)
	}
	if err := unix.Fadvise(int(f.Fd()), 0, 0, unix.FADV_DONTNEED); err != nil {
		t.Fatalf("evict %s: %v", path, err)
	}
}

// Resident is how many bytes of the n at off in a file are in the page
// cache (-1: not known here).
func Resident(t testing.TB, path string, off, n int64) int64 {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	ps := int64(os.Getpagesize())
	from, to := off&^(ps-1), (off+n+ps-1)&^(ps-1)
	m, err := unix.Mmap(int(f.Fd()), from, int(to-from), unix.PROT_READ, unix.MAP_SHARED)
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Munmap(m)
	vec := make([]byte, (to-from)/ps)
	if _, _, e := unix.Syscall(unix.SYS_MINCORE, uintptr(unsafe.Pointer(&m[0])), uintptr(len(m)), uintptr(unsafe.Pointer(&vec[0]))); e != 0 {
		t.Fatalf("mincore %s: %v", path, e)
	}
	var in int64
	for _, v := range vec {
		if v&1 != 0 {
			in += ps
		}
	}
	return in
}
