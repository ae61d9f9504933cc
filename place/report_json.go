package place

import (
	"encoding/json"

	"github.com/ggload/ggload/ggml"
)

// jsonPlan is the JSON shape of a plan; the field order is the output's.
type jsonPlan struct {
	Model           string          `json:"model"`
	Arch            string          `json:"architecture"`
	Exact           bool            `json:"exact"`
	Placement       string          `json:"placement"`
	NLayer          int             `json:"n_layer"`
	LoadMode        string          `json:"load_mode"`
	UseMmap         bool            `json:"use_mmap"`
	NoMmap          string          `json:"no_mmap,omitempty"` // why load mode auto reads instead of mapping
	Lazy            string          `json:"lazy"`
	Devices         []jsonDevice    `json:"devices"`
	TensorDevices   []string        `json:"tensor_split_devices,omitempty"`
	GPUStart        int             `json:"i_gpu_start"`
	GPULayers       int             `json:"act_gpu_layers"`
	Layers          []string        `json:"layer_devices"`
	Tensors         []jsonTensor    `json:"tensors"`
	Buffers         []jsonBuffer    `json:"buffers"`
	Usage           []jsonUsage     `json:"usage"`
	Moved           jsonMoved       `json:"moved"`
	Log             []jsonLog       `json:"log"`
	Context         *jsonContext    `json:"context,omitempty"`
	MemoryBreakdown []jsonBreakdown `json:"memory_breakdown"`
	ProbeQuestions  int             `json:"probe_questions"`
	Probes          int             `json:"probes"`
	Totals          Totals          `json:"totals"`
}

type jsonDevice struct {
	Name       string  `json:"name"`
	Share      float32 `json:"share"`
	SplitPoint float32 `json:"split_point"`
}

type jsonTensor struct {
	Name       string     `json:"name"`
	Type       string     `json:"type"`
	Shape      []int64    `json:"shape"`
	Bytes      int64      `json:"bytes"`
	Class      string     `json:"layer_class"`
	Layer      int        `json:"layer"`
	Op         string     `json:"op"`
	BufferType string     `json:"buffer_type,omitempty"`
	Device     string     `json:"device,omitempty"`
	Reason     Reason     `json:"reason"`
	Detail     string     `json:"detail,omitempty"`
	Duplicate  bool       `json:"duplicate,omitempty"`
	Shared     bool       `json:"shared,omitempty"`
	Lazy       bool       `json:"lazy,omitempty"`
	Split      *jsonSplit `json:"split,omitempty"`
}

type jsonSplit struct {
	Axis     string        `json:"axis"`
	Segments []jsonSegment `json:"segments,omitempty"`
}

type jsonSegment struct {
	Lengths []int64 `json:"lengths"` // per device of the meta device
	Repeat  uint32  `json:"repeat"`
}

type jsonBuffer struct {
	Name       string     `json:"name"`
	BufferType string     `json:"buffer_type"`
	Device     string     `json:"device"`
	Size       uint64     `json:"size"`
	Requested  uint64     `json:"requested"`
	Mapped     bool       `json:"mapped"`
	Lazy       bool       `json:"lazy,omitempty"`
	File       int        `json:"file,omitempty"`
	First      int64      `json:"first,omitempty"`
	Last       int64      `json:"last,omitempty"`
	Tensors    int        `json:"tensors"`
	Bytes      uint64     `json:"tensor_bytes"`
	Parts      []jsonPart `json:"parts,omitempty"`
}

type jsonPart struct {
	Device     string `json:"device"`
	BufferType string `json:"buffer_type"`
	Size       uint64 `json:"size"`
	Requested  uint64 `json:"requested"`
}

type jsonUsage struct {
	Device    string `json:"device"`
	Allocated uint64 `json:"allocated"`
	Mapped    uint64 `json:"mapped"`
	Free      uint64 `json:"free"`
	Total     uint64 `json:"total"`
}

type jsonMoved struct {
	Count int    `json:"count"`
	First string `json:"first,omitempty"`
	From  string `json:"from,omitempty"`
	To    string `json:"to,omitempty"`
}

type jsonLog struct {
	Level  string `json:"level"`
	Text   string `json:"text"`
	Source string `json:"source"` // "llama.cpp" or "ggload"
}

type jsonContext struct {
	NCtx      uint32            `json:"n_ctx"`
	NCtxSeq   uint32            `json:"n_ctx_seq"`
	NSeq      uint32            `json:"n_seq"`
	NBatch    uint32            `json:"n_batch"`
	NUBatch   uint32            `json:"n_ubatch"`
	TypeK     string            `json:"type_k"`
	TypeV     string            `json:"type_v"`
	FlashAttn string            `json:"flash_attn"`
	Offload   bool              `json:"kv_offload"`
	Unified   bool              `json:"kv_unified"`
	Memory    string            `json:"memory"`
	Caches    []jsonCacheBuffer `json:"caches"`
	Output    uint64            `json:"output_buffer"`
	OutputBT  string            `json:"output_buffer_type"`
	Compute   *jsonCompute      `json:"compute"` // null: the compute buffers are not planned
	NoCompute string            `json:"compute_not_planned,omitempty"`
}

// jsonCompute is the scheduler's reservation: the graph size, what it
// resolved, the prompt (pp) and generation (tg) graphs, the buffers.
type jsonCompute struct {
	MaxNodes         int                 `json:"max_nodes"`
	PipelineParallel bool                `json:"pipeline_parallel"`
	NodesPP          int                 `json:"nodes_pp"`
	SplitsPP         int                 `json:"splits_pp"`
	NodesTG          int                 `json:"nodes_tg"`
	SplitsTG         int                 `json:"splits_tg"`
	Buffers          []jsonComputeBuffer `json:"buffers"`
}

type jsonComputeBuffer struct {
	BufferType string `json:"buffer_type"`
	Device     string `json:"device"`
	Bytes      uint64 `json:"bytes"`
}

type jsonCacheBuffer struct {
	Class      string `json:"class"`
	BufferType string `json:"buffer_type"`
	Device     string `json:"device"`
	Bytes      uint64 `json:"bytes"`
	Cells      uint32 `json:"cells"`
}

type jsonBreakdown struct {
	BufferType string  `json:"buffer_type"`
	Device     string  `json:"device,omitempty"`
	Model      uint64  `json:"model"`
	Context    uint64  `json:"context"`
	Compute    *uint64 `json:"compute"` // null: not computed by ggload
}

// MarshalJSON renders the plan for people and programs.
func (p *Plan) MarshalJSON() ([]byte, error) {
	out := jsonPlan{Model: p.Model.Paths[0], Arch: p.Arch, Exact: p.Exact, Placement: Placement(p.Exact), NLayer: p.NLayer,
		LoadMode: p.LoadMode.String(), UseMmap: p.UseMmap, NoMmap: p.NoMmap, Lazy: p.Lazy.String(),
		Devices: p.jsonDevices(), TensorDevices: nameList(p.TensorDevices), GPUStart: p.GPUStart, GPULayers: p.GPULayers,
		Layers: nameList(p.LayerDevices), Tensors: p.jsonTensors(), Buffers: p.jsonBuffers(), Usage: p.jsonUsage(),
		Moved: p.jsonMoved(), Log: p.jsonLog(), Context: p.jsonContext(), MemoryBreakdown: p.jsonBreakdown(),
		ProbeQuestions: p.ProbeQuestions, Probes: p.Probes, Totals: p.Totals()}
	return json.Marshal(out)
}

// nameList is the devices' names (nil for none).
func nameList(devs []*ggml.Device) []string {
	var out []string
	for _, d := range devs {
		out = append(out, d.Name())
	}
	return out
}

func (p *Plan) jsonDevices() []jsonDevice {
	var out []jsonDevice
	for i, d := range p.Devices {
		out = append(out, jsonDevice{d.Name(), p.Shares[i], p.Splits[i]})
	}
	return out
}

func (p *Plan) jsonTensors() []jsonTensor {
	var out []jsonTensor
	for _, t := range p.Tensors {
		jt := jsonTensor{Name: t.Name, Type: t.Type.String(), Bytes: t.Bytes, Class: t.Class.String(), Layer: t.Layer, Op: opName(t.Op),
			BufferType: t.BufferType.Name(), Reason: t.Reason, Detail: t.Detail, Duplicate: t.Duplicate, Shared: t.Shared, Lazy: t.Lazy}
		// the shape without its trailing 1s
		n := 4
		for n > 1 && t.Shape[n-1] == 1 {
			n--
		}
		jt.Shape = append([]int64(nil), t.Shape[:n]...)
		if t.Device != nil {
			jt.Device = t.Device.Name()
		}
		if t.Split != nil {
			jt.Split = &jsonSplit{Axis: t.Split.Axis.String()}
			for _, sg := range t.Split.Segments {
				jt.Split.Segments = append(jt.Split.Segments, jsonSegment{sg.Lengths, sg.Repeat})
			}
		}
		out = append(out, jt)
	}
	return out
}

func (p *Plan) jsonBuffers() []jsonBuffer {
	var out []jsonBuffer
	for ci, c := range p.Contexts {
		counts := p.contextTensors(ci)
		for bi, b := range c.Buffers {
			n, bytes := counts[bi].n, counts[bi].bytes
			jb := jsonBuffer{b.Name, c.BufferType.Name(), c.Device.Name(), b.Size, b.Requested, c.Mapped, c.Lazy, b.File, b.First, b.Last, n, bytes, nil}
			for _, part := range b.Parts {
				jb.Parts = append(jb.Parts, jsonPart{part.Device.Name(), part.BufferType.Name(), part.Size, part.Requested})
			}
			out = append(out, jb)
		}
	}
	return out
}

func (p *Plan) jsonUsage() []jsonUsage {
	var out []jsonUsage
	for _, u := range p.Usage {
		out = append(out, jsonUsage{u.Device.Name(), u.Allocated, u.Mapped, u.Free, u.Total})
	}
	return out
}

func (p *Plan) jsonMoved() jsonMoved {
	out := jsonMoved{Count: p.Moved.Count}
	if p.Moved.Count > 0 {
		out.First, out.From, out.To = p.Moved.FirstName, p.Moved.From.Name(), p.Moved.To.Name()
	}
	return out
}

// jsonLog is every log line with its source ([] for none).
func (p *Plan) jsonLog() []jsonLog {
	out := []jsonLog{}
	for _, l := range p.Log {
		out = append(out, jsonLog{l.Level, l.Text, l.Source()})
	}
	return out
}

// jsonContext is the context sized beside the weights (nil for none).
func (p *Plan) jsonContext() *jsonContext {
	c := p.Context
	if c == nil {
		return nil
	}
	jc := &jsonContext{NCtx: c.NCtx, NCtxSeq: c.NCtxSeq, NSeq: c.NSeqMax, NBatch: c.NBatch, NUBatch: c.NUBatch, TypeK: c.TypeK.String(),
		TypeV: c.TypeV.String(), FlashAttn: c.FlashAttn.String(), Offload: c.OffloadKQV, Unified: c.KVUnified, Memory: c.Class,
		Caches: []jsonCacheBuffer{}, Output: c.Output.Size, OutputBT: c.Output.Name}
	for _, cp := range c.Caches {
		for _, b := range cp.Buffers {
			jc.Caches = append(jc.Caches, jsonCacheBuffer{cp.Class, b.BufferType.Name(), b.Device.Name(), b.Size, cp.Cells})
		}
	}
	if cp := c.ComputePlan; cp != nil {
		jc.Compute = &jsonCompute{MaxNodes: cp.MaxNodes, PipelineParallel: cp.PipelineParallel, NodesPP: cp.NodesPP, SplitsPP: cp.SplitsPP,
			NodesTG: cp.NodesTG, SplitsTG: cp.SplitsTG, Buffers: []jsonComputeBuffer{}}
		for _, b := range cp.Buffers {
			dev := ""
			if b.Device != nil {
				dev = b.Device.Name()
			}
			jc.Compute.Buffers = append(jc.Compute.Buffers, jsonComputeBuffer{b.BufferType.Name(), dev, b.Size})
		}
	}
	jc.NoCompute = c.ComputeWhy
	return jc
}

// jsonBreakdown is llama.cpp's memory breakdown ([] for none).
func (p *Plan) jsonBreakdown() []jsonBreakdown {
	out := []jsonBreakdown{}
	for _, e := range p.Breakdown() {
		jb := jsonBreakdown{BufferType: e.BufferType.Name(), Model: e.Model, Context: e.Context}
		if e.Device != nil {
			jb.Device = e.Device.Name()
		}
		if e.ComputeKnown {
			c := e.Compute
			jb.Compute = &c
		}
		out = append(out, jb)
	}
	return out
}
