package bench

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/ggload/ggload/ggml"
	"github.com/ggload/ggload/gguf"
	"github.com/ggload/ggload/lab/llama"
	"github.com/ggload/ggload/loader"
	"github.com/ggload/ggload/place"
)

// The measured processes: for each measurement the bench asks
// Options.Command for a fresh process that makes one Load (by ggload or
// by llama.cpp, in the same native set), prints one JSON LoadResult on
// stdout and exits; RunLoad is what it runs. The parent times the whole
// process and reads the rest from the JSON; an error of the load is in
// the JSON, an error of the process's command line is its exit status
// and a line on stderr.

// The loaders a Load names.
const (
	ImplGgload = "ggload"
	// ImplSequential is ggload loading one device after another
	// (loader.Options.Sequential): each device's time alone.
	ImplSequential = "ggload-sequential"
	ImplLlama      = "llama"
)

// Load is one measured load, as the process that makes it is told.
type Load struct {
	Impl      string // ImplGgload, ImplSequential or ImplLlama
	Case      Case
	Placement Placement
	Readers   int  // ggload's (0: automatic)
	Idle      bool // everything but the load: a baseline
	Model     string
}

// Process is a Load in the process Options.Command starts for it.
type Process struct {
	Load
	// EveryModule: the process registers every backend module of the
	// set, whatever the target (the baseline of the targets with a GPU).
	EveryModule bool
}

// process is the process of case c's load by impl of the model at path:
// its split options only where c spreads over several devices.
func (o *Options) process(impl string, c Case, path string) Process {
	pl := o.Placement
	if !c.Multi() {
		pl.TensorSplit, pl.SplitMode = nil, place.SplitLayer
	}
	return Process{Load: Load{Impl: impl, Case: c, Placement: pl, Readers: o.Readers, Model: path}}
}

// LoadResult is what a measured process prints.
type LoadResult struct {
	LoadS float64 `json:"load_s"`
	// KernelS is the CPU time the kernel spent for the process during
	// the load call (all threads; Linux only, absent elsewhere): where a
	// run is slow because fresh pages were slow to come (a hypervisor
	// backing guest memory late), this says so.
	KernelS *float64 `json:"kernel_s,omitempty"`
	// HostResident is what the load keeps in this process's memory by
	// design: host buffers, and device buffers of a device whose memory is
	// host memory (a software device such as lavapipe).
	HostResident uint64 `json:"host_resident"`
	// Staging is the memory ggload's upload pipelines held by design: the
	// pinned staging rings, the bounce buffers at their most, and the
	// direct reads' bounce buffers.
	Staging uint64 `json:"staging"`
	// Devices are ggload's upload pipelines, one per device.
	Devices []LoadDevice `json:"devices,omitempty"`
	// DirectCopied is the bytes direct reads copied out of bounce
	// buffers (loader.Stats.DirectCopied): where the memory read into
	// did not line up with the disk's direct-I/O blocks.
	DirectCopied uint64 `json:"direct_copied,omitempty"`
	// RPCCached is the bytes RPC servers set from their file caches
	// (loader.Stats.RPCCached): the load was a reload.
	RPCCached uint64 `json:"rpc_cached,omitempty"`
	// PeakRSS is the process's VmHWM at exit (the parent's rusage would
	// count the parent's own pages: the child starts as a copy of it).
	PeakRSS uint64 `json:"peak_rss"`
	// Backends are the backends the process registered, in ggml's order:
	// llama.cpp's tools load every module of the set; ggload's process
	// onto the CPU and RPC servers alone loads the CPU's and RPC's
	// (Options.CPUModules)
	Backends []string `json:"backends,omitempty"`
	Err      string   `json:"error,omitempty"`
}

// LoadDevice is one device's upload pipeline in a measured load.
type LoadDevice struct {
	Device  string  `json:"device"`
	Bytes   uint64  `json:"bytes"`
	S       float64 `json:"s"`
	Staging uint64  `json:"staging"`
	Bounce  uint64  `json:"bounce"`
	// RPC: the device sends over the RPC protocol: an RPC server, or a
	// meta device over RPC servers only.
	RPC bool `json:"rpc,omitempty"`
}

// child runs one measurement in a fresh process and returns its wall time
// and peak RSS.
func (o *Options) child(ctx context.Context, p Process) (measurement, error) {
	cmd, err := o.Command(ctx, p)
	if err != nil {
		return measurement{}, err
	}
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	start := time.Now()
	err = cmd.Run()
	wall := time.Since(start)
	var res LoadResult
	if jerr := json.Unmarshal(out.Bytes(), &res); jerr != nil {
		msg := strings.TrimSpace(errb.String())
		if err == nil {
			err = jerr
		}
		return measurement{}, fmt.Errorf("%s child: %v %s", p.Impl, err, lastLine(msg))
	}
	if res.Err != "" {
		return measurement{}, errors.New(res.Err)
	}
	return measurement{WallS: wall.Seconds(), LoadS: res.LoadS, PeakRSS: res.PeakRSS, child: res}, nil
}

func lastLine(s string) string {
	if i := strings.LastIndexByte(s, '\n'); i >= 0 {
		return s[i+1:]
	}
	return s
}

// RunLoad makes the load l in this process, on the runtime open returns,
// and writes its LoadResult as JSON to w, with the process's peak RSS:
// an error of the load, opening the runtime included, is the result's;
// RunLoad returns the error of writing it.
func RunLoad(ctx context.Context, l Load, open func(context.Context) (*ggml.Runtime, error), w io.Writer) error {
	res, err := l.run(ctx, open)
	if err != nil {
		res.Err = err.Error()
	}
	res.PeakRSS = peakRSS()
	return json.NewEncoder(w).Encode(res)
}

// params are the placement parameters of l's load.
func (l Load) params() (place.Params, error) {
	mode, err := place.ParseLoadMode(l.Case.Mode)
	if err != nil {
		return place.Params{}, err
	}
	params := place.Params{}
	params.LoadMode = mode
	params.DeviceNames = l.Case.Devices()
	params.NGPULayers = l.Placement.Layers
	params.TensorSplit = l.Placement.TensorSplit
	params.SplitMode = l.Placement.SplitMode
	params.NoExtraBufts = l.Placement.NoExtraBufts
	return params, nil
}

func (l Load) run(ctx context.Context, open func(context.Context) (*ggml.Runtime, error)) (LoadResult, error) {
	var res LoadResult
	rt, err := open(ctx)
	if err != nil {
		return res, err
	}
	for _, b := range rt.Backends() {
		res.Backends = append(res.Backends, b.Name())
	}
	params, err := l.params()
	if err != nil {
		return res, err
	}
	// the weights alone, as llama.cpp's process loads them (no context
	// is made, and what a load keeps is the weights' buffers); a fit
	// sizes a default context first
	params.Context.Skip = true
	m, err := gguf.OpenModel(l.Model)
	if err != nil {
		return res, err
	}
	defer m.Close()
	if l.Impl != ImplLlama {
		// ggload's plan and load make one connection to each RPC server
		// (llama.cpp's load, in this process too, connects as it does)
		defer place.KeepConnected(rt, params)()
	}
	var p *place.Plan
	if l.Impl == ImplLlama || !l.Placement.Fit || l.Idle {
		if p, err = place.New(context.Background(), rt, m, params); err != nil {
			return res, err
		}
		res.HostResident = hostResident(p)
	}
	if l.Impl == ImplLlama {
		err := l.runLlama(rt, params, &res)
		return res, err
	}
	if l.Idle {
		return res, nil
	}
	stop := res.timeLoad()
	if l.Placement.Fit {
		fp := params
		fp.Context.Skip = false
		fr, err := place.Fit(ctx, rt, m, fp, place.FitOptions{})
		if err != nil {
			stop()
			return res, err
		}
		p = fr.Plan
	}
	lm, err := loader.Load(ctx, p, loader.Options{Readers: l.Readers, Sequential: l.Impl == ImplSequential})
	stop()
	if l.Placement.Fit {
		res.HostResident = hostResident(p)
	}
	if err != nil {
		return res, err
	}
	for _, d := range lm.Stats.Devices {
		res.Devices = append(res.Devices, LoadDevice{Device: d.Device, Bytes: d.Bytes, S: d.Time.Seconds(), Staging: d.Staging, Bounce: d.Bounce, RPC: sendsRPC(p, d.Device)})
		res.Staging += d.Staging + d.Bounce
	}
	res.Staging += lm.Stats.Direct // direct reads' bounce buffers, by design too
	res.DirectCopied = lm.Stats.DirectCopied
	res.RPCCached = lm.Stats.RPCCached
	return res, lm.Close()
}

// runLlama makes l's load with libllama, timed into res.
func (l Load) runLlama(rt *ggml.Runtime, params place.Params, res *LoadResult) error {
	lib, err := llama.Open(rt)
	if err != nil {
		return err
	}
	if l.Idle {
		return nil
	}
	ld, err := llama.LoadFor(rt, l.Model, params)
	if err != nil {
		return err
	}
	var cp llama.ContextParams
	if l.Placement.Fit {
		if cp, err = lib.ContextParamsFor(place.ContextParams{}); err != nil {
			return err
		}
	}
	stop := res.timeLoad()
	if l.Placement.Fit {
		// (a fit of the CPU alone, or of devices the model fits, changes
		// nothing the load is given)
		if _, _, err := lib.Fit(ld, cp, []uint64{place.DefaultFitTarget}, place.DefaultFitMinCtx); err != nil {
			stop()
			return err
		}
	}
	lm, _, err := lib.LoadModel(ld)
	stop()
	if err != nil {
		return err
	}
	lm.Free()
	return nil
}

// timeLoad starts timing the load call; the function it returns ends it,
// setting LoadS and KernelS.
func (res *LoadResult) timeLoad() func() {
	k0, kok := kernelTime()
	start := time.Now()
	return func() {
		res.LoadS = time.Since(start).Seconds()
		if k1, ok := kernelTime(); ok && kok {
			k := (k1 - k0).Seconds()
			res.KernelS = &k
		}
	}
}

// hostResident sums what a load keeps in this process's memory: the
// allocated buffers there (host buffer types, the CPU's, a software
// device's) and the pages of the mapped files that the load maps in (they
// count in the process's RSS while mapped).
func hostResident(p *place.Plan) uint64 {
	m := loader.MemoryOf(p, loader.Options{})
	return m.Weights + m.MappedIn
}

// peakRSS is this process's high-water resident set (VmHWM), 0 where
// /proc is missing.
func peakRSS() uint64 { return procBytes("/proc/self/status", "VmHWM:") }

// memFree is the memory no one uses, not even the page cache (MemFree), 0
// where /proc is missing.
func memFree() uint64 { return procBytes("/proc/meminfo", "MemFree:") }

// procBytes reads the field key ("VmHWM:") of a /proc file that gives
// sizes in kB, in bytes; 0 where the file or the field is missing.
func procBytes(path, key string) uint64 {
	b, err := os.ReadFile(path)
	if err != nil {
		return 0
	}
	for _, line := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, key); ok {
			kb, _ := strconv.ParseUint(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(v), "kB")), 10, 64)
			return kb << 10
		}
	}
	return 0
}

// sendsRPC reports whether the plan's device of that name sends over the
// RPC protocol: an RPC server, or a meta device over RPC servers only.
func sendsRPC(p *place.Plan, name string) bool {
	for _, d := range p.Devices {
		if d.Name() != name {
			continue
		}
		parts := d.Parts()
		if !d.IsMeta() {
			parts = []*ggml.Device{d}
		}
		for _, x := range parts {
			if !x.IsRPC() {
				return false
			}
		}
		return len(parts) > 0
	}
	return false
}
