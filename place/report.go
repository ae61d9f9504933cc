package place

import (
	"encoding/json"
	"fmt"
	"io"
	"sort"
	"strings"
	"text/tabwriter"

	"github.com/ggload/ggload/ggml"
	"github.com/ggload/ggload/internal/arch"
)

// ReportOptions choose what Report prints.
type ReportOptions struct {
	Tensors bool // every tensor with its buffer type and reason
	Debug   bool // llama.cpp's DEBUG lines too
}

// Ours reports whether the line is ggload's own (its "place:" lines) rather
// than one llama.cpp prints.
func (l LogLine) Ours() bool { return strings.HasPrefix(l.Text, "place: ") }

// Source is "ggload" for ggload's own lines, "llama.cpp" for llama.cpp's.
func (l LogLine) Source() string {
	if l.Ours() {
		return "ggload"
	}
	return "llama.cpp"
}

// Placement names how a model of the architecture is placed: "exact"
// (llama.cpp's own tensor creation, replayed) or "generic" (by tensor
// names, for an architecture the pin does not know).
func Placement(exact bool) string {
	if exact {
		return "exact"
	}
	return "generic"
}

// DescribePlacement says in one line how a model of the architecture is
// placed.
func DescribePlacement(archName string, exact bool) string {
	switch {
	case archName == "clip":
		return fmt.Sprintf("none: '%s' is a projector, which llama.cpp %s loads with libmtmd, not as a model", archName, arch.Pin)
	case archName == "":
		return "none: the file names no general.architecture"
	case exact:
		return fmt.Sprintf("exact: llama.cpp %s's own tensor creation for '%s', replayed", arch.Pin, archName)
	}
	return fmt.Sprintf("generic: llama.cpp %s does not know '%s'; each tensor is placed by its name", arch.Pin, archName)
}

// BufferTensors counts the tensors buffer bi of context ci holds and their
// bytes: a mapped buffer holds the context's tensors inside its file range,
// an allocated one all of the context's.
func (p *Plan) BufferTensors(ci, bi int) (n int, bytes uint64) {
	c := p.contextTensors(ci)[bi]
	return c.n, c.bytes
}

type bufCount struct {
	n     int
	bytes uint64
}

// contextTensors counts, per buffer of context ci, the tensors it holds.
func (p *Plan) contextTensors(ci int) []bufCount {
	c := &p.Contexts[ci]
	out := make([]bufCount, len(c.Buffers))
	if len(c.Buffers) == 0 {
		return out
	}
	if !c.Mapped && len(c.Buffers) == 1 {
		for _, ti := range c.Tensors {
			out[0].n++
			out[0].bytes += uint64(p.Tensors[ti].Bytes)
		}
		return out
	}
	// the buffers are in (file, range) order; each tensor lies inside one
	for _, ti := range c.Tensors {
		w := p.Tensors[ti].Weight
		bi := sort.Search(len(c.Buffers), func(i int) bool {
			b := c.Buffers[i]
			return b.File > w.File || (b.File == w.File && b.First > w.Offset)
		}) - 1
		if bi >= 0 {
			if b := c.Buffers[bi]; b.File == w.File && w.Offset+w.Size <= b.Last {
				out[bi].n++
				out[bi].bytes += uint64(p.Tensors[ti].Bytes)
			}
		}
	}
	return out
}

// Totals are the plan's counts that the buffers add up to.
type Totals struct {
	FileTensors      int    `json:"file_tensors"` // weights in the model's files
	FileBytes        uint64 `json:"file_bytes"`
	UnusedTensors    int    `json:"unused_tensors"` // in the file, not used
	UnusedBytes      uint64 `json:"unused_bytes"`
	DuplicateTensors int    `json:"duplicate_tensors"` // second placements with a tensor of their own (a tied output elsewhere)
	DuplicateBytes   uint64 `json:"duplicate_bytes"`
	SharedTensors    int    `json:"shared_tensors"` // second placements that reuse their context's tensor
	// BufferTensors and BufferBytes sum the buffers: FileTensors -
	// UnusedTensors + DuplicateTensors, and the same of the bytes.
	BufferTensors int    `json:"buffer_tensors"`
	BufferBytes   uint64 `json:"buffer_tensor_bytes"`
}

// Totals counts the plan's tensors and what its buffers hold.
func (p *Plan) Totals() Totals {
	var t Totals
	for _, w := range p.Model.Weights {
		t.FileTensors++
		t.FileBytes += uint64(w.Size)
	}
	for _, tp := range p.Tensors {
		switch {
		case tp.Reason == ReasonUnused:
			t.UnusedTensors++
			t.UnusedBytes += uint64(tp.Bytes)
		case tp.Shared:
			t.SharedTensors++
		case tp.Duplicate:
			t.DuplicateTensors++
			t.DuplicateBytes += uint64(tp.Bytes)
		}
	}
	for ci := range p.Contexts {
		for _, b := range p.contextTensors(ci) {
			t.BufferTensors += b.n
			t.BufferBytes += b.bytes
		}
	}
	return t
}

// Report prints the plan: the decisions in brief, llama.cpp's own lines,
// ggload's own notes, each buffer, and what every device needs against
// what it has free.
func (p *Plan) Report(w io.Writer, o ReportOptions) {
	m := p.Model
	fmt.Fprintf(w, "model        %s (%s, %d layers, %s, %s)\n", m.Paths[0], p.Arch, p.NLayer, m.FileTypeName(), m.SizeString())
	fmt.Fprintf(w, "placement    %s\n", DescribePlacement(p.Arch, p.Exact))
	mode := p.LoadMode.String()
	if p.Params.LoadMode == LoadAuto {
		why := "every device supports mmap"
		switch {
		case p.noMmap != "":
			why = p.noMmap
		case !p.UseMmap:
			why = "a device lacks mmap support"
		}
		mode = fmt.Sprintf("auto -> %s (%s)", p.LoadMode, why)
	}
	fmt.Fprintf(w, "load mode    %s, lazy %s, split %s, %s mapped ranges\n", mode, p.Lazy, p.Params.SplitMode, p.Params.MapRanges)
	if len(p.Devices) == 0 {
		fmt.Fprintln(w, "devices      none: everything stays on the CPU")
	}
	for i, d := range p.Devices {
		free, total := d.Memory()
		prev := float32(0)
		if i > 0 {
			prev = p.Splits[i-1]
		}
		from := "free memory"
		if len(p.Params.TensorSplit) > 0 {
			from = "-ts"
		}
		fmt.Fprintf(w, "device %-5d %s (%s)  %.1f%% of the layers (by %s), %s free of %s\n", i, d.Name(), d.Description(), 100*(p.Splits[i]-prev), from, human(free), human(total))
	}
	if len(p.TensorDevices) > 0 {
		by := "in equal shares"
		if len(p.Params.TensorSplit) > 0 {
			by = fmt.Sprintf("in shares %v (-ts)", p.Params.TensorSplit)
		}
		fmt.Fprintf(w, "tensor split device 0 is ggml's meta device over %s: every tensor on it sliced %s\n", deviceNames(p.TensorDevices), by)
	}
	fmt.Fprintf(w, "layers       %s\n", p.layerRuns())

	if p.UseMmap && p.Params.MapRanges == MapOwnRanges {
		fmt.Fprintf(w, "\nllama.cpp's report (its own lines, as llama.cpp %s prints them, but for the mapped buffers:\n"+
			"with --map-ranges own each wraps only its context's own tensors, where llama.cpp wraps one span per file):\n", arch.Pin)
	} else {
		fmt.Fprintf(w, "\nllama.cpp's report (its own lines, as llama.cpp %s prints them):\n", arch.Pin)
	}
	for _, l := range p.Log {
		if l.Ours() || (l.Level == "DEBUG" && !o.Debug) {
			continue
		}
		fmt.Fprintf(w, "  %-5s %s\n", l.Level, l.Text)
	}
	fmt.Fprintln(w, "\nggload's notes:")
	for _, l := range p.Log {
		if l.Ours() {
			fmt.Fprintf(w, "  %-5s %s\n", l.Level, l.Text)
		}
	}
	if p.Moved.Count > 0 && !o.Debug {
		fmt.Fprintf(w, "  moved %d tensors are not on their list's first choice; the first is %s (%s), %s -> %s (-v: llama.cpp's line)\n",
			p.Moved.Count, p.Moved.FirstName, p.Moved.FirstType, p.Moved.From.Name(), p.Moved.To.Name())
	}

	tot := p.Totals()
	fmt.Fprintf(w, "\nbuffers (%d tensors, %s, in %d buffers):\n", tot.BufferTensors, human(tot.BufferBytes), p.bufferCount())
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	for ci, c := range p.Contexts {
		counts := p.contextTensors(ci)
		for bi, b := range c.Buffers {
			how := "allocated"
			if c.Mapped {
				how = fmt.Sprintf("mapped from file %d [%#x, %#x)", b.File, b.First, b.Last)
			}
			lazy := ""
			if c.Lazy {
				lazy = ", lazy"
			}
			n, bytes := counts[bi].n, counts[bi].bytes
			fmt.Fprintf(tw, "  %s\t%s\t%d tensors\t%s\ton %s\t%s%s\n", b.Name, human(b.Size), n, human(bytes), c.Device.Name(), how, lazy)
			for _, part := range b.Parts {
				fmt.Fprintf(tw, "    %s\t%s\t\t\ton %s\tits slices\n", part.BufferType.Name(), human(part.Size), part.Device.Name())
			}
		}
	}
	tw.Flush()
	if tot.DuplicateTensors > 0 || tot.UnusedTensors > 0 {
		fmt.Fprintf(w, "  the file's %d tensors, %d unused, %d placed twice with a copy of their own\n", tot.FileTensors, tot.UnusedTensors, tot.DuplicateTensors)
	}

	if c := p.Context; c != nil {
		kv := "per sequence"
		if c.KVUnified {
			kv = "unified"
		}
		class := c.Class
		if class == "" {
			class = "none (the architecture keeps no memory)"
		}
		fmt.Fprintf(w, "\ncontext (n_ctx %d, n_ctx_seq %d, %d sequences %s, n_batch %d, n_ubatch %d, K %s, V %s, flash attention %s, KV offload %v):\n",
			c.NCtx, c.NCtxSeq, c.NSeqMax, kv, c.NBatch, c.NUBatch, c.TypeK, c.TypeV, c.FlashAttn, c.OffloadKQV)
		fmt.Fprintf(w, "  memory module %s\n", class)
		tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
		for _, cp := range c.Caches {
			for _, b := range cp.Buffers {
				fmt.Fprintf(tw, "  %s\t%s\t%d cells\ton %s\n", cp.Class, human(b.Size), cp.Cells, b.Device.Name())
			}
		}
		fmt.Fprintf(tw, "  output buffer\t%s\t\t%s\n", human(c.Output.Size), c.Output.Name)
		tw.Flush()
		fmt.Fprintln(w)
		p.WriteBreakdown(w)
	}

	fmt.Fprintln(w, "\nper device:")
	for _, u := range p.Usage {
		fmt.Fprintf(w, "  %-22s allocated %s, mapped %s; %s free of %s\n", u.Device.Name(), human(u.Allocated), human(u.Mapped), human(u.Free), human(u.Total))
	}
	reasons := map[Reason]int{}
	for _, t := range p.Tensors {
		reasons[t.Reason]++
	}
	fmt.Fprintf(w, "\n%d placements (%d duplicates), %d supports_op questions, %d probes:", len(p.Tensors), p.duplicates(), p.ProbeQuestions, p.Probes)
	for _, r := range []Reason{ReasonDefault, ReasonFallback, ReasonOverride, ReasonMmapHost, ReasonLazy, ReasonUnused} {
		if reasons[r] > 0 {
			fmt.Fprintf(w, " %s %d", r, reasons[r])
		}
	}
	fmt.Fprintln(w)
	if o.Tensors {
		fmt.Fprintln(w, "\ntensors:")
		tw = tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
		fmt.Fprintln(tw, "  name\ttype\tsize\tlayer\top\tbuffer type\treason\tdetail")
		for _, t := range p.Tensors {
			layer := fmt.Sprint(t.Layer)
			switch t.Class {
			case LayerInput:
				layer = "input"
			case LayerOutput:
				layer = "output"
			}
			name := t.Name
			if t.Duplicate {
				name += " (dup)"
			}
			detail := t.Detail
			if t.Split != nil {
				detail = strings.TrimSpace(detail + " split " + t.Split.String())
			}
			fmt.Fprintf(tw, "  %s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n", name, t.Type, human(uint64(t.Bytes)), layer, opName(t.Op), t.BufferType.Name(), t.Reason, detail)
		}
		tw.Flush()
	}
}

func (p *Plan) bufferCount() int {
	n := 0
	for _, c := range p.Contexts {
		n += len(c.Buffers)
	}
	return n
}

func (p *Plan) duplicates() int {
	n := 0
	for _, t := range p.Tensors {
		if t.Duplicate {
			n++
		}
	}
	return n
}

// layerRuns describes the layer assignment as runs: "0-12 CPU, 13-31 Vulkan0, output Vulkan0".
func (p *Plan) layerRuns() string {
	var parts []string
	start := 0
	for il := 1; il <= p.NLayer; il++ {
		if il == p.NLayer || p.LayerDevices[il] != p.LayerDevices[start] {
			if start == il-1 {
				parts = append(parts, fmt.Sprintf("%d %s", start, p.LayerDevices[start].Name()))
			} else {
				parts = append(parts, fmt.Sprintf("%d-%d %s", start, il-1, p.LayerDevices[start].Name()))
			}
			start = il
		}
	}
	parts = append(parts, "output "+p.LayerDevices[p.NLayer].Name())
	return strings.Join(parts, ", ")
}

var opNames = map[ggml.Op]string{
	ggml.OpNone: "NONE", ggml.OpAdd: "ADD", ggml.OpAddID: "ADD_ID", ggml.OpMul: "MUL", ggml.OpDiv: "DIV",
	ggml.OpMulMat: "MUL_MAT", ggml.OpMulMatID: "MUL_MAT_ID", ggml.OpScale: "SCALE", ggml.OpGetRows: "GET_ROWS",
	ggml.OpRope: "ROPE", ggml.OpIm2Col: "IM2COL", ggml.OpSSMConv: "SSM_CONV", ggml.OpSSMScan: "SSM_SCAN", ggml.OpRWKVWKV6: "RWKV_WKV6",
}

func opName(op ggml.Op) string {
	if s, ok := opNames[op]; ok {
		return s
	}
	return fmt.Sprintf("op(%d)", op)
}

// MarshalJSON renders the plan for people and programs.
func (p *Plan) MarshalJSON() ([]byte, error) {
	type jSegment struct {
		Lengths []int64 `json:"lengths"` // per device of the meta device
		Repeat  uint32  `json:"repeat"`
	}
	type jSplit struct {
		Axis     string     `json:"axis"`
		Segments []jSegment `json:"segments,omitempty"`
	}
	type jTensor struct {
		Name       string  `json:"name"`
		Type       string  `json:"type"`
		Shape      []int64 `json:"shape"`
		Bytes      int64   `json:"bytes"`
		Class      string  `json:"layer_class"`
		Layer      int     `json:"layer"`
		Op         string  `json:"op"`
		BufferType string  `json:"buffer_type,omitempty"`
		Device     string  `json:"device,omitempty"`
		Reason     Reason  `json:"reason"`
		Detail     string  `json:"detail,omitempty"`
		Duplicate  bool    `json:"duplicate,omitempty"`
		Shared     bool    `json:"shared,omitempty"`
		Lazy       bool    `json:"lazy,omitempty"`
		Split      *jSplit `json:"split,omitempty"`
	}
	type jPart struct {
		Device     string `json:"device"`
		BufferType string `json:"buffer_type"`
		Size       uint64 `json:"size"`
		Requested  uint64 `json:"requested"`
	}
	type jBuffer struct {
		Name       string  `json:"name"`
		BufferType string  `json:"buffer_type"`
		Device     string  `json:"device"`
		Size       uint64  `json:"size"`
		Requested  uint64  `json:"requested"`
		Mapped     bool    `json:"mapped"`
		Lazy       bool    `json:"lazy,omitempty"`
		File       int     `json:"file,omitempty"`
		First      int64   `json:"first,omitempty"`
		Last       int64   `json:"last,omitempty"`
		Tensors    int     `json:"tensors"`
		Bytes      uint64  `json:"tensor_bytes"`
		Parts      []jPart `json:"parts,omitempty"`
	}
	type jDevice struct {
		Name       string  `json:"name"`
		Share      float32 `json:"share"`
		SplitPoint float32 `json:"split_point"`
	}
	type jUsage struct {
		Device    string `json:"device"`
		Allocated uint64 `json:"allocated"`
		Mapped    uint64 `json:"mapped"`
		Free      uint64 `json:"free"`
		Total     uint64 `json:"total"`
	}
	type jCacheBuffer struct {
		Class      string `json:"class"`
		BufferType string `json:"buffer_type"`
		Device     string `json:"device"`
		Bytes      uint64 `json:"bytes"`
		Cells      uint32 `json:"cells"`
	}
	type jContext struct {
		NCtx      uint32         `json:"n_ctx"`
		NCtxSeq   uint32         `json:"n_ctx_seq"`
		NSeq      uint32         `json:"n_seq"`
		NBatch    uint32         `json:"n_batch"`
		NUBatch   uint32         `json:"n_ubatch"`
		TypeK     string         `json:"type_k"`
		TypeV     string         `json:"type_v"`
		FlashAttn string         `json:"flash_attn"`
		Offload   bool           `json:"kv_offload"`
		Unified   bool           `json:"kv_unified"`
		Memory    string         `json:"memory"`
		Caches    []jCacheBuffer `json:"caches"`
		Output    uint64         `json:"output_buffer"`
		OutputBT  string         `json:"output_buffer_type"`
	}
	type jBreakdown struct {
		BufferType string  `json:"buffer_type"`
		Device     string  `json:"device,omitempty"`
		Model      uint64  `json:"model"`
		Context    uint64  `json:"context"`
		Compute    *uint64 `json:"compute"` // null: not computed by ggload
	}
	type jLog struct {
		Level  string `json:"level"`
		Text   string `json:"text"`
		Source string `json:"source"` // "llama.cpp" or "ggload"
	}
	out := struct {
		Model         string    `json:"model"`
		Arch          string    `json:"architecture"`
		Exact         bool      `json:"exact"`
		Placement     string    `json:"placement"`
		NLayer        int       `json:"n_layer"`
		LoadMode      string    `json:"load_mode"`
		UseMmap       bool      `json:"use_mmap"`
		Lazy          string    `json:"lazy"`
		Devices       []jDevice `json:"devices"`
		TensorDevices []string  `json:"tensor_split_devices,omitempty"`
		GPUStart      int       `json:"i_gpu_start"`
		GPULayers     int       `json:"act_gpu_layers"`
		Layers        []string  `json:"layer_devices"`
		Tensors       []jTensor `json:"tensors"`
		Buffers       []jBuffer `json:"buffers"`
		Usage         []jUsage  `json:"usage"`
		Moved         struct {
			Count int    `json:"count"`
			First string `json:"first,omitempty"`
			From  string `json:"from,omitempty"`
			To    string `json:"to,omitempty"`
		} `json:"moved"`
		Log             []jLog       `json:"log"`
		Context         *jContext    `json:"context,omitempty"`
		MemoryBreakdown []jBreakdown `json:"memory_breakdown"`
		ProbeQuestions  int          `json:"probe_questions"`
		Probes          int          `json:"probes"`
		Totals          Totals       `json:"totals"`
	}{Model: p.Model.Paths[0], Arch: p.Arch, Exact: p.Exact, Placement: Placement(p.Exact), NLayer: p.NLayer, LoadMode: p.LoadMode.String(), UseMmap: p.UseMmap,
		Lazy: p.Lazy.String(), GPUStart: p.GPUStart, GPULayers: p.GPULayers, ProbeQuestions: p.ProbeQuestions, Probes: p.Probes, Totals: p.Totals()}
	out.Log = []jLog{}
	for _, l := range p.Log {
		out.Log = append(out.Log, jLog{l.Level, l.Text, l.Source()})
	}
	for i, d := range p.Devices {
		out.Devices = append(out.Devices, jDevice{d.Name(), p.Shares[i], p.Splits[i]})
	}
	for _, d := range p.LayerDevices {
		out.Layers = append(out.Layers, d.Name())
	}
	for _, d := range p.TensorDevices {
		out.TensorDevices = append(out.TensorDevices, d.Name())
	}
	for _, t := range p.Tensors {
		jt := jTensor{Name: t.Name, Type: t.Type.String(), Bytes: t.Bytes, Class: t.Class.String(), Layer: t.Layer, Op: opName(t.Op),
			BufferType: t.BufferType.Name(), Reason: t.Reason, Detail: t.Detail, Duplicate: t.Duplicate, Shared: t.Shared, Lazy: t.Lazy}
		n := 4
		for n > 1 && t.Shape[n-1] == 1 {
			n--
		}
		jt.Shape = append([]int64(nil), t.Shape[:n]...)
		if t.Device != nil {
			jt.Device = t.Device.Name()
		}
		if t.Split != nil {
			js := &jSplit{Axis: t.Split.Axis.String()}
			for _, sg := range t.Split.Segments {
				js.Segments = append(js.Segments, jSegment{sg.Lengths, sg.Repeat})
			}
			jt.Split = js
		}
		out.Tensors = append(out.Tensors, jt)
	}
	for ci, c := range p.Contexts {
		counts := p.contextTensors(ci)
		for bi, b := range c.Buffers {
			n, bytes := counts[bi].n, counts[bi].bytes
			jb := jBuffer{b.Name, c.BufferType.Name(), c.Device.Name(), b.Size, b.Requested, c.Mapped, c.Lazy, b.File, b.First, b.Last, n, bytes, nil}
			for _, part := range b.Parts {
				jb.Parts = append(jb.Parts, jPart{part.Device.Name(), part.BufferType.Name(), part.Size, part.Requested})
			}
			out.Buffers = append(out.Buffers, jb)
		}
	}
	for _, u := range p.Usage {
		out.Usage = append(out.Usage, jUsage{u.Device.Name(), u.Allocated, u.Mapped, u.Free, u.Total})
	}
	out.MemoryBreakdown = []jBreakdown{}
	for _, e := range p.Breakdown() {
		jb := jBreakdown{BufferType: e.BufferType.Name(), Model: e.Model, Context: e.Context}
		if e.Device != nil {
			jb.Device = e.Device.Name()
		}
		if e.ComputeKnown {
			c := e.Compute
			jb.Compute = &c
		}
		out.MemoryBreakdown = append(out.MemoryBreakdown, jb)
	}
	if c := p.Context; c != nil {
		jc := &jContext{NCtx: c.NCtx, NCtxSeq: c.NCtxSeq, NSeq: c.NSeqMax, NBatch: c.NBatch, NUBatch: c.NUBatch, TypeK: c.TypeK.String(),
			TypeV: c.TypeV.String(), FlashAttn: c.FlashAttn.String(), Offload: c.OffloadKQV, Unified: c.KVUnified, Memory: c.Class,
			Caches: []jCacheBuffer{}, Output: c.Output.Size, OutputBT: c.Output.Name}
		for _, cp := range c.Caches {
			for _, b := range cp.Buffers {
				jc.Caches = append(jc.Caches, jCacheBuffer{cp.Class, b.BufferType.Name(), b.Device.Name(), b.Size, cp.Cells})
			}
		}
		out.Context = jc
	}
	out.Moved.Count = p.Moved.Count
	if p.Moved.Count > 0 {
		out.Moved.First, out.Moved.From, out.Moved.To = p.Moved.FirstName, p.Moved.From.Name(), p.Moved.To.Name()
	}
	return json.Marshal(out)
}
