package place

import (
	"fmt"

	"github.com/ggload/ggload/ggml"
	"github.com/ggload/ggload/internal/replay/arch"
)

// Split mode tensor: the pinned llama.cpp makes one ggml meta device of the
// model's devices and places layers on it as on one GPU; the meta device
// holds each tensor in slices over its devices, as a callback of the model
// says (llama_meta_device_get_split_state). Both that callback and the
// list of architectures that take split mode tensor are the pin's own
// code, replayed by internal/replay/arch; this file asks them per tensor and
// checks, before any native call, what ggml's meta buffer asserts of the
// answer.

// tensorSplitter computes split states for a model on a meta device of n
// devices with llama.cpp's tensor split (its 16 floats).
type tensorSplitter struct {
	run *arch.Run
	d   arch.SplitDevices
}

func newTensorSplitter(h *hparams, n int, ts []float32, tensor func(string) (arch.Tensor, bool)) *tensorSplitter {
	s := &tensorSplitter{run: h.run, d: arch.SplitDevices{N: n, Lookup: tensor}}
	copy(s.d.Split[:], ts)
	return s
}

// state is llama_meta_device_get_split_state for one tensor of the given
// type and shape, checked against what the meta buffer asserts
// (ggml.SplitState.Check).
func (s *tensorSplitter) state(name string, typ ggml.Type, shape ggml.Shape) (ggml.SplitState, error) {
	st, err := s.run.SplitState(arch.Tensor{Name: name, Type: int(typ), Ne: shape}, s.d)
	if err != nil {
		return ggml.SplitState{}, err
	}
	if st.Axis.IsDim() || st.Axis == ggml.SplitPartial {
		if err := st.Check(typ, shape, s.d.N); err != nil {
			return ggml.SplitState{}, &arch.Abort{
				Msg:   fmt.Sprintf("split mode tensor: tensor %s (%s, %v): %v", name, typ, shape, err),
				Where: "llama_meta_device_get_split_state"}
		}
	}
	return st, nil
}
