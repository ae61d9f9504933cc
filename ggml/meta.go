package ggml

import (
	"errors"
	"fmt"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"unsafe"
	"weak"

	"github.com/ggload/ggload/bindings"
)

// SplitAxis is enum ggml_backend_meta_split_axis: how a meta device lays a
// tensor over its devices.
type SplitAxis int32

// Split axes.
const (
	SplitAxis0       SplitAxis = 0  // slices along dimension 0
	SplitAxis1       SplitAxis = 1  // slices along dimension 1
	SplitAxis2       SplitAxis = 2  // slices along dimension 2
	SplitAxis3       SplitAxis = 3  // slices along dimension 3
	SplitMirrored    SplitAxis = 10 // the whole tensor on every device
	SplitPartial     SplitAxis = 11 // every device holds a partial sum
	splitAxisUnknown SplitAxis = 99
)

func (a SplitAxis) String() string {
	switch {
	case a >= SplitAxis0 && a <= SplitAxis3:
		return fmt.Sprintf("axis %d", int32(a))
	case a == SplitMirrored:
		return "mirrored"
	case a == SplitPartial:
		return "partial"
	}
	return fmt.Sprintf("SplitAxis(%d)", int32(a))
}

// IsDim reports whether the axis is a tensor dimension (0 to 3).
func (a SplitAxis) IsDim() bool { return a >= SplitAxis0 && a <= SplitAxis3 }

// SplitSegment is one segment of a tensor split along a dimension: each
// device's length of it along the axis, the segment repeated Repeat times
// (a fused QKV matrix is a Q segment and a K/V segment repeated twice).
type SplitSegment struct {
	Lengths []int64 // one per device of the meta device
	Repeat  uint32
}

// SplitState is how a meta device holds one tensor (struct
// ggml_backend_meta_split_state). For a dimension axis, Segments are laid
// out along it in order; mirrored tensors have no segments; a partial
// tensor has one segment whose nonzero lengths mark the devices that
// contribute to the sum.
type SplitState struct {
	Axis     SplitAxis
	Segments []SplitSegment
}

// Share is device j's length along the split axis: its lengths of every
// segment, times the segment's repeats.
func (s SplitState) Share(j int) int64 {
	var n int64
	for _, sg := range s.Segments {
		if j < len(sg.Lengths) {
			n += sg.Lengths[j] * int64(sg.Repeat)
		}
	}
	return n
}

func (s SplitState) String() string {
	if len(s.Segments) == 0 {
		return s.Axis.String()
	}
	parts := make([]string, len(s.Segments))
	for i, sg := range s.Segments {
		parts[i] = fmt.Sprint(sg.Lengths)
		if sg.Repeat != 1 {
			parts[i] += fmt.Sprintf("x%d", sg.Repeat)
		}
	}
	return s.Axis.String() + " " + strings.Join(parts, " ")
}

// put writes s as the native struct for a meta device of n devices.
func (s SplitState) put(dst *bindings.SplitState, n int) {
	*dst = bindings.SplitState{Axis: int32(s.Axis), NSegments: 1}
	dst.Nr[0] = 1
	if s.Axis == SplitMirrored || len(s.Segments) == 0 {
		return
	}
	dst.NSegments = uint32(len(s.Segments))
	for i, sg := range s.Segments {
		dst.Nr[i] = sg.Repeat
		for j := 0; j < n && j < len(sg.Lengths); j++ {
			dst.Ne[i*n+j] = sg.Lengths[j]
		}
	}
}

// MetaMaxDevices is the most devices a meta device spans.
const MetaMaxDevices = bindings.MetaMaxDevices

// Splitter says how a meta device lays out the tensor of a name; ok false
// for a tensor it has no rule for, which the meta device then mirrors.
type Splitter func(name string) (s SplitState, ok bool)

// metaSplitters holds, by the user-data word the native meta device passes
// back, a weak pointer to the splitter of that device: the device lives as
// long as the process, its splitter as long as whoever made it keeps it.
var (
	metaSplitters sync.Map // uintptr → weak.Pointer[metaSplit]
	metaNext      atomic.Uintptr
	metaMu        sync.Mutex // ggml_backend_meta_device keeps an unguarded static map
	metaCallback  uintptr
)

type metaSplit struct {
	fn Splitter
	n  int
}

// MetaDeviceSupported reports whether meta devices can be made on this
// platform, and why not. The meta device's split-state callback returns a
// struct of 2 KiB by value: purego's callbacks return structs on Linux and
// macOS, amd64 and arm64 (through the result address the caller passes: a
// hidden first argument on amd64, register x8 on arm64); on Windows amd64
// the callback takes that hidden argument itself.
func MetaDeviceSupported() error {
	switch runtime.GOOS + "/" + runtime.GOARCH {
	case "linux/amd64", "linux/arm64", "darwin/amd64", "darwin/arm64", "windows/amd64":
		return nil
	}
	return fmt.Errorf("ggml: meta devices on %s/%s: the split-state callback returns a %d-byte struct by value, which Go callbacks cannot do there: %w",
		runtime.GOOS, runtime.GOARCH, unsafe.Sizeof(bindings.SplitState{}), errors.ErrUnsupported)
}

// metaSplitState is the meta devices' split-state callback.
func metaSplitState(t *bindings.Tensor, ud uintptr) bindings.SplitState {
	s := SplitState{Axis: SplitMirrored}
	n := 1
	if v, ok := metaSplitters.Load(ud); ok {
		if ms := v.(weak.Pointer[metaSplit]).Value(); ms != nil {
			n = ms.n
			name := bindings.GoString(&t.Name[0])
			if got, ok := ms.fn(name); ok {
				s = got
			}
		}
	}
	var c bindings.SplitState
	s.put(&c, n)
	return c
}

// metaCallbackFunc is the callback in the form this platform's purego
// takes.
func metaCallbackFunc() any {
	if runtime.GOOS == "windows" {
		// the Windows x64 ABI: the result's address in RCX, returned
		return func(ret *bindings.SplitState, t *bindings.Tensor, ud uintptr) uintptr {
			*ret = metaSplitState(t, ud)
			return uintptr(unsafe.Pointer(ret))
		}
	}
	return metaSplitState
}

// MetaDevice makes ggml's meta device over devs (ggml_backend_meta_device):
// one device whose buffers hold every tensor in slices over devs, as
// split says, for tensor parallelism. The device lives as long as the
// process; split is consulted for as long as the returned keep value is
// reachable: hold it as long as buffers of the device may be made or used.
func (rt *Runtime) MetaDevice(devs []*Device, split Splitter) (d *Device, keep any, err error) {
	if err := MetaDeviceSupported(); err != nil {
		return nil, nil, err
	}
	if len(devs) == 0 || len(devs) > bindings.MetaMaxDevices {
		return nil, nil, fmt.Errorf("ggml: a meta device spans 1 to %d devices, not %d", bindings.MetaMaxDevices, len(devs))
	}
	if split == nil {
		return nil, nil, fmt.Errorf("ggml: a meta device needs a splitter")
	}
	hs := make([]bindings.Dev, len(devs))
	seen := map[bindings.Dev]bool{}
	for i, x := range devs {
		switch {
		case x == nil || x.rt != rt:
			return nil, nil, fmt.Errorf("ggml: meta device: device %d is not of this runtime", i)
		case x.IsMeta():
			return nil, nil, fmt.Errorf("ggml: meta device: %s is a meta device itself", x.name)
		case seen[x.h]:
			return nil, nil, fmt.Errorf("ggml: meta device: %s is listed twice", x.name)
		}
		seen[x.h] = true
		hs[i] = x.h
	}
	if err := rt.begin(); err != nil {
		return nil, nil, err
	}
	defer rt.end()
	ms := &metaSplit{fn: split, n: len(devs)}
	id := metaNext.Add(1)
	metaSplitters.Store(id, weak.Make(ms))
	runtime.AddCleanup(ms, func(id uintptr) { metaSplitters.Delete(id) }, id)
	metaMu.Lock()
	if metaCallback == 0 {
		metaCallback = bindings.NewCallback(metaCallbackFunc())
	}
	h := rt.lib.MetaDevice(&hs[0], uintptr(len(hs)), metaCallback, id)
	metaMu.Unlock()
	if h == 0 {
		return nil, nil, fmt.Errorf("ggml: ggml_backend_meta_device made no device")
	}
	d = rt.device(h)
	rt.devMu.Lock()
	if d.parts == nil {
		d.parts = append([]*Device(nil), devs...)
	}
	rt.devMu.Unlock()
	return d, ms, nil
}

// IsMeta reports whether d is a meta device.
func (d *Device) IsMeta() bool { return d.Type() == DeviceMeta }

// Parts are the devices a meta device spans, in its order; nil for other
// devices.
func (d *Device) Parts() []*Device {
	d.rt.devMu.Lock()
	defer d.rt.devMu.Unlock()
	return d.parts
}
