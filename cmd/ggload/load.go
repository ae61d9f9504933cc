package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"os"
	"strings"
	"time"

	"github.com/ggload/ggload/infer"
	"github.com/ggload/ggload/loader"
	"github.com/ggload/ggload/place"
)

func init() {
	register(command{"load", "MODEL [options]", "load a model with llama.cpp's options and report: llama.cpp's lines, then ggload's", runLoad})
	optionSets["load"] = func() *optionSet {
		pf := defaultPlaceFlags()
		return loadOptions(&pf, &loadFlags{})
	}
}

// Ranges of load's own numeric options.
const (
	maxReaders      = 256
	maxStagingSlots = 64
	minStagingSize  = 64 << 10
	maxStagingSize  = 1 << 30
)

// onProgress, when set (by tests only), is called from the loading
// goroutine on every progress report.
var onProgress func(done, total uint64)

type loadFlags struct {
	asJSON, tensors, verify, verbose bool
	context                          bool
	readers, slots                   int
	slotSize                         uint64
	progress                         string // on, off, auto
}

func loadOptions(pf *placeFlags, lf *loadFlags) *optionSet {
	s := newOptionSet("load", "Load MODEL's weights onto the devices with llama.cpp's options and report: llama.cpp's lines as it prints them, then ggload's, marked \"ggload:\".",
		"ggload load MODEL [options]", "ggload load -m MODEL [options]", "ggload load -hf <user>/<model>[:quant] [options]")
	pf.add(s)
	s.add(&option{names: []string{"--json"}, help: "print JSON: every tensor and buffer, timings, -fit's decisions, the memory per device", on: func(on bool) error { lf.asJSON = on; return nil }})
	s.add(&option{names: []string{"--tensors"}, help: "list every tensor with its buffer and how its bytes arrived", on: func(on bool) error { lf.tensors = on; return nil }})
	s.add(&option{names: []string{"--verify"}, help: "after loading, read every tensor back from its device and compare it with the file (with -mu, first check the downloaded file against the sha256 kept at its download)", on: func(on bool) error { lf.verify = on; return nil }})
	s.add(&option{names: []string{"--context"}, help: "after loading, make llama.cpp's context (the KV cache and the compute buffers allocated) and print what it allocates beside the plan's estimate, which -fit decides on", on: func(on bool) error { lf.context = on; return nil }})
	s.add(&option{names: []string{"-v", "--verbose", "--log-verbose"}, help: "log the loader's debug lines", on: func(on bool) error { lf.verbose = on; return nil }})
	s.add(&option{names: []string{"--readers"}, value: "N", help: fmt.Sprintf("parallel file readers, 0 to %d (0: chosen for this machine, 1: sequential) (default: 0)", maxReaders),
		set: func(v string) error {
			n, err := intIn(v, 0, maxReaders)
			lf.readers = int(n)
			return err
		}})
	s.add(&option{names: []string{"--progress"}, value: "{on,off,auto}",
		help: "a progress bar on stderr that moves by bytes (default: auto: on a terminal, without --json)\n(ggload also takes --no-progress)",
		set: func(v string) error {
			if !contains([]string{"on", "off", "auto"}, v) {
				return withHint(fmt.Errorf("want on, off or auto"), v, []string{"on", "off", "auto"})
			}
			lf.progress = v
			return nil
		}})
	s.add(&option{names: []string{"--no-progress"}, hidden: true, on: func(on bool) error {
		if on {
			lf.progress = "off"
		}
		return nil
	}})
	s.add(&option{names: []string{"--staging-slots"}, value: "N", help: fmt.Sprintf("pinned staging buffers per device for uploads, 0 to %d (0: 4, as llama.cpp) (default: 0)", maxStagingSlots),
		set: func(v string) error {
			n, err := intIn(v, 0, maxStagingSlots)
			lf.slots = int(n)
			return err
		}})
	s.add(&option{names: []string{"--staging-size"}, value: "SIZE", help: fmt.Sprintf("size of one staging buffer, %s to %s (default: 1MiB, or 64MiB + 2 x alignment under direct I/O)", sizeString(minStagingSize), sizeString(maxStagingSize)),
		set: func(v string) error {
			n, err := sizeIn(v, minStagingSize, maxStagingSize)
			lf.slotSize = uint64(n)
			return err
		}})
	return s
}

func runLoad(ctx context.Context, args []string, stdout io.Writer) error {
	pf := defaultPlaceFlags()
	lf := loadFlags{progress: "auto"}
	s := loadOptions(&pf, &lf)
	path, done, err := pf.parseModel(ctx, s, args, stdout)
	if done {
		return err
	}
	if lf.verbose {
		slog.SetDefault(slog.New(slog.NewTextHandler(safe(os.Stderr), &slog.HandlerOptions{Level: slog.LevelDebug})))
	}
	pd, err := planModel(ctx, &pf, path)
	if err != nil {
		return err
	}
	defer pd.Close()
	if lf.verify && pf.modelURL != "" {
		if err := verifyDownload(ctx, pd.m, os.Stderr); err != nil {
			return err
		}
	}
	fit := pd.fitReport(&pf)
	rows := pf.mmproj.rows(memRows(pd.plan, pf.fitOptions()))
	if !lf.asJSON {
		for _, n := range s.notes {
			fmt.Fprintln(stdout, n)
		}
		printFit(stdout, fit)
		fmt.Fprintln(stdout)
	}
	lm, err := loadPlan(ctx, pd.plan, &pf, &lf)
	if err != nil {
		return err
	}
	defer lm.Close()
	_, closeLoRAs, err := pf.lora.load(ctx, lm) // (lora.go)
	if err != nil {
		return err
	}
	defer closeLoRAs()
	mm, closeMmproj, err := pf.mmproj.load(ctx, pd.rt, pd.plan.LoadMode) // (mmproj.go)
	if err != nil {
		return err
	}
	defer closeMmproj()
	adapters, err := pf.adapterReports(pd.plan)
	if err != nil {
		return err
	}
	var verified *loader.Verified
	if lf.verify {
		v, err := lm.Verify()
		if err != nil {
			return err
		}
		verified = &v
		if mm != nil {
			mv, err := mm.Verify()
			if err != nil {
				return err
			}
			adapters[len(adapters)-1].Verified = mv.Tensors
		}
	}
	var made []contextAlloc
	if lf.context {
		if err := pd.refused(); err != nil {
			return err
		}
		if made, err = makeContext(lm, pd.plan); err != nil {
			return err
		}
	}
	if lf.asJSON {
		if err := writeLoadJSON(stdout, lm, pd.plan, fit, rows, verified, s.notes, made, adapters); err != nil {
			return err
		}
		return pd.refused()
	}
	writeLoadReport(stdout, lm, pd.plan, lf.tensors, rows, verified)
	pf.lora.write(stdout)
	pf.mmproj.write(stdout)
	if mm != nil && lf.verify {
		fmt.Fprintf(stdout, "ggload: verified: %d projector tensors read back from %s equal the file\n", adapters[len(adapters)-1].Verified, mm.Plan.Device.Name())
	}
	writeContextAllocs(stdout, made)
	return pd.refused()
}

// loadPlan loads plan with the load's options, drawing the progress bar
// where it is asked for.
func loadPlan(ctx context.Context, plan *place.Plan, pf *placeFlags, lf *loadFlags) (*loader.Model, error) {
	opts := loader.Options{CheckTensors: pf.check, Readers: lf.readers, StagingSlots: lf.slots, StagingSize: lf.slotSize}
	var bar *progressBar
	if lf.progress == "on" || lf.progress == "auto" && !lf.asJSON && isTerminal(os.Stderr) {
		bar = newProgressBar(os.Stderr)
	}
	opts.Progress = func(done, total uint64) bool {
		if onProgress != nil {
			onProgress(done, total)
		}
		if bar != nil {
			bar.update(done, total)
		}
		return true
	}
	lm, err := loader.Load(ctx, plan, opts)
	if bar != nil {
		bar.finish()
	}
	return lm, err
}

// writeLoadJSON writes load --json: the loaded model, the plan's totals,
// -fit's decisions, the memory per device, and the plan's context and
// memory breakdown as plan --json has them.
func writeLoadJSON(w io.Writer, lm *loader.Model, plan *place.Plan, fit fitReport, rows []memRow, verified *loader.Verified, notes []string, made []contextAlloc, adapters []adapterReport) error {
	pj, err := json.Marshal(plan)
	if err != nil {
		return err
	}
	var ctxJSON struct {
		Context         json.RawMessage `json:"context,omitempty"`
		MemoryBreakdown json.RawMessage `json:"memory_breakdown"`
	}
	if err := json.Unmarshal(pj, &ctxJSON); err != nil {
		return err
	}
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(struct {
		Load            *loader.Model    `json:"load"`
		Plan            place.Totals     `json:"totals"`
		Fit             fitReport        `json:"fit"`
		Memory          []memRow         `json:"memory"`
		Context         json.RawMessage  `json:"context,omitempty"`
		MemoryBreakdown json.RawMessage  `json:"memory_breakdown"`
		Verified        *loader.Verified `json:"verified,omitempty"`
		Made            []contextAlloc   `json:"context_allocated,omitempty"`
		Notes           []string         `json:"notes,omitempty"`
		Adapters        []adapterReport  `json:"adapters,omitempty"` // the LoRA adapters (lora.go) and the projector (mmproj.go) loaded beside it
	}{lm, plan.Totals(), fit, rows, ctxJSON.Context, ctxJSON.MemoryBreakdown, verified, made, notes, adapters})
}

// writeLoadReport writes load's text: the loader's report, the memory
// breakdown, what --verify found and, on a terminal, the memory bars.
func writeLoadReport(w io.Writer, lm *loader.Model, plan *place.Plan, tensors bool, rows []memRow, verified *loader.Verified) {
	lm.Report(w, loader.ReportOptions{Tensors: tensors})
	if plan.Context != nil {
		fmt.Fprintln(w)
		plan.WriteBreakdown(w)
	}
	if verified != nil {
		fmt.Fprintf(w, "ggload: verified: %d tensors read back from their devices equal the file", verified.Tensors)
		if verified.Repacked > 0 {
			fmt.Fprintf(w, " (%d repacked tensors cannot be read back)", verified.Repacked)
		}
		fmt.Fprintln(w)
	}
	if isTerminalWriter(w) {
		fmt.Fprintln(w)
		drawMemory(w, rows, 80)
	}
}

// contextAlloc is one buffer a context made: what the plan estimated for
// it and what was allocated.
type contextAlloc struct {
	What       string `json:"what"`
	BufferType string `json:"buffer_type"`
	Estimate   uint64 `json:"estimate"`
	Allocated  uint64 `json:"allocated"`
}

// makeContext makes the plan's context on the loaded model and pairs each
// buffer it allocated with the plan's estimate of it.
func makeContext(lm *loader.Model, plan *place.Plan) ([]contextAlloc, error) {
	ic, err := infer.New(lm, infer.Params{})
	if err != nil {
		return nil, err
	}
	defer ic.Close()
	est := map[[2]string]uint64{}
	if cm := plan.Context; cm != nil {
		for _, c := range cm.Caches {
			for _, b := range c.Buffers {
				est[[2]string{"KV cache", b.BufferType.Name()}] += b.Size
			}
		}
		for bt, n := range cm.Compute {
			est[[2]string{"compute", bt.Name()}] += n
		}
	}
	var out []contextAlloc
	for _, a := range ic.Memory {
		out = append(out, contextAlloc{What: a.What, BufferType: a.BufferType, Estimate: est[[2]string{a.What, a.BufferType}], Allocated: a.Bytes})
	}
	return out, nil
}

// writeContextAllocs prints what the context allocated beside the plan's
// estimate.
func writeContextAllocs(w io.Writer, made []contextAlloc) {
	if len(made) == 0 {
		return
	}
	fmt.Fprintln(w, "\nggload: the context made: what it allocated, beside the plan's estimate (-fit's):")
	for _, a := range made {
		fmt.Fprintf(w, "ggload:   %-8s %-14s estimate %10.2f MiB  allocated %10.2f MiB  (%+.2f MiB)\n", a.What, a.BufferType,
			float64(a.Estimate)/(1<<20), float64(a.Allocated)/(1<<20), (float64(a.Allocated)-float64(a.Estimate))/(1<<20))
	}
}

// progressBar draws a one-line bar, at most every 50 ms, by bytes.
type progressBar struct {
	w     io.Writer
	start time.Time
	last  time.Time
	drawn bool
}

func newProgressBar(w io.Writer) *progressBar { return &progressBar{w: w, start: time.Now()} }

// update draws done/total.
func (b *progressBar) update(done, total uint64) {
	if total == 0 {
		return
	}
	now := time.Now()
	if b.drawn && done < total && now.Sub(b.last) < 50*time.Millisecond {
		return
	}
	b.last = now
	const width = 36
	frac := float64(done) / float64(total)
	n := int(frac * width)
	rate := 0.0
	if s := now.Sub(b.start).Seconds(); s > 0 {
		rate = float64(done) / s / 1e9
	}
	fmt.Fprintf(b.w, "\r[%s%s] %5.1f%% %9.1f/%.1f MiB %6.2f GB/s", strings.Repeat("=", n), strings.Repeat(" ", width-n), 100*frac,
		float64(done)/(1<<20), float64(total)/(1<<20), rate)
	b.drawn = true
}

// finish clears the bar's line.
func (b *progressBar) finish() {
	if b.drawn {
		fmt.Fprint(b.w, "\r\033[K")
		b.drawn = false
	}
}
