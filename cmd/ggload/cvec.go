package main

import (
	"fmt"
	"strings"

	"github.com/ggload/ggload/gguf"
	"github.com/ggload/ggload/infer"
	"github.com/ggload/ggload/place"
)

// cvecFlags are llama.cpp's control vector options. The vectors are read
// and checked against the model when it is planned (plan, load and run
// alike); run's context applies them as common_init_from_params does,
// once the context is made. A control vector is the context's, not the
// model's: llama.cpp allocates it when the context applies it, so plan
// and load say so instead of counting it.
type cvecFlags struct {
	files      []infer.ControlVectorFile
	start, end int32 // --control-vector-layer-range; <= 0: 1 and n_layer
	loaded     *infer.ControlVector
	s          *optionSet // where the note goes
}

func (f *cvecFlags) add(s *optionSet) {
	f.s = s
	s.group("llama.cpp's control vector options: read and checked with the model, applied by run's context")
	s.add(&option{names: []string{"--control-vector"}, value: "FNAME",
		help: "add a control vector (comma-separated values: several)",
		set: func(v string) error {
			for _, p := range parseCSVRow(v) {
				f.files = append(f.files, infer.ControlVectorFile{Path: p, Scale: 1})
			}
			return nil
		}})
	s.add(&option{names: []string{"--control-vector-scaled"}, value: "FNAME:SCALE,...",
		help: "add a control vector with its directions scaled by SCALE (comma-separated values: several)",
		set: func(v string) error {
			for _, item := range parseCSVRow(v) {
				parts := strings.Split(item, ":")
				if len(parts) != 2 {
					return fmt.Errorf("control-vector-scaled format: FNAME:SCALE")
				}
				sc, err := floatArg(parts[1])
				if err != nil {
					return fmt.Errorf("%s: the scale: %w", item, err)
				}
				f.files = append(f.files, infer.ControlVectorFile{Path: parts[0], Scale: sc})
			}
			return nil
		}})
	s.add(&option{names: []string{"--control-vector-layer-range"}, value: "START END",
		help: "the layers to apply the control vectors to, both included (default: 1 to n_layer)",
		set2: func(a, b string) error {
			var err error
			if f.start, err = int32Arg(a); err != nil {
				return fmt.Errorf("START: %w", err)
			}
			if f.end, err = int32Arg(b); err != nil {
				return fmt.Errorf("END: %w", err)
			}
			return nil
		}})
}

// check reads the control vectors and checks their width against the
// model's n_embd, with a note that the context, not the plan, holds them.
func (f *cvecFlags) check(m *gguf.Model) error {
	if len(f.files) == 0 {
		return nil
	}
	cv, err := infer.LoadControlVectors(f.files)
	if err != nil {
		return err
	}
	arch := m.Architecture()
	nEmbd, err := m.Uint(arch + ".embedding_length")
	if err == nil && uint64(cv.NEmbd) != nEmbd {
		paths := make([]string, len(f.files))
		for i, cf := range f.files {
			paths[i] = cf.Path
		}
		return fmt.Errorf("control vector %s: its directions have %d values and the model's n_embd is %d: "+
			"the control vector n_embd does not match the model", strings.Join(paths, ", "), cv.NEmbd, nEmbd)
	}
	f.loaded = cv
	if f.s != nil {
		span := "1 to n_layer"
		if f.start > 0 || f.end > 0 {
			span = fmt.Sprintf("%s to %s", orDefault(f.start, "1"), orDefault(f.end, "n_layer"))
		}
		f.s.notes = append(f.s.notes, fmt.Sprintf("note: %s (n_embd %d, directions for layers 1 to %d) on layers %s: "+
			"a control vector is the context's, allocated when it applies it (%d f32 per layer but 0, on each layer's buffer type), not counted in the plan",
			plural(len(f.files), "control vector"), cv.NEmbd, cv.Layers(), span, cv.NEmbd))
	}
	return nil
}

func orDefault(v int32, def string) string {
	if v <= 0 {
		return def
	}
	return fmt.Sprint(v)
}

// apply applies the control vectors to the context, as
// common_init_from_params does after making it.
func (f *cvecFlags) apply(ic *infer.Context) error {
	if f.loaded == nil {
		return nil
	}
	return ic.ApplyControlVector(f.loaded, f.start, f.end)
}

// reports is the control vector for --json's adapters: where a context
// puts it (place.Plan.ControlVectorLayout), each layer's direction named
// as the files name it. Its path is the files', comma-separated.
func (f *cvecFlags) reports(p *place.Plan) ([]adapterReport, error) {
	if f.loaded == nil {
		return nil, nil
	}
	tensors, bufs, err := p.ControlVectorLayout(int64(f.loaded.NEmbd))
	if err != nil {
		return nil, err
	}
	paths := make([]string, len(f.files))
	for i, cf := range f.files {
		paths[i] = cf.Path
	}
	r := adapterReport{Path: strings.Join(paths, ","), Kind: "cvec", Tensors: []adapterTensorReport{}, Buffers: []adapterBufferReport{}}
	for _, t := range tensors {
		r.Tensors = append(r.Tensors, adapterTensorReport{fmt.Sprintf("direction.%d", t.Layer), t.BufferType.Name(), deviceName(t.Device)})
	}
	for _, b := range bufs {
		r.Buffers = append(r.Buffers, adapterBufferReport{b.BufferType.Name(), b.BufferType.Name(), deviceName(b.Device), b.Size})
	}
	return []adapterReport{r}, nil
}
