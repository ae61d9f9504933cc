package tests

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"unsafe"

	"github.com/ggload/ggload/ggml"
	"github.com/ggload/ggload/gguf"
	"github.com/ggload/ggload/lab/cxx"
	"github.com/ggload/ggload/lab/mtmd"
	"github.com/ggload/ggload/lab/synth"
	"github.com/ggload/ggload/lab/testenv"
	"github.com/ggload/ggload/loader"
	"github.com/ggload/ggload/place"
)

// Projector plans and loads against libmtmd's clip: a handful of
// synthesized projectors (one with two encoders) planned by ggload and
// loaded by the pin's clip_init in the default configuration, with
// --no-mmproj-offload and with -mmdev (every tensor's buffer type and
// device, every weight buffer's name, type and size, in clip's order),
// then loaded by ggload in several load modes and read back.
//
//	go test -run 'TestMmprojLoad' -v ./tests

// mmprojLoadTypes are the projector types these tests synthesize: two
// vision projectors, an audio one and, where the pin has one, a file
// with both encoders.
func mmprojLoadTypes(pin *synth.ProjectorPin) []string {
	types := []string{"gemma3", "qwen2vl_merger", "ultravox"}
	for _, typ := range pin.ProjectorTypes() {
		if pin.Modality[typ] == "both" {
			return append(types, typ)
		}
	}
	return types
}

// mmprojFew synthesizes the projectors of types, with the oracle as the
// judge.
func mmprojFew(t *testing.T, o *mtmd.Oracle, types []string, opts synth.ProjectorOptions) map[string]string {
	t.Helper()
	pin, err := synth.ReadProjectorPin(testenv.SourceTree(t))
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	files := map[string]string{}
	for _, typ := range types {
		if _, err := synth.NewProjector(pin, typ, dir, o.Judge, opts); err != nil {
			t.Fatalf("%s: %v", typ, err)
		}
		files[typ] = filepath.Join(dir, synth.ProjectorFileName(typ))
	}
	return files
}

func TestMmprojLoad(t *testing.T) {
	o := mtmd.Start(t)
	pin, err := synth.ReadProjectorPin(testenv.SourceTree(t))
	if err != nil {
		t.Fatal(err)
	}
	types := mmprojLoadTypes(pin)
	if len(types) < 4 {
		t.Logf("the pin has no projector type with both encoders")
	}
	// every tensor of a size of its own, but the two encoders of one
	// file give embeddings of one width, or mtmd refuses the file
	files := mmprojFew(t, o, types[:3], synth.ProjectorOptions{Distinct: true})
	if len(types) > 3 {
		maps.Copy(files, mmprojFew(t, o, types[3:], synth.ProjectorOptions{}))
	}
	t.Run("plan", func(t *testing.T) { mmprojPlanVsClip(t, o, types, files) })
	t.Run("log", func(t *testing.T) { mmprojLogVsClip(t, types, files) })
	t.Run("load", func(t *testing.T) { mmprojLoadModes(t, types, files) })
	t.Run("closed", func(t *testing.T) { mmprojClosed(t, files["gemma3"]) })
	t.Run("truncated", func(t *testing.T) { mmprojTruncated(t, files["qwen2vl_merger"]) })
	t.Run("other-model", func(t *testing.T) { mmprojOtherModel(t, files["gemma3"]) })
}

// mmprojConfig is one way of choosing the projector's device, as ggload's
// options and as mtmd_context_params.
type mmprojConfig struct {
	name string
	opts place.MmprojOptions
	load mtmd.Load
}

func mmprojConfigs(t *testing.T, rt *ggml.Runtime) []mmprojConfig {
	cs := []mmprojConfig{
		{"default", place.MmprojOptions{}, mtmd.Load{UseGPU: true}},
		{"no-mmproj-offload", place.MmprojOptions{NoOffload: true}, mtmd.Load{}},
		{"mmdev-none", place.MmprojOptions{Device: "none"}, mtmd.Load{}},
	}
	if slices.ContainsFunc(rt.Devices(), func(d *ggml.Device) bool { return d.Type() == ggml.DeviceGPU }) {
		v := testenv.Vulkan(t)
		cs = append(cs, mmprojConfig{"mmdev-" + v.Name(), place.MmprojOptions{Device: v.Name()}, mtmd.Load{UseGPU: true, Device: v.Name()}})
	} else {
		t.Logf("no GPU: the default configuration and -mmdev are the CPU's")
	}
	return cs
}

// mmprojPlanVsClip: ggload's plan of each projector equals what clip
// allocated, tensor by tensor and buffer by buffer, in clip's order.
func mmprojPlanVsClip(t *testing.T, o *mtmd.Oracle, types []string, files map[string]string) {
	rt := testenv.Runtime(t)
	compared := 0
	for _, c := range mmprojConfigs(t, rt) {
		for _, typ := range types {
			path := files[typ]
			mp, err := place.PlanMmproj(rt, path, c.opts)
			if err != nil {
				t.Fatalf("%s %s: %v", c.name, typ, err)
			}
			r, err := o.Load(path, c.load)
			if err != nil || r.Crashed || r.Err != "" {
				t.Fatalf("%s %s: the oracle: %v %v %s", c.name, typ, err, r.Crashed, r.Err)
			}
			btDev := "-" // the device ggml gives the buffer type
			if d, ok := mp.BufferType.Device(); ok {
				btDev = d.Name()
			}
			if len(mp.Encoders) != len(r.Contexts) {
				t.Fatalf("%s %s: ggload plans %d encoders, clip made %d", c.name, typ, len(mp.Encoders), len(r.Contexts))
			}
			for i, rc := range r.Contexts {
				e := &mp.Encoders[i]
				if e.Modality != rc.Modality || e.Projector != rc.Projector || e.Embd != int64(rc.Embd) {
					t.Errorf("%s %s: encoder %d: ggload %s %s width %d, clip %s %s width %d", c.name, typ, i, e.Modality, e.Projector, e.Embd, rc.Modality, rc.Projector, rc.Embd)
				}
				if rc.Backend != mp.Backend {
					t.Errorf("%s %s: %s: clip uses the %s backend, ggload %s", c.name, typ, rc.Modality, rc.Backend, mp.Backend)
				}
				if !slices.Contains(logTexts(mp.Log), "clip_ctx: CLIP using "+rc.Backend+" backend") {
					t.Errorf("%s %s: no line for the %s backend in %q", c.name, typ, rc.Backend, logTexts(mp.Log))
				}
				var want []mtmd.Tensor
				for _, tt := range r.Tensors {
					if tt.Modality == rc.Modality {
						want = append(want, tt)
					}
				}
				if len(want) != len(e.Tensors) {
					t.Errorf("%s %s: %s: clip loads %d tensors, ggload plans %d", c.name, typ, rc.Modality, len(want), len(e.Tensors))
				}
				for k := range min(len(want), len(e.Tensors)) {
					got := e.Tensors[k]
					if got.Name != want[k].Name || mp.BufferType.Name() != want[k].BufferType || btDev != want[k].Device || got.Bytes != want[k].Size {
						t.Errorf("%s %s: %s tensor %d: clip %s in %s on %s (%d bytes), ggload %s in %s on %s (%d bytes)", c.name, typ, rc.Modality, k,
							want[k].Name, want[k].BufferType, want[k].Device, want[k].Size, got.Name, mp.BufferType.Name(), btDev, got.Bytes)
					}
				}
				var buf *mtmd.Buffer
				for i := range r.Buffers {
					if r.Buffers[i].Modality == rc.Modality {
						buf = &r.Buffers[i]
					}
				}
				b := e.Buffer
				if buf == nil || buf.Name != b.Name || buf.BufferType != b.BufferType.Name() || buf.Device != btDev || uint64(buf.Size) != b.Size {
					t.Errorf("%s %s: %s buffer: clip %+v, ggload %s (%s on %s) of %d bytes", c.name, typ, rc.Modality, buf, b.Name, b.BufferType.Name(), btDev, b.Size)
				}
				if rc.Weights[mp.Device.Name()] == 0 || len(rc.Weights) != 1 {
					t.Errorf("%s %s: clip counts the %s weights on %v, ggload on %s", c.name, typ, rc.Modality, rc.Weights, mp.Device.Name())
				}
				compared++
			}
		}
	}
	t.Logf("%d encoders' placements compared with clip's", compared)
}

// mmprojLogVsClip: the plan's lines are clip's own, as clip_init prints
// them, in its order.
func mmprojLogVsClip(t *testing.T, types []string, files map[string]string) {
	rt := testenv.Runtime(t)
	bin := mtmd.Build(t)
	for _, typ := range types {
		path := files[typ]
		mp, err := place.PlanMmproj(rt, path, place.MmprojOptions{NoOffload: true})
		if err != nil {
			t.Fatal(err)
		}
		cmd := cxx.Command(t, bin, "serve")
		cmd.Env = append(cmd.Env, "MMPROJ_ORACLE_VERBOSE=1", "GGML_NO_BACKTRACE=1")
		cmd.Stdin = strings.NewReader("0 - 0 " + path + "\n")
		var stderr bytes.Buffer
		cmd.Stderr = &stderr
		if err := cmd.Run(); err != nil {
			t.Fatalf("%s: the oracle: %v\n%s", typ, err, stderr.String())
		}
		clip := strings.Split(stderr.String(), "\n")
		// every line of the plan's, in order, among clip's
		at := 0
		for _, l := range mp.Log {
			i := slices.Index(clip[at:], l.Text)
			if i < 0 {
				t.Errorf("%s: clip does not print %q (after line %d); it prints:\n%s", typ, l.Text, at, strings.Join(clip, "\n"))
				break
			}
			at += i + 1
		}
	}
}

func logTexts(ls []place.LogLine) []string {
	var out []string
	for _, l := range ls {
		out = append(out, l.Text)
	}
	return out
}

// mmprojLoadModes loads each projector in several load modes, on the CPU
// and on the default device, and reads every tensor back: its bytes are
// the file's, and it lies at the offset the plan gave it.
func mmprojLoadModes(t *testing.T, types []string, files map[string]string) {
	rt := testenv.Runtime(t)
	ctx := context.Background()
	modes := []place.LoadMode{place.LoadMmap, place.LoadNone, place.LoadDirectIO}
	loaded := 0
	for _, opts := range []place.MmprojOptions{{NoOffload: true}, {}} {
		for _, typ := range types {
			path := files[typ]
			mp, err := place.PlanMmproj(rt, path, opts)
			if err != nil {
				t.Fatal(err)
			}
			want := mmprojFileBytes(t, path)
			n := 0
			for _, e := range mp.Encoders {
				n += len(e.Tensors)
			}
			for _, mode := range modes {
				m, err := loader.LoadMmproj(ctx, rt, mp, loader.MmprojOptions{LoadMode: mode})
				if err != nil {
					t.Fatalf("%s %s on %s: %v", mode, typ, mp.Device.Name(), err)
				}
				v, err := m.Verify()
				if err != nil || v.Tensors != n || v.ByDevice[mp.Device.Name()] != n {
					t.Errorf("%s %s: --verify: %+v, %v; want %d tensors", mode, typ, v, err, n)
				}
				bufs := m.Buffers()
				if len(bufs) != len(mp.Encoders) {
					t.Fatalf("%s %s: %d buffers for %d encoders", mode, typ, len(bufs), len(mp.Encoders))
				}
				for ei, e := range mp.Encoders {
					b := bufs[ei]
					if b == nil || b.Size() != e.Buffer.Size || b.Name() != e.Buffer.Name || b.Usage() != ggml.UsageWeights {
						t.Errorf("%s %s: %s buffer %v, planned %s of %d bytes", mode, typ, e.Modality, b, e.Buffer.Name, e.Buffer.Size)
						continue
					}
					for _, pt := range e.Tensors {
						gt, ok := m.EncoderTensor(e.Modality, pt.Name)
						if !ok {
							t.Fatalf("%s %s: no tensor %s", mode, typ, pt.Name)
						}
						got, err := gt.Bytes()
						if err != nil || !bytes.Equal(got, want[pt.Name]) {
							t.Errorf("%s %s: tensor %s read back differs from the file (%v)", mode, typ, pt.Name, err)
						}
						if gt.Buffer() != b {
							t.Errorf("%s %s: tensor %s is not in its encoder's buffer", mode, typ, pt.Name)
						}
						gt.WithData(func(p unsafe.Pointer) error {
							if at := uint64(uintptr(p) - uintptr(b.Base())); at != pt.At {
								t.Errorf("%s %s: tensor %s at %d of its buffer, planned at %d", mode, typ, pt.Name, at, pt.At)
							}
							return nil
						})
					}
				}
				if mode == place.LoadDirectIO {
					t.Logf("%s on %s: direct I/O used: %v", typ, mp.Device.Name(), m.Direct)
				}
				if err := m.Close(); err != nil {
					t.Fatal(err)
				}
				loaded++
			}
		}
	}
	t.Logf("%d loads read back equal to their files", loaded)
}

// mmprojFileBytes is every tensor's data in the file, by name.
func mmprojFileBytes(t *testing.T, path string) map[string][]byte {
	f, err := gguf.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	out := map[string][]byte{}
	for _, ti := range f.Tensors {
		b, err := io.ReadAll(f.Data(ti))
		if err != nil {
			t.Fatal(err)
		}
		out[ti.Name] = b
	}
	return out
}

// mmprojClosed: Close is idempotent, and a closed projector has no
// tensors or buffers and refuses Verify with ErrClosed.
func mmprojClosed(t *testing.T, path string) {
	rt := testenv.Runtime(t)
	mp, err := place.PlanMmproj(rt, path, place.MmprojOptions{NoOffload: true})
	if err != nil {
		t.Fatal(err)
	}
	if len(mp.Encoders) == 0 || len(mp.Encoders[0].Tensors) == 0 {
		t.Fatalf("%s: no tensors planned", path)
	}
	m, err := loader.LoadMmproj(context.Background(), rt, mp, loader.MmprojOptions{})
	if err != nil {
		t.Fatal(err)
	}
	name := mp.Encoders[0].Tensors[0].Name
	if _, ok := m.Tensor(name); !ok {
		t.Fatalf("no tensor %s", name)
	}
	bufs := m.Buffers()
	if err := m.Close(); err != nil {
		t.Fatal(err)
	}
	if err := m.Close(); err != nil {
		t.Errorf("a second Close: %v", err)
	}
	if !m.Closed() || !bufs[0].Freed() {
		t.Errorf("closed %v, its buffer freed %v", m.Closed(), bufs[0].Freed())
	}
	if _, ok := m.Tensor(name); ok {
		t.Error("a closed projector gives a tensor")
	}
	if m.Buffers() != nil {
		t.Error("a closed projector gives buffers")
	}
	if _, err := m.Verify(); !errors.Is(err, loader.ErrClosed) {
		t.Errorf("Verify after Close: %v, want ErrClosed", err)
	}
	// a cancelled load frees what it made
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := loader.LoadMmproj(ctx, rt, mp, loader.MmprojOptions{}); !errors.Is(err, context.Canceled) {
		t.Errorf("a cancelled load: %v", err)
	}
}

// mmprojTruncated: a file cut short before ggload reads it is refused
// when planned, naming it; one that shrinks after its plan is a load
// error naming the file and the tensor whose bytes are gone, and nothing
// stays allocated.
func mmprojTruncated(t *testing.T, path string) {
	rt := testenv.Runtime(t)
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	cut := filepath.Join(t.TempDir(), "cut.gguf")
	if err := os.WriteFile(cut, data, 0o644); err != nil {
		t.Fatal(err)
	}
	mp, err := place.PlanMmproj(rt, cut, place.MmprojOptions{NoOffload: true})
	if err != nil {
		t.Fatal(err)
	}
	// the tensor whose data ends last loses its last bytes
	var last place.MmprojPlacedTensor
	for _, e := range mp.Encoders {
		for _, pt := range e.Tensors {
			if pt.Offset+pt.Bytes > last.Offset+last.Bytes {
				last = pt
			}
		}
	}
	if err := os.Truncate(cut, last.Offset+last.Bytes-1); err != nil {
		t.Fatal(err)
	}
	_, err = loader.LoadMmproj(context.Background(), rt, mp, loader.MmprojOptions{})
	if err == nil || !errors.Is(err, loader.ErrTruncated) || !strings.Contains(err.Error(), cut) || !strings.Contains(err.Error(), last.Name) {
		t.Errorf("a load of a file cut in tensor %s: %v", last.Name, err)
	}
	if _, err := place.PlanMmproj(rt, cut, place.MmprojOptions{}); err == nil || !strings.Contains(err.Error(), cut) {
		t.Errorf("a plan of a cut file: %v", err)
	}
}

// mmprojOtherModel: beside a text model whose input embeddings are as
// wide as the projector's, the projector is planned; beside one of
// another width it is refused, naming the file and both widths, as mtmd
// refuses it.
func mmprojOtherModel(t *testing.T, path string) {
	rt := testenv.Runtime(t)
	mp, err := place.PlanMmproj(rt, path, place.MmprojOptions{})
	if err != nil {
		t.Fatal(err)
	}
	w := mp.Encoders[0].Embd
	for _, embd := range []int64{w, w + 2} {
		model := testenv.ModelFile(t, rt, synth.Spec{Layers: 1, Embd: embd, FF: 64, Heads: 2, Vocab: 300, Weights: ggml.TypeF16, Embeddings: ggml.TypeF16})
		p, err := place.New(context.Background(), rt, testenv.OpenModel(t, model), place.Params{})
		if err != nil {
			t.Fatal(err)
		}
		_, err = p.PlanMmproj(path, place.MmprojOptions{})
		if embd == w {
			if err != nil {
				t.Errorf("a projector of width %d beside a model of width %d: %v", w, embd, err)
			}
			continue
		}
		if err == nil {
			t.Fatalf("a projector of width %d planned beside a model of width %d", w, embd)
		}
		for _, s := range []string{path, fmt.Sprint(w), fmt.Sprint(embd)} {
			if !strings.Contains(err.Error(), s) {
				t.Errorf("%q does not name %s", err, s)
			}
		}
	}
}
