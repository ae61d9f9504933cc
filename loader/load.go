package loader

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"os"
	"runtime"
	"slices"
	"sort"
	"sync"
	"sync/atomic"
	"time"
	"unsafe"

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

// createTensors makes one ggml context per plan context with its tensors.
func (l *load) createTensors() error {
	p, mdl := l.p, l.model
	ctxTensors := make([][]*ggml.Tensor, len(p.Contexts))
	for ci, c := range p.Contexts {
		gc, err := l.rt.NewContext(ggml.ContextParams{Tensors: len(c.Tensors), NoAlloc: true})
		if err != nil {
			return deviceError("alloc", c.Device.Name(), c.BufferType.Name(), err)
		}
		mdl.contexts = append(mdl.contexts, gc)
		for _, ti := range c.Tensors {
			tp := &p.Tensors[ti]
			nd := max(tp.Weight.NDims, 1)
			t, err := gc.NewTensor(tp.Type, tp.Shape[:nd]...)
			if err != nil {
				return l.tensorError("alloc", tp, fmt.Errorf("loader: tensor '%s': %w", tp.Name, err))
			}
			if err := t.SetName(tp.Name); err != nil {
				return l.tensorError("alloc", tp, err)
			}
			ctxTensors[ci] = append(ctxTensors[ci], t)
		}
	}
	mdl.placements = make([]Placement, len(p.Tensors))
	pos := make([]int, len(p.Contexts))
	for i := range p.Tensors {
		tp := &p.Tensors[i]
		pl := Placement{Plan: tp}
		switch {
		case tp.Context < 0:
			pl.Path = PathUnused
		case tp.Shared:
			pl.Path = PathShared
			// the context's own tensor of that name
			for k, ti := range p.Contexts[tp.Context].Tensors {
				if p.Tensors[ti].Weight == tp.Weight {
					pl.Tensor = ctxTensors[tp.Context][k]
				}
			}
		default:
			pl.Tensor = ctxTensors[tp.Context][pos[tp.Context]]
			pos[tp.Context]++
		}
		mdl.placements[i] = pl
		if _, ok := mdl.byName[tp.Name]; !ok && pl.Tensor != nil {
			mdl.byName[tp.Name] = i
		}
		if pl.Tensor != nil && pl.Path != PathShared {
			l.prog.total += uint64(tp.Bytes)
		}
	}
	return nil
}

// allocate makes every context's buffers: zero-copy buffers over the
// mapping, or allocations of the context's buffer type.
func (l *load) allocate() error {
	p, mdl := l.p, l.model
	l.bufs.mapped = make([][]*LoadedBuffer, len(p.Contexts))
	l.bufs.allocated = make([]*LoadedBuffer, len(p.Contexts))
	for ci, c := range p.Contexts {
		var err error
		if c.Mapped {
			err = l.mapContext(ci, c)
		} else {
			err = l.allocContext(ci, c)
		}
		if err != nil {
			return err
		}
	}
	for i := range mdl.placements {
		if pl := &mdl.placements[i]; pl.Tensor != nil {
			pl.Buffer = l.bufs.allocated[pl.Plan.Context]
		}
	}
	return nil
}

// mapContext makes the buffers of mapped context ci over the mappings of
// its files, ordered by file and offset for cover.
func (l *load) mapContext(ci int, c place.ContextPlan) error {
	maxT := uint64(0)
	for _, ti := range c.Tensors {
		maxT = max(maxT, uint64(l.p.Tensors[ti].Bytes))
	}
	for _, bp := range c.Buffers {
		if err := l.mapBuffer(ci, c, bp, maxT); err != nil {
			return err
		}
	}
	slices.SortFunc(l.bufs.mapped[ci], func(a, b *LoadedBuffer) int {
		return cmp.Or(cmp.Compare(a.File, b.File), cmp.Compare(a.First, b.First))
	})
	return nil
}

// mapBuffer makes buffer bp of mapped context ci over its file's mapping,
// for tensors of at most maxT bytes.
func (l *load) mapBuffer(ci int, c place.ContextPlan, bp place.BufferPlan, maxT uint64) error {
	mdl := l.model
	mp := mdl.mappings[bp.File]
	if mp == nil {
		return deviceError("alloc", c.Device.Name(), c.BufferType.Name(), fmt.Errorf("loader: context %s needs file %d mapped", c.BufferType.Name(), bp.File))
	}
	buf, err := c.Device.BufferFromHostPtr(mp.Addr(bp.First), uint64(bp.Last-bp.First), maxT)
	if err != nil {
		return &Error{Op: "alloc", Path: mp.Path(), Device: c.Device.Name(), BufferType: c.BufferType.Name(), Off: bp.First,
			Err: fmt.Errorf("loader: %s: buffer over [%#x, %#x) of %s: %w", c.Device.Name(), bp.First, bp.Last, mp.Path(), err)}
	}
	buf.SetUsage(ggml.UsageWeights)
	if l.p.UseMmap && !c.Lazy && sysmem.PopulateLater() && !l.rt.IsNUMA() {
		// what mmap's MAP_POPULATE did, for this buffer's pages only,
		// while the load moves the rest
		f := mdl.files[bp.File]
		l.faults.mapped = append(l.faults.mapped, sysmem.PopulateMapped(mp.Addr(bp.First), uint64(bp.Last-bp.First), f.preread(), f.base+bp.First))
	}
	lb := &LoadedBuffer{Buffer: buf, BufferType: c.BufferType, Device: c.Device, Mapped: true, Lazy: c.Lazy, File: bp.File, First: bp.First, Last: bp.Last, context: ci}
	mdl.buffers = append(mdl.buffers, lb)
	l.bufs.mapped[ci] = append(l.bufs.mapped[ci], lb)
	return nil
}

// allocContext allocates the buffer of context ci in its buffer type and
// prepares its memory for the writes.
func (l *load) allocContext(ci int, c place.ContextPlan) error {
	mdl := l.model
	gc := mdl.contexts[ci]
	need := gc.AllocSize(c.BufferType)
	var before sysmem.Ranges
	devMem := !c.BufferType.IsHost() && c.Device.Type() != ggml.DeviceCPU && !c.Device.IsRPC()
	if devMem {
		before = sysmem.AnonMemory()
	}
	if c.Device.IsMeta() {
		// a meta buffer aborts the process when one of its devices
		// cannot allocate its share: each share is tried first
		if err := tryParts(c); err != nil {
			return err
		}
	}
	buf, err := gc.AllocTensors(c.BufferType)
	if derr := c.Device.Err(); derr != nil {
		if buf != nil {
			buf.Free()
		}
		err = derr
	}
	if err != nil {
		return deviceError("alloc", c.Device.Name(), c.BufferType.Name(), fmt.Errorf("loader: cannot allocate the %s buffer of %.2f MiB (%d bytes, %d tensors) on device %s: %w",
			c.BufferType.Name(), float64(need)/(1<<20), need, len(c.Tensors), c.Device.Name(), err))
	}
	if buf == nil {
		return nil
	}
	if devMem {
		l.adviseDeviceMemory(c, buf, before)
	}
	buf.SetUsage(ggml.UsageWeights)
	lb := &LoadedBuffer{Buffer: buf, BufferType: c.BufferType, Device: c.Device, Lazy: c.Lazy, File: -1, context: ci}
	mdl.buffers = append(mdl.buffers, lb)
	l.bufs.allocated[ci] = lb
	l.prepareHostMemory(c, buf)
	return nil
}

// adviseDeviceMemory advises huge pages over the memory a software
// device's new buffer mapped into this process (what sysmem.AnonMemory did
// not hold before), and faults it in ahead of the uploads when it is the
// buffer's own (package sysmem says why).
func (l *load) adviseDeviceMemory(c place.ContextPlan, buf *ggml.Buffer, before sysmem.Ranges) {
	rs := sysmem.AdviseNewMemory(before)
	if len(rs) == 0 {
		return
	}
	n := rs.Bytes()
	how := "huge pages advised"
	if n <= buf.Size()+64<<20 {
		// the buffer's own memory, nothing else: fault it in ahead of
		// the uploads
		l.faults.device = append(l.faults.device, sysmem.Prefault(rs))
		how += ", faulted in ahead of the uploads"
	}
	l.o.Logger.Debug(fmt.Sprintf("%s: %s over %.2f MiB mapped into this process for the %s buffer", c.Device.Name(), how, float64(n)/(1<<20), c.BufferType.Name()))
}

// prepareHostMemory readies a weight buffer in this process's memory: plain
// memory gets huge pages and is faulted in ahead of the writes, and under
// mlock a host buffer is locked.
func (l *load) prepareHostMemory(c place.ContextPlan, buf *ggml.Buffer) {
	if (c.Device.Type() == ggml.DeviceCPU || (c.BufferType.IsHost() && softwareDevice(c.Device))) && buf.Base() != nil {
		// the CPU's own allocations (its extra buffer types' too,
		// CPU_REPACK) and a software device's host buffer type
		// (lavapipe's Vulkan_Host) are plain memory (a GPU's host
		// buffer type is pinned by its driver: left alone): huge
		// pages, faulted in ahead of the readers and repacks
		if rs := plainMemory(buf.Base(), buf.Size()); rs != nil {
			l.faults.device = append(l.faults.device, sysmem.Prefault(rs))
			// the pages go before the memory does, whoever frees it
			// (the model's Close, or the runtime's first)
			buf.BeforeFree(rs.Release)
		}
	}
	if l.p.LoadMode == place.LoadMlock && buf.IsHost() && buf.Base() != nil {
		lk := sysmem.NewLock(buf.Base(), uintptr(buf.Size()), "the "+c.BufferType.Name()+" weight buffer", l.warn)
		buf.BeforeFree(lk.Release) // unlocked before it is freed, whoever frees it
		lk.GrowTo(uintptr(buf.Size()))
		l.model.locks = append(l.model.locks, lk)
	}
}

// plainMemory advises huge pages over the whole pages of [p, p+n), memory
// of this process that no driver pins (the CPU's buffers, a software
// device's host memory), and returns them, to be faulted in ahead of the
// writes.
func plainMemory(p unsafe.Pointer, n uint64) sysmem.Ranges {
	sysmem.AdviseHugePages(p, n)
	return sysmem.WholePages(p, n)
}

// tryParts allocates and frees the share of a meta device's buffer on
// each of its devices.
func tryParts(c place.ContextPlan) error {
	for _, b := range c.Buffers {
		for _, part := range b.Parts {
			if part.Requested == 0 {
				continue
			}
			buf, err := part.BufferType.Alloc(part.Requested)
			if err != nil {
				return deviceError("alloc", part.Device.Name(), c.BufferType.Name(), fmt.Errorf("loader: cannot allocate the %s buffer: its share of %.2f MiB (%d bytes) on device %s: %w",
					c.BufferType.Name(), float64(part.Requested)/(1<<20), part.Requested, part.Device.Name(), err))
			}
			buf.Free()
		}
	}
	return nil
}

// cover is the mapped buffer of context ci that holds [off, off+size) of
// file fi, or nil.
func (b *buffers) cover(ci, fi int, off, size int64) *LoadedBuffer {
	bufs := b.mapped[ci]
	// the last buffer starting at or before (fi, off)
	i := sort.Search(len(bufs), func(i int) bool {
		b := bufs[i]
		return b.File > fi || (b.File == fi && b.First > off)
	}) - 1
	if i < 0 {
		return nil
	}
	if b := bufs[i]; b.File == fi && off+size <= b.Last {
		return b
	}
	return nil
}

func b2i(b bool) int {
	if b {
		return 1
	}
	return 0
}

func (l *load) ctxIsHost(ci int) bool {
	c := l.p.Contexts[ci]
	if c.Mapped {
		return true
	}
	if b := l.bufs.allocated[ci]; b != nil {
		return b.Buffer.IsHost()
	}
	return c.BufferType.IsHost()
}

// remoteReaders is the default number of readers of a model whose files
// are not local (an HTTP reader, say): each read waits on the network, not
// a core, and more in flight keep the link busy.
const remoteReaders = 8

// directReaders is the least number of readers a load takes by default
// when it reads its files with direct I/O: a direct read waits on the disk
// and copies nothing on a core, and more reads in flight hide the faults
// of the fresh memory they go into (onto the CPU, 0.19-0.22 s against
// 0.22-0.30 s with 2 readers, for a cold 1 GiB file on two cores).
const directReaders = 8

// hostReaders is the default number of readers of local files: as many as
// the cores, up to 4, and at least directReaders with direct I/O.
func hostReaders(direct bool) int {
	n := min(runtime.NumCPU(), 4)
	if direct {
		n = max(n, directReaders)
	}
	return n
}

func (l *load) readerCount() int {
	if l.sequential() {
		return 1
	}
	if l.o.Readers > 0 {
		return l.o.Readers
	}
	for _, f := range l.p.Model.Files {
		if !f.Source().Local() {
			return remoteReaders
		}
	}
	direct := false
	for _, f := range l.model.files {
		direct = direct || f.alignment() > 1
	}
	return hostReaders(direct)
}
