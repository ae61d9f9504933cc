package place

import (
	"fmt"

	"github.com/ggload/ggload/internal/replay"
	"github.com/ggload/ggload/internal/replay/arch"
)

// ContextReplay makes the plan's model and context anew, as llama.cpp's
// llama_init_from_model makes them with the plan's final parameters: the
// hyperparameters, the tensors (their placement is the plan's already),
// the context and its memory module. It is package infer's, which runs
// the context (infer.New); its type is internal.
func (p *Plan) ContextReplay() (*replay.Replay, error) {
	if p == nil || p.Model == nil {
		return nil, fmt.Errorf("place: no plan to replay")
	}
	if p.Params.Context.Skip {
		return nil, fmt.Errorf("place: the plan has no context (its context options say to skip it)")
	}
	h, err := readHparams(p.Model, p.Params)
	if err != nil {
		return nil, err
	}
	if !h.exact {
		return nil, fmt.Errorf("place: llama.cpp %s does not know architecture '%s': it has no graph to run", arch.Pin, h.shown)
	}
	if err := h.run.CreateTensors(keepCreator{}); err != nil {
		return nil, refused(p.Model, err)
	}
	out := &replay.Replay{Run: h.run}
	c, err := h.run.InitContext(p.Params.Context.llama(p.Params.SplitMode, len(p.TensorDevices)), func(level, msg string) {
		if level != "DEBUG" {
			out.Log = append(out.Log, level+" "+msg)
		}
	})
	if err != nil {
		return nil, refused(p.Model, err)
	}
	mem, err := h.run.CreateMemory(c.Memory())
	if err != nil {
		return nil, refused(p.Model, err)
	}
	out.Context, out.Memory = c, mem
	out.NGPULayers, out.NTensors = p.Params.NGPULayers.resolve(p.NLayer), p.weightTensors()
	return out, nil
}

// keepCreator takes the replay's tensors as they come: the plan placed
// them already.
type keepCreator struct{}

func (keepCreator) Place(*arch.Creation) error { return nil }
