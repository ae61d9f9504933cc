// Port of llama.cpp src/llama-model-loader.cpp (v0.5.0): load_all_data.

package loader

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"os"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/ggload/ggload/ggml"
	"github.com/ggload/ggload/gguf"
	"github.com/ggload/ggload/loader/internal/mmap"
	"github.com/ggload/ggload/loader/internal/sysmem"
	"github.com/ggload/ggload/place"
)

// Options tune a load.
type Options struct {
	// CheckTensors validates every tensor's rows (NaN/Inf data and scales)
	// while loading; every bad tensor is named, then the load fails.
	CheckTensors bool
	// Progress is called with the bytes done and the total, never
	// decreasing, from one loading goroutine at a time (the devices load
	// at once); returning false cancels, and a panic fails the load with
	// an error wrapping ErrPanicked.
	Progress func(done, total uint64) bool
	// Readers is how many goroutines read into host buffers at once
	// (0: one per core, at most 4; at least 8 with direct I/O, and 8 for
	// files that are not local, whose reads wait on the disk or the
	// network, not a core; 1: sequential). A model with a sequential
	// source is read by one (sequential.go).
	Readers int
	// ChunkSize is the size of one parallel read, and the most bytes a
	// tensor moves between two progress reports (0: 8 MiB).
	ChunkSize int64
	// StagingSlots and StagingSize shape the pinned staging ring of each
	// device that uploads asynchronously (0: 4 slots of 1 MiB, or of
	// 64 MiB + 2·alignment under direct I/O, as llama.cpp).
	StagingSlots int
	StagingSize  uint64
	// Sequential loads one device after another, in llama.cpp's order,
	// instead of every device at once.
	Sequential bool
	// Logger receives warnings and debug lines (default slog.Default()).
	Logger *slog.Logger
	// HashIndex is the directory of the RPC hash index
	// (loader/internal/hashindex): the hashes of the weights that RPC
	// servers' file caches are asked for, kept per file so that a later
	// load asks before it reads. "" is ggload/rpc-hashes in the user
	// cache directory; "off" keeps none.
	HashIndex string
}

// ErrCanceled is wrapped by Load's error when the context or the progress
// callback cancelled the load.
var ErrCanceled = errors.New("load canceled")

// ErrInvalidData is wrapped by Load's error when --check-tensors found bad
// rows.
var ErrInvalidData = errors.New("found tensors with invalid data")

const directIOBufferSize = 64 << 20

// beforeTensor, when set (by tests only, see export_test.go), is called in
// the loading goroutine before each tensor's bytes are moved, with the
// tensor's place in the load's order.
var beforeTensor func(seq int, name string)

// Load carries out plan p: the model it was made for goes to the devices of
// the plan's runtime. The model must still be open: a closed one is
// refused before anything is done, with an error wrapping gguf.ErrClosed.
// The runtime cannot be closed under a load (its Close waits, and a load
// it ends returns ErrClosed); a cancelled ctx ends the load with an error
// wrapping ErrCanceled and ctx's error. Nothing is left allocated after an
// error, which is an *Error with the place of the failure.
func Load(ctx context.Context, p *place.Plan, o Options) (*Model, error) {
	if p == nil || p.Model == nil || p.Runtime() == nil {
		return nil, &Error{Op: "load", Off: -1, Err: errors.New("loader: no plan (make one with place.New)")}
	}
	if p.Model.Closed() {
		// its owner let it go: a reader it held is closed, and a path
		// opened again can no longer be held to the file parsed
		path := p.Model.Files[0].Source().Name
		return nil, fileError("open", path, -1, fmt.Errorf("loader: %s: %w before the load; open the model again", path, gguf.ErrClosed))
	}
	rt := p.Runtime()
	done, err := rt.Use()
	if err != nil {
		e := &Error{Op: "load", Off: -1, Err: fmt.Errorf("loader: %w", err)}
		if len(p.Model.Files) > 0 {
			e.Path = p.Model.Files[0].Source().Name
		}
		return nil, e
	}
	defer done()
	l := &load{ctx: ctx, rt: rt, gm: p.Model, p: p, o: o, model: &Model{Plan: p, byName: map[string]int{}}, seed: rand.Uint64()}
	if l.o.Logger == nil {
		l.o.Logger = slog.Default()
	}
	start := time.Now()
	err = l.run()
	l.model.Stats.Total = time.Since(start)
	if err == nil && rt.Closed() {
		// Close began during the load (it waits for the load, then frees
		// every buffer): the weights are not the caller's to use
		err = fmt.Errorf("loader: %w: the runtime was closed during the load", ggml.ErrClosed)
	}
	if err != nil {
		l.abort()
		return nil, l.loadError(err)
	}
	return l.model, nil
}

// load is one Load under way: what it carries out, and its parts.
type load struct {
	ctx   context.Context
	rt    *ggml.Runtime
	gm    *gguf.Model
	p     *place.Plan
	o     Options
	model *Model

	stopped atomic.Bool // a lane failed: the others stop
	readers *readerPool
	seed    uint64 // where the windows of RPC tensors read back are taken

	prog   progress   // how far it has come, and the reports of it
	bufs   buffers    // the weight buffers it made
	faults prefaults  // memory faulted in beside it
	checks validation // the row checks of Options.CheckTensors (data.go)
	watch  fileWatch  // the checks of the files between tensors (filecheck.go)
	hashes rpcHashes  // the RPC hash index of each file (rpcdirect.go)
}

// progress is how far a load has come: the bytes moved, the tensors
// started, and the reports to Options.Progress, one at a time and never
// going back.
type progress struct {
	total uint64
	done  atomic.Uint64
	seq   atomic.Int64           // tensors started
	last  atomic.Pointer[string] // the last tensor started

	mu       sync.Mutex
	reported uint64
}

// report hands the bytes done to f; false from f cancels, and a panic in
// f is an error (logged to log).
func (pr *progress) report(log *slog.Logger, f func(done, total uint64) bool) error {
	pr.mu.Lock()
	defer pr.mu.Unlock()
	d := max(pr.done.Load(), pr.reported)
	pr.reported = d
	if f == nil {
		return nil
	}
	ok, err := callProgress(log, f, d, pr.total)
	switch {
	case err != nil:
		return fmt.Errorf("loader: at %d of %d bytes: %w", d, pr.total, err)
	case !ok:
		return fmt.Errorf("%w by the progress callback at %d of %d bytes", ErrCanceled, d, pr.total)
	}
	return nil
}

// start counts tensor name started and returns its place in the load's
// order.
func (pr *progress) start(name *string) int {
	seq := int(pr.seq.Add(1) - 1)
	pr.last.Store(name)
	return seq
}

// lastTensor is the name of the last tensor started.
func (pr *progress) lastTensor() string {
	if p := pr.last.Load(); p != nil {
		return *p
	}
	return ""
}

// moved is how far the load has come, in MiB.
func (pr *progress) moved() string {
	return mibString(pr.done.Load()) + " of " + mibString(pr.total)
}

// buffers are the weight buffers of a load by context, and what the
// zero-copy tensors use of each file.
type buffers struct {
	mapped    [][]*LoadedBuffer // per context: its buffers over the mapping, ordered by (file, first)
	allocated []*LoadedBuffer   // per context: its allocated buffer
	used      [][2]int64        // per file: the range used by zero-copy tensors
}

// prefaults are the memory a load faults in on goroutines of their own
// (sysmem.Prefaulter).
type prefaults struct {
	device []*sysmem.Prefaulter // device memory, ahead of the writes
	mapped []*sysmem.Prefaulter // the zero-copy parts of mappings, as MAP_POPULATE did
}

// stopDevice ends the faulting in of device memory.
func (pf *prefaults) stopDevice() {
	for _, p := range pf.device {
		p.Wait()
	}
	pf.device = nil
}

// finishMapped waits until the mappings are faulted in.
func (pf *prefaults) finishMapped() {
	for _, p := range pf.mapped {
		p.Finish()
	}
	pf.mapped = nil
}

// stop ends every faulting in.
func (pf *prefaults) stop() {
	pf.stopDevice()
	for _, p := range pf.mapped {
		p.Wait()
	}
	pf.mapped = nil
}

func (l *load) warn(msg string) {
	l.model.statsMu.Lock()
	l.model.warnings = append(l.model.warnings, msg)
	l.model.statsMu.Unlock()
	l.o.Logger.Warn(msg)
}

// abort frees whatever the load made.
func (l *load) abort() {
	l.faults.stop()
	l.checks.wg.Wait()
	l.model.Close()
}

// canceled reports a cancelled load, or a lane stopped by another's
// failure.
func (l *load) canceled() error {
	if err := l.ctx.Err(); err != nil {
		return fmt.Errorf("%w: %w", ErrCanceled, err)
	}
	if l.stopped.Load() {
		return errStopped
	}
	return nil
}

// progress reports the bytes done; false from the callback cancels.
func (l *load) progress() error {
	if err := l.canceled(); err != nil {
		return err
	}
	return l.prog.report(l.o.Logger, l.o.Progress)
}

func (l *load) run() error {
	p, mdl := l.p, l.model
	if err := checkAddressSpace(MemoryOf(p, l.o)); err != nil {
		return asError("alloc", err)
	}
	t0 := time.Now()
	if err := l.openFiles(); err != nil {
		return asError("open", err)
	}
	mdl.Stats.Open = time.Since(t0)
	t0 = time.Now()
	if err := l.mapFiles(); err != nil {
		return asError("map", err)
	}
	mdl.Stats.Map = time.Since(t0)
	t0 = time.Now()
	if err := l.createTensors(); err != nil {
		return asError("alloc", err)
	}
	l.markLeft()
	if err := l.allocate(); err != nil {
		return asError("alloc", err)
	}
	mdl.Stats.Alloc = time.Since(t0)
	t0 = time.Now()
	err := l.loadData()
	l.hashes.save(l.o.Logger)
	l.faults.stopDevice()
	if err != nil {
		return err // abort stops the rest
	}
	l.faults.finishMapped()
	for _, b := range mdl.buffers {
		if err := b.Device.Err(); err != nil {
			return deviceError("load", b.Device.Name(), b.BufferType.Name(), fmt.Errorf("loader: %s: %w", b.Device.Name(), err))
		}
	}
	mdl.Stats.Data = time.Since(t0)
	t0 = time.Now()
	l.checks.wg.Wait()
	mdl.Stats.Validate = time.Since(t0)
	if l.checks.err != nil {
		return l.checks.err
	}
	if invalid := l.checks.invalid; len(invalid) > 0 {
		slices.Sort(invalid)
		err := fmt.Errorf("loader: %w in %s: %s", ErrInvalidData, joinPaths(l.gm.Paths), joinNames(invalid))
		// the place is the first bad tensor's (the text names them all)
		if i, ok := mdl.byName[invalid[0]]; ok {
			return l.tensorError("validate", mdl.placements[i].Plan, err)
		}
		return &Error{Op: "validate", Off: -1, Err: err}
	}
	if err := l.watchFiles(l.prog.lastTensor(), true); err != nil {
		return err
	}
	if p.UseMmap {
		for fi, mp := range mdl.mappings {
			if mp == nil {
				continue
			}
			u := l.bufs.used[fi]
			if err := mp.UnmapFragment(0, u[0]); err != nil {
				l.warn(err.Error())
			}
			if u[1] != 0 {
				if err := mp.UnmapFragment(u[1], mp.Size()); err != nil {
					l.warn(err.Error())
				}
			}
		}
	}
	l.prog.done.Store(l.prog.total)
	return l.progress()
}

func joinPaths(paths []string) string {
	s := ""
	for i, p := range paths {
		if i > 0 {
			s += ", "
		}
		s += p
	}
	return s
}

func joinNames(names []string) string {
	s := ""
	for i, n := range names {
		if i > 0 {
			s += ", "
		}
		s += "'" + n + "'"
	}
	return s
}

// openFiles opens every split and checks that each tensor still lies inside
// its file (it may have shrunk since the model was opened).
func (l *load) openFiles() error {
	direct := l.p.LoadMode == place.LoadDirectIO
	for _, gf := range l.gm.Files {
		src := gf.Source()
		path := src.Name
		f, err := openModelFile(src, direct, l.o.Logger)
		if err != nil {
			return fileError("open", path, -1, fmt.Errorf("loader: %w", err))
		}
		l.model.files = append(l.model.files, f)
		if !f.local() {
			l.model.stamps = append(l.model.stamps, fileStamp{})
			continue
		}
		// the loaded model owns its own descriptor; it must be the file
		// the metadata was read from, not one put in its place since
		if orig := gf.OSFile(); orig != nil {
			a, errA := orig.Stat()
			b, errB := f.f.Stat()
			if errA == nil && errB == nil && !os.SameFile(a, b) {
				return fileError("open", path, -1, tagged{fmt.Errorf("loader: %s was replaced after the model was opened; open it again", path), ErrFileChanged})
			}
		}
		st, err := f.stamp()
		if err != nil {
			return fileError("open", path, -1, fmt.Errorf("loader: %s: %w", path, err))
		}
		l.model.stamps = append(l.model.stamps, st)
		if direct && f.alignment() == 1 {
			l.model.warnings = append(l.model.warnings, fmt.Sprintf("direct I/O unavailable for %s; read through the page cache", path))
		}
	}
	for i := range l.gm.Weights {
		w := &l.gm.Weights[i]
		f := l.model.files[w.File]
		if w.Offset+w.Size > f.size {
			e := fileError("open", f.path, w.Offset, tagged{fmt.Errorf("loader: tensor '%s' [%d, +%d) lies past the end of %s (%d bytes; was the file truncated after it was opened?)", w.Name, w.Offset, w.Size, f.path, f.size), ErrTruncated})
			e.Tensor = w.Name
			return e
		}
	}
	return nil
}

// mapFiles maps the files when the plan uses mmap or reads some tensor lazily.
func (l *load) mapFiles() error {
	lazy, anyLazy := lazyRanges(l.p)
	l.model.mappings = make([]*mmap.Mapping, len(l.gm.Files))
	l.bufs.used = make([][2]int64, len(l.gm.Files))
	if !l.p.UseMmap && !anyLazy {
		return nil
	}
	numa := l.rt.IsNUMA()
	for i, f := range l.model.files {
		if !f.local() {
			return fileError("map", f.path, -1, fmt.Errorf("loader: %s cannot be mapped: it is no local file (load it with load mode none)", f.path))
		}
		mp, err := mmap.Map(f.f, f.base, f.size, l.p.UseMmap, lazy[i], numa, l.o.Logger)
		if err != nil {
			return fileError("map", f.path, -1, err)
		}
		l.model.mappings[i] = mp
		l.bufs.used[i] = [2]int64{mp.Size(), 0}
		if l.p.LoadMode == place.LoadMmapMlock {
			l.model.locks = append(l.model.locks, sysmem.NewLock(mp.Addr(0), uintptr(mp.Size()), "the mapping of "+f.path, l.warn))
		}
	}
	return nil
}
