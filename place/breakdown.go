package place

import (
	"cmp"
	"fmt"
	"io"
	"slices"
	"strings"

	"github.com/ggload/ggload/ggml"
)

// BreakdownEntry is one buffer type's memory, as llama_get_memory_breakdown
// reports it: the weights (model), the memory module (context) and the
// compute buffers. ComputeKnown is false where ggload does not size the
// compute buffers.
type BreakdownEntry struct {
	BufferType   ggml.BufferType
	Device       *ggml.Device // nil for host buffer types
	Model        uint64
	Context      uint64
	Compute      uint64
	ComputeKnown bool
}

// Breakdown is the plan's memory per buffer type: the weights' buffers
// and, when a context was planned, its memory module's.
func (p *Plan) Breakdown() []BreakdownEntry {
	idx := map[ggml.BufferType]int{}
	var out []BreakdownEntry
	entry := func(bt ggml.BufferType, dev *ggml.Device) *BreakdownEntry {
		i, ok := idx[bt]
		if !ok {
			i = len(out)
			idx[bt] = i
			if bt.IsHost() {
				dev = nil
			}
			out = append(out, BreakdownEntry{BufferType: bt, Device: dev})
		}
		return &out[i]
	}
	for _, c := range p.Contexts {
		e := entry(c.BufferType, c.Device)
		for _, b := range c.Buffers {
			switch {
			case c.Mapped:
				e.Model += b.Size // the file's pages the buffer wraps
			case b.Parts != nil:
				e.Model += b.Measured // a meta device's: what -fit's no_alloc load measures
			default:
				e.Model += b.Requested
			}
		}
	}
	if p.Context != nil {
		for _, c := range p.Context.Caches {
			for _, b := range c.Buffers {
				entry(b.BufferType, b.Device).Context += b.Size
			}
		}
		bts := make([]ggml.BufferType, 0, len(p.Context.Compute))
		for bt := range p.Context.Compute {
			bts = append(bts, bt)
		}
		slices.SortFunc(bts, func(a, b ggml.BufferType) int { return cmp.Compare(a.Name(), b.Name()) })
		for _, bt := range bts {
			d, _ := bt.Device()
			entry(bt, d).Compute += p.Context.Compute[bt]
		}
		for i := range out {
			out[i].ComputeKnown = p.Context.ComputeKnown
		}
	}
	kept := out[:0]
	for _, e := range out {
		if e.Model+e.Context+e.Compute > 0 {
			kept = append(kept, e)
		}
	}
	return kept
}

// DeviceMemory is one row of the memory breakdown as WriteBreakdown
// prints it: a device of the plan (its buffer types together), the host
// (every host buffer type; Device is the CPU), or a buffer type of
// neither (BufferType set, Device nil).
type DeviceMemory struct {
	Device     *ggml.Device
	Host       bool
	BufferType ggml.BufferType // the row of a buffer type of no device of the plan

	// Total and Free are a device's memory and what stays free once the
	// plan's buffers are allocated (negative: it does not fit); zero on
	// the other rows.
	Total uint64
	Free  int64
	// Model, Context and Compute are what the plan puts there: the
	// weights, the memory module and the compute buffers (ComputeKnown:
	// ggload sized them).
	Model, Context, Compute uint64
	ComputeKnown            bool
	// Unaccounted is what others hold on a device already.
	Unaccounted int64
}

// Self is what the plan puts on the row's memory.
func (d DeviceMemory) Self() uint64 { return d.Model + d.Context + d.Compute }

// DeviceMemory is the plan's memory per device, then the host's and any
// other buffer type's, as llama.cpp's breakdown table shows them (the
// breakdown itself is per buffer type: Breakdown).
func (p *Plan) DeviceMemory() []DeviceMemory {
	bd := p.Breakdown()
	known := len(bd) > 0
	for _, e := range bd {
		known = known && e.ComputeKnown
	}
	seen := map[int]bool{}
	var out []DeviceMemory
	for _, d := range p.Devices {
		row := DeviceMemory{Device: d, ComputeKnown: known}
		for i, e := range bd {
			if e.Device == d && !e.BufferType.IsHost() {
				row.Model, row.Context, row.Compute = row.Model+e.Model, row.Context+e.Context, row.Compute+e.Compute
				seen[i] = true
			}
		}
		free, total := d.Memory()
		for _, u := range p.Usage {
			if u.Device == d {
				free, total = u.Free, u.Total
			}
		}
		row.Total, row.Free = total, int64(free)-int64(row.Self())
		row.Unaccounted = int64(total) - int64(free)
		out = append(out, row)
	}
	host := DeviceMemory{Device: p.CPU, Host: true, ComputeKnown: known}
	for i, e := range bd {
		if e.BufferType.IsHost() {
			host.Model, host.Context, host.Compute = host.Model+e.Model, host.Context+e.Context, host.Compute+e.Compute
			seen[i] = true
		}
	}
	out = append(out, host)
	for i, e := range bd {
		if !seen[i] {
			out = append(out, DeviceMemory{BufferType: e.BufferType, Model: e.Model, Context: e.Context, Compute: e.Compute, ComputeKnown: known})
		}
	}
	return out
}

// WriteBreakdown prints the plan's memory as llama.cpp's
// common_memory_breakdown_print prints a context's: per device its total
// and free memory (free as it will be once the plan's buffers are
// allocated), what the plan puts there (model, context, compute) and
// what others hold (unaccounted); the host's row; any other buffer type.
// Compute buffers ggload does not size are shown as "?".
func (p *Plan) WriteBreakdown(w io.Writer) {
	const fn = "common_memory_breakdown_print"
	const mib = 1 << 20
	rowsOf := p.DeviceMemory()
	computeKnown := len(rowsOf) > 0 && rowsOf[0].ComputeKnown
	compute := func(n uint64) string {
		if !computeKnown {
			return "?"
		}
		return fmt.Sprint(n / mib)
	}
	type row struct {
		gpu  bool
		cols [8]string
	}
	rows := []row{{false, [8]string{"memory breakdown [MiB]", "total", "free", "self", "model", "context", "compute", "unaccounted"}}}
	for _, m := range rowsOf {
		switch {
		case m.Host:
			rows = append(rows, row{false, [8]string{"  - Host", "", "", fmt.Sprint(m.Self() / mib), fmt.Sprint(m.Model / mib), fmt.Sprint(m.Context / mib), compute(m.Compute), ""}})
		case m.Device == nil:
			rows = append(rows, row{false, [8]string{"  - " + m.BufferType.Name(), "", "", fmt.Sprint(m.Self() / mib),
				fmt.Sprint(m.Model / mib), fmt.Sprint(m.Context / mib), compute(m.Compute), ""}})
		default:
			desc := m.Device.Description()
			for _, pre := range []string{"NVIDIA ", "GeForce ", "Tesla ", "AMD ", "Radeon ", "Instinct "} {
				desc = strings.TrimPrefix(desc, pre)
			}
			rows = append(rows, row{true, [8]string{"  - " + m.Device.Name() + " (" + desc + ")", fmt.Sprint(m.Total / mib), fmt.Sprint(m.Free / mib),
				fmt.Sprint(m.Self() / mib), fmt.Sprint(m.Model / mib), fmt.Sprint(m.Context / mib), compute(m.Compute), fmt.Sprint(m.Unaccounted / mib)}})
		}
	}
	for j := 0; j < 8; j++ {
		width := 0
		for _, r := range rows {
			width = max(width, len(r.cols[j]))
		}
		for i := range rows {
			c := &rows[i].cols[j]
			pad := strings.Repeat(" ", width-len(*c))
			if j == 0 {
				*c += pad
			} else {
				*c = pad + *c
			}
		}
	}
	for i, r := range rows {
		c := r.cols
		switch {
		case i == 0:
			fmt.Fprintf(w, "%s: | %s | %s   %s    %s   %s   %s   %s    %s |\n", fn, c[0], c[1], c[2], c[3], c[4], c[5], c[6], c[7])
		case r.gpu:
			fmt.Fprintf(w, "%s: | %s | %s = %s + (%s = %s + %s + %s) + %s |\n", fn, c[0], c[1], c[2], c[3], c[4], c[5], c[6], c[7])
		default:
			fmt.Fprintf(w, "%s: | %s | %s   %s    %s = %s + %s + %s    %s |\n", fn, c[0], c[1], c[2], c[3], c[4], c[5], c[6], c[7])
		}
	}
	if !computeKnown {
		why := "no context was planned"
		if p.Context != nil && p.Context.ComputeWhy != "" {
			why = p.Context.ComputeWhy
		}
		fmt.Fprintf(w, "compute: ? : the compute buffers are not counted (llama.cpp reserves them beside these): %s\n", why)
	}
}
