package ggml

import (
	"fmt"
	"sync"
	"sync/atomic"

	"github.com/ggload/ggload/bindings"
)

// memAlign is GGML_MEM_ALIGN: tensor data in a context is padded to it.
const memAlign = 16

// Context holds tensor metadata (and, unless NoAlloc, tensor data) in one
// native arena (struct ggml_context). Free releases it and every tensor in
// it; they then answer ErrClosed.
//
// Making tensors, ops and graphs in a context is not safe for concurrent
// use (ggml's arena is not). Reading and writing tensor data is: Get, Set,
// Bytes and the like may run on many goroutines at once, and Free (or the
// Runtime's Close) waits for those in progress.
type Context struct {
	rt      *Runtime
	h       bindings.Context
	noAlloc bool
	size    uint64

	mu     sync.RWMutex // write-held by Free and while tensors get buffers
	freed  bool
	dead   atomic.Bool                  // freed, for checks that take no lock
	owners map[*bindings.Tensor]*Buffer // the buffer each allocated tensor lives in
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
func (rt *Runtime) NewContext(p ContextParams) (_ *Context, err error) {
	defer placed(&err, "init", at{})
	if p.Tensors < 0 || p.Graphs < 0 || p.GraphSize < 0 {
		return nil, fmt.Errorf("ggml: negative context size %+v", p)
	}
	if err := rt.begin(); err != nil {
		return nil, err
	}
	defer rt.end()
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
		return nil, fmt.Errorf("ggml: cannot create a context of %d bytes: %w", size, ErrOutOfMemory)
	}
	c := &Context{rt: rt, h: h, noAlloc: p.NoAlloc, size: size, owners: map[*bindings.Tensor]*Buffer{}}
	rt.keep(c)
	return c, nil
}

// Free releases the context and its tensors once no tensor data is being
// read or written; later calls do nothing. The buffers its tensors live in
// are not freed.
func (c *Context) Free() {
	if c == nil {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.freed {
		return
	}
	c.freed = true
	c.dead.Store(true)
	c.owners = nil
	c.rt.lib.Free(c.h)
	c.rt.drop(c)
}

// Freed reports whether Free was called.
func (c *Context) Freed() bool { return c.dead.Load() }

// hold keeps the context from being freed until release.
func (c *Context) hold() error {
	c.mu.RLock()
	if c.freed {
		c.mu.RUnlock()
		return fmt.Errorf("%w: context freed", ErrClosed)
	}
	return nil
}

func (c *Context) release() { c.mu.RUnlock() }

// NoAlloc reports whether the context keeps tensor data out.
func (c *Context) NoAlloc() bool { return c.noAlloc }

// Runtime is the runtime the context belongs to.
func (c *Context) Runtime() *Runtime { return c.rt }

// room checks, with the context held, that one more object of data bytes
// fits, which ggml would otherwise assert.
func (c *Context) room(data uint64) error {
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
func (c *Context) NewTensor(t Type, ne ...int64) (_ *Tensor, err error) {
	defer placed(&err, "new_tensor", at{})
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
	if err := c.hold(); err != nil {
		return nil, fmt.Errorf("ggml: new %s tensor: %w", t, err)
	}
	defer c.release()
	if err := c.room(uint64(n)); err != nil {
		return nil, err
	}
	dims := [4]int64(s)
	p := c.rt.lib.NewTensor(c.h, int32(t), int32(len(ne)), &dims[0])
	if p == nil {
		return nil, fmt.Errorf("ggml: new %s tensor %v failed", t, ne)
	}
	return c.wrap(p), nil
}

// Tensors returns the context's tensors in creation order (none once
// freed).
func (c *Context) Tensors() []*Tensor {
	if c.hold() != nil {
		return nil
	}
	defer c.release()
	var out []*Tensor
	for p := c.rt.lib.GetFirstTensor(c.h); p != nil; p = c.rt.lib.GetNextTensor(c.h, p) {
		out = append(out, c.wrap(p))
	}
	return out
}

// MaxTensorSize is the size of the largest tensor in the context.
func (c *Context) MaxTensorSize() uint64 {
	if c.hold() != nil {
		return 0
	}
	defer c.release()
	return uint64(c.rt.lib.GetMaxTensorSize(c.h))
}

// AllocTensors allocates one buffer of type b holding every tensor of the
// context that has no data yet (ggml_backend_alloc_ctx_tensors_from_buft). It
// returns nil and no error when no tensor needs memory.
func (c *Context) AllocTensors(b BufferType) (_ *Buffer, err error) {
	defer placed(&err, "alloc_ctx_tensors_from_buft", at{buft: b})
	if !c.noAlloc {
		return nil, fmt.Errorf("ggml: AllocTensors needs a NoAlloc context")
	}
	if b.h == 0 {
		return nil, fmt.Errorf("ggml: AllocTensors: no buffer type")
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.freed {
		return nil, fmt.Errorf("ggml: AllocTensors: %w: context freed", ErrClosed)
	}
	if err := c.rt.rpcRoom(b.guard()); err != nil {
		return nil, fmt.Errorf("ggml: %s: cannot allocate the context's tensors: %w", b.Name(), err)
	}
	need := uint64(c.rt.lib.AllocCtxTensorsFromBuftSize(c.h, b.h))
	if need == 0 {
		return nil, nil
	}
	if err := c.rt.begin(); err != nil {
		return nil, err
	}
	defer c.rt.end()
	if err := c.rt.rpcRoom(b.guard()); err != nil {
		return nil, &Error{Size: need, Err: fmt.Errorf("ggml: %s: cannot allocate %d bytes (%.2f MiB): %w", b.Name(), need, float64(need)/(1<<20), err)}
	}
	h := c.rt.lib.AllocCtxTensorsFromBuft(c.h, b.h)
	if h == 0 {
		return nil, &Error{Size: need, Err: b.withDeviceErr(fmt.Errorf("ggml: %s: cannot allocate %d bytes (%.2f MiB): %w", b.Name(), need, float64(need)/(1<<20), ErrOutOfMemory))}
	}
	buf := newBuffer(c.rt, h)
	for p := c.rt.lib.GetFirstTensor(c.h); p != nil; p = c.rt.lib.GetNextTensor(c.h, p) {
		if p.Buffer == h {
			c.owners[p] = buf
		}
	}
	return buf, nil
}

// AllocSize is the number of bytes AllocTensors would allocate from b: each
// tensor's allocation size padded to the buffer type's alignment.
func (c *Context) AllocSize(b BufferType) uint64 {
	if c.hold() != nil {
		return 0
	}
	defer c.release()
	return uint64(c.rt.lib.AllocCtxTensorsFromBuftSize(c.h, b.h))
}

// ownerOf is the buffer a tensor of the held context lives in, nil when
// it lives in the context itself or in memory ggload did not allocate.
func (c *Context) ownerOf(p *bindings.Tensor) *Buffer {
	if b, ok := c.owners[p]; ok {
		return b
	}
	if p.ViewSrc != nil {
		return c.owners[p.ViewSrc]
	}
	return nil
}
