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
	"github.com/ggload/ggload/ggml/ops"
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

	mu  sync.Mutex
	err error // the first split the meta buffer would have aborted on
}

// refuse records a split the meta buffer would abort on.
func (ms *metaSplit) refuse(name string, err error) {
	ms.mu.Lock()
	defer ms.mu.Unlock()
	if ms.err == nil {
		ms.err = &Error{Tensor: name, Err: fmt.Errorf("ggml: meta device: the split of tensor %s: %w; mirrored instead", name, err)}
	}
}

// Err is the first split the splitter gave that the meta buffer would
// have aborted on.
func (ms *metaSplit) Err() error {
	ms.mu.Lock()
	defer ms.mu.Unlock()
	return ms.err
}

// MetaDeviceSupported reports whether meta devices can be made on this
// platform, and why not. The meta device's split-state callback returns a
// struct of 2 KiB by value: purego's callbacks return structs on Linux and
// macOS, amd64 and arm64 (through the result address the caller passes: a
// hidden first argument on amd64, register x8 on arm64); on Windows amd64
// the callback takes that hidden argument itself.
func MetaDeviceSupported() (err error) {
	defer placed(&err, "meta_device", at{})
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
			var name string
			var err error
			if s, name, err = ms.answer(t); err != nil {
				ms.refuse(name, err)
			}
		}
	}
	var c bindings.SplitState
	s.put(&c, n)
	return c
}

// answer is the split the device's callback gives tensor t, and its name:
// the splitter's, or mirrored where it has none; a split the meta buffer
// would abort on is mirrored (which it always takes), with the reason.
func (ms *metaSplit) answer(t *bindings.Tensor) (SplitState, string, error) {
	name := bindings.GoString(&t.Name[0])
	got, ok := ms.fn(name)
	if !ok {
		return SplitState{Axis: SplitMirrored}, name, nil
	}
	if err := got.Check(Type(t.Type), Shape(t.Ne), ms.n); err != nil {
		return SplitState{Axis: SplitMirrored}, name, err
	}
	return got, name, nil
}

// metaStatic is the registry's view of the callback of the device whose
// splitter is held weakly by w: the same answers, as ops.MetaSplit; a
// device whose splitter is gone mirrors every tensor, as its callback
// does.
func metaStatic(w weak.Pointer[metaSplit]) ops.MetaStatic {
	return func(t *ops.Tensor) ops.MetaSplit {
		ms := w.Value()
		if ms == nil {
			return ops.MetaSplit{Axis: int32(SplitMirrored), Ne: []int64{0}, Nr: []uint32{1}}
		}
		s, _, _ := ms.answer((*bindings.Tensor)(t))
		return s.opsSplit(ms.n)
	}
}

// opsSplit is s as ops.MetaSplit over n devices, laid out as put lays
// out the native struct.
func (s SplitState) opsSplit(n int) ops.MetaSplit {
	if s.Axis == SplitMirrored || len(s.Segments) == 0 {
		return ops.MetaSplit{Axis: int32(s.Axis), Ne: make([]int64, n), Nr: []uint32{1}}
	}
	out := ops.MetaSplit{Axis: int32(s.Axis), Ne: make([]int64, len(s.Segments)*n), Nr: make([]uint32, len(s.Segments))}
	for i, sg := range s.Segments {
		out.Nr[i] = sg.Repeat
		for j := 0; j < n && j < len(sg.Lengths); j++ {
			out.Ne[i*n+j] = sg.Lengths[j]
		}
	}
	return out
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
// A split that ggml would abort on (SplitState.Check) is not passed on:
// the tensor is mirrored instead and the device's Err says so.
func (rt *Runtime) MetaDevice(devs []*Device, split Splitter) (d *Device, keep any, err error) {
	defer placed(&err, "meta_device", at{})
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
	d.parts = append([]*Device(nil), devs...)
	d.split = weak.Make(ms)
	rt.devMu.Unlock()
	ops.RegisterMetaDevice(ops.Dev(h), len(devs), metaStatic(d.split))
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

// Check reports what ggml's meta buffer would assert (aborting the
// process) when it holds a tensor of type typ and shape ne in this split
// over n devices and sets it whole: the lengths add up to the tensor
// along the axis; along dimension 0 each is a whole number of
// quantization blocks; every copy into a device's slice stays inside the
// slice as the buffer lays it out; segments only along dimension 0 or 1
// of a tensor they can be copied from; partial sums only in f32.
func (s SplitState) Check(typ Type, ne Shape, n int) (err error) {
	defer placed(&err, "split_state", at{})
	blck, ts := typ.BlockSize(), typ.TypeSize()
	switch {
	case blck <= 0 || ts <= 0:
		return fmt.Errorf("type %s", typ)
	case n < 1 || n > MetaMaxDevices:
		return fmt.Errorf("%d devices", n)
	case s.Axis == SplitMirrored:
		return nil
	case s.Axis == SplitPartial:
		return s.checkPartial(typ, n)
	case !s.Axis.IsDim():
		return fmt.Errorf("split %s", s.Axis)
	case len(s.Segments) == 0 || len(s.Segments) > 16:
		return fmt.Errorf("%d segments (1 to 16)", len(s.Segments))
	}
	if err := s.checkLengths(ne, n, blck); err != nil {
		return err
	}
	if ne[0]%blck != 0 {
		return fmt.Errorf("%d along axis 0 is not a whole number of blocks of %d", ne[0], blck)
	}
	l := s.layout(ne, n, ts, blck)
	if len(s.Segments) != 1 || s.Segments[0].Repeat != 1 {
		return s.checkSegmentCopies(l, ne, blck)
	}
	return s.checkSliceCopies(l)
}

// checkPartial checks a partial split of a tensor of type typ over n
// devices.
func (s SplitState) checkPartial(typ Type, n int) error {
	if len(s.Segments) != 1 || len(s.Segments[0].Lengths) != n || s.Segments[0].Repeat != 1 {
		return fmt.Errorf("a partial sum needs one segment of %d lengths, repeated once", n)
	}
	if typ != TypeF32 {
		// the meta buffer divides the sum among the devices in floats
		return fmt.Errorf("a partial sum of type %s, not f32", typ)
	}
	return nil
}

// checkLengths checks that every segment is repeated and has a length for
// each of the n devices, none negative or, along dimension 0, a fraction
// of a block of blck, and that they add up to ne along the axis.
func (s SplitState) checkLengths(ne Shape, n int, blck int64) error {
	var sum int64
	for _, sg := range s.Segments {
		if len(sg.Lengths) != n || sg.Repeat == 0 {
			return fmt.Errorf("a segment of %d lengths repeated %d times over %d devices", len(sg.Lengths), sg.Repeat, n)
		}
		for j, v := range sg.Lengths {
			if v < 0 {
				return fmt.Errorf("device %d gets %d along %s", j, v, s.Axis)
			}
			if s.Axis == SplitAxis0 && v%blck != 0 {
				return fmt.Errorf("device %d gets %d along axis 0, not a whole number of blocks of %d", j, v, blck)
			}
			sum += v * int64(sg.Repeat)
		}
	}
	if axis := int(s.Axis); sum != ne[axis] {
		return fmt.Errorf("the slices add up to %d along %s, the tensor has %d", sum, s.Axis, ne[axis])
	}
	return nil
}

// metaLayout is how the meta buffer lays out a tensor split along a
// dimension: the whole tensor's strides and size, and each device's slice.
type metaLayout struct {
	nb     [4]int64
	size   int64
	slices []metaSlice
}

// metaSlice is one device's slice of a tensor: its shape, strides and size.
type metaSlice struct {
	ne, nb [4]int64
	bytes  int64
}

// layout is the layout of a tensor of shape ne, of a type of blocks of
// blck elements in ts bytes, in this split over n devices: each slice's
// strides are derived from the whole's, as the meta buffer does.
func (s SplitState) layout(ne Shape, n int, ts, blck int64) metaLayout {
	axis := int(s.Axis)
	var l metaLayout
	l.nb[0], l.nb[1] = ts, ts*(ne[0]/blck)
	l.nb[2], l.nb[3] = l.nb[1]*ne[1], l.nb[1]*ne[1]*ne[2]
	l.size = l.nb[3] * ne[3]
	l.slices = make([]metaSlice, n)
	for j := range l.slices {
		sl := metaSlice{ne: ne, nb: l.nb}
		sl.ne[axis] = s.Share(j)
		for i := range 4 {
			if l.nb[i] > l.nb[axis] {
				sl.nb[i] = l.nb[i] * sl.ne[axis] / ne[axis]
			}
		}
		sl.bytes = nbytesOf(sl.ne, sl.nb, ts, blck)
		l.slices[j] = sl
	}
	return l
}

// fits checks a copy of rows rows of size bytes, stride apart, at off of
// slice j.
func (l metaLayout) fits(j int, off, size, rows, stride int64) error {
	if size == 0 || rows == 0 {
		return nil
	}
	if end := off + (rows-1)*stride + size; end > l.slices[j].bytes {
		return fmt.Errorf("setting it would write bytes up to %d of the %d of its slice on device %d (a tensor write out of bounds)", end, l.slices[j].bytes, j)
	}
	return nil
}

// checkSegmentCopies checks setting a tensor of shape ne, of blocks of
// blck elements, split in more than one segment or repeats: the meta
// buffer copies each segment's rows into each device's slice in turn.
func (s SplitState) checkSegmentCopies(l metaLayout, ne Shape, blck int64) error {
	if s.Axis != SplitAxis0 && s.Axis != SplitAxis1 {
		return fmt.Errorf("segments along %s", s.Axis)
	}
	if ne[3] != 1 || (s.Axis == SplitAxis0 && ne[2] != 1) {
		return fmt.Errorf("segments along %s of a tensor of shape %v", s.Axis, ne)
	}
	axis := int(s.Axis)
	rows := l.size / l.nb[axis+1]
	offs := make([]int64, len(l.slices))
	var data int64
	for _, sg := range s.Segments {
		for range sg.Repeat {
			for j, v := range sg.Lengths {
				m := v * l.nb[1]
				if s.Axis == SplitAxis0 {
					m = v / blck * l.nb[0]
				}
				if err := l.fits(j, offs[j], m, rows, l.slices[j].nb[axis+1]); err != nil {
					return err
				}
				data += m
				offs[j] += m
			}
		}
	}
	if data*rows != l.size {
		return fmt.Errorf("its segments copy %d of its %d bytes", data*rows, l.size)
	}
	return nil
}

// checkSliceCopies checks setting a tensor split in one segment: the meta
// buffer copies the whole in chunks of its stride along the next
// dimension, each device's share of every chunk into its slice.
func (s SplitState) checkSliceCopies(l metaLayout) error {
	axis := int(s.Axis)
	if axis > 2 {
		return fmt.Errorf("ggml's meta buffer sets no tensor split along %s", s.Axis)
	}
	chunk := l.nb[axis+1]
	if chunk == 0 || l.size%chunk != 0 {
		return fmt.Errorf("%d bytes are not whole chunks of %d", l.size, chunk)
	}
	var got int64
	for j, sl := range l.slices {
		cj := sl.nb[axis+1]
		if cj == 0 {
			continue
		}
		if err := l.fits(j, 0, cj, l.size/chunk, cj); err != nil {
			return err
		}
		got += cj
	}
	if got != chunk {
		return fmt.Errorf("its slices take %d of every %d bytes", got, chunk)
	}
	return nil
}

// nbytesOf is ggml_nbytes.
func nbytesOf(ne, nb [4]int64, ts, blck int64) int64 {
	for _, v := range ne {
		if v <= 0 {
			return 0
		}
	}
	n := ts
	if blck != 1 {
		n = ne[0] * nb[0] / blck
	}
	for i := range 4 {
		if blck == 1 || i > 0 {
			n += (ne[i] - 1) * nb[i]
		}
	}
	return n
}
