package loader

import (
	"bytes"
	"fmt"
	"runtime"
	"sync"
	"time"
	"unsafe"

	"github.com/ggload/ggload/ggml"
)

// RPC servers are confirmed after the uploads, each lane its own: the
// pinned protocol (7.0) has no command that reports what a buffer holds
// (SET_TENSOR_HASH only asks a server's file cache whether it knows some
// bytes, and a yes means they were not sent), and SET_TENSOR has no reply.
// A server that dropped a write, closed the connection after it, or
// claimed a cache hit it did not have would leave the load looking done.
// So a window of every tensor sent to a server is read back (one
// GET_TENSOR each) and compared with the bytes that were sent; the
// window's place is drawn per load. Through the guard the reads go out
// together, behind the lane's sets and ahead of their replies: one round
// trip for the lane, where ggml's client waits one per read.

// sampleSize is the length of the window read back per tensor.
const sampleSize = 64

// rpcSample is the window of a tensor a lane sent to an RPC server.
type rpcSample struct {
	i    int // placement index
	q    *rpcQueue
	off  int64
	want []byte
}

// sample keeps the window of tensor t, whose whole bytes data are about to
// be queued on q.
func (ln *lane) sample(t task, q *rpcQueue, data []byte) {
	at, n := ln.window(t, int64(len(data)))
	ln.samples = append(ln.samples, rpcSample{i: t.i, q: q, off: at, want: bytes.Clone(data[at : at+n])})
}

// sampleFrom keeps the window of tensor t, which a server set from its
// cache, read from src (the file as it is now).
func (ln *lane) sampleFrom(t task, q *rpcQueue, src source) error {
	at, n := ln.window(t, t.w.Size)
	want := make([]byte, n)
	if err := src.readAt(want, t.w.Offset+at); err != nil {
		return err
	}
	ln.samples = append(ln.samples, rpcSample{i: t.i, q: q, off: at, want: want})
	return nil
}

// window is where tensor t's window lies in its size bytes: a place that
// differs per tensor and per load.
func (ln *lane) window(t task, size int64) (at, n int64) {
	n = min(sampleSize, size)
	if span := uint64(size - n); span > 0 {
		at = int64((ln.l.seed ^ uint64(t.i)*0x9e3779b97f4a7c15) % (span + 1))
	}
	return at, n
}

// confirm reads back the samples of the tensors the lane sent to RPC
// servers, once they are all queued: every read is queued on the server's
// connection behind the sets (so each sees its tensor's bytes), and the
// lane waits once, not once per tensor; a lane confirms while the others
// still load.
func (ln *lane) confirm() error {
	l := ln.l
	if len(ln.samples) == 0 {
		return nil
	}
	if err := l.progress(); err != nil {
		return err // stopped or canceled
	}
	start := time.Now()
	got := make([]byte, len(ln.samples)*sampleSize)
	var pin runtime.Pinner
	pin.Pin(&got[0])
	defer pin.Unpin()
	at := func(k int) []byte { return got[k*sampleSize : k*sampleSize+len(ln.samples[k].want)] }
	var (
		first  error
		native = map[*rpcQueue]bool{}
		guard  sync.WaitGroup // the reads the guard makes itself
		errs   = make([]error, len(ln.samples))
	)
	for k, s := range ln.samples {
		pl := &l.model.placements[s.i]
		dst := at(k)
		var err error
		if d := pl.Buffer.Device; d.SendsRPC() {
			// all written at once, behind the sets, ahead of their
			// replies: one round trip, not one per tensor
			guard.Add(1)
			err = d.SendRPC(ggml.RPCSet{Tensor: pl.Tensor, Offset: uint64(s.off), Size: uint64(len(dst)), Data: dst, Get: true,
				Done: func(_ bool, err error) { errs[k] = err; guard.Done() }})
			if err != nil {
				guard.Done()
			}
		} else {
			native[s.q] = true
			err = s.q.backend.GetTensorAsync(pl.Tensor, unsafe.Pointer(&dst[0]), uint64(s.off), uint64(len(dst)))
		}
		if err != nil {
			first = l.tensorError("confirm", pl.Plan, fmt.Errorf("loader: confirming tensor '%s': %w", pl.Plan.Name, err))
			break
		}
	}
	// wait for what was queued even after a failure: the reads write
	// into got
	guard.Wait()
	for dev, q := range ln.rpcs {
		if !native[q] {
			continue
		}
		if err := q.backend.Synchronize(); err != nil && first == nil {
			first = deviceError("confirm", dev.Name(), "", fmt.Errorf("loader: confirming tensors: %w", err))
		}
	}
	for k, err := range errs {
		if err != nil && first == nil {
			pl := &l.model.placements[ln.samples[k].i]
			first = l.tensorError("confirm", pl.Plan, fmt.Errorf("loader: confirming tensor '%s': %w", pl.Plan.Name, err))
		}
	}
	if first != nil {
		return first
	}
	for k, s := range ln.samples {
		pl := &l.model.placements[s.i]
		if err := deviceErr(pl.Buffer, pl.Plan.Name); err != nil {
			return l.tensorError("confirm", pl.Plan, err)
		}
		if !bytes.Equal(at(k), s.want) {
			d := pl.Buffer.Device
			return l.tensorError("confirm", pl.Plan, fmt.Errorf("loader: tensor '%s' on %s: %w: %s holds other bytes at [%d, +%d) than were sent", pl.Plan.Name, d.Name(), ggml.ErrRPCFailed, d.Endpoint(), s.off, len(s.want)))
		}
	}
	l.countConfirmed(len(ln.samples), time.Since(start))
	return nil
}

// splitSet is a tensor of a meta device that the guards of its RPC
// servers set (or asked of their caches), and the window of each slice
// that confirms it: where it lies (ws) and the bytes it must hold (want).
type splitSet struct {
	t    task
	sp   *ggml.Split
	ws   []ggml.SplitWindow
	want [][]byte
}

// splitWindows draws the windows that will confirm t, a tensor of a meta
// device the guards set: places that differ per tensor and per load.
func (l *load) splitWindows(t task, sp *ggml.Split) *splitSet {
	return &splitSet{t: t, sp: sp, ws: sp.Windows(l.seed^uint64(t.i)*0x9e3779b97f4a7c15, sampleSize)}
}

// confirmSplits reads back the windows of every slice the lane's meta
// device tensors put on their servers, through the guards (each behind its
// slice's set, all queued before any is waited for), and compares them
// with what was sent, or with the file where the servers' caches set the
// tensor: a server that dropped a set, or whose cache answered for bytes
// it did not set, fails the load, as for a server's own tensors (confirm).
func (ln *lane) confirmSplits() error {
	l := ln.l
	if err := l.progress(); err != nil {
		return err // stopped or canceled
	}
	start := time.Now()
	fail := func(s splitSet, err error) error {
		return l.tensorError("confirm", s.t.pl.Plan, fmt.Errorf("loader: confirming tensor '%s': %w", s.t.pl.Plan.Name, err))
	}
	var first error
	waits := make([]func() error, len(ln.splits))
	for k, s := range ln.splits {
		w, err := s.sp.ReadBack(s.ws)
		if err != nil {
			first = fail(s, err)
			break
		}
		waits[k] = w
	}
	// every read queued is waited for, even after a failure: they write
	// into their windows
	for k, wait := range waits {
		if wait == nil {
			continue
		}
		s := ln.splits[k]
		if err := wait(); err != nil && first == nil {
			first = fail(s, err)
		}
		if first != nil {
			continue
		}
		for i, w := range s.ws {
			if !bytes.Equal(w.Got, s.want[i]) {
				first = l.tensorError("confirm", s.t.pl.Plan, fmt.Errorf("loader: tensor '%s' on %s: %w: %s holds other bytes for [%d, +%d) of the tensor than were sent", s.t.pl.Plan.Name, w.Device.Name(), ggml.ErrRPCFailed, w.Device.Endpoint(), w.At, w.N))
				break
			}
		}
	}
	if first != nil {
		return first
	}
	l.countConfirmed(len(ln.splits), time.Since(start))
	return nil
}

// countConfirmed adds n tensors a lane confirmed in took to the load's
// figures (Stats.Confirm is the longest lane's).
func (l *load) countConfirmed(n int, took time.Duration) {
	l.model.statsMu.Lock()
	l.model.Stats.Confirmed += n
	l.model.Stats.Confirm = max(l.model.Stats.Confirm, took)
	l.model.statsMu.Unlock()
}
