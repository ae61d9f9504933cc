package loader

import (
	"fmt"
	"slices"
	"sync"
	"unsafe"

	"github.com/ggload/ggload/ggml"
	"github.com/ggload/ggload/place"
)

// The paths a tensor's bytes take, as in llama.cpp's load_all_data.

// isZeroCopy reports whether task t stays in the mapping: mmap (or lazy)
// and inside a buffer made over it.
func (l *load) isZeroCopy(t task) bool {
	tp, w := t.pl.Plan, t.w
	return (l.p.UseMmap || tp.Lazy) && l.bufs.cover(tp.Context, w.File, w.Offset, w.Size) != nil
}

// zeroCopy places a tensor in the buffer made over its bytes in the
// mapping.
func (l *load) zeroCopy(t task) error {
	mdl := l.model
	tp, w := t.pl.Plan, t.w
	mp := mdl.mappings[w.File]
	addr := mp.Addr(w.Offset)
	cover := l.bufs.cover(tp.Context, w.File, w.Offset, w.Size)
	if err := t.pl.Tensor.Alloc(cover.Buffer, addr); err != nil {
		return fmt.Errorf("loader: tensor '%s': %w", tp.Name, err)
	}
	t.pl.Buffer = cover
	t.pl.Path = PathZeroCopy
	if tp.Lazy {
		t.pl.Path = PathLazy
	} else {
		for _, lk := range mdl.locks {
			if lk.Addr() == mp.Addr(0) {
				lk.GrowTo(uintptr(w.Offset + w.Size))
			}
		}
	}
	u := &l.bufs.used[w.File]
	u[0], u[1] = min(u[0], w.Offset), max(u[1], w.Offset+w.Size)
	if l.o.CheckTensors {
		// rows are checked on a copy: native code never reads the
		// mapping during the load
		l.validateMapped(tp, mapSource{mp, mdl.files[w.File]})
	}
	l.addDone(t.pl.Path, uint64(tp.Bytes))
	return l.progress()
}

// loadOne moves one tensor's bytes by the path its placement calls for.
// With mmap too, a tensor that does not stay in the mapping is read from
// the file (through the page cache, as llama.cpp's copy out of the mapping
// reads it) rather than copied out of the mapping: the same bytes, without
// a page fault per few pages or a readahead window per fault (128 KiB on
// most disks), and without the mapping's pages in the process's resident
// set.
func (ln *lane) loadOne(t task) error {
	l := ln.l
	f := l.model.files[t.w.File]
	if !l.laneReads(t) {
		t.pl.Path = PathRead
		ln.readers = true
		return l.readers.submit(ln, t, f)
	}
	if ln.ahead != nil && !f.local() {
		return ln.fill(t, aheadSource{ln.ahead, f})
	}
	return ln.fill(t, f)
}

// laneReads reports whether a tensor's lane reads it from its file itself:
// not into host memory (the reader pool's).
func (l *load) laneReads(t task) bool {
	return t.pl.Buffer == nil || !t.pl.Buffer.Buffer.IsHost()
}

// fill moves a tensor that is not zero copy, bound for a device buffer,
// from src into its buffer (the reader pool reads into host memory):
// through the pinned staging ring where the device can upload
// asynchronously; otherwise to an RPC server whole through its
// connection's queue (rpcqueue.go: its file cache recognises tensors by
// the hash of the whole); otherwise
// through a bounce buffer and tensor_set: in pieces of whole rows, or whole
// where the buffer type transforms what it is given (CPU_REPACK and other
// extra or split buffer types). The path is set here. The bytes count as
// done piece by piece, with a progress report after each: a large tensor
// moves the progress inside.
func (ln *lane) fill(t task, src source) error {
	l := ln.l
	tp, w, b := t.pl.Plan, t.w, t.pl.Buffer
	if b == nil {
		return fmt.Errorf("loader: tensor '%s' has no buffer", tp.Name)
	}
	dev := b.Device
	if dev.IsRPC() {
		t.pl.Path = PathSync
		if dev.SendsRPC() {
			return ln.rpcDirect(t, src)
		}
		return ln.rpcSend(t, src)
	}
	if !l.o.CheckTensors {
		ring, err := ln.ring(b)
		if err != nil {
			return err
		}
		if ring != nil {
			t.pl.Path = PathStaged
			if err := ring.upload(ln, t, src, w.Offset, w.Size); err != nil {
				return err
			}
			return deviceErr(b, tp.Name)
		}
	}
	t.pl.Path = PathSync
	if err := ln.setFrom(t, src, setsWhole(b)); err != nil {
		return fmt.Errorf("loader: tensor '%s' to %s: %w", tp.Name, dev.Name(), err)
	}
	return deviceErr(b, tp.Name)
}

// setsWhole reports whether tensors must be set into b whole: buffer types
// other than the device's own transform or split what they are given and
// take only whole tensors (CPU_REPACK asserts it), as does a meta
// device's buffer. (RPC servers, whose
// cache knows tensors by the hash of the whole, take them whole from their
// queue.)
func setsWhole(b *LoadedBuffer) bool {
	// a meta device's buffer splits a tensor along one of its dimensions:
	// a piece of whole rows need not be whole slices
	return b.BufferType != b.Device.BufferType() || b.Device.IsMeta()
}

// piece is the most bytes of one tensor moved between two progress reports.
func (l *load) piece() int64 {
	if l.o.ChunkSize > 0 {
		return l.o.ChunkSize
	}
	return 8 << 20
}

// readReporting fills dst from src at off in pieces, each counted as done
// (by path) and followed by a progress report.
func (ln *lane) readReporting(path Path, src source, dst []byte, off int64) error {
	l := ln.l
	piece := l.piece()
	for pos := int64(0); pos < int64(len(dst)); pos += piece {
		n := min(piece, int64(len(dst))-pos)
		if err := src.readAt(dst[pos:pos+n], off+pos); err != nil {
			return err
		}
		ln.addDone(path, uint64(n))
		if err := l.progress(); err != nil {
			return err
		}
	}
	return nil
}

// addDone counts n bytes done by the lane.
func (ln *lane) addDone(path Path, n uint64) {
	ln.bytes.Add(n)
	ln.l.addDone(path, n)
}

func (l *load) addDone(path Path, n uint64) {
	l.prog.done.Add(n)
	l.model.statsMu.Lock()
	if l.model.Stats.Moved == nil {
		l.model.Stats.Moved = map[Path]uint64{}
	}
	l.model.Stats.Moved[path] += n
	l.model.Stats.Bytes += n
	l.model.statsMu.Unlock()
}

// deviceErr reports the failure of the RPC server behind b's device, naming
// the tensor being loaded when it was found.
func deviceErr(b *LoadedBuffer, tensor string) error {
	if b == nil || b.Device == nil {
		return nil
	}
	if err := b.Device.Err(); err != nil {
		return fmt.Errorf("loader: tensor '%s' to %s: %w", tensor, b.Device.Name(), err)
	}
	return nil
}

// setFrom reads a tensor from src into a bounce buffer, memory the lane
// owns, and sets it from there: in pieces of whole rows (at most 16 MiB,
// and at most a progress piece where rows allow), each counted as done once
// set; or whole, counted as done as it is read, and set by native code on
// another goroutine while the lane goes on reading the next tensor
// (background.go).
func (ln *lane) setFrom(t task, src source, whole bool) error {
	l := ln.l
	tp, w := t.pl.Plan, t.w
	chunk := w.Size
	if !whole {
		row, err := tp.Type.RowSize(tp.Shape[0])
		if err != nil || row <= 0 {
			row = 1
		}
		chunk = min(max(min(int64(16<<20), l.piece())/row, 1)*row, w.Size)
	}
	if chunk == 0 {
		return nil
	}
	if whole {
		return ln.setWhole(t, src)
	}
	buf, err := ln.bounceBuf(chunk, tp.Name)
	if err != nil {
		return err
	}
	defer ln.putBounce(buf)
	for off := int64(0); off < w.Size; off += chunk {
		if err := l.canceled(); err != nil {
			return err
		}
		n := min(chunk, w.Size-off)
		if err := src.readAt(buf[:n], w.Offset+off); err != nil {
			return namingFile(err, src.file(), w)
		}
		if l.o.CheckTensors {
			l.validateSync(tp.Name, tp.Type, unsafe.Pointer(&buf[0]), uint64(n))
		}
		if err := t.pl.Tensor.Set(buf[:n], uint64(off)); err != nil {
			return err
		}
		ln.addDone(t.pl.Path, uint64(n))
		if err := l.progress(); err != nil {
			return err
		}
	}
	return nil
}

// validation is the row checks of Options.CheckTensors: on goroutines of
// their own, as many at once as there are cores, each recording the
// tensors it finds bad.
type validation struct {
	wg  sync.WaitGroup
	sem chan struct{} // a slot per check under way

	mu      sync.Mutex
	invalid []string // the tensors with bad rows
	err     error    // the first check that could not read its tensor
}

// start runs check on a goroutine of its own once a slot is free.
func (v *validation) start(check func()) {
	v.wg.Add(1)
	v.sem <- struct{}{}
	go func() {
		defer v.wg.Done()
		defer func() { <-v.sem }()
		check()
	}()
}

// fail records a check that could not read its tensor.
func (v *validation) fail(err error) {
	v.mu.Lock()
	defer v.mu.Unlock()
	if v.err == nil {
		v.err = err
	}
}

// bad records a tensor found with bad rows, reporting whether it is new.
func (v *validation) bad(name string) bool {
	v.mu.Lock()
	defer v.mu.Unlock()
	if slices.Contains(v.invalid, name) {
		return false
	}
	v.invalid = append(v.invalid, name)
	return true
}

// validateMapped checks the rows of a tensor left in the mapping (zero
// copy, lazy) on another goroutine, from copies made in Go: a file that
// shrinks under it gives an error naming the tensor, not a SIGBUS in the
// native row check.
func (l *load) validateMapped(tp *place.TensorPlan, src mapSource) {
	w := tp.Weight
	if w.Size == 0 {
		return
	}
	l.checks.start(func() {
		row, err := tp.Type.RowSize(tp.Shape[0])
		if err != nil || row <= 0 {
			row = 1
		}
		chunk := min(max(int64(4<<20)/row, 1)*row, w.Size)
		buf := make([]byte, chunk)
		for off := int64(0); off < w.Size; off += chunk {
			n := min(chunk, w.Size-off)
			if err := src.readAt(buf[:n], w.Offset+off); err != nil {
				l.checks.fail(l.tensorError("validate", tp, fmt.Errorf("loader: tensor '%s': %w", tp.Name, namingFile(err, src.file(), w))))
				return
			}
			l.validateSync(tp.Name, tp.Type, unsafe.Pointer(&buf[0]), uint64(n))
		}
	})
}

// validateAsync checks rows on another goroutine (data stays valid: it is
// the tensor's own host memory, never the mapping).
func (l *load) validateAsync(name string, typ ggml.Type, p unsafe.Pointer, n uint64) {
	l.checks.start(func() { l.validateSync(name, typ, p, n) })
}

func (l *load) validateSync(name string, typ ggml.Type, p unsafe.Pointer, n uint64) {
	ok, err := l.rt.ValidateRowDataPtr(typ, p, n)
	if ok && err == nil {
		return
	}
	if l.checks.bad(name) {
		l.o.Logger.Error(fmt.Sprintf("tensor '%s' has invalid data", name))
	}
}

// loadData is a tensor's data address during the load that made it: the
// load holds its Runtime (Close waits for it), and nothing else reaches
// the model's buffers before it returns, so the address stays valid for
// the load's own use, its validation goroutines included.
func loadData(t *ggml.Tensor) unsafe.Pointer {
	var p unsafe.Pointer
	_ = t.WithData(func(d unsafe.Pointer) error { p = d; return nil })
	return p
}
