package ops

import (
	"unsafe"

	"github.com/ggload/ggload/bindings"
)

// Device types (enum ggml_backend_dev_type).
const (
	DevTypeCPU   = bindings.DevTypeCPU
	DevTypeGPU   = bindings.DevTypeGPU
	DevTypeIGPU  = bindings.DevTypeIGPU
	DevTypeAccel = bindings.DevTypeAccel
	DevTypeMeta  = bindings.DevTypeMeta
)

// BufferUsageWeights is GGML_BACKEND_BUFFER_USAGE_WEIGHTS.
const BufferUsageWeights = bindings.BufferUsageWeights

// Devices, as ggml's registry has them.
func (l *Lib) DevCount() int                { return int(l.b.DevCount()) }
func (l *Lib) DevGet(i int) Dev             { return Dev(l.b.DevGet(uintptr(i))) }
func (l *Lib) DevByType(typ int32) Dev      { return Dev(l.b.DevByType(typ)) }
func (l *Lib) DevType(d Dev) int32          { return l.b.DevType(bindings.Dev(d)) }
func (l *Lib) DevName(d Dev) string         { return l.b.DevName(bindings.Dev(d)) }
func (l *Lib) DevHostBufferType(d Dev) Buft { return Buft(l.b.DevHostBufferType(bindings.Dev(d))) }
func (l *Lib) DevBufferType(d Dev) Buft     { return Buft(l.b.DevBufferType(bindings.Dev(d))) }

// DevRegName is the name of the device's backend registry ("" without
// one).
func (l *Lib) DevRegName(d Dev) string {
	if reg := l.b.DevBackendReg(bindings.Dev(d)); reg != 0 {
		return l.b.RegName(reg)
	}
	return ""
}

// DevAsyncEvents reports whether the device has async compute and events
// (what pipeline parallelism needs of it).
func (l *Lib) DevAsyncEvents(d Dev) bool {
	var props bindings.DevProps
	l.b.DevGetProps(bindings.Dev(d), &props)
	return props.Caps.Async && props.Caps.Events
}

// DevSupportsOp is ggml_backend_dev_supports_op.
func (l *Lib) DevSupportsOp(d Dev, t *Tensor) bool { return l.b.DevSupportsOp(bindings.Dev(d), t.c()) }

// DevSupportsBuft is ggml_backend_dev_supports_buft.
func (l *Lib) DevSupportsBuft(d Dev, b Buft) bool {
	return l.b.DevSupportsBuft(bindings.Dev(d), bindings.Buft(b))
}

// BuftName is ggml_backend_buft_name.
func (l *Lib) BuftName(b Buft) string { return l.b.BuftName(bindings.Buft(b)) }

// DummyBuffer is a buffer of size zero of the buffer type, marked as
// holding weights if weights: what a tensor of a no_alloc load or cache is
// on, so that the scheduler assigns its ops by its buffer.
func (l *Lib) DummyBuffer(b Buft, weights bool) Buffer {
	buf := l.b.BuftAllocBuffer(bindings.Buft(b), 0)
	if buf != 0 && weights {
		l.b.BufferSetUsage(buf, BufferUsageWeights)
	}
	return Buffer(buf)
}

// BufferFree is ggml_backend_buffer_free.
func (l *Lib) BufferFree(b Buffer) { l.b.BufferFree(bindings.Buffer(b)) }

// BufferIsHost is ggml_backend_buffer_is_host: whether the buffer's
// memory is the host's (its tensors' data can be written directly).
func (l *Lib) BufferIsHost(b Buffer) bool { return l.b.BufferIsHost(bindings.Buffer(b)) }

// BufferType is the buffer type of the buffer a tensor (or the tensor it
// views) is on; zero when none.
func (l *Lib) BufferType(t *Tensor) Buft {
	switch {
	case t.Buffer != 0:
		return Buft(l.b.BufferGetType(t.Buffer))
	case t.ViewSrc != nil && t.ViewSrc.Buffer != 0:
		return Buft(l.b.BufferGetType(t.ViewSrc.Buffer))
	}
	return 0
}

// Place puts t on buffer b (a dummy buffer: no data).
func Place(t *Tensor, b Buffer) { t.Buffer = bindings.Buffer(b) }

// Backends.
func (l *Lib) BackendInit(d Dev) Backend    { return Backend(l.b.DevInit(bindings.Dev(d), nil)) }
func (l *Lib) BackendFree(be Backend)       { l.b.BackendFree(bindings.Backend(be)) }
func (l *Lib) BackendDevice(be Backend) Dev { return Dev(l.b.BackendGetDevice(bindings.Backend(be))) }
func (l *Lib) BackendDefaultBuft(be Backend) Buft {
	return Buft(l.b.BackendDefaultBuft(bindings.Backend(be)))
}
func (l *Lib) SchedFree(s Sched)                 { l.b.SchedFree(bindings.Sched(s)) }
func (l *Lib) SchedReset(s Sched)                { l.b.SchedReset(bindings.Sched(s)) }
func (l *Lib) SchedSplits(s Sched) int           { return int(l.b.SchedGetNSplits(bindings.Sched(s))) }
func (l *Lib) SchedSplitGraph(s Sched, g *Graph) { l.b.SchedSplitGraph(bindings.Sched(s), g.h) }
func (l *Lib) SchedTensorBackend(s Sched, t *Tensor) Backend {
	return Backend(l.b.SchedGetTensorBackend(bindings.Sched(s), t.c()))
}
func (l *Lib) SchedSetTensorBackend(s Sched, t *Tensor, be Backend) {
	l.b.SchedSetTensorBackend(bindings.Sched(s), t.c(), bindings.Backend(be))
}

// SchedNew is ggml_backend_sched_new over the backends and their buffer
// types (one each, at least one), for graphs of up to graphSize nodes.
func (l *Lib) SchedNew(bes []Backend, bufts []Buft, graphSize int, parallel, opOffload bool) Sched {
	if len(bes) == 0 || len(bufts) != len(bes) {
		return 0
	}
	cb := make([]bindings.Backend, len(bes))
	cf := make([]bindings.Buft, len(bes))
	for i := range bes {
		cb[i], cf[i] = bindings.Backend(bes[i]), bindings.Buft(bufts[i])
	}
	return Sched(l.b.SchedNew(&cb[0], &cf[0], int32(len(bes)), uintptr(graphSize), parallel, opOffload))
}

// SchedReserveSize is ggml_backend_sched_reserve_size: each backend's
// compute buffer for the graph, in the scheduler's order of backends.
func (l *Lib) SchedReserveSize(s Sched, g *Graph, n int) []uintptr {
	sizes := make([]uintptr, n)
	if n > 0 {
		l.b.SchedReserveSize(bindings.Sched(s), g.h, &sizes[0])
	}
	return sizes
}

// SchedReserve is ggml_backend_sched_reserve: each backend's compute
// buffer allocated for the graph (grown, never shrunk).
func (l *Lib) SchedReserve(s Sched, g *Graph) bool { return l.b.SchedReserve(bindings.Sched(s), g.h) }

// SchedBufferSize is the size of the backend's compute buffer.
func (l *Lib) SchedBufferSize(s Sched, be Backend) uintptr {
	return l.b.SchedGetBufferSize(bindings.Sched(s), bindings.Backend(be))
}

// SchedAllocGraph allocates the graph's tensors in the compute buffers.
func (l *Lib) SchedAllocGraph(s Sched, g *Graph) bool {
	return l.b.SchedAllocGraph(bindings.Sched(s), g.h)
}

// SchedGraphCompute computes the graph, synchronously: its ggml_status.
func (l *Lib) SchedGraphCompute(s Sched, g *Graph) int32 {
	return l.b.SchedGraphCompute(bindings.Sched(s), g.h)
}

// TensorSet copies len(data) bytes into the tensor at offset, from
// wherever it lives; the caller has checked the range.
func (l *Lib) TensorSet(t *Tensor, data []byte, offset uintptr) {
	if len(data) > 0 {
		l.b.TensorSet(t.c(), unsafe.Pointer(&data[0]), offset, uintptr(len(data)))
	}
}

// TensorGet copies len(data) bytes out of the tensor at offset.
func (l *Lib) TensorGet(t *Tensor, data []byte, offset uintptr) {
	if len(data) > 0 {
		l.b.TensorGet(t.c(), unsafe.Pointer(&data[0]), offset, uintptr(len(data)))
	}
}

// BackendSetNThreads sets the thread count of a backend that has one (the
// CPU's, through its registry's ggml_backend_set_n_threads); false where
// it has none.
func (l *Lib) BackendSetNThreads(be Backend, n int) bool {
	reg := l.b.DevBackendReg(l.b.BackendGetDevice(bindings.Backend(be)))
	fn, ok := bindings.Proc[func(bindings.Backend, int32)](l.b, reg, "ggml_backend_set_n_threads")
	if !ok || n <= 0 {
		return false
	}
	fn(bindings.Backend(be), int32(n))
	return true
}

// TensorFloats copies n float32 values out of an F32 tensor from element
// off; the caller has checked the range.
func (l *Lib) TensorFloats(t *Tensor, off, n int) []float32 {
	out := make([]float32, n)
	l.ReadFloats(t, off, out)
	return out
}

// ReadFloats copies len(dst) floats of the f32 tensor, from element off,
// into dst (the caller's memory: nothing is allocated).
func (l *Lib) ReadFloats(t *Tensor, off int, dst []float32) {
	if len(dst) > 0 {
		l.b.TensorGet(t.c(), unsafe.Pointer(&dst[0]), uintptr(4*off), uintptr(4*len(dst)))
	}
}
