package ggml

import (
	"errors"
	"fmt"
	"sync"
	"unsafe"
	"weak"

	"github.com/ggload/ggload/bindings"
	"github.com/ggload/ggload/ggml/internal/rpcrelay"
	"github.com/ggload/ggload/ggml/ops"
)

// DeviceType is enum ggml_backend_dev_type.
type DeviceType int32

// Device types.
const (
	DeviceCPU   DeviceType = bindings.DevTypeCPU
	DeviceGPU   DeviceType = bindings.DevTypeGPU
	DeviceIGPU  DeviceType = bindings.DevTypeIGPU
	DeviceAccel DeviceType = bindings.DevTypeAccel
	DeviceMeta  DeviceType = bindings.DevTypeMeta
)

func (t DeviceType) String() string {
	switch t {
	case DeviceCPU:
		return "CPU"
	case DeviceGPU:
		return "GPU"
	case DeviceIGPU:
		return "IGPU"
	case DeviceAccel:
		return "ACCEL"
	case DeviceMeta:
		return "META"
	}
	return fmt.Sprintf("DeviceType(%d)", int32(t))
}

// Caps are a device's capabilities (struct ggml_backend_dev_caps).
type Caps struct {
	Async             bool `json:"async"`
	HostBuffer        bool `json:"host_buffer"`
	BufferFromHostPtr bool `json:"buffer_from_host_ptr"`
	Events            bool `json:"events"`
	MmapSupport       bool `json:"mmap_support"`
}

// Props are a device's properties (struct ggml_backend_dev_props).
type Props struct {
	Name        string     `json:"name"`
	Description string     `json:"description"`
	MemoryFree  uint64     `json:"memory_free"`
	MemoryTotal uint64     `json:"memory_total"`
	Type        DeviceType `json:"-"`
	DeviceID    string     `json:"device_id,omitempty"`
	Caps        Caps       `json:"caps"`
}

// Device is a backend device (ggml_backend_dev_t). Devices live as long as
// the process; they need no freeing.
type Device struct {
	rt   *Runtime
	h    bindings.Dev
	name string

	once     sync.Once
	typ      DeviceType
	regName  string
	buft     bindings.Buft
	hostBuft bindings.Buft
	id       string
	caps     Caps

	guard *rpcrelay.Guard         // set for RPC devices reached through a guard
	parts []*Device               // a meta device's devices (guarded by the runtime's devMu)
	split weak.Pointer[metaSplit] // a meta device's splitter
}

// fixed caches what never changes about a device.
func (d *Device) fixed() *Device {
	d.once.Do(func() {
		lib := d.rt.lib
		d.typ = DeviceType(lib.DevType(d.h))
		if reg := lib.DevBackendReg(d.h); reg != 0 {
			// a meta device belongs to no registry
			d.regName = lib.RegName(reg)
		}
		d.buft = lib.DevBufferType(d.h)
		d.hostBuft = lib.DevHostBufferType(d.h)
		p := d.Props()
		d.id, d.caps = p.DeviceID, p.Caps
	})
	return d
}

// Caps are the device's capabilities.
func (d *Device) Caps() Caps { return d.fixed().caps }

// DeviceID is the device's PCI id, or "" when it has none.
func (d *Device) DeviceID() string { return d.fixed().id }

// Handle returns the native handle (for tests and the conformance harness).
func (d *Device) Handle() ops.Dev { return ops.Dev(d.h) }

// Runtime is the runtime the device belongs to.
func (d *Device) Runtime() *Runtime { return d.rt }

// Name is the device name ("CPU", "Vulkan0", "RPC0", "CUDA0").
func (d *Device) Name() string { return d.name }

// Description is the device description (model name, or the RPC endpoint).
func (d *Device) Description() string { return d.rt.RPCName(d.rt.lib.DevDescription(d.h)) }

// Type is the device type.
func (d *Device) Type() DeviceType { return d.fixed().typ }

// Registry is the backend the device belongs to.
func (d *Device) Registry() Registry { return Registry{d.rt, d.rt.lib.DevBackendReg(d.h)} }

// IsRPC reports whether the device is served by ggml-rpc-server.
func (d *Device) IsRPC() bool { return d.fixed().regName == "RPC" }

// BackendName is the name of the device's backend ("CPU", "Vulkan", "RPC").
func (d *Device) BackendName() string { return d.fixed().regName }

// Props reads the device's properties.
func (d *Device) Props() Props {
	var p bindings.DevProps
	if d.rt.rpcRoom(d.guard) != nil {
		// no call: the native client could not connect (Err says so)
		return Props{Name: d.name, Description: d.Description(), Type: DeviceGPU}
	}
	d.rt.lib.DevGetProps(d.h, &p)
	return Props{
		Name:        bindings.GoString(p.Name),
		Description: d.rt.RPCName(bindings.GoString(p.Description)),
		MemoryFree:  uint64(p.MemoryFree),
		MemoryTotal: uint64(p.MemoryTotal),
		Type:        DeviceType(p.Type),
		DeviceID:    d.rt.RPCName(bindings.GoString(p.DeviceID)),
		Caps: Caps{
			Async:             p.Caps.Async,
			HostBuffer:        p.Caps.HostBuffer,
			BufferFromHostPtr: p.Caps.BufferFromHostPtr,
			Events:            p.Caps.Events,
			MmapSupport:       p.Caps.MmapSupport,
		},
	}
}

// Memory returns free and total memory in bytes.
func (d *Device) Memory() (free, total uint64) {
	var f, t uintptr
	if d.rt.rpcRoom(d.guard) != nil {
		return 0, 0 // the native client could not connect (Err says so)
	}
	d.rt.lib.DevMemory(d.h, &f, &t)
	return uint64(f), uint64(t)
}

// BufferType is the device's default buffer type.
func (d *Device) BufferType() BufferType { return BufferType{d.rt, d.fixed().buft} }

// HostBufferType is the device's pinned host buffer type, if it has one.
func (d *Device) HostBufferType() (BufferType, bool) {
	h := d.fixed().hostBuft
	return BufferType{d.rt, h}, h != 0
}

// ExtraBufferTypes are the additional buffer types the device's backend
// publishes (ggml_backend_dev_get_extra_bufts; the CPU's CPU_REPACK, ...).
func (d *Device) ExtraBufferTypes() []BufferType {
	fn, ok := bindings.Proc[func(bindings.Dev) unsafe.Pointer](d.rt.lib, d.rt.lib.DevBackendReg(d.h), "ggml_backend_dev_get_extra_bufts")
	if !ok {
		return nil
	}
	var out []BufferType
	for p := fn(d.h); p != nil; p = unsafe.Add(p, unsafe.Sizeof(uintptr(0))) {
		h := *(*bindings.Buft)(p)
		if h == 0 {
			break
		}
		out = append(out, BufferType{d.rt, h})
	}
	return out
}

// ErrNoSplitBufferType is returned when a device's backend has no row-split
// buffer type (llama.cpp: "device X does not support split buffers").
// It wraps errors.ErrUnsupported.
var ErrNoSplitBufferType = fmt.Errorf("device does not support split buffers: %w", errors.ErrUnsupported)

// SplitBufferType returns the backend's row-split buffer type for this
// device as main device (ggml_backend_split_buffer_type), with tensorSplit
// giving each device's share (nil for the backend's default).
func (d *Device) SplitBufferType(tensorSplit []float32) (_ BufferType, err error) {
	defer placed(&err, "split_buffer_type", at{dev: d})
	reg := d.rt.lib.DevBackendReg(d.h)
	fn, ok := bindings.Proc[func(int32, *float32) bindings.Buft](d.rt.lib, reg, "ggml_backend_split_buffer_type")
	if !ok {
		return BufferType{}, fmt.Errorf("%w: %s", ErrNoSplitBufferType, d.name)
	}
	idx := -1
	for i := uintptr(0); i < d.rt.lib.RegDevCount(reg); i++ {
		if d.rt.lib.RegDevGet(reg, i) == d.h {
			idx = int(i)
		}
	}
	if idx < 0 {
		return BufferType{}, fmt.Errorf("ggml: device %s not found in its backend registry", d.name)
	}
	// the native side reads up to GGML_CUDA_MAX_DEVICES (16) floats
	split := make([]float32, 16)
	copy(split, tensorSplit)
	h := fn(int32(idx), &split[0])
	if h == 0 {
		return BufferType{}, fmt.Errorf("%w: %s returned no split buffer type", ErrNoSplitBufferType, d.name)
	}
	return BufferType{d.rt, h}, nil
}

// SupportsBufferType reports whether the device can use buffers of b.
func (d *Device) SupportsBufferType(b BufferType) bool {
	return b.h != 0 && d.rt.lib.DevSupportsBuft(d.h, b.h)
}

// ErrOpNotReady is returned by SupportsOp for an op tensor that is not the
// result of an op.
var ErrOpNotReady = errors.New("tensor is not an op result")

// SupportsOp asks the device whether it can compute op (a tensor made by one
// of Context's op constructors). For a weight whose buffer type matters, see
// SupportsWeightOp.
func (d *Device) SupportsOp(op *Tensor) (_ bool, err error) {
	defer placed(&err, "dev_supports_op", at{dev: d, t: op})
	if op == nil || op.op == OpNone {
		return false, ErrOpNotReady
	}
	if err := op.ctx.hold(); err != nil {
		return false, fmt.Errorf("ggml: supports_op of %s: %w", op.name, err)
	}
	defer op.ctx.release()
	return d.supportsOp(op), nil
}

// supportsOp asks, with op's context held.
func (d *Device) supportsOp(op *Tensor) bool { return d.rt.lib.DevSupportsOp(d.h, op.c) }

// SupportsWeightOp is llama.cpp's weight_buft_supported question: can the
// device compute op (made by one of Context's op constructors) when its
// weight w lives in a buffer of type buft? w must be an unallocated tensor
// of op's context; it is given a zero-size buffer of buft for the
// question, as llama.cpp does, and none after.
func (d *Device) SupportsWeightOp(op, w *Tensor, buft BufferType) (_ bool, err error) {
	defer placed(&err, "dev_supports_op", at{dev: d, buft: buft, t: op})
	if op == nil || op.op == OpNone {
		return false, ErrOpNotReady
	}
	if w == nil || w.ctx != op.ctx {
		return false, fmt.Errorf("ggml: supports_op of %s: the weight must be a tensor of the op's context", op.name)
	}
	// the weight's buffer is set for the question: the context is written
	op.ctx.mu.Lock()
	defer op.ctx.mu.Unlock()
	if op.ctx.freed {
		return false, fmt.Errorf("ggml: supports_op of %s: %w: its context was freed", op.name, ErrClosed)
	}
	dummy, err := buft.dummyBuffer()
	if err != nil {
		return false, err
	}
	defer dummy.Free()
	if err := w.setProbeBuffer(dummy); err != nil {
		return false, err
	}
	defer w.clearProbeBuffer()
	return d.rt.lib.DevSupportsOp(d.h, op.c), nil
}

// NewBackend initialises a backend (stream) on the device.
func (d *Device) NewBackend() (_ *Backend, err error) {
	defer placed(&err, "dev_init", at{dev: d})
	if err := d.rt.begin(); err != nil {
		return nil, err
	}
	defer d.rt.end()
	if err := d.rt.rpcRoom(d.guard); err != nil {
		return nil, fmt.Errorf("ggml: cannot initialise a backend on device %s: %w", d.name, err)
	}
	h := d.rt.lib.DevInit(d.h, nil)
	if h == 0 {
		return nil, fmt.Errorf("ggml: cannot initialise a backend on device %s", d.name)
	}
	b := &Backend{rt: d.rt, h: h, dev: d}
	d.rt.keep(b)
	return b, nil
}

// KeepConnected keeps ggml's RPC client connected to the server of RPC
// device d until release is called; for a device of another backend it
// does nothing. The client holds a connection to a server only while a
// buffer or a backend of that server is alive, and otherwise connects
// anew (a thread, a TCP connection, a handshake, and through the guard a
// second connection) for every call: planning makes a dozen such calls.
// The pin's ggml-rpc-server serves one connection at a time, so a held
// connection keeps the server's other clients waiting: hold it for an
// operation, not for a program's life. Calling release again does
// nothing.
func (d *Device) KeepConnected() (release func(), err error) {
	if !d.IsRPC() {
		return func() {}, nil
	}
	b, err := d.NewBackend()
	if err != nil {
		return func() {}, err
	}
	return b.Free, nil
}

// NewEvent creates an event on the device (needs Caps.Events).
func (d *Device) NewEvent() (_ *Event, err error) {
	defer placed(&err, "event_new", at{dev: d})
	if !d.Caps().Events {
		return nil, fmt.Errorf("ggml: device %s does not support events: %w", d.name, errors.ErrUnsupported)
	}
	if err := d.rt.begin(); err != nil {
		return nil, err
	}
	defer d.rt.end()
	h := d.rt.lib.EventNew(d.h)
	if h == 0 {
		return nil, fmt.Errorf("ggml: cannot create an event on device %s", d.name)
	}
	e := &Event{rt: d.rt, h: h, dev: d}
	d.rt.keep(e)
	return e, nil
}

// HostPtrAlignment is the alignment ggml asks of memory a buffer is made
// over (TENSOR_ALIGNMENT).
const HostPtrAlignment = 32

// BufferFromHostPtr wraps host memory [p, p+size) as a buffer of the
// device's default type without copying (needs Caps.BufferFromHostPtr). The
// memory must outlive the buffer and be aligned to HostPtrAlignment.
// maxTensorSize is the largest tensor that will be placed in it.
func (d *Device) BufferFromHostPtr(p unsafe.Pointer, size, maxTensorSize uint64) (_ *Buffer, err error) {
	defer placed(&err, "dev_buffer_from_host_ptr", at{dev: d, size: size})
	if !d.Caps().BufferFromHostPtr {
		return nil, fmt.Errorf("ggml: device %s cannot create buffers from host memory: %w", d.name, errors.ErrUnsupported)
	}
	if p == nil || size == 0 {
		return nil, fmt.Errorf("ggml: buffer from host memory on %s: empty range", d.name)
	}
	if uintptr(p)%HostPtrAlignment != 0 {
		// the CPU backend asserts it
		return nil, fmt.Errorf("ggml: buffer from host memory on %s: %#x is not aligned to %d bytes", d.name, uintptr(p), HostPtrAlignment)
	}
	if err := d.rt.begin(); err != nil {
		return nil, err
	}
	defer d.rt.end()
	h := d.rt.lib.DevBufferFromHostPtr(d.h, p, uintptr(size), uintptr(maxTensorSize))
	if h == 0 {
		return nil, fmt.Errorf("ggml: device %s refused a %d-byte buffer from host memory", d.name, size)
	}
	return newBuffer(d.rt, h), nil
}

// SetNThreads sets the thread count of a backend that supports it (the CPU
// backend); it reports false when the backend has no such setting.
func (b *Backend) SetNThreads(n int) bool {
	fn, ok := bindings.Proc[func(bindings.Backend, int32)](b.rt.lib, b.rt.lib.DevBackendReg(b.dev.h), "ggml_backend_set_n_threads")
	if !ok || n <= 0 || b.hold() != nil {
		return false
	}
	defer b.release()
	fn(b.h, int32(n))
	return true
}

// IsNUMA reports whether the CPU backend detected more than one NUMA node.
func (rt *Runtime) IsNUMA() bool {
	cpu := rt.CPUDevice()
	if cpu == nil {
		return false
	}
	fn, ok := bindings.Proc[func() bool](rt.lib, rt.lib.DevBackendReg(cpu.h), "ggml_backend_cpu_is_numa")
	return ok && fn()
}

// HostPtrBufferName is the name of the buffers BufferFromHostPtr makes on
// this device ("CPU_Mapped" on the CPU), found by making one over a page.
func (d *Device) HostPtrBufferName() (_ string, err error) {
	defer placed(&err, "dev_buffer_from_host_ptr", at{dev: d})
	d.rt.mu.Lock()
	if name, ok := d.rt.mappedNames[d.h]; ok {
		d.rt.mu.Unlock()
		return name, nil
	}
	d.rt.mu.Unlock()
	page, err := anonPage()
	if err != nil {
		return "", err
	}
	defer freePage(page)
	buf, err := d.BufferFromHostPtr(unsafe.Pointer(&page[0]), uint64(len(page)), uint64(len(page)))
	if err != nil {
		return "", err
	}
	name := buf.Name()
	buf.Free()
	d.rt.mu.Lock()
	d.rt.mappedNames[d.h] = name
	d.rt.mu.Unlock()
	return name, nil
}
