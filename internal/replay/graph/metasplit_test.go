package graph_test

import (
	"os"
	"os/exec"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/ggload/ggload/ggml"
	"github.com/ggload/ggload/ggml/ops"
	"github.com/ggload/ggload/internal/replay/graph"
	"github.com/ggload/ggload/lab/testenv"
)

// metaRig is a meta device over Vulkan0 with three weights in its
// buffer, its backend and the CPU's, a scheduler of them and a probe
// scheduler for the check.
type metaRig struct {
	lib          *ops.Lib
	w1, w0, wm   *ops.Tensor // [8 16] split by rows, [16 8] split by columns, [8 16] mirrored
	bes          []ops.Backend
	sched, probe ops.Sched
}

func newMetaRig(t *testing.T) *metaRig {
	t.Helper()
	if err := ggml.MetaDeviceSupported(); err != nil {
		t.Skip(err)
	}
	rt := testenv.Runtime(t)
	vk := testenv.Vulkan(t)
	split := func(name string) (ggml.SplitState, bool) {
		switch name {
		case "w1":
			return ggml.SplitState{Axis: ggml.SplitAxis1, Segments: []ggml.SplitSegment{{Lengths: []int64{16}, Repeat: 1}}}, true
		case "w0":
			return ggml.SplitState{Axis: ggml.SplitAxis0, Segments: []ggml.SplitSegment{{Lengths: []int64{16}, Repeat: 1}}}, true
		}
		return ggml.SplitState{}, false
	}
	meta, keep, err := rt.MetaDevice([]*ggml.Device{vk}, split)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { runtime.KeepAlive(keep) })
	ctx, err := rt.NewContext(ggml.ContextParams{Tensors: 3, NoAlloc: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(ctx.Free)
	var ws []*ops.Tensor
	for _, w := range []struct {
		name string
		ne   []int64
	}{{"w1", []int64{8, 16}}, {"w0", []int64{16, 8}}, {"wm", []int64{8, 16}}} {
		x, err := ctx.NewTensor(ggml.TypeF32, w.ne...)
		if err != nil {
			t.Fatal(err)
		}
		if err := x.SetName(w.name); err != nil {
			t.Fatal(err)
		}
		ws = append(ws, x.Native())
	}
	buf, err := ctx.AllocTensors(meta.BufferType())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(buf.Free)
	lib := rt.Ops()
	r := &metaRig{lib: lib, w1: ws[0], w0: ws[1], wm: ws[2]}
	for _, d := range []ops.Dev{meta.Handle(), lib.DevByType(ops.DevTypeCPU)} {
		be := lib.BackendInit(d)
		if be == 0 {
			t.Fatalf("no backend for %s", lib.DevName(d))
		}
		t.Cleanup(func() { lib.BackendFree(be) })
		r.bes = append(r.bes, be)
	}
	bufts := []ops.Buft{lib.BackendDefaultBuft(r.bes[0]), lib.BackendDefaultBuft(r.bes[1])}
	r.sched = lib.SchedNew(r.bes, bufts, 64, false, true)
	r.probe = lib.SchedNew(r.bes, bufts, 64, false, true)
	if r.sched == 0 || r.probe == 0 {
		t.Fatal("ggml_backend_sched_new failed")
	}
	t.Cleanup(func() { lib.SchedFree(r.sched); lib.SchedFree(r.probe) })
	return r
}

// metaCase builds one graph over the rig's weights and an input x of
// [8 3] (on the CPU, as graph inputs are); want is "" where ggml's meta
// backend takes the graph, else what its refusal says.
type metaCase struct {
	name  string
	build func(r *metaRig, c *ops.Context, x *ops.Tensor) (*ops.Tensor, error)
	want  string
}

var metaCases = []metaCase{
	{"rows then columns", func(r *metaRig, c *ops.Context, x *ops.Tensor) (*ops.Tensor, error) {
		y, err := r.lib.MulMat(c, r.w1, x) // axis 1 × mirrored: [16 3] split along 0
		if err != nil {
			return nil, err
		}
		if y, err = r.lib.Add(c, y, y); err != nil {
			return nil, err
		}
		return r.lib.MulMat(c, r.w0, y) // axis 0 × axis 0: summed, mirrored
	}, ""},
	{"mirrored", func(r *metaRig, c *ops.Context, x *ops.Tensor) (*ops.Tensor, error) {
		y, err := r.lib.MulMat(c, r.wm, x)
		if err != nil {
			return nil, err
		}
		return r.lib.RMSNorm(c, y, 1e-5)
	}, ""},
	{"reshaped split", func(r *metaRig, c *ops.Context, x *ops.Tensor) (*ops.Tensor, error) {
		y, err := r.lib.MulMat(c, r.w1, x)
		if err != nil {
			return nil, err
		}
		return r.lib.Cont(c, y)
	}, ""},
	{"concat of a mirrored and a split", func(r *metaRig, c *ops.Context, x *ops.Tensor) (*ops.Tensor, error) {
		ym, err := r.lib.MulMat(c, r.wm, x) // [16 3] mirrored
		if err != nil {
			return nil, err
		}
		y1, err := r.lib.MulMat(c, r.w1, x) // [16 3] split along 0
		if err != nil {
			return nil, err
		}
		return r.lib.Concat(c, ym, y1, 1) // along 1: split along 0
	}, ""},
	{"permuted and transposed splits", func(r *metaRig, c *ops.Context, x *ops.Tensor) (*ops.Tensor, error) {
		y1, err := r.lib.MulMat(c, r.w1, x) // [16 3] split along 0
		if err != nil {
			return nil, err
		}
		p, err := r.lib.Permute(c, y1, [4]int64{1, 0, 2, 3}) // split along 1
		if err != nil {
			return nil, err
		}
		if p, err = r.lib.Cont(c, p); err != nil {
			return nil, err
		}
		tr, err := r.lib.Transpose(c, p) // back: split along 0
		if err != nil {
			return nil, err
		}
		if tr, err = r.lib.Cont(c, tr); err != nil {
			return nil, err
		}
		return r.lib.Add(c, tr, y1)
	}, ""},
	{"a view of a split", func(r *metaRig, c *ops.Context, x *ops.Tensor) (*ops.Tensor, error) {
		y1, err := r.lib.MulMat(c, r.w1, x) // [16 3] split along 0
		if err != nil {
			return nil, err
		}
		// its first two columns: the strides of its source
		v, err := r.lib.View(c, y1, 2, [4]int64{16, 2, 1, 1}, [4]uintptr{4, 64, 128, 128}, 0)
		if err != nil {
			return nil, err
		}
		return r.lib.Scale(c, v, 2)
	}, ""},
	{"rows of a row split", func(r *metaRig, c *ops.Context, x *ops.Tensor) (*ops.Tensor, error) {
		ids, err := r.lib.NewTensor(c, ops.TypeI32, 1, [4]int64{2, 1, 1, 1})
		if err != nil {
			return nil, err
		}
		r.lib.SetName(ids, "ids")
		r.lib.SetInput(ids)
		return r.lib.GetRows(c, r.w1, ids)
	}, "GGML_ASSERT(ret.axis != GGML_BACKEND_SPLIT_AXIS_UNKNOWN) failed in ggml_backend_meta_get_split_state: node rows (GET_ROWS"},
	{"norm of a split", func(r *metaRig, c *ops.Context, x *ops.Tensor) (*ops.Tensor, error) {
		y, err := r.lib.MulMat(c, r.w1, x)
		if err != nil {
			return nil, err
		}
		return r.lib.RMSNorm(c, y, 1e-5)
	}, "GGML_ASSERT(src_ss[0].axis != GGML_BACKEND_SPLIT_AXIS_0) failed"},
	{"product of two row splits", func(r *metaRig, c *ops.Context, x *ops.Tensor) (*ops.Tensor, error) {
		tr, err := r.lib.Transpose(c, r.w0) // [8 16] split along 1
		if err != nil {
			return nil, err
		}
		if tr, err = r.lib.Cont(c, tr); err != nil {
			return nil, err
		}
		return r.lib.MulMat(c, r.w1, tr)
	}, `GGML_ABORT("unsupported mul_mat split states: node=rows`},
}

// build makes case mc's graph, its result named "rows".
func (r *metaRig) build(t *testing.T, mc metaCase) *ops.Graph {
	t.Helper()
	c := r.lib.NewContext(64 * r.lib.TensorOverhead() * 4)
	if c == nil {
		t.Fatal("ggml_init failed")
	}
	t.Cleanup(func() { r.lib.Free(c) })
	x, err := r.lib.NewTensor(c, ops.TypeF32, 2, [4]int64{8, 3, 1, 1})
	if err != nil {
		t.Fatal(err)
	}
	r.lib.SetName(x, "x")
	r.lib.SetInput(x)
	out, err := mc.build(r, c, x)
	if err != nil {
		t.Fatal(err)
	}
	r.lib.SetName(out, "rows")
	g := r.lib.NewGraph(c, 64)
	if err := r.lib.Expand(g, out); err != nil {
		t.Fatal(err)
	}
	return g
}

// The replay takes the graphs ggml's meta backend takes (which then
// allocate and compute natively) and refuses, with the assert's text, the
// ones it aborts on.
func TestMetaSplits(t *testing.T) {
	r := newMetaRig(t)
	for _, mc := range metaCases {
		t.Run(mc.name, func(t *testing.T) {
			r.lib.SchedReset(r.sched)
			g := r.build(t, mc)
			err := graph.MetaSplits(r.lib, r.sched, r.probe, r.bes, g)
			switch {
			case mc.want == "" && err != nil:
				t.Fatalf("refused: %v", err)
			case mc.want != "" && (err == nil || !strings.Contains(err.Error(), mc.want)):
				t.Fatalf("got %v, want %q", err, mc.want)
			case mc.want != "":
				if !strings.Contains(err.Error(), "(llama.cpp would abort here)") {
					t.Errorf("the refusal does not say llama.cpp aborts: %v", err)
				}
				return
			}
			if !r.lib.SchedAllocGraph(r.sched, g) {
				t.Fatal("the native allocation failed")
			}
			if st := r.lib.SchedGraphCompute(r.sched, g); st != 0 {
				t.Fatalf("the native compute failed: status %d", st)
			}
		})
	}
}

// metaChildEnv names, in a child process, the case whose graph it
// allocates natively.
const metaChildEnv = "GGLOAD_META_SPLIT_CHILD"

// Where the replay refuses, ggml's meta backend really aborts the
// process, with the same assert: the refused graphs allocated natively,
// each in a child process of its own.
func TestMetaSplitsNativeAborts(t *testing.T) {
	if name := os.Getenv(metaChildEnv); name != "" {
		for _, mc := range metaCases {
			if mc.name == name {
				r := newMetaRig(t)
				g := r.build(t, mc)
				r.lib.SchedAllocGraph(r.sched, g)
				r.lib.SchedGraphCompute(r.sched, g)
				t.Log("the native path took the graph")
				return
			}
		}
		t.Fatalf("no case %q", name)
	}
	newMetaRig(t) // skips where there is no meta device
	native := map[string]string{
		"rows of a row split":       "GGML_ASSERT(ret.axis != GGML_BACKEND_SPLIT_AXIS_UNKNOWN) failed",
		"norm of a split":           "GGML_ASSERT(src_ss[0].axis != GGML_BACKEND_SPLIT_AXIS_0) failed",
		"product of two row splits": "unsupported mul_mat split states: node=rows",
	}
	for _, mc := range metaCases {
		want, ok := native[mc.name]
		if !ok {
			continue
		}
		start := time.Now()
		cmd := exec.Command(os.Args[0], "-test.run=^TestMetaSplitsNativeAborts$", "-test.v", "-test.count=1")
		cmd.Env = append(os.Environ(), metaChildEnv+"="+mc.name, "GGML_NO_BACKTRACE=1")
		out, err := cmd.CombinedOutput()
		if err == nil {
			t.Errorf("%s: the native path did not abort:\n%s", mc.name, out)
			continue
		}
		if !strings.Contains(string(out), want) {
			t.Errorf("%s: the child ended (%v) without %q:\n%s", mc.name, err, want, out)
		}
		t.Logf("%s: the native path aborts (%v, %v): %s", mc.name, err, time.Since(start).Round(time.Millisecond), want)
	}
}
