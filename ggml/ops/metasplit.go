package ops

import (
	"sync"

	"github.com/ggload/ggload/bindings"
)

// MetaSplit is a split state as ggml's meta device holds it (struct
// ggml_backend_meta_split_state): Axis is the enum's value (0 to 3 a
// dimension, 10 mirrored, 11 partial); Nr has one repeat count per
// segment, Ne one length per segment and device, segment-major
// (Ne[s*n+j] is device j's length of segment s over n devices).
type MetaSplit struct {
	Axis int32
	Ne   []int64
	Nr   []uint32
}

// MetaStatic answers, for a tensor held in a static (weights or cache)
// buffer of a meta device, the split state the device's split-state
// callback gives it.
type MetaStatic func(t *Tensor) MetaSplit

// metaDevice is what the meta devices' registry keeps of one device.
type metaDevice struct {
	n      int
	static MetaStatic
}

// metaDevices holds, by device handle, each meta device's device count
// and split-state answers: the native device lives as long as the
// process, and so does its entry.
var metaDevices sync.Map // Dev → metaDevice

// RegisterMetaDevice records that d is a meta device over n devices whose
// static tensors static splits as its native callback does. Package ggml
// registers every meta device it makes.
func RegisterMetaDevice(d Dev, n int, static MetaStatic) {
	if d != 0 && n > 0 && static != nil {
		metaDevices.Store(d, metaDevice{n: n, static: static})
	}
}

// MetaDeviceOf is the device count and the static answers of meta device
// d; ok false where d was not registered.
func MetaDeviceOf(d Dev) (n int, static MetaStatic, ok bool) {
	v, ok := metaDevices.Load(d)
	if !ok {
		return 0, nil, false
	}
	md := v.(metaDevice)
	return md.n, md.static, true
}

// BufferUsage is ggml_backend_buffer_get_usage.
func (l *Lib) BufferUsage(b Buffer) int32 { return l.b.BufferGetUsage(bindings.Buffer(b)) }

// BufferDevice is the device of the buffer's type (zero for a zero
// buffer or a type without a device).
func (l *Lib) BufferDevice(b Buffer) Dev {
	if b == 0 {
		return 0
	}
	bt := l.b.BufferGetType(bindings.Buffer(b))
	if bt == 0 {
		return 0
	}
	return Dev(l.b.BuftGetDevice(bt))
}

// BufferUsageCompute is GGML_BACKEND_BUFFER_USAGE_COMPUTE.
const BufferUsageCompute = bindings.BufferUsageCompute
