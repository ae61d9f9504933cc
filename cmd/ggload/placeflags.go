package main

import (
	"flag"
	"fmt"
	"strconv"
	"strings"

	"github.com/ggload/ggload/place"
)

// placeFlags are llama.cpp's placement flags, shared by plan, load and bench.
type placeFlags struct {
	runtimeFlags
	ngl        string
	sm         string
	mg         int
	ts         string
	ot         multiFlag
	noHost     bool
	noExtra    bool
	devices    string
	loadMode   string
	lazy       string
	cpuMoE     bool
	nCPUMoE    int
	fit        bool
	reserveMiB uint64
	mapRanges  string
}

type multiFlag []string

func (m *multiFlag) String() string     { return strings.Join(*m, ",") }
func (m *multiFlag) Set(s string) error { *m = append(*m, s); return nil }

func (f *placeFlags) add(fs *flag.FlagSet) {
	f.runtimeFlags.add(fs)
	fs.StringVar(&f.ngl, "ngl", "all", "layers to offload (counting the output layer): a number, all, or auto (--fit)")
	fs.StringVar(&f.ngl, "n-gpu-layers", "all", "same as -ngl")
	fs.StringVar(&f.sm, "sm", "layer", "split mode: none, layer, row")
	fs.StringVar(&f.sm, "split-mode", "layer", "same as -sm")
	fs.IntVar(&f.mg, "mg", 0, "main GPU for -sm none (index into the device list; negative: none)")
	fs.IntVar(&f.mg, "main-gpu", 0, "same as -mg")
	fs.StringVar(&f.ts, "ts", "", "tensor split, e.g. 3,1 (default: by free memory)")
	fs.StringVar(&f.ts, "tensor-split", "", "same as -ts")
	fs.Var(&f.ot, "ot", "override tensor buffer types: <pattern>=<buffer type>[,...] (repeatable; first match wins)")
	fs.Var(&f.ot, "override-tensor", "same as -ot")
	fs.BoolVar(&f.noHost, "no-host", false, "keep host buffer types out of the CPU list")
	fs.BoolVar(&f.noExtra, "no-extra-bufts", false, "keep the CPU's extra buffer types (CPU_REPACK) out")
	fs.StringVar(&f.devices, "device", "", "devices to use, comma-separated, in order (none: no offload)")
	fs.StringVar(&f.devices, "dev", "", "same as --device")
	fs.StringVar(&f.loadMode, "load-mode", "auto", "auto, none, mmap, mlock, mmap-mlock, direct-io")
	fs.StringVar(&f.lazy, "lazy", "auto", "lazy reads of the tensors the architecture marks: off, auto, on")
	fs.BoolVar(&f.cpuMoE, "cpu-moe", false, "keep every layer's expert weights on the CPU")
	fs.IntVar(&f.nCPUMoE, "n-cpu-moe", 0, "keep the expert weights of the first N layers on the CPU")
	fs.BoolVar(&f.fit, "fit", false, "offload as much as fits every device's free memory minus --fit-reserve")
	fs.Uint64Var(&f.reserveMiB, "fit-reserve", place.DefaultFitTarget>>20, "MiB --fit leaves free on each device")
	fs.StringVar(&f.mapRanges, "map-ranges", "own", "mapped buffers wrap each context's own ranges (own) or one span as llama.cpp v0.5.0 (span)")
}

func (f *placeFlags) params() (place.Params, error) {
	p := place.DefaultParams()
	switch f.ngl {
	case "all":
		p.NGPULayers = -1
	case "auto":
		f.fit = true
	default:
		n, err := strconv.Atoi(f.ngl)
		if err != nil {
			return p, fmt.Errorf("-ngl %q: want a number, all or auto", f.ngl)
		}
		p.NGPULayers = n
	}
	var err error
	if p.SplitMode, err = place.ParseSplitMode(f.sm); err != nil {
		return p, fmt.Errorf("-sm: %w", err)
	}
	p.MainGPU = f.mg
	if f.ts != "" {
		if p.TensorSplit, err = place.ParseTensorSplit(f.ts); err != nil {
			return p, fmt.Errorf("-ts: %w", err)
		}
	}
	for _, o := range f.ot {
		ovs, err := place.ParseOverrides(o)
		if err != nil {
			return p, fmt.Errorf("-ot: %w", err)
		}
		p.Overrides = append(p.Overrides, ovs...)
	}
	p.NoHost, p.UseExtraBufts = f.noHost, !f.noExtra
	p.Devices = splitList(f.devices)
	if p.LoadMode, err = place.ParseLoadMode(f.loadMode); err != nil {
		return p, fmt.Errorf("--load-mode: %w", err)
	}
	if p.Lazy, err = place.ParseLazyMode(f.lazy); err != nil {
		return p, fmt.Errorf("--lazy: %w", err)
	}
	p.CPUMoE, p.NCPUMoE = f.cpuMoE, f.nCPUMoE
	if f.nCPUMoE < 0 {
		return p, fmt.Errorf("--n-cpu-moe %d: must not be negative", f.nCPUMoE)
	}
	switch f.mapRanges {
	case "own":
		p.MapRanges = place.MapOwnRanges
	case "span":
		p.MapRanges = place.MapSpan
	default:
		return p, fmt.Errorf("--map-ranges %q: want own or span", f.mapRanges)
	}
	return p, nil
}
