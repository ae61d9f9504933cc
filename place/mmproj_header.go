package place

import (
	"fmt"
	"slices"

	"github.com/ggload/ggload/gguf"
)

// MmprojContext is one encoder of a projector file as the pin's clip
// loads it: a modality ("vision", "audio" or "gen_audio", each its own
// clip context with its own weight buffer), its projector type, and the
// width of the embeddings it hands the text model (clip_n_mmproj_embd).
type MmprojContext struct {
	Modality  string
	Projector string
	Embd      int64
}

// MmprojHeader is what a projector file's header says to clip.
type MmprojHeader struct {
	Path     string
	Contexts []MmprojContext
}

// mmprojWidth is where clip reads each projector type's output width
// (clip_n_mmproj_embd): a dimension of one of its tensors. The types of
// the special cases (mlp, qwen3vl_merger, granite4_vision) are handled
// in mmprojEmbd.
var mmprojWidth = map[string]struct {
	tensor string
	dim    int
}{
	"adapter":          {"adapter.linear.dense_4h_to_h.weight", 1},
	"cogvlm":           {"mm.down.weight", 1},
	"deepseek4v":       {"mm.2.weight", 1},
	"deepseekocr":      {"mm.model.fc.weight", 1},
	"deepseekocr2":     {"mm.model.fc.weight", 1},
	"dots3note_a":      {"mm.a.mlp.3.weight", 1},
	"dots3note_v":      {"mm.2.weight", 1},
	"dots_ocr":         {"mm.2.weight", 1},
	"exaone4_5":        {"mm.2.bias", 0},
	"gemma3":           {"mm.input_projection.weight", 0},
	"gemma3nv":         {"mm.input_projection.weight", 0},
	"gemma4a":          {"mm.a.input_projection.weight", 1},
	"gemma4ua":         {"mm.a.input_projection.weight", 1},
	"gemma4uv":         {"mm.input_projection.weight", 1},
	"gemma4v":          {"mm.input_projection.weight", 1},
	"glm4v":            {"mm.down.weight", 1},
	"glma":             {"mm.a.mlp.2.weight", 1},
	"granite_speech":   {"a.proj_linear.weight", 1},
	"hunyuanvl":        {"mm.model.fc.weight", 1},
	"idefics3":         {"mm.model.fc.weight", 1},
	"internvl":         {"mm.model.mlp.3.weight", 1},
	"janus_pro":        {"mm.1.bias", 0},
	"kimik25":          {"mm.2.weight", 1},
	"kimivl":           {"mm.2.weight", 1},
	"ldp":              {"mm.model.mb_block.1.block.2.1.bias", 0},
	"ldpv2":            {"mm.model.peg.0.bias", 0},
	"lfm2":             {"mm.2.weight", 1},
	"lfm2a":            {"a.position_embd.weight", 0},
	"lightonocr":       {"mm.2.weight", 1},
	"llama4":           {"mm.model.fc.weight", 1},
	"meralion":         {"mm.a.mlp.3.weight", 1},
	"mimo_audio":       {"mm.a.mlp.2.weight", 1},
	"mimovl":           {"mm.2.weight", 1},
	"minicpmv4_6":      {"mm.down.weight", 1},
	"minimax_m3":       {"mm.merger.fc2.bias", 0},
	"mlp":              {"mm.2.weight", 1},
	"muse-glimmer":     {"mm.2.weight", 1},
	"musicflamingo":    {"mm.a.mlp.2.weight", 1},
	"nemotron_v2_vl":   {"mm.model.mlp.3.weight", 1},
	"paddleocr":        {"mm.2.weight", 1},
	"parakeet":         {"mm.a.mlp.2.weight", 1},
	"phi4":             {"mm.2.weight", 1},
	"pixtral":          {"mm.2.weight", 1},
	"pockettts_gen":    {"a.gen.input_linear.weight", 1},
	"pockettts_spkenc": {"a.speaker_proj.weight", 1},
	"qwen2.5vl_merger": {"mm.2.bias", 0},
	"qwen2a":           {"mm.a.fc.weight", 1},
	"qwen2vl_merger":   {"mm.2.bias", 0},
	"qwen3a":           {"mm.a.mlp.2.weight", 1},
	"qwen3tts_gen":     {"a.gen.code.out_embd.weight", 0},
	"qwen3tts_spkenc":  {"mm.a.fc.weight", 2},
	"qwen3vl_merger":   {"mm.2.bias", 0},
	"resampler":        {"resampler.proj.weight", 0},
	"step3vl":          {"mm.model.fc.weight", 1},
	"ultravox":         {"mm.a.mlp.2.weight", 1},
	"voxtral":          {"mm.a.mlp.2.weight", 1},
	"yasa2":            {"mm.2.weight", 1},
	"youtuvl":          {"mm.2.bias", 0},
	// granite4_vision: feature layers × projection_dim (mmprojEmbd)
	"granite4_vision": {},
}

// ReadMmprojHeader reads a projector file's encoders as clip_init and
// mtmd's context do: which modalities it has, each one's projector type
// and output width, and the checks mtmd makes between them. Errors name
// the file.
func ReadMmprojHeader(path string, f *gguf.File) (*MmprojHeader, error) {
	flag := func(key string) bool {
		v, ok := f.Lookup(key)
		if !ok {
			return false
		}
		b, _ := v.Bool()
		return b
	}
	str := func(key string) string {
		v, ok := f.Lookup(key)
		if !ok {
			return ""
		}
		s, _ := v.Str()
		return s
	}
	h := &MmprojHeader{Path: path}
	add := func(modality, key, prefix string) error {
		typ := str("clip.projector_type")
		if typ == "" {
			typ = str(key)
		}
		if typ == "qwen2.5o" {
			// the legacy name of a file with both encoders
			typ = map[string]string{"vision": "qwen2.5vl_merger", "audio": "qwen2a"}[modality]
		}
		if _, ok := mmprojWidth[typ]; !ok {
			return fmt.Errorf("mmproj %s: unknown %s projector type %q", path, modality, typ)
		}
		embd, err := mmprojEmbd(f, typ, prefix)
		if err != nil {
			return fmt.Errorf("mmproj %s: %s projector %s: %w", path, modality, typ, err)
		}
		h.Contexts = append(h.Contexts, MmprojContext{Modality: modality, Projector: typ, Embd: embd})
		return nil
	}
	skipAudio := false
	if flag("clip.has_vision_encoder") {
		if err := add("vision", "clip.vision.projector_type", "vision"); err != nil {
			return nil, err
		}
		// clip leaves Gemma 3n's audio encoder out
		skipAudio = h.Contexts[0].Projector == "gemma3nv"
	}
	if flag("clip.has_audio_encoder") && !skipAudio {
		if err := add("audio", "clip.audio.projector_type", "audio"); err != nil {
			return nil, err
		}
	}
	if len(h.Contexts) == 0 {
		return nil, fmt.Errorf("mmproj %s: no vision or audio encoder (clip.has_vision_encoder, clip.has_audio_encoder)", path)
	}
	if flag("clip.has_gen_audio_encoder") {
		if err := add("gen_audio", "clip.gen.audio.projector_type", "gen.audio"); err != nil {
			return nil, err
		}
	}
	if v, a := h.Context("vision"), h.Context("audio"); v != nil && a != nil && v.Embd != a.Embd {
		return nil, fmt.Errorf("mmproj %s: its vision and audio encoders disagree on the output width (%d and %d)", path, v.Embd, a.Embd)
	}
	return h, nil
}

// Context returns the header's encoder of a modality, or nil.
func (h *MmprojHeader) Context(modality string) *MmprojContext {
	for i := range h.Contexts {
		if h.Contexts[i].Modality == modality {
			return &h.Contexts[i]
		}
	}
	return nil
}

// CheckText refuses a projector whose output width is not the text
// model's input embedding width (llama_model_n_embd_inp), as mtmd does
// when it opens a projector for a model.
func (h *MmprojHeader) CheckText(nEmbdInp int64) error {
	for _, c := range h.Contexts {
		if c.Modality == "gen_audio" {
			continue
		}
		if c.Embd != nEmbdInp {
			return fmt.Errorf("mmproj %s: made for another model: its %s encoder gives embeddings of width %d, the text model takes %d", h.Path, c.Modality, c.Embd, nEmbdInp)
		}
	}
	if c := h.Context("gen_audio"); c != nil && c.Embd != nEmbdInp {
		return fmt.Errorf("mmproj %s: made for another model: its audio generator gives embeddings of width %d, the text model takes %d", h.Path, c.Embd, nEmbdInp)
	}
	return nil
}

// mmprojEmbd is clip_n_mmproj_embd for a projector of type typ.
func mmprojEmbd(f *gguf.File, typ, prefix string) (int64, error) {
	dim := func(name string, d int) (int64, error) {
		i := slices.IndexFunc(f.Tensors, func(t gguf.TensorInfo) bool { return t.Name == name })
		if i < 0 {
			return 0, fmt.Errorf("no tensor %s, which gives the output width", name)
		}
		return f.Tensors[i].Shape[d], nil
	}
	has := func(name string) bool {
		return slices.ContainsFunc(f.Tensors, func(t gguf.TensorInfo) bool { return t.Name == name })
	}
	u := func(key string) int64 {
		v, ok := f.Lookup(key)
		if !ok {
			return 0
		}
		n, _ := v.Int()
		return n
	}
	switch typ {
	case "mlp":
		// a fourth projection layer makes clip load it as mlp_norm
		if has("mm.3.weight") {
			return dim("mm.3.bias", 0)
		}
	case "qwen3vl_merger":
		w, err := dim("mm.2.bias", 0)
		if err != nil {
			return 0, err
		}
		var deep int64
		for il := range u("clip." + prefix + ".block_count") {
			if has(fmt.Sprintf("v.deepstack.%d.fc1.weight", il)) {
				deep++
			}
		}
		return w * (1 + deep), nil
	case "granite4_vision":
		var n int64
		if v, ok := f.Lookup("clip." + prefix + ".feature_layer"); ok {
			n = int64(v.Len())
		}
		return n * u("clip."+prefix+".projection_dim"), nil
	}
	w := mmprojWidth[typ]
	return dim(w.tensor, w.dim)
}
