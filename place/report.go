package place

import (
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"

	"github.com/ggload/ggload/ggml"
)

// ReportOptions choose what Report prints.
type ReportOptions struct {
	Tensors bool // every tensor with its buffer type and reason
	Debug   bool // llama.cpp's DEBUG lines too
}

// Report prints the plan: the decisions in brief, llama.cpp's own lines,
// each buffer, and what every device needs against what it has free.
func (p *Plan) Report(w io.Writer, o ReportOptions) {
	m := p.Model
	fmt.Fprintf(w, "model        %s (%s, %d layers, %s, %s)\n", m.Paths[0], p.Arch, p.NLayer, m.FileTypeName(), m.SizeString())
	mode := p.LoadMode.String()
	if p.Params.LoadMode == LoadAuto {
		why := "every device supports mmap"
		if !p.UseMmap {
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
	fmt.Fprintf(w, "layers       %s\n", p.layerRuns())

	fmt.Fprintln(w, "\nllama.cpp's report:")
	for _, l := range p.Log {
		if l.Level == "DEBUG" && !o.Debug {
			continue
		}
		fmt.Fprintf(w, "  %-5s %s\n", l.Level, l.Text)
	}
	if p.Moved.Count > 0 && !o.Debug {
		fmt.Fprintf(w, "  (moved) %d tensors are not on their list's first choice; the first is %s (%s), %s -> %s\n",
			p.Moved.Count, p.Moved.FirstName, p.Moved.FirstType, p.Moved.From.Name(), p.Moved.To.Name())
	}

	fmt.Fprintln(w, "\nbuffers:")
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	for _, c := range p.Contexts {
		for _, b := range c.Buffers {
			how := "allocated"
			if c.Mapped {
				how = fmt.Sprintf("mapped from file %d [%#x, %#x)", b.File, b.First, b.Last)
			}
			lazy := ""
			if c.Lazy {
				lazy = ", lazy"
			}
			fmt.Fprintf(tw, "  %s\t%s\t%d tensors\ton %s\t%s%s\n", b.Name, human(b.Size), len(c.Tensors), c.Device.Name(), how, lazy)
		}
	}
	tw.Flush()

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
			fmt.Fprintf(tw, "  %s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n", name, t.Type, human(uint64(t.Bytes)), layer, opName(t.Op), t.BufferType.Name(), t.Reason, t.Detail)
		}
		tw.Flush()
	}
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
	}
	type jBuffer struct {
		Name       string `json:"name"`
		BufferType string `json:"buffer_type"`
		Device     string `json:"device"`
		Size       uint64 `json:"size"`
		Requested  uint64 `json:"requested"`
		Mapped     bool   `json:"mapped"`
		Lazy       bool   `json:"lazy,omitempty"`
		File       int    `json:"file,omitempty"`
		First      int64  `json:"first,omitempty"`
		Last       int64  `json:"last,omitempty"`
		Tensors    int    `json:"tensors"`
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
	out := struct {
		Model     string    `json:"model"`
		Arch      string    `json:"architecture"`
		NLayer    int       `json:"n_layer"`
		LoadMode  string    `json:"load_mode"`
		UseMmap   bool      `json:"use_mmap"`
		Lazy      string    `json:"lazy"`
		Devices   []jDevice `json:"devices"`
		GPUStart  int       `json:"i_gpu_start"`
		GPULayers int       `json:"act_gpu_layers"`
		Layers    []string  `json:"layer_devices"`
		Tensors   []jTensor `json:"tensors"`
		Buffers   []jBuffer `json:"buffers"`
		Usage     []jUsage  `json:"usage"`
		Moved     struct {
			Count int    `json:"count"`
			First string `json:"first,omitempty"`
			From  string `json:"from,omitempty"`
			To    string `json:"to,omitempty"`
		} `json:"moved"`
		Log            []LogLine `json:"log"`
		ProbeQuestions int       `json:"probe_questions"`
		Probes         int       `json:"probes"`
	}{Model: p.Model.Paths[0], Arch: p.Arch, NLayer: p.NLayer, LoadMode: p.LoadMode.String(), UseMmap: p.UseMmap,
		Lazy: p.Lazy.String(), GPUStart: p.GPUStart, GPULayers: p.GPULayers, Log: p.Log, ProbeQuestions: p.ProbeQuestions, Probes: p.Probes}
	for i, d := range p.Devices {
		out.Devices = append(out.Devices, jDevice{d.Name(), p.Shares[i], p.Splits[i]})
	}
	for _, d := range p.LayerDevices {
		out.Layers = append(out.Layers, d.Name())
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
		out.Tensors = append(out.Tensors, jt)
	}
	for _, c := range p.Contexts {
		for _, b := range c.Buffers {
			out.Buffers = append(out.Buffers, jBuffer{b.Name, c.BufferType.Name(), c.Device.Name(), b.Size, b.Requested, c.Mapped, c.Lazy, b.File, b.First, b.Last, len(c.Tensors)})
		}
	}
	for _, u := range p.Usage {
		out.Usage = append(out.Usage, jUsage{u.Device.Name(), u.Allocated, u.Mapped, u.Free, u.Total})
	}
	out.Moved.Count = p.Moved.Count
	if p.Moved.Count > 0 {
		out.Moved.First, out.Moved.From, out.Moved.To = p.Moved.FirstName, p.Moved.From.Name(), p.Moved.To.Name()
	}
	return json.Marshal(out)
}
