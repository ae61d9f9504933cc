package ggml_test

import (
	"bytes"
	"context"
	"errors"
	"math/rand/v2"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
	"unsafe"

	"github.com/ggload/ggload/ggml"
	"github.com/ggload/ggload/lab/testenv"
)

func randomBytes(n int, seed uint64) []byte {
	r := rand.New(rand.NewPCG(seed, 7))
	b := make([]byte, n)
	for i := range b {
		b[i] = byte(r.Uint32())
	}
	return b
}

// weights allocates one tensor per (type, shape) in a buffer of buft and
// returns them with the buffer.
func allocTensors(t *testing.T, rt *ggml.Runtime, buft ggml.BufferType, specs ...[]int64) ([]*ggml.Tensor, *ggml.Buffer) {
	t.Helper()
	ctx, err := rt.NewContext(ggml.ContextParams{Tensors: len(specs), NoAlloc: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(ctx.Free)
	var ts []*ggml.Tensor
	for i, s := range specs {
		tn, err := ctx.NewTensor(ggml.Type(s[0]), s[1:]...)
		if err != nil {
			t.Fatal(err)
		}
		if err := tn.SetName("w" + string(rune('a'+i))); err != nil {
			t.Fatal(err)
		}
		ts = append(ts, tn)
	}
	buf, err := ctx.AllocTensors(buft)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(buf.Free)
	return ts, buf
}

func roundTrip(t *testing.T, ts []*ggml.Tensor) {
	t.Helper()
	for i, tn := range ts {
		want := randomBytes(int(tn.NBytes()), uint64(i+1))
		if err := tn.Set(want, 0); err != nil {
			t.Fatal(err)
		}
		got, err := tn.Bytes()
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(got, want) {
			t.Fatalf("%s: read back differs", tn.Name())
		}
		// a partial write at an offset lands where it should
		patch := []byte{1, 2, 3, 4}
		if err := tn.Set(patch, 8); err != nil {
			t.Fatal(err)
		}
		part := make([]byte, 8)
		if err := tn.Get(part, 6); err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(part, append(append([]byte{}, want[6:8]...), append(patch, want[12:14]...)...)) {
			t.Fatalf("%s: partial write misplaced: %v", tn.Name(), part)
		}
	}
}

func TestCPURoundTrip(t *testing.T) {
	rt := testenv.Runtime(t)
	cpu := rt.CPUDevice()
	if cpu == nil || cpu.Type() != ggml.DeviceCPU {
		t.Fatal("no CPU device")
	}
	ts, buf := allocTensors(t, rt, cpu.BufferType(), []int64{int64(ggml.TypeF32), 1000}, []int64{int64(ggml.TypeQ8_0), 64, 3}, []int64{int64(ggml.TypeQ4_K), 256, 2, 2})
	if !buf.IsHost() || buf.Name() != "CPU" {
		t.Fatalf("buffer %s host %v", buf.Name(), buf.IsHost())
	}
	buf.SetUsage(ggml.UsageWeights)
	if buf.Usage() != ggml.UsageWeights {
		t.Fatal("usage not kept")
	}
	roundTrip(t, ts)
	// bounds are checked in Go, not asserted natively
	if err := ts[0].Set(make([]byte, 8), ts[0].NBytes()-4); err == nil {
		t.Fatal("out-of-range write accepted")
	}
	if err := ts[0].Get(make([]byte, 1), ts[0].NBytes()); err == nil {
		t.Fatal("out-of-range read accepted")
	}
}

// A file mapped by Go becomes a CPU buffer without a copy: the tensor's data
// pointer is the mapping address itself.
func TestHostPtrZeroCopy(t *testing.T) {
	rt := testenv.Runtime(t)
	cpu := rt.CPUDevice()
	if !cpu.Props().Caps.BufferFromHostPtr {
		t.Fatal("CPU device lacks buffer_from_host_ptr")
	}
	content := randomBytes(1<<20, 42)
	path := filepath.Join(t.TempDir(), "weights.bin")
	if err := os.WriteFile(path, content, 0o644); err != nil {
		t.Fatal(err)
	}
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	m, unmap, err := mapReadOnly(f, len(content))
	if err != nil {
		t.Fatal(err)
	}
	defer unmap()
	base := unsafe.Pointer(&m[0])

	ctx, err := rt.NewContext(ggml.ContextParams{Tensors: 3, NoAlloc: true})
	if err != nil {
		t.Fatal(err)
	}
	defer ctx.Free()
	a, _ := ctx.NewTensor(ggml.TypeF32, 4096)      // 16 KiB at offset 4096
	b, _ := ctx.NewTensor(ggml.TypeQ8_0, 64, 1000) // 68000 bytes at offset 65536
	buf, err := cpu.BufferFromHostPtr(base, uint64(len(m)), b.NBytes())
	if err != nil {
		t.Fatal(err)
	}
	defer buf.Free()
	for _, c := range []struct {
		tn  *ggml.Tensor
		off uintptr
	}{{a, 4096}, {b, 65536}} {
		addr := unsafe.Add(base, c.off)
		if err := c.tn.Alloc(buf, addr); err != nil {
			t.Fatal(err)
		}
		if testenv.DataAddr(c.tn) != addr {
			t.Fatalf("data %p, mapping %p: not zero copy", testenv.DataAddr(c.tn), addr)
		}
		got, err := c.tn.Bytes()
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(got, content[c.off:int(c.off)+len(got)]) {
			t.Fatal("tensor does not read the file's bytes")
		}
	}
	// a tensor reaching past the buffer is refused before native code sees it
	c, err := ctx.NewTensor(ggml.TypeF32, 16)
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Alloc(buf, unsafe.Add(base, len(m)-32)); err == nil {
		t.Fatal("tensor past the buffer end accepted")
	}
}

// probe asks dev whether it supports op with the weight w in a zero-size
// buffer of buft, as llama.cpp's weight_buft_supported does.
func probe(t *testing.T, dev *ggml.Device, buft ggml.BufferType, w, op *ggml.Tensor) bool {
	t.Helper()
	ok, err := dev.SupportsWeightOp(op, w, buft)
	if err != nil {
		t.Fatal(err)
	}
	return ok
}

func mulMatProbe(t *testing.T, rt *ggml.Runtime, typ ggml.Type) (w, op *ggml.Tensor) {
	t.Helper()
	ctx, err := rt.NewContext(ggml.ContextParams{Tensors: 8, NoAlloc: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(ctx.Free)
	w, err = ctx.NewTensor(typ, 256, 64)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := ctx.NewTensor(ggml.TypeF32, 256, 512)
	op, err = ctx.MulMat(w, b)
	if err != nil {
		t.Fatal(err)
	}
	return w, op
}

func TestCPUSupportsQuantizedMulMat(t *testing.T) {
	rt := testenv.Runtime(t)
	cpu := rt.CPUDevice()
	w, op := mulMatProbe(t, rt, ggml.TypeQ4_K)
	if op.Op() != ggml.OpMulMat || rt.OpName(op.Op()) != "MUL_MAT" {
		t.Fatalf("op %d %s", op.Op(), rt.OpName(op.Op()))
	}
	if !probe(t, cpu, cpu.BufferType(), w, op) {
		t.Fatal("CPU does not support a q4_K MUL_MAT")
	}
	if w.C().Buffer != 0 {
		t.Fatal("probe buffer left attached")
	}
}

func TestVulkanDevice(t *testing.T) {
	rt := testenv.Runtime(t)
	vk := testenv.Vulkan(t)
	p := vk.Props()
	if p.Type != ggml.DeviceGPU || !p.Caps.Async || !p.Caps.Events || !p.Caps.HostBuffer {
		t.Fatalf("Vulkan0 props %+v", p)
	}
	if p.MemoryTotal == 0 || p.Name != "Vulkan0" {
		t.Fatalf("props %+v", p)
	}
	host, ok := vk.HostBufferType()
	if !ok || !host.IsHost() || !strings.HasPrefix(host.Name(), "Vulkan") {
		t.Fatalf("host buffer type %v %v", host.Name(), ok)
	}
	if dev, ok := vk.BufferType().Device(); !ok || dev != vk {
		t.Fatal("buffer type does not point back at its device")
	}
	_ = rt
}

// Upload through a pinned host buffer with tensor_set_async and an event,
// the staging path of the loader, then read back.
func TestVulkanAsyncUploadWithEvent(t *testing.T) {
	rt := testenv.Runtime(t)
	vk := testenv.Vulkan(t)
	ts, buf := allocTensors(t, rt, vk.BufferType(), []int64{int64(ggml.TypeQ8_0), 256, 300})
	if buf.IsHost() {
		t.Fatal("Vulkan0 buffer claims to be host memory")
	}
	w := ts[0]
	host, _ := vk.HostBufferType()
	staging, err := host.Alloc(w.NBytes())
	if err != nil {
		t.Fatal(err)
	}
	defer staging.Free()
	want := randomBytes(int(w.NBytes()), 9)
	copy(unsafe.Slice((*byte)(staging.Base()), len(want)), want)
	be, err := vk.NewBackend()
	if err != nil {
		t.Fatal(err)
	}
	defer be.Free()
	ev, err := vk.NewEvent()
	if err != nil {
		t.Fatal(err)
	}
	defer ev.Free()
	// two halves, one event: the second half is queued behind the first
	half := w.NBytes() / 2
	if err := be.SetTensorAsync(w, staging.Base(), 0, half); err != nil {
		t.Fatal(err)
	}
	if err := be.SetTensorAsync(w, unsafe.Add(staging.Base(), half), half, w.NBytes()-half); err != nil {
		t.Fatal(err)
	}
	ev.Record(be)
	ev.Synchronize()
	got, err := w.Bytes()
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, want) {
		t.Fatal("async upload read back differs")
	}
	if err := be.SetTensorAsync(w, staging.Base(), 1, w.NBytes()); err == nil {
		t.Fatal("out-of-range async write accepted")
	}
	// and back the same way, into the cleared staging buffer
	back := unsafe.Slice((*byte)(staging.Base()), len(want))
	clear(back)
	if err := be.GetTensorAsync(w, staging.Base(), 0, w.NBytes()); err != nil {
		t.Fatal(err)
	}
	if err := be.Synchronize(); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(back, want) {
		t.Fatal("async read back differs")
	}
	if err := be.GetTensorAsync(w, staging.Base(), 2, w.NBytes()-1); err == nil {
		t.Fatal("out-of-range async read accepted")
	}
	// a tensor in the CPU's memory is not Vulkan0's to copy (the
	// backend would assert)
	cpuTs, _ := allocTensors(t, rt, rt.CPUDevice().BufferType(), []int64{int64(ggml.TypeF32), 64})
	for name, f := range map[string]func() error{
		"set": func() error { return be.SetTensorAsync(cpuTs[0], staging.Base(), 0, 64) },
		"get": func() error { return be.GetTensorAsync(cpuTs[0], staging.Base(), 0, 64) },
	} {
		if err := f(); err == nil || !strings.Contains(err.Error(), "not in Vulkan0's own") {
			t.Errorf("async %s of a CPU tensor through Vulkan0: %v", name, err)
		}
	}
}

// Vulkan and CPU answer supports_op differently for some real op/type pairs;
// q8_K weights in a MUL_MAT are one (the CPU computes it, Vulkan does not).
func TestVulkanSupportsOpDiffersFromCPU(t *testing.T) {
	rt := testenv.Runtime(t)
	vk := testenv.Vulkan(t)
	cpu := rt.CPUDevice()
	w, op := mulMatProbe(t, rt, ggml.TypeQ8_K)
	onCPU := probe(t, cpu, cpu.BufferType(), w, op)
	onVK := probe(t, vk, vk.BufferType(), w, op)
	if !onCPU || onVK {
		t.Fatalf("q8_K MUL_MAT: CPU %v, Vulkan0 %v; want true, false", onCPU, onVK)
	}
	w, op = mulMatProbe(t, rt, ggml.TypeQ4_K)
	if !probe(t, vk, vk.BufferType(), w, op) {
		t.Fatal("Vulkan0 does not support a q4_K MUL_MAT")
	}
}

func TestRPCDevices(t *testing.T) {
	rt := testenv.Runtime(t)
	eps := testenv.RPC(t, 2)
	var rpc []*ggml.Device
	for _, d := range rt.Devices() {
		if d.IsRPC() {
			rpc = append(rpc, d)
		}
	}
	if len(rpc) < 2 {
		t.Fatalf("%d RPC devices", len(rpc))
	}
	seen := map[string]bool{}
	for _, d := range rpc {
		seen[d.Description()] = true
		if free, total := d.Memory(); total == 0 || free > total {
			t.Errorf("%s memory %d/%d", d.Name(), free, total)
		}
	}
	for _, ep := range eps {
		if !seen[ep] {
			t.Errorf("no device for %s (have %v)", ep, seen)
		}
	}
	// registering again returns the same devices
	again, err := rt.AddRPCServer(context.Background(), eps[0], ggml.RPCOptions{Timeout: time.Second})
	if err != nil || len(again) != 1 || again[0].Description() != eps[0] {
		t.Fatalf("re-register: %v %v", again, err)
	}
	ts, buf := allocTensors(t, rt, again[0].BufferType(), []int64{int64(ggml.TypeQ4_0), 64, 100}, []int64{int64(ggml.TypeF16), 33})
	if buf.IsHost() {
		t.Fatal("RPC buffer claims host memory")
	}
	roundTrip(t, ts)
}

func TestRPCEndpointErrors(t *testing.T) {
	rt := testenv.Runtime(t)
	if !hasRPCBackend(rt) {
		testenv.Missing(t, "rpc", "the RPC backend is not loaded (scripts/build-native.sh linux-x64 cpu,rpc --into <set>)")
	}
	// nothing listens on the port
	port, _ := testenv.FreePort()
	dead := net.JoinHostPort("127.0.0.1", strconv.Itoa(port))
	start := time.Now()
	_, err := rt.AddRPCServer(context.Background(), dead, ggml.RPCOptions{Timeout: 2 * time.Second})
	if !errors.Is(err, ggml.ErrRPCUnreachable) || !strings.Contains(err.Error(), dead) {
		t.Fatalf("dead endpoint: %v", err)
	}
	// a listener that accepts and never answers
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			defer c.Close()
		}
	}()
	start = time.Now()
	_, err = rt.AddRPCServer(context.Background(), l.Addr().String(), ggml.RPCOptions{Timeout: 500 * time.Millisecond})
	if !errors.Is(err, ggml.ErrRPCUnreachable) || !strings.Contains(err.Error(), l.Addr().String()) || !strings.Contains(err.Error(), "no answer within") {
		t.Fatalf("silent endpoint: %v", err)
	}
	if d := time.Since(start); d > 3*time.Second {
		t.Fatalf("took %v", d)
	}
	if _, err := rt.AddRPCServer(context.Background(), "no-port", ggml.RPCOptions{Timeout: time.Second}); err == nil || !strings.Contains(err.Error(), "host:port") {
		t.Fatalf("malformed: %v", err)
	}
}

func hasRPCBackend(rt *ggml.Runtime) bool {
	for _, r := range rt.Backends() {
		if r.Name() == "RPC" {
			return true
		}
	}
	return false
}

func TestUnknownNamesListValidOnes(t *testing.T) {
	rt := testenv.Runtime(t)
	_, err := rt.DeviceByName("GPU42")
	if !errors.Is(err, ggml.ErrUnknownDevice) || !strings.Contains(err.Error(), "CPU") {
		t.Fatalf("device: %v", err)
	}
	if d, err := rt.DeviceByName("cpu"); err != nil || d.Type() != ggml.DeviceCPU {
		t.Fatalf("case-insensitive lookup: %v", err)
	}
	_, err = rt.BufferTypeByName("VRAM")
	if !errors.Is(err, ggml.ErrUnknownBufferType) || !strings.Contains(err.Error(), "CPU") {
		t.Fatalf("buffer type: %v", err)
	}
	if b, err := rt.BufferTypeByName("CPU"); err != nil || b != rt.CPUBufferType() {
		t.Fatalf("CPU buffer type: %v", err)
	}
}

func TestBadArgumentsAreErrors(t *testing.T) {
	rt := testenv.Runtime(t)
	ctx, err := rt.NewContext(ggml.ContextParams{Tensors: 4, NoAlloc: true})
	if err != nil {
		t.Fatal(err)
	}
	defer ctx.Free()
	for _, c := range []struct {
		typ ggml.Type
		ne  []int64
	}{
		{ggml.Type(5), []int64{32}},
		{ggml.Type(-1), []int64{32}},
		{ggml.TypeQ4_K, []int64{100}},
		{ggml.TypeF32, nil},
		{ggml.TypeF32, []int64{1, 2, 3, 4, 5}},
		{ggml.TypeF32, []int64{-1}},
	} {
		if _, err := ctx.NewTensor(c.typ, c.ne...); err == nil {
			t.Errorf("NewTensor(%d, %v) accepted", c.typ, c.ne)
		}
	}
	a, _ := ctx.NewTensor(ggml.TypeF32, 64, 2)
	b, _ := ctx.NewTensor(ggml.TypeF32, 32, 2)
	if _, err := ctx.MulMat(a, b); err == nil || !strings.Contains(err.Error(), "row lengths differ") {
		t.Errorf("mul_mat of mismatched rows: %v", err)
	}
	if err := a.SetName(strings.Repeat("x", 64)); err == nil {
		t.Error("64-byte name accepted")
	}
	if err := a.Set([]byte{1}, 0); err == nil {
		t.Error("write to an unallocated tensor accepted")
	}
	// a full context says so instead of asserting
	for i := 0; i < 10; i++ {
		if _, err = ctx.NewTensor(ggml.TypeF32, 4); err != nil {
			break
		}
	}
	if err == nil || !strings.Contains(err.Error(), "full") {
		t.Errorf("context overflow: %v", err)
	}
	ctx.Free()
	ctx.Free() // twice is harmless
	if _, err := ctx.NewTensor(ggml.TypeF32, 4); err == nil {
		t.Error("use after Free accepted")
	}
}

func TestQuantizeAndValidate(t *testing.T) {
	rt := testenv.Runtime(t)
	src := make([]float32, 4*256)
	for i := range src {
		src[i] = float32(i%97) / 13
	}
	q, err := rt.Quantize(ggml.TypeQ4_K, src, 256, nil)
	if err != nil {
		t.Fatal(err)
	}
	if len(q) != 4*144 {
		t.Fatalf("%d bytes", len(q))
	}
	if ok, err := rt.ValidateRowData(ggml.TypeQ4_K, q); !ok || err != nil {
		t.Fatalf("valid data rejected: %v", err)
	}
	// a NaN super-block scale (f16 0x7e00 at the block start) is found
	q[0], q[1] = 0x00, 0x7e
	if ok, _ := rt.ValidateRowData(ggml.TypeQ4_K, q); ok {
		t.Fatal("NaN scale not found")
	}
	if _, err := rt.ValidateRowData(ggml.TypeQ4_K, q[:100]); err == nil {
		t.Fatal("partial block accepted")
	}
	if _, err := rt.Quantize(ggml.TypeQ4_K, src[:100], 100, nil); err == nil {
		t.Fatal("row not a multiple of the block size accepted")
	}
	if _, err := rt.Quantize(ggml.TypeIQ2_XXS, src, 256, nil); err == nil {
		t.Fatal("iq2_xxs without an importance matrix accepted")
	}
	if _, err := rt.Quantize(ggml.TypeQ8_K, src, 256, nil); err == nil {
		t.Fatal("q8_K has no quantizer")
	}
}

// The cost of one purego call: ggml_nbytes through FFI against the same
// computation in pure Go.
func BenchmarkNBytesFFI(b *testing.B) {
	rt := testenv.Runtime(b)
	ctx, _ := rt.NewContext(ggml.ContextParams{Tensors: 1, NoAlloc: true})
	defer ctx.Free()
	tn, _ := ctx.NewTensor(ggml.TypeQ4_K, 4096, 4096)
	lib := rt.Lib()
	c := tn.C()
	var n uintptr
	for b.Loop() {
		n += lib.NBytes(c)
	}
	_ = n
}

func BenchmarkNBytesGo(b *testing.B) {
	rt := testenv.Runtime(b)
	ctx, _ := rt.NewContext(ggml.ContextParams{Tensors: 1, NoAlloc: true})
	defer ctx.Free()
	tn, _ := ctx.NewTensor(ggml.TypeQ4_K, 4096, 4096)
	var n uint64
	for b.Loop() {
		n += tn.NBytes()
	}
	_ = n
}
