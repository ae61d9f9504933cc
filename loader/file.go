package loader

import (
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"unsafe"

	"github.com/ggload/ggload/loader/internal/sysmem"
)

// modelFile is one file of the model, opened for reading: buffered, or
// bypassing the page cache (O_DIRECT on Linux) when direct I/O was asked for
// and the system and filesystem allow it.
type modelFile struct {
	path string
	f    *os.File // buffered reads (always open for a local file: mapping and fallback)
	size int64    // the GGUF's bytes
	base int64    // where they start in f (a GGUF inside a bigger file)
	// ra reads a source that is no local file (f is nil): no mapping, no
	// direct I/O, no file checks.
	ra     io.ReaderAt
	byPath bool // f was opened by its path: CheckFile looks for a replacement

	bounceMu     sync.Mutex
	bounces      []*dioBounce // bounce buffers of direct reads, free for the next
	bouncesFreed bool
	bounceMade   int64        // and the bytes of all it made
	copied       atomic.Int64 // bytes copied out of them

	// random reads a local file's few scattered bytes without readahead
	// (scattered), opened on first use; nil where it cannot be
	randomOnce sync.Once
	random     *os.File
	// leaves is set, before the load reads any tensor, when the load will
	// not read some tensors of the file (RPC servers' caches set them):
	// buffered reads then go through random too, so that the kernel does
	// not read the bytes after a tensor read ahead of the reader when
	// they are a tensor left unread
	leaves bool

	mu     sync.RWMutex // read-held by each direct read, so that fallBack's close waits for them
	direct *os.File     // direct reads, nil when not in use
	// direct I/O alignment (1 without direct I/O): of the file offsets and
	// lengths read, and of the memory read into (its bounce buffers'
	// and the ring's slots' too: never smaller than memAlign)
	align    int64
	memAlign int64 // of the memory a direct read may go straight into
	log      *slog.Logger
}

// alignment is the direct I/O alignment, 1 without direct I/O.
func (f *modelFile) alignment() int64 {
	f.mu.RLock()
	defer f.mu.RUnlock()
	return f.align
}

// currentSize stats the file again (it may have shrunk since it was
// opened): the bytes from the GGUF's start to the file's end.
func (f *modelFile) currentSize() (int64, error) {
	if f.f == nil {
		return f.size, nil
	}
	st, err := f.f.Stat()
	if err != nil {
		return 0, err
	}
	return max(st.Size()-f.base, 0), nil
}

// readAtBase is one buffered read at off of the GGUF.
func (f *modelFile) readAtBase(dst []byte, off int64) (int, error) {
	if f.f == nil {
		return f.ra.ReadAt(dst, off)
	}
	return f.buffered().ReadAt(dst, f.base+off)
}

// buffered is the descriptor of a local file's buffered reads of tensors:
// the load's own, or where the load leaves tensors unread, the one
// without readahead (scattered).
func (f *modelFile) buffered() *os.File {
	if f.leaves {
		return f.scattered()
	}
	return f.f
}

// preread is the descriptor through which the pages of the file's
// mapping are read before they are faulted in (sysmem.PopulateMapped): the one
// without readahead where the load leaves tensors unread; -1 otherwise.
func (f *modelFile) preread() int {
	if !f.leaves {
		return -1
	}
	if r := f.scattered(); r != f.f {
		return int(r.Fd())
	}
	return -1
}

// local reports a local file (mapped, read directly, checked).
func (f *modelFile) local() bool { return f.f != nil }

// fallBack stops using direct I/O after a refused read.
func (f *modelFile) fallBack(err error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.direct != nil {
		f.log.Warn(fmt.Sprintf("direct read of %s failed (%v); falling back to buffered I/O", f.path, err))
		f.direct.Close()
		f.direct, f.align = nil, 1
	}
}

// truncatedError is a read that ran into the end of a model file, or
// faulted in its mapping: the file shrank after it was opened. It wraps
// ErrTruncated (and so ErrFileChanged); truncated makes every one.
type truncatedError struct {
	path     string
	opened   int64 // the file's size when opened
	now      int64 // its size when the read came short, -1 when unknown
	at       int64 // the first byte the read did not get
	from, to int64 // the tensor's data in the file, when known (to > from)
	mapped   bool  // the read faulted in the mapping
	after    bool  // the read came after the load (Verify)
}

func (e *truncatedError) Error() string {
	var b strings.Builder
	b.WriteString(e.path)
	if e.now >= 0 {
		fmt.Fprintf(&b, " is %d bytes now, %d when opened", e.now, e.opened)
	} else {
		fmt.Fprintf(&b, " was %d bytes when opened; its size now is unknown", e.opened)
	}
	how := "reading it stopped"
	if e.mapped {
		how = "reading it through the mapping faulted"
	}
	if e.to > e.from {
		fmt.Fprintf(&b, ": the tensor's data is bytes [%d, %d) and %s at byte %d", e.from, e.to, how, e.at)
	} else {
		fmt.Fprintf(&b, ": %s at byte %d", how, e.at)
	}
	if e.after {
		b.WriteString(" (the file shrank after the load)")
	} else {
		b.WriteString(" (the file shrank during the load)")
	}
	return b.String()
}

func (e *truncatedError) Unwrap() error { return ErrTruncated }

// truncated is the error of a read of f that did not get byte at. A
// fault in the mapping of a read that starts at at says only that some
// byte of it is gone (the copy need not run in order): the first byte the
// file no longer holds is then at or its size now, whichever is later.
func (f *modelFile) truncated(at int64, mapped bool) *truncatedError {
	now, err := f.currentSize()
	if err != nil {
		now = -1
	}
	if mapped && now > at {
		at = now
	}
	return &truncatedError{path: f.path, opened: f.size, now: now, at: at, mapped: mapped}
}

// readFull reads len(dst) bytes at off; running into the end of the file is
// an error that names it and its size (the file shrank).
func (f *modelFile) readFull(dst []byte, off int64) error {
	if f.f == nil {
		return f.readFullFrom(f.ra, dst, off, 0)
	}
	return f.readFullFrom(f.buffered(), dst, off, f.base)
}

// readFullFrom is readFull through r, where the GGUF lies at base.
func (f *modelFile) readFullFrom(r io.ReaderAt, dst []byte, off, base int64) error {
	n, err := r.ReadAt(dst, base+off)
	if n == len(dst) {
		return nil
	}
	if err == nil || errors.Is(err, io.EOF) {
		return f.truncated(off+int64(n), false)
	}
	return err
}

// readAt reads exactly len(dst) bytes at off into any memory. Buffered,
// the read goes straight into dst. With direct I/O, the whole blocks of the
// range go straight into dst too where its memory lines up with them (at
// that block's first byte, dst meets the memory alignment): only the
// partial blocks at either end, or all of it where dst does not line up,
// pass through an aligned bounce buffer.
func (f *modelFile) readAt(dst []byte, off int64) error {
	f.mu.RLock()
	direct, align, memAlign := f.direct, f.align, f.memAlign
	f.mu.RUnlock()
	if direct == nil {
		return f.readFull(dst, off)
	}
	end := off + int64(len(dst))
	first, last := (off+align-1)&^(align-1), end&^(align-1)
	if last <= first || uintptr(unsafe.Pointer(&dst[first-off]))&uintptr(memAlign-1) != 0 {
		return f.readBounced(dst, off, align)
	}
	got, err := f.readDirect(dst[first-off:last-off], first)
	if err != nil {
		if directRefused(err) {
			f.fallBack(err)
			return f.readAt(dst, off)
		}
		return err
	}
	if got < int(last-first) {
		return f.truncated(first+int64(got), false)
	}
	if first > off {
		if err := f.readBounced(dst[:first-off], off, align); err != nil {
			return err
		}
	}
	if end > last {
		return f.readBounced(dst[last-off:], last, align)
	}
	return nil
}

// lineUp is where, in page-aligned memory, a read of off from src should
// start so that the whole direct-I/O blocks it covers go straight into it
// (readAt): off's place in the memory alignment; 0 where src does not read
// directly.
func lineUp(src source, off int64) int64 {
	f, ok := src.(*modelFile)
	if !ok {
		return 0
	}
	f.mu.RLock()
	defer f.mu.RUnlock()
	if f.direct == nil {
		return 0
	}
	return off & (f.memAlign - 1)
}

// readBounced reads len(dst) bytes at off through a bounce buffer: aligned
// direct reads of the blocks that hold them, each copied out.
func (f *modelFile) readBounced(dst []byte, off, align int64) error {
	start := off &^ (align - 1)
	end := (off + int64(len(dst)) + align - 1) &^ (align - 1)
	bounce, err := f.getBounce(align)
	if err != nil {
		return err
	}
	defer f.putBounce(bounce)
	buf := bounce.buf[:min(end-start, directChunk)]
	for pos := start; pos < end; {
		n := min(end-pos, int64(len(buf)))
		got, err := f.readDirect(buf[:n], pos)
		if err != nil {
			if directRefused(err) {
				f.fallBack(err)
				return f.readAt(dst, off)
			}
			return err
		}
		// copy the part of [pos, pos+got) that lies in [off, off+len)
		lo, hi := max(pos, off), min(pos+int64(got), off+int64(len(dst)))
		if hi > lo {
			copy(dst[lo-off:hi-off], buf[lo-pos:hi-pos])
			f.copied.Add(hi - lo)
		}
		if int64(got) < n {
			if pos+int64(got) < off+int64(len(dst)) {
				return f.truncated(pos+int64(got), false)
			}
			return nil
		}
		pos += n
	}
	return nil
}

// directChunk is the most one direct read moves through a bounce buffer:
// a reader's chunk (8 MiB) with the partial blocks at either end, for
// alignments up to 32 KiB, in one read.
const directChunk = 8<<20 + 64<<10

// dioBounce is a bounce buffer of direct reads: buf, aligned, inside the
// mapping raw.
type dioBounce struct{ raw, buf []byte }

// getBounce hands out a bounce buffer of directChunk bytes aligned to
// align for a direct read: one a finished read gave back, or a new one,
// mapped outside Go's heap. As many exist as direct reads of the file ever
// ran at once; Close unmaps them.
func (f *modelFile) getBounce(align int64) (*dioBounce, error) {
	f.bounceMu.Lock()
	if n := len(f.bounces); n > 0 {
		b := f.bounces[n-1]
		f.bounces = f.bounces[:n-1]
		f.bounceMu.Unlock()
		return b, nil
	}
	f.bounceMu.Unlock()
	raw, err := bounceMemory(directChunk+align, "direct reads of "+f.path)
	if err != nil {
		return nil, err
	}
	f.bounceMu.Lock()
	f.bounceMade += int64(len(raw))
	f.bounceMu.Unlock()
	skip := (align - int64(uintptr(unsafe.Pointer(&raw[0])))&(align-1)) & (align - 1)
	return &dioBounce{raw: raw, buf: raw[skip : skip+directChunk]}, nil
}

// bounceBytes is what the file's direct-read bounce buffers took.
func (f *modelFile) bounceBytes() uint64 {
	f.bounceMu.Lock()
	defer f.bounceMu.Unlock()
	return uint64(f.bounceMade)
}

// putBounce keeps a bounce buffer for the next direct read.
func (f *modelFile) putBounce(b *dioBounce) {
	f.bounceMu.Lock()
	defer f.bounceMu.Unlock()
	if f.bouncesFreed {
		sysmem.Unmap(b.raw)
		return
	}
	f.bounces = append(f.bounces, b)
}

// freeBounces unmaps the kept bounce buffers; later ones are unmapped as
// they come back.
func (f *modelFile) freeBounces() {
	f.bounceMu.Lock()
	defer f.bounceMu.Unlock()
	for _, b := range f.bounces {
		sysmem.Unmap(b.raw)
	}
	f.bounces, f.bouncesFreed = nil, true
}

// readWindow reads the len(dst) bytes at off, a few of a tensor the load
// does not otherwise read (a window that confirms it), through scattered:
// the kernel reads the window's pages, not a readahead window of the
// tensor around them.
func (f *modelFile) readWindow(dst []byte, off int64) error {
	if f.f == nil {
		return f.readFull(dst, off)
	}
	return f.readFullFrom(f.scattered(), dst, off, f.base)
}

// scattered reads a local file's few scattered bytes: through a descriptor
// with no readahead (openRandom), opened on first use, or where there is
// none, through the load's own. It reads the whole file, not from the
// GGUF's start.
func (f *modelFile) scattered() *os.File {
	f.randomOnce.Do(func() {
		f.random, _ = openRandom(f.f) // nil on an error
	})
	if f.random == nil {
		return f.f
	}
	return f.random
}

func (f *modelFile) Close() error {
	f.freeBounces()
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.direct != nil {
		f.direct.Close()
		f.direct = nil
	}
	if f.random != nil {
		f.random.Close()
		f.random = nil
	}
	if f.f == nil {
		return nil
	}
	return f.f.Close()
}
