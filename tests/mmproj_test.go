package tests

import (
	"fmt"
	"maps"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/ggload/ggload/ggml"
	"github.com/ggload/ggload/gguf"
	"github.com/ggload/ggload/internal/replay/clip"
	"github.com/ggload/ggload/lab/mtmd"
	"github.com/ggload/ggload/lab/synth"
	"github.com/ggload/ggload/lab/testenv"
	"github.com/ggload/ggload/place"
)

// mmprojSynth synthesizes a projector of every type the pin's clip loads,
// with the oracle as the judge. Every tensor has
// dimensions of its own, so that a width clip reads names its tensor.
func mmprojSynth(t *testing.T, o *mtmd.Oracle) map[string]string {
	t.Helper()
	pin, err := synth.ReadProjectorPin(testenv.SourceTree(t))
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	files := map[string]string{} // projector type → file
	for _, typ := range pin.ProjectorTypes() {
		if _, err := synth.NewProjector(pin, typ, dir, o.Judge, synth.ProjectorOptions{Distinct: true, Unused: true}); err != nil {
			t.Logf("not loadable by the pin: %v", err)
			continue
		}
		files[typ] = dir + "/" + synth.ProjectorFileName(typ)
	}
	return files
}

// TestMmproj holds ggload's reading and placement of projector files to
// the pin's clip, for a projector of every type the pin loads.
func TestMmproj(t *testing.T) {
	o := mtmd.Start(t)
	files := mmprojSynth(t, o)
	t.Run("placement", func(t *testing.T) { mmprojPlacement(t, o, files) })
	t.Run("refused", func(t *testing.T) { mmprojRefused(t, files) })
	var warm map[string]string
	warmDir := t.TempDir() // the warm projectors outlive their subtest
	t.Run("warmup", func(t *testing.T) {
		warm = mmprojWarmSynth(t, o, warmDir, nil)
		mmprojWarmup(t, o, warm)
	})
	t.Run("image-tokens", func(t *testing.T) {
		types := []string{"qwen2vl_merger", "qwen3vl_merger", "pixtral", "lfm2", "kimivl"}
		if warm == nil {
			warm = mmprojWarmSynth(t, o, warmDir, types)
		}
		mmprojImageTokens(t, o, warm, types)
	})
	t.Run("bad", func(t *testing.T) {
		if warm == nil {
			warm = mmprojWarmSynth(t, o, warmDir, []string{"gemma3", "qwen2vl_merger", "ultravox", "lfm2", "pixtral"})
		}
		mmprojBad(t, warm)
	})
}

// mmprojPlacement: each encoder's output width, device, buffer type and
// weight buffer size equal clip's, in llama-server's default
// configuration, with --no-mmproj-offload, and with -mmdev naming the
// GPU or none.
func mmprojPlacement(t *testing.T, o *mtmd.Oracle, files map[string]string) {
	rt := testenv.Runtime(t)
	if len(files) < 50 {
		t.Fatalf("only %d projector types synthesized", len(files))
	}
	type config struct {
		name string
		opts place.MmprojOptions
		load mtmd.Load
	}
	configs := []config{
		{"default", place.MmprojOptions{}, mtmd.Load{UseGPU: true}},
		{"no-offload", place.MmprojOptions{NoOffload: true}, mtmd.Load{}},
	}
	var gpus []*ggml.Device
	for _, d := range rt.Devices() {
		if d.Type() == ggml.DeviceGPU {
			gpus = append(gpus, d)
		}
	}
	if len(gpus) > 0 {
		v := testenv.Vulkan(t)
		configs = append(configs, config{"mmdev-" + v.Name(), place.MmprojOptions{Device: v.Name()}, mtmd.Load{UseGPU: true, Device: v.Name()}})
	}
	configs = append(configs, config{"mmdev-none", place.MmprojOptions{Device: "none"}, mtmd.Load{}})
	for _, c := range configs {
		dev, err := place.MmprojDevice(rt, c.opts)
		if err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		bt := dev.BufferType()
		t.Logf("%s: %d projector types on %s (%s)", c.name, len(files), dev.Name(), bt.Name())
		// the device ggml gives the buffer type ("-": none, as the CPU's)
		btDev := "-"
		if d, ok := bt.Device(); ok {
			btDev = d.Name()
		}
		for typ, path := range files {
			r, err := o.Load(path, c.load)
			if err != nil || r.Crashed || r.Err != "" {
				t.Fatalf("%s %s: the oracle: %v %v %s", c.name, typ, err, r.Crashed, r.Err)
			}
			f, err := gguf.Open(path)
			if err != nil {
				t.Fatal(err)
			}
			infos := map[string]gguf.TensorInfo{}
			for _, ti := range f.Tensors {
				infos[ti.Name] = ti
			}
			h, err := place.ReadMmprojHeader(path, f)
			f.Close()
			if err != nil {
				// mtmd refuses encoders of two widths, and an audio
				// generator alone; clip by itself loads both
				if len(r.Contexts) == 2 && r.Contexts[0].Embd != r.Contexts[1].Embd && strings.Contains(err.Error(), "disagree") ||
					len(r.Contexts) == 1 && r.Contexts[0].Modality == "gen_audio" && strings.Contains(err.Error(), "no vision or audio encoder") {
					h = nil
				} else {
					t.Fatalf("%s: %v", typ, err)
				}
			}
			if h != nil && len(h.Contexts) != len(r.Contexts) {
				t.Errorf("%s %s: ggload reads %d encoders, clip loads %d", c.name, typ, len(h.Contexts), len(r.Contexts))
			}
			for _, rc := range r.Contexts {
				if h == nil {
					break
				}
				hc := h.Context(rc.Modality)
				if hc == nil || hc.Embd != int64(rc.Embd) {
					t.Errorf("%s %s: %s output width: clip %d, ggload %+v", c.name, typ, rc.Modality, rc.Embd, hc)
				}
			}
			// the tensors clip loads, in its order, from the replay of its loader
			if h != nil {
				for _, rc := range r.Contexts {
					var want []string
					for _, tt := range r.Tensors {
						if tt.Modality == rc.Modality {
							want = append(want, tt.Name)
						}
					}
					var got []string
					if hc := h.Context(rc.Modality); hc != nil {
						for _, tt := range hc.Tensors {
							got = append(got, tt.Name)
						}
					}
					if !slices.Equal(got, want) {
						t.Errorf("%s %s: %s tensors:\n ggload %v\n clip   %v", c.name, typ, rc.Modality, got, want)
					}
				}
			}
			byModality := map[string][]place.MmprojTensor{}
			for _, tt := range r.Tensors {
				if tt.BufferType != bt.Name() || tt.Device != btDev {
					t.Errorf("%s %s: tensor %s in %s on %s, want %s on %s", c.name, typ, tt.Name, tt.BufferType, tt.Device, bt.Name(), btDev)
				}
				ti := infos[tt.Name]
				byModality[tt.Modality] = append(byModality[tt.Modality], place.MmprojTensor{Name: ti.Name, Type: ti.Type, Shape: ti.Shape})
			}
			for _, b := range r.Buffers {
				size, err := place.MmprojBufferSize(rt, bt, byModality[b.Modality])
				if err != nil {
					t.Fatal(err)
				}
				if b.BufferType != bt.Name() || uint64(b.Size) != size {
					t.Errorf("%s %s: %s buffer %s (%s) of %d bytes, ggload: %s of %d", c.name, typ, b.Modality, b.Name, b.BufferType, b.Size, bt.Name(), size)
				}
			}
			for _, ctx := range r.Contexts {
				if len(ctx.Weights) != 1 || ctx.Weights[dev.Name()] == 0 {
					t.Errorf("%s %s: clip counts the %s weights on %v, ggload on %s", c.name, typ, ctx.Modality, ctx.Weights, dev.Name())
				}
			}
			if len(r.Buffers) != len(r.Contexts) {
				t.Errorf("%s %s: %d buffers for %d contexts", c.name, typ, len(r.Buffers), len(r.Contexts))
			}
		}
	}
}

// mmprojRefused: a projector made for a model of another width is
// refused with the file and both widths named, as mtmd refuses it; and so
// is a file that is no projector.
func mmprojRefused(t *testing.T, files map[string]string) {
	path := files["gemma4v"]
	f, err := gguf.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	h, err := place.ReadMmprojHeader(path, f)
	if err != nil {
		t.Fatal(err)
	}
	embd := h.Contexts[0].Embd
	if err := h.CheckText(embd); err != nil {
		t.Fatalf("the right width refused: %v", err)
	}
	err = h.CheckText(embd + 1)
	if err == nil {
		t.Fatal("a projector for another model accepted")
	}
	for _, want := range []string{path, "another model", fmt.Sprint(embd), fmt.Sprint(embd + 1)} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not name %q", err, want)
		}
	}
	// a model file is no projector
	model := testenv.ModelFile(t, testenv.Runtime(t), synth.Spec{Layers: 1, Embd: 64, FF: 128, Heads: 2, Vocab: 300, Seed: 1})
	mf, err := gguf.Open(model)
	if err != nil {
		t.Fatal(err)
	}
	defer mf.Close()
	if _, err := place.ReadMmprojHeader(model, mf); err == nil || !strings.Contains(err.Error(), model) {
		t.Errorf("a model file read as a projector: %v", err)
	}
}

// mmprojWarmSynth synthesizes a projector of every type the pin's clip
// loads whose graphs build: its tensors reshaped until ggload's replay of
// the warm-up builds them (synth's Warm). Types ggload cannot warm up
// are logged and left out.
func mmprojWarmSynth(t *testing.T, o *mtmd.Oracle, dir string, types []string) map[string]string {
	t.Helper()
	pin, err := synth.ReadProjectorPin(testenv.SourceTree(t))
	if err != nil {
		t.Fatal(err)
	}
	rt := testenv.Runtime(t)
	warm := func(path string, learn func(string, []clip.OpArg)) error {
		f, err := gguf.Open(path)
		if err != nil {
			return err
		}
		defer f.Close()
		h, err := place.ReadMmprojHeader(path, f)
		if err != nil {
			return err
		}
		for _, c := range h.Contexts {
			e, err := clip.Load(path, f, c.Modality)
			if err != nil {
				return err
			}
			if _, err := e.Warmup(clip.WarmupParams{Lib: rt.Ops(), Device: rt.CPUDevice().Handle(), CPU: rt.CPUDevice().Handle(), FlashAttn: clip.FlashAttnAuto, Learn: learn}); err != nil {
				return err
			}
		}
		return nil
	}
	files := map[string]string{}
	if types == nil {
		types = pin.ProjectorTypes()
	}
	for _, typ := range types {
		p, err := synth.NewProjector(pin, typ, dir, o.Judge, synth.WarmProjectorOptions(typ))
		if err != nil {
			continue
		}
		path := dir + "/" + synth.ProjectorFileName(typ)
		if err := p.Warm(path, warm); err != nil {
			t.Logf("no warm-up: %v", err)
			continue
		}
		files[typ] = path
		mmprojWarmed.Store(path, p)
	}
	t.Logf("%d projector types warm up", len(files))
	return files
}

// mmprojWarmed holds each warmed-up projector file's synthesis (path →
// *synth.Projector), for the tests that rewrite it.
var mmprojWarmed sync.Map

// mmprojBad: projectors with every integer key set to 0, to -1 where
// it is signed and to 2^30, and with every tensor dropped or of a wrong
// shape, planned (clip's loader and warm-up replayed) on the CPU: each
// is planned or refused with an error that names the file; none crashes
// the process.
func mmprojBad(t *testing.T, files map[string]string) {
	rt := testenv.Runtime(t)
	dir := t.TempDir()
	var planned, refused, warmErr int
	try := func(name string, p *synth.Projector) {
		path := filepath.Join(dir, name+".gguf")
		if err := p.WriteFile(path); err != nil {
			t.Fatal(err)
		}
		mp, err := place.PlanMmproj(rt, path, place.MmprojOptions{NoOffload: true})
		switch {
		case err == nil:
			planned++
			for _, e := range mp.Encoders {
				if e.ComputeErr != nil {
					warmErr++
					if !strings.Contains(e.ComputeErr.Error(), path) {
						t.Errorf("%s: the warm-up's error does not name the file: %v", name, e.ComputeErr)
					}
				}
			}
		case !strings.Contains(err.Error(), path):
			t.Errorf("%s: the error does not name the file: %v", name, err)
		default:
			refused++
		}
	}
	for _, typ := range []string{"gemma3", "qwen2vl_merger", "ultravox", "lfm2", "pixtral"} {
		v, ok := mmprojWarmed.Load(files[typ])
		if !ok {
			continue
		}
		p := v.(*synth.Projector)
		for i, kv := range p.KV {
			var vals []gguf.Value
			switch kv.Value.Kind() {
			case gguf.TypeUint32:
				vals = []gguf.Value{gguf.Uint32(0), gguf.Uint32(1 << 30)}
			case gguf.TypeInt32:
				vals = []gguf.Value{gguf.Int32(0), gguf.Int32(-1), gguf.Int32(1 << 30)}
			}
			for j, v := range vals {
				q := *p
				q.KV = slices.Clone(p.KV)
				q.KV[i].Value = v
				try(fmt.Sprintf("%s-key%d-%d", typ, i, j), &q)
			}
		}
		for i := range p.Tensors {
			q := *p
			q.Tensors = slices.Delete(slices.Clone(p.Tensors), i, i+1)
			try(fmt.Sprintf("%s-drop%d", typ, i), &q)
			for j, shape := range [][]int64{{1}, {7, 3, 5}} {
				q := *p
				q.Tensors = slices.Clone(p.Tensors)
				q.Tensors[i].Shape = shape
				try(fmt.Sprintf("%s-shape%d-%d", typ, i, j), &q)
			}
		}
	}
	t.Logf("%d bad projectors planned (%d of their warm-ups refused), %d refused", planned, warmErr, refused)
	if refused == 0 {
		t.Error("no bad projector refused")
	}
}

// mmprojWarmup: each encoder's warm-up compute buffers, per device, equal
// clip's after its warm-up (mem_compute), and the projector's memory as
// llama-server measures it for -fit (mtmd_get_memory_usage), with the
// projector on the GPU and on the CPU.
func mmprojWarmup(t *testing.T, o *mtmd.Oracle, files map[string]string) {
	rt := testenv.Runtime(t)
	type config struct {
		name string
		opts place.MmprojOptions
		load mtmd.Load
	}
	configs := []config{
		{"no-offload", place.MmprojOptions{NoOffload: true}, mtmd.Load{Warmup: true}},
		{"default", place.MmprojOptions{}, mtmd.Load{UseGPU: true, Warmup: true}},
	}
	types := slices.Sorted(maps.Keys(files))
	if len(types) < 30 {
		t.Errorf("only %d projector types warm up", len(types))
	}
	for _, c := range configs {
		for _, typ := range types {
			path := files[typ]
			r, err := o.Load(path, c.load)
			if err != nil || r.Crashed || r.Err != "" {
				t.Errorf("%s %s: the oracle: %v %v %s %s", c.name, typ, err, r.Crashed, r.Err, r.Output)
				continue
			}
			mp, err := place.PlanMmproj(rt, path, c.opts)
			if err != nil {
				t.Errorf("%s %s: %v", c.name, typ, err)
				continue
			}
			for _, rc := range r.Contexts {
				e := mp.Encoder(rc.Modality)
				if e == nil {
					t.Errorf("%s %s: no %s encoder", c.name, typ, rc.Modality)
					continue
				}
				if e.ComputeErr != nil {
					t.Errorf("%s %s: %s warm-up: %v", c.name, typ, rc.Modality, e.ComputeErr)
					continue
				}
				got := map[string]int64{}
				for name, n := range e.Compute {
					got[name] = int64(n)
				}
				if !maps.Equal(got, rc.Compute) && !(len(got) == 0 && len(rc.Compute) == 0) {
					t.Errorf("%s %s: %s compute: ggload %v, clip %v", c.name, typ, rc.Modality, got, rc.Compute)
				}
			}
			mem, err := mp.Memory()
			if err != nil {
				t.Errorf("%s %s: %v", c.name, typ, err)
				continue
			}
			want, err := o.Memory(path, c.load)
			if err != nil {
				t.Errorf("%s %s: %v", c.name, typ, err)
				continue
			}
			got := map[string]int64{}
			for d, n := range mem {
				got[d.Name()] = int64(n)
			}
			if !maps.Equal(got, want) {
				t.Errorf("%s %s: memory: ggload %v, mtmd_get_memory_usage %v", c.name, typ, got, want)
			}
		}
	}
}

// mmprojImageTokens: --image-min-tokens and --image-max-tokens change a
// dynamic-resolution encoder's warm-up as they change clip's: the
// projector's memory equals mtmd_get_memory_usage's with the same
// settings, and differs from its memory without them.
func mmprojImageTokens(t *testing.T, o *mtmd.Oracle, files map[string]string, types []string) {
	rt := testenv.Runtime(t)
	changed := 0
	for _, typ := range types {
		path, ok := files[typ]
		if !ok {
			continue
		}
		for _, n := range [][2]int{{4, 16}, {0, 64}} {
			mp, err := place.PlanMmproj(rt, path, place.MmprojOptions{NoOffload: true, ImageMinTokens: n[0], ImageMaxTokens: n[1]})
			if err != nil {
				t.Fatal(err)
			}
			mem, err := mp.Memory()
			if err != nil {
				t.Errorf("%s %v: %v", typ, n, err)
				continue
			}
			want, err := o.Memory(path, mtmd.Load{ImageMinTokens: n[0], ImageMaxTokens: n[1]})
			if err != nil {
				t.Fatal(err)
			}
			base, err := o.Memory(path, mtmd.Load{})
			if err != nil {
				t.Fatal(err)
			}
			got := map[string]int64{}
			for d, b := range mem {
				got[d.Name()] = int64(b)
			}
			if !maps.Equal(got, want) {
				t.Errorf("%s %v: memory: ggload %v, mtmd_get_memory_usage %v", typ, n, got, want)
			}
			if !maps.Equal(want, base) {
				changed++
			}
		}
	}
	if changed == 0 {
		t.Error("the image token limits changed no projector's memory")
	}
	t.Logf("%d settings changed the memory", changed)
}
