package loader

import (
	"bytes"
	"fmt"
	"math/rand/v2"
	"runtime"
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
// window's place is drawn per load.

// sampleSize is the length of the window read back per tensor.
const sampleSize = 64

// rpcSample is the window of a tensor kept while it was sent.
type rpcSample struct {
	off  int64
	want []byte
	got  int // bytes of want filled
}

// sample keeps the part of the window of tensor t that lies in data, the
// bytes about to be sent at offset off of the tensor.
func (l *load) sample(t task, off int64, data []byte) {
	b := t.pl.Buffer
	if b == nil || b.Device == nil || !b.Device.IsRPC() || t.w.Size == 0 {
		return
	}
	l.sampleMu.Lock()
	defer l.sampleMu.Unlock()
	if l.samples == nil {
		l.samples = map[int]*rpcSample{}
		l.seed = rand.Uint64()
	}
	s := l.samples[t.i]
	if s == nil {
		n := min(sampleSize, t.w.Size)
		// a place that differs per tensor and per load
		at := int64(0)
		if span := uint64(t.w.Size - n); span > 0 {
			at = int64((l.seed ^ uint64(t.i)*0x9e3779b97f4a7c15) % (span + 1))
		}
		s = &rpcSample{off: at, want: make([]byte, n)}
		l.samples[t.i] = s
	}
	lo, hi := max(off, s.off), min(off+int64(len(data)), s.off+int64(len(s.want)))
	if hi > lo {
		s.got += copy(s.want[lo-s.off:hi-s.off], data[lo-off:hi-off])
	}
}

// confirm reads back the samples of the tensors the lane sent to RPC
// servers, once they are all queued: every read is queued on the server's
// connection behind the sets (so each sees its tensor's bytes), and the
// lane waits once, not once per tensor; a lane confirms while the others
// still load.
func (ln *lane) confirm() error {
	l := ln.l
	if len(ln.rpcs) == 0 {
		return nil
	}
	if err := l.progress(); err != nil {
		return err // stopped or canceled
	}
	start := time.Now()
	type read struct {
		i int
		s *rpcSample
		q *rpcQueue
	}
	var reads []read
	l.sampleMu.Lock()
	for _, t := range ln.tasks {
		if s := l.samples[t.i]; s != nil {
			reads = append(reads, read{t.i, s, ln.rpcs[t.pl.Buffer.Device]})
		}
	}
	l.sampleMu.Unlock()
	if len(reads) == 0 {
		return nil
	}
	got := make([]byte, len(reads)*sampleSize)
	var pin runtime.Pinner
	pin.Pin(&got[0])
	defer pin.Unpin()
	queued := map[*rpcQueue]bool{}
	var first error
	for k, r := range reads {
		pl := &l.model.placements[r.i]
		if r.s.got < len(r.s.want) {
			first = fmt.Errorf("loader: tensor '%s': only %d of the %d sampled bytes were sent", pl.Plan.Name, r.s.got, len(r.s.want))
			break
		}
		if r.q == nil {
			first = fmt.Errorf("loader: tensor '%s' on %s was not sent through the lane's queue", pl.Plan.Name, pl.Buffer.Device.Name())
			break
		}
		dst := got[k*sampleSize : k*sampleSize+len(r.s.want)]
		if err := r.q.backend.GetTensorAsync(pl.Tensor, unsafe.Pointer(&dst[0]), uint64(r.s.off), uint64(len(dst))); err != nil {
			first = fmt.Errorf("loader: confirming tensor '%s': %w", pl.Plan.Name, err)
			break
		}
		queued[r.q] = true
	}
	// wait for what was queued even after a failure: the reads write
	// into got
	for q := range queued {
		if err := q.backend.Synchronize(); err != nil && first == nil {
			first = fmt.Errorf("loader: confirming tensors: %w", err)
		}
	}
	if first != nil {
		return first
	}
	n := 0
	for k, r := range reads {
		pl := &l.model.placements[r.i]
		if err := deviceErr(pl.Buffer, pl.Plan.Name); err != nil {
			return err
		}
		if !bytes.Equal(got[k*sampleSize:k*sampleSize+len(r.s.want)], r.s.want) {
			d := pl.Buffer.Device
			return fmt.Errorf("loader: tensor '%s' on %s: %w: %s holds other bytes at [%d, +%d) than were sent", pl.Plan.Name, d.Name(), ggml.ErrRPCFailed, d.Endpoint(), r.s.off, len(r.s.want))
		}
		n++
	}
	took := time.Since(start)
	l.model.statsMu.Lock()
	l.model.Stats.Confirmed += n
	l.model.Stats.Confirm = max(l.model.Stats.Confirm, took)
	l.model.statsMu.Unlock()
	return nil
}
