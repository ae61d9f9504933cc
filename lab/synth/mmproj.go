package synth

import (
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"

	"github.com/ggload/ggload/ggml"
	"github.com/ggload/ggload/gguf"
)

// A projector file (mmproj) is synthesized the way the architecture models
// are: write a small file, ask the pinned clip loader what is missing, add
// it, repeat. The loader is asked through a Tryer (lab/mtmd's oracle: the
// pin's clip.cpp in a process of its own); the metadata keys' types come
// from the pin's source, where clip_model_loader reads each key with a
// typed getter, since a key of the wrong type fails an assertion rather
// than an error.

// ProjectorTryer loads a projector file with the pin's clip loader and
// returns its answer.
type ProjectorTryer func(path string) (ProjectorAnswer, error)

// ProjectorAnswer is the clip loader's answer to a projector file.
type ProjectorAnswer struct {
	Err     string   // the loader's error, "" when it loaded
	Crashed bool     // the loader died (Err: its last words)
	Missing []string // the tensor names it looked up and did not find
}

// ProjectorPin is what the pin's source says about projectors: the
// projector type names, their modalities, and the metadata keys with the
// type their getter reads.
type ProjectorPin struct {
	Types    []string          // clip.projector_type values, in the pin's order
	Modality map[string]string // type → "vision", "audio", "gen_audio" or "both"
	keys     []projectorKey
}

type projectorKey struct {
	re     *regexp.Regexp
	getter string // bool, i32, u32, f32, string, arr_f32, arr_int
}

// ReadProjectorPin reads the projector types and keys from the pinned
// source tree src.
func ReadProjectorPin(src string) (*ProjectorPin, error) {
	dir := filepath.Join(src, "tools", "mtmd")
	impl, err := os.ReadFile(filepath.Join(dir, "clip-impl.h"))
	if err != nil {
		return nil, err
	}
	clip, err := os.ReadFile(filepath.Join(dir, "clip.cpp"))
	if err != nil {
		return nil, err
	}
	mtmd, err := os.ReadFile(filepath.Join(dir, "mtmd.cpp"))
	if err != nil {
		return nil, err
	}
	p := &ProjectorPin{Modality: map[string]string{}}
	enumName := map[string]string{}
	names := regexp.MustCompile(`(?s)PROJECTOR_TYPE_NAMES = \{(.*?)\n\};`).FindSubmatch(impl)
	if names == nil {
		return nil, fmt.Errorf("synth: no PROJECTOR_TYPE_NAMES in clip-impl.h")
	}
	for _, m := range regexp.MustCompile(`\{\s*(PROJECTOR_TYPE_\w+),\s*"([^"]+)"\s*\}`).FindAllSubmatch(names[1], -1) {
		p.Types = append(p.Types, string(m[2]))
		enumName[string(m[1])] = string(m[2])
	}
	// mtmd's init_audio lists the audio projectors; the generators are
	// the types clip loads as CLIP_MODALITY_GEN_AUDIO (named *_GEN)
	audio := regexp.MustCompile(`(?s)void init_audio\(\) \{(.*?)\n    \}`).FindSubmatch(mtmd)
	if audio == nil {
		return nil, fmt.Errorf("synth: no init_audio in mtmd.cpp")
	}
	for _, m := range regexp.MustCompile(`case (PROJECTOR_TYPE_\w+):`).FindAllSubmatch(audio[1], -1) {
		if n, ok := enumName[string(m[1])]; ok {
			p.Modality[n] = "audio"
		}
	}
	for e, n := range enumName {
		switch {
		case strings.HasSuffix(e, "_GEN"):
			p.Modality[n] = "gen_audio"
		case e == "PROJECTOR_TYPE_QWEN25O":
			p.Modality[n] = "both"
		case strings.HasSuffix(e, "NA") && p.Modality[n] == "":
			p.Modality[n] = "audio"
		case p.Modality[n] == "":
			p.Modality[n] = "vision"
		}
	}
	macros := map[string]string{}
	for _, m := range regexp.MustCompile(`#define\s+(KEY_\w+)\s+"([^"]+)"`).FindAllSubmatch(impl, -1) {
		macros[string(m[1])] = string(m[2])
	}
	seen := map[string]bool{}
	for _, m := range regexp.MustCompile(`get_(bool|i32|u32|f32|string|arr_f32|arr_int)\(\s*(?:string_format\(\s*)?(KEY_\w+)`).FindAllSubmatch(clip, -1) {
		macro := string(m[2])
		if seen[macro] || macros[macro] == "" {
			continue
		}
		seen[macro] = true
		pat := regexp.QuoteMeta(macros[macro])
		pat = strings.NewReplacer("%s", `[a-z.]+`, "%d", `[0-9]+`).Replace(pat)
		p.keys = append(p.keys, projectorKey{regexp.MustCompile("^" + pat + "$"), string(m[1])})
	}
	return p, nil
}

// Projector is a synthesized projector file.
type Projector struct {
	Type    string
	KV      []gguf.KV
	Tensors []ArchTensor
	Log     []string // what each step added
}

// ProjectorOptions shape a synthesized projector.
type ProjectorOptions struct {
	Embd   int64 // the encoder's width (default 32)
	Layers int   // block_count (default 2)
	// ProjDim is the projection's output width (default 32): the text
	// model's embedding width that the projector must match.
	ProjDim int64
	// Distinct gives every tensor dimensions of its own (the k-th tensor
	// added: a weight [ProjDim+2k+2, ProjDim+2k+1], a vector
	// [ProjDim+2k+2]), so that a width read from a tensor names it.
	Distinct bool
	// Unused adds, first in the file, a tensor that clip loads under no
	// name (UnusedProjectorTensor): what clip loads is then a strict
	// subset of the file.
	Unused bool
}

// UnusedProjectorTensor is the tensor Unused adds: named like a block's
// tensor, read by no projector type.
const UnusedProjectorTensor = "v.blk.0.unused.weight"

func (o *ProjectorOptions) defaults() {
	if o.Embd == 0 {
		o.Embd = 32
	}
	if o.Layers == 0 {
		o.Layers = 2
	}
	if o.ProjDim == 0 {
		o.ProjDim = 32
	}
}

// maxProjectorSteps bounds the additions of one projector.
const maxProjectorSteps = 800

// NewProjector synthesizes a projector of type typ, asking try until the
// loader accepts it. On failure it returns the projector as far as it got
// with the loader's last word.
func NewProjector(pin *ProjectorPin, typ string, dir string, try ProjectorTryer, o ProjectorOptions) (*Projector, error) {
	o.defaults()
	p := &Projector{Type: typ}
	mod := pin.Modality[typ]
	p.set("general.architecture", gguf.String("clip"))
	p.set("clip.projector_type", gguf.String(typ))
	if mod == "vision" || mod == "both" {
		p.set("clip.has_vision_encoder", gguf.Bool(true))
	}
	if mod == "audio" || mod == "both" {
		p.set("clip.has_audio_encoder", gguf.Bool(true))
	}
	if mod == "gen_audio" {
		p.set("clip.has_gen_audio_encoder", gguf.Bool(true))
	}
	if o.Unused {
		p.Tensors = append(p.Tensors, ArchTensor{Name: UnusedProjectorTensor, Type: ggml.TypeF32, Shape: []int64{8, 3}})
	}
	path := filepath.Join(dir, ProjectorFileName(typ))
	last := ""
	for step := 0; step < maxProjectorSteps; step++ {
		if err := p.WriteFile(path); err != nil {
			return p, err
		}
		a, err := try(path)
		if err != nil {
			return p, err
		}
		msg, crashed := a.Err, a.Crashed
		if msg == "" && !crashed {
			return p, nil
		}
		if msg != last && p.fix(pin, msg, o) {
			last = msg
			continue
		}
		// a crash, or an error the steps above do not know: the optional
		// tensors the loader looked for may be what it lacks (a projector
		// whose output width is read from one of them, a choice between
		// two tensor families)
		if p.addMissing(a.Missing, o) {
			last = msg
			continue
		}
		if crashed {
			return p, fmt.Errorf("synth: projector %s: clip crashed: %s", typ, msg)
		}
		return p, fmt.Errorf("synth: projector %s: %s", typ, msg)
	}
	return p, fmt.Errorf("synth: projector %s: still refused after %d steps: %s", typ, maxProjectorSteps, last)
}

// ProjectorFileName is the name NewProjector writes a type's file under.
func ProjectorFileName(typ string) string { return sanitize(typ) + ".gguf" }

func sanitize(s string) string {
	return strings.Map(func(r rune) rune {
		if r == '.' || r == '-' {
			return '_'
		}
		return r
	}, s)
}

func (p *Projector) set(key string, v gguf.Value) {
	for i := range p.KV {
		if p.KV[i].Key == key {
			p.KV[i].Value = v
			return
		}
	}
	p.KV = append(p.KV, gguf.KV{Key: key, Value: v})
}

var (
	reKeyMissing    = regexp.MustCompile(`(?:Key not found: |: missing )(clip\.\S+)`)
	reTensorMissing = regexp.MustCompile(`unable to find tensor (\S+)`)
	reScalar        = regexp.MustCompile(`expected scalar tensor '([^']+)'`)
	reRequires      = regexp.MustCompile(`requires ((?:v|a|mm)\.\S+?)"?\)`)
	reArrayLength   = regexp.MustCompile(`(clip\.\S+) length \((\d+)\) must equal (clip\.\S+) \((\d+)\)`)
	reFeatureLayers = regexp.MustCompile(`feature_layers.size\(\) (\d+) != \w+.size\(\) (\d+)`)
)

// fix adds what the loader's message msg asks for; false when it cannot.
func (p *Projector) fix(pin *ProjectorPin, msg string, o ProjectorOptions) bool {
	if m := reKeyMissing.FindStringSubmatch(msg); m != nil {
		for _, k := range pin.keys {
			if k.re.MatchString(m[1]) {
				p.set(m[1], keyDefault(m[1], k.getter, o))
				p.Log = append(p.Log, "key "+m[1])
				if strings.HasSuffix(m[1], "spatial_offsets") {
					// one projector per feature layer: the loader wants
					// as many of each
					p.set("clip.vision.feature_layer", intArray(1, 1))
				}
				return true
			}
		}
		return false
	}
	if m := reArrayLength.FindStringSubmatch(msg); m != nil {
		n, _ := strconv.Atoi(m[4])
		p.set(m[1], intArray(n, 2))
		p.Log = append(p.Log, "key "+m[1])
		return true
	}
	if m := reFeatureLayers.FindStringSubmatch(msg); m != nil {
		n, _ := strconv.Atoi(m[2])
		key := "clip.vision.feature_layer"
		if p.modality() == "audio" {
			key = "clip.audio.feature_layer"
		}
		p.set(key, intArray(n, 1))
		p.Log = append(p.Log, "key "+key)
		return true
	}
	if m := reRequires.FindStringSubmatch(msg); m != nil {
		msg = "unable to find tensor " + m[1]
	}
	if m := reTensorMissing.FindStringSubmatch(msg); m != nil {
		p.Tensors = append(p.Tensors, ArchTensor{Name: m[1], Type: projectorTensorType(m[1]), Shape: projectorShape(m[1], len(p.Tensors), o)})
		p.Log = append(p.Log, "tensor "+m[1])
		return true
	}
	if m := reScalar.FindStringSubmatch(msg); m != nil {
		for i := range p.Tensors {
			if p.Tensors[i].Name == m[1] {
				p.Tensors[i].Shape = []int64{1}
				p.Tensors[i].Type = ggml.TypeF32
				return true
			}
		}
		return false
	}
	if strings.Contains(msg, "image_mean/image_std") {
		three, _ := gguf.Array([]float32{0.5, 0.5, 0.5})
		p.set("clip.vision.image_mean", three)
		p.set("clip.vision.image_std", three)
		p.Log = append(p.Log, "image_mean, image_std")
		return true
	}
	return false
}

// keyDefault is a small value for a key, of the type clip reads it with.
func keyDefault(key, getter string, o ProjectorOptions) gguf.Value {
	last := key[strings.LastIndex(key, ".")+1:]
	switch getter {
	case "bool":
		return gguf.Bool(false)
	case "string":
		return gguf.String("")
	case "f32":
		if strings.Contains(key, "eps") {
			return gguf.Float32(1e-6)
		}
		return gguf.Float32(1)
	case "arr_f32":
		v, _ := gguf.Array([]float32{0.5, 0.5, 0.5})
		return v
	case "arr_int":
		if strings.Contains(key, "pattern") {
			return intArray(o.Layers, 0)
		}
		return intArray(1, 1)
	}
	var n int64 = 2
	switch last {
	case "embedding_length":
		n = o.Embd
	case "feed_forward_length":
		n = 2 * o.Embd
	case "block_count":
		n = int64(o.Layers)
	case "head_count", "head_count_kv":
		n = 4
	case "projection_dim":
		n = o.ProjDim
	case "image_size":
		n = 32
	case "patch_size":
		n = 8
	case "num_mel_bins":
		n = 16
	case "subsampling_factor":
		n = 8
	case "conv_kernel_size":
		n = 3
	case "num_quantizers":
		n = 1
	}
	if getter == "i32" {
		return gguf.Int32(int32(n))
	}
	return gguf.Uint32(uint32(n))
}

// addMissing adds the tensors the loader looked up and did not find;
// false when there are none.
func (p *Projector) addMissing(names []string, o ProjectorOptions) bool {
	added := false
	for _, n := range names {
		if strings.Contains(n, "%") || p.has(n) {
			continue
		}
		p.Tensors = append(p.Tensors, ArchTensor{Name: n, Type: projectorTensorType(n), Shape: projectorShape(n, len(p.Tensors), o)})
		p.Log = append(p.Log, "optional tensor "+n)
		added = true
	}
	return added
}

func (p *Projector) has(name string) bool {
	for _, t := range p.Tensors {
		if t.Name == name {
			return true
		}
	}
	return false
}

// intArray is an int32 array of n copies of v.
func intArray(n int, v int32) gguf.Value {
	a := make([]int32, n)
	for i := range a {
		a[i] = v
	}
	arr, _ := gguf.Array(a)
	return arr
}

func (p *Projector) modality() string {
	for _, kv := range p.KV {
		if kv.Key == "clip.has_audio_encoder" {
			return "audio"
		}
	}
	return "vision"
}

func projectorTensorType(name string) ggml.Type {
	return ggml.TypeF32
}

// projectorShape is a small shape for a tensor: a matrix for a weight,
// a vector for the rest.
func projectorShape(name string, k int, o ProjectorOptions) []int64 {
	d := o.ProjDim
	if o.Distinct {
		d += int64(2*k + 1)
	}
	if strings.HasSuffix(name, ".weight") {
		if o.Distinct {
			return []int64{d + 1, d}
		}
		return []int64{o.Embd, d}
	}
	if o.Distinct {
		d++
	}
	return []int64{d}
}

// WriteFile writes the projector; its tensors are zeros, left as holes.
func (p *Projector) WriteFile(path string) error {
	w := gguf.NewWriter()
	for _, kv := range p.KV {
		if err := w.Set(kv.Key, kv.Value); err != nil {
			return err
		}
	}
	for _, t := range p.Tensors {
		if err := w.AddTensor(t.Name, t.Type, t.Shape, zeros); err != nil {
			return fmt.Errorf("synth: %s: %w", t.Name, err)
		}
	}
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	size, err := w.WriteMetadata(f)
	if err == nil {
		err = f.Truncate(size)
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	return err
}

// ProjectorTypes returns the pin's projector types, sorted.
func (pin *ProjectorPin) ProjectorTypes() []string {
	out := append([]string(nil), pin.Types...)
	sort.Strings(out)
	return out
}
