package place

import (
	"fmt"
	"strings"

	"github.com/ggload/ggload/ggml"
	"github.com/ggload/ggload/ggml/ops"
	"github.com/ggload/ggload/internal/replay/arch"
	"github.com/ggload/ggload/internal/replay/graph"
)

// ComputePlan is what llama_context's scheduler reserves for the
// context's graphs (sched_reserve, as -fit measures it on a no_alloc
// model): the graph size, the resolved flash attention and pipeline
// parallelism, the prompt (pp) and generation (tg) graphs' node and split
// counts, and each backend's compute buffer.
type ComputePlan struct {
	MaxNodes                             int
	FlashAttn                            bool
	PipelineParallel                     bool
	NodesPP, SplitsPP, NodesTG, SplitsTG int
	Buffers                              []ComputeBuffer // one per backend, in the scheduler's order
}

// ComputeBuffer is one backend's compute buffer.
type ComputeBuffer struct {
	BufferType ggml.BufferType
	Device     *ggml.Device
	Size       uint64
}

// planCompute reserves the context's compute buffers by replaying
// llama.cpp's graph builders and sched_reserve over the plan's backends,
// the weights and the cache on the buffer types the plan gives them.
// Where the replay does not cover the model yet, the compute stays
// unknown and the plan says why.
func (pl *planner) planCompute(mem *arch.Memory) error {
	p, h := pl.p, pl.h
	cm := p.Context
	why := ""
	if ok, w := graph.Replayed(h.run, mem); !ok {
		why = w
	} else if p.Params.SplitMode == SplitRow {
		// (no backend of the pin has a split buffer type, which a plan
		// of split mode row needs: this is a later pin's)
		why = "split mode row's graphs, over split buffers, are not replayed"
	}
	if why != "" {
		cm.ComputeWhy = why
		p.info("place: compute buffers not counted: " + why)
		return nil
	}
	lib := pl.rt.Ops()
	// the buffer types the scheduler may report, by handle
	bts := map[ops.Buft]ggml.BufferType{pl.cpuBuf.Handle(): pl.cpuBuf}
	devs := map[ops.Dev]*ggml.Device{pl.cpu.Handle(): pl.cpu}
	handles := make([]ops.Dev, 0, len(p.Devices))
	for _, d := range p.Devices {
		handles = append(handles, d.Handle())
		devs[d.Handle()] = d
		bts[d.BufferType().Handle()] = d.BufferType()
		if hb, ok := d.HostBufferType(); ok {
			bts[hb.Handle()] = hb
		}
	}
	nTensors := p.NTensors()
	var mismatch error
	weight := func(t *arch.Tensor) ops.Buft {
		if t.Index < 0 || t.Index >= len(p.Tensors) || p.Tensors[t.Index].Name != t.Name {
			if mismatch == nil {
				mismatch = fmt.Errorf("place: compute: the graph's weight %s is not the plan's tensor %d", t.Name, t.Index)
			}
			return 0
		}
		return p.Tensors[t.Index].BufferType.Handle()
	}
	cache := func(ci, j int) ops.Buft { return cm.Caches[ci].Tensors[j].BufferType.Handle() }
	res, err := graph.Reserve(h.run, graph.ReserveParams{Lib: lib, Memory: mem, At: graph.Placement{Weight: weight, Cache: cache},
		Devices: handles, LayerDevice: func(il int) ops.Dev {
			if il >= 0 && il < len(p.LayerDevices) && p.LayerDevices[il] != nil {
				return p.LayerDevices[il].Handle()
			}
			return pl.cpu.Handle()
		},
		NGPULayers: p.NGPULayers(), NTensors: nTensors, TensorOverrides: len(p.Params.Overrides) > 0})
	if err == nil {
		err = mismatch
	}
	if err != nil {
		// the weights' and the memory's plan stand; the compute is unknown
		cm.ComputeWhy = "the replay of llama.cpp's graph stopped: " + err.Error()
		p.info("place: compute buffers not counted: " + cm.ComputeWhy)
		return nil
	}
	for _, l := range res.Log {
		level, text, _ := strings.Cut(l, " ")
		p.log(level, text)
	}
	cp := &ComputePlan{MaxNodes: res.MaxNodes, FlashAttn: res.FlashAttn, PipelineParallel: res.PipelineParallel,
		NodesPP: res.NodesPP, SplitsPP: res.SplitsPP, NodesTG: res.NodesTG, SplitsTG: res.SplitsTG}
	cm.Compute = map[ggml.BufferType]uint64{}
	for _, b := range res.Buffers {
		bt, ok := bts[b.Buft]
		if !ok {
			return fmt.Errorf("place: compute: the scheduler's buffer type %s is none of the plan's", lib.BuftName(b.Buft))
		}
		d := devs[b.Dev]
		cp.Buffers = append(cp.Buffers, ComputeBuffer{BufferType: bt, Device: d, Size: b.Bytes})
		cm.Compute[bt] += b.Bytes
	}
	cm.ComputePlan, cm.ComputeKnown = cp, true
	if cm.FlashAttn == FlashAttnAuto {
		cm.FlashAttn = FlashAttnOff
		if res.FlashAttn {
			cm.FlashAttn = FlashAttnOn
		}
	}
	return nil
}

// NTensors is llama_model::n_tensors() of the plan's model: the weights
// in their contexts, each once.
func (p *Plan) NTensors() int {
	n := 0
	for _, t := range p.Tensors {
		if t.Context >= 0 && !t.Shared {
			n++
		}
	}
	return n
}

// NGPULayers is llama_model::n_gpu_layers() of the plan's model: -ngl,
// with auto and all resolved to every layer and the output.
func (p *Plan) NGPULayers() int { return p.Params.NGPULayers.resolve(p.NLayer) }
