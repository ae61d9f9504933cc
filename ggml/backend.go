package ggml

import (
	"fmt"
	"sync"
	"unsafe"

	"github.com/ggload/ggload/bindings"
)

// Backend is an execution stream on a device (ggml_backend_t).
type Backend struct {
	rt  *Runtime
	h   bindings.Backend
	dev *Device

	once sync.Once
}

// Name is the backend's name.
func (b *Backend) Name() string { return b.rt.RPCName(b.rt.lib.BackendName(b.h)) }

// Device is the device the backend runs on.
func (b *Backend) Device() *Device { return b.dev }

// Synchronize waits for all queued work on the backend.
func (b *Backend) Synchronize() { b.rt.lib.BackendSynchronize(b.h) }

// Free releases the backend; later calls do nothing.
func (b *Backend) Free() {
	if b == nil {
		return
	}
	b.once.Do(func() { b.rt.lib.BackendFree(b.h) })
}

// SetTensorAsync queues a copy of size bytes from host memory src into t at
// offset. src must stay valid and unchanged until the copy is known to be
// done (an event recorded after it has completed, or Synchronize): use
// pinned host buffers, never Go memory.
func (b *Backend) SetTensorAsync(t *Tensor, src unsafe.Pointer, offset, size uint64) error {
	if err := t.checkRange("async set", offset, size); err != nil {
		return err
	}
	if src == nil && size > 0 {
		return fmt.Errorf("ggml: async set of %s: nil source", t.Name())
	}
	b.rt.lib.TensorSetAsync(b.h, t.c, src, uintptr(offset), uintptr(size))
	return nil
}

// Event marks a point in a backend's stream (ggml_backend_event_t).
type Event struct {
	rt *Runtime
	h  bindings.Event

	once sync.Once
}

// Record places the event after the work queued so far on b.
func (e *Event) Record(b *Backend) { e.rt.lib.EventRecord(e.h, b.h) }

// Synchronize waits until the work before the last Record has completed.
func (e *Event) Synchronize() { e.rt.lib.EventSynchronize(e.h) }

// Free releases the event; later calls do nothing.
func (e *Event) Free() {
	if e == nil {
		return
	}
	e.once.Do(func() { e.rt.lib.EventFree(e.h) })
}
