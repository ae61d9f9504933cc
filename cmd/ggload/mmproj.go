package main

import (
	"context"
	"fmt"
	"io"

	"github.com/ggload/ggload/ggml"
	"github.com/ggload/ggload/gguf/httpsrc"
	"github.com/ggload/ggload/loader"
	"github.com/ggload/ggload/place"
)

// mmprojFlags are llama.cpp's multimodal projector options. The projector
// is read, checked against the model's input width and placed when the
// model is planned (plan and load), and loaded beside it by load, as
// libmtmd's clip_init loads it; run refuses it, since ggload encodes no
// image or audio. llama.cpp's -fit counts the projector (its weights and
// its warm-up's compute buffers, mtmd_get_memory_usage) in llama-server
// only: ggload's -fit does not.
type mmprojFlags struct {
	path    string // -mm; with -mmu, where the download goes
	url     string // -mmu
	auto    bool   // --mmproj-auto: only -hf's downloads look at it
	offload bool   // --mmproj-offload (mmproj_use_gpu)
	device  string // -mmdev's device ("": follows --device)
	planned *place.Mmproj
}

func defaultMmprojFlags() mmprojFlags { return mmprojFlags{auto: true, offload: true} }

// given reports whether a projector was asked for.
func (f *mmprojFlags) given() bool { return f.path != "" || f.url != "" }

func (f *mmprojFlags) add(s *optionSet) {
	s.group("llama.cpp's multimodal projector options: placed and loaded beside the model as libmtmd loads it (plan, load)")
	s.add(&option{names: []string{"-mm", "--mmproj"}, value: "FILE",
		help: "path to a multimodal projector file (with -mmu: where the download goes)",
		set: func(v string) error {
			if v == "" {
				return fmt.Errorf("want a file")
			}
			f.path = v
			return nil
		}})
	s.add(&option{names: []string{"-mmu", "--mmproj-url"}, value: "URL",
		help: "download the multimodal projector from this http(s) URL, as -mu downloads a model: to -mm's path, else into llama.cpp's cache",
		set: func(v string) error {
			if _, err := httpsrc.CheckURL(v); err != nil {
				return err
			}
			f.url = v
			return nil
		}})
	s.add(&option{names: []string{"--mmproj-auto"}, neg: []string{"--no-mmproj", "--no-mmproj-auto"},
		help:  "whether to use the projector of a -hf repository (default: enabled)",
		inert: "it chooses among a -hf repository's files, and ggload resolves no repository",
		on:    func(on bool) error { f.auto = on; return nil }})
	s.add(&option{names: []string{"--mmproj-offload"}, neg: []string{"--no-mmproj-offload"},
		help: "whether to offload the multimodal projector to a GPU (default: enabled)",
		on:   func(on bool) error { f.offload = on; return nil }})
	s.add(&option{names: []string{"-mmdev", "--mmproj-device"}, value: "DEVICE",
		help: "device for the multimodal projector (none: no offload; default: --device's first)\n--list-devices lists them",
		set: func(v string) error {
			if v == "none" {
				f.offload, f.device = false, ""
				return nil
			}
			d, err := parseDevices(v)
			if err != nil {
				return err
			}
			if len(d) > 1 {
				return fmt.Errorf("only one device may be specified for mmproj")
			}
			f.offload, f.device = true, d[0]
			return nil
		}})
}

// options are the projector's device options as clip receives them.
func (f *mmprojFlags) options(devices []string) place.MmprojOptions {
	if !f.offload {
		return place.MmprojOptions{NoOffload: true}
	}
	if f.device != "" {
		return place.MmprojOptions{Device: f.device}
	}
	return place.MmprojOptions{Devices: devices}
}

// plan downloads -mmu's projector, then reads, checks and places it
// beside the model's plan.
func (f *mmprojFlags) plan(ctx context.Context, pf *placeFlags, p *place.Plan, stderr io.Writer) error {
	f.planned = nil
	if !f.given() {
		return nil
	}
	path := f.path
	if f.url != "" {
		var err error
		if path, err = pf.download(ctx, f.url, f.path, stderr); err != nil {
			return fmt.Errorf("-mmu: %w", err)
		}
	}
	if f.device != "" && !f.offload {
		// llama.cpp looks -mmdev's device up as it parses the option,
		// whatever --no-mmproj-offload says after it
		if _, err := place.MmprojDevice(p.Runtime(), place.MmprojOptions{Device: f.device}); err != nil {
			return err
		}
	}
	mp, err := p.PlanMmproj(path, f.options(pf.devices))
	if err != nil {
		return err
	}
	f.planned = mp
	return nil
}

// write prints the projector's lines as clip words them, and its buffers.
func (f *mmprojFlags) write(w io.Writer) {
	mp := f.planned
	if mp == nil {
		return
	}
	fmt.Fprintf(w, "\nmultimodal projector %s (%.2f MiB, on %s):\n", mp.Path, float64(mp.Size())/(1<<20), mp.Device.Name())
	for _, ln := range mp.Log {
		if ln.Level != "DEBUG" {
			fmt.Fprintln(w, "  "+ln.Text)
		}
	}
	for _, e := range mp.Encoders {
		fmt.Fprintf(w, "  ggload: %-9s %-16s width %5d, %3d tensors, %10s buffer size = %8.2f MiB\n", e.Modality, e.Projector, e.Embd,
			len(e.Tensors), e.Buffer.Name, float64(e.Buffer.Size)/(1<<20))
	}
}

// reports are the projector for --json's adapters.
func (f *mmprojFlags) reports() []adapterReport {
	mp := f.planned
	if mp == nil {
		return nil
	}
	r := adapterReport{Path: mp.Path, Kind: "mmproj", Tensors: []adapterTensorReport{}, Buffers: []adapterBufferReport{}}
	dev := mp.Device.Name()
	for _, e := range mp.Encoders {
		for _, t := range e.Tensors {
			r.Tensors = append(r.Tensors, adapterTensorReport{t.Name, mp.BufferType.Name(), dev})
		}
		r.Buffers = append(r.Buffers, adapterBufferReport{e.Buffer.Name, e.Buffer.BufferType.Name(), dev, e.Buffer.Size})
	}
	return []adapterReport{r}
}

// rows adds the projector's weights to the memory rows: on its device's
// row, or the host's for the CPU (a device the model does not use gets a
// row of its own).
func (f *mmprojFlags) rows(rows []memRow) []memRow {
	mp := f.planned
	if mp == nil {
		return rows
	}
	name := mp.Device.Name()
	host := mp.Device.Type() == ggml.DeviceCPU
	for i := range rows {
		if host && rows[i].Host || !host && !rows[i].Host && rows[i].Name == name {
			rows[i].Projector += mp.Size()
			rows[i].Fits = rows[i].need() <= rows[i].Free
			rows[i].LeavesTarget = rows[i].need()+rows[i].Target <= rows[i].Free
			return rows
		}
	}
	free, total := mp.Device.Memory()
	r := memRow{Name: name, Projector: mp.Size(), Free: free, Total: total}
	r.Fits = r.need() <= r.Free
	r.LeavesTarget = r.Fits
	// before the host's row, which stays last
	return append(rows[:len(rows)-1:len(rows)-1], r, rows[len(rows)-1])
}

// load loads the planned projector onto its device, reading its file as
// the model's load mode says; close frees it.
func (f *mmprojFlags) load(ctx context.Context, rt *ggml.Runtime, mode place.LoadMode) (*loader.Mmproj, func(), error) {
	if f.planned == nil {
		return nil, func() {}, nil
	}
	m, err := loader.LoadMmproj(ctx, rt, f.planned, loader.MmprojOptions{LoadMode: mode})
	if err != nil {
		return nil, func() {}, err
	}
	return m, func() { m.Close() }, nil
}
