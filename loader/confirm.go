package loader

import (
	"bytes"
	"fmt"
	"math/rand/v2"
	"slices"
	"time"

	"github.com/ggload/ggload/ggml"
)

// RPC servers are confirmed after the uploads: the pinned protocol (7.0)
// has no command that reports what a buffer holds (SET_TENSOR_HASH only
// asks a server's file cache whether it knows some bytes, and a yes means
// they were not sent), and SET_TENSOR has no reply. A server that dropped
// a write, closed the connection after it, or claimed a cache hit it did
// not have would leave the load looking done. So a window of every tensor
// sent to a server is read back (one GET_TENSOR each) and compared with
// the bytes that were sent; the window's place is drawn per load.

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

// confirmRPC reads every sample back from its server.
func (l *load) confirmRPC() error {
	if len(l.samples) == 0 {
		return nil
	}
	start := time.Now()
	defer func() { l.model.Stats.Confirm = time.Since(start) }()
	idx := make([]int, 0, len(l.samples))
	for i := range l.samples {
		idx = append(idx, i)
	}
	slices.Sort(idx)
	got := make([]byte, sampleSize)
	for _, i := range idx {
		if err := l.canceled(); err != nil {
			return err
		}
		s, pl := l.samples[i], &l.model.placements[i]
		if s.got < len(s.want) {
			return fmt.Errorf("loader: tensor '%s': only %d of the %d sampled bytes were sent", pl.Plan.Name, s.got, len(s.want))
		}
		g := got[:len(s.want)]
		clear(g)
		if err := pl.Tensor.Get(g, uint64(s.off)); err != nil {
			return fmt.Errorf("loader: confirming tensor '%s': %w", pl.Plan.Name, err)
		}
		if err := deviceErr(pl.Buffer, pl.Plan.Name); err != nil {
			return err
		}
		if !bytes.Equal(g, s.want) {
			dev := pl.Buffer.Device
			return fmt.Errorf("loader: tensor '%s' on %s: %w: %s holds other bytes at [%d, +%d) than were sent", pl.Plan.Name, dev.Name(), ggml.ErrRPCFailed, dev.Endpoint(), s.off, len(s.want))
		}
		l.model.Stats.Confirmed++
	}
	return nil
}
