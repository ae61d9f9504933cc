package ggml

import (
	"fmt"
	"strings"
	"unsafe"

	"github.com/ggload/ggload/bindings"
	"github.com/ggload/ggload/ggml/ops"
)

// Tensor is a tensor in a context (struct ggml_tensor). Its type, shape,
// strides, size and op are kept in Go and stay readable after its context
// is freed; everything that reaches its data answers ErrClosed once the
// context, or the buffer it lives in, is freed. Reads and writes of its
// data are safe for concurrent use (see Context).
type Tensor struct {
	rt  *Runtime
	ctx *Context
	c   *bindings.Tensor

	name string // as last seen
	typ  Type
	ne   Shape
	nb   [4]uint64
	op   Op
}

// wrap makes the Go handle of a tensor of the held context.
func (c *Context) wrap(p *bindings.Tensor) *Tensor {
	return &Tensor{rt: c.rt, ctx: c, c: p, name: bindings.GoString(&p.Name[0]), typ: Type(p.Type), ne: Shape(p.Ne), op: Op(p.Op),
		nb: [4]uint64{uint64(p.Nb[0]), uint64(p.Nb[1]), uint64(p.Nb[2]), uint64(p.Nb[3])}}
}

// hold keeps the tensor's context, and the buffer it lives in, from being
// freed until unhold.
func (t *Tensor) hold(what string) (*Buffer, error) {
	c := t.ctx
	c.mu.RLock()
	if c.freed {
		c.mu.RUnlock()
		return nil, fmt.Errorf("ggml: %s of tensor %s: %w: its context was freed", what, t.name, ErrClosed)
	}
	b := c.ownerOf(t.c)
	if b != nil {
		b.mu.RLock()
		if b.freed {
			b.mu.RUnlock()
			c.mu.RUnlock()
			return nil, fmt.Errorf("ggml: %s of tensor %s: %w: its buffer was freed", what, t.name, ErrClosed)
		}
	}
	return b, nil
}

func (t *Tensor) unhold(b *Buffer) {
	if b != nil {
		b.mu.RUnlock()
	}
	t.ctx.mu.RUnlock()
}

// Name is the tensor's name, as made or last set through SetName (ggml
// renames no tensor it has already made, so the Go copy is the name).
func (t *Tensor) Name() string { return t.name }

// SetName names the tensor (at most 63 bytes, no NUL).
func (t *Tensor) SetName(name string) (err error) {
	defer placed(&err, "set_name", at{t: t})
	if len(name) >= bindings.MaxName || strings.IndexByte(name, 0) >= 0 {
		return fmt.Errorf("ggml: tensor name %q: longer than %d bytes or holds a NUL", name, bindings.MaxName-1)
	}
	if err := t.ctx.hold(); err != nil {
		return fmt.Errorf("ggml: naming tensor %s: %w", t.name, err)
	}
	defer t.ctx.release()
	copy(t.c.Name[:], name)
	t.c.Name[len(name)] = 0
	t.name = name
	return nil
}

// Type is the element type.
func (t *Tensor) Type() Type { return t.typ }

// Shape is ne[].
func (t *Tensor) Shape() Shape { return t.ne }

// Strides is nb[].
func (t *Tensor) Strides() [4]uint64 { return t.nb }

// Op is the op that produced the tensor (OpNone for leaves).
func (t *Tensor) Op() Op { return t.op }

// NBytes is the tensor's size in bytes (ggml_nbytes, computed in Go).
func (t *Tensor) NBytes() uint64 {
	for _, d := range t.ne {
		if d <= 0 {
			return 0
		}
	}
	bs := uint64(t.typ.BlockSize())
	var n uint64
	if bs == 1 {
		n = uint64(t.typ.TypeSize())
		for i := 0; i < 4; i++ {
			n += uint64(t.ne[i]-1) * t.nb[i]
		}
	} else {
		n = uint64(t.ne[0]) * t.nb[0] / bs
		for i := 1; i < 4; i++ {
			n += uint64(t.ne[i]-1) * t.nb[i]
		}
	}
	return n
}

// WithData calls f with the tensor's data address (a device address for
// device buffers) while the tensor's context and buffer are held: Close
// of the context, the buffer or the Runtime waits until f returns, so
// memory f reads or writes through the address stays allocated for the
// whole call. The address must not be kept past f. A tensor with no data
// (unallocated) calls f with nil; a freed one is ErrClosed, f not called.
func (t *Tensor) WithData(f func(data unsafe.Pointer) error) error {
	b, err := t.hold("data")
	if err != nil {
		placed(&err, "tensor_data", at{t: t})
		return err // (f's errors pass through as they are)
	}
	defer t.unhold(b)
	return f(t.c.Data)
}

// data is the data address for ggload's own code, which holds what keeps
// it valid (a load holds its Runtime).
func (t *Tensor) data() unsafe.Pointer {
	b, err := t.hold("data")
	if err != nil {
		return nil
	}
	defer t.unhold(b)
	return t.c.Data
}

// Allocated reports whether the tensor has a buffer and an address (false
// once freed).
func (t *Tensor) Allocated() bool {
	b, err := t.hold("allocated")
	if err != nil {
		return false
	}
	defer t.unhold(b)
	return t.c.Buffer != 0 && t.c.Data != nil
}

// Buffer is the buffer ggload allocated the tensor in: by AllocTensors or
// Alloc (or, for a view, its source's); nil otherwise and once freed.
func (t *Tensor) Buffer() *Buffer {
	b, err := t.hold("buffer")
	if err != nil {
		return nil
	}
	defer t.unhold(b)
	return b
}

// Src returns the i-th source of an op tensor, or nil. The source is
// Native is the tensor's ggml_tensor for package ops, nil once its
// context is freed: for graphs built over tensors this package owns, such
// as a loaded model's weights. The caller keeps the tensor's context (and
// its buffer) alive while a graph uses it.
func (t *Tensor) Native() *ops.Tensor {
	if t.ctx.Freed() {
		return nil
	}
	return (*ops.Tensor)(t.c)
}

// handled as part of t's context: it must not outlive its own.
func (t *Tensor) Src(i int) *Tensor {
	if i < 0 || i >= bindings.MaxSrc || t.ctx.hold() != nil {
		return nil
	}
	defer t.ctx.release()
	if t.c.Src[i] == nil {
		return nil
	}
	return t.ctx.wrap(t.c.Src[i])
}

// setProbeBuffer attaches a buffer (normally a zero-size dummy) without
// giving the tensor data, as llama.cpp does before asking supports_op which
// buffer type a weight would live in. clearProbeBuffer undoes it.
func (t *Tensor) setProbeBuffer(b *Buffer) error {
	if t.c.Buffer != 0 || t.c.Data != nil {
		return fmt.Errorf("ggml: tensor %s already has a buffer", t.name)
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
func (t *Tensor) Alloc(buf *Buffer, addr unsafe.Pointer) (err error) {
	defer placed(&err, "tensor_alloc", at{t: t, buf: buf})
	if buf == nil {
		return fmt.Errorf("ggml: tensor %s: alloc in a nil buffer", t.name)
	}
	c := t.ctx
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.freed {
		return fmt.Errorf("ggml: alloc of tensor %s: %w: its context was freed", t.name, ErrClosed)
	}
	if err := buf.hold(); err != nil {
		return fmt.Errorf("ggml: alloc of tensor %s: %w", t.name, err)
	}
	defer buf.release()
	if t.c.Buffer != 0 || t.c.Data != nil || t.c.ViewSrc != nil {
		return fmt.Errorf("ggml: tensor %s is already allocated", t.name)
	}
	lib := t.rt.lib
	base, size := uintptr(lib.BufferGetBase(buf.h)), uint64(lib.BufferGetSize(buf.h))
	need := uint64(lib.BufferGetAllocSize(buf.h, t.c))
	a := uintptr(addr)
	if base == 0 || a < base || uint64(a-base)+need > size {
		return fmt.Errorf("ggml: tensor %s (%d bytes at %#x) does not fit buffer %s [%#x, +%d)", t.name, need, a, t.rt.RPCName(lib.BufferName(buf.h)), base, size)
	}
	if st := lib.TensorAlloc(buf.h, t.c, addr); st != 0 {
		return fmt.Errorf("ggml: tensor %s: tensor_alloc failed with status %d", t.name, st)
	}
	c.owners[t.c] = buf
	return nil
}

// checkRange refuses, with the tensor held, an access outside its bytes or
// to a tensor with no memory.
func (t *Tensor) checkRange(what string, offset, size uint64) error {
	buf := t.c.Buffer
	if t.c.ViewSrc != nil {
		buf = t.c.ViewSrc.Buffer
	}
	if buf == 0 || t.c.Data == nil {
		return fmt.Errorf("ggml: %s of tensor %s: not allocated", what, t.name)
	}
	if n := t.NBytes(); offset > n || size > n-offset {
		return fmt.Errorf("ggml: %s of tensor %s: [%d, +%d) is outside its %d bytes", what, t.name, offset, size, n)
	}
	return nil
}

// Set copies src into the tensor at offset (ggml_backend_tensor_set), from
// host memory to wherever the tensor lives.
func (t *Tensor) Set(src []byte, offset uint64) error {
	if len(src) == 0 {
		return nil
	}
	return t.SetPtr(unsafe.Pointer(&src[0]), offset, uint64(len(src)))
}

// SetPtr is Set from native or mapped memory [src, src+size).
func (t *Tensor) SetPtr(src unsafe.Pointer, offset, size uint64) (err error) {
	defer placed(&err, "tensor_set", at{t: t, off: offset, size: size})
	if size == 0 {
		return nil
	}
	b, err := t.hold("set")
	if err != nil {
		return err
	}
	defer t.unhold(b)
	if err := t.checkRange("set", offset, size); err != nil {
		return err
	}
	t.rt.lib.TensorSet(t.c, src, uintptr(offset), uintptr(size))
	return nil
}

// Get copies len(dst) bytes of the tensor from offset into dst. A tensor
// in a buffer that stores data repacked gives an error wrapping
// ErrWriteOnly.
func (t *Tensor) Get(dst []byte, offset uint64) (err error) {
	defer placed(&err, "tensor_get", at{t: t, off: offset, size: uint64(len(dst))})
	if len(dst) == 0 {
		return nil
	}
	b, err := t.hold("get")
	if err != nil {
		return err
	}
	defer t.unhold(b)
	if err := t.checkRange("get", offset, uint64(len(dst))); err != nil {
		return err
	}
	if err := t.readable(); err != nil {
		return err
	}
	t.rt.lib.TensorGet(t.c, unsafe.Pointer(&dst[0]), uintptr(offset), uintptr(len(dst)))
	return nil
}

// readable refuses, with the tensor held, a read of a tensor in a buffer
// that stores data repacked.
func (t *Tensor) readable() error {
	if bt := (BufferType{t.rt, t.rt.lib.BufferGetType(t.c.Buffer)}); t.rt.writeOnly(bt) {
		return fmt.Errorf("ggml: tensor %s lives in a %s buffer: %w", t.name, bt.Name(), ErrWriteOnly)
	}
	return nil
}

// Bytes reads the whole tensor.
func (t *Tensor) Bytes() ([]byte, error) {
	b := make([]byte, t.NBytes())
	if err := t.Get(b, 0); err != nil {
		return nil, err
	}
	return b, nil
}
