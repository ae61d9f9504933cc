package ggml

import (
	"fmt"
	"sync"
	"sync/atomic"
	"unsafe"

	"github.com/ggload/ggload/bindings"
)

// Backend is an execution stream on a device (ggml_backend_t). Queueing
// work on one Backend from several goroutines is not safe; Free (or the
// Runtime's Close) waits for calls in progress, and later calls answer
// ErrClosed.
type Backend struct {
	rt  *Runtime
	h   bindings.Backend
	dev *Device

	mu    sync.RWMutex
	freed atomic.Bool
}

// hold keeps the backend from being freed until release.
func (b *Backend) hold() error {
	b.mu.RLock()
	if b.freed.Load() {
		b.mu.RUnlock()
		return fmt.Errorf("%w: backend on %s freed", ErrClosed, b.dev.Name())
	}
	return nil
}

func (b *Backend) release() { b.mu.RUnlock() }

// Name is the backend's name ("" once freed).
func (b *Backend) Name() string {
	if b.hold() != nil {
		return ""
	}
	defer b.release()
	return b.rt.RPCName(b.rt.lib.BackendName(b.h))
}

// Device is the device the backend runs on.
func (b *Backend) Device() *Device { return b.dev }

// Synchronize waits for all queued work on the backend.
func (b *Backend) Synchronize() (err error) {
	defer placed(&err, "synchronize", at{dev: b.dev})
	if err := b.hold(); err != nil {
		return err
	}
	defer b.release()
	b.rt.lib.BackendSynchronize(b.h)
	return nil
}

// Free releases the backend; later calls do nothing.
func (b *Backend) Free() {
	if b == nil {
		return
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.freed.Swap(true) {
		return
	}
	b.rt.lib.BackendFree(b.h)
	b.rt.drop(b)
}

// SetTensorAsync queues a copy of size bytes from host memory src into t at
// offset. src must stay valid and unchanged until the copy is known to be
// done (an event recorded after it has completed, or Synchronize): use
// pinned host buffers, never Go memory. The tensor's buffer must not be
// freed before then either.
func (b *Backend) SetTensorAsync(t *Tensor, src unsafe.Pointer, offset, size uint64) (err error) {
	defer placed(&err, "tensor_set_async", at{dev: b.dev, t: t, off: offset, size: size})
	return b.async("async set", false, t, src, offset, size, func() {
		b.rt.lib.TensorSetAsync(b.h, t.c, src, uintptr(offset), uintptr(size))
	})
}

// GetTensorAsync queues a copy of size bytes of t at offset into host
// memory dst. dst must stay valid, and untouched, until the copy is known
// to be done (an event recorded after it has completed, or Synchronize);
// Go memory must be pinned (runtime.Pinner) until then. A tensor in a
// buffer that stores data repacked gives an error wrapping ErrWriteOnly.
func (b *Backend) GetTensorAsync(t *Tensor, dst unsafe.Pointer, offset, size uint64) (err error) {
	defer placed(&err, "tensor_get_async", at{dev: b.dev, t: t, off: offset, size: size})
	return b.async("async get", true, t, dst, offset, size, func() {
		b.rt.lib.TensorGetAsync(b.h, t.c, dst, uintptr(offset), uintptr(size))
	})
}

// async checks an asynchronous copy of [offset, offset+size) of t to host
// memory p (read) or from it and queues it (queue), with the backend and
// the tensor held.
func (b *Backend) async(what string, read bool, t *Tensor, p unsafe.Pointer, offset, size uint64, queue func()) error {
	if err := b.hold(); err != nil {
		return err
	}
	defer b.release()
	buf, err := t.hold(what)
	if err != nil {
		return err
	}
	defer t.unhold(buf)
	if err := t.checkRange(what, offset, size); err != nil {
		return err
	}
	if err := b.ownBuffer(what, t); err != nil {
		return err
	}
	if p == nil && size > 0 {
		return fmt.Errorf("ggml: %s of %s: nil host memory", what, t.name)
	}
	if read {
		if err := t.readable(); err != nil {
			return err
		}
	}
	queue()
	return nil
}

// ownBuffer refuses, with t held, an asynchronous copy through b for a
// tensor outside the buffer type of b's device: GPU backends assert on it
// and an RPC backend would send it to its own server, not the tensor's. A
// CPU backend copies synchronously into any host buffer.
func (b *Backend) ownBuffer(what string, t *Tensor) error {
	if b.dev.Type() == DeviceCPU {
		return nil
	}
	buf := t.c.Buffer
	if t.c.ViewSrc != nil {
		buf = t.c.ViewSrc.Buffer
	}
	if h := b.rt.lib.BufferGetType(buf); h != b.dev.BufferType().h {
		return fmt.Errorf("ggml: %s of tensor %s through %s: it lives in a %s buffer, not in %s's own %s", what, t.name, b.dev.Name(), BufferType{b.rt, h}.Name(), b.dev.Name(), b.dev.BufferType().Name())
	}
	return nil
}

// Event marks a point in a backend's stream (ggml_backend_event_t). Free
// (or the Runtime's Close) waits for calls in progress; later calls answer
// ErrClosed.
type Event struct {
	rt  *Runtime
	h   bindings.Event
	dev *Device

	mu    sync.RWMutex
	freed bool
}

func (e *Event) hold() error {
	e.mu.RLock()
	if e.freed {
		e.mu.RUnlock()
		return fmt.Errorf("%w: event on %s freed", ErrClosed, e.dev.Name())
	}
	return nil
}

// Record places the event after the work queued so far on b.
func (e *Event) Record(b *Backend) (err error) {
	defer placed(&err, "event_record", at{dev: e.dev})
	if err := e.hold(); err != nil {
		return err
	}
	defer e.mu.RUnlock()
	if err := b.hold(); err != nil {
		return err
	}
	defer b.release()
	e.rt.lib.EventRecord(e.h, b.h)
	return nil
}

// Synchronize waits until the work before the last Record has completed.
func (e *Event) Synchronize() (err error) {
	defer placed(&err, "event_synchronize", at{dev: e.dev})
	if err := e.hold(); err != nil {
		return err
	}
	defer e.mu.RUnlock()
	e.rt.lib.EventSynchronize(e.h)
	return nil
}

// Free releases the event; later calls do nothing.
func (e *Event) Free() {
	if e == nil {
		return
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.freed {
		return
	}
	e.freed = true
	e.rt.lib.EventFree(e.h)
	e.rt.drop(e)
}
