//go:build linux

package loader

import (
	"bufio"
	"bytes"
	"cmp"
	"os"
	"runtime"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"unsafe"

	"golang.org/x/sys/unix"
)

// Software devices (lavapipe and the like) keep a device buffer in this
// process's memory: anonymous pages the driver maps when the buffer is
// allocated, and every upload is a copy into them on a CPU. Fresh, those
// pages cost one fault per 4 KiB as the first upload writes them, which is
// most of such a load's time; with transparent huge pages, one per 2 MiB.
// The driver does not ask for huge pages, and ggml hides the address, so the
// loader finds the memory by what appeared in the process's address space
// while the buffer was allocated, and advises huge pages there before
// anything is written. A GPU's driver maps no anonymous memory of the
// buffer's size into the process (device memory lies behind the driver's
// file, or nowhere here), so nothing is advised for it; advice on memory
// that belongs to something else only changes how its pages are backed.

// anonRanges are address ranges [start, end) of private anonymous
// read-write memory, sorted.
type anonRanges [][2]uintptr

// anonMemory lists the process's private anonymous read-write mappings
// (nil when /proc cannot be read).
func anonMemory() anonRanges {
	b, err := os.ReadFile("/proc/self/maps")
	if err != nil {
		return nil
	}
	var out anonRanges
	sc := bufio.NewScanner(bytes.NewReader(b))
	for sc.Scan() {
		// start-end perms offset dev inode [path]
		f := bytes.Fields(sc.Bytes())
		if len(f) != 5 || string(f[1]) != "rw-p" || string(f[4]) != "0" {
			continue
		}
		se := bytes.SplitN(f[0], []byte("-"), 2)
		if len(se) != 2 {
			continue
		}
		s, err1 := strconv.ParseUint(string(se[0]), 16, 64)
		e, err2 := strconv.ParseUint(string(se[1]), 16, 64)
		if err1 != nil || err2 != nil || e <= s {
			continue
		}
		out = append(out, [2]uintptr{uintptr(s), uintptr(e)})
	}
	slices.SortFunc(out, func(a, b [2]uintptr) int { return cmp.Compare(a[0], b[0]) })
	return out
}

// since lists the ranges of now that were not mapped in before, in runs
// of at least least bytes.
func (before anonRanges) since(now anonRanges, least uintptr) anonRanges {
	var out anonRanges
	for _, r := range now {
		lo := r[0]
		for _, b := range before {
			if b[1] <= lo || b[0] >= r[1] {
				continue
			}
			if b[0] > lo && b[0]-lo >= least {
				out = append(out, [2]uintptr{lo, b[0]})
			}
			lo = max(lo, b[1])
		}
		if r[1] > lo && r[1]-lo >= least {
			out = append(out, [2]uintptr{lo, r[1]})
		}
	}
	return out
}

// adviseNewMemory advises huge pages over the anonymous memory mapped since
// before, in runs of at least 2 MiB, and returns those runs.
func adviseNewMemory(before anonRanges) anonRanges {
	if before == nil {
		return nil
	}
	var out anonRanges
	for _, r := range before.since(anonMemory(), 2<<20) {
		if _, _, errno := unix.Syscall(unix.SYS_MADVISE, r[0], r[1]-r[0], unix.MADV_HUGEPAGE); errno == 0 {
			out = append(out, r)
		}
	}
	return out
}

// release drops the pages of the ranges (MADV_DONTNEED), memory of this
// process that is about to be freed: glibc hands the pages of a freed
// chunk back only from the free lists and from the top of the main arena
// (malloc_trim), so a buffer freed at the top of another thread's arena
// would stay resident until that arena grows again. The ranges must be
// whole pages of one buffer, still held: what they held reads as zeros.
func (rs anonRanges) release() {
	for _, r := range rs {
		unix.Syscall(unix.SYS_MADVISE, r[0], r[1]-r[0], unix.MADV_DONTNEED)
	}
}

// bytes is the memory the ranges span.
func (rs anonRanges) bytes() uint64 {
	var n uint64
	for _, r := range rs {
		n += uint64(r[1] - r[0])
	}
	return n
}

// prefaulter faults a device buffer's fresh memory in on another goroutine
// (MADV_POPULATE_WRITE, which never changes what the pages hold), ahead of
// the uploads that write it: the pages are zeroed off the upload's thread.
// It also maps a file's pages in (MADV_POPULATE_READ) for the zero-copy
// buffers over the file, while the load moves the rest (populateLater).
type prefaulter struct {
	stop atomic.Bool
	done chan struct{}
}

// prefault starts faulting the ranges in, in address order, 8 MiB at a
// time.
func prefault(rs anonRanges) *prefaulter { return populate(unix.MADV_POPULATE_WRITE, nil, rs) }

// populate starts madvise(advice) over each list of ranges on a goroutine
// of its own, in address order, 8 MiB at a time (each after before, when
// not nil); a goroutine ends at the first refusal (an older kernel, memory
// gone, a file that shrank: the advice fails, it raises no signal).
func populate(advice int, before func(a, n uintptr), lists ...anonRanges) *prefaulter {
	pf := &prefaulter{done: make(chan struct{})}
	var wg sync.WaitGroup
	for _, rs := range lists {
		wg.Go(func() {
			const step = 8 << 20
			for _, r := range rs {
				for a := r[0]; a < r[1]; a += step {
					if pf.stop.Load() {
						return
					}
					n := min(uintptr(step), r[1]-a)
					if before != nil {
						before(a, n)
					}
					if _, _, errno := unix.Syscall(unix.SYS_MADVISE, a, n, uintptr(advice)); errno != 0 {
						return
					}
				}
			}
		})
	}
	go func() {
		wg.Wait()
		close(pf.done)
	}()
	return pf
}

// wait stops the faulting and waits for it to end.
func (pf *prefaulter) wait() {
	pf.stop.Store(true)
	<-pf.done
}

// finish waits for the faulting to end.
func (pf *prefaulter) finish() { <-pf.done }

// populateLater reports whether a mapping's pages can be mapped in on
// another goroutine (MADV_POPULATE_READ, Linux 5.14) rather than by mmap
// itself (MAP_POPULATE), which holds the whole load up until every page of
// the file is mapped, the pages that are only copied out of it included.
var populateLater = sync.OnceValue(func() bool {
	page := unix.Getpagesize()
	m, err := unix.Mmap(-1, 0, page, unix.PROT_READ, unix.MAP_PRIVATE|unix.MAP_ANON)
	if err != nil {
		return false
	}
	defer unix.Munmap(m)
	return unix.Madvise(m, unix.MADV_POPULATE_READ) == nil
})

// populateMapped starts mapping in the pages of [p, p+n) of a file's
// mapping, in parts at once, one per core (at most 4). Where fd is a
// descriptor of the file (not -1), on which p is at offset off, each part's
// pages are read into the page cache through it first, as they are
// (POSIX_FADV_WILLNEED on a descriptor advised random): a mapping's faults
// would read the file ahead of the pages they map, and past the range's
// end, where the load may leave tensors unread (modelFile.leaves).
func populateMapped(p unsafe.Pointer, n uint64, fd int, off int64) *prefaulter {
	page := uintptr(unix.Getpagesize())
	start := uintptr(p) &^ (page - 1)
	end := (uintptr(p) + uintptr(n) + page - 1) &^ (page - 1)
	parts := uintptr(min(runtime.NumCPU(), 4))
	size := max((end-start)/parts, 64<<20) &^ (page - 1)
	var rs []anonRanges
	for a := start; a < end; a += size {
		rs = append(rs, anonRanges{{a, min(a+size, end)}})
	}
	var before func(a, n uintptr)
	if fd >= 0 {
		before = func(a, n uintptr) {
			// in pieces that the kernel reads whole (a readahead of
			// fadvise reads at most a readahead window or the disk's
			// largest request, never under 128 KiB)
			const piece = 128 << 10
			at := off + int64(a) - int64(uintptr(p))
			for k := int64(0); k < int64(n); k += piece {
				unix.Fadvise(fd, at+k, min(piece, int64(n)-k), unix.FADV_WILLNEED)
			}
		}
	}
	return populate(unix.MADV_POPULATE_READ, before, rs...)
}
