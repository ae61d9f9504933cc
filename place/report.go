package place

import (
	"fmt"
	"io"
	"sort"
	"strings"
	"text/tabwriter"

	"github.com/ggload/ggload/ggml"
	"github.com/ggload/ggload/gguf"
	"github.com/ggload/ggload/internal/replay/arch"
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
	case arch.Projector(archName):
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
	p.writeSummary(w)
	p.writeLog(w, o)
	p.writeBuffers(w)
	if p.Context != nil {
		p.writeContext(w)
	}
	p.writeUsage(w)
	if o.Tensors {
		p.writeTensors(w)
	}
}

// writeSummary prints the decisions in brief: the model, how it is placed
// and loaded, the devices and the layers on each.
func (p *Plan) writeSummary(w io.Writer) {
	m := p.Model
	arch := gguf.Printable(p.Arch, 64)
	fmt.Fprintf(w, "model        %s (%s, %d layers, %s, %s)\n", m.Paths[0], arch, p.NLayer, m.FileTypeName(), m.SizeString())
	fmt.Fprintf(w, "placement    %s\n", DescribePlacement(arch, p.Exact))
	fmt.Fprintf(w, "load mode    %s, lazy %s, split %s, %s mapped ranges\n", p.loadModeChoice(), p.Lazy, p.Params.SplitMode, p.Params.MapRanges)
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
}

// loadModeChoice is the load mode, with why for one chosen automatically.
func (p *Plan) loadModeChoice() string {
	if p.Params.LoadMode != LoadAuto {
		return p.LoadMode.String()
	}
	why := "every device supports mmap"
	if p.NoMmap != "" {
		why = p.NoMmap
	}
	return fmt.Sprintf("auto -> %s (%s)", p.LoadMode, why)
}

// writeLog prints llama.cpp's lines, then ggload's notes.
func (p *Plan) writeLog(w io.Writer, o ReportOptions) {
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
}

// writeBuffers prints each buffer of the weights with the tensors it holds.
func (p *Plan) writeBuffers(w io.Writer) {
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
}

// writeContext prints the context sized beside the weights: its
// parameters, its caches and output buffer, and llama.cpp's memory
// breakdown.
func (p *Plan) writeContext(w io.Writer) {
	c := p.Context
	kv := "a KV stream per sequence"
	if c.KVUnified {
		kv = "one unified KV stream"
	}
	class := c.Class
	if class == "" {
		class = "none (the architecture keeps no memory)"
	}
	fmt.Fprintf(w, "\ncontext (n_ctx %d, n_ctx_seq %d, %s, %s, n_batch %d, n_ubatch %d, K %s, V %s, flash attention %s, KV offload %v):\n",
		c.NCtx, c.NCtxSeq, sequences(c.NSeqMax), kv, c.NBatch, c.NUBatch, c.TypeK, c.TypeV, c.FlashAttn, c.OffloadKQV)
	fmt.Fprintf(w, "  memory module %s\n", class)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	for _, cp := range c.Caches {
		for _, b := range cp.Buffers {
			fmt.Fprintf(tw, "  %s\t%s\t%d cells\ton %s\n", cp.Class, human(b.Size), cp.Cells, b.Device.Name())
		}
	}
	fmt.Fprintf(tw, "  output buffer\t%s\t\t%s\n", human(c.Output.Size), c.Output.Name)
	if cp := c.ComputePlan; cp != nil {
		for _, b := range cp.Buffers {
			if b.Size > 1 {
				fmt.Fprintf(tw, "  compute buffer\t%s\t\t%s\n", human(b.Size), b.BufferType.Name())
			}
		}
	}
	tw.Flush()
	if cp := c.ComputePlan; cp != nil {
		pp := ""
		if cp.PipelineParallel {
			pp = ", pipeline parallel"
		}
		fmt.Fprintf(w, "  graphs: max %d nodes; prompt %d nodes in %d splits, generation %d nodes in %d splits%s\n",
			cp.MaxNodes, cp.NodesPP, cp.SplitsPP, cp.NodesTG, cp.SplitsTG, pp)
	}
	fmt.Fprintln(w)
	p.WriteBreakdown(w)
}

// writeUsage prints each device's memory, then the placements by reason.
func (p *Plan) writeUsage(w io.Writer) {
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
}

// writeTensors prints every tensor with its buffer type and reason.
func (p *Plan) writeTensors(w io.Writer) {
	fmt.Fprintln(w, "\ntensors:")
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
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

func sequences(n uint32) string {
	if n == 1 {
		return "1 sequence"
	}
	return fmt.Sprintf("%d sequences", n)
}
