//go:build linux

package sysmem

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

// AnonMemory lists the process's private anonymous read-write mappings
// (nil when /proc cannot be read).
func AnonMemory() Ranges {
	b, err := os.ReadFile("/proc/self/maps")
	if err != nil {
		return nil
	}
	var out Ranges
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
func (before Ranges) since(now Ranges, least uintptr) Ranges {
	var out Ranges
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

// AdviseNewMemory advises huge pages over the anonymous memory mapped
// since before (what AnonMemory listed then), in runs of at least 2 MiB,
// and returns those runs; none when before is nil.
func AdviseNewMemory(before Ranges) Ranges {
	if before == nil {
		return nil
	}
	var out Ranges
	for _, r := range before.since(AnonMemory(), 2<<20) {
		if _, _, errno := unix.Syscall(unix.SYS_MADVISE, r[0], r[1]-r[0], unix.MADV_HUGEPAGE); errno == 0 {
			out = append(out, r)
		}
	}
	return out
}

// AdviseHugePages asks for transparent huge pages over the page-aligned
// part of [p, p+n): a fresh buffer filled then takes one fault per 2 MiB
// instead of one per 4 KiB. Best effort; errors are ignored.
func AdviseHugePages(p unsafe.Pointer, n uint64) {
	const page = 4096
	start := (uintptr(p) + page - 1) &^ (page - 1)
	end := (uintptr(p) + uintptr(n)) &^ (page - 1)
	if end <= start {
		return
	}
	unix.Syscall(unix.SYS_MADVISE, start, end-start, unix.MADV_HUGEPAGE)
}

// Release drops the pages of the ranges (MADV_DONTNEED), memory of this
// process that is about to be freed: glibc hands the pages of a freed
// chunk back only from the free lists and from the top of the main arena
// (malloc_trim), so a buffer freed at the top of another thread's arena
// would stay resident until that arena grows again. The ranges must be
// whole pages of one buffer, still held: what they held reads as zeros.
func (rs Ranges) Release() {
	for _, r := range rs {
		unix.Syscall(unix.SYS_MADVISE, r[0], r[1]-r[0], unix.MADV_DONTNEED)
	}
}

// Prefaulter maps pages in on other goroutines, ahead of their first use:
// a buffer's fresh memory (MADV_POPULATE_WRITE, which never changes what
// the pages hold: they are zeroed off the thread that writes them), or a
// file mapping's pages (MADV_POPULATE_READ).
type Prefaulter struct {
	stop atomic.Bool
	done chan struct{}
}

// Prefault starts faulting the ranges in for writing, in address order,
// 8 MiB at a time.
func Prefault(rs Ranges) *Prefaulter { return populate(unix.MADV_POPULATE_WRITE, nil, rs) }

// populate starts madvise(advice) over each list of ranges on a goroutine
// of its own, in address order, 8 MiB at a time (each after before, when
// not nil); a goroutine ends at the first refusal (an older kernel, memory
// gone, a file that shrank: the advice fails, it raises no signal).
func populate(advice int, before func(a, n uintptr), lists ...Ranges) *Prefaulter {
	pf := &Prefaulter{done: make(chan struct{})}
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

// Wait stops the faulting and waits for it to end: the memory may then be
// freed.
func (pf *Prefaulter) Wait() {
	pf.stop.Store(true)
	<-pf.done
}

// Finish waits for the faulting to end.
func (pf *Prefaulter) Finish() { <-pf.done }

// populateLater is PopulateLater, probed once.
var populateLater = sync.OnceValue(func() bool {
	page := unix.Getpagesize()
	m, err := unix.Mmap(-1, 0, page, unix.PROT_READ, unix.MAP_PRIVATE|unix.MAP_ANON)
	if err != nil {
		return false
	}
	defer unix.Munmap(m)
	return unix.Madvise(m, unix.MADV_POPULATE_READ) == nil
})

// PopulateLater reports whether a mapping's pages can be mapped in on
// other goroutines (MADV_POPULATE_READ, Linux 5.14: PopulateMapped) rather
// than by mmap itself (MAP_POPULATE), which holds its caller up until
// every page of the file is mapped, the pages that are only copied out of
// it included.
func PopulateLater() bool { return populateLater() }

// PopulateMapped starts mapping in the pages of [p, p+n) of a file's
// mapping, in parts at once, one per core (at most 4). Where fd is a
// descriptor of the file (not -1), on which p is at offset off, each part's
// pages are read into the page cache through it first, as they are
// (POSIX_FADV_WILLNEED on a descriptor advised random): a mapping's faults
// would read the file ahead of the pages they map, and past the range's
// end, where the caller may leave the file unread.
func PopulateMapped(p unsafe.Pointer, n uint64, fd int, off int64) *Prefaulter {
	page := uintptr(unix.Getpagesize())
	start := uintptr(p) &^ (page - 1)
	end := (uintptr(p) + uintptr(n) + page - 1) &^ (page - 1)
	parts := uintptr(min(runtime.NumCPU(), 4))
	size := max((end-start)/parts, 64<<20) &^ (page - 1)
	var rs []Ranges
	for a := start; a < end; a += size {
		rs = append(rs, Ranges{{a, min(a+size, end)}})
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
