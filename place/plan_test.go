package place_test

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/ggload/ggload/ggml"
	"github.com/ggload/ggload/gguf"
	"github.com/ggload/ggload/lab/synth"
	"github.com/ggload/ggload/lab/testenv"
	"github.com/ggload/ggload/place"
	"github.com/google/go-cmp/cmp"
)

func writeModel(t testing.TB, rt *ggml.Runtime, spec synth.Spec) *gguf.Model {
	t.Helper()
	return testenv.OpenModel(t, testenv.ModelFile(t, rt, spec))
}

var small = synth.Spec{Layers: 6, Embd: 128, FF: 256, Heads: 2, Vocab: 256, Tied: true, RopeFreqs: true}

func devNames(ds []*ggml.Device) []string {
	var out []string
	for _, d := range ds {
		out = append(out, d.Name())
	}
	return out
}

// With the real devices of this machine: RPC devices first, then the GPU;
// an explicit list keeps its order; split mode none keeps main_gpu.
func TestDeviceListOnRealDevices(t *testing.T) {
	rt := testenv.Runtime(t)
	testenv.Vulkan(t)
	testenv.RPC(t, 2)
	m := writeModel(t, rt, small)
	p, err := place.New(context.Background(), rt, m, place.Params{})
	if err != nil {
		t.Fatal(err)
	}
	if got := devNames(p.Devices); !slices.Equal(got, []string{"RPC0", "RPC1", "Vulkan0"}) {
		t.Fatalf("default list %v", got)
	}
	params := place.Params{}
	params.DeviceNames = []string{"Vulkan0", "RPC1"}
	if p, err = place.New(context.Background(), rt, m, params); err != nil || !slices.Equal(devNames(p.Devices), []string{"Vulkan0", "RPC1"}) {
		t.Fatalf("explicit list %v %v", devNames(p.Devices), err)
	}
	params = place.Params{}
	params.SplitMode, params.MainGPU = place.SplitNone, 2
	if p, err = place.New(context.Background(), rt, m, params); err != nil || !slices.Equal(devNames(p.Devices), []string{"Vulkan0"}) {
		t.Fatalf("split none %v %v", devNames(p.Devices), err)
	}
	for _, l := range p.LayerDevices {
		if l.Name() != "Vulkan0" {
			t.Fatalf("split none put a layer on %s", l.Name())
		}
	}
	params.DeviceNames = []string{"none"}
	if p, err = place.New(context.Background(), rt, m, params); err != nil || len(p.Devices) != 0 {
		t.Fatalf("no devices %v %v", devNames(p.Devices), err)
	}
	for _, l := range p.LayerDevices {
		if l != rt.CPUDevice() {
			t.Fatalf("no devices: layer on %s", l.Name())
		}
	}
}

func TestBadParameters(t *testing.T) {
	rt := testenv.Runtime(t)
	testenv.Vulkan(t)
	testenv.RPC(t, 2)
	m := writeModel(t, rt, small)
	for _, c := range []struct {
		name string
		set  func(p *place.Params)
		want []string
	}{
		{"main gpu out of range", func(p *place.Params) { p.SplitMode, p.MainGPU = place.SplitNone, 5 }, []string{"invalid main GPU 5", "0=RPC0", "2=Vulkan0"}},
		{"row mode without split buffers", func(p *place.Params) { p.SplitMode = place.SplitRow }, []string{"does not support split buffers", "RPC0"}},
		{"tensor mode with too many -ts values", func(p *place.Params) { p.SplitMode, p.TensorSplit = place.SplitTensor, []float32{1, 1, 1, 1} }, []string{"4 tensor split values for 3 devices", "Vulkan0, RPC0, RPC1"}},
		{"tensor mode without devices", func(p *place.Params) { p.SplitMode, p.DeviceNames = place.SplitTensor, []string{"none"} }, []string{"split mode tensor needs at least one device"}},
		{"bad regex", func(p *place.Params) { p.Overrides = []place.Override{{Pattern: `blk\.(1`, BufferType: "CPU"}} }, []string{`-ot pattern 'blk\.(1'`}},
		{"unknown buffer type", func(p *place.Params) { p.Overrides = []place.Override{{Pattern: "ffn", BufferType: "VRAM9"}} }, []string{`"VRAM9"`, "CPU", "Vulkan0"}},
		{"too many -ts values", func(p *place.Params) { p.TensorSplit = []float32{1, 1, 1, 1} }, []string{"4 tensor split values for 3 devices", "RPC0, RPC1, Vulkan0"}},
		{"unknown device", func(p *place.Params) { p.DeviceNames = []string{"CUDA7"} }, []string{`"CUDA7"`, "Vulkan0"}},
		{"the CPU as a device", func(p *place.Params) { p.DeviceNames = []string{"Vulkan0", "CPU"} }, []string{"invalid device: CPU"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			params := place.Params{}
			c.set(&params)
			_, err := place.New(context.Background(), rt, m, params)
			if err == nil {
				t.Fatal("accepted")
			}
			for _, w := range c.want {
				if !strings.Contains(err.Error(), w) {
					t.Fatalf("error %q lacks %q", err, w)
				}
			}
		})
	}
}

func TestUnknownTensorNames(t *testing.T) {
	rt := testenv.Runtime(t)
	w, err := small.Writer(rt)
	if err != nil {
		t.Fatal(err)
	}
	if err := w.AddTensorBytes("blk.0.frobnicator.weight", ggml.TypeF32, []int64{4}, make([]byte, 16)); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "x.gguf")
	if err := w.WriteFile(path); err != nil {
		t.Fatal(err)
	}
	m, err := gguf.OpenModel(path)
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	_, err = place.New(context.Background(), rt, m, place.Params{})
	if err == nil || !strings.Contains(err.Error(), "blk.0.frobnicator.weight") {
		t.Fatalf("llama file with a foreign tensor: %v", err)
	}
	// an architecture outside the table is placed by name; names the
	// tensor info table does not know are errors, as in llama.cpp
	if err := w.Set("general.architecture", gguf.String("novel")); err != nil {
		t.Fatal(err)
	}
	for _, kv := range w.KV() {
		if rest, ok := strings.CutPrefix(kv.Key, "llama."); ok {
			if err := w.Set("novel."+rest, kv.Value); err != nil {
				t.Fatal(err)
			}
		}
	}
	if err := w.WriteFile(path); err != nil {
		t.Fatal(err)
	}
	m2, err := gguf.OpenModel(path)
	if err != nil {
		t.Fatal(err)
	}
	defer m2.Close()
	_, err = place.New(context.Background(), rt, m2, place.Params{})
	if !errors.Is(err, place.ErrUnknownTensor) || !strings.Contains(err.Error(), "missing tensor info mapping for blk.0.frobnicator.weight") {
		t.Fatalf("unknown architecture: %v", err)
	}
}

// The probe cache changes nothing but the number of probes.
func TestProbeCacheChangesNothing(t *testing.T) {
	rt := testenv.Runtime(t)
	testenv.Vulkan(t)
	m := writeModel(t, rt, synth.Spec{Layers: 8, Embd: 256, FF: 256, Heads: 2, Vocab: 128, Experts: 4, ExpertsUsed: 2, Weights: ggml.TypeQ8_K, Embeddings: ggml.TypeQ4_0})
	params := place.Params{}
	params.Overrides = []place.Override{{Pattern: `blk\.[0-3]\.ffn_up`, BufferType: "CPU"}}
	cached, err := place.New(context.Background(), rt, m, params)
	if err != nil {
		t.Fatal(err)
	}
	fresh, err := place.New(context.Background(), rt, m, place.WithoutProbeCache(params))
	if err != nil {
		t.Fatal(err)
	}
	if cached.Probes >= fresh.Probes || fresh.Probes != fresh.ProbeQuestions {
		t.Fatalf("probes: cached %d of %d, uncached %d of %d", cached.Probes, cached.ProbeQuestions, fresh.Probes, fresh.ProbeQuestions)
	}
	if d := cmp.Diff(summary(fresh), summary(cached)); d != "" {
		t.Fatalf("plans differ (-uncached +cached):\n%s", d)
	}
	// q8_K cannot run on Vulkan: the moved summary says so
	if cached.Moved.Count == 0 {
		t.Fatal("nothing moved")
	}
}

// summary is a plan's decisions, a line each.
func summary(p *place.Plan) []string {
	var out []string
	for _, tp := range p.Tensors {
		out = append(out, fmt.Sprintf("%s %s %s %v %d", tp.Name, tp.BufferType.Name(), tp.Reason, tp.Duplicate, tp.Context))
	}
	for _, c := range p.Contexts {
		out = append(out, fmt.Sprintf("ctx %s %d", c.BufferType.Name(), c.Size))
	}
	for _, l := range p.Log {
		out = append(out, l.Text)
	}
	return out
}

// A model llama.cpp refuses is refused here, before any native call, with
// llama.cpp's own words and the file's name.
func TestRefusalsNameTheFile(t *testing.T) {
	rt := testenv.Runtime(t)
	cases := []struct {
		name   string
		change func(w *gguf.Writer)
		want   string
	}{
		{"missing tensor", func(w *gguf.Writer) {}, "check_tensor_dims: tensor 'blk.0.attn_q.weight' not found"},
		{"wrong shape", func(w *gguf.Writer) { w.Set("llama.feed_forward_length", gguf.Uint32(96)) }, "has wrong shape; expected"},
		{"inconsistent experts", func(w *gguf.Writer) {
			w.Set("llama.expert_count", gguf.Uint32(2))
			w.Set("llama.expert_used_count", gguf.Uint32(3))
		}, "GGML_ASSERT(n_expert_used_max <= hparams.n_expert) failed"},
		{"missing key", func(w *gguf.Writer) { w.Delete("llama.context_length") }, "key not found in model: llama.context_length"},
	}
	for _, c := range cases {
		w, err := small.Writer(rt)
		if err != nil {
			t.Fatal(err)
		}
		c.change(w)
		src := w
		if c.name == "missing tensor" {
			// the same model without blk.0.attn_q.weight
			src = gguf.NewWriter()
			for _, kv := range w.KV() {
				src.Set(kv.Key, kv.Value)
			}
			for _, ti := range w.Tensors() {
				if ti.Name != "blk.0.attn_q.weight" {
					nb, _ := ti.Type.Bytes(ti.Shape)
					src.AddTensorBytes(ti.Name, ti.Type, ti.Shape[:max(ti.NDims, 1)], make([]byte, nb))
				}
			}
		}
		path := filepath.Join(t.TempDir(), "refused.gguf")
		if err := src.WriteFile(path); err != nil {
			t.Fatal(err)
		}
		m, err := gguf.OpenModel(path)
		if err != nil {
			t.Fatal(err)
		}
		_, err = place.New(context.Background(), rt, m, place.Params{})
		m.Close()
		if !errors.Is(err, place.ErrRefused) || !strings.Contains(err.Error(), path) || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: %v; want ErrRefused naming %s and %q", c.name, err, path, c.want)
		}
	}
}

// Placements walks the plan's tensors in creation order and stops when
// asked.
func TestPlacements(t *testing.T) {
	rt := testenv.Runtime(t)
	p, err := place.New(context.Background(), rt, writeModel(t, rt, small), place.Params{})
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for tp := range p.Placements() {
		if tp != &p.Tensors[n] {
			t.Fatalf("placement %d is not Tensors[%d]", n, n)
		}
		n++
	}
	if n != len(p.Tensors) {
		t.Fatalf("%d placements of %d", n, len(p.Tensors))
	}
	for range p.Placements() {
		break
	}
}

// A cancelled or expired context ends planning and fitting with its error.
func TestPlanningEndsWithItsContext(t *testing.T) {
	rt := testenv.Runtime(t)
	m := writeModel(t, rt, synth.Spec{Layers: 2, Embd: 64, FF: 128, Heads: 2, Vocab: 64})
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := place.New(ctx, rt, m, place.Params{}); !errors.Is(err, context.Canceled) {
		t.Errorf("plan with a cancelled context: %v", err)
	}
	ctx, cancel = context.WithTimeout(context.Background(), -time.Second)
	defer cancel()
	if _, err := place.Fit(ctx, rt, m, place.Params{}, place.FitOptions{}); !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("fit with an expired context: %v", err)
	}
	if _, err := place.New(context.Background(), rt, m, place.Params{}); err != nil {
		t.Errorf("plan with a live context: %v", err)
	}
}
