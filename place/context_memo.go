package place

import (
	"slices"
	"sync/atomic"

	"github.com/ggload/ggload/ggml"
	"github.com/ggload/ggload/internal/replay/arch"
)

// contextMemo is a context's memory module and compute buffers planned
// before for the same model: what planMemory read (the context as
// llama_context's constructor resolved it, the parameters it came from,
// the devices, each layer's device and each weight's buffer type) and
// what it gave (the context's memory, its log lines, its error). -fit
// measures placements and then plans the one it chose, with the load
// mode the user asked for and the context size it resolved; none of that
// changes the memory or the graphs, so that plan's are the measure's,
// not replayed again.
type contextMemo struct {
	ctx     arch.Context
	params  arch.ContextParams // NCtx zero: ctx has the size resolved
	split   SplitMode
	ngl     int
	ot      bool
	nt      int // llama_model::n_tensors()
	devices []*ggml.Device
	layers  []*ggml.Device
	bufts   []ggml.BufferType

	out  *ContextMemory
	log  []LogLine
	err  error
	used int // the plan that last used it (the oldest is dropped first)
}

// memoryReplays counts the memories and compute buffers planned anew (for
// tests).
var memoryReplays atomic.Int64

// contextMemos is how many planned contexts a model's plans keep.
const contextMemos = 4

// memoKey is the memo of what pl's plan has now, its outputs unset.
func (pl *planner) memoKey(c *arch.Context) *contextMemo {
	p := pl.p
	m := &contextMemo{ctx: *c, params: arch.ContextParams(p.LlamaContextParams()),
		split: p.Params.SplitMode, ngl: p.NGPULayers(),
		ot: len(p.Params.Overrides) > 0, nt: p.NTensors(),
		devices: p.Devices, layers: p.LayerDevices, bufts: make([]ggml.BufferType, len(p.Tensors))}
	m.params.NCtx = 0
	for i, t := range p.Tensors {
		m.bufts[i] = t.BufferType
	}
	return m
}

func (m *contextMemo) same(k *contextMemo) bool {
	return m.ctx == k.ctx && m.params == k.params && m.split == k.split && m.ngl == k.ngl && m.ot == k.ot && m.nt == k.nt &&
		slices.Equal(m.devices, k.devices) && slices.Equal(m.layers, k.layers) && slices.Equal(m.bufts, k.bufts)
}

// planMemoryOnce is planMemory, or what it gave before for the same
// inputs (split mode tensor, whose meta device sizes each slice anew, is
// always planned).
func (pl *planner) planMemoryOnce(c *arch.Context) error {
	p, h := pl.p, pl.h
	if p.Params.SplitMode == SplitTensor {
		return pl.planMemory(c)
	}
	h.plans++
	k := pl.memoKey(c)
	for _, m := range h.contexts {
		if m.same(k) {
			m.used = h.plans
			p.Log = append(p.Log, m.log...)
			p.Context = m.out.clone()
			return m.err
		}
	}
	from := len(p.Log)
	memoryReplays.Add(1)
	err := pl.planMemory(c)
	k.devices, k.layers = slices.Clone(k.devices), slices.Clone(k.layers)
	k.out, k.log, k.err, k.used = p.Context.clone(), slices.Clone(p.Log[from:]), err, h.plans
	if len(h.contexts) < contextMemos {
		h.contexts = append(h.contexts, k)
		return err
	}
	oldest := 0
	for i, o := range h.contexts {
		if o.used < h.contexts[oldest].used {
			oldest = i
		}
	}
	h.contexts[oldest] = k
	return err
}

// clone is a copy of c that shares nothing a plan's user may change.
func (c *ContextMemory) clone() *ContextMemory {
	if c == nil {
		return nil
	}
	out := *c
	out.Caches = slices.Clone(c.Caches)
	for i := range out.Caches {
		out.Caches[i].Tensors = slices.Clone(out.Caches[i].Tensors)
		out.Caches[i].Buffers = slices.Clone(out.Caches[i].Buffers)
	}
	if c.Compute != nil {
		out.Compute = make(map[ggml.BufferType]uint64, len(c.Compute))
		for k, v := range c.Compute {
			out.Compute[k] = v
		}
	}
	if c.ComputePlan != nil {
		cp := *c.ComputePlan
		cp.Buffers = slices.Clone(cp.Buffers)
		out.ComputePlan = &cp
	}
	return &out
}
