package ops

import (
	"runtime"
	"slices"
	"sync"
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
	c := &Context{buf: l.pool.get(size)}
	c.pin.Pin(&c.buf[0])
	c.h = l.b.Init(bindings.InitParams{MemSize: size, MemBuffer: unsafe.Pointer(&c.buf[0]), NoAlloc: true})
	if c.h == 0 {
		c.pin.Unpin()
		l.pool.put(c.buf)
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
	l.pool.put(c.buf)
	c.buf = nil
}

// bufPool keeps the memory of freed contexts for the next ones, as
// llama.cpp keeps a graph's metadata buffer from one build to the next:
// a graph's context is megabytes, made for every graph built, and fresh
// memory of that size costs more to clear and collect than the build
// itself. ggml initializes every object it makes in a context, so a
// buffer is handed on as it was left.
type bufPool struct {
	mu    sync.Mutex
	bufs  [][]byte
	bytes int
}

// The pool keeps buffers of at least poolMin bytes, at most poolBufs of
// them and poolBytes in all.
const (
	poolMin   = 64 << 10
	poolBufs  = 4
	poolBytes = 64 << 20
)

// get is a buffer of size bytes: the smallest pooled one that holds
// them, or a new one.
func (p *bufPool) get(size uintptr) []byte {
	if size >= poolMin {
		p.mu.Lock()
		best := -1
		for i, b := range p.bufs {
			if uintptr(cap(b)) >= size && (best < 0 || cap(b) < cap(p.bufs[best])) {
				best = i
			}
		}
		if best >= 0 {
			b := p.bufs[best]
			p.bufs = slices.Delete(p.bufs, best, best+1)
			p.bytes -= cap(b)
			p.mu.Unlock()
			return b[:size]
		}
		p.mu.Unlock()
	}
	return make([]byte, size)
}

// put keeps b for a later context, dropping the smallest buffers when the
// pool is full.
func (p *bufPool) put(b []byte) {
	if cap(b) < poolMin || cap(b) > poolBytes {
		return
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	p.bufs = append(p.bufs, b[:cap(b)])
	p.bytes += cap(b)
	for len(p.bufs) > poolBufs || p.bytes > poolBytes {
		small := 0
		for i, o := range p.bufs {
			if cap(o) < cap(p.bufs[small]) {
				small = i
			}
		}
		p.bytes -= cap(p.bufs[small])
		p.bufs = slices.Delete(p.bufs, small, small+1)
	}
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

// Unallocate leaves the tensors of c that a graph allocator placed in a
// compute buffer (ggml_gallocr's) without a buffer and data, as they
// were made: the graph they are in can be allocated again, the
// allocations of other graphs having reused that buffer since. Tensors
// in other buffers (weights, caches, views of them) keep theirs.
func (l *Lib) Unallocate(c *Context) {
	if c == nil || c.h == 0 {
		return
	}
	for t := l.b.GetFirstTensor(c.h); t != nil; t = l.b.GetNextTensor(c.h, t) {
		if t.Buffer != 0 && l.b.BufferGetUsage(t.Buffer) == bindings.BufferUsageCompute {
			t.Buffer, t.Data = 0, nil
		}
	}
}
