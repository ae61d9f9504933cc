package main

import (
	"fmt"
	"io"
	"strings"
	"unicode/utf8"

	"github.com/ggload/ggload/ggml"
	"github.com/ggload/ggload/place"
)

// memRow is one line of the "will it fit" picture: a device's memory, or
// the host's.
type memRow struct {
	Name    string `json:"name"` // a device, or "host"
	Host    bool   `json:"host"`
	Weights uint64 `json:"weights"`          // weights allocated in its memory
	Context uint64 `json:"context"`          // the context's memory module (KV cache, recurrent state) there
	Compute uint64 `json:"compute"`          // the context's compute buffers there (0 where not planned)
	Mapped  uint64 `json:"mapped,omitempty"` // host: the file's pages mapped (the page cache, not allocations)
	Free    uint64 `json:"free"`             // free before loading (0 with total 0: not reported)
	Total   uint64 `json:"total"`
	Target  uint64 `json:"target,omitempty"` // what -fit keeps free (devices)
	Fits    bool   `json:"fits"`             // weights, context and compute fit the free memory
	// LeavesTarget: they leave the target free as well.
	LeavesTarget bool `json:"leaves_target"`
	// Projector is the multimodal projector's weights there (-mm,
	// mmproj.go).
	Projector uint64 `json:"projector,omitempty"`
}

// memRows are the plan's devices (in the model's order), then the host:
// weights against free memory.
func memRows(p *place.Plan, o place.FitOptions) []memRow {
	use := func(d *ggml.Device) place.DeviceUse {
		for _, u := range p.Usage {
			if u.Device == d {
				return u
			}
		}
		return place.DeviceUse{Device: d}
	}
	// the context's memory and compute, by device (host buffer types: the host's)
	ctx := map[*ggml.Device][2]uint64{}
	for _, e := range p.Breakdown() {
		d := e.Device
		if d == nil {
			d = p.CPU
		}
		c := ctx[d]
		ctx[d] = [2]uint64{c[0] + e.Context, c[1] + e.Compute}
	}
	var rows []memRow
	for id, d := range p.Devices {
		free, total := d.Memory()
		r := memRow{Name: d.Name(), Weights: use(d).Allocated, Context: ctx[d][0], Compute: ctx[d][1], Free: free, Total: total, Target: o.Target(id)}
		r.Fits = r.need() <= r.Free
		r.LeavesTarget = r.need()+r.Target <= r.Free
		rows = append(rows, r)
	}
	h := use(p.CPU)
	free, total := p.CPU.Memory()
	r := memRow{Name: "host", Host: true, Weights: h.Allocated, Context: ctx[p.CPU][0], Compute: ctx[p.CPU][1], Mapped: h.Mapped, Free: free, Total: total}
	r.Fits = r.need() <= r.Free
	r.LeavesTarget = r.Fits
	return append(rows, r)
}

// need is what the row's memory must hold.
func (r memRow) need() uint64 { return r.Weights + r.Context + r.Compute + r.Projector }

// drawMemory draws a bar per row, at most width columns wide: the weights
// (#), the context's memory (=) and its compute buffers (+) against free
// memory (.), with | where the fit target begins.
func drawMemory(w io.Writer, rows []memRow, width int) {
	nameW := 4
	for _, r := range rows {
		nameW = max(nameW, utf8.RuneCountInString(r.Name))
	}
	nameW = min(nameW, 12)
	const numbersW = 2 + 21 + 2 + 20 // "] ", the sizes, the verdict
	barW := max(8, min(40, width-2-nameW-2-numbersW))
	fmt.Fprintln(w, "will it fit? weights #, context =, compute + against free memory .; | fit target")
	for _, r := range rows {
		name := r.Name
		if utf8.RuneCountInString(name) > nameW {
			name = string([]rune(name)[:nameW-1]) + "~"
		}
		bar := []byte(strings.Repeat(".", barW))
		verdict := "fits"
		switch {
		case r.Free == 0 && r.Total == 0:
			bar = []byte(strings.Repeat("?", barW))
			verdict = "free unknown"
		case r.need() > r.Free:
			for i := range bar {
				bar[i] = '#'
			}
			bar[barW-1] = '>'
			verdict = "over by " + compact(r.need()-r.Free)
		default:
			at := 0
			for _, part := range []struct {
				c byte
				n uint64
			}{{'#', r.Weights + r.Projector}, {'=', r.Context}, {'+', r.Compute}} {
				n := int(float64(part.n) / float64(r.Free) * float64(barW))
				if part.n > 0 {
					n = max(n, 1)
				}
				for i := 0; i < n && at < barW; i++ {
					bar[at] = part.c
					at++
				}
			}
			if r.Target > 0 && r.Target < r.Free {
				if at := int(float64(r.Free-r.Target) / float64(r.Free) * float64(barW)); at < barW {
					bar[at] = '|'
				}
			}
			if !r.LeavesTarget {
				verdict = "fits, not -fitt"
			}
		}
		line := fmt.Sprintf("  %-*s [%s] %6s of %6s free  %s", nameW, name, bar, compact(r.need()), compact(r.Free), verdict)
		if r.Host && r.Mapped > 0 {
			line += ", +" + compact(r.Mapped) + " mapped"
		}
		fmt.Fprintln(w, line)
	}
}

// compact prints a size in at most 6 columns: 512B, 12.3K, 15.7M, 2.00G.
func compact(n uint64) string {
	if n < 1024 {
		return fmt.Sprintf("%dB", n)
	}
	f := float64(n)
	for _, u := range []string{"K", "M", "G", "T", "P"} {
		f /= 1024
		if f < 1024 || u == "P" {
			switch {
			case f < 10:
				return fmt.Sprintf("%.2f%s", f, u)
			case f < 100:
				return fmt.Sprintf("%.1f%s", f, u)
			}
			return fmt.Sprintf("%.0f%s", f, u)
		}
	}
	return fmt.Sprint(n)
}
