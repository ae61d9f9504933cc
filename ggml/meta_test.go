package ggml_test

import (
	"bytes"
	"encoding/binary"
	"errors"
	"runtime"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/ggload/ggload/ggml"
	"github.com/ggload/ggload/lab/testenv"
)

func metaParts(t *testing.T) (*ggml.Runtime, []*ggml.Device) {
	t.Helper()
	if err := ggml.MetaDeviceSupported(); err != nil {
		t.Skip(err)
	}
	rt := testenv.Runtime(t)
	testenv.RPC(t, 2)
	var devs []*ggml.Device
	for _, name := range []string{"RPC0", "RPC1"} {
		d, err := rt.DeviceByName(name)
		if err != nil {
			t.Fatal(err)
		}
		devs = append(devs, d)
	}
	return rt, devs
}

func TestMetaDeviceRefuses(t *testing.T) {
	rt, devs := metaParts(t)
	mirror := func(string) (ggml.SplitState, bool) { return ggml.SplitState{}, false }
	meta, keep, err := rt.MetaDevice(devs, mirror)
	if err != nil {
		t.Fatal(err)
	}
	defer runtime.KeepAlive(keep)
	many := make([]*ggml.Device, ggml.MetaMaxDevices+1)
	for i := range many {
		many[i] = devs[i%2]
	}
	for _, c := range []struct {
		name  string
		devs  []*ggml.Device
		split ggml.Splitter
		want  string
	}{
		{"no devices", nil, mirror, "1 to 16 devices, not 0"},
		{"too many", many, mirror, "not 17"},
		{"no splitter", devs, nil, "needs a splitter"},
		{"twice", []*ggml.Device{devs[0], devs[0]}, mirror, "RPC0 is listed twice"},
		{"nested", []*ggml.Device{meta, devs[0]}, mirror, "is a meta device itself"},
	} {
		if _, _, err := rt.MetaDevice(c.devs, c.split); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: %v, want %q", c.name, err, c.want)
		}
	}
}

// A meta device over two RPC servers holds each tensor as the splitter
// says: sliced tensors take less room on each device than mirrored ones,
// and every tensor reads back whole as it was set, by ggml's client or by
// the guards (SetSplit).
func TestMetaDeviceSplits(t *testing.T) {
	rt, devs := metaParts(t)
	asked := map[string]int{}
	split := func(name string) (ggml.SplitState, bool) {
		asked[name]++
		switch name {
		case "w": // [8, 16] f32: rows 4 and 12
			return ggml.SplitState{Axis: ggml.SplitAxis1, Segments: []ggml.SplitSegment{{Lengths: []int64{4, 12}, Repeat: 1}}}, true
		case "s": // [8, 2] f32: columns in two segments, 2+2 and 1+3
			return ggml.SplitState{Axis: ggml.SplitAxis0, Segments: []ggml.SplitSegment{
				{Lengths: []int64{2, 2}, Repeat: 1}, {Lengths: []int64{1, 3}, Repeat: 1}}}, true
		case "q": // [8, 6] f32: rows in two segments, 1+2 and 2+1 (as a fused QKV)
			return ggml.SplitState{Axis: ggml.SplitAxis1, Segments: []ggml.SplitSegment{
				{Lengths: []int64{1, 2}, Repeat: 1}, {Lengths: []int64{2, 1}, Repeat: 1}}}, true
		case "p": // [8, 4, 2] f32: rows 1 and 3 of each of 2 planes
			return ggml.SplitState{Axis: ggml.SplitAxis1, Segments: []ggml.SplitSegment{{Lengths: []int64{1, 3}, Repeat: 1}}}, true
		}
		return ggml.SplitState{}, false // mirrored
	}
	meta, keep, err := rt.MetaDevice(devs, split)
	if err != nil {
		t.Fatal(err)
	}
	defer runtime.KeepAlive(keep)
	if !meta.IsMeta() || len(meta.Parts()) != 2 || meta.Parts()[1] != devs[1] {
		t.Fatalf("meta device %s: parts %v", meta.Name(), meta.Parts())
	}
	if meta.Caps().BufferFromHostPtr || meta.Caps().Events {
		t.Fatalf("meta device caps %+v", meta.Caps())
	}
	names := []string{"w", "s", "m", "q", "p"}
	ctx, err := rt.NewContext(ggml.ContextParams{Tensors: len(names), NoAlloc: true})
	if err != nil {
		t.Fatal(err)
	}
	defer ctx.Free()
	shapes := map[string][]int64{"w": {8, 16}, "s": {8, 2}, "m": {8, 2}, "q": {8, 6}, "p": {8, 4, 2}}
	var ts []*ggml.Tensor
	for _, name := range names {
		x, err := ctx.NewTensor(ggml.TypeF32, shapes[name]...)
		if err != nil {
			t.Fatal(err)
		}
		if err := x.SetName(name); err != nil {
			t.Fatal(err)
		}
		ts = append(ts, x)
	}
	buf, err := ctx.AllocTensors(meta.BufferType())
	if err != nil {
		t.Fatal(err)
	}
	defer buf.Free()
	for _, name := range names {
		if asked[name] == 0 {
			t.Errorf("the meta buffer never asked how to split %s", name)
		}
	}
	// the largest share: RPC1 holds 12 of w's 16 rows, 5 of s's 8
	// columns, all of m, 3 of q's 6 rows and 6 of p's 8; mirrored
	// everything would be 512+64+64+192+256
	pad := func(n uint64) uint64 { a := devs[1].BufferType().Alignment(); return (n + a - 1) / a * a }
	if want := pad(12*8*4) + pad(5*2*4) + pad(8*2*4) + pad(3*8*4) + pad(6*8*4); buf.Size() != want {
		t.Errorf("meta buffer of %d bytes, want %d (RPC1's slices)", buf.Size(), want)
	}
	for i, x := range ts {
		data := randomBytes(int(x.NBytes()), uint64(i+1))
		if err := x.Set(data, 0); err != nil {
			t.Fatal(err)
		}
		got, err := x.Bytes()
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(got, data) {
			t.Errorf("%s reads back different bytes", x.Name())
		}
	}
	// each server's slice: w's are runs of the whole (its first 4 rows,
	// then the other 12), the others' are gathered; none is asked of a
	// cache (not weights, and small); m is mirrored
	wantSlices := map[string][]ggml.SplitSlice{
		"w": {{Device: devs[0], Size: 4 * 8 * 4, Off: 0}, {Device: devs[1], Size: 12 * 8 * 4, Off: 4 * 8 * 4}},
		"s": {{Device: devs[0], Size: 3 * 2 * 4, Off: -1}, {Device: devs[1], Size: 5 * 2 * 4, Off: -1}},
		"q": {{Device: devs[0], Size: 3 * 8 * 4, Off: -1}, {Device: devs[1], Size: 3 * 8 * 4, Off: -1}},
		"p": {{Device: devs[0], Size: 2 * 8 * 4, Off: -1}, {Device: devs[1], Size: 6 * 8 * 4, Off: -1}},
	}
	for _, x := range ts {
		sp, err := x.SplitFor()
		if err != nil {
			t.Fatal(err)
		}
		if want := wantSlices[x.Name()]; (sp == nil) != (want == nil) || sp != nil && !slices.Equal(sp.Slices(), want) {
			var got []ggml.SplitSlice
			if sp != nil {
				got = sp.Slices()
			}
			t.Errorf("%s: slices %+v, want %+v", x.Name(), got, want)
		}
	}
	// the guards send the sliced tensors themselves, a request per
	// server: whole planes (w), strided rows (s), planes in segments (q),
	// rows of several planes (p); the mirrored m is left to ggml's client
	for i, x := range ts {
		data := randomBytes(int(x.NBytes()), uint64(i+10))
		r, err := x.SetSplit(data)
		if err != nil {
			t.Fatal(err)
		}
		if want := x.Name() != "m"; r.Direct != want || (r.Direct && r.Sent != x.NBytes()) {
			t.Errorf("%s: sent by the guards %v (%d bytes), want %v", x.Name(), r.Direct, r.Sent, want)
		}
		if !r.Direct {
			continue
		}
		got, err := x.Bytes()
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(got, data) {
			t.Errorf("%s set by the guards reads back different bytes", x.Name())
		}
	}
	if err := meta.Err(); err != nil {
		t.Fatal(err)
	}
}

// A failure of one device of a meta device is the meta device's.
func TestMetaDeviceErr(t *testing.T) {
	if err := ggml.MetaDeviceSupported(); err != nil {
		t.Skip(err)
	}
	rt := testenv.Runtime(t)
	s := testenv.StartRPCServer(t)
	devs, err := rt.AddRPCServer(t.Context(), s.Endpoint, ggml.RPCOptions{})
	if err != nil {
		t.Fatal(err)
	}
	meta, keep, err := rt.MetaDevice(devs, func(string) (ggml.SplitState, bool) { return ggml.SplitState{}, false })
	if err != nil {
		t.Fatal(err)
	}
	defer runtime.KeepAlive(keep)
	s.Kill()
	if _, err := devs[0].BufferType().Alloc(1 << 20); err == nil {
		t.Fatal("allocated on a killed server")
	}
	if err := meta.Err(); !errors.Is(err, ggml.ErrRPCFailed) {
		t.Fatalf("meta device error %v, want its device's failure", err)
	}
}

// A meta device consults its splitter only while the keep value lives;
// after that its registration goes with the garbage.
func TestMetaDeviceSplitterLifetime(t *testing.T) {
	rt, devs := metaParts(t)
	before := ggml.MetaSplitterIDs()
	_, keep, err := rt.MetaDevice(devs, func(string) (ggml.SplitState, bool) { return ggml.SplitState{}, false })
	if err != nil {
		t.Fatal(err)
	}
	var id uintptr
	for k := range ggml.MetaSplitterIDs() {
		if !before[k] {
			id = k
		}
	}
	if id == 0 {
		t.Fatal("no splitter registered")
	}
	runtime.KeepAlive(keep)
	keep = nil
	for i := 0; i < 20 && ggml.MetaSplitterIDs()[id]; i++ {
		runtime.GC()
		time.Sleep(time.Millisecond)
	}
	if ggml.MetaSplitterIDs()[id] {
		t.Fatal("the splitter is still registered after its keep value was dropped")
	}
}

// A splitter's answer that ggml's meta buffer would abort on is not passed
// on: the tensor is mirrored, loads and reads back, and the device's Err
// names it.
func TestMetaDeviceMirrorsBadSplits(t *testing.T) {
	rt, devs := metaParts(t)
	split := func(name string) (ggml.SplitState, bool) {
		// 4 + 5 rows of a tensor of 8
		return ggml.SplitState{Axis: ggml.SplitAxis1, Segments: []ggml.SplitSegment{{Lengths: []int64{4, 5}, Repeat: 1}}}, true
	}
	meta, keep, err := rt.MetaDevice(devs, split)
	if err != nil {
		t.Fatal(err)
	}
	defer runtime.KeepAlive(keep)
	ctx, err := rt.NewContext(ggml.ContextParams{Tensors: 1, NoAlloc: true})
	if err != nil {
		t.Fatal(err)
	}
	defer ctx.Free()
	x, err := ctx.NewTensor(ggml.TypeF32, 16, 8)
	if err != nil {
		t.Fatal(err)
	}
	if err := x.SetName("bad"); err != nil {
		t.Fatal(err)
	}
	buf, err := ctx.AllocTensors(meta.BufferType())
	if err != nil {
		t.Fatal(err)
	}
	defer buf.Free()
	data := randomBytes(int(x.NBytes()), 3)
	if err := x.Set(data, 0); err != nil {
		t.Fatal(err)
	}
	if got, err := x.Bytes(); err != nil || !bytes.Equal(got, data) {
		t.Fatalf("read back: %v", err)
	}
	if err := meta.Err(); err == nil || !strings.Contains(err.Error(), "tensor bad") || !strings.Contains(err.Error(), "add up to 9") {
		t.Fatalf("Err %v", err)
	}
}

func TestSplitStateCheck(t *testing.T) {
	dim := func(axis ggml.SplitAxis, segs ...ggml.SplitSegment) ggml.SplitState {
		return ggml.SplitState{Axis: axis, Segments: segs}
	}
	seg := func(r uint32, l ...int64) ggml.SplitSegment { return ggml.SplitSegment{Lengths: l, Repeat: r} }
	for _, c := range []struct {
		name  string
		s     ggml.SplitState
		typ   ggml.Type
		shape ggml.Shape
		want  string // "" for valid
	}{
		{"rows", dim(ggml.SplitAxis1, seg(1, 3, 5)), ggml.TypeQ4_0, ggml.Shape{64, 8, 1, 1}, ""},
		{"columns in blocks", dim(ggml.SplitAxis0, seg(1, 32, 32)), ggml.TypeQ4_0, ggml.Shape{64, 8, 1, 1}, ""},
		{"experts' rows", dim(ggml.SplitAxis1, seg(1, 0, 32)), ggml.TypeQ4_0, ggml.Shape{64, 32, 4, 1}, ""},
		{"fused qkv", dim(ggml.SplitAxis1, seg(1, 4, 4), seg(2, 2, 2)), ggml.TypeF16, ggml.Shape{16, 16, 1, 1}, ""},
		{"mirrored", ggml.SplitState{Axis: ggml.SplitMirrored}, ggml.TypeQ4_K, ggml.Shape{256, 3, 1, 1}, ""},
		{"partial", ggml.SplitState{Axis: ggml.SplitPartial, Segments: []ggml.SplitSegment{seg(1, 1, 0)}}, ggml.TypeF32, ggml.Shape{8, 1, 1, 1}, ""},
		{"short", dim(ggml.SplitAxis1, seg(1, 3, 4)), ggml.TypeF32, ggml.Shape{4, 8, 1, 1}, "add up to 7"},
		{"half a block", dim(ggml.SplitAxis0, seg(1, 16, 48)), ggml.TypeQ4_0, ggml.Shape{64, 8, 1, 1}, "whole number of blocks"},
		// rows one block wide, none of them on device 0: the slice's row
		// stride is not scaled, and its copies overrun it
		{"one-block rows", dim(ggml.SplitAxis0, seg(1, 0, 32)), ggml.TypeQ4_0, ggml.Shape{32, 64, 4, 1}, "write out of bounds"},
		{"segments along 2", dim(ggml.SplitAxis2, seg(1, 1, 1), seg(1, 1, 1)), ggml.TypeF32, ggml.Shape{4, 4, 4, 1}, "segments along axis 2"},
		{"axis 3", dim(ggml.SplitAxis3, seg(1, 1, 1)), ggml.TypeF32, ggml.Shape{4, 4, 1, 2}, "no tensor split along axis 3"},
		{"partial of q8_0", ggml.SplitState{Axis: ggml.SplitPartial, Segments: []ggml.SplitSegment{seg(1, 1, 1)}}, ggml.TypeQ8_0, ggml.Shape{32, 1, 1, 1}, "not f32"},
		{"three lengths", dim(ggml.SplitAxis1, seg(1, 1, 1, 2)), ggml.TypeF32, ggml.Shape{4, 4, 1, 1}, "3 lengths"},
	} {
		err := c.s.Check(c.typ, c.shape, 2)
		if c.want == "" && err != nil || c.want != "" && (err == nil || !strings.Contains(err.Error(), c.want)) {
			t.Errorf("%s: %v, want %q", c.name, err, c.want)
		}
	}
}

// The slices SetSplit sends each server, against the meta buffer's layout
// worked out element by element: along the split axis the segments follow
// each other, each repeated, each device's part of one after the other's;
// a device's slice holds its parts in that order, the other dimensions
// whole.
func TestSplitSlices(t *testing.T) {
	seg := func(r uint32, l ...int64) ggml.SplitSegment { return ggml.SplitSegment{Lengths: l, Repeat: r} }
	for _, c := range []struct {
		name string
		ne   ggml.Shape
		s    ggml.SplitState
	}{
		{"dim0 segments", ggml.Shape{12, 5, 1, 1}, ggml.SplitState{Axis: ggml.SplitAxis0, Segments: []ggml.SplitSegment{seg(2, 2, 2), seg(1, 1, 3)}}},
		{"dim0 one segment, 3d", ggml.Shape{6, 3, 2, 1}, ggml.SplitState{Axis: ggml.SplitAxis0, Segments: []ggml.SplitSegment{seg(1, 4, 2)}}},
		{"dim0 a device without", ggml.Shape{6, 3, 1, 1}, ggml.SplitState{Axis: ggml.SplitAxis0, Segments: []ggml.SplitSegment{seg(1, 0, 6)}}},
		{"dim1 segments", ggml.Shape{4, 9, 1, 1}, ggml.SplitState{Axis: ggml.SplitAxis1, Segments: []ggml.SplitSegment{seg(1, 1, 2), seg(3, 1, 1)}}},
		{"dim1 one segment, 3d", ggml.Shape{3, 5, 4, 1}, ggml.SplitState{Axis: ggml.SplitAxis1, Segments: []ggml.SplitSegment{seg(1, 2, 3)}}},
		{"dim2", ggml.Shape{2, 3, 4, 2}, ggml.SplitState{Axis: ggml.SplitAxis2, Segments: []ggml.SplitSegment{seg(1, 1, 3)}}},
	} {
		t.Run(c.name, func(t *testing.T) {
			ne, a := c.ne, int(c.s.Axis)
			n := ne[0] * ne[1] * ne[2] * ne[3]
			src := make([]byte, 4*n)
			for i := range n {
				binary.LittleEndian.PutUint32(src[4*i:], uint32(i))
			}
			got, ok := ggml.SplitSlices(c.s, ggml.TypeF32, ne, 2, src)
			if !ok {
				t.Fatal("not sent whole")
			}
			// where each coordinate along the axis goes: device and place
			type to struct{ j, at int64 }
			var along []to
			var filled [2]int64
			for _, sg := range c.s.Segments {
				for range sg.Repeat {
					for j, l := range sg.Lengths {
						for k := range l {
							along = append(along, to{int64(j), filled[j] + k})
						}
						filled[j] += l
					}
				}
			}
			want := [2][]byte{make([]byte, 4*n*filled[0]/ne[a]), make([]byte, 4*n*filled[1]/ne[a])}
			var i [4]int64
			for i[3] = range ne[3] {
				for i[2] = range ne[2] {
					for i[1] = range ne[1] {
						for i[0] = range ne[0] {
							dst := along[i[a]]
							sne, si := ne, i
							sne[a], si[a] = filled[dst.j], dst.at
							at := si[0] + sne[0]*(si[1]+sne[1]*(si[2]+sne[2]*si[3]))
							whole := i[0] + ne[0]*(i[1]+ne[1]*(i[2]+ne[2]*i[3]))
							binary.LittleEndian.PutUint32(want[dst.j][4*at:], uint32(whole))
						}
					}
				}
			}
			for j := range 2 {
				if !bytes.Equal(got[j], want[j]) {
					t.Errorf("device %d: slice %v, want %v", j, got[j], want[j])
				}
			}
		})
	}
}
