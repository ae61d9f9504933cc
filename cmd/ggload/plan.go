package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"

	"github.com/ggload/ggload/ggml"
	"github.com/ggload/ggload/loader/gguf"
	"github.com/ggload/ggload/place"
)

func init() {
	register(command{"plan", "where every tensor would go, without loading [llama.cpp's flags] [--fit] [--json] [--tensors]", runPlan})
}

// planModel opens the model and plans it with the flags (and --fit).
func planModel(pf *placeFlags, path string) (*ggml.Runtime, *gguf.Model, *place.Plan, []string, error) {
	params, err := pf.params()
	if err != nil {
		return nil, nil, nil, nil, err
	}
	rt, err := pf.open()
	if err != nil {
		return nil, nil, nil, nil, err
	}
	m, err := gguf.OpenModel(path)
	if err != nil {
		return nil, nil, nil, nil, err
	}
	if pf.fit {
		res, err := place.Fit(rt, m, params, place.FitOptions{Targets: []uint64{pf.reserveMiB << 20}})
		if err != nil {
			m.Close()
			return nil, nil, nil, nil, err
		}
		return rt, m, res.Plan, res.Reasoning, nil
	}
	p, err := place.New(rt, m, params)
	if err != nil {
		m.Close()
		return nil, nil, nil, nil, err
	}
	return rt, m, p, nil, nil
}

func runPlan(ctx context.Context, args []string, stdout io.Writer) error {
	fs := newFlags("plan")
	var pf placeFlags
	pf.add(fs)
	asJSON := fs.Bool("json", false, "print JSON")
	tensors := fs.Bool("tensors", false, "list every tensor with its buffer type and the reason")
	verbose := fs.Bool("v", false, "include llama.cpp's debug lines (layer assignment, overrides, moved tensors)")
	pos, err := parseArgs(fs, args)
	if err != nil {
		return err
	}
	if len(pos) != 1 {
		return fmt.Errorf("usage: ggload plan MODEL [flags]")
	}
	_, m, p, reasoning, err := planModel(&pf, pos[0])
	if err != nil {
		return err
	}
	defer m.Close()
	if *asJSON {
		enc := json.NewEncoder(stdout)
		enc.SetIndent("", "  ")
		return enc.Encode(struct {
			Plan *place.Plan `json:"plan"`
			Fit  []string    `json:"fit,omitempty"`
		}{p, reasoning})
	}
	if len(reasoning) > 0 {
		fmt.Fprintln(stdout, "fit:")
		for _, r := range reasoning {
			fmt.Fprintln(stdout, "  "+r)
		}
		fmt.Fprintln(stdout)
	}
	p.Report(stdout, place.ReportOptions{Tensors: *tensors, Debug: *verbose})
	return nil
}
