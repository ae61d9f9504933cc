package place

import (
	"fmt"

	"github.com/ggload/ggload/gguf"
	"github.com/ggload/ggload/internal/replay/clip"
)

// MmprojContext is one encoder of a projector file as the pin's clip
// loads it: a modality ("vision", "audio" or "gen_audio", each its own
// clip context with its own weight buffer), its projector type, and the
// width of the embeddings it hands the text model (clip_n_mmproj_embd).
type MmprojContext struct {
	Modality  string
	Projector string
	Embd      int64
	// Tensors are the tensors clip loads for this encoder, in the order
	// it creates them (the order of its weight buffer).
	Tensors []MmprojTensor

	enc *clip.Encoder // the replay of clip's loader, for the warm-up
}

// MmprojHeader is what a projector file's header says to clip.
type MmprojHeader struct {
	Path     string
	Contexts []MmprojContext
}

// ReadMmprojHeader reads a projector file's encoders as clip_init and
// mtmd's context do: which modalities it has, each one's projector type
// and output width, and the checks mtmd makes between them. Errors name
// the file.
func ReadMmprojHeader(path string, f *gguf.File) (*MmprojHeader, error) {
	return readMmprojHeader(path, f, clip.Options{})
}

func readMmprojHeader(path string, f *gguf.File, o clip.Options) (*MmprojHeader, error) {
	flag := func(key string) bool {
		v, ok := f.Lookup(key)
		if !ok {
			return false
		}
		b, _ := v.Bool()
		return b
	}
	h := &MmprojHeader{Path: path}
	add := func(modality string) error {
		tensors, e, err := mmprojTensors(path, f, modality, o)
		if err != nil {
			return err // it names the file and the encoder
		}
		h.Contexts = append(h.Contexts, MmprojContext{Modality: modality, Projector: e.Projector, Embd: e.Embd, Tensors: tensors, enc: e})
		return nil
	}
	skipAudio := false
	if flag("clip.has_vision_encoder") {
		if err := add("vision"); err != nil {
			return nil, err
		}
		// clip leaves Gemma 3n's audio encoder out
		skipAudio = h.Contexts[0].Projector == "gemma3nv"
	}
	if flag("clip.has_audio_encoder") && !skipAudio {
		if err := add("audio"); err != nil {
			return nil, err
		}
	}
	if len(h.Contexts) == 0 {
		return nil, fmt.Errorf("mmproj %s: no vision or audio encoder (clip.has_vision_encoder, clip.has_audio_encoder)", path)
	}
	if flag("clip.has_gen_audio_encoder") {
		if err := add("gen_audio"); err != nil {
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
