package ggml

import (
	"fmt"
	"strings"
	"sync"
	"unsafe"

	"github.com/ggload/ggload/bindings"
)

// memAlign is GGML_MEM_ALIGN: tensor data in a context is padded to it.
const memAlign = 16

// Context holds tensor metadata (and, unless NoAlloc, tensor data) in one
// native arena (struct ggml_context). Free releases it and every tensor in it.
type Context struct {
	rt      *Runtime
	h       bindings.Context
	noAlloc bool
	size    uint64

	mu    sync.Mutex
	freed bool
}

// ContextParams size a context.
type ContextParams struct {
	// Tensors is the number of tensors (and graph-less op results) it holds.
	Tensors int
	// DataBytes is room for tensor data when NoAlloc is false.
	DataBytes uint64
	// Graphs is the number of default-size graphs it holds.
	Graphs int
	// GraphSize, when > 0, sizes the graphs for that many nodes instead of
	// the default.
	GraphSize int
	// NoAlloc keeps tensor data out of the context (metadata only).
	NoAlloc bool
}

// NewContext creates a context sized by p.
func (rt *Runtime) NewContext(p ContextParams) (*Context, error) {
	if p.Tensors < 0 || p.Graphs < 0 || p.GraphSize < 0 {
		return nil, fmt.Errorf("ggml: negative context size %+v", p)
	}
	size := uint64(p.Tensors) * uint64(rt.lib.TensorOverhead())
	if p.Graphs > 0 {
		var g uint64
		if p.GraphSize > 0 {
			g = uint64(rt.lib.GraphOverheadCustom(uintptr(p.GraphSize), false))
		} else {
			g = uint64(rt.lib.GraphOverhead())
		}
		size += uint64(p.Graphs) * g
	}
	if !p.NoAlloc {
		size += p.DataBytes + uint64(p.Tensors)*memAlign
	}
	if size == 0 {
		size = uint64(rt.lib.TensorOverhead())
	}
	h := rt.lib.Init(bindings.InitParams{MemSize: uintptr(size), NoAlloc: p.NoAlloc})
	if h == 0 {
		return nil, fmt.Errorf("ggml: cannot create a context of %d bytes", size)
	}
	return &Context{rt: rt, h: h, noAlloc: p.NoAlloc, size: size}, nil
}

// Free releases the context and its tensors; later calls do nothing.
func (c *Context) Free() {
	if c == nil {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if !c.freed {
		c.freed = true
		c.rt.lib.Free(c.h)
	}
}

// NoAlloc reports whether the context keeps tensor data out.
func (c *Context) NoAlloc() bool { return c.noAlloc }

// Runtime is the runtime the context belongs to.
func (c *Context) Runtime() *Runtime { return c.rt }

// room checks that one more object of data bytes fits, which ggml would
// otherwise assert.
func (c *Context) room(data uint64) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.freed {
		return fmt.Errorf("ggml: context used after Free")
	}
	need := uint64(c.rt.lib.UsedMem(c.h)) + uint64(c.rt.lib.TensorOverhead())
	if !c.noAlloc {
		need += (data + memAlign - 1) &^ (memAlign - 1)
	}
	if need > c.size {
		return fmt.Errorf("ggml: context of %d bytes is full (%d needed)", c.size, need)
	}
	return nil
}

// NewTensor creates a tensor of type t with shape ne (1 to 4 dimensions,
// ne[0] first). Its data lives in the context unless the context is NoAlloc.
func (c *Context) NewTensor(t Type, ne ...int64) (*Tensor, error) {
	if !t.Valid() {
		return nil, fmt.Errorf("ggml: new tensor: invalid type %d", int32(t))
	}
	if len(ne) < 1 || len(ne) > bindings.MaxDims {
		return nil, fmt.Errorf("ggml: new tensor: %d dimensions (1 to %d)", len(ne), bindings.MaxDims)
	}
	var s Shape = Shape{1, 1, 1, 1}
	copy(s[:], ne)
	n, err := t.Bytes(s)
	if err != nil {
		return nil, fmt.Errorf("ggml: new %s tensor %v: %w", t, ne, err)
	}
	if err := c.room(uint64(n)); err != nil {
		return nil, err
	}
	dims := [4]int64(s)
	p := c.rt.lib.NewTensor(c.h, int32(t), int32(len(ne)), &dims[0])
	if p == nil {
		return nil, fmt.Errorf("ggml: new %s tensor %v failed", t, ne)
	}
	return &Tensor{rt: c.rt, c: p}, nil
}

// Tensors returns the context's tensors in creation order.
func (c *Context) Tensors() []*Tensor {
	var out []*Tensor
	for p := c.rt.lib.GetFirstTensor(c.h); p != nil; p = c.rt.lib.GetNextTensor(c.h, p) {
		out = append(out, &Tensor{rt: c.rt, c: p})
	}
	return out
}

// MaxTensorSize is the size of the largest tensor in the context.
func (c *Context) MaxTensorSize() uint64 { return uint64(c.rt.lib.GetMaxTensorSize(c.h)) }

// AllocTensors allocates one buffer of type b holding every tensor of the
// context that has no data yet (ggml_backend_alloc_ctx_tensors_from_buft). It
// returns nil and no error when no tensor needs memory.
func (c *Context) AllocTensors(b BufferType) (*Buffer, error) {
	if !c.noAlloc {
		return nil, fmt.Errorf("ggml: AllocTensors needs a NoAlloc context")
	}
	if b.h == 0 {
		return nil, fmt.Errorf("ggml: AllocTensors: no buffer type")
	}
	need := c.AllocSize(b)
	if need == 0 {
		return nil, nil
	}
	h := c.rt.lib.AllocCtxTensorsFromBuft(c.h, b.h)
	if h == 0 {
		return nil, b.withDeviceErr(fmt.Errorf("ggml: %s: cannot allocate %d bytes (%.2f MiB)", b.Name(), need, float64(need)/(1<<20)))
	}
	return newBuffer(c.rt, h), nil
}

// AllocSize is the number of bytes AllocTensors would allocate from b: each
// tensor's allocation size padded to the buffer type's alignment.
func (c *Context) AllocSize(b BufferType) uint64 {
	return uint64(c.rt.lib.AllocCtxTensorsFromBuftSize(c.h, b.h))
}

// Tensor is a tensor in a context (struct ggml_tensor). It stays valid until
// its context is freed.
type Tensor struct {
	rt *Runtime
	c  *bindings.Tensor
}

// C returns the native tensor (for tests and the conformance harness).
func (t *Tensor) C() *bindings.Tensor { return t.c }

// Name is the tensor's name.
func (t *Tensor) Name() string { return bindings.GoString(&t.c.Name[0]) }

// SetName names the tensor (at most 63 bytes, no NUL).
func (t *Tensor) SetName(name string) error {
	if len(name) >= bindings.MaxName || strings.IndexByte(name, 0) >= 0 {
		return fmt.Errorf("ggml: tensor name %q: longer than %d bytes or holds a NUL", name, bindings.MaxName-1)
	}
	copy(t.c.Name[:], name)
	t.c.Name[len(name)] = 0
	return nil
}

// Type is the element type.
func (t *Tensor) Type() Type { return Type(t.c.Type) }

// Shape is ne[].
func (t *Tensor) Shape() Shape { return Shape(t.c.Ne) }

// Strides is nb[].
func (t *Tensor) Strides() [4]uint64 {
	return [4]uint64{uint64(t.c.Nb[0]), uint64(t.c.Nb[1]), uint64(t.c.Nb[2]), uint64(t.c.Nb[3])}
}

// NBytes is the tensor's size in bytes (ggml_nbytes, computed in Go).
func (t *Tensor) NBytes() uint64 {
	for _, d := range t.c.Ne {
		if d <= 0 {
			return 0
		}
	}
	typ := t.Type()
	bs := uint64(typ.BlockSize())
	var n uint64
	if bs == 1 {
		n = uint64(typ.TypeSize())
		for i := 0; i < 4; i++ {
			n += uint64(t.c.Ne[i]-1) * uint64(t.c.Nb[i])
		}
	} else {
		n = uint64(t.c.Ne[0]) * uint64(t.c.Nb[0]) / bs
		for i := 1; i < 4; i++ {
			n += uint64(t.c.Ne[i]-1) * uint64(t.c.Nb[i])
		}
	}
	return n
}

// Data is the tensor's data address (a device address for device buffers).
func (t *Tensor) Data() unsafe.Pointer { return t.c.Data }

// BufferHandle is the handle of the buffer holding the tensor (0 if none).
func (t *Tensor) BufferHandle() bindings.Buffer { return t.c.Buffer }

// Allocated reports whether the tensor has a buffer and an address.
func (t *Tensor) Allocated() bool { return t.c.Buffer != 0 && t.c.Data != nil }

// setProbeBuffer attaches a buffer (normally a zero-size dummy) without
// giving the tensor data, as llama.cpp does before asking supports_op which
// buffer type a weight would live in. clearProbeBuffer undoes it.
func (t *Tensor) setProbeBuffer(b *Buffer) error {
	if t.c.Buffer != 0 || t.c.Data != nil {
		return fmt.Errorf("ggml: tensor %s already has a buffer", t.Name())
	}
	t.c.Buffer = b.h
	return nil
}

// clearProbeBuffer detaches the buffer set by setProbeBuffer.
func (t *Tensor) clearProbeBuffer() {
	if t.c.Data == nil {
		t.c.Buffer = 0
	}
}

// Alloc places the tensor in buf at addr (ggml_backend_tensor_alloc). The
// range must lie inside the buffer; for a buffer made over host memory that
// makes the tensor use that memory without a copy.
func (t *Tensor) Alloc(buf *Buffer, addr unsafe.Pointer) error {
	if t.c.Buffer != 0 || t.c.Data != nil || t.c.ViewSrc != nil {
		return fmt.Errorf("ggml: tensor %s is already allocated", t.Name())
	}
	if buf == nil || buf.Freed() {
		return fmt.Errorf("ggml: tensor %s: alloc in a freed or nil buffer", t.Name())
	}
	base := uintptr(buf.Base())
	need := uint64(t.rt.lib.BufferGetAllocSize(buf.h, t.c))
	a := uintptr(addr)
	if base == 0 || a < base || uint64(a-base)+need > buf.Size() {
		return fmt.Errorf("ggml: tensor %s (%d bytes at %#x) does not fit buffer %s [%#x, +%d)", t.Name(), need, a, buf.Name(), base, buf.Size())
	}
	if st := t.rt.lib.TensorAlloc(buf.h, t.c, addr); st != 0 {
		return fmt.Errorf("ggml: tensor %s: tensor_alloc failed with status %d", t.Name(), st)
	}
	return nil
}

func (t *Tensor) checkRange(what string, offset, size uint64) error {
	buf := t.c.Buffer
	if t.c.ViewSrc != nil {
		buf = t.c.ViewSrc.Buffer
	}
	if buf == 0 || t.c.Data == nil {
		return fmt.Errorf("ggml: %s of tensor %s: not allocated", what, t.Name())
	}
	if n := t.NBytes(); offset > n || size > n-offset {
		return fmt.Errorf("ggml: %s of tensor %s: [%d, +%d) is outside its %d bytes", what, t.Name(), offset, size, n)
	}
	return nil
}

// Set copies src into the tensor at offset (ggml_backend_tensor_set), from
// host memory to wherever the tensor lives.
func (t *Tensor) Set(src []byte, offset uint64) error {
	if len(src) == 0 {
		return nil
	}
	if err := t.checkRange("set", offset, uint64(len(src))); err != nil {
		return err
	}
	t.rt.lib.TensorSet(t.c, unsafe.Pointer(&src[0]), uintptr(offset), uintptr(len(src)))
	return nil
}

// SetPtr is Set from native or mapped memory [src, src+size).
func (t *Tensor) SetPtr(src unsafe.Pointer, offset, size uint64) error {
	if size == 0 {
		return nil
	}
	if err := t.checkRange("set", offset, size); err != nil {
		return err
	}
	t.rt.lib.TensorSet(t.c, src, uintptr(offset), uintptr(size))
	return nil
}

// Get copies len(dst) bytes of the tensor from offset into dst.
func (t *Tensor) Get(dst []byte, offset uint64) error {
	if len(dst) == 0 {
		return nil
	}
	if err := t.checkRange("get", offset, uint64(len(dst))); err != nil {
		return err
	}
	if b := (BufferType{t.rt, t.rt.lib.BufferGetType(t.c.Buffer)}); t.rt.writeOnly(b) {
		return fmt.Errorf("ggml: tensor %s lives in a %s buffer, which stores data repacked and cannot be read back", t.Name(), b.Name())
	}
	t.rt.lib.TensorGet(t.c, unsafe.Pointer(&dst[0]), uintptr(offset), uintptr(len(dst)))
	return nil
}

// Bytes reads the whole tensor.
func (t *Tensor) Bytes() ([]byte, error) {
	b := make([]byte, t.NBytes())
	return b, t.Get(b, 0)
}
