// Port of llama.cpp common/arg.cpp (v0.5.0): the model loading, placement,
// fit and device options.

package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math"
	"os"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/ggload/ggload/bindings"
	"github.com/ggload/ggload/ggml"
	"github.com/ggload/ggload/gguf"
	"github.com/ggload/ggload/gguf/httpsrc"
	"github.com/ggload/ggload/place"
)

// maxDevices is llama_max_devices() of the pin: -ts and -fitt take fewer
// values than this.
const maxDevices = 16

// placeFlags are llama.cpp's model loading, placement, fit and device
// options (as the pin's common/arg.cpp spells them), shared by plan and
// load, with ggload's earlier spellings as aliases.
type placeFlags struct {
	runtimeFlags
	model       string
	modelURL    string   // -mu: downloaded, then loaded from disk
	hub         hubFlags // -hf, -hff, --offline (hub.go)
	hfToken     string   // -hft: the bearer token of every request
	ngl         place.Layers
	sm          place.SplitMode
	mg          int
	ts          []float32
	overrides   []place.Override // -ot, -cmoe, -ncmoe, -ncffn, in command-line order
	noHost      bool
	repack      bool
	devices     []string
	loadMode    place.LoadMode
	lmGiven     bool
	noMmap      bool // llama.cpp's older --no-mmap
	mlock       bool // and --mlock
	lazy        place.LazyMode
	numa        ggml.NUMAStrategy
	fit         bool
	fitTargets  []uint64
	fitCtx      int
	check       bool
	kvOverrides []place.KVOverride
	opOffload   bool
	listDevices bool
	version     bool
	mapRanges   place.MapRanges
	context     place.ContextParams
	draft       draftFlags
	cvec        cvecFlags // --control-vector* (cvec.go)
	lora        loraFlags // --lora* (lora.go)
	// -mm* (mmproj.go)
	mmproj mmprojFlags
}

// draftFlags are the draft model's options (-md, -ngld, -devd, -otd): a
// second model that -fit counts beside the main one.
type draftFlags struct {
	model        string
	ngl          place.Layers
	devices      []string
	overrides    []place.Override // -otd, -cmoed, -ncmoed, in command-line order
	typeK, typeV place.CacheType  // -ctkd, -ctvd (f16 unless given)
}

func defaultPlaceFlags() placeFlags {
	d := place.Params{}
	return placeFlags{runtimeFlags: defaultRuntimeFlags(), ngl: d.NGPULayers, sm: d.SplitMode, repack: !d.NoExtraBufts, loadMode: d.LoadMode,
		lazy: d.Lazy, fit: true, fitCtx: place.DefaultFitMinCtx, opOffload: true, mapRanges: d.MapRanges, draft: draftFlags{ngl: d.NGPULayers}, mmproj: defaultMmprojFlags(),
		hub: hubFlags{mmproj: true}}
}

var numaNames = map[string]ggml.NUMAStrategy{"distribute": ggml.NUMADistribute, "isolate": ggml.NUMAIsolate, "numactl": ggml.NUMANumactl}

// add registers the options on s, in the groups and order of the help.
func (f *placeFlags) add(s *optionSet) {
	f.addLoading(s)
	f.addPlacement(s)
	f.addContext(s)
	f.cvec.add(s)
	f.lora.add(s)
	f.mmproj.add(s)
	f.addFit(s)
	f.addDraft(s)
	f.addUnsupported(s)
	f.addOwn(s)
}

// addLoading registers llama.cpp's model loading options.
func (f *placeFlags) addLoading(s *optionSet) {
	s.group("llama.cpp's model loading options, as llama.cpp " + pinTag() + " spells them")
	s.add(&option{names: []string{"-m", "--model"}, value: "FNAME",
		help: "the model to load (or give it as MODEL); the first file of a split model",
		set:  func(v string) error { f.model = v; return nil }})
	s.add(&option{names: []string{"-mu", "--model-url"}, value: "MODEL_URL",
		help: "download the model from this http(s) URL (every split of it), then load it from disk: into llama.cpp's\n" +
			"cache ($LLAMA_CACHE, else ~/.cache/llama.cpp), or to -m's path; resumed when cut off, kept while the server's ETag\n" +
			"is unchanged (a URL given as MODEL is read in place instead, by range requests, with no local copy)",
		set: func(v string) error {
			if _, err := httpsrc.CheckURL(v); err != nil {
				return err
			}
			f.modelURL = v
			return nil
		}})
	s.add(&option{names: []string{"-hft", "--hf-token"}, value: "TOKEN",
		help: "the bearer token sent with every request for a model URL or a -hf repository (default: $HF_TOKEN)", secret: true,
		set: func(v string) error { f.hfToken = v; return nil }})
	f.hub.add(s)
	s.add(&option{names: []string{"-lm", "--load-mode"}, value: "MODE",
		help: "how the weights reach memory (default: auto)\n" +
			"- auto: mmap, unless a device cannot map\n" +
			"- none: read the file into the buffers\n" +
			"- mmap: map the file; weights stay in the page cache where they can\n" +
			"- mlock: read into the buffers and lock them in RAM\n" +
			"- mmap+mlock: map the file and lock the mapping in RAM\n" +
			"- dio: read with direct I/O, past the page cache, where the file system allows\n" +
			"(ggload also takes mmap-mlock and direct-io; llama.cpp's older --no-mmap and --mlock map to none, mlock and mmap+mlock)",
		set: func(v string) error {
			m, err := place.ParseLoadMode(v)
			if err != nil {
				return withHint(err, v, place.LoadModeNames())
			}
			f.loadMode, f.lmGiven = m, true
			return nil
		}})
	s.add(&option{names: []string{"--no-mmap"}, hidden: true, on: func(on bool) error {
		f.noMmap = on
		return nil
	}})
	s.add(&option{names: []string{"--mlock"}, hidden: true, on: func(on bool) error {
		f.mlock = on
		return nil
	}})
	s.add(&option{names: []string{"-lzm", "--lazy-mode"}, value: "MODE", alias: []string{"--lazy"},
		help: "read the tensors the architecture marks (per-layer embeddings) on demand (default: auto)\n" +
			"- on: leave them on disk, read rows as needed (needs mmap)\n" +
			"- auto: on for tensors over 4 GiB\n" +
			"- off: keep them in memory",
		set: func(v string) error {
			m, err := place.ParseLazyMode(v)
			if err != nil {
				return withHint(err, v, []string{"on", "auto", "off"})
			}
			f.lazy = m
			return nil
		}})
	s.add(&option{names: []string{"--numa"}, value: "TYPE",
		help: "set the CPU backend up for a NUMA machine (default: not set up)\n" +
			"- distribute: spread work over every node\n" +
			"- isolate: keep to the node the process started on\n" +
			"- numactl: follow numactl's CPU map\n" +
			"with a NUMA set-up, mapped files are not prefetched",
		set: func(v string) error {
			n, ok := numaNames[v]
			if !ok {
				return withHint(fmt.Errorf("want distribute, isolate or numactl"), v, []string{"distribute", "isolate", "numactl"})
			}
			f.numa = n
			return nil
		}})
	s.add(&option{names: []string{"--repack"}, neg: []string{"-nr", "--no-repack"}, alias: []string{"--no-extra-bufts"},
		help: "repack weights for the CPU (its extra buffer types, CPU_REPACK) (default: enabled)",
		on:   func(on bool) error { f.repack = on; return nil }})
	s.add(&option{names: []string{"--no-host"},
		help: "keep devices' host (pinned) buffer types out, so that extra buffer types can be used",
		on:   func(on bool) error { f.noHost = on; return nil }})
	s.add(&option{names: []string{"--check-tensors"},
		help: "check the tensors' data for invalid values while loading (default: false)",
		on:   func(on bool) error { f.check = on; return nil }})
	s.add(&option{names: []string{"--override-kv"}, value: "KEY=TYPE:VALUE,...",
		help: "override model metadata by key; several are comma-separated; types: int, float, bool, str\n" +
			"(e.g. --override-kv llama.context_length=int:8192); the hyperparameters, and so the placement, read them",
		set: func(v string) error {
			for _, item := range parseCSVRow(v) {
				o, err := place.ParseKVOverride(item)
				if err != nil {
					return err
				}
				f.kvOverrides = append(f.kvOverrides, o)
			}
			return nil
		}})
	s.add(&option{names: []string{"--op-offload"}, neg: []string{"--no-op-offload"},
		help:  "offload operations on host tensors to a device (default: true)",
		inert: "ggload runs no graphs",
		on:    func(on bool) error { f.opOffload = on; return nil }})
}

// addPlacement registers llama.cpp's placement and device options.
func (f *placeFlags) addPlacement(s *optionSet) {
	s.group("llama.cpp's placement and device options")
	s.add(&option{names: []string{"-dev", "--device"}, value: "<dev1,dev2,..>",
		help: "comma-separated devices to offload to, in order (none: no offload)\n--list-devices lists them",
		set:  func(v string) (err error) { f.devices, err = parseDevices(v); return err }})
	s.add(&option{names: []string{"--list-devices"}, help: "print the devices that can be offloaded to, and exit",
		on: func(on bool) error { f.listDevices = on; return nil }})
	f.runtimeFlags.addRPC(s)
	s.add(&option{names: []string{"-ngl", "--gpu-layers", "--n-gpu-layers"}, value: "N",
		help: "most layers to keep in device memory: a number, 'auto' (-1) or 'all' (-2 or less) (default: auto: all, or what -fit chooses)",
		set:  func(v string) (err error) { f.ngl, err = parseNGL(v); return err }})
	s.add(&option{names: []string{"-sm", "--split-mode"}, value: "{none,layer,row,tensor}",
		help: "how to spread the model over several devices:\n" +
			"- none: one device (-mg)\n" +
			"- layer (default): whole layers per device\n" +
			"- row: each matrix's rows over the devices\n" +
			"- tensor: every weight in slices over the devices (ggml's meta device\n" +
			"  over every device but the CPU; -ts: each device's share)",
		set: func(v string) error {
			m, err := place.ParseSplitMode(v)
			if err != nil {
				return withHint(err, v, []string{"none", "layer", "row", "tensor"})
			}
			f.sm = m
			return nil
		}})
	s.add(&option{names: []string{"-ts", "--tensor-split"}, value: "N0,N1,N2,...",
		help: "the share of the model for each device, e.g. 3,1 (default: by free memory)",
		set: func(v string) error {
			ts, err := place.ParseTensorSplit(v)
			if err != nil {
				return err
			}
			if len(ts) >= maxDevices {
				return fmt.Errorf("%d values: at most %d (llama_max_devices() is %d)", len(ts), maxDevices-1, maxDevices)
			}
			for _, x := range ts {
				if math.IsInf(float64(x), 0) || math.IsNaN(float64(x)) {
					return fmt.Errorf("shares must be finite")
				}
			}
			f.ts = ts
			return nil
		}})
	s.add(&option{names: []string{"-mg", "--main-gpu"}, value: "INDEX",
		help: "the device for -sm none, an index into the device list, -1 for none (default: 0)",
		set: func(v string) error {
			n, err := intIn(v, -1, maxDevices-1)
			if err != nil {
				return err
			}
			f.mg = int(n)
			return nil
		}})
	s.add(&option{names: []string{"-ot", "--override-tensor"}, value: "<tensor name pattern>=<buffer type>,...",
		help: "put the tensors whose names match a pattern in a buffer type; the first match wins",
		set:  func(v string) error { return appendOverrides(&f.overrides, v) }})
	addCPUMoE(s, []string{"-cmoe", "--cpu-moe"}, []string{"-ncmoe", "--n-cpu-moe"}, &f.overrides, "")
	addFirstLayersOnCPU(s, []string{"-ncffn", "--n-cpu-ffn"}, "keep the dense FFN weights of the first N layers on the CPU (for MoE experts: -ncmoe)",
		place.DenseFFNPattern, &f.overrides)
}

// addFit registers llama.cpp's fit options.
func (f *placeFlags) addFit(s *optionSet) {
	s.group("llama.cpp's fit options")
	s.add(&option{names: []string{"-fit", "--fit"}, value: "[on|off]", optValue: true, optWords: []string{"on", "off", "enabled", "disabled", "true", "false", "1", "0"},
		help: "choose the parameters left unset (-c 0, -ngl auto, no -ts, no -ot) so that the model and its context leave every device its -fitt free: a smaller context first, then fewer layers (default: on)",
		set: func(v string) error {
			if v == "" { // ggload's earlier bare --fit
				f.fit = true
				return nil
			}
			b, ok := parseBool(v)
			if !ok {
				return fmt.Errorf("want on or off")
			}
			f.fit = b
			return nil
		}})
	s.add(&option{names: []string{"-fitt", "--fit-target"}, value: "MiB0,MiB1,MiB2,...", alias: []string{"--fit-reserve"},
		help: fmt.Sprintf("MiB -fit leaves free on each device, comma-separated; one value applies to every device (default: %d)", place.DefaultFitTarget>>20),
		set: func(v string) error {
			parts := strings.FieldsFunc(v, func(r rune) bool { return r == ',' || r == '/' })
			if len(parts) >= maxDevices {
				// the pin's wording (common/arg.cpp)
				return fmt.Errorf("got %d input configs, but system only has %d devices", len(parts), maxDevices)
			}
			if len(parts) == 0 {
				return fmt.Errorf("want 1 to %d values", maxDevices-1)
			}
			f.fitTargets = nil
			for _, p := range parts {
				n, err := intIn(p, 0, 1<<24)
				if err != nil {
					return fmt.Errorf("%q: %v MiB", p, err)
				}
				f.fitTargets = append(f.fitTargets, uint64(n)<<20)
			}
			return nil
		}})
	s.add(&option{names: []string{"-fitc", "--fit-ctx"}, value: "N",
		help: fmt.Sprintf("the smallest context per sequence -fit may shrink an unset -c to (default: %d)", place.DefaultFitMinCtx),
		set: func(v string) error {
			n, err := intIn(v, 0, math.MaxInt32)
			if err != nil {
				return err
			}
			f.fitCtx = int(n)
			return nil
		}})
}

// addDraft registers llama.cpp's draft model options: -fit counts the
// draft model (its weights, and its context, which follows the main
// one's size) as llama.cpp's common_fit_params does, and plan shows its
// memory.
func (f *placeFlags) addDraft(s *optionSet) {
	d := &f.draft
	s.group("llama.cpp's draft model options: a second model sharing the devices, which -fit counts")
	s.add(&option{names: []string{"--spec-draft-model", "-md", "--model-draft"}, value: "FNAME",
		help: "draft model for speculative decoding (default: unused)",
		set:  func(v string) error { d.model = v; return nil }})
	s.add(&option{names: []string{"--spec-draft-ngl", "-ngld", "--gpu-layers-draft", "--n-gpu-layers-draft"}, value: "N",
		help: "most draft model layers to keep in device memory: a number, 'auto' or 'all' (default: auto)",
		set:  func(v string) (err error) { d.ngl, err = parseNGL(v); return err }})
	s.add(&option{names: []string{"--spec-draft-device", "-devd", "--device-draft"}, value: "<dev1,dev2,..>",
		help: "comma-separated devices to offload the draft model to (none: no offload; default: follows -dev)",
		set:  func(v string) (err error) { d.devices, err = parseDevices(v); return err }})
	s.add(&option{names: []string{"--spec-draft-override-tensor", "-otd", "--override-tensor-draft"}, value: "<tensor name pattern>=<buffer type>,...",
		help: "override tensor buffer type for draft model",
		set:  func(v string) error { return appendOverrides(&d.overrides, v) }})
	addCPUMoE(s, []string{"--spec-draft-cpu-moe", "-cmoed", "--cpu-moe-draft"}, []string{"--spec-draft-n-cpu-moe", "--spec-draft-ncmoe", "-ncmoed", "--n-cpu-moe-draft"},
		&d.overrides, " for the draft model")
	addCacheType(s, []string{"--spec-draft-type-k", "-ctkd", "--cache-type-k-draft"}, &d.typeK, "K for the draft model")
	addCacheType(s, []string{"--spec-draft-type-v", "-ctvd", "--cache-type-v-draft"}, &d.typeV, "V for the draft model")
}

// addCPUMoE registers the CPU-MoE options of a model (-cmoe and -ncmoe,
// or the draft's): every expert weight, or those of the first N layers,
// overridden to the CPU, appended to dst in command-line order.
func addCPUMoE(s *optionSet, all, first []string, dst *[]place.Override, whose string) {
	s.add(&option{names: all, help: "keep every Mixture of Experts (MoE) weight on the CPU" + whose,
		on: func(on bool) error {
			if on {
				*dst = append(*dst, place.Override{Pattern: place.ExpertsPattern, BufferType: "CPU"})
			}
			return nil
		}})
	addFirstLayersOnCPU(s, first, "keep the Mixture of Experts (MoE) weights of the first N layers on the CPU"+whose, place.ExpertsPattern, dst)
}

// addFirstLayersOnCPU registers an option N that overrides the tensors
// matching pattern in the first N layers to the CPU (-ncmoe, -ncffn).
func addFirstLayersOnCPU(s *optionSet, names []string, help, pattern string, dst *[]place.Override) {
	s.add(&option{names: names, value: "N", help: help,
		set: func(v string) error {
			n, err := intIn(v, 0, 65536)
			if err != nil {
				return err
			}
			*dst = append(*dst, place.FirstLayersOnCPU(int(n), pattern)...)
			return nil
		}})
}

// addCacheType registers a cache type option (-ctk and its kin), which
// sets dst.
func addCacheType(s *optionSet, names []string, dst *place.CacheType, what string) {
	s.add(&option{names: names, value: "TYPE",
		help: "KV cache data type for " + what + "\nallowed values: " + strings.Join(place.CacheTypeNames(), ", ") + "\n(default: f16)",
		set: func(v string) error {
			t, err := place.ParseCacheType(v)
			if err != nil {
				return withHint(err, v, place.CacheTypeNames())
			}
			*dst = t
			return nil
		}})
}

// draftParams are the draft model's parameters as llama.cpp's
// common_base_params_to_speculative makes them of the main ones: its own
// devices (when given, else the main ones; one device: split by layer),
// -ngld and -otd (with -cmoed and -ncmoed), -ctkd and -ctvd (f16
// unless given), as many outputs as sequences.
func (f *placeFlags) draftParams() place.Params {
	p := f.params()
	d := f.draft
	if len(d.devices) > 0 {
		p.DeviceNames = d.devices
		if len(d.devices) == 1 && !strings.EqualFold(d.devices[0], "none") {
			p.SplitMode = place.SplitLayer
		}
	}
	p.NGPULayers = d.ngl
	p.Overrides = d.overrides
	p.Context.TypeK, p.Context.TypeV = d.typeK, d.typeV
	p.Context.NOutputsMax = max(1, p.Context.NParallel)
	return p
}

// addOwn registers ggload's own options.
func (f *placeFlags) addOwn(s *optionSet) {
	s.group("ggload's options")
	f.runtimeFlags.add(s)
	s.add(&option{names: []string{"--map-ranges"}, value: "{own,span}",
		help: "what mapped buffers wrap: one span per file from a context's first tensor to its last, as llama.cpp " + pinTag() + " does (span, default), or only each context's own ranges (own: no buffer pins another context's bytes; the buffer lines then differ from llama.cpp's)",
		set: func(v string) error {
			switch v {
			case "own":
				f.mapRanges = place.MapOwnRanges
			case "span":
				f.mapRanges = place.MapSpan
			default:
				return withHint(fmt.Errorf("want own or span"), v, []string{"own", "span"})
			}
			return nil
		}})
}

// withHint adds a "did you mean" for a mistyped value.
func withHint(err error, v string, words []string) error {
	if n := nearest(v, words); n != "" {
		return fmt.Errorf("%w; did you mean %s?", err, n)
	}
	return err
}

// finish resolves what depends on several options and records the notes
// the options call for.
func (f *placeFlags) finish(s *optionSet) error {
	if err := f.hub.check(s, f.model, f.modelURL); err != nil {
		return err
	}
	if f.noMmap || f.mlock {
		if f.lmGiven {
			return s.errorf("--no-mmap and --mlock are llama.cpp's older spellings of -lm: give -lm alone")
		}
		var old string
		switch {
		case f.noMmap && f.mlock:
			old, f.loadMode = "--no-mmap --mlock", place.LoadMlock
		case f.noMmap:
			old, f.loadMode = "--no-mmap", place.LoadNone
		default:
			old, f.loadMode = "--mlock", place.LoadMmapMlock
		}
		s.notes = append(s.notes, fmt.Sprintf("note: %s is llama.cpp's older spelling of -lm %s", old, f.loadMode))
	}
	if n := f.context.NCtx; n > 0 && n%256 != 0 {
		// llama_context pads it (GGML_PAD(n_ctx, 256)) without a word
		s.notes = append(s.notes, fmt.Sprintf("note: -c %d: llama.cpp rounds the context up to a multiple of 256: %d tokens", n, (n+255)/256*256))
	}
	for _, o := range s.orderedGiven() {
		if o.inert != "" {
			s.notes = append(s.notes, fmt.Sprintf("note: %s has no effect in ggload: %s", o.names[len(o.names)-1], o.inert))
		}
	}
	return nil
}

// orderedGiven lists the options given, in registration order.
func (s *optionSet) orderedGiven() []*option {
	var out []*option
	for _, g := range s.groups {
		for _, o := range g.opts {
			if s.given[o] {
				out = append(out, o)
			}
		}
	}
	return out
}

// params are the placement parameters the options ask for.
func (f *placeFlags) params() place.Params {
	p := place.Params{}
	p.NGPULayers = f.ngl
	p.SplitMode = f.sm
	p.MainGPU = f.mg
	p.TensorSplit = f.ts
	p.Overrides = f.overrides
	p.NoHost, p.NoExtraBufts = f.noHost, !f.repack
	p.DeviceNames = f.devices
	p.LoadMode = f.loadMode
	p.Lazy = f.lazy
	p.MapRanges = f.mapRanges
	p.KVOverrides = f.kvOverrides
	p.Context = f.context
	return p
}

// addContext registers llama.cpp's context options: the context ggload
// sizes beside the weights.
func (f *placeFlags) addContext(s *optionSet) {
	c := &f.context
	s.group("llama.cpp's context options: the context sized beside the weights")
	s.add(&option{names: []string{"-c", "--ctx-size"}, value: "N",
		help: "size of the context in tokens, rounded up to a multiple of 256 (default: 0 = the model's trained context)",
		set: func(v string) error {
			n, err := stoi(v)
			if err != nil {
				return err
			}
			if n < 0 {
				// llama.cpp takes it as unsigned, pads it to 256 and fails
				return fmt.Errorf("a negative context size: llama.cpp reads it as %d tokens and cannot make the context", uint32(n))
			}
			c.NCtx = int(n)
			if n == 0 {
				// the full context asked for: -fit does not shrink it
				f.fitCtx = place.FitFullCtx
			}
			return nil
		}})
	s.add(&option{names: []string{"-np", "--parallel"}, value: "N",
		help: "number of parallel sequences (default: 1)",
		set: func(v string) error {
			n, err := stoi(v)
			if err != nil {
				return err
			}
			if n < 0 {
				// llama_context's words, for what it takes -np for
				return fmt.Errorf("n_seq_max must be <= 256: llama.cpp reads a negative -np as %d sequences", uint32(n))
			}
			c.NParallel = int(n)
			return nil
		}})
	s.add(&option{names: []string{"-kvu", "--kv-unified"}, neg: []string{"-no-kvu", "--no-kv-unified"},
		help: "one KV buffer shared by every sequence (default: disabled)",
		on:   func(on bool) error { c.KVUnified = on; return nil }})
	addCacheType(s, []string{"-ctk", "--cache-type-k"}, &c.TypeK, "K")
	addCacheType(s, []string{"-ctv", "--cache-type-v"}, &c.TypeV, "V")
	s.add(&option{names: []string{"-kvo", "--kv-offload"}, neg: []string{"-nkvo", "--no-kv-offload"},
		help: "keep the KV cache with each layer on its device (default: enabled)",
		on:   func(on bool) error { c.NoKVOffload = !on; return nil }})
	s.add(&option{names: []string{"-fa", "--flash-attn"}, value: "[on|off|auto]",
		help: "Flash Attention: 'on', 'off', or 'auto' (default: 'auto')",
		set: func(v string) error {
			fa, err := place.ParseFlashAttn(v)
			if err != nil {
				return withHint(err, v, []string{"on", "off", "auto"})
			}
			c.FlashAttn = fa
			return nil
		}})
	batch := func(dst *int, what string) func(string) error {
		return func(v string) error {
			n, err := stoi(v)
			if err != nil {
				return err
			}
			if n < 0 {
				return fmt.Errorf("%s of a negative size: llama.cpp reads it as %d tokens, and llama-completion's batches of it fail", what, uint32(n))
			}
			if n == 0 {
				return fmt.Errorf("%s of 0: llama.cpp's context would take no tokens", what)
			}
			*dst = int(n)
			return nil
		}
	}
	s.add(&option{names: []string{"-b", "--batch-size"}, value: "N",
		help: fmt.Sprintf("logical maximum batch size (default: %d)", place.DefaultNBatch), set: batch(&c.NBatch, "a logical batch")})
	s.add(&option{names: []string{"-ub", "--ubatch-size"}, value: "N",
		help: fmt.Sprintf("physical maximum batch size (default: %d)", place.DefaultNUBatch), set: batch(&c.NUBatch, "a physical batch")})
	s.add(&option{names: []string{"--swa-full"},
		help: "use a full-size cache for the sliding-window layers (default: false)",
		on:   func(on bool) error { c.SWAFull = on; return nil }})
	s.add(&option{names: []string{"--embedding", "--embeddings"},
		help: "output embeddings: for dedicated embedding models (default: disabled)",
		on:   func(on bool) error { c.Embeddings = on; return nil }})
	s.add(&option{names: []string{"--pooling"}, value: "{none,mean,cls,last,rank}",
		help: "pooling type for embeddings, use model default if unspecified",
		set: func(v string) error {
			p, err := place.ParsePooling(v)
			if err != nil {
				return withHint(fmt.Errorf("invalid value"), v, []string{"none", "mean", "cls", "last", "rank"})
			}
			c.Pooling = p
			return nil
		}})
	s.add(&option{names: []string{"--rerank", "--reranking"},
		help: "embeddings with rank pooling (default: disabled)",
		on: func(on bool) error {
			if on {
				c.Embeddings, c.Pooling = true, place.PoolingRank
			}
			return nil
		}})
}

// parseCSVRow splits a comma list as common/arg.cpp's parse_csv_row does:
// a field that starts with a quote runs to the closing quote (commas
// inside it kept, "" an escaped quote).
func parseCSVRow(s string) []string {
	var fields []string
	var field strings.Builder
	inQuotes := false
	for i := 0; i < len(s); i++ {
		switch c := s[i]; {
		case c == '"' && !inQuotes && field.Len() > 0:
			field.WriteByte('"') // a quote inside an unquoted field is literal
		case c == '"' && !inQuotes:
			inQuotes = true
		case c == '"' && i+1 < len(s) && s[i+1] == '"':
			field.WriteByte('"')
			i++
		case c == '"':
			inQuotes = false
		case c == ',' && !inQuotes:
			fields = append(fields, field.String())
			field.Reset()
		default:
			field.WriteByte(c)
		}
	}
	return append(fields, field.String())
}

func (f *placeFlags) fitOptions() place.FitOptions {
	return place.FitOptions{Targets: f.fitTargets, MinCtx: uint32(f.fitCtx)}
}

// open opens the runtime and sets NUMA up as --numa asks.
func (f *placeFlags) open(ctx context.Context) (*ggml.Runtime, error) {
	rt, err := f.runtimeFlags.openWith(ctx, f.backends())
	if err != nil {
		return nil, err
	}
	if f.numa != ggml.NUMADisabled && !rt.InitNUMA(f.numa) {
		return nil, fmt.Errorf("--numa: the CPU backend in %s has no NUMA set-up", rt.Location().Dir)
	}
	return rt, nil
}

// backends are the backend modules the command needs: the CPU's and
// RPC's alone where no weight can go elsewhere: -dev none or RPC servers
// only, no override naming another buffer type than the CPU's or a
// server's (llama.cpp looks -ot's names up over every device, used or
// not), and no draft model with other devices of its own. Otherwise nil:
// every module, as llama.cpp's tools load them whatever -dev says. RPC's
// module (cheap: it has no device until a server is added) keeps
// llama.cpp's lines about offloading exact: they are printed whenever an
// RPC or a GPU backend is registered, used or not
// (llama_supports_gpu_offload); a set without it that holds a GPU's
// module loads every module for them.
func (f *placeFlags) backends() []string {
	if !cpuOrRPC(f.devices) || f.listDevices {
		return nil
	}
	for _, o := range slices.Concat(f.overrides, f.draft.overrides) {
		if !strings.EqualFold(o.BufferType, "CPU") && !strings.HasPrefix(o.BufferType, "RPC") {
			return nil
		}
	}
	if f.draft.model != "" && len(f.draft.devices) > 0 && !cpuOrRPC(f.draft.devices) {
		return nil
	}
	return f.runtimeFlags.cpuBackends()
}

// cpuOrRPC reports whether a device list (-dev's) names no device but the
// CPU and RPC servers: none, or RPC devices alone.
func cpuOrRPC(devices []string) bool {
	if len(devices) == 1 && strings.EqualFold(devices[0], "none") {
		return true
	}
	for _, d := range devices {
		if !strings.HasPrefix(d, "RPC") {
			return false
		}
	}
	return len(devices) > 0
}

// cpuBackends are the modules of a process that puts weights on the CPU
// and RPC servers alone (placeFlags.backends): the CPU's and RPC's, or
// nil (ggml.HostBackends).
func (r *runtimeFlags) cpuBackends() []string { return ggml.HostBackends(r.libDir, r.variant) }

// modelPath is MODEL or -m, one of them: a path or a URL. With -mu, it is
// where the download goes, and may be empty (the cache); with -hf, empty.
func (f *placeFlags) modelPath(s *optionSet, pos []string) (string, error) {
	if f.hub.repo != "" && len(pos) > 0 {
		return "", s.errorf("-hf %s and %s: give one model", f.hub.repo, pos[0])
	}
	if f.hub.repo != "" {
		return "", nil // (planModel pulls it)
	}
	if len(pos) == 1 && s.setByEnv(s.byName["-m"]) {
		// the command line's MODEL overrides LLAMA_ARG_MODEL, as -m would
		s.overriddenByEnv(s.byName["-m"], "MODEL")
		return f.checkModel(s, pos[0])
	}
	switch {
	case len(pos) == 1 && f.model != "" && f.model != pos[0]:
		return "", s.errorf("two models: -m %s and %s", f.model, pos[0])
	case len(pos) == 1:
		return f.checkModel(s, pos[0])
	case len(pos) == 0 && f.model != "":
		return f.checkModel(s, f.model)
	case len(pos) == 0 && f.modelURL != "":
		return "", nil
	case len(pos) == 0:
		return "", s.errorf("no MODEL given: usage: %s", s.usage[0])
	}
	return "", s.errorf("one MODEL, got %d arguments (%s)", len(pos), strings.Join(pos, " "))
}

// checkModel refuses a bad URL before any request, and a URL where -mu
// wants a local path.
func (f *placeFlags) checkModel(s *optionSet, model string) (string, error) {
	if !httpsrc.IsURL(model) {
		return model, nil
	}
	if f.modelURL != "" {
		return "", s.errorf("-mu %s downloads to the path -m or MODEL gives, and %s is a URL: give one of them", f.modelURL, model)
	}
	if _, err := httpsrc.CheckURL(model); err != nil {
		return "", s.errorf("%v", err)
	}
	return model, nil
}

// httpOptions are the requests' options: -hft's token, else $HF_TOKEN.
func (f *placeFlags) httpOptions() httpsrc.Options {
	return httpsrc.Options{Token: f.hfToken}
}

// openModel opens the model at path: a local file, or a URL read in place
// by range requests (the header now, the weights as they load).
func openModel(ctx context.Context, path string, o httpsrc.Options) (*gguf.Model, error) {
	if httpsrc.IsURL(path) {
		return httpsrc.OpenModel(ctx, path, o)
	}
	return gguf.OpenModel(path)
}

// fetchModel downloads -mu's model (to path, or into the cache when it is
// empty), with a bar by bytes on a terminal, and returns its local path.
// A download that waits for another of the same file says so.
func (f *placeFlags) fetchModel(ctx context.Context, path string, stderr io.Writer) (string, error) {
	return f.download(ctx, f.modelURL, path, stderr)
}

// download downloads url as -mu downloads a model (to path, or into the
// cache when it is empty) and returns its local path.
func (f *placeFlags) download(ctx context.Context, url, path string, stderr io.Writer) (string, error) {
	o := f.httpOptions()
	done := downloadBar(&o, stderr)
	local, err := httpsrc.Download(ctx, url, path, o)
	done()
	return local, err
}

// downloadBar sets o to say on stderr that a download waits for another
// of the same file and, on a terminal, to draw a bar by bytes; done ends
// the bar.
func downloadBar(o *httpsrc.Options, stderr io.Writer) (done func()) {
	o.Waiting = func(url, local string) {
		fmt.Fprintf(safe(stderr), "ggload: waiting for another download of %s (%s)\n", local, url)
	}
	if !isTerminalWriter(stderr) {
		return func() {}
	}
	bar := newProgressBar(stderr)
	var mu sync.Mutex
	o.Progress = func(_ string, done, size int64) {
		if size > 0 {
			mu.Lock()
			bar.update(uint64(done), uint64(size))
			mu.Unlock()
		}
	}
	return bar.finish
}

// verifyDownload checks -mu's files against the sha256 kept beside each
// at its download (load --verify); a file with none kept (another tool
// downloaded it) is said so, and not refused.
func verifyDownload(ctx context.Context, m *gguf.Model, stderr io.Writer) error {
	for _, p := range m.Paths {
		err := httpsrc.VerifyDownload(ctx, p)
		switch {
		case errors.Is(err, httpsrc.ErrNoDigest):
			fmt.Fprintf(safe(stderr), "ggload: %s: no sha256 kept beside it (another tool downloaded it): not checked\n", p)
		case err != nil:
			return err
		}
	}
	return nil
}

// listDevicesText prints the devices as llama.cpp's --list-devices does.
func listDevicesText(rt *ggml.Runtime) string {
	var b strings.Builder
	b.WriteString("Available devices:\n")
	n := 0
	for _, d := range rt.Devices() {
		if d.Type() == ggml.DeviceCPU {
			continue
		}
		free, total := d.Memory()
		fmt.Fprintf(&b, "  %s: %s (%d MiB, %d MiB free)\n", d.Name(), d.Description(), total>>20, free>>20)
		n++
	}
	if n == 0 {
		b.WriteString("  (none)\n")
	}
	if h := hiddenDevicesHint(rt); h != "" {
		b.WriteString(h + "\n")
	}
	return b.String()
}

// runtimeFlags are the options of every command that opens the runtime.
type runtimeFlags struct {
	libDir    string
	variant   string
	rpc       string
	rpcDirect bool
	rpcIO     time.Duration
}

// ownProcess is set where this process runs one command and ends (main,
// and the bench's children): a command then loads only the backend
// modules it needs (placeFlags.backends). A caller of run within a longer
// process (the tests) loads every module, which later commands may need.
var ownProcess bool

func defaultRuntimeFlags() runtimeFlags { return runtimeFlags{rpcIO: time.Minute} }

func (r *runtimeFlags) add(s *optionSet) {
	s.add(&option{names: []string{"--lib-dir"}, value: "DIR",
		help: "the native ggml libraries (default: the first of " + strings.Join(bindings.SearchOrder(), "; ") + ")",
		set: func(v string) error {
			if st, err := os.Stat(v); err != nil || !st.IsDir() {
				return fmt.Errorf("not a directory")
			}
			r.libDir = v
			return nil
		}})
	s.add(&option{names: []string{"--variant"}, value: "{vulkan,cuda,src,none}",
		help: "the native set's variant (default: GGLOAD_VARIANT, then automatic)",
		set: func(v string) error {
			if !contains([]string{"", "vulkan", "cuda", "src", "none"}, v) {
				return withHint(fmt.Errorf("want vulkan, cuda, src or none"), v, []string{"vulkan", "cuda", "src", "none"})
			}
			r.variant = v
			return nil
		}})
	s.add(&option{names: []string{"--rpc-direct"},
		help: "connect ggml's RPC client straight to the servers, without ggload's guard (a failing server then ends the process, as in llama.cpp)",
		on:   func(on bool) error { r.rpcDirect = on; return nil }})
	s.add(&option{names: []string{"--rpc-timeout"}, value: "DURATION",
		help: "declare an RPC server failed when it stays silent this long in use, 100ms to 24h (default: 1m)",
		set: func(v string) error {
			d, err := time.ParseDuration(v)
			if err != nil {
				return fmt.Errorf("want a duration such as 30s or 2m")
			}
			if d < 100*time.Millisecond || d > 24*time.Hour {
				return fmt.Errorf("out of range: want 100ms to 24h")
			}
			r.rpcIO = d
			return nil
		}})
}

// addRPC registers --rpc.
func (r *runtimeFlags) addRPC(s *optionSet) {
	s.add(&option{names: []string{"--rpc"}, value: "SERVERS", help: "comma-separated RPC servers (host:port) to use as devices",
		set: func(v string) error {
			eps, err := ggml.ParseRPCServers(v)
			r.rpc = strings.Join(eps, ",")
			return err
		}})
}

// open opens the runtime with every backend module of the set.
func (r *runtimeFlags) open(ctx context.Context) (*ggml.Runtime, error) {
	return r.openWith(ctx, nil)
}

// openWith opens the runtime with the backend modules a command needs
// (ggml.Options.Backends; nil: every one), in a process of its own: run
// inside a longer process loads every module.
func (r *runtimeFlags) openWith(ctx context.Context, backends []string) (*ggml.Runtime, error) {
	if !ownProcess {
		backends = nil
	}
	return ggml.Open(ctx, ggml.Options{Logger: slog.Default(), LibDir: r.libDir, Variant: r.variant, Backends: backends, RPC: splitList(r.rpc), RPCTimeout: 5 * time.Second, RPCIOTimeout: r.rpcIO, RPCDirect: r.rpcDirect})
}

// splitList splits a comma list, dropping empty items.
func splitList(s string) []string {
	var out []string
	for _, p := range strings.Split(s, ",") {
		if p = strings.TrimSpace(p); p != "" {
			out = append(out, p)
		}
	}
	return out
}

// parseNGL reads -ngl's (and -ngld's) value: a number, auto or all.
func parseNGL(v string) (place.Layers, error) {
	if v == "auto" || v == "all" {
		return place.ParseLayers(v)
	}
	n, err := stoi(v)
	if err != nil {
		return place.Layers{}, fmt.Errorf("want a number of layers, auto or all")
	}
	return place.NLayers(int(n)), nil
}

// parseDevices reads -dev's (and -devd's) list.
func parseDevices(v string) ([]string, error) {
	d := splitList(v)
	if len(d) == 0 {
		return nil, fmt.Errorf("no devices named")
	}
	if len(d) > 1 && contains(d, "none") {
		return nil, fmt.Errorf("none cannot be listed with other devices")
	}
	return d, nil
}

// appendOverrides adds -ot's (and -otd's) patterns to list.
func appendOverrides(list *[]place.Override, v string) error {
	ovs, err := place.ParseOverrides(v)
	if err != nil {
		return err
	}
	if len(ovs) == 0 {
		return fmt.Errorf("no overrides given")
	}
	*list = append(*list, ovs...)
	return nil
}
