package ggml

import (
	"fmt"
	"sync"
	"sync/atomic"
	"unsafe"

	"github.com/ggload/ggload/bindings"
	"github.com/ggload/ggload/ggml/internal/rpcrelay"
	"github.com/ggload/ggload/ggml/ops"
)

// BufferType is a kind of memory a device offers (ggml_backend_buffer_type_t).
// Buffer types are owned by their backend and never freed. The zero value is
// "no buffer type".
type BufferType struct {
	rt *Runtime
	h  bindings.Buft
}

// Handle is the native handle; equal handles are the same buffer type.
func (b BufferType) Handle() ops.Buft { return ops.Buft(b.h) }

// IsZero reports whether b is the zero value.
func (b BufferType) IsZero() bool { return b.h == 0 }

// buftInfo caches what never changes about a buffer type, so that hot
// paths (planning 100k tensors) do not pay a native call each time.
type buftInfo struct {
	name      string
	dev       bindings.Dev
	host      bool
	alignment uint64
	maxSize   uint64
}

func (b BufferType) info() *buftInfo {
	rt := b.rt
	rt.mu.Lock()
	bi, ok := rt.bufts[b.h]
	rt.mu.Unlock()
	if ok {
		return bi
	}
	lib := rt.lib
	bi = &buftInfo{
		name:      rt.RPCName(lib.BuftName(b.h)),
		dev:       lib.BuftGetDevice(b.h),
		host:      lib.BuftIsHost(b.h),
		alignment: uint64(lib.BuftGetAlignment(b.h)),
		maxSize:   uint64(lib.BuftGetMaxSize(b.h)),
	}
	rt.mu.Lock()
	rt.bufts[b.h] = bi
	rt.mu.Unlock()
	return bi
}

// Name is the buffer type's name ("CPU", "CPU_REPACK", "Vulkan0", "Vulkan_Host").
func (b BufferType) Name() string {
	if b.h == 0 {
		return ""
	}
	return b.info().name
}

func (b BufferType) String() string { return b.Name() }

// NativeName is the name ggml itself gives the buffer type: for an RPC
// device reached through ggload's guard it holds the guard's loopback
// address instead of the endpoint.
func (b BufferType) NativeName() string {
	if b.h == 0 {
		return ""
	}
	return b.rt.lib.BuftName(b.h)
}

// Alignment is the alignment of allocations in bytes.
func (b BufferType) Alignment() uint64 { return b.info().alignment }

// MaxSize is the largest buffer the type can allocate.
func (b BufferType) MaxSize() uint64 { return b.info().maxSize }

// IsHost reports whether buffers of this type are host memory the CPU can read.
func (b BufferType) IsHost() bool { return b.info().host }

// Device is the device the buffer type belongs to; ok is false for buffer
// types without one.
func (b BufferType) Device() (*Device, bool) {
	h := b.info().dev
	if h == 0 {
		return nil, false
	}
	return b.rt.device(h), true
}

// AllocSize is the number of bytes a buffer of this type needs for t
// (ggml_backend_buft_get_alloc_size: at least its size, with any padding the
// backend wants).
func (b BufferType) AllocSize(t *Tensor) uint64 {
	if b.rt.rpcRoom(b.guard()) != nil {
		return t.NBytes() // the native client could not connect (Err says so)
	}
	return uint64(b.rt.lib.BuftGetAllocSize(b.h, t.c))
}

// guard is the guard in front of the buffer type's RPC device, or nil.
func (b BufferType) guard() *rpcrelay.Guard {
	if b.h == 0 {
		return nil
	}
	if h := b.info().dev; h != 0 {
		return b.rt.guardOf(h)
	}
	return nil
}

// Alloc allocates a buffer of size bytes.
func (b BufferType) Alloc(size uint64) (_ *Buffer, err error) {
	defer placed(&err, "buft_alloc_buffer", at{buft: b, size: size})
	if b.h == 0 {
		return nil, fmt.Errorf("ggml: allocation from no buffer type")
	}
	if max := b.MaxSize(); size > max {
		return nil, fmt.Errorf("ggml: %d bytes exceed the %s maximum buffer size %d", size, b.Name(), max)
	}
	if err := b.rt.begin(); err != nil {
		return nil, err
	}
	defer b.rt.end()
	if err := b.rt.rpcRoom(b.guard()); err != nil {
		return nil, fmt.Errorf("ggml: %s: cannot allocate a buffer of %d bytes (%.2f MiB): %w", b.Name(), size, float64(size)/(1<<20), err)
	}
	h := b.rt.lib.BuftAllocBuffer(b.h, uintptr(size))
	if h == 0 {
		return nil, b.withDeviceErr(fmt.Errorf("ggml: %s: cannot allocate a buffer of %d bytes (%.2f MiB): %w", b.Name(), size, float64(size)/(1<<20), ErrOutOfMemory))
	}
	return newBuffer(b.rt, h), nil
}

// withDeviceErr adds to err the failure of the RPC server behind the buffer
// type's device, the reason its guard refused an allocation.
func (b BufferType) withDeviceErr(err error) error {
	if d, ok := b.Device(); ok {
		if derr := d.Err(); derr != nil {
			return fmt.Errorf("%w: %w", err, derr)
		}
	}
	return err
}

// dummyBuffer allocates the zero-size buffer llama.cpp uses to tell
// supports_op which buffer type a weight would live in.
func (b BufferType) dummyBuffer() (*Buffer, error) {
	if b.h == 0 {
		return nil, fmt.Errorf("ggml: dummy buffer of no buffer type")
	}
	if err := b.rt.begin(); err != nil {
		return nil, err
	}
	defer b.rt.end()
	h := b.rt.lib.BuftAllocBuffer(b.h, 0)
	if h == 0 {
		return nil, b.withDeviceErr(fmt.Errorf("ggml: %s: cannot allocate a zero-size buffer", b.Name()))
	}
	return newBuffer(b.rt, h), nil
}

// Usage tells a scheduler what a buffer holds.
type Usage int32

// Buffer usages.
const (
	UsageAny     Usage = bindings.BufferUsageAny
	UsageWeights Usage = bindings.BufferUsageWeights
	UsageCompute Usage = bindings.BufferUsageCompute
)

// Buffer is allocated device memory (ggml_backend_buffer_t). Free releases
// it; the tensors placed in it then answer ErrClosed. A Buffer is safe for
// concurrent use; Free waits for the reads and writes of its tensors in
// progress.
type Buffer struct {
	rt *Runtime
	h  bindings.Buffer

	mu     sync.RWMutex // write-held by Free
	freed  bool
	before []func() // run by Free just before the native free
}

// newBuffer wraps a buffer made while rt.begin holds the runtime open.
func newBuffer(rt *Runtime, h bindings.Buffer) *Buffer {
	liveBuffers.Add(1)
	handles.add(h, true)
	b := &Buffer{rt: rt, h: h}
	rt.keep(b)
	return b
}

// handles are the native buffers alive in the process: those of Buffers,
// and the memory of schedulers, which graphs may use.
var handles = handleSet{m: map[bindings.Buffer][2]int{}}

type handleSet struct {
	mu sync.Mutex
	m  map[bindings.Buffer][2]int // [Buffers, schedulers] holding the handle
}

func (s *handleSet) add(h bindings.Buffer, buffer bool) { s.change(h, buffer, 1) }

func (s *handleSet) remove(h bindings.Buffer, buffer bool) { s.change(h, buffer, -1) }

func (s *handleSet) change(h bindings.Buffer, buffer bool, d int) {
	i := 1
	if buffer {
		i = 0
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	n := s.m[h]
	n[i] += d
	if n == [2]int{} {
		delete(s.m, h)
	} else {
		s.m[h] = n
	}
}

// buffer reports whether h is a live Buffer's.
func (s *handleSet) buffer(h bindings.Buffer) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.m[h][0] > 0
}

// live reports whether h is alive at all.
func (s *handleSet) live(h bindings.Buffer) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	_, ok := s.m[h]
	return ok
}

// liveBuffers counts buffers made through this package and not yet freed.
var liveBuffers atomic.Int64

// LiveBuffers is how many buffers made through this package, in the whole
// process, are not freed yet: a program (and ggload's tests) can check
// that a load that failed or was cancelled, and every model closed, left
// none behind.
func LiveBuffers() int64 { return liveBuffers.Load() }

// hold keeps the buffer from being freed until release; it fails once the
// buffer is freed.
func (b *Buffer) hold() error {
	b.mu.RLock()
	if b.freed {
		b.mu.RUnlock()
		return fmt.Errorf("%w: buffer freed", ErrClosed)
	}
	return nil
}

func (b *Buffer) release() { b.mu.RUnlock() }

// Handle is the native handle (0 once freed).
func (b *Buffer) Handle() ops.Buffer {
	if b.hold() != nil {
		return 0
	}
	defer b.release()
	return ops.Buffer(b.h)
}

// Name is the buffer's name ("CPU", "CPU_Mapped", "Vulkan0", ...; "" once
// freed).
func (b *Buffer) Name() string {
	if b.hold() != nil {
		return ""
	}
	defer b.release()
	return b.rt.RPCName(b.rt.lib.BufferName(b.h))
}

// Base is the start of the buffer in its device's address space. For host
// buffers it is a host address; it is nil for buffers without one and once
// freed.
func (b *Buffer) Base() unsafe.Pointer {
	if b.hold() != nil {
		return nil
	}
	defer b.release()
	return b.rt.lib.BufferGetBase(b.h)
}

// Size is the buffer size in bytes (0 once freed).
func (b *Buffer) Size() uint64 {
	if b.hold() != nil {
		return 0
	}
	defer b.release()
	return uint64(b.rt.lib.BufferGetSize(b.h))
}

// IsHost reports whether the buffer is host memory.
func (b *Buffer) IsHost() bool {
	if b.hold() != nil {
		return false
	}
	defer b.release()
	return b.rt.lib.BufferIsHost(b.h)
}

// Type is the buffer's buffer type (the zero BufferType once freed).
func (b *Buffer) Type() BufferType {
	if b.hold() != nil {
		return BufferType{}
	}
	defer b.release()
	return BufferType{b.rt, b.rt.lib.BufferGetType(b.h)}
}

// SetUsage marks what the buffer holds.
func (b *Buffer) SetUsage(u Usage) (err error) {
	defer placed(&err, "buffer_set_usage", at{buf: b})
	if err := b.hold(); err != nil {
		return err
	}
	defer b.release()
	b.rt.lib.BufferSetUsage(b.h, int32(u))
	return nil
}

// Usage returns what the buffer was marked to hold.
func (b *Buffer) Usage() Usage {
	if b.hold() != nil {
		return UsageAny
	}
	defer b.release()
	return Usage(b.rt.lib.BufferGetUsage(b.h))
}

// Clear sets every byte of the buffer to v.
func (b *Buffer) Clear(v byte) (err error) {
	defer placed(&err, "buffer_clear", at{buf: b})
	if err := b.hold(); err != nil {
		return err
	}
	defer b.release()
	b.rt.lib.BufferClear(b.h, v)
	return nil
}

// Contains reports whether [p, p+n) lies inside the buffer's host range.
func (b *Buffer) Contains(p unsafe.Pointer, n uint64) bool {
	if b.hold() != nil {
		return false
	}
	defer b.release()
	base := uintptr(b.rt.lib.BufferGetBase(b.h))
	if base == 0 || p == nil {
		return false
	}
	a := uintptr(p)
	return a >= base && uint64(a-base)+n <= uint64(b.rt.lib.BufferGetSize(b.h))
}

// BeforeFree has fn run once, by whichever Free frees the buffer (its
// own, or the runtime's Close), just before the native free: while the
// memory is still the buffer's, with no read or write of its tensors in
// progress. It fails with ErrClosed once the buffer is freed.
func (b *Buffer) BeforeFree(fn func()) error {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.freed {
		return fmt.Errorf("%w: buffer freed", ErrClosed)
	}
	b.before = append(b.before, fn)
	return nil
}

// Free releases the buffer once it is not in use; later calls do nothing.
func (b *Buffer) Free() {
	if b == nil {
		return
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.freed {
		return
	}
	b.freed = true
	for _, fn := range b.before {
		fn()
	}
	b.before = nil
	liveBuffers.Add(-1)
	handles.remove(b.h, true)
	b.rt.lib.BufferFree(b.h)
	b.rt.drop(b)
}

// Freed reports whether Free was called.
func (b *Buffer) Freed() bool {
	b.mu.RLock()
	defer b.mu.RUnlock()
	return b.freed
}

// AllocSlack is how many bytes the buffer type's backend adds to every
// allocation beyond the size asked for (the Vulkan host type adds 32, most
// add none), learned once per buffer type from a small real allocation.
func (b BufferType) AllocSlack() (_ uint64, err error) {
	defer placed(&err, "buft_alloc_buffer", at{buft: b})
	b.rt.mu.Lock()
	if s, ok := b.rt.slack[b.h]; ok {
		b.rt.mu.Unlock()
		return s, nil
	}
	b.rt.mu.Unlock()
	ask := max(b.Alignment(), 1)
	buf, err := b.Alloc(ask)
	if err != nil {
		return 0, err
	}
	got := buf.Size()
	buf.Free()
	if got == 0 {
		return 0, fmt.Errorf("%w: buffer type %s", ErrClosed, b.Name())
	}
	var s uint64
	if got > ask {
		s = got - ask
	}
	b.rt.mu.Lock()
	b.rt.slack[b.h] = s
	b.rt.mu.Unlock()
	return s, nil
}
