package place

import (
	"cmp"
	"fmt"
	"slices"
	"strings"

	"github.com/ggload/ggload/ggml"
)

// sizeContexts sorts the contexts as llama.cpp's ctx_map does (non-lazy
// first, then by buffer type name) and sizes their buffers.
func (pl *planner) sizeContexts() error {
	p := pl.p
	order := make([]int, len(p.Contexts))
	for i := range order {
		order[i] = i
	}
	slices.SortStableFunc(order, func(a, b int) int {
		ca, cb := p.Contexts[a], p.Contexts[b]
		if ca.Lazy != cb.Lazy {
			return cmp.Compare(b2i(ca.Lazy), b2i(cb.Lazy))
		}
		// by the native name: for RPC buffer types behind ggload's guard
		// that holds the guard's address, which is what llama.cpp in this
		// process orders by
		return strings.Compare(ca.BufferType.NativeName(), cb.BufferType.NativeName())
	})
	remap := make([]int, len(order))
	sorted := make([]ContextPlan, len(order))
	for newI, oldI := range order {
		remap[oldI] = newI
		sorted[newI] = p.Contexts[oldI]
	}
	p.Contexts = sorted
	for i := range p.Tensors {
		if p.Tensors[i].Context >= 0 {
			p.Tensors[i].Context = remap[p.Tensors[i].Context]
		}
	}
	for ci := range p.Contexts {
		c := &p.Contexts[ci]
		isDefault := c.BufferType == c.Device.BufferType()
		if (p.UseMmap || c.Lazy) && c.Device.Caps().BufferFromHostPtr && isDefault {
			c.Mapped = true
			name, err := c.Device.HostPtrBufferName()
			if err != nil {
				return err
			}
			for fi := range p.Model.Files {
				for _, r := range pl.mappedRanges(ci, fi) {
					n := uint64(r[1] - r[0])
					c.Buffers = append(c.Buffers, BufferPlan{Name: name, Size: n, Requested: n, File: fi, First: r[0], Last: r[1]})
				}
			}
		} else if c.Device.IsMeta() {
			b, err := pl.metaBuffer(c)
			if err != nil {
				return err
			}
			c.Buffers = []BufferPlan{b}
		} else {
			size, err := pl.allocatedSize(c)
			if err != nil {
				return err
			}
			slack, err := c.BufferType.AllocSlack()
			if err != nil {
				return fmt.Errorf("place: %s: %w", c.BufferType.Name(), err)
			}
			c.Buffers = []BufferPlan{{Name: c.BufferType.Name(), Size: size + slack, Requested: size, File: -1}}
		}
		for _, b := range c.Buffers {
			c.Size += b.Size
		}
	}
	return nil
}

// allocatedSize is what ggml_backend_alloc_ctx_tensors_from_buft allocates:
// each tensor's allocation size padded to the buffer type's alignment.
func (pl *planner) allocatedSize(c *ContextPlan) (uint64, error) {
	align := c.BufferType.Alignment()
	if align == 0 {
		align = 1
	}
	var total uint64
	for _, ti := range c.Tensors {
		t := &pl.p.Tensors[ti]
		n, err := pl.tensorAllocSize(c.BufferType, t.Type, t.Shape)
		if err != nil {
			return 0, err
		}
		total += (n + align - 1) / align * align
	}
	return total, nil
}

// metaBuffer sizes the buffer of a meta device's context: on each of its
// devices, the slices of its tensors there (as the meta buffer allocates
// them: ggml_backend_alloc_ctx_tensors_from_buft per device); the buffer's
// own size is the largest.
func (pl *planner) metaBuffer(c *ContextPlan) (BufferPlan, error) {
	bp := BufferPlan{Name: c.BufferType.Name(), File: -1}
	ts := make([]metaSlices, len(c.Tensors))
	for i, ti := range c.Tensors {
		t := &pl.p.Tensors[ti]
		ts[i] = metaSlices{t.Type, t.Shape, t.Split}
	}
	parts, err := pl.metaParts(c.Device.Parts(), ts)
	if err != nil {
		return BufferPlan{}, err
	}
	bp.Parts = parts
	for _, part := range parts {
		bp.Size, bp.Requested = max(bp.Size, part.Size), max(bp.Requested, part.Requested)
	}
	// what ggml_backend_alloc_ctx_tensors_from_buft_size says of the meta
	// buffer type: its alignment and allocation sizes are its devices'
	// largest, for the tensor as a whole
	var align uint64 = 1
	for _, part := range parts {
		align = max(align, part.BufferType.Alignment())
	}
	for _, ti := range c.Tensors {
		t := &pl.p.Tensors[ti]
		var n uint64
		for _, part := range parts {
			m, err := pl.tensorAllocSize(part.BufferType, t.Type, t.Shape)
			if err != nil {
				return BufferPlan{}, err
			}
			n = max(n, m)
		}
		bp.Measured += (n + align - 1) / align * align
	}
	return bp, nil
}

// tensorAllocSize asks the buffer type how much a tensor needs (backends
// may pad), once per (buffer type, type, shape).
func (pl *planner) tensorAllocSize(b ggml.BufferType, typ ggml.Type, ne ggml.Shape) (uint64, error) {
	key := allocKey{b, typ, ne}
	if n, ok := pl.allocSize[key]; ok {
		return n, nil
	}
	ctx, err := pl.rt.NewContext(ggml.ContextParams{Tensors: 1, NoAlloc: true})
	if err != nil {
		return 0, err
	}
	defer ctx.Free()
	t, err := ctx.NewTensor(typ, ne[:]...)
	if err != nil {
		return 0, err
	}
	n := b.AllocSize(t)
	pl.allocSize[key] = n
	return n, nil
}

// metaSlices is a tensor a meta device's buffer holds, with its split
// (nil or no dimension: mirrored, whole on every device).
type metaSlices struct {
	typ   ggml.Type
	shape ggml.Shape
	split *ggml.SplitState
}

// metaParts sizes what a meta buffer allocates on each of its devices for
// the tensors ts, as it does (ggml_backend_alloc_ctx_tensors_from_buft per
// device): each tensor's slice there, aligned, and the buffer type's
// slack where anything is allocated.
func (pl *planner) metaParts(devices []*ggml.Device, ts []metaSlices) ([]BufferPart, error) {
	return metaPartsOf(devices, ts, pl.tensorAllocSize)
}

// metaPartsOf is metaParts with allocSize saying what a buffer type
// allocates for a tensor.
func metaPartsOf(devices []*ggml.Device, ts []metaSlices, allocSize func(ggml.BufferType, ggml.Type, ggml.Shape) (uint64, error)) ([]BufferPart, error) {
	var parts []BufferPart
	for j, d := range devices {
		b := d.BufferType()
		align := max(b.Alignment(), 1)
		var size uint64
		for _, t := range ts {
			shape := t.shape
			if t.split != nil && t.split.Axis.IsDim() {
				shape[t.split.Axis] = t.split.Share(j)
			}
			n, err := allocSize(b, t.typ, shape)
			if err != nil {
				return nil, err
			}
			size += (n + align - 1) / align * align
		}
		var slack uint64
		if size > 0 {
			var err error
			if slack, err = b.AllocSlack(); err != nil {
				return nil, fmt.Errorf("place: %s: %w", b.Name(), err)
			}
		}
		parts = append(parts, BufferPart{Device: d, BufferType: b, Size: size + slack, Requested: size})
	}
	return parts, nil
}
