package loader

import (
	"bytes"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"sync"
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

// confirmRPC reads every sample back from its server, the servers at once
// (each answers its reads one after the other).
func (l *load) confirmRPC() error {
	if len(l.samples) == 0 {
		return nil
	}
	start := time.Now()
	defer func() { l.model.Stats.Confirm = time.Since(start) }()
	byDev := map[*ggml.Device][]int{}
	for i := range l.samples {
		d := l.model.placements[i].Buffer.Device
		byDev[d] = append(byDev[d], i)
	}
	errs := make([]error, 0, len(byDev))
	var mu sync.Mutex
	var wg sync.WaitGroup
	for d, idx := range byDev {
		slices.Sort(idx)
		wg.Add(1)
		go func() {
			defer wg.Done()
			n, err := l.confirmDevice(d, idx)
			mu.Lock()
			defer mu.Unlock()
			l.model.Stats.Confirmed += n
			if err != nil {
				errs = append(errs, err)
			}
		}()
	}
	wg.Wait()
	if len(errs) > 0 {
		slices.SortFunc(errs, func(a, b error) int { return strings.Compare(a.Error(), b.Error()) })
		return errs[0]
	}
	return nil
}

// confirmDevice reads back the samples of the tensors idx, all on d.
func (l *load) confirmDevice(d *ggml.Device, idx []int) (int, error) {
	got := make([]byte, sampleSize)
	n := 0
	for _, i := range idx {
		if err := l.canceled(); err != nil {
			return n, err
		}
		s, pl := l.samples[i], &l.model.placements[i]
		if s.got < len(s.want) {
			return n, fmt.Errorf("loader: tensor '%s': only %d of the %d sampled bytes were sent", pl.Plan.Name, s.got, len(s.want))
		}
		g := got[:len(s.want)]
		clear(g)
		if err := pl.Tensor.Get(g, uint64(s.off)); err != nil {
			return n, fmt.Errorf("loader: confirming tensor '%s': %w", pl.Plan.Name, err)
		}
		if err := deviceErr(pl.Buffer, pl.Plan.Name); err != nil {
			return n, err
		}
		if !bytes.Equal(g, s.want) {
			return n, fmt.Errorf("loader: tensor '%s' on %s: %w: %s holds other bytes at [%d, +%d) than were sent", pl.Plan.Name, d.Name(), ggml.ErrRPCFailed, d.Endpoint(), s.off, len(s.want))
		}
		n++
	}
	return n, nil
}
