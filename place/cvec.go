// Port of llama.cpp src/llama-adapter.cpp (v0.5.0): llama_adapter_cvec's
// buffer types.

package place

import (
	"fmt"

	"github.com/ggload/ggload/ggml"
)

// ControlVectorBufferType is the buffer type a control vector's
// direction for layer il goes to, as llama_model::select_buft picks it:
// the first of the layer's buffer type list (the one its weights were
// placed from) whose device adds an f32 vector of nEmbd values held in
// it to another. A control vector is no part of the model's plan: a
// context allocates it when it applies one (infer.Context's
// SetControlVector).
func (p *Plan) ControlVectorBufferType(il int, nEmbd int64) (ggml.BufferType, *ggml.Device, error) {
	if il < 0 || il >= len(p.layerLists) {
		return ggml.BufferType{}, nil, fmt.Errorf("place: control vector: layer %d: the plan has %d layers with buffer type lists", il, len(p.layerLists))
	}
	for _, e := range p.layerLists[il] {
		ok, err := addSupported(p.rt, e.dev, e.buft, nEmbd)
		if err != nil {
			return ggml.BufferType{}, nil, fmt.Errorf("place: control vector: layer %d: %w", il, err)
		}
		if ok {
			return e.buft, e.dev, nil
		}
	}
	return ggml.BufferType{}, nil, fmt.Errorf("place: control vector: layer %d: no suitable buffer type found", il)
}

// addSupported asks dev whether it adds a vector held in a buffer of
// type buft to another, the question select_buft asks for a control
// vector.
func addSupported(rt *ggml.Runtime, dev *ggml.Device, buft ggml.BufferType, nEmbd int64) (bool, error) {
	ctx, err := rt.NewContext(ggml.ContextParams{Tensors: 8, NoAlloc: true})
	if err != nil {
		return false, err
	}
	defer ctx.Free()
	cur, err := ctx.NewTensor(ggml.TypeF32, nEmbd)
	if err != nil {
		return false, err
	}
	dir, err := ctx.NewTensor(ggml.TypeF32, nEmbd)
	if err != nil {
		return false, err
	}
	op, err := ctx.Add(cur, dir)
	if err != nil {
		return false, err
	}
	return dev.SupportsWeightOp(op, dir, buft)
}

// ControlVectorTensor is where a context puts a control vector's
// direction for one layer.
type ControlVectorTensor struct {
	Layer      int
	BufferType ggml.BufferType
	Device     *ggml.Device
}

// ControlVectorBuffer is one buffer of a control vector's directions:
// every layer's direction of its buffer type.
type ControlVectorBuffer struct {
	BufferType ggml.BufferType
	Device     *ggml.Device
	Layers     []int  // the layers whose directions it holds, in order
	Size       uint64 // as the buffer will report it
}

// ControlVectorLayout is where a context that applies a control vector
// of nEmbd values per layer puts it, as llama_adapter_cvec::init lays it
// out: a direction of nEmbd f32 for every layer from 1 to n_layer-1 (the
// range applied makes no difference), each on the buffer type
// ControlVectorBufferType picks, and one buffer per buffer type, in the
// order the layers first use them.
func (p *Plan) ControlVectorLayout(nEmbd int64) ([]ControlVectorTensor, []ControlVectorBuffer, error) {
	h, err := readHparams(p.Model, p.Params)
	if err != nil {
		return nil, nil, err
	}
	if h.run == nil {
		return nil, nil, fmt.Errorf("place: control vector: the model's hyperparameters are not replayed")
	}
	n, err := h.run.Hparams().Call("n_layer")
	if err != nil {
		return nil, nil, fmt.Errorf("place: control vector: %w", err)
	}
	var tensors []ControlVectorTensor
	var bufs []ControlVectorBuffer
	at := map[ggml.BufferType]int{}
	for il := 1; il < int(n); il++ {
		bt, dev, err := p.ControlVectorBufferType(il, nEmbd)
		if err != nil {
			return nil, nil, err
		}
		tensors = append(tensors, ControlVectorTensor{Layer: il, BufferType: bt, Device: dev})
		i, ok := at[bt]
		if !ok {
			i = len(bufs)
			at[bt] = i
			bufs = append(bufs, ControlVectorBuffer{BufferType: bt, Device: dev})
		}
		bufs[i].Layers = append(bufs[i].Layers, il)
	}
	for i := range bufs {
		ts := make([]MmprojTensor, len(bufs[i].Layers))
		for j, il := range bufs[i].Layers {
			ts[j] = MmprojTensor{Name: fmt.Sprintf("direction.%d", il), Type: ggml.TypeF32, Shape: ggml.Shape{nEmbd, 1, 1, 1}}
		}
		size, err := ctxBufferSize(p.rt, bufs[i].BufferType, ts, "control vector")
		if err != nil {
			return nil, nil, err
		}
		bufs[i].Size = size
	}
	return tensors, bufs, nil
}
