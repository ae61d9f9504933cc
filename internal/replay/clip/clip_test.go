package clip_test

import (
	"encoding/binary"
	"errors"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/ggload/ggload/ggml"
	"github.com/ggload/ggload/gguf"
	"github.com/ggload/ggload/internal/replay/clip"
	"github.com/ggload/ggload/internal/replay/cpp"
	"github.com/ggload/ggload/lab/synth"
	"github.com/ggload/ggload/lab/testenv"
)

func TestMain(m *testing.M) { testenv.Main(m) }

// modalities are the encoders a projector file says it has.
func modalities(f *gguf.File) []string {
	var out []string
	for _, m := range clip.Modalities {
		if v, ok := f.Lookup("clip.has_" + m + "_encoder"); ok {
			if b, _ := v.Bool(); b {
				out = append(out, m)
			}
		}
	}
	return out
}

// replayJudge answers the projector synthesizer as the pin's clip loader
// would, by replaying it: the first encoder's refusal, in clip's words.
// (tests/mmproj_test.go synthesizes with libmtmd itself as the judge and
// holds the replay to it.)
func replayJudge(path string) (synth.ProjectorAnswer, error) {
	f, err := gguf.Open(path)
	if err != nil {
		return synth.ProjectorAnswer{}, err
	}
	defer f.Close()
	for _, m := range modalities(f) {
		if _, err := clip.Load(path, f, m); err != nil {
			var ce *clip.Error
			if !errors.As(err, &ce) {
				return synth.ProjectorAnswer{}, err
			}
			return synth.ProjectorAnswer{Err: ce.Msg}, nil
		}
	}
	return synth.ProjectorAnswer{}, nil
}

// warmer replays the warm-up of each encoder of a projector file on the
// CPU, telling learn each op that fails (synth's Warm reshapes the
// projector's tensors by it).
func warmer(rt *ggml.Runtime) synth.ProjectorWarmer {
	cpu := rt.CPUDevice().Handle()
	return func(path string, learn func(string, []clip.OpArg)) error {
		f, err := gguf.Open(path)
		if err != nil {
			return err
		}
		defer f.Close()
		for _, m := range modalities(f) {
			e, err := clip.Load(path, f, m)
			if err != nil {
				return err
			}
			if _, err := e.Warmup(clip.WarmupParams{Lib: rt.Ops(), Device: cpu, CPU: cpu, FlashAttn: clip.FlashAttnAuto, Learn: learn}); err != nil {
				return err
			}
		}
		return nil
	}
}

// projector synthesizes a projector of type typ whose warm-up builds,
// with the replay as its judge, and writes it into dir.
func projector(t *testing.T, typ, dir string) (*synth.Projector, string) {
	t.Helper()
	pin, err := synth.ReadProjectorPin(testenv.SourceTree(t))
	if err != nil {
		t.Fatal(err)
	}
	p, err := synth.NewProjector(pin, typ, dir, replayJudge, synth.WarmProjectorOptions(typ))
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(dir, synth.ProjectorFileName(typ))
	if err := p.Warm(path, warmer(testenv.Runtime(t))); err != nil {
		t.Fatal(err)
	}
	return p, path
}

// load loads the encoder modality of the projector file at path.
func load(t *testing.T, path, modality string, o clip.Options) *clip.Encoder {
	t.Helper()
	f, err := gguf.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { f.Close() })
	e, err := clip.LoadWith(path, f, modality, o)
	if err != nil {
		t.Fatal(err)
	}
	return e
}

// The projector types the tests synthesize: vision encoders of several
// families, an audio encoder, and one of both (GGLOAD_CLIP_ALL=1: every
// type the pin loads).
var projectorTypes = []string{"gemma3", "qwen2vl_merger", "pixtral", "lfm2", "idefics3", "ultravox", "qwen2.5o", "llama4", "gemma4v"}

// Projectors of several types, synthesized until the replayed loader
// takes them, then reshaped until their warm-up graphs build: each
// encoder loads every tensor of the file but the one no type reads, hands
// the text model embeddings of the projection's width, and its warm-up
// graph is built from ggml's real ops and reserved by the CPU backend's
// scheduler, the same twice; flash attention, where automatic, is
// resolved on for the CPU.
func TestLoadAndWarmup(t *testing.T) {
	rt := testenv.Runtime(t)
	pin, err := synth.ReadProjectorPin(testenv.SourceTree(t))
	if err != nil {
		t.Fatal(err)
	}
	cpu := rt.CPUDevice().Handle()
	params := clip.WarmupParams{Lib: rt.Ops(), Device: cpu, CPU: cpu, FlashAttn: clip.FlashAttnAuto}
	warm := warmer(rt)
	dir := t.TempDir()
	types, all := projectorTypes, os.Getenv("GGLOAD_CLIP_ALL") != ""
	if all {
		types = pin.ProjectorTypes()
	}
	for _, typ := range types {
		t.Run(typ, func(t *testing.T) {
			o := synth.WarmProjectorOptions(typ)
			o.Unused = true
			p, err := synth.NewProjector(pin, typ, dir, replayJudge, o)
			if err == nil {
				err = p.Warm(filepath.Join(dir, synth.ProjectorFileName(typ)), warm)
			}
			switch {
			case err != nil && all:
				// the replayed judge cannot tell the synthesizer what
				// libmtmd's can (the tensors it looked for)
				t.Skipf("not synthesized without libmtmd: %v", err)
			case err != nil:
				t.Fatal(err)
			}
			path := filepath.Join(dir, synth.ProjectorFileName(typ))
			f, err := gguf.Open(path)
			if err != nil {
				t.Fatal(err)
			}
			defer f.Close()
			mods := modalities(f)
			if len(mods) == 0 || pin.Modality[typ] == "both" && len(mods) != 2 {
				t.Fatalf("encoders %v of a %s projector", mods, pin.Modality[typ])
			}
			var loaded []string
			for _, m := range mods {
				e, err := clip.Load(path, f, m)
				if err != nil {
					t.Fatal(err)
				}
				if e.Modality != m || e.Projector == "" || e.Embd <= 0 || len(e.Tensors) == 0 {
					t.Fatalf("%s encoder: %+v", m, e)
				}
				if w, ok := e.Int("image_size"); m == "vision" && (!ok || w <= 0) {
					t.Errorf("vision encoder: image_size %d, %v", w, ok)
				}
				for _, ti := range e.Tensors {
					loaded = append(loaded, ti.Name)
				}
				w1, err := e.Warmup(params)
				if err != nil {
					t.Fatal(err)
				}
				if m == "gen_audio" {
					// clip_init warms no encoder for audio generation
					if w1.Nodes != 0 || len(w1.Buffers) != 0 {
						t.Errorf("gen_audio warm-up: %+v", w1)
					}
					continue
				}
				w2, err := e.Warmup(params)
				if err != nil {
					t.Fatal(err)
				}
				if w1.Nodes <= 0 || len(w1.Buffers) != 1 || w1.Buffers[0].Bytes == 0 || w1.Buffers[0].Dev != cpu {
					t.Errorf("%s warm-up: %+v", m, w1)
				}
				if w1.Nodes != w2.Nodes || w1.Buffers[0].Bytes != w2.Buffers[0].Bytes || w1.Splits != w2.Splits {
					t.Errorf("%s warm-up: %+v, then %+v", m, w1, w2)
				}
				if len(w1.Unsupported) != 0 {
					t.Errorf("%s warm-up: the CPU runs not %v", m, w1.Unsupported)
				}
			}
			// every tensor of the file is some encoder's, but the unused
			// one (over every type, the one that no encoder reads)
			for _, ti := range f.Tensors {
				got := slices.Contains(loaded, ti.Name)
				if unused := ti.Name == synth.UnusedProjectorTensor; got == unused && (!all || unused) {
					t.Errorf("%s: loaded %v", ti.Name, got)
				}
			}
		})
	}
}

// clip refuses, in its words and naming the file, what its loader
// refuses: an unknown modality, a file without a projector type, a
// tensor the file lacks.
func TestRefusals(t *testing.T) {
	dir := t.TempDir()
	write := func(name string, kv []gguf.KV) (string, *gguf.File) {
		t.Helper()
		w := gguf.NewWriter()
		for _, x := range kv {
			if err := w.Set(x.Key, x.Value); err != nil {
				t.Fatal(err)
			}
		}
		path := filepath.Join(dir, name)
		if err := w.WriteFile(path); err != nil {
			t.Fatal(err)
		}
		f, err := gguf.Open(path)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { f.Close() })
		return path, f
	}
	path, f := write("bare.gguf", []gguf.KV{{Key: "general.architecture", Value: gguf.String("clip")}, {Key: "clip.has_vision_encoder", Value: gguf.Bool(true)}})
	if _, err := clip.Load(path, f, "smell"); err == nil || !strings.Contains(err.Error(), `unknown modality "smell"`) {
		t.Errorf("an unknown modality: %v", err)
	}
	_, err := clip.Load(path, f, "vision")
	var ce *clip.Error
	if !errors.As(err, &ce) || !strings.Contains(err.Error(), path) || !strings.Contains(err.Error(), "vision encoder") {
		t.Errorf("a file without a projector: %v", err)
	}
	path, f = write("gemma3.gguf", []gguf.KV{{Key: "general.architecture", Value: gguf.String("clip")}, {Key: "clip.has_vision_encoder", Value: gguf.Bool(true)},
		{Key: "clip.projector_type", Value: gguf.String("gemma3")}})
	if _, err := clip.Load(path, f, "vision"); !errors.As(err, &ce) {
		t.Errorf("a gemma3 projector without its keys and tensors: %v", err)
	} else {
		t.Logf("clip: %s", ce.Msg)
	}
}

// The warm-up on a GPU (Vulkan0): the scheduler's buffers are the
// device's, then the CPU's; the graph is the CPU's where flash attention
// resolves the same; what the device cannot run is said, as clip warns of
// it; flash attention asked for where the device lacks it falls back with
// clip's warning.
func TestWarmupOnAGPU(t *testing.T) {
	rt := testenv.Runtime(t)
	vk := testenv.Vulkan(t)
	lib, cpu := rt.Ops(), rt.CPUDevice().Handle()
	_, path := projector(t, "gemma3", t.TempDir())
	e := load(t, path, "vision", clip.Options{})
	onCPU, err := e.Warmup(clip.WarmupParams{Lib: lib, Device: cpu, CPU: cpu, FlashAttn: clip.FlashAttnAuto})
	if err != nil {
		t.Fatal(err)
	}
	for _, fa := range []int{clip.FlashAttnAuto, clip.FlashAttnEnabled, clip.FlashAttnDisabled} {
		w, err := e.Warmup(clip.WarmupParams{Lib: lib, Device: vk.Handle(), CPU: cpu, FlashAttn: fa})
		if err != nil {
			t.Fatal(err)
		}
		if len(w.Buffers) != 2 || w.Buffers[0].Dev != vk.Handle() || w.Buffers[1].Dev != cpu || w.Buffers[0].Bytes == 0 {
			t.Errorf("flash attention %d: buffers %+v", fa, w.Buffers)
		}
		if w.FlashAttn == onCPU.FlashAttn && w.Nodes != onCPU.Nodes {
			t.Errorf("flash attention %d: %d nodes on Vulkan0, %d on the CPU", fa, w.Nodes, onCPU.Nodes)
		}
		warned := slices.ContainsFunc(w.Log, func(l string) bool { return strings.Contains(l, "unsupported operators by the backend") })
		if warned != (len(w.Unsupported) > 0) {
			t.Errorf("flash attention %d: unsupported %v, log %q", fa, w.Unsupported, w.Log)
		}
		if fa == clip.FlashAttnDisabled && w.FlashAttn {
			t.Errorf("flash attention disabled, and on")
		}
		t.Logf("flash attention %d: on %v, %d nodes, %d splits, unsupported %v, log %q", fa, w.FlashAttn, w.Nodes, w.Splits, w.Unsupported, w.Log)
	}
	if _, err := e.Warmup(clip.WarmupParams{Device: cpu, CPU: cpu}); err == nil || !strings.Contains(err.Error(), "without the native library") {
		t.Errorf("no library: %v", err)
	}
}

// --image-min-tokens and --image-max-tokens reach a dynamic-resolution
// encoder's limits before its hyperparameters are read, as
// clip_hparams::set_limit_image_tokens takes them (LFM2's: 64 to 256
// tokens of patch_size² · n_merge² pixels by default), and the warm-up of
// fewer tokens takes less compute memory.
func TestImageTokens(t *testing.T) {
	rt := testenv.Runtime(t)
	cpu := rt.CPUDevice().Handle()
	_, path := projector(t, "lfm2", t.TempDir())
	def := load(t, path, "vision", clip.Options{})
	few := load(t, path, "vision", clip.Options{ImageMinTokens: 4, ImageMaxTokens: 16})
	patch, _ := few.Int("patch_size")
	merge, _ := few.Int("n_merge")
	area := patch * patch * merge * merge
	get := func(e *clip.Encoder, name string) int64 {
		v, ok := e.Int(name)
		if !ok {
			t.Fatalf("no %s", name)
		}
		return v
	}
	if area <= 0 || get(def, "image_min_pixels") != 64*area || get(def, "image_max_pixels") != 256*area ||
		get(few, "image_min_pixels") != 4*area || get(few, "image_max_pixels") != 16*area ||
		get(few, "warmup_image_size") != int64(math.Sqrt(float64(16*area))) {
		t.Errorf("patch area %d: pixels %d to %d by default, %d to %d (warm-up %d) with 4 to 16 tokens", area,
			get(def, "image_min_pixels"), get(def, "image_max_pixels"), get(few, "image_min_pixels"), get(few, "image_max_pixels"), get(few, "warmup_image_size"))
	}
	p := clip.WarmupParams{Lib: rt.Ops(), Device: cpu, CPU: cpu, FlashAttn: clip.FlashAttnAuto}
	wd, err := def.Warmup(p)
	if err != nil {
		t.Fatal(err)
	}
	wf, err := few.Warmup(p)
	if err != nil {
		t.Fatal(err)
	}
	if wf.Buffers[0].Bytes >= wd.Buffers[0].Bytes {
		t.Errorf("compute buffer with 16 tokens at most %d bytes, by default %d", wf.Buffers[0].Bytes, wd.Buffers[0].Bytes)
	}
}

// An audio encoder whose mel bins clip's dummy batch cannot make is
// refused in clip's words, naming the file.
func TestAudioMelBins(t *testing.T) {
	rt := testenv.Runtime(t)
	cpu := rt.CPUDevice().Handle()
	dir := t.TempDir()
	p, _ := projector(t, "ultravox", dir)
	for i, kv := range p.KV {
		if kv.Key == "clip.audio.num_mel_bins" {
			p.KV[i].Value = gguf.Uint32(0)
		}
	}
	path := filepath.Join(dir, "no-mels.gguf")
	if err := p.WriteFile(path); err != nil {
		t.Fatal(err)
	}
	f, err := gguf.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	e, err := clip.Load(path, f, "audio")
	if err == nil {
		_, err = e.Warmup(clip.WarmupParams{Lib: rt.Ops(), Device: cpu, CPU: cpu})
	}
	var ce *clip.Error
	if !errors.As(err, &ce) || !strings.Contains(err.Error(), "n_mel_bins") || !strings.Contains(err.Error(), path) {
		t.Errorf("0 mel bins: %v", err)
	}
}

// withScalars copies the projector file at src to dst with f32 tensors
// added: name → its values.
func withScalars(t *testing.T, src, dst string, add map[string][]float32, typ ggml.Type) {
	t.Helper()
	f, err := gguf.Open(src)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	w := gguf.NewWriter()
	for k, v := range f.Pairs() {
		if err := w.Set(k, v); err != nil {
			t.Fatal(err)
		}
	}
	for _, ti := range f.Tensors {
		if err := w.AddTensorReader(ti.Name, ti.Type, ti.Shape[:max(ti.NDims, 1)], f.Data(ti)); err != nil {
			t.Fatal(err)
		}
	}
	for name, vals := range add {
		var b []byte
		for _, v := range vals {
			if typ == ggml.TypeF16 {
				b = binary.LittleEndian.AppendUint16(b, 0x3c00) // 1.0
			} else {
				b = binary.LittleEndian.AppendUint32(b, math.Float32bits(v))
			}
		}
		if err := w.AddTensorBytes(name, typ, []int64{int64(len(vals))}, b); err != nil {
			t.Fatal(err)
		}
	}
	if err := w.WriteFile(dst); err != nil {
		t.Fatal(err)
	}
}

// Gemma 4's clippable linears read their clamps from scalar tensors of
// the file (get_scalar: the tensor's f32 data read at its offset): the
// values written are the model's clamp_info, the bounds not written
// FLT_MAX; a clamp of another type, or of more than one value, is refused
// in clip's words.
func TestClampScalars(t *testing.T) {
	dir := t.TempDir()
	_, path := projector(t, "gemma4v", dir)
	e := load(t, path, "vision", clip.Options{})
	var weight string
	for _, ti := range e.Tensors {
		if strings.HasSuffix(ti.Name, ".weight") && strings.Contains(ti.Name, "blk.") {
			weight = ti.Name
			break
		}
	}
	if weight == "" {
		t.Fatal("no block weight")
	}
	base := strings.TrimSuffix(weight, ".weight")
	clamped := filepath.Join(dir, "clamped.gguf")
	withScalars(t, path, clamped, map[string][]float32{base + ".input_max": {2.5}, base + ".output_min": {-7.25}}, ggml.TypeF32)
	e = load(t, clamped, "vision", clip.Options{})
	m, ok := e.Model.Fields["clamp_info_map"].V.P.(*cpp.Map)
	if !ok {
		t.Fatal("no clamp_info_map")
	}
	i := m.Find(cpp.Str(weight))
	if i < 0 {
		t.Fatalf("no clamp of %s among %d", weight, len(m.Keys))
	}
	ci := m.Vals[i].V.P.(*cpp.Object)
	got := [4]float64{ci.Fields["inp_max"].V.F, ci.Fields["inp_min"].V.F, ci.Fields["out_max"].V.F, ci.Fields["out_min"].V.F}
	if want := [4]float64{2.5, -math.MaxFloat32, math.MaxFloat32, -7.25}; got != want {
		t.Errorf("clamp of %s: %v, want %v", weight, got, want)
	}
	for _, c := range []struct {
		name string
		vals []float32
		typ  ggml.Type
		want string
	}{
		{"f16.gguf", []float32{1}, ggml.TypeF16, "must be f32, was f16"},
		{"pair.gguf", []float32{1, 2}, ggml.TypeF32, "expected scalar tensor '" + base + ".input_max' but got 2 elements"},
	} {
		bad := filepath.Join(dir, c.name)
		withScalars(t, path, bad, map[string][]float32{base + ".input_max": c.vals}, c.typ)
		f, err := gguf.Open(bad)
		if err != nil {
			t.Fatal(err)
		}
		_, err = clip.Load(bad, f, "vision")
		f.Close()
		var ce *clip.Error
		if !errors.As(err, &ce) || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: %v, want clip's %q", c.name, err, c.want)
		}
	}
}

// Each metadata key a projector's encoder reads, given a value of
// another type (a string for a number or a flag, a number for a string,
// a scalar for an array, an array of strings for an array of numbers),
// is refused in clip's words, naming the key: gguf's accessors assert on
// a type they were not asked for, and clip's array getters throw. A
// uint32 past INT32_MAX is refused by get_u32.
func TestKeyTypes(t *testing.T) {
	dir := t.TempDir()
	for _, typ := range []string{"gemma3", "ultravox", "qwen2vl_merger"} {
		p, _ := projector(t, typ, dir)
		var refused, read int
		for i, kv := range p.KV {
			if kv.Key == "general.architecture" || kv.Key == "clip.projector_type" || strings.HasPrefix(kv.Key, "clip.has_") {
				continue
			}
			q := *p
			q.KV = slices.Clone(p.KV)
			var other gguf.Value
			switch {
			case kv.Value.IsArray():
				other, _ = gguf.Array([]string{"x"})
			case kv.Value.Kind() == gguf.TypeString:
				other = gguf.Uint32(7)
			default:
				other = gguf.String("x")
			}
			q.KV[i].Value = other
			path := filepath.Join(dir, typ+"-bad.gguf")
			if err := q.WriteFile(path); err != nil {
				t.Fatal(err)
			}
			f, err := gguf.Open(path)
			if err != nil {
				t.Fatal(err)
			}
			for _, m := range modalities(f) {
				_, err = clip.Load(path, f, m)
				if err != nil {
					break
				}
			}
			f.Close()
			var ce *clip.Error
			switch {
			case err == nil:
				read++ // a key this encoder reads not, or reads where another type is taken
			case !errors.As(err, &ce) || !strings.Contains(err.Error(), kv.Key):
				t.Errorf("%s: %s of another type: %v", typ, kv.Key, err)
			default:
				refused++
			}
		}
		t.Logf("%s: %d keys of another type refused, %d taken", typ, refused, read)
		if refused < 3 {
			t.Errorf("%s: %d keys of another type refused", typ, refused)
		}
		// get_u32's bound
		q := *p
		q.KV = slices.Clone(p.KV)
		for i, kv := range q.KV {
			if kv.Value.Kind() == gguf.TypeUint32 && !kv.Value.IsArray() && strings.HasSuffix(kv.Key, "block_count") {
				q.KV[i].Value = gguf.Uint32(1 << 31)
			}
		}
		path := filepath.Join(dir, typ+"-big.gguf")
		if err := q.WriteFile(path); err != nil {
			t.Fatal(err)
		}
		f, err := gguf.Open(path)
		if err != nil {
			t.Fatal(err)
		}
		_, err = clip.Load(path, f, modalities(f)[0])
		f.Close()
		if err == nil || !strings.Contains(err.Error(), "exceeds INT32_MAX") {
			t.Errorf("%s: a block count of 2^31: %v", typ, err)
		}
	}
}
