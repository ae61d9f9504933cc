package place

import (
	"errors"
	"fmt"

	"github.com/ggload/ggload/ggml"
	"github.com/ggload/ggload/gguf"
	"github.com/ggload/ggload/internal/replay/arch"
)

// ErrUnknownTensor is wrapped by New's error for a tensor name that
// llama.cpp's tensor info table does not know.
var ErrUnknownTensor = errors.New("unknown tensor")

// createTensors places the model's tensors in llama.cpp's creation order:
// the architecture's own tensor creation, replayed (the exact path), or,
// for an architecture the pin does not know, every file tensor by its
// name (the generic path).
func (pl *planner) createTensors() error {
	pl.p.Tensors = make([]TensorPlan, 0, len(pl.m.Weights)+pl.h.nLayerAll+1)
	if pl.h.exact {
		if err := pl.h.run.CreateTensors(creator{pl}); err != nil {
			var pe *placeError
			if errors.As(err, &pe) {
				return pe.err
			}
			return refused(pl.m, err)
		}
		return nil
	}
	return pl.createGeneric()
}

// creator receives the replay's tensors.
type creator struct{ pl *planner }

// placeError carries an error of placement itself (no buffer type can run
// a tensor's op) through the replay.
type placeError struct{ err error }

func (e *placeError) Error() string { return e.err.Error() }

func (c creator) Place(cr *arch.Creation) error {
	pl := c.pl
	info, ok := tensorInfo(arch.Info{Kind: cr.Kind, Class: cr.Class, Op: cr.Op})
	if !ok {
		return &placeError{fmt.Errorf("place: tensor %s: ggload has no probe for op %s", cr.Name, cr.Op)}
	}
	if cr.Skip {
		pl.unused(cr.Weight, info, cr.Bid)
		return nil
	}
	il := cr.Bid
	if info.Layer != LayerRepeating {
		il = 0
	}
	if err := pl.place(cr.Weight, info, il, cr.Dup, cr.Lazy, ggml.Shape(cr.Shape)); err != nil {
		return &placeError{err}
	}
	return nil
}

// unused records a tensor the model holds but does not use (TENSOR_SKIP,
// or a kind with no op), as llama.cpp warns of it.
func (pl *planner) unused(w *gguf.Weight, info TensorInfo, il int) {
	pl.p.warn(fmt.Sprintf("model has unused tensor %s (size = %d bytes) -- ignoring", w.Name, w.Size))
	pl.p.Tensors = append(pl.p.Tensors, TensorPlan{Name: w.Name, Type: w.Type, Shape: w.Shape, Bytes: w.Size,
		Class: info.Layer, Layer: il, Op: info.Op, Reason: ReasonUnused, Context: -1, Weight: w})
}

// createGeneric places every tensor of a model whose architecture the pin
// does not know by its name: its kind from llama.cpp's table, its layer
// from the name. What most architectures do is done here too: the token
// embedding is used again as the output when the model has none, and a
// rope tensor without a layer number is used by every layer.
func (pl *planner) createGeneric() error {
	p := pl.p
	p.warn(fmt.Sprintf("place: llama.cpp %s does not know architecture '%s': its tensors are placed by their names (the generic path)", arch.Pin, pl.h.shown))
	type item struct {
		w     *gguf.Weight
		info  TensorInfo
		layer int
	}
	var head, layers []item
	for i := range pl.m.Weights {
		w := &pl.m.Weights[i]
		info, layer, ok := LookupTensor(w.Name)
		if !ok {
			file := ""
			if len(pl.m.Paths) > 0 {
				file = pl.m.Paths[0] + ": "
			}
			return fmt.Errorf("place: %s%w: missing tensor info mapping for %s (llama.cpp %s does not know architecture '%s')",
				file, ErrUnknownTensor, w.Name, arch.Pin, pl.h.arch)
		}
		if info.Layer == LayerRepeating && layer >= 0 {
			layers = append(layers, item{w, info, layer})
		} else {
			head = append(head, item{w, info, layer})
		}
	}
	_, hasOutput := pl.m.Weight("output.weight")
	for _, it := range head {
		if it.info.Op == ggml.OpNone {
			pl.unused(it.w, it.info, 0)
			continue
		}
		if it.info.Layer == LayerRepeating && it.info.Op == ggml.OpRope {
			// one rope tensor for every layer: the first creation owns it
			for il := 0; il < pl.h.nLayerAll-pl.h.nLayerNextn; il++ {
				if err := pl.place(it.w, it.info, il, il > 0, false, it.w.Shape); err != nil {
					return err
				}
			}
			continue
		}
		if err := pl.place(it.w, it.info, 0, false, false, it.w.Shape); err != nil {
			return err
		}
		if it.w.Name == "token_embd.weight" && !hasOutput {
			out, _ := arch.KindInfo("OUTPUT")
			info, _ := tensorInfo(out)
			if err := pl.place(it.w, info, 0, true, false, it.w.Shape); err != nil {
				return err
			}
		}
	}
	for _, it := range layers {
		if it.info.Op == ggml.OpNone {
			pl.unused(it.w, it.info, it.layer)
			continue
		}
		if it.layer >= pl.h.nLayerAll {
			return fmt.Errorf("place: tensor %s is in layer %d of a %d-layer model", it.w.Name, it.layer, pl.h.nLayerAll)
		}
		if err := pl.place(it.w, it.info, it.layer, false, false, it.w.Shape); err != nil {
			return err
		}
	}
	return nil
}
