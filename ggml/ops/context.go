package ops

import (
	"runtime"
	"unsafe"

	"github.com/ggload/ggload/bindings"
)

// Context is a ggml context that allocates no tensor data (no_alloc), its
// memory for tensor and graph objects taken from Go's heap: contexts of
// graphs are made and freed many times, and native allocations this
// large, freed, would raise glibc's mmap threshold for the process.
type Context struct {
	h    bindings.Context
	size uintptr // ggml_get_mem_size
	buf  []byte
	pin  runtime.Pinner
}

// NewContext makes a context of size bytes for objects (tensors, graphs).
func (l *Lib) NewContext(size uintptr) *Context {
	c := &Context{buf: make([]byte, size)}
	c.pin.Pin(&c.buf[0])
	c.h = l.b.Init(bindings.InitParams{MemSize: size, MemBuffer: unsafe.Pointer(&c.buf[0]), NoAlloc: true})
	if c.h == 0 {
		c.pin.Unpin()
		return nil
	}
	c.size = l.b.GetMemSize(c.h)
	return c
}

// Free frees the context and every tensor and graph made in it; a second
// call does nothing.
func (l *Lib) Free(c *Context) {
	if c == nil || c.h == 0 {
		return
	}
	l.b.Free(c.h)
	c.h = 0
	c.pin.Unpin()
	c.buf = nil
}

// room checks that the context has room for n more tensors: ggml_new_object
// aborts when it has not.
func (l *Lib) room(op string, c *Context, n int) error {
	return assert(op, l.b.UsedMem(c.h)+uintptr(n)*l.overhead <= c.size, "obj_new (not enough space in the context's memory pool)")
}

// Room reports whether the context has room for n more tensors.
func (l *Lib) Room(c *Context, n int) bool { return l.room("", c, n) == nil }

// NewTensor is ggml_new_tensor of nd dimensions (1 to 4) of ne.
func (l *Lib) NewTensor(c *Context, typ int32, nd int, ne [4]int64) (*Tensor, error) {
	const op = "ggml_new_tensor"
	if err := l.room(op, c, 1); err != nil {
		return nil, err
	}
	for i := 0; i < nd; i++ {
		if err := assert(op, ne[i] >= 0, "ne >= 0"); err != nil {
			return nil, err
		}
	}
	if err := asserts(op, check{typ >= 0 && typ < TypeCount, "type >= 0 && type < GGML_TYPE_COUNT"},
		check{nd >= 1 && nd <= 4, "n_dims >= 1 && n_dims <= GGML_MAX_DIMS"}); err != nil {
		return nil, err
	}
	return wrap(l.b.NewTensor(c.h, typ, int32(nd), &ne[0])), nil
}

// SetName is ggml_set_name (ggml keeps the first 63 bytes).
func (l *Lib) SetName(t *Tensor, name string) *Tensor { return wrap(l.b.SetName(t.c(), name)) }

// SetInput is ggml_set_input.
func (l *Lib) SetInput(t *Tensor) { l.b.SetInput(t.c()) }

// SetOutput is ggml_set_output.
func (l *Lib) SetOutput(t *Tensor) { l.b.SetOutput(t.c()) }
