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
