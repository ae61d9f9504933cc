package ggml_test

import (
	"math"
	"strings"
	"testing"

	"github.com/ggload/ggload/ggml"
	"github.com/ggload/ggload/lab/testenv"
)

// matmulCase builds w (rows×cols f32, in a buffer of bt) and the graph
// y = mul_mat(w, rms_norm(x)) with x an input of n columns.
type matmulCase struct {
	w, x, y *ggml.Tensor
	wData   []float32
	g       *ggml.Graph
	ctx, cx *ggml.Context
	buf     *ggml.Buffer
	rows, n int
	cols    int
	xData   []float32
}

func newMatmul(t *testing.T, rt *ggml.Runtime, bt ggml.BufferType) *matmulCase {
	t.Helper()
	m := &matmulCase{rows: 8, cols: 64, n: 3}
	var err error
	if m.ctx, err = rt.NewContext(ggml.ContextParams{Tensors: 1, NoAlloc: true}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(m.ctx.Free)
	if m.w, err = m.ctx.NewTensor(ggml.TypeF32, int64(m.cols), int64(m.rows)); err != nil {
		t.Fatal(err)
	}
	if m.buf, err = m.ctx.AllocTensors(bt); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(m.buf.Free)
	m.wData = make([]float32, m.rows*m.cols)
	for i := range m.wData {
		m.wData[i] = float32(math.Sin(float64(i) * 0.1))
	}
	if err := m.w.SetFloats(m.wData); err != nil {
		t.Fatal(err)
	}
	if m.cx, err = rt.NewContext(ggml.ContextParams{Tensors: 8, Graphs: 1, NoAlloc: true}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(m.cx.Free)
	if m.x, err = m.cx.NewTensor(ggml.TypeF32, int64(m.cols), int64(m.n)); err != nil {
		t.Fatal(err)
	}
	m.x.SetInput()
	xn, err := m.cx.RMSNorm(m.x, 1e-6)
	if err != nil {
		t.Fatal(err)
	}
	if m.y, err = m.cx.MulMat(m.w, xn); err != nil {
		t.Fatal(err)
	}
	m.y.SetOutput()
	if m.g, err = m.cx.NewGraph(0); err != nil {
		t.Fatal(err)
	}
	if err := m.g.Expand(m.y); err != nil {
		t.Fatal(err)
	}
	m.xData = make([]float32, m.cols*m.n)
	for i := range m.xData {
		m.xData[i] = float32(i%7) - 3
	}
	return m
}

// want computes the result in Go.
func (m *matmulCase) want() []float32 {
	out := make([]float32, m.rows*m.n)
	for j := 0; j < m.n; j++ {
		x := m.xData[j*m.cols : (j+1)*m.cols]
		var ss float64
		for _, v := range x {
			ss += float64(v) * float64(v)
		}
		scale := 1 / math.Sqrt(ss/float64(m.cols)+1e-6)
		for r := 0; r < m.rows; r++ {
			var dot float64
			for k := 0; k < m.cols; k++ {
				dot += float64(m.wData[r*m.cols+k]) * float64(x[k]) * scale
			}
			out[j*m.rows+r] = float32(dot)
		}
	}
	return out
}

func maxDiff(a, b []float32) float64 {
	d := 0.0
	for i := range a {
		d = max(d, math.Abs(float64(a[i]-b[i])))
	}
	return d
}

func TestSchedulerComputes(t *testing.T) {
	rt := testenv.Runtime(t)
	testenv.Vulkan(t)
	devices := append([]*ggml.Device{rt.CPUDevice()}, testenv.GPUs(t)...)
	cpuBe, err := rt.CPUDevice().NewBackend()
	if err != nil {
		t.Fatal(err)
	}
	defer cpuBe.Free()
	for _, d := range devices {
		t.Run(d.Name(), func(t *testing.T) {
			m := newMatmul(t, rt, d.BufferType())
			backends := []*ggml.Backend{cpuBe}
			if d.Type() != ggml.DeviceCPU {
				be, err := d.NewBackend()
				if err != nil {
					t.Fatal(err)
				}
				defer be.Free()
				backends = []*ggml.Backend{be, cpuBe}
			}
			s, err := rt.NewScheduler(backends, ggml.SchedulerOptions{})
			if err != nil {
				t.Fatal(err)
			}
			defer s.Free()
			if err := s.Alloc(m.g); err != nil {
				t.Fatal(err)
			}
			if err := m.x.SetFloats(m.xData); err != nil {
				t.Fatal(err)
			}
			if err := s.Compute(m.g); err != nil {
				t.Fatal(err)
			}
			got, err := m.y.Floats()
			if err != nil {
				t.Fatal(err)
			}
			if d := maxDiff(got, m.want()); d > 1e-3 {
				t.Fatalf("result differs from Go's by %g", d)
			}
			if b := s.Backend(m.y); b == nil || b.Device() != d {
				t.Fatalf("mul_mat ran on %v, want %s", b, d.Name())
			}
		})
	}
}

func TestComputeRefusals(t *testing.T) {
	rt := testenv.Runtime(t)
	cpuBe, err := rt.CPUDevice().NewBackend()
	if err != nil {
		t.Fatal(err)
	}
	defer cpuBe.Free()
	m := newMatmul(t, rt, rt.CPUBufferType())
	// a single backend needs every tensor in memory
	if err := cpuBe.Compute(m.g); err == nil || !strings.Contains(err.Error(), "has no memory") {
		t.Fatalf("compute with unallocated results: %v", err)
	}
	if _, err := rt.NewScheduler(nil, ggml.SchedulerOptions{}); err == nil {
		t.Fatal("scheduler without backends accepted")
	}
	if vk, err := rt.DeviceByName("Vulkan0"); err == nil {
		be, err := vk.NewBackend()
		if err != nil {
			t.Fatal(err)
		}
		defer be.Free()
		if _, err := rt.NewScheduler([]*ggml.Backend{cpuBe, be}, ggml.SchedulerOptions{}); err == nil || !strings.Contains(err.Error(), "last backend") {
			t.Fatalf("CPU not last: %v", err)
		}
	}
	small, err := rt.NewScheduler([]*ggml.Backend{cpuBe}, ggml.SchedulerOptions{GraphSize: 2})
	if err != nil {
		t.Fatal(err)
	}
	defer small.Free()
	if err := small.Compute(m.g); err == nil || !strings.Contains(err.Error(), "graph of") {
		t.Fatalf("graph too big for the scheduler: %v", err)
	}
	full, err := rt.NewContext(ggml.ContextParams{Tensors: 1, NoAlloc: true})
	if err != nil {
		t.Fatal(err)
	}
	defer full.Free()
	if _, err := full.NewGraph(0); err == nil || !strings.Contains(err.Error(), "no room") {
		t.Fatalf("graph in a context without room: %v", err)
	}
	gctx, err := rt.NewContext(ggml.ContextParams{Graphs: 1, GraphSize: 1, NoAlloc: true})
	if err != nil {
		t.Fatal(err)
	}
	defer gctx.Free()
	tiny, err := gctx.NewGraph(1)
	if err != nil {
		t.Fatal(err)
	}
	if err := tiny.Expand(m.y); err == nil || !strings.Contains(err.Error(), "full") {
		t.Fatalf("graph of 1 node took 2: %v", err)
	}
	if _, err := m.cx.RMSNorm(m.w, float32(math.NaN())); err == nil {
		t.Fatal("NaN eps accepted")
	}
}
