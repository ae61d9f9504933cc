package loader

import (
	"bytes"
	"fmt"
	"runtime"
	"unsafe"

	"github.com/ggload/ggload/ggml"
	"github.com/ggload/ggload/gguf"
	"github.com/ggload/ggload/loader/internal/hashindex"
	"github.com/ggload/ggload/loader/internal/sysmem"
	"github.com/ggload/ggload/place"
)

// Tensors set whole through a bounce buffer (CPU_REPACK and the other
// buffer types that transform what they are given, devices without
// asynchronous uploads) cost a copy that native code reading the
// mapping itself did not. So the native set of such a tensor runs on
// another goroutine while the lane reads the next one into another
// buffer. The lane waits for its sets before any other native call of its
// own.
//
// How many sets may be under way: one, except for the CPU's own buffer
// types, whose set is a repack running on a core of this machine: one per
// core there, since a repack is slower than the copy that feeds it (and
// tensors are independent: each writes only its own bytes). Tensors for an
// RPC server are queued on its connection instead (rpcqueue.go). A tensor
// sliced over the RPC servers of a meta device goes to them through their
// guards, a request per server and all servers at once, where ggml's meta
// buffer would make a request per row, or one server after another
// (ggml.Tensor.SetSplit).

// bgMax bounds a lane's bounce memory: the tensors read while sets are
// under way and the buffers it keeps for the next take at most this many
// bytes together, or one tensor's if it is bigger (it waits for the sets
// under way, and the kept buffers are let go first).
const bgMax = 256 << 20

// bgSet is a whole tensor being set by native code.
type bgSet struct {
	tp   *place.TensorPlan
	mem  []byte // the bounce buffer
	buf  []byte // the tensor in it
	done chan error
	// conf is set (before done) when the tensor went through the guards
	// of a meta device's servers: what confirms it
	conf *splitSet
}

// maxSets is how many sets into buffer b may be under way at once.
func maxSets(b *LoadedBuffer) int {
	if b.Device.Type() == ggml.DeviceCPU {
		return cpuSets()
	}
	return 1
}

// cpuSets is how many sets into the CPU may be under way at once: one a
// core.
func cpuSets() int { return max(runtime.NumCPU(), 1) }

// keptBounces is how many bounce buffers a lane keeps for the tensors
// after: as many as sets may be under way, and one more.
func keptBounces() int { return cpuSets() + 1 }

// laneBounces is the most bounce buffers a lane holds at once: those of
// the sets under way, those it keeps, and the one it fills.
func laneBounces() int { return cpuSets() + keptBounces() + 1 }

// setWhole reads task t whole from src into a bounce buffer, counting it
// done as it is read, and starts its set once there is room for it.
func (ln *lane) setWhole(t task, src source) error {
	tp, w := t.pl.Plan, t.w
	var sp *ggml.Split
	if t.pl.Buffer.Device.IsMeta() {
		var done bool
		var err error
		if sp, done, err = ln.askSplit(t); err != nil || done {
			return err
		}
	}
	for len(ln.bg) > 0 && ln.setting+w.Size > bgMax {
		if err := ln.waitOldest(); err != nil {
			return err
		}
	}
	mem, buf, err := ln.bounceFor(src, w, tp.Name)
	if err != nil {
		return err
	}
	if err := ln.readBounce(t, src, mem, buf); err != nil {
		return err
	}
	for len(ln.bg) >= maxSets(t.pl.Buffer) {
		if err := ln.waitOldest(); err != nil {
			ln.putBounce(mem)
			return err
		}
	}
	s := &bgSet{tp: tp, mem: mem, buf: buf, done: make(chan error, 1)}
	go func() {
		var err error
		s.conf, err = ln.l.setTensor(t, sp, s.buf)
		s.done <- err
	}()
	ln.bg = append(ln.bg, s)
	ln.setting += int64(len(mem))
	return nil
}

// readBounce reads task t whole from src into buf, the part of bounce
// buffer mem that bounceFor gave for it, counting it done as it is read,
// and checks its rows on that copy under CheckTensors. After an error, mem
// is given back.
func (ln *lane) readBounce(t task, src source, mem, buf []byte) error {
	l, tp, w := ln.l, t.pl.Plan, t.w
	if err := ln.readReporting(t.pl.Path, src, buf, w.Offset); err != nil {
		ln.putBounce(mem)
		return namingFile(err, src.file(), w)
	}
	if l.o.CheckTensors {
		l.validateSync(tp.Name, tp.Type, unsafe.Pointer(&buf[0]), uint64(len(buf)))
	}
	return nil
}

// waitOldest waits for the oldest set under way and gives its buffer back.
func (ln *lane) waitOldest() error {
	s := ln.bg[0]
	err := <-s.done
	ln.bg = ln.bg[1:]
	ln.setting -= int64(len(s.mem))
	ln.putBounce(s.mem)
	if err != nil {
		// (the lane has gone on to another tensor: this one is named)
		return ln.l.tensorError("load", s.tp, fmt.Errorf("loader: tensor '%s': %w", s.tp.Name, err))
	}
	if s.conf != nil {
		ln.splits = append(ln.splits, *s.conf)
	}
	return nil
}

// waitSet waits for every set under way and gives their buffers back; the
// first error is returned.
func (ln *lane) waitSet() error { return drain(&ln.bg, ln.waitOldest) }

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

// bounceBuf returns a buffer of n bytes for tensor, one the lane kept
// when it is big enough. Bounce memory lies outside Go's heap (anonymous
// mappings): a refused mapping is an error, and the lane's finish unmaps
// what it kept.
func (ln *lane) bounceBuf(n int64, tensor string) ([]byte, error) {
	for k, b := range ln.free {
		if int64(cap(b)) >= n {
			ln.free = append(ln.free[:k], ln.free[k+1:]...)
			return b[:n], nil
		}
	}
	// too small: let them go before making a bigger one, as far as the
	// lane's bound asks
	for len(ln.free) > 0 && (int64(ln.bounce)+n > bgMax || len(ln.free) >= keptBounces()) {
		ln.dropBounce(ln.free[0])
		ln.free = ln.free[1:]
	}
	b, err := bounceMemory(n, "tensor '"+tensor+"'")
	if err != nil {
		return nil, err
	}
	ln.trackBounce(n)
	return b, nil
}

// bounceFor returns a bounce buffer (mem: to be given back) for reading
// weight w whole from src into buf, which starts in it where direct reads
// of w's whole blocks go straight into it (lineUp).
func (ln *lane) bounceFor(src source, w *gguf.Weight, tensor string) (mem, buf []byte, err error) {
	skew := lineUp(src, w.Offset)
	if mem, err = ln.bounceBuf(skew+w.Size, tensor); err != nil {
		return nil, nil, err
	}
	return mem, mem[skew:], nil
}

// putBounce gives a buffer back (keptBounces are kept).
func (ln *lane) putBounce(b []byte) {
	if b == nil {
		return
	}
	if len(ln.free) < keptBounces() && ln.bounce <= bgMax {
		ln.free = append(ln.free, b)
		return
	}
	ln.dropBounce(b)
}

// dropBounce unmaps a bounce buffer.
func (ln *lane) dropBounce(b []byte) {
	ln.trackBounce(-int64(cap(b)))
	sysmem.Unmap(b[:cap(b)])
}

// freeBounces unmaps the buffers the lane kept.
func (ln *lane) freeBounces() {
	for _, b := range ln.free {
		ln.dropBounce(b)
	}
	ln.free = nil
}

// setTensor sets task t whole from buf: through the guards of the RPC
// servers under a meta device (sp, ggml.Split: a request per server, not
// one per row; conf then confirms it), or else through ggml.
func (l *load) setTensor(t task, sp *ggml.Split, buf []byte) (conf *splitSet, err error) {
	if sp != nil {
		r, err := sp.Set(buf)
		if err != nil {
			return nil, err
		}
		if r.Direct {
			l.countRPC(r.Cached, r.Hashed)
			if len(r.Hashes) > 0 { // (the index is opened only then)
				fh, at := l.hashesFor(t.w.File), l.rpcKey(t).Off
				for _, h := range r.Hashes {
					if h.Off >= 0 {
						fh.Put(hashindex.Key{Off: at + h.Off, Size: h.Size}, h.Hash)
					}
				}
			}
			conf := l.splitWindows(t, sp)
			for _, w := range conf.ws {
				conf.want = append(conf.want, bytes.Clone(buf[w.At:w.At+w.N]))
			}
			return conf, nil
		}
	}
	return nil, t.pl.Tensor.Set(buf, 0)
}

// askSplit finds how t, a tensor of a meta device, goes through the guards
// of its RPC servers (sp; nil when through ggml), and asks the servers'
// file caches for the slices whose hashes the hash index knows, before t
// is read: done when they set all of it, and there is nothing to read.
func (ln *lane) askSplit(t task) (sp *ggml.Split, done bool, err error) {
	l := ln.l
	sp, err = t.pl.Tensor.SplitFor()
	if sp == nil || err != nil {
		return nil, false, err
	}
	at := l.rpcKey(t).Off
	known := func(j int) (uint64, bool) {
		sl := sp.Slices()[j]
		if !sl.Probes || sl.Off < 0 {
			return 0, false
		}
		// (the index is opened only for such slices)
		return l.hashesFor(t.w.File).Get(hashindex.Key{Off: at + sl.Off, Size: sl.Size})
	}
	asks := false
	for j := range sp.Slices() {
		_, ok := known(j)
		asks = asks || ok
	}
	if !asks {
		return sp, false, nil
	}
	// asking learns the slices through ggml's client: no set may be
	// under way
	if err := ln.waitSet(); err != nil {
		return nil, false, err
	}
	cached, err := sp.Ask(known)
	if err != nil || !sp.Done() {
		return sp, false, err // (what the caches set is counted with the rest)
	}
	l.countRPC(cached, 0)
	// the windows to confirm, from the file as it is now: nothing else
	// of the tensor is read
	conf := l.splitWindows(t, sp)
	f := l.model.files[t.w.File]
	for _, w := range conf.ws {
		want := make([]byte, w.N)
		if err := f.readWindow(want, t.w.Offset+w.At); err != nil {
			return nil, false, namingFile(err, f.path, t.w)
		}
		conf.want = append(conf.want, want)
	}
	ln.splits = append(ln.splits, *conf)
	ln.addDone(t.pl.Path, uint64(t.w.Size))
	return sp, true, l.progress()
}
