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
		var rep strings.Builder
		lm.Report(&rep, loader.ReportOptions{})
		io.WriteString(stdout, quoteLlama(rep.String(), target == "none"))
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
	if err := tw.Flush(); err != nil {
		return err
	}
	return demoRun(ctx, path, stdout)
}

// demoPrompt is what the demo's run says first.
const demoPrompt = "Once upon a time"

// demoRun ends the demo with ggload run -p on the demo model, on the CPU,
// and says what the words are.
func demoRun(ctx context.Context, path string, stdout io.Writer) error {
	args := []string{path, "-p", demoPrompt, "-n", "24", "-s", "2026", "-dev", "none"}
	fmt.Fprintf(stdout, "\n== run ==\n$ ggload run %s -p %q -n 24 -s 2026 -dev none\n", path, demoPrompt)
	if err := runRun(ctx, args, stdout); err != nil {
		return err
	}
	fmt.Fprintln(stdout, "(the demo model's weights are random: llama.cpp's forward pass and sampler pick words of its small\n"+
		"vocabulary at random. For a model that means what it says: ggload run -hf <user>/<model>[:quant] -p TEXT)")
	return nil
}

// quoteLlama marks the report's lines that are llama.cpp's own words,
// and on the CPU alone (-dev none) says that its "to GPU" counts are the
// layers llama.cpp would offload, not where the weights are.
func quoteLlama(report string, cpuOnly bool) string {
	var b strings.Builder
	lines := strings.SplitAfter(report, "\n")
	said := false
	for _, l := range lines {
		b.WriteString(l)
		if cpuOnly && !said && strings.HasPrefix(l, "load_tensors: offloaded ") && strings.Contains(l, "to GPU") {
			b.WriteString("ggload: (the lines above are llama.cpp's, word for word: it counts the layers a GPU would take even\n" +
				"ggload:  with -dev none; here every weight is on the CPU, in the buffers below)\n")
			said = true
		}
	}
	return b.String()
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
