// Port of llama.cpp src/llama-model.cpp (v0.5.0): load_tensors' contexts
// and buffers (ctx_map, buffers over the mapping or allocated).

package loader

import (
	"cmp"
	"fmt"
	"slices"
	"sort"
	"unsafe"

	"github.com/ggload/ggload/ggml"
	"github.com/ggload/ggload/loader/internal/sysmem"
	"github.com/ggload/ggload/place"
)

// The weights' contexts and buffers, as llama.cpp's load_tensors makes
// them: one ggml context per plan context, and its buffers, made over the
// mapping (zero copy) or allocated from the buffer type.

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
