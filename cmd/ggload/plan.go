package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/ggload/ggload/ggml"
	"github.com/ggload/ggload/gguf"
	"github.com/ggload/ggload/place"
)

func init() {
	register(command{"plan", "MODEL [options]", "where every tensor would go, and why, without loading (llama.cpp's options)", runPlan})
	optionSets["plan"] = func() *optionSet {
		pf := defaultPlaceFlags()
		s, _, _, _ := planOptions(&pf)
		return s
	}
}

// planned is a model opened and planned by the options, and its draft
// model (-md) when there is one.
type planned struct {
	rt         *ggml.Runtime
	m          *gguf.Model
	plan       *place.Plan
	fit        *place.FitResult // nil with -fit off
	draftModel *gguf.Model
	draft      *place.Plan
	release    func() // the RPC servers' connections, held from plan to load
}

// Close closes the models and lets the RPC servers' connections go.
func (pd *planned) Close() {
	pd.release()
	pd.m.Close()
	if pd.draftModel != nil {
		pd.draftModel.Close()
	}
}

// planModel opens the model and plans it, through -fit unless it is off.
func planModel(ctx context.Context, pf *placeFlags, path string) (*planned, error) {
	params := pf.params()
	rt, err := pf.open(ctx)
	if err != nil {
		return nil, err
	}
	if pf.modelURL != "" {
		if path, err = pf.fetchModel(ctx, path, os.Stderr); err != nil {
			return nil, err
		}
	}
	if pf.hub.repo != "" {
		if path, err = pf.pullModel(ctx); err != nil {
			return nil, err
		}
	}
	m, err := openModel(ctx, path, pf.httpOptions())
	if err != nil {
		return nil, err
	}
	held := []place.Params{params}
	if pf.draft.model != "" {
		held = append(held, pf.draftParams())
	}
	out := &planned{rt: rt, m: m, release: place.KeepConnected(rt, held...)}
	o := pf.fitOptions()
	if pf.draft.model != "" {
		if out.draftModel, err = openModel(ctx, pf.draft.model, pf.httpOptions()); err != nil {
			out.Close()
			return nil, fmt.Errorf("-md: %w", err)
		}
		o.Extra = &place.FitExtra{Model: out.draftModel, Params: pf.draftParams()}
	}
	if err := pf.mmproj.prepare(ctx, pf, rt, &o, os.Stderr); err != nil { // (mmproj.go)
		out.Close()
		return nil, err
	}
	if pf.fit {
		out.fit, err = place.Fit(ctx, rt, m, params, o)
		if err == nil {
			out.plan = out.fit.Plan
		}
	} else {
		out.plan, err = place.New(ctx, rt, m, params)
	}
	if err == nil && out.draftModel != nil {
		// the draft as it runs beside the main model: its context
		// follows the main one's size
		dp := pf.draftParams()
		if out.plan.Context != nil {
			dp.Context.NCtx = int(out.plan.Context.NCtx)
		}
		if out.draft, err = place.New(ctx, rt, out.draftModel, dp); err != nil {
			err = fmt.Errorf("-md %s: %w", pf.draft.model, err)
		}
	}
	if err == nil {
		err = pf.cvec.check(m) // (cvec.go)
	}
	if err == nil {
		err = pf.lora.plan(out.plan) // (lora.go)
	}
	if err == nil {
		err = pf.mmproj.check(out.plan) // (mmproj.go)
	}
	if err != nil {
		out.Close()
		return nil, err
	}
	return out, nil
}

// refused is the error a command ends with when llama.cpp would refuse
// the context it planned (of the model or of the draft model): the weights'
// plan and its report stand, and ggload exits 1 with llama.cpp's reason,
// as llama.cpp's tools do when llama_init_from_model fails.
//
// A draft model of speculative decoding alone (EAGLE-3, DFlash, the
// Gemma 4 assistant), whose context llama.cpp makes only beside its
// target model's, is no refusal: its weights place and load as llama.cpp
// places and loads them, and the report says why it has no context.
func (pd *planned) refused() error {
	if err := pd.plan.ContextErr; err != nil && !errors.Is(err, place.ErrNeedsTarget) {
		return &refusedError{err: err}
	}
	if err := pd.draftContextErr(); err != nil {
		return &refusedError{draft: true, err: err}
	}
	return nil
}

// draftContextErr is why the draft model (-md) has no context, nil where
// it has one or where it needs its target's, which llama.cpp gives it.
func (pd *planned) draftContextErr() error {
	if pd.draft == nil || pd.draft.ContextErr == nil || errors.Is(pd.draft.ContextErr, place.ErrNeedsTarget) {
		return nil
	}
	return pd.draft.ContextErr
}

// refusedError is a context llama.cpp would not make, with its reason.
type refusedError struct {
	draft bool // the draft model's (-md)
	err   error
}

func (e *refusedError) Error() string {
	what := "no context"
	if e.draft {
		what = "-md: no context for the draft model"
	}
	return what + ": " + strings.TrimPrefix(e.err.Error(), "place: ")
}

func (e *refusedError) Unwrap() error { return e.err }

// fitReport is -fit's outcome for people and programs: status, n_ctx,
// n_gpu_layers, tensor_split and overrides are what llama.cpp's
// common_fit_params leaves in the model's and the context's parameters.
type fitReport struct {
	Enabled     bool            `json:"enabled"`
	Status      string          `json:"status,omitempty"`  // success, failure, error
	Outcome     place.FitStatus `json:"outcome,omitempty"` // unchanged, adjusted, failed, error
	NCtx        uint32          `json:"n_ctx"`
	NGPULayers  int             `json:"n_gpu_layers"` // -1: auto
	TensorSplit []float32       `json:"tensor_split,omitempty"`
	Overrides   []string        `json:"overrides,omitempty"` // pattern=BUFT
	Changed     []string        `json:"changed,omitempty"`
	MinCtx      int             `json:"min_ctx"`
	Devices     []fitDevice     `json:"devices,omitempty"`
	Lines       []string        `json:"lines"`
	Trials      int             `json:"trials,omitempty"`
	TookS       float64         `json:"took_s,omitempty"`
	ComputeWhy  string          `json:"compute_not_counted,omitempty"`
}

type fitDevice struct {
	Name   string `json:"name"`
	Free   uint64 `json:"free"`
	Target uint64 `json:"target"`
	Before uint64 `json:"before"` // model, context and compute with the parameters as given
	After  uint64 `json:"after"`  // with the parameters fit chose
}

func (pd *planned) fitReport(pf *placeFlags) fitReport {
	r := fitReport{Enabled: pf.fit, MinCtx: pf.fitCtx}
	if pd.fit == nil {
		r.Lines = []string{"-fit off: the parameters as given"}
		return r
	}
	f := pd.fit
	r.Status, r.Outcome, r.Changed, r.Lines, r.Trials, r.TookS = f.Status.Llama(), f.Status, f.Changed, f.Reasoning, f.Trials, f.Took.Seconds()
	r.NCtx, r.ComputeWhy = f.NCtx, f.ComputeWhy
	q := f.Plan.Params
	r.NGPULayers = q.NGPULayers.Llama()
	if f.Status == place.FitAdjusted {
		r.TensorSplit = q.TensorSplit
		for _, o := range q.Overrides {
			r.Overrides = append(r.Overrides, o.Pattern+"="+o.BufferType)
		}
	}
	for _, d := range f.Devices {
		r.Devices = append(r.Devices, fitDevice{d.Device.Name(), d.Free, d.Target, d.Before, d.After})
	}
	return r
}

// printFit writes -fit's lines.
func printFit(w io.Writer, r fitReport) {
	if !r.Enabled {
		fmt.Fprintln(w, "fit: off (-fit off): the parameters as given")
		return
	}
	fmt.Fprintf(w, "fit (-fit on, %s, %s sized in %.0f ms):\n", r.Outcome, plural(r.Trials, "placement"), r.TookS*1000)
	for _, l := range r.Lines {
		fmt.Fprintln(w, "  "+l)
	}
}

// isTerminalWriter reports whether w is a terminal.
func isTerminalWriter(w io.Writer) bool {
	f, ok := unwrapped(w).(*os.File)
	return ok && isTerminal(f)
}

func planOptions(pf *placeFlags) (*optionSet, *bool, *bool, *bool) {
	s := newOptionSet("plan", "Where every tensor of MODEL would go, and why, without loading it: llama.cpp's decisions, -fit's, each buffer, and what each device needs against its free memory.",
		"ggload plan MODEL [options]", "ggload plan -m MODEL [options]", "ggload plan -hf <user>/<model>[:quant] [options]")
	pf.add(s)
	var asJSON, tensors, verbose bool
	s.add(&option{names: []string{"--json"}, help: "print JSON: the plan, -fit's decisions, the memory per device", on: func(on bool) error { asJSON = on; return nil }})
	s.add(&option{names: []string{"--tensors"}, help: "list every tensor with its buffer type and the reason", on: func(on bool) error { tensors = on; return nil }})
	s.add(&option{names: []string{"-v", "--verbose", "--log-verbose"}, help: "include llama.cpp's debug lines (layer assignment, overrides, moved tensors)", on: func(on bool) error { verbose = on; return nil }})
	return s, &asJSON, &tensors, &verbose
}

func runPlan(ctx context.Context, args []string, stdout io.Writer) error {
	pf := defaultPlaceFlags()
	s, asJSON, tensors, verbose := planOptions(&pf)
	path, done, err := pf.parseModel(ctx, s, args, stdout)
	if done {
		return err
	}
	pd, err := planModel(ctx, &pf, path)
	if err != nil {
		return err
	}
	defer pd.Close()
	fit := pd.fitReport(&pf)
	rows := pf.mmproj.rows(memRows(pd.plan, pf.fitOptions()))
	if *asJSON {
		adapters, err := pf.adapterReports(pd.plan)
		if err != nil {
			return err
		}
		enc := json.NewEncoder(stdout)
		enc.SetIndent("", "  ")
		if err := enc.Encode(struct {
			Plan   *place.Plan `json:"plan"`
			Draft  *place.Plan `json:"draft,omitempty"`
			Fit    fitReport   `json:"fit"`
			Memory []memRow    `json:"memory"`
			Notes  []string    `json:"notes,omitempty"`
			// Adapters are the LoRA adapters (lora.go) and the multimodal
			// projector (mmproj.go) beside the model
			Adapters []adapterReport `json:"adapters,omitempty"`
		}{pd.plan, pd.draft, fit, rows, s.notes, adapters}); err != nil {
			return err
		}
		return pd.refused()
	}
	for _, n := range s.notes {
		fmt.Fprintln(stdout, n)
	}
	printFit(stdout, fit)
	fmt.Fprintln(stdout)
	pd.plan.Report(stdout, place.ReportOptions{Tensors: *tensors, Debug: *verbose})
	pf.lora.write(stdout)
	pf.mmproj.write(stdout)
	if pd.draft != nil {
		fmt.Fprintf(stdout, "\ndraft model %s (-md), beside it at -c %d:\n", pf.draft.model, pd.draft.Params.Context.NCtx)
		pd.draft.WriteBreakdown(stdout)
	}
	if isTerminalWriter(stdout) {
		fmt.Fprintln(stdout)
		drawMemory(stdout, rows, 80)
	}
	return pd.refused()
}

// parseModel parses a command's arguments and names its model ("" when
// -mu brings it). With --list-devices it prints llama.cpp's list instead
// and says it is done.
func (f *placeFlags) parseModel(ctx context.Context, s *optionSet, args []string, stdout io.Writer) (path string, done bool, err error) {
	pos, err := s.parse(args)
	if err != nil {
		return "", true, helpOr(s, stdout, err)
	}
	if err := f.finish(s); err != nil {
		return "", true, err
	}
	if f.listDevices {
		return "", true, listDevices(ctx, f, stdout)
	}
	path, err = f.modelPath(s, pos)
	return path, err != nil, err
}

// listDevices is --list-devices: llama.cpp's list, then exit.
func listDevices(ctx context.Context, pf *placeFlags, stdout io.Writer) error {
	rt, err := pf.open(ctx)
	if err != nil {
		return err
	}
	_, err = io.WriteString(stdout, listDevicesText(rt))
	return err
}

// helpOr prints the help or the version when they were asked for.
func helpOr(s *optionSet, stdout io.Writer, err error) error {
	switch err {
	case errHelp:
		s.printHelp(stdout)
	case errVersion:
		printVersion(stdout)
	}
	return err
}

func plural(n int, what string) string {
	if n == 1 {
		return "1 " + what
	}
	return fmt.Sprintf("%d %ss", n, what)
}
