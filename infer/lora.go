// Port of llama.cpp src/llama-context.cpp (v0.5.0):
// llama_set_adapters_lora.

package infer

import (
	"errors"
	"fmt"

	"github.com/ggload/ggload/ggml"
	"github.com/ggload/ggload/ggml/ops"
	"github.com/ggload/ggload/internal/replay/graph"
	"github.com/ggload/ggload/loader"
)

// loraEntry is one adapter of the context with the scale it applies.
type loraEntry struct {
	a     *loader.LoRA
	scale float32
}

// SetLoRAs applies the adapters with their scales from the next decode
// on, as llama_set_adapters_lora does: an adapter with scale 0 is left
// out, a second mention of an adapter is ignored, and where the adapters
// and scales are those already applied nothing changes. Otherwise the
// next Decode or Encode reserves the compute buffers again and builds its
// graphs anew (no graph built before is reused). No adapters clear them.
// Each adapter must have been loaded beside the context's model
// (loader.LoadLoRA) and stay open while applied.
//
// The graphs add the adapters' products last given first, as llama.cpp's
// hash map of adapters walks them: with one or two adapters the logits
// are llama.cpp's bit for bit; with more, llama.cpp's order can differ
// where two of its adapters' addresses share a hash bucket.
func (c *Context) SetLoRAs(adapters []*loader.LoRA, scales []float32) error {
	if len(adapters) != len(scales) {
		return fmt.Errorf("infer: SetLoRAs: %d adapters and %d scales", len(adapters), len(scales))
	}
	if len(adapters) > 0 {
		if err := c.model.Use("SetLoRAs", func() error { return nil }); err != nil {
			return fmt.Errorf("infer: SetLoRAs: %w", err)
		}
	}
	placed := map[string]bool{} // the model's tensors that were loaded
	for _, t := range c.model.Plan.Tensors {
		if t.Context >= 0 {
			placed[t.Name] = true
		}
	}
	for i, a := range adapters {
		if a == nil || a.Closed() {
			return fmt.Errorf("infer: SetLoRAs: adapter %d is nil or closed", i)
		}
		for _, pr := range a.Plan.Pairs {
			if !placed[pr.Base] {
				return fmt.Errorf("infer: LoRA adapter %s adapts '%s', which the context's model lacks", a.Plan.Path, pr.Base)
			}
		}
		if scales[i] != 0 {
			if err := c.loraSplitRefused(a); err != nil {
				return err
			}
		}
	}
	if err := c.hold(); err != nil {
		return err
	}
	defer c.mu.Unlock()
	if c.lorasSame(adapters, scales) {
		return nil
	}
	var next []loraEntry
outer:
	for i, a := range adapters {
		if scales[i] == 0 {
			continue
		}
		for _, e := range next {
			if e.a == a {
				continue outer // the map keeps the first
			}
		}
		next = append(next, loraEntry{a, scales[i]})
	}
	c.loras = next
	// llama.cpp keeps the adapters in a std::unordered_map keyed by their
	// address, which libstdc++ walks newest first (each insertion goes to
	// the front of the list, short of a hash collision among more than two
	// adapters): the graphs add them in that order
	gl := make([]graph.LoRA, 0, len(next))
	for i := len(next) - 1; i >= 0; i-- {
		e := next[i]
		w := map[string][2]*ops.Tensor{}
		for _, pr := range e.a.Plan.Pairs {
			ta, tb, ok := e.a.Weight(pr.Base)
			if !ok {
				return fmt.Errorf("infer: LoRA adapter %s is closed", e.a.Plan.Path)
			}
			w[pr.Base] = [2]*ops.Tensor{ta.Native(), tb.Native()}
		}
		gl = append(gl, graph.LoRA{Weights: w, Alpha: e.a.Plan.Alpha, Scale: e.scale})
	}
	c.gc.SetLoRAs(gl)
	c.needReserve = true
	return nil
}

// LoRAs are the adapters applied, with their scales.
func (c *Context) LoRAs() ([]*loader.LoRA, []float32) {
	if c.hold() != nil {
		return nil, nil
	}
	defer c.mu.Unlock()
	var as []*loader.LoRA
	var ss []float32
	for _, e := range c.loras {
		as = append(as, e.a)
		ss = append(ss, e.scale)
	}
	return as, ss
}

// lorasSame is llama_context::adapters_lora_are_same.
func (c *Context) lorasSame(adapters []*loader.LoRA, scales []float32) bool {
	n := 0
	for i, a := range adapters {
		if scales[i] == 0 {
			continue
		}
		n++
		found := false
		for _, e := range c.loras {
			if e.a == a {
				found = e.scale == scales[i]
				break
			}
		}
		if !found {
			return false
		}
	}
	return n == len(c.loras)
}

// loraSplitRefused refuses an adapter that llama.cpp's meta backend
// would abort on: under split mode tensor, an adapter's product (its
// tensors mirrored on every device) meets the product of a weight split
// over the devices, and ggml-backend-meta.cpp asserts when it finds no
// split state for the sum (or for lora_a's product with a split input).
// An adapter of mirrored weights alone (the token embedding) runs.
func (c *Context) loraSplitRefused(a *loader.LoRA) error {
	p := c.model.Plan
	if len(p.TensorDevices) == 0 {
		return nil
	}
	split := map[string]*ggml.SplitState{}
	for i := range p.Tensors {
		t := &p.Tensors[i]
		if t.Split != nil {
			if _, ok := split[t.Name]; !ok {
				split[t.Name] = t.Split
			}
		}
	}
	for _, pr := range a.Plan.Pairs {
		if st := split[pr.Base]; st != nil && (st.Axis.IsDim() || st.Axis == ggml.SplitPartial) {
			return fmt.Errorf("infer: LoRA adapter %s adapts '%s', which split mode tensor splits (%s) over the meta device's %d device(s): llama.cpp's meta backend aborts on the adapter's product beside it (ggml-backend-meta.cpp: no split state for the sum): %w",
				a.Plan.Path, pr.Base, st.Axis, len(p.TensorDevices), errors.ErrUnsupported)
		}
	}
	return nil
}
