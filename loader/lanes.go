package loader

import (
	"cmp"
	"errors"
	"fmt"
	"runtime"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/ggload/ggload/ggml"
	"github.com/ggload/ggload/gguf"
)

// Every device loads at once. The tensors that are not zero copy are dealt
// to lanes, one per device: a lane is a goroutine with the device's own
// upload pipeline (its pinned staging ring and backend stream, or its bounce
// buffers and the one set under way; an RPC server's own connection), so
// that two RPC hosts fill their two links, and a GPU's uploads run while
// another device's do. Tensors bound for host memory (CPU buffers, a GPU's
// pinned host buffers) share one host lane, whose reads run on the reader
// pool. Each lane reads the files itself (positional reads, or copies out
// of the mapping) into the memory its pipeline owns, so the memory a load
// holds is bounded by its lanes: per device, its ring or its bounce
// buffers.
//
// Within a lane the order is llama.cpp's: without mmap, contexts in device
// buffers before contexts in host buffers, and tensors staged through a
// buffer of their own biggest first; tensors go whole to buffer types that
// transform them and to RPC servers, whose file cache knows tensors by the
// hash of the whole. Zero-copy tensors cost no I/O and are placed before
// the lanes start.
//
// The first lane to fail stops the others (they check between pieces of a
// tensor) and its error is the load's. Progress reports and file checks
// are taken by one lane at a time.

// task is one tensor to load.
type task struct {
	i  int // placement index
	pl *Placement
	w  *gguf.Weight
}

// drain waits for all the work of a lane's queue q (its sets under way,
// its tensors on their way to a server): wait ends the oldest and takes it
// off q, and is called until q is empty, whatever it returns. The first
// error is returned.
func drain[T any](q *[]T, wait func() error) error {
	var first error
	for len(*q) > 0 {
		if err := wait(); err != nil && first == nil {
			first = err
		}
	}
	return first
}

// lane is one device's upload pipeline and the tensors it moves.
type lane struct {
	l     *load
	name  string
	tasks []task
	host  bool // host memory: reads run on the reader pool

	rings map[*ggml.Device]*stagingRing
	free  [][]byte // bounce buffers: tensors set through memory the lane owns
	// ahead reads the tensors of files that are not local ahead of the
	// lane (ahead.go), nil when it has none
	ahead   *ahead
	bg      []*bgSet // whole tensors being set by native code meanwhile, oldest first
	setting int64    // and their bytes
	rpcs    map[*ggml.Device]*rpcQueue
	samples []rpcSample  // windows of the tensors queued to RPC servers
	splits  []splitSet   // tensors the guards of a meta device's servers set (confirmSplits)
	flights []*rpcFlight // tensors the guards are sending, oldest first (rpcdirect.go)
	asks    rpcAsks      // its questions to its servers' caches (rpcdirect.go)

	bytes   atomic.Uint64 // bytes the lane moved (the reader pool's included)
	took    time.Duration // from its start to its last byte
	bounce  uint64        // bounce bytes held now
	peak    uint64        // and at most
	readers bool          // the lane queued reads on the reader pool
}

// errStopped ends a lane that another lane's failure stopped; it is never
// the load's error.
var errStopped = errors.New("stopped: another device failed")

// loadData moves every tensor's bytes: zero-copy tensors here, then every
// lane at once (or, with Options.Sequential, one after another, each
// alone, in the order of their first tensors).
func (l *load) loadData() error {
	p, mdl := l.p, l.model
	ctxOrder := make([]int, len(p.Contexts))
	for i := range ctxOrder {
		ctxOrder[i] = i
	}
	if !p.UseMmap {
		// llama.cpp's order: device buffers first, where staging is
		// cheapest while the fewest weights are resident
		slices.SortStableFunc(ctxOrder, func(a, b int) int {
			return cmp.Compare(b2i(l.ctxIsHost(a)), b2i(l.ctxIsHost(b)))
		})
	}
	if l.o.CheckTensors {
		l.checks.sem = make(chan struct{}, runtime.NumCPU())
	}
	readers := newReaderPool(l, l.readerCount())
	defer readers.stop()
	l.readers = readers
	mdl.Stats.Readers = readers.n
	var rest []task
	for _, ci := range ctxOrder {
		var tasks []task
		for i := range mdl.placements {
			pl := &mdl.placements[i]
			if pl.Tensor != nil && pl.Plan.Context == ci && pl.Path != PathShared {
				tasks = append(tasks, task{i, pl, pl.Plan.Weight})
			}
		}
		if !p.UseMmap && !l.ctxIsHost(ci) {
			// staged through a temporary buffer: biggest first
			slices.SortStableFunc(tasks, func(a, b task) int { return -cmp.Compare(a.w.Size, b.w.Size) })
		}
		for _, t := range tasks {
			if !l.isZeroCopy(t) {
				rest = append(rest, t)
				continue
			}
			if err := l.beforeEach(t); err != nil {
				return l.tensorError("load", t.pl.Plan, err)
			}
			if err := l.zeroCopy(t); err != nil {
				return l.tensorError("load", t.pl.Plan, err)
			}
		}
	}
	lanes := l.deal(rest)
	err := l.runLanes(lanes)
	for _, ln := range lanes {
		mdl.Stats.Devices = append(mdl.Stats.Devices, DeviceStats{Device: ln.name, Tensors: len(ln.tasks), Bytes: ln.bytes.Load(), Time: ln.took, Bounce: ln.peak, Staging: ln.staging()})
	}
	if err != nil {
		return err
	}
	err = readers.wait(l)
	for _, f := range mdl.files {
		mdl.Stats.Direct += f.bounceBytes()
		mdl.Stats.DirectCopied += uint64(f.copied.Load())
	}
	return err
}

// deal gives every task to the lane of its device, in order.
func (l *load) deal(tasks []task) []*lane {
	var lanes []*lane
	byKey := map[*ggml.Device]*lane{}
	var host *lane
	for _, t := range tasks {
		var ln *lane
		b := t.pl.Buffer
		switch {
		case b == nil || b.Buffer.IsHost():
			if host == nil {
				host = &lane{l: l, name: "host", host: true}
				lanes = append(lanes, host)
			}
			ln = host
		default:
			if ln = byKey[b.Device]; ln == nil {
				ln = &lane{l: l, name: b.Device.Name()}
				byKey[b.Device] = ln
				lanes = append(lanes, ln)
			}
		}
		ln.tasks = append(ln.tasks, t)
	}
	return lanes
}

// runLanes runs the lanes at once (one after another when the load is
// sequential) and waits for all of them: the first error stops the others
// and is returned. A model with a sequential source is loaded in file
// order instead (sequential.go).
func (l *load) runLanes(lanes []*lane) error {
	if l.sequential() {
		return l.runInFileOrder(lanes)
	}
	var (
		mu    sync.Mutex
		first error
		wg    sync.WaitGroup
	)
	for _, ln := range lanes {
		if l.o.Sequential {
			// one after another, in the order of their first tensors
			if err := ln.run(); err != nil {
				return err
			}
			continue
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			err := ln.run()
			if err == nil || errors.Is(err, errStopped) {
				return
			}
			mu.Lock()
			if first == nil {
				first = err
			}
			mu.Unlock()
			l.stopped.Store(true)
		}()
	}
	wg.Wait()
	return first
}

// run moves the lane's tensors, then waits for its last uploads and frees
// its pipeline, on every path.
func (ln *lane) run() (err error) {
	start := time.Now()
	defer func() {
		if ferr := ln.finish(); err == nil {
			err = ferr
		}
		ln.took = time.Since(start)
	}()
	if err := ln.begin(); err != nil {
		return err
	}
	for _, t := range ln.tasks {
		if err := ln.move(t); err != nil {
			return err
		}
	}
	return ln.end()
}

// begin makes the lane's pipeline before its first tensor: its reads
// ahead, its questions to RPC servers' caches.
func (ln *lane) begin() (err error) {
	if ln.ahead, err = ln.planAhead(); err != nil {
		return ln.laneError(err)
	}
	ln.planAsks()
	return nil
}

// move moves one tensor, its error naming it.
func (ln *lane) move(t task) error {
	if err := ln.step(t); err != nil {
		return ln.l.tensorError("load", t.pl.Plan, ln.canceledAt(err, t))
	}
	return nil
}

// end waits for what the lane still has under way once its tensors are
// moved, and confirms what it sent to RPC servers.
func (ln *lane) end() error {
	l := ln.l
	if err := ln.releaseAsks(true); err != nil {
		return err
	}
	if err := ln.settleAsks(true); err != nil {
		return err
	}
	if ln.readers {
		if err := l.readers.wait(l); err != nil {
			return ln.laneError(err)
		}
	}
	if err := ln.landAll(); err != nil {
		return err
	}
	if len(ln.splits) > 0 {
		if err := ln.waitSet(); err != nil {
			return err
		}
		if err := ln.confirmSplits(); err != nil {
			return err
		}
	}
	return ln.laneError(ln.confirm())
}

// laneError is an error of the lane that concerns none of its tensors:
// an *Error of its device (none for host memory, whose tensors live on
// several).
func (ln *lane) laneError(err error) error {
	if _, ok := err.(*Error); ok || err == nil || errors.Is(err, errStopped) {
		return err
	}
	dev := ln.name
	if ln.host {
		dev = ""
	}
	return deviceError("load", dev, "", err)
}

// step moves one tensor.
func (ln *lane) step(t task) error {
	l := ln.l
	if err := l.progress(); err != nil {
		return err
	}
	if err := l.readers.err(); err != nil {
		return err
	}
	if err := l.beforeEach(t); err != nil {
		return err
	}
	if !ln.setsWholeFromBounce(t) {
		// the next native call must not meet a set under way
		if err := ln.waitSet(); err != nil {
			return err
		}
	}
	return ln.loadOne(t)
}

// canceledAt names, in a cancellation's error, the device and the tensor
// the lane was at.
func (ln *lane) canceledAt(err error, t task) error {
	if !errors.Is(err, ErrCanceled) {
		return err
	}
	where := "onto " + ln.name
	if ln.host {
		where = "into host memory"
	}
	return &canceledError{err: err, at: fmt.Sprintf("at tensor %s %s, %s moved", t.pl.Plan.Name, where, ln.l.prog.moved())}
}

// canceledError is a cancellation with where the load was.
type canceledError struct {
	err error
	at  string
}

func (e *canceledError) Error() string { return e.err.Error() + " (" + e.at + ")" }
func (e *canceledError) Unwrap() error { return e.err }

func mibString(n uint64) string { return fmt.Sprintf("%.2f MiB", float64(n)/(1<<20)) }

// finish waits for the set under way and the ring's last uploads and frees
// them.
func (ln *lane) finish() error {
	first := ln.waitSet()
	if err := ln.landAll(); err != nil && first == nil {
		first = err
	}
	ln.freeBounces()
	ln.ahead.close()
	for dev, r := range ln.rings {
		if err := r.close(); err != nil && first == nil {
			first = deviceError("load", dev.Name(), "", err)
		}
	}
	for dev, q := range ln.rpcs {
		if err := q.close(); err != nil && first == nil {
			first = deviceError("load", dev.Name(), "", err)
		}
	}
	return first
}

// staging is the pinned staging memory the lane held.
func (ln *lane) staging() uint64 {
	var n uint64
	for _, r := range ln.rings {
		if r != nil {
			n += uint64(r.slotCount) * r.size
		}
	}
	return n
}

// beforeEach runs between two tensors of any lane: the file check, and the
// tests' hook.
func (l *load) beforeEach(t task) error {
	if err := l.watchFiles(t.pl.Plan.Name, false); err != nil {
		return err
	}
	seq := l.prog.start(&t.pl.Plan.Name)
	if beforeTensor != nil {
		beforeTensor(seq, t.pl.Plan.Name)
	}
	return nil
}

// trackBounce counts bounce memory taken (n > 0) or given back.
func (ln *lane) trackBounce(n int64) {
	ln.bounce = uint64(int64(ln.bounce) + n)
	ln.peak = max(ln.peak, ln.bounce)
}

func (ln *lane) String() string { return fmt.Sprintf("lane %s (%d tensors)", ln.name, len(ln.tasks)) }
