// Port of llama.cpp src/llama-adapter.cpp and src/llama-context.cpp
// (v0.5.0): llama_adapter_cvec and llama_set_adapter_cvec.

package infer

import (
	"fmt"
	"slices"

	"github.com/ggload/ggload/ggml"
	"github.com/ggload/ggload/ggml/ops"
	"github.com/ggload/ggload/internal/replay/graph"
)

// cvecState is the context's llama_adapter_cvec: a direction tensor per
// layer but layer 0, made on the layer's buffer type the first time a
// control vector is applied and kept (cleared or not) until the context
// closes, and the layers it applies to.
type cvecState struct {
	ctxs    []*ggml.Context
	bufs    []*ggml.Buffer
	tensors []*ggml.Tensor // per layer; [0] is nil
	mem     []Allocation

	start, end int32
}

// SetControlVector applies cv to layers ilStart to ilEnd (both included)
// of the context's graphs from the next decode on, as
// llama_set_adapter_cvec does; a nil cv (or one without data) clears it,
// its tensors kept for the next. The directions are written to tensors of
// n_embd floats, one per layer from 1 to n_layer-1, each on the buffer
// type llama.cpp picks for the layer (place.Plan.ControlVectorBufferType),
// allocated the first time and cleared to zero; a layer cv has no
// direction for keeps the values it had. cv's width must be the model's
// n_embd. As in llama.cpp, the next Decode or Encode reserves the compute
// buffers again and builds its graphs anew.
//
// llama.cpp's tools apply the control vectors of their options with the
// range 1 to n_layer where none is given (common_init_from_params).
func (c *Context) SetControlVector(cv *ControlVector, ilStart, ilEnd int32) error {
	if err := c.hold(); err != nil {
		return err
	}
	defer c.mu.Unlock()
	if c.cvec == nil {
		c.cvec = &cvecState{start: -1, end: -1}
	}
	s := c.cvec
	c.needReserve = true
	if cv == nil || len(cv.Data) == 0 {
		s.start, s.end = -1, -1
		c.syncControlVector()
		return nil
	}
	h := c.rep.Run.Hparams()
	nEmbd, err := h.Field("n_embd")
	if err != nil {
		return fmt.Errorf("infer: control vector: %w", err)
	}
	if int64(cv.NEmbd) != nEmbd {
		return fmt.Errorf("infer: control vector: its directions have %d values and the model's n_embd is %d: "+
			"the control vector n_embd does not match the model", cv.NEmbd, nEmbd)
	}
	nLayer, err := h.Call("n_layer")
	if err != nil {
		return fmt.Errorf("infer: control vector: %w", err)
	}
	return c.onThread(func() error {
		if s.tensors == nil {
			if err := c.allocControlVector(int(nLayer), nEmbd); err != nil {
				c.freeControlVector()
				c.cvec = &cvecState{start: -1, end: -1}
				c.needReserve = true
				c.syncControlVector()
				return err
			}
		}
		s.start, s.end = ilStart, ilEnd
		n := cv.NEmbd
		for il := 1; il < len(s.tensors); il++ {
			off := n * (il - 1)
			if off+n > len(cv.Data) {
				continue
			}
			if err := s.tensors[il].SetFloats(cv.Data[off : off+n]); err != nil {
				return fmt.Errorf("infer: control vector: layer %d: %w", il, err)
			}
		}
		c.syncControlVector()
		return nil
	})
}

// allocControlVector makes the direction tensors of layers 1 to nLayer-1
// on their buffer types, a context and a buffer per buffer type, the
// buffers cleared, as llama_adapter_cvec::init does.
func (c *Context) allocControlVector(nLayer int, nEmbd int64) error {
	s := c.cvec
	plan := c.model.Plan
	rt := plan.Runtime()
	byBT := map[ggml.BufferType]*ggml.Context{}
	var order []ggml.BufferType
	s.tensors = make([]*ggml.Tensor, max(nLayer, 1))
	for il := 1; il < nLayer; il++ {
		bt, _, err := plan.ControlVectorBufferType(il, nEmbd)
		if err != nil {
			return fmt.Errorf("infer: %w", err)
		}
		ctx, ok := byBT[bt]
		if !ok {
			if ctx, err = rt.NewContext(ggml.ContextParams{Tensors: nLayer, NoAlloc: true}); err != nil {
				return fmt.Errorf("infer: failed to allocate context for control vector: %w", err)
			}
			byBT[bt] = ctx
			order = append(order, bt)
			s.ctxs = append(s.ctxs, ctx)
		}
		t, err := ctx.NewTensor(ggml.TypeF32, nEmbd)
		if err != nil {
			return fmt.Errorf("infer: control vector: layer %d: %w", il, err)
		}
		s.tensors[il] = t
	}
	for _, bt := range order {
		b, err := byBT[bt].AllocTensors(bt)
		if err != nil {
			return fmt.Errorf("infer: failed to allocate buffer for control vector (%s): %w", bt.Name(), err)
		}
		if b == nil {
			continue
		}
		s.bufs = append(s.bufs, b)
		if err := b.Clear(0); err != nil {
			return fmt.Errorf("infer: control vector: %w", err)
		}
		s.mem = append(s.mem, Allocation{What: "control vector", BufferType: bt.Name(), Bytes: b.Size()})
	}
	c.Memory = append(slices.Clip(c.Memory), s.mem...)
	return nil
}

// syncControlVector gives the graphs the control vector as it is now.
func (c *Context) syncControlVector() {
	s := c.cvec
	cv := graph.ControlVector{LayerStart: s.start, LayerEnd: s.end}
	if s.tensors != nil {
		cv.Tensors = make([]*ops.Tensor, len(s.tensors))
		for il, t := range s.tensors {
			if t != nil {
				cv.Tensors[il] = t.Native()
			}
		}
	}
	c.gc.SetControlVector(cv)
}

// freeControlVector frees the control vector's tensors and buffers.
func (c *Context) freeControlVector() {
	s := c.cvec
	if s == nil {
		return
	}
	for _, ctx := range s.ctxs {
		ctx.Free()
	}
	for _, b := range s.bufs {
		b.Free()
	}
	if len(s.mem) > 0 {
		var kept []Allocation
		for _, a := range c.Memory {
			if a.What != "control vector" {
				kept = append(kept, a)
			}
		}
		c.Memory = kept
	}
	c.cvec = nil
}

// reserveAgain is sched_reserve at the start of a decode after the
// adapters or the control vector changed (llama_context's
// sched_need_reserve): the graphs kept for reuse freed, the scheduler and
// its compute buffers made anew over the graphs as they are now.
func (c *Context) reserveAgain() error {
	if !c.needReserve {
		return nil
	}
	c.dropGraph()
	if err := c.gc.Reserve(); err != nil {
		return fmt.Errorf("infer: %w", err)
	}
	c.needReserve = false
	c.noteCompute()
	return nil
}

// ApplyControlVector applies cv as llama.cpp's tools apply the control
// vectors of their options (common_init_from_params): over layers
// ilStart to ilEnd, a start of 0 or less meaning 1 and an end of 0 or less
// the model's n_layer.
func (c *Context) ApplyControlVector(cv *ControlVector, ilStart, ilEnd int32) error {
	if ilStart <= 0 {
		ilStart = 1
	}
	if ilEnd <= 0 {
		if c.hold() != nil {
			return ErrClosed
		}
		n, err := c.rep.Run.Hparams().Call("n_layer")
		c.mu.Unlock()
		if err != nil {
			return fmt.Errorf("infer: control vector: %w", err)
		}
		ilEnd = int32(n)
	}
	return c.SetControlVector(cv, ilStart, ilEnd)
}
