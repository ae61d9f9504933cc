package loader

import (
	"fmt"
	"unsafe"
)

// Tensors set whole through a bounce buffer (CPU_REPACK and the other
// buffer types that transform what they are given, RPC servers, devices
// without asynchronous uploads) cost a copy that native code reading the
// mapping itself did not. So the native set of such a tensor runs on
// another goroutine while the lane reads (or copies out of the mapping) the
// next one into a second buffer. One set per lane is under way at most, and
// the lane waits for it before any other native call of its own. Tensors
// for an RPC server are the exception: the link is far slower than the
// reading, so they go one after the other through one buffer (measured at
// 1 and 10 Gbit/s: no slower, and one tensor less held).

// bgMax bounds the tensors read while a set is under way (two bounce
// buffers of this size at most are held by a lane; a bigger tensor
// waits for the set and reuses its buffer).
const bgMax = 256 << 20

// bgSet is a whole tensor being set by native code.
type bgSet struct {
	name string
	buf  []byte
	done chan error
}

// setWhole reads task t whole from src into a bounce buffer, counting it
// done as it is read, and starts its set once the previous one is over.
func (ln *lane) setWhole(t task, src source) error {
	l := ln.l
	tp, w := t.pl.Plan, t.w
	if w.Size > bgMax {
		if err := ln.waitSet(); err != nil {
			return err
		}
	}
	buf := ln.bounceBuf(w.Size)
	if err := ln.readReporting(t.pl.Path, src, buf, w.Offset); err != nil {
		ln.putBounce(buf)
		return namingFile(err, src.file())
	}
	if l.o.CheckTensors {
		l.validateSync(tp.Name, tp.Type, unsafe.Pointer(&buf[0]), uint64(len(buf)))
	}
	l.sample(t, 0, buf)
	if err := ln.waitSet(); err != nil {
		ln.putBounce(buf)
		return err
	}
	s := &bgSet{name: tp.Name, buf: buf, done: make(chan error, 1)}
	tensor := t.pl.Tensor
	go func() { s.done <- tensor.Set(s.buf, 0) }()
	ln.bg = s
	return nil
}

// waitSet waits for the set under way, if any, and gives its buffer back.
func (ln *lane) waitSet() error {
	s := ln.bg
	if s == nil {
		return nil
	}
	err := <-s.done
	ln.bg = nil
	ln.putBounce(s.buf)
	if err != nil {
		return fmt.Errorf("loader: tensor '%s': %w", s.name, err)
	}
	return nil
}

// setsWholeFromBounce reports whether task t will be set whole from a
// bounce buffer (so that it may start while a set is under way): not zero
// copy, not into host memory, not through the staging ring (as far as the
// lane already knows; a device's first tensor waits), into a buffer that
// takes whole tensors.
func (ln *lane) setsWholeFromBounce(t task) bool {
	l := ln.l
	w, b := t.w, t.pl.Buffer
	if b == nil || t.pl.Tensor == nil || w.Size <= 0 || !setsWhole(b) || b.Buffer.IsHost() {
		return false
	}
	if b.Device.IsRPC() {
		// the link is slower than reading by far: a second tensor
		// read meanwhile gains nothing and holds one more tensor
		return false
	}
	if l.isZeroCopy(t) {
		return false
	}
	if !l.o.CheckTensors {
		if r, known := ln.rings[b.Device]; !known || r != nil {
			return false
		}
	}
	return true
}

// bounceBuf returns a buffer of n bytes, one of the lane's two when it is
// big enough.
func (ln *lane) bounceBuf(n int64) []byte {
	for k, b := range ln.free {
		if int64(cap(b)) >= n {
			ln.free = append(ln.free[:k], ln.free[k+1:]...)
			return b[:n]
		}
	}
	if len(ln.free) > 0 {
		// too small: let it go before making a bigger one
		ln.trackBounce(-int64(cap(ln.free[0])))
		ln.free = ln.free[1:]
	}
	ln.trackBounce(n)
	return make([]byte, n)
}

// putBounce gives a buffer back (two are kept).
func (ln *lane) putBounce(b []byte) {
	if b == nil {
		return
	}
	if len(ln.free) < 2 {
		ln.free = append(ln.free, b)
		return
	}
	ln.trackBounce(-int64(cap(b)))
}
