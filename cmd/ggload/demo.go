package main

import (
	"context"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"

	"github.com/ggload/ggload/ggml"
	"github.com/ggload/ggload/gguf"
	"github.com/ggload/ggload/internal/synthmodel"
	"github.com/ggload/ggload/loader"
	"github.com/ggload/ggload/place"
)

// runDemo is the embedded demo: a small generated llama model, written once
// into the user cache directory, planned and loaded on every device present,
// each load reported and its bytes read back and compared with the file.
func runDemo(ctx context.Context, stdout io.Writer) error {
	var rf runtimeFlags
	rt, err := rf.open(ctx)
	if err != nil {
		return err
	}
	path, err := synthmodel.DemoModel(rt)
	if err != nil {
		return err
	}
	m, err := gguf.OpenModel(path)
	if err != nil {
		return err
	}
	defer m.Close()
	fmt.Fprintf(stdout, "ggload demo: %s (%s, %s, %d tensors, ggml %s)\n", path, m.FileTypeName(), m.SizeString(), len(m.Weights), rt.Version())
	targets := []string{"none"}
	for _, d := range rt.Devices() {
		if d.Type() != ggml.DeviceCPU && d.Type() != ggml.DeviceAccel {
			targets = append(targets, d.Name())
		}
	}
	type row struct {
		target, buffers, res string
		st                   loader.Stats
	}
	var rows []row
	for _, target := range targets {
		label := target
		if target == "none" {
			label = "CPU"
		}
		fmt.Fprintf(stdout, "\n== %s ==\n", label)
		params := place.Params{}
		params.DeviceNames = []string{target}
		p, err := place.New(ctx, rt, m, params)
		if err != nil {
			return fmt.Errorf("%s: %w", label, err)
		}
		lm, err := loader.Load(ctx, p, loader.Options{})
		if err != nil {
			return fmt.Errorf("%s: %w", label, err)
		}
		lm.Report(stdout, loader.ReportOptions{})
		v, err := lm.Verify()
		lm.Close()
		if err != nil {
			return fmt.Errorf("%s: %w", label, err)
		}
		res := fmt.Sprintf("%d tensors identical to the file", v.Tensors)
		if v.Repacked > 0 {
			res += fmt.Sprintf(" (%d repacked, not readable)", v.Repacked)
		}
		rows = append(rows, row{label, bufferSummary(p), res, lm.Stats})
	}
	fmt.Fprintln(stdout, "\nsummary:")
	tw := tabwriter.NewWriter(stdout, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "  device\tbuffer types\tload time\tGB/s\tread back")
	for _, r := range rows {
		fmt.Fprintf(tw, "  %s\t%s\t%v\t%.2f\t%s\n", r.target, r.buffers, r.st.Total.Round(10e3), r.st.GBps(), r.res)
	}
	return tw.Flush()
}

// bufferSummary names the plan's buffers, repeated names counted
// ("CPU_Mapped×16 CPU_REPACK").
func bufferSummary(p *place.Plan) string {
	var names []string
	count := map[string]int{}
	for _, c := range p.Contexts {
		for _, b := range c.Buffers {
			if count[b.Name] == 0 {
				names = append(names, b.Name)
			}
			count[b.Name]++
		}
	}
	for i, n := range names {
		if count[n] > 1 {
			names[i] = fmt.Sprintf("%s×%d", n, count[n])
		}
	}
	return strings.Join(names, " ")
}
