package bench

import (
	"os"
	"path/filepath"
	"strings"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"
)

// kernelTime is the CPU time the kernel has spent for this process so far,
// all its threads together (getrusage): page faults, fresh pages zeroed,
// reads and copies made in system calls.
func kernelTime() (time.Duration, bool) {
	var ru unix.Rusage
	if unix.Getrusage(unix.RUSAGE_SELF, &ru) != nil {
		return 0, false
	}
	return time.Duration(ru.Stime.Nano()), true
}

// openDirect opens path for reads that bypass the page cache.
func openDirect(path string) (*os.File, error) {
	fd, err := unix.Open(path, unix.O_RDONLY|unix.O_DIRECT|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, &os.PathError{Op: "open with O_DIRECT", Path: path, Err: err}
	}
	return os.NewFile(uintptr(fd), path), nil
}

// mapTime is the time to map the files with their pages populated, best
// of two (0 when they cannot be mapped).
func mapTime(paths []string) float64 {
	best := 0.0
	for range 2 {
		start := time.Now()
		var maps [][]byte
		for _, p := range paths {
			f, err := os.Open(p)
			if err != nil {
				return 0
			}
			st, err := f.Stat()
			if err != nil || st.Size() == 0 {
				f.Close()
				return 0
			}
			b, err := unix.Mmap(int(f.Fd()), 0, int(st.Size()), unix.PROT_READ, unix.MAP_SHARED|unix.MAP_POPULATE)
			f.Close()
			if err != nil {
				return 0
			}
			maps = append(maps, b)
		}
		d := time.Since(start).Seconds()
		for _, b := range maps {
			unix.Munmap(b)
		}
		if best == 0 || d < best {
			best = d
		}
	}
	return best
}

// evictPageCache writes back and drops the files' pages from the page
// cache (posix_fadvise DONTNEED, which needs no privilege; pages another
// process maps or has dirty may stay: residentFraction tells).
func evictPageCache(paths []string) error {
	for _, p := range paths {
		f, err := os.Open(p)
		if err != nil {
			return err
		}
		err = unix.Fdatasync(int(f.Fd()))
		if err == nil {
			err = unix.Fadvise(int(f.Fd()), 0, 0, unix.FADV_DONTNEED)
		}
		f.Close()
		if err != nil {
			return &os.PathError{Op: "evict from the page cache", Path: p, Err: err}
		}
	}
	return nil
}

// residentFraction is the share of the files' pages in the page cache
// (mincore over a mapping that touches none), -1 when it cannot be told.
func residentFraction(paths []string) float64 {
	var in, all int64
	page := int64(os.Getpagesize())
	for _, p := range paths {
		f, err := os.Open(p)
		if err != nil {
			return -1
		}
		st, err := f.Stat()
		if err != nil || st.Size() == 0 {
			f.Close()
			continue
		}
		b, err := unix.Mmap(int(f.Fd()), 0, int(st.Size()), unix.PROT_READ, unix.MAP_SHARED)
		f.Close()
		if err != nil {
			return -1
		}
		vec := make([]byte, (st.Size()+page-1)/page)
		_, _, errno := unix.Syscall(unix.SYS_MINCORE, uintptr(unsafe.Pointer(&b[0])), uintptr(len(b)), uintptr(unsafe.Pointer(&vec[0])))
		unix.Munmap(b)
		if errno != 0 {
			return -1
		}
		for _, v := range vec {
			in += int64(v & 1)
		}
		all += int64(len(vec))
	}
	if all == 0 {
		return 0
	}
	return float64(in) / float64(all)
}

// FreePageReporting reports whether this machine is a virtual machine
// whose balloon device reports free memory to its host
// (VIRTIO_BALLOON_F_REPORTING): the host then takes back what the guest
// freed, a couple of seconds after, and the next fault on such a page waits
// for the host to back it again. A process that starts after a pause then
// finds its fresh pages tens of times slower than one that starts right
// after another freed its memory.
func FreePageReporting() bool { return freePageReportingAt("/sys/bus/virtio/devices") }

// freePageReportingAt looks for such a balloon among the virtio devices
// listed in dir (sysfs).
func freePageReportingAt(dir string) bool {
	devs, _ := filepath.Glob(filepath.Join(dir, "*"))
	for _, d := range devs {
		id, err := os.ReadFile(filepath.Join(d, "device"))
		if err != nil || strings.TrimSpace(string(id)) != "0x0005" { // a balloon
			continue
		}
		// one character per feature bit, bit 0 first
		f, err := os.ReadFile(filepath.Join(d, "features"))
		if err == nil && len(f) > 5 && f[5] == '1' {
			return true
		}
	}
	return false
}

// backMemory faults in n bytes of fresh memory (huge pages advised) and
// frees them: on a machine with free page reporting, the next process
// finds them backed by the host (see FreePageReporting). It returns what
// it faulted in.
func backMemory(n uint64) uint64 {
	page := uint64(os.Getpagesize())
	n &^= page - 1
	if n == 0 {
		return 0
	}
	b, err := freshPages(int(n))
	if err != nil {
		return 0
	}
	defer releasePages(b)
	if unix.Madvise(b, unix.MADV_POPULATE_WRITE) != nil {
		for i := uint64(0); i < n; i += page {
			b[i] = 0
		}
	}
	return n
}
