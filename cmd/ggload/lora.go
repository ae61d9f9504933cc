package main

import (
	"context"
	"fmt"
	"io"
	"strings"

	"github.com/ggload/ggload/ggml"
	"github.com/ggload/ggload/infer"
	"github.com/ggload/ggload/loader"
	"github.com/ggload/ggload/place"
)

// loraFlags are llama.cpp's LoRA adapter options. The adapters are read,
// checked against the model and placed when it is planned (plan, load and
// run alike), loaded beside the model by load and run, and applied by
// run's context with their scales unless --lora-init-without-apply, as
// common_init_from_params does. llama.cpp loads them after -fit, which
// does not count them: neither does ggload's.
type loraFlags struct {
	files   []loraFile
	noApply bool
	planned []*place.LoRA
}

// loraFile is one adapter of the options.
type loraFile struct {
	path  string
	scale float32
}

func (f *loraFlags) add(s *optionSet) {
	s.group("llama.cpp's LoRA adapter options: checked and placed with the model, loaded beside it, applied by run's context")
	s.add(&option{names: []string{"--lora"}, value: "FNAME",
		help: "path to a LoRA adapter (comma-separated values: several)",
		set: func(v string) error {
			for _, p := range parseCSVRow(v) {
				f.files = append(f.files, loraFile{p, 1})
			}
			return nil
		}})
	s.add(&option{names: []string{"--lora-scaled"}, value: "FNAME:SCALE,...",
		help: "path to a LoRA adapter with its scale (format: FNAME:SCALE; comma-separated values: several)",
		set: func(v string) error {
			for _, item := range parseCSVRow(v) {
				parts := strings.Split(item, ":")
				if len(parts) != 2 {
					return fmt.Errorf("lora-scaled format: FNAME:SCALE")
				}
				sc, err := floatArg(parts[1])
				if err != nil {
					return fmt.Errorf("%s: the scale: %w", item, err)
				}
				f.files = append(f.files, loraFile{parts[0], sc})
			}
			return nil
		}})
	s.add(&option{names: []string{"--lora-init-without-apply"},
		help: "load the LoRA adapters without applying them (run: the context computes without them)",
		on:   func(on bool) error { f.noApply = on; return nil }})
}

// plan reads, checks and places every adapter beside the model's plan.
func (f *loraFlags) plan(p *place.Plan) error {
	f.planned = nil
	for _, lf := range f.files {
		l, err := p.PlanLoRA(lf.path)
		if err != nil {
			return err
		}
		f.planned = append(f.planned, l)
	}
	return nil
}

// write prints each adapter's lines as llama.cpp's are worded (its
// buffers' sizes, and the tensors that fall back from an extra buffer
// type to the CPU's).
func (f *loraFlags) write(w io.Writer) {
	for _, l := range f.planned {
		fmt.Fprintf(w, "\nLoRA adapter %s (alpha %g, %d tensors, %s):\n", l.Path, l.Alpha, 2*len(l.Pairs), sizeString(int64(l.Size())))
		for _, ln := range l.Log {
			if ln.Level != "DEBUG" {
				fmt.Fprintln(w, "  "+ln.Text)
			}
		}
		if len(l.InvocationTokens) > 0 {
			fmt.Fprintf(w, "  aLoRA invocation tokens: %v\n", l.InvocationTokens)
		}
	}
}

// adapterReport is an adapter in --json.
type adapterReport struct {
	Path    string                `json:"path"`
	Kind    string                `json:"kind"` // mmproj, lora, cvec
	Tensors []adapterTensorReport `json:"tensors"`
	Buffers []adapterBufferReport `json:"buffers"`
	// Verified is the tensors load --verify read back equal to the file
	// (a projector's; 0 when not verified)
	Verified int `json:"verified,omitempty"`
}

type adapterTensorReport struct {
	Name       string `json:"name"`
	BufferType string `json:"buffer_type"`
	Device     string `json:"device"`
}

type adapterBufferReport struct {
	Name       string `json:"name"`
	BufferType string `json:"buffer_type"`
	Device     string `json:"device"`
	Size       uint64 `json:"size"`
}

// adapterReports are --json's "adapters": the LoRA adapters, the control
// vector and the projector (last), as planned beside p's model.
func (pf *placeFlags) adapterReports(p *place.Plan) ([]adapterReport, error) {
	cv, err := pf.cvec.reports(p) // (cvec.go)
	if err != nil {
		return nil, err
	}
	out := append(pf.lora.reports(), cv...)
	return append(out, pf.mmproj.reports()...), nil // (mmproj.go)
}

// deviceName is a device's name, "" for none.
func deviceName(d *ggml.Device) string {
	if d == nil {
		return ""
	}
	return d.Name()
}

// reports are the adapters for --json.
func (f *loraFlags) reports() []adapterReport {
	var out []adapterReport
	for _, l := range f.planned {
		r := adapterReport{Path: l.Path, Kind: "lora", Tensors: []adapterTensorReport{}, Buffers: []adapterBufferReport{}}
		for _, pr := range l.Pairs {
			for _, t := range []place.LoRATensor{pr.A, pr.B} {
				r.Tensors = append(r.Tensors, adapterTensorReport{t.Name, pr.BufferType.Name(), deviceName(pr.Device)})
			}
		}
		for _, b := range l.Buffers {
			r.Buffers = append(r.Buffers, adapterBufferReport{b.Name, b.BufferType.Name(), deviceName(b.Device), b.Size})
		}
		out = append(out, r)
	}
	return out
}

// load loads the planned adapters beside lm; close frees them.
func (f *loraFlags) load(ctx context.Context, lm *loader.Model) (_ []*loader.LoRA, closeAll func(), err error) {
	var out []*loader.LoRA
	closeAll = func() {
		for _, a := range out {
			a.Close()
		}
	}
	for _, lp := range f.planned {
		a, err := loader.LoadLoRA(ctx, lm, lp)
		if err != nil {
			closeAll()
			return nil, func() {}, err
		}
		out = append(out, a)
	}
	return out, closeAll, nil
}

// attach loads the adapters beside lm and applies them to ic with their
// scales (unless --lora-init-without-apply), as common_init_from_params
// does; the function it returns takes them off the context and frees
// them.
func (f *loraFlags) attach(ctx context.Context, lm *loader.Model, ic *infer.Context) (func(), error) {
	if len(f.planned) == 0 {
		return func() {}, nil
	}
	as, closeAll, err := f.load(ctx, lm)
	if err != nil {
		return nil, err
	}
	done := func() {
		ic.SetLoRAs(nil, nil)
		closeAll()
	}
	if f.noApply {
		return done, nil
	}
	scales := make([]float32, len(as))
	for i := range as {
		scales[i] = f.files[i].scale
	}
	if err := ic.SetLoRAs(as, scales); err != nil {
		done()
		return nil, err
	}
	return done, nil
}
