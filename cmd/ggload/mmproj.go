package main

import (
	"context"
	"fmt"
	"io"
	"maps"
	"slices"

	"github.com/ggload/ggload/ggml"
	"github.com/ggload/ggload/gguf/httpsrc"
	"github.com/ggload/ggload/loader"
	"github.com/ggload/ggload/place"
)

// mmprojFlags are llama.cpp's multimodal projector options. The projector
// is read, checked against the model's input width and placed when the
// model is planned (plan and load), and loaded beside it by load, as
// libmtmd's clip_init loads it; run refuses it, since ggload encodes no
// image or audio. -fit counts the projector as llama-server does (its
// weights and its warm-up's compute buffers, mtmd_get_memory_usage, added
// to the targets of their devices).
type mmprojFlags struct {
	path    string // -mm; with -mmu, where the download goes
	url     string // -mmu
	auto    bool   // --mmproj-auto: -hf brings the repository's projector
	offload bool   // --mmproj-offload (mmproj_use_gpu)
	device  string // -mmdev's device ("": follows --device)
	// --image-min-tokens, --image-max-tokens (0: the model's own)
	minTokens, maxTokens int32
	planned              *place.Mmproj
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
		help: "whether to use the projector of a -hf repository, where the command takes one (default: enabled)",
		on:   func(on bool) error { f.auto = on; return nil }})
	s.add(&option{names: []string{"--mmproj-offload"}, neg: []string{"--no-mmproj-offload"},
		help: "whether to offload the multimodal projector to a GPU (default: enabled)",
		on:   func(on bool) error { f.offload = on; return nil }})
	s.add(&option{names: []string{"--image-min-tokens"}, value: "N",
		help: "minimum number of tokens each image can take, only used by vision models with dynamic resolution (default: read from model)",
		set:  func(v string) (err error) { f.minTokens, err = int32Arg(v); return err }})
	s.add(&option{names: []string{"--image-max-tokens"}, value: "N",
		help: "maximum number of tokens each image can take, only used by vision models with dynamic resolution (default: read from model)",
		set:  func(v string) (err error) { f.maxTokens, err = int32Arg(v); return err }})
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

// prepare downloads -mmu's projector, then reads and places it as
// llama-server does before the model is fitted and loaded: its warm-up
// replayed, its memory (mtmd_get_memory_usage) added to -fit's targets.
func (f *mmprojFlags) prepare(ctx context.Context, pf *placeFlags, rt *ggml.Runtime, o *place.FitOptions, stderr io.Writer) error {
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
		if _, err := place.MmprojDevice(rt, place.MmprojOptions{Device: f.device}); err != nil {
			return err
		}
	}
	opts := f.options(pf.devices)
	opts.FlashAttn = pf.params().Context.FlashAttn
	opts.ImageMinTokens, opts.ImageMaxTokens = int(f.minTokens), int(f.maxTokens)
	mp, err := place.PlanMmproj(rt, path, opts)
	if err != nil {
		return err
	}
	f.planned = mp
	if !pf.fit {
		return nil
	}
	mem, err := mp.Memory()
	if err != nil {
		// llama-server fits without the projector when it cannot measure it
		mp.Log = append(mp.Log, place.LogLine{Level: "WARN", Text: fmt.Sprintf("ggload: -fit does not count the projector: %v", err)})
		return nil
	}
	o.Targets = place.MmprojFitTargets(rt, o.Targets, mem)
	return nil
}

// check refuses a projector made for another model than the plan's.
func (f *mmprojFlags) check(p *place.Plan) error {
	if f.planned == nil {
		return nil
	}
	return p.CheckMmproj(f.planned)
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
		if e.ComputeErr != nil {
			// (clip's own lines above give the compute buffers it replayed)
			fmt.Fprintf(w, "  ggload: %-9s warm-up not replayed: %v\n", e.Modality, e.ComputeErr)
		}
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

// rows adds the projector's weights and its warm-up's compute buffers to
// the memory rows: each on its device's row, the host's for the CPU (a
// device the model does not use gets a row of its own).
func (f *mmprojFlags) rows(rows []memRow) []memRow {
	mp := f.planned
	if mp == nil {
		return rows
	}
	add := func(d *ggml.Device, n uint64) {
		if n == 0 {
			return
		}
		host := d.Type() == ggml.DeviceCPU
		for i := range rows {
			if host && rows[i].Host || !host && !rows[i].Host && rows[i].Name == d.Name() {
				rows[i].Projector += n
				rows[i].Fits = rows[i].need() <= rows[i].Free
				rows[i].LeavesTarget = rows[i].need()+rows[i].Target <= rows[i].Free
				return
			}
		}
		free, total := d.Memory()
		r := memRow{Name: d.Name(), Projector: n, Free: free, Total: total}
		r.Fits = r.need() <= r.Free
		r.LeavesTarget = r.Fits
		// before the host's row, which stays last
		rows = append(rows[:len(rows)-1:len(rows)-1], r, rows[len(rows)-1])
	}
	add(mp.Device, mp.Size())
	rt := mp.Device.Runtime()
	for _, e := range mp.Encoders {
		for _, name := range slices.Sorted(maps.Keys(e.Compute)) {
			if d, err := rt.DeviceByName(name); err == nil {
				add(d, e.Compute[name])
			}
		}
	}
	return rows
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
