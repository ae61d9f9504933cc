package loader

import (
	"encoding/json"
	"fmt"
	"io"
	"text/tabwriter"
	"time"

	"github.com/ggload/ggload/place"
)

// BufferTensors counts the tensors placed in each weight buffer (in
// Buffers() order) and their bytes.
func (m *Model) BufferTensors() (counts []int, bytes []uint64) {
	counts, bytes = make([]int, len(m.buffers)), make([]uint64, len(m.buffers))
	index := make(map[*LoadedBuffer]int, len(m.buffers))
	for i, b := range m.buffers {
		index[b] = i
	}
	for _, pl := range m.placements {
		if i, ok := index[pl.Buffer]; ok && pl.Path != PathShared {
			counts[i]++
			bytes[i] += uint64(pl.Plan.Bytes)
		}
	}
	return counts, bytes
}

// ReportOptions choose what a report adds (Debug has no lines of its own
// in a load's report).
type ReportOptions = place.ReportOptions

// Report prints the load as llama.cpp does (file type and size, offload
// lines, each buffer's size), then ggload's own lines, each marked
// "ggload:": every buffer's tensors, timings and throughput.
func (m *Model) Report(w io.Writer, o ReportOptions) {
	p, gm := m.Plan, m.Plan.Model
	fmt.Fprintf(w, "print_info: file type   = %s\n", gm.FileTypeName())
	fmt.Fprintf(w, "print_info: file size   = %s\n", gm.SizeString())
	for _, l := range p.Log {
		if l.Level == "INFO" && len(l.Text) > 13 && l.Text[:13] == "load_tensors:" && !contains(l.Text, "model buffer size") {
			fmt.Fprintln(w, l.Text)
		}
	}
	for _, b := range m.buffers {
		fmt.Fprintf(w, "load_tensors: %12s model buffer size = %8.2f MiB\n", b.Buffer.Name(), float64(b.Buffer.Size())/1024/1024)
	}
	counts, bytes := m.BufferTensors()
	for i, b := range m.buffers {
		how := "allocated"
		if b.Mapped {
			how = "mapped"
		}
		fmt.Fprintf(w, "ggload: %12s buffer %4d tensors, %8.2f MiB of tensors on %s, %s\n", b.Buffer.Name(), counts[i], float64(bytes[i])/(1<<20), b.Device.Name(), how)
	}
	s := m.Stats
	fmt.Fprintf(w, "ggload: loaded %.2f MiB in %v (open %v, map %v, alloc %v, data %v at %.2f GB/s, validate %v); %d readers",
		float64(s.Bytes)/(1<<20), round(s.Total), round(s.Open), round(s.Map), round(s.Alloc), round(s.Data), s.GBps(), round(s.Validate), s.Readers)
	if s.StagingSlots > 0 {
		fmt.Fprintf(w, ", staging %d x %.2f MiB", s.StagingSlots, float64(s.StagingSize)/(1<<20))
	}
	if s.Direct > 0 {
		fmt.Fprintf(w, "; direct reads copied %.2f MiB out of bounce buffers", float64(s.DirectCopied)/(1<<20))
	}
	if s.Confirmed > 0 {
		fmt.Fprintf(w, "; %d tensors on RPC servers confirmed by read-back in %v", s.Confirmed, round(s.Confirm))
	}
	if s.RPCCached > 0 || s.RPCHashed > 0 {
		fmt.Fprintf(w, "; %.2f MiB set by RPC servers' file caches, %.2f MiB hashed to ask them", float64(s.RPCCached)/(1<<20), float64(s.RPCHashed)/(1<<20))
	}
	fmt.Fprintln(w)
	for _, path := range []Path{PathZeroCopy, PathRead, PathStaged, PathSync} {
		if n := s.Moved[path]; n > 0 {
			fmt.Fprintf(w, "ggload:   %-13s %10.2f MiB\n", path, float64(n)/(1<<20))
		}
	}
	for _, warn := range m.warnings {
		fmt.Fprintln(w, "ggload: warning:", warn)
	}
	if o.Tensors {
		tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
		fmt.Fprintln(tw, "\nname\ttype\tbytes\tbuffer\tbuffer type\tdevice\tpath")
		for _, pl := range m.placements {
			fmt.Fprintf(tw, "%s\t%s\t%d\t%s\t%s\t%s\t%s\n", pl.Plan.Name, pl.Plan.Type, pl.Plan.Bytes, bufName(pl), pl.Plan.BufferType.Name(), devName(pl), pl.Path)
		}
		tw.Flush()
	}
}

func round(d time.Duration) time.Duration { return d.Round(10 * time.Microsecond) }

func contains(s, sub string) bool {
	for i := 0; i+len(sub) <= len(s); i++ {
		if s[i:i+len(sub)] == sub {
			return true
		}
	}
	return false
}

func bufName(pl Placement) string {
	if pl.Tensor == nil || !pl.Tensor.Allocated() {
		return ""
	}
	if pl.Buffer != nil {
		return pl.Buffer.Buffer.Name()
	}
	return ""
}

func devName(pl Placement) string {
	if pl.Plan.Device == nil {
		return ""
	}
	return pl.Plan.Device.Name()
}

// MarshalJSON renders the loaded model: tensors, buffers, timings.
func (m *Model) MarshalJSON() ([]byte, error) {
	type jTensor struct {
		Name       string `json:"name"`
		Type       string `json:"type"`
		Bytes      int64  `json:"bytes"`
		Buffer     string `json:"buffer"`
		BufferType string `json:"buffer_type"`
		Device     string `json:"device"`
		Path       Path   `json:"path"`
	}
	type jBuffer struct {
		Name       string `json:"name"`
		BufferType string `json:"buffer_type"`
		Device     string `json:"device"`
		Size       uint64 `json:"size"`
		Mapped     bool   `json:"mapped"`
		Tensors    int    `json:"tensors"`
		Bytes      uint64 `json:"tensor_bytes"`
	}
	type jTimings struct { // seconds
		Open     float64 `json:"open_s"`
		Map      float64 `json:"map_s"`
		Alloc    float64 `json:"alloc_s"`
		Data     float64 `json:"data_s"`
		Validate float64 `json:"validate_s"`
		Confirm  float64 `json:"confirm_s"`
		Total    float64 `json:"total_s"`
		GBps     float64 `json:"gb_per_s"`
	}
	out := struct {
		Model    string            `json:"model"`
		FileType string            `json:"file_type"`
		BPW      float64           `json:"bpw"`
		LoadMode string            `json:"load_mode"`
		Tensors  []jTensor         `json:"tensors"`
		Buffers  []jBuffer         `json:"buffers"`
		Bytes    uint64            `json:"bytes"`
		ByPath   map[Path]uint64   `json:"bytes_by_path"`
		Timings  jTimings          `json:"timings"`
		Warnings []string          `json:"warnings,omitempty"`
		Extra    map[string]string `json:"extra,omitempty"`
	}{Model: m.Plan.Model.Paths[0], FileType: m.Plan.Model.FileTypeName(), BPW: m.Plan.Model.BPW(), LoadMode: m.Plan.LoadMode.String(),
		Bytes: m.Stats.Bytes, ByPath: m.Stats.Moved, Warnings: m.warnings}
	for _, pl := range m.placements {
		out.Tensors = append(out.Tensors, jTensor{pl.Plan.Name, pl.Plan.Type.String(), pl.Plan.Bytes, bufName(pl), pl.Plan.BufferType.Name(), devName(pl), pl.Path})
	}
	counts, bytes := m.BufferTensors()
	for i, b := range m.buffers {
		out.Buffers = append(out.Buffers, jBuffer{b.Buffer.Name(), b.BufferType.Name(), b.Device.Name(), b.Buffer.Size(), b.Mapped, counts[i], bytes[i]})
	}
	s := m.Stats
	out.Timings = jTimings{s.Open.Seconds(), s.Map.Seconds(), s.Alloc.Seconds(), s.Data.Seconds(), s.Validate.Seconds(), s.Confirm.Seconds(), s.Total.Seconds(), s.GBps()}
	return json.Marshal(out)
}
