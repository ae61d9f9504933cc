package place

import (
	"cmp"
	"fmt"
	"math"
	"slices"
	"strings"

	"github.com/ggload/ggload/ggml"
	"github.com/ggload/ggload/internal/replay/arch"
)

// ContextMemory is what a llama.cpp context of the model keeps besides
// the weights, as llama_init_from_model makes it with the plan's
// ContextParams: its parameters as the llama_context constructor
// resolves them, its memory module (the KV cache, the recurrent state,
// their hybrids and variants) as llama_model::create_memory chooses it
// for the architecture and as its constructors size and place it, and
// the output buffer.
type ContextMemory struct {
	NCtx, NCtxSeq, NSeqMax uint32 // cparams n_ctx (padded to 256), n_ctx_seq, n_seq_max
	NBatch, NUBatch        uint32
	TypeK, TypeV           ggml.Type
	FlashAttn              FlashAttn // resolved as llama.cpp's scheduler resolves auto; auto where the compute is not planned
	OffloadKQV             bool
	KVUnified              bool
	CausalAttn             bool

	Class  string      // the memory module's class ("llama_kv_cache", ...); "" for none, "custom" for CustomMemory
	Caches []CachePlan // its caches, in llama.cpp's order
	Output BufferPlan  // the logits buffer (not in llama.cpp's memory breakdown)
	OutBT  ggml.BufferType

	// Compute is the compute buffers' bytes per buffer type (ComputeKnown):
	// llama.cpp's, reserved by replaying its graphs (ComputePlan), or a
	// CustomMemory's. ComputeWhy says why they are not known.
	Compute      map[ggml.BufferType]uint64
	ComputeKnown bool
	ComputePlan  *ComputePlan
	ComputeWhy   string

	// AllocErr is what llama.cpp would abort on when a real context
	// allocates this memory (a no_alloc measure, as -fit's, never
	// allocates it): under split mode tensor, a cache tensor's split that
	// the model's callback asserts on. A context of this plan refuses it.
	AllocErr error
}

// CachePlan is one cache of a memory module: its tensors and, per buffer
// type, its buffer.
type CachePlan struct {
	Class   string // llama_kv_cache, llama_memory_recurrent, llama_dsv4_comp_state
	Cells   uint32
	Tensors []CacheTensor
	Buffers []CacheBuffer // in llama.cpp's order: by buffer type name
}

// CacheTensor is one tensor of a cache.
type CacheTensor struct {
	Name       string
	Layer      int
	Type       ggml.Type
	Shape      ggml.Shape
	BufferType ggml.BufferType
	Device     *ggml.Device
}

// CacheBuffer is a cache's buffer of one buffer type.
type CacheBuffer struct {
	BufferType ggml.BufferType
	Device     *ggml.Device
	Size       uint64 // the tensors' allocation sizes, aligned (what llama.cpp counts)
}

// Bytes is the memory module's size per buffer type.
func (m *ContextMemory) Bytes() map[ggml.BufferType]uint64 {
	out := map[ggml.BufferType]uint64{}
	for _, c := range m.Caches {
		for _, b := range c.Buffers {
			out[b.BufferType] += b.Size
		}
	}
	return out
}

// planContext makes the context as llama_init_from_model does, its
// parameters resolved by llama_context's constructor (both replayed by
// internal/replay/arch, with their log lines), and sizes its memory module and
// output buffer.
func (pl *planner) planContext() error {
	p, h := pl.p, pl.h
	cp := p.Params.Context
	if cp.NOutputsMax < 0 || cp.NOutputsMax > math.MaxInt32 {
		return fmt.Errorf("place: context: n_outputs_max %d: out of range", cp.NOutputsMax)
	}
	if err := cp.checkSizes(); err != nil {
		return err
	}
	if cp.NRSSeq < 0 || cp.NRSSeq > math.MaxInt32 {
		return fmt.Errorf("place: context: n_rs_seq %d: rollback snapshots per sequence out of range", cp.NRSSeq)
	}
	p.Context = nil
	c, err := h.run.InitContext(arch.ContextParams(p.LlamaContextParams()), func(level, msg string) {
		if level != "DEBUG" {
			p.log(level, msg)
		}
	})
	if err != nil {
		if nt := needsTarget(p.Model, err); nt != nil {
			return nt
		}
		return refused(p.Model, err)
	}
	fa := FlashAttnAuto
	switch c.FlashAttnType {
	case FlashAttnOn.Llama():
		fa = FlashAttnOn
	case FlashAttnOff.Llama():
		fa = FlashAttnOff
	}
	cm := &ContextMemory{NCtx: c.NCtx, NCtxSeq: c.NCtxSeq, NSeqMax: c.NSeqMax, NBatch: c.NBatch, NUBatch: c.NUBatch,
		TypeK: c.TypeK, TypeV: c.TypeV, FlashAttn: fa, OffloadKQV: c.OffloadKQV, KVUnified: c.KVUnified,
		CausalAttn: c.CausalAttn}
	p.Context = cm

	// the output buffer: the logits of n_seq_max outputs, on the output
	// device's host buffer type
	out := pl.cpuBuf
	if d := p.LayerDevices[p.NLayer]; d != nil {
		if hb, ok := d.HostBufferType(); ok {
			out = hb
		}
	}
	cm.Output = BufferPlan{Name: out.Name(), Size: c.OutputBytes, Requested: c.OutputBytes, File: -1}
	cm.OutBT = out
	p.info(fmt.Sprintf("llama_context: %10s  output buffer size = %8.2f MiB", out.Name(), float64(cm.Output.Size)/(1<<20)))

	return pl.planMemoryOnce(c)
}

// planMemory makes the context's memory module and sizes it, then its
// compute buffers.
func (pl *planner) planMemory(c *arch.Context) error {
	p, h, cm := pl.p, pl.h, pl.p.Context
	mem, err := h.run.CreateMemory(c.Memory())
	if err != nil {
		return refused(p.Model, err)
	}
	cm.Class = mem.Class
	for _, c := range mem.Caches {
		cpl, err := pl.sizeCache(c)
		if err != nil {
			return err
		}
		cm.Caches = append(cm.Caches, cpl)
	}
	cm.AllocErr = pl.cacheSplitErr
	return pl.planCompute(mem)
}

// sizeCache places a cache's tensors (on their layer's device, or the
// CPU when the cache is not offloaded) and sizes its buffer per buffer
// type, in llama.cpp's order; it logs llama.cpp's lines for it.
func (pl *planner) sizeCache(c *arch.Cache) (CachePlan, error) {
	p := pl.p
	out := CachePlan{Class: c.Class, Cells: c.Cells}
	for _, l := range c.Pre {
		level, text, _ := strings.Cut(l, " ")
		p.log(level, text)
	}
	byBT := map[ggml.BufferType]*CacheBuffer{}
	var order []ggml.BufferType
	var sizeK, sizeV, sizeP uint64
	for _, t := range c.Tensors {
		dev := p.CPU
		if p.Context.offload() && t.Layer >= 0 && t.Layer < len(p.LayerDevices) {
			dev = p.LayerDevices[t.Layer]
		}
		bt := dev.BufferType()
		shape := ggml.Shape{t.Ne[0], t.Ne[1], t.Ne[2], t.Ne[3]}
		if dev.IsMeta() {
			// the meta device asks the model's callback how it holds each
			// cache tensor when the context allocates it: answer as for
			// the weights
			if err := pl.recordSplit(t.Name, t.Type, shape); err != nil && pl.cacheSplitErr == nil {
				pl.cacheSplitErr = fmt.Errorf("place: the cache tensor %s on the meta device of split mode tensor: %w", t.Name, err)
			}
		}
		out.Tensors = append(out.Tensors, CacheTensor{Name: t.Name, Layer: t.Layer, Type: t.Type, Shape: shape, BufferType: bt, Device: dev})
		n, err := pl.tensorAllocSize(bt, t.Type, shape)
		if err != nil {
			return out, err
		}
		align := max(bt.Alignment(), 1)
		b := byBT[bt]
		if b == nil {
			b = &CacheBuffer{BufferType: bt, Device: dev}
			byBT[bt] = b
			order = append(order, bt)
		}
		b.Size += (n + align - 1) / align * align
		nb, err := t.Type.Bytes(shape)
		if err != nil {
			return out, err
		}
		switch t.Role {
		case 'k', 'r':
			sizeK += uint64(nb)
		case 'v', 's':
			sizeV += uint64(nb)
		case 'p':
			sizeP += uint64(nb)
		}
	}
	slices.SortFunc(order, func(a, b ggml.BufferType) int { return cmp.Compare(a.NativeName(), b.NativeName()) })
	if c.Class != "llama_kv_cache" {
		// a state allocates its buffer even for a no_alloc model, and
		// reports it: on a meta device, the largest of its devices'
		// buffers of their slices
		for _, bt := range order {
			if d, ok := bt.Device(); ok && d.IsMeta() {
				n, err := pl.metaCacheSize(c, out.Tensors, bt)
				if err != nil {
					return out, err
				}
				byBT[bt].Size = n
			}
		}
	}
	kind := map[string]string{"llama_kv_cache": "KV", "llama_memory_recurrent": "RS"}[c.Class]
	for _, bt := range order {
		b := byBT[bt]
		out.Buffers = append(out.Buffers, *b)
		if c.Class == "llama_dsv4_comp_state" {
			p.info(fmt.Sprintf("%s: %10s DSV4 %s state buffer size = %8.2f MiB", c.Class, bt.Name(), c.Name, float64(b.Size)/(1<<20)))
		} else {
			p.info(fmt.Sprintf("%s: %10s %s buffer size = %8.2f MiB", c.Class, bt.Name(), kind, float64(b.Size)/(1<<20)))
		}
	}
	mib := func(n uint64) float32 { return float32(n) / (1024 * 1024) }
	switch c.Class {
	case "llama_kv_cache":
		p.info(fmt.Sprintf("llama_kv_cache: size = %7.2f MiB (%6d cells, %3d layers, %2d/%d seqs), K (%s): %7.2f MiB, V (%s): %7.2f MiB",
			mib(sizeK+sizeV), c.Cells, c.Layers, c.NSeqMax, c.Streams, c.TypeK, mib(sizeK), c.TypeV, mib(sizeV)))
		p.info(fmt.Sprintf("llama_kv_cache: attn_rot_k = %d, n_embd_head_k_all = %d", c.RotK, c.HeadK))
		p.info(fmt.Sprintf("llama_kv_cache: attn_rot_v = %d, n_embd_head_k_all = %d", c.RotV, c.HeadV))
	case "llama_memory_recurrent":
		p.info(fmt.Sprintf("llama_memory_recurrent: size = %7.2f MiB (%6d cells, %3d layers, %2d seqs %2d rs_seq), R (%s): %7.2f MiB, S (%s): %7.2f MiB, P (%s): %7.2f MiB",
			mib(sizeK+sizeV+sizeP), c.Cells, c.Layers, c.NSeqMax, c.NRSSeq, c.TypeK, mib(sizeK), c.TypeV, mib(sizeV), c.TypeK, mib(sizeP)))
	case "llama_dsv4_comp_state":
		var total uint64
		for _, b := range out.Buffers {
			total += b.Size
		}
		p.info(fmt.Sprintf("llama_dsv4_comp_state: %s ratio = %d, state = %d x %d, streams = %d, rs_seq = %d, layers = %d, size = %7.2f MiB",
			c.Name, c.Ratio, c.Cells, c.Embd, c.Streams, c.NRSSeq, c.Layers, float64(total)/(1<<20)))
	}
	return out, nil
}

// metaCacheSize is what a cache's buffer on meta buffer type bt holds as
// ggml's meta buffer allocates it: each tensor's slices on each device
// (the split the model's callback gives a cache tensor), the largest
// device's buffer.
func (pl *planner) metaCacheSize(c *arch.Cache, tensors []CacheTensor, bt ggml.BufferType) (uint64, error) {
	if pl.splitter == nil {
		return 0, fmt.Errorf("place: %s on %s without a tensor split", c.Class, bt.Name())
	}
	var ts []metaSlices
	for _, t := range tensors {
		if t.BufferType != bt {
			continue
		}
		st, err := pl.splitter.state(t.Name, t.Type, t.Shape)
		if err != nil {
			return 0, err
		}
		ts = append(ts, metaSlices{t.Type, t.Shape, &st})
	}
	meta, _ := bt.Device()
	parts, err := pl.metaParts(meta.Parts(), ts)
	if err != nil {
		return 0, err
	}
	var size uint64
	for _, part := range parts {
		size = max(size, part.Size)
	}
	return size, nil
}

// recordSplit computes the split of a tensor that a meta device will
// hold and keeps it where the meta device's callback looks.
func (pl *planner) recordSplit(name string, typ ggml.Type, shape ggml.Shape) error {
	if pl.splitter == nil {
		return fmt.Errorf("place: tensor %s on a meta device without a tensor split", name)
	}
	st, err := pl.splitter.state(name, typ, shape)
	if err != nil {
		return err
	}
	pl.splitTable[name] = st
	return nil
}

func (m *ContextMemory) offload() bool { return m == nil || m.OffloadKQV }

// customContext counts an engine's own needs: each layer's bytes with
// the layer, each device's bytes on it.
func (pl *planner) customContext(c *CustomMemory) error {
	p := pl.p
	cm := &ContextMemory{Class: "custom", OffloadKQV: true, Compute: map[ggml.BufferType]uint64{}, ComputeKnown: true}
	cache := CachePlan{Class: "custom"}
	byBT := map[ggml.BufferType]int{}
	for il := 0; il < p.NLayer && c.PerLayer > 0; il++ {
		d := p.LayerDevices[il]
		bt := d.BufferType()
		i, ok := byBT[bt]
		if !ok {
			i = len(cache.Buffers)
			byBT[bt] = i
			cache.Buffers = append(cache.Buffers, CacheBuffer{BufferType: bt, Device: d})
		}
		cache.Buffers[i].Size += c.PerLayer
	}
	cm.Caches = []CachePlan{cache}
	names := make([]string, 0, len(c.PerDevice))
	for name := range c.PerDevice {
		names = append(names, name)
	}
	slices.Sort(names)
	for _, name := range names {
		n := c.PerDevice[name]
		d := p.CPU
		if name != "CPU" {
			var err error
			if d, err = pl.rt.DeviceByName(name); err != nil {
				return fmt.Errorf("place: custom memory: %w", err)
			}
		}
		cm.Compute[d.BufferType()] += n
	}
	p.Context = cm
	return nil
}
