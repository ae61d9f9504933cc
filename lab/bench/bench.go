package bench

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/ggload/ggload/ggml"
	"github.com/ggload/ggload/gguf"
	"github.com/ggload/ggload/place"
)

// Options are what a bench measures and how: ggload-bench's options,
// parsed, and what the caller knows of the processes it starts.
type Options struct {
	// Modes are the load modes timed, as -lm takes them (nil:
	// none,mmap,dio, and auto too when Cold).
	Modes []string
	// Targets are where each mode loads: "none" (the CPU), a device
	// name, or device names joined by '+' (nil, or "auto" alone: the CPU
	// and every GPU).
	Targets []string
	// Runs is the processes per measurement (0: 3).
	Runs int
	// Sizes are the sizes in bytes of the generated models Run times in
	// turn when it is given no model (nil: 1 GiB).
	Sizes []int64
	// Type is the generated models' weight type, by ggml's name ("":
	// q8_0).
	Type string
	// Placement is what both loaders are given besides the case; its
	// split options go to the targets over several devices alone.
	Placement
	// NoLlama leaves llama.cpp untimed.
	NoLlama bool
	// Readers are ggload's parallel readers (0: automatic).
	Readers int
	// JSON prints the report as JSON; Save, when set, also writes it
	// to that file.
	JSON bool
	Save string
	// HTTPRate, above 0, times the model over a loopback HTTP link of
	// that many bytes a second instead of the load modes; HTTPLatency is
	// how long its server waits before each answer.
	HTTPRate    float64
	HTTPLatency time.Duration
	// Cold times cold loads: the model's pages are evicted from the page
	// cache before every process, and the floors are the disk's.
	Cold bool
	// RPCCacheDirs are the RPC servers' file caches, emptied before
	// every process.
	RPCCacheDirs []string
	// NoBackMemory leaves the memory of a virtual machine with free page
	// reporting as it is before every process (backMemory).
	NoBackMemory bool

	// Command is the process that makes the load of p and prints its
	// LoadResult as JSON on its standard output (ggload-bench runs its own
	// executable with a hidden command that calls RunLoad).
	Command func(ctx context.Context, p Process) (*exec.Cmd, error)
	// CPUModules reports whether the process of p registers the CPU's
	// and RPC's backend modules alone (ggload's onto the CPU and RPC
	// servers): the extra memory of such a process is counted over the
	// idle process that registers the same. nil: every process
	// registers every module.
	CPUModules func(p Process) bool
	// Log is told when a generated model is written (nil: nothing is).
	Log io.Writer

	// Decode, when set, times the forward pass instead of the loads
	// (RunDecode): its prompt and steps and threads; the targets, runs,
	// layers and JSON are the options above.
	Decode *DecodeOptions
}

// Placement is what both loaders are given besides the case: llama.cpp's
// -ngl, -ts, -sm and --no-repack.
type Placement struct {
	Layers       place.Layers
	TensorSplit  []float32 // the share of each device of a target over several
	SplitMode    place.SplitMode
	NoExtraBufts bool
	// Fit makes each load fit first, in the timed call, as the CLIs'
	// default -fit does: the model and a default context measured
	// against the devices' memory (ggload's place.Fit and its plan;
	// llama.cpp's common_fit_params), then the weights loaded.
	Fit bool
}

// Case is one (load mode, target) pair.
type Case struct {
	Mode string `json:"mode"`
	// Target is "none" (the CPU) or device names joined by '+': the
	// weights are split over them, which load at once.
	Target string `json:"target"`
}

// Devices are the case's devices ("none": the CPU alone).
func (c Case) Devices() []string { return strings.Split(c.Target, "+") }

// Multi reports whether the case spreads the weights over several devices.
func (c Case) Multi() bool { return len(c.Devices()) > 1 }

// defaults fills what o leaves to the defaults.
func (o Options) defaults() Options {
	if o.Modes == nil {
		o.Modes = []string{"none", "mmap", "dio"}
		if o.Cold {
			o.Modes = append(o.Modes, "auto")
		}
	}
	if o.Runs == 0 {
		o.Runs = 3
	}
	if o.Sizes == nil {
		o.Sizes = []int64{1 << 30}
	}
	if o.Type == "" {
		o.Type = "q8_0"
	}
	if o.Log == nil {
		o.Log = io.Discard
	}
	return o
}

// runDecode is bench --decode, on the model at path or the generated
// model of the first size.
func (o *Options) runDecode(ctx context.Context, rt *ggml.Runtime, path string, stdout io.Writer) error {
	if path == "" {
		var err error
		if path, err = writeModel(rt, o.Sizes[0], o.Type, o.Log); err != nil {
			return err
		}
	}
	d := *o.Decode
	var err error
	if d.Targets, err = o.targets(rt); err != nil {
		return err
	}
	d.Runs, d.Layers, d.JSON = o.Runs, o.Layers, o.JSON
	return RunDecode(ctx, rt, path, d, stdout)
}

// Run times the model at path, or, with path empty, a generated model of
// each of o.Sizes in turn (then each case's cost per GiB across them),
// and writes the report to stdout: the floors as they are measured,
// then the table and the goals, or the JSON alone. rt is the runtime of
// the floors, with every backend module of the set.
func Run(ctx context.Context, rt *ggml.Runtime, path string, o Options, stdout io.Writer) error {
	o = o.defaults()
	if o.Decode != nil {
		return o.runDecode(ctx, rt, path, stdout)
	}
	if path != "" {
		rep, err := o.measure(ctx, rt, path, stdout)
		if err != nil {
			return err
		}
		return o.output(stdout, rep)
	}
	var reps []Report
	for _, size := range o.Sizes {
		model, err := writeModel(rt, size, o.Type, o.Log)
		if err != nil {
			return err
		}
		rep, err := o.measure(ctx, rt, model, stdout)
		if err != nil {
			return err
		}
		if len(o.Sizes) == 1 {
			return o.output(stdout, rep)
		}
		if !o.JSON && rep.HTTP == nil {
			Print(stdout, rep)
			fmt.Fprintln(stdout)
		}
		reps = append(reps, rep)
	}
	return o.outputScale(stdout, reps)
}

// measure measures the model at path: every case, or the HTTP section.
func (o *Options) measure(ctx context.Context, rt *ggml.Runtime, path string, stdout io.Writer) (Report, error) {
	m, err := gguf.OpenModel(path)
	if err != nil {
		return Report{}, err
	}
	defer m.Close()
	size := int64(0)
	for _, f := range m.Files {
		size += f.Size
	}
	rep := Report{Model: path, Bytes: size, Runs: o.Runs, Cold: o.Cold, Fit: o.Fit, FreePageReporting: FreePageReporting()}
	targets, err := o.targets(rt)
	if err != nil {
		return rep, err
	}
	if o.Cold {
		if err := evictPageCache(m.Paths); err != nil {
			return rep, fmt.Errorf("--cold: %w", err)
		}
	}
	if o.HTTPRate > 0 {
		rep.HTTP, err = o.measureHTTP(ctx, rt, m, targets, o.HTTPRate)
		return rep, err
	}
	var cases []Case
	for _, mode := range o.Modes {
		if _, err := place.ParseLoadMode(mode); err != nil {
			return rep, fmt.Errorf("--modes: %w", err)
		}
		for _, t := range targets {
			cases = append(cases, Case{mode, t})
		}
	}
	if err := o.measureFloors(rt, m, cases, &rep); err != nil {
		return rep, err
	}
	if err := o.warmRPCCaches(ctx, path, cases, &rep); err != nil {
		return rep, err
	}
	if !o.JSON {
		printFloors(stdout, rep)
	}
	if err := o.measureBaselines(ctx, path, &rep); err != nil {
		return rep, err
	}
	for _, c := range cases {
		row, err := o.measureCase(ctx, m, c, &rep)
		if err != nil {
			return rep, err
		}
		rep.Rows = append(rep.Rows, row)
	}
	return rep, nil
}

// measureBaselines measures the idle processes: everything but the load,
// with every backend module, and as ggload's process onto the CPU, which
// may register fewer (its own baseline).
func (o *Options) measureBaselines(ctx context.Context, path string, rep *Report) error {
	idle := Process{Load: Load{Impl: ImplGgload, Case: Case{"none", "none"}, Idle: true, Model: path}}
	all := idle
	all.EveryModule = true
	base, err := o.child(ctx, all)
	if err != nil {
		return fmt.Errorf("idle process: %w", err)
	}
	rep.BaselineRSS = base.PeakRSS
	baseCPU, err := o.child(ctx, idle)
	if err != nil {
		return fmt.Errorf("idle process: %w", err)
	}
	rep.BaselineCPURSS = baseCPU.PeakRSS
	return nil
}

// warmRPCCaches runs one untimed ggload load onto each target with an RPC
// server, unless RPCCacheDirs empties the servers' caches before every
// process: a server started with its file cache (-c) keeps the weights
// above the hash threshold from that load on, and ggload's hash index has
// their hashes, so that every timed run of both loaders is alike, a
// reload (without it, the first row's first run alone would fill them).
// A server without a cache takes the load and keeps nothing. A failed
// warm-up is left for the timed runs to report.
func (o *Options) warmRPCCaches(ctx context.Context, path string, cases []Case, rep *Report) error {
	if len(o.RPCCacheDirs) > 0 {
		return nil
	}
	for _, c := range cases {
		if !slices.ContainsFunc(c.Devices(), isRPCName) || slices.Contains(rep.WarmedRPC, c.Target) {
			continue
		}
		if err := ctx.Err(); err != nil {
			return err
		}
		o.child(ctx, o.process(ImplGgload, c, path))
		rep.WarmedRPC = append(rep.WarmedRPC, c.Target)
	}
	return nil
}

// backMemory, on a machine with free page reporting (FreePageReporting),
// faults in and frees what the next process will take: twice the model
// (its weights, and its pages in the page cache or a server's copy) and
// 512 MiB, within the memory no one uses less 1 GiB. NoBackMemory leaves
// the memory as it is.
func (o *Options) backMemory(rep *Report) {
	if !rep.FreePageReporting || o.NoBackMemory {
		return
	}
	want := 2*uint64(rep.Bytes) + 512<<20
	if free := memFree(); free > 1<<30 {
		want = min(want, free-1<<30)
	} else {
		return
	}
	rep.BackedMemory = max(rep.BackedMemory, backMemory(want))
}

// saveAndJSON writes the report to Save's file, and prints it as JSON
// with JSON (printed reports true).
func (o *Options) saveAndJSON(stdout io.Writer, rep any) (printed bool, err error) {
	if o.Save != "" {
		b, err := json.MarshalIndent(rep, "", "  ")
		if err != nil {
			return false, err
		}
		if err := os.WriteFile(o.Save, append(b, '\n'), 0o644); err != nil {
			return false, fmt.Errorf("--save: %w", err)
		}
	}
	if !o.JSON {
		return false, nil
	}
	enc := json.NewEncoder(stdout)
	enc.SetIndent("", "  ")
	return true, enc.Encode(rep)
}

// output saves the report (Save) and prints it, as JSON with JSON.
func (o *Options) output(stdout io.Writer, rep Report) error {
	if printed, err := o.saveAndJSON(stdout, rep); printed || err != nil {
		return err
	}
	if rep.HTTP != nil {
		printHTTP(stdout, rep.HTTP, rep.Bytes)
		return nil
	}
	Print(stdout, rep)
	return nil
}

// targets expands Targets and checks every device it names.
func (o *Options) targets(rt *ggml.Runtime) ([]string, error) {
	targets := o.Targets
	if len(targets) == 0 || len(targets) == 1 && targets[0] == "auto" {
		targets = []string{"none"}
		for _, d := range rt.Devices() {
			if d.Type() == ggml.DeviceGPU || d.Type() == ggml.DeviceIGPU {
				targets = append(targets, d.Name())
			}
		}
	}
	for _, t := range targets {
		if t == "none" {
			continue
		}
		seen := map[string]bool{}
		for _, d := range strings.Split(t, "+") {
			if seen[d] {
				return nil, fmt.Errorf("--targets: %s names %s twice", t, d)
			}
			seen[d] = true
			if _, err := rt.DeviceByName(d); err != nil {
				return nil, fmt.Errorf("--targets: %w", err)
			}
		}
	}
	return targets, nil
}

// measureCase runs a case's processes, ggload and llama.cpp in turn (and,
// for several devices, ggload one device after another), and sums them up.
func (o *Options) measureCase(ctx context.Context, m *gguf.Model, c Case, rep *Report) (Row, error) {
	impls := []string{ImplGgload}
	if c.Multi() {
		impls = append(impls, ImplSequential)
	}
	if !o.NoLlama {
		impls = append(impls, ImplLlama)
	}
	row := Row{Case: c}
	ms := make([][]measurement, len(impls))
	for r := 0; r < o.Runs; r++ {
		for i, impl := range impls {
			if err := o.prepare(ctx, m, rep, &row); err != nil {
				return row, err
			}
			mm, err := o.child(ctx, o.process(impl, c, m.Paths[0]))
			if err != nil {
				mm = measurement{child: LoadResult{Err: err.Error()}}
			}
			ms[i] = append(ms[i], mm)
		}
	}
	o.sumUp(&row, ms, rep)
	return row, nil
}

// prepare sets the machine up for the next process: the memory backed,
// the model's pages evicted (Cold: row records how many were left) or
// read into the page cache, the servers' caches emptied.
func (o *Options) prepare(ctx context.Context, m *gguf.Model, rep *Report, row *Row) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	o.backMemory(rep)
	if o.Cold {
		if err := evictPageCache(m.Paths); err != nil {
			return fmt.Errorf("--cold: %w", err)
		}
		if f := residentFraction(m.Paths); f > row.ColdResident {
			row.ColdResident = f
		}
	} else {
		warmPageCache(m)
	}
	if err := emptyDirs(o.RPCCacheDirs); err != nil {
		return fmt.Errorf("--rpc-cache-dir: %w", err)
	}
	return nil
}

// sumUp fills row from the measurements of its processes, one list per
// implementation in measureCase's order: the figures, the ratios, the
// floor and the goals.
func (o *Options) sumUp(row *Row, ms [][]measurement, rep *Report) {
	c := row.Case
	baseRSS, ownRSS := rep.BaselineRSS, rep.BaselineRSS
	if o.CPUModules != nil && o.CPUModules(o.process(ImplGgload, c, rep.Model)) {
		ownRSS = rep.BaselineCPURSS
	}
	size, floors := rep.Bytes, rep.Floors
	row.Ggload = summarize(ms[0], size, ownRSS)
	if ok := okOnly(ms[0]); len(ok) > 0 {
		row.Devices = deviceSummary(ok)
		row.Staging = ok[0].child.Staging
		row.MemLimit = memLimit(ok[0].child)
	}
	k := 1
	if c.Multi() {
		seq := summarize(ms[k], size, ownRSS)
		row.Sequential = &seq
		if ok := okOnly(ms[k]); len(ok) > 0 {
			row.Solo = deviceSummary(ok)
		}
		k++
	}
	if !o.NoLlama {
		l := summarize(ms[k], size, baseRSS)
		row.Llama = &l
		if row.Ggload.Err == "" && l.Err == "" && l.WallS > 0 {
			row.Ratio = row.Ggload.WallS / l.WallS
			row.Best = row.Ggload.BestS / l.BestS
			row.LoadRatio = row.Ggload.LoadS / l.LoadS
		}
	}
	if f, ok := floors[c.Mode+"/"+c.Target]; ok && f.S > 0 {
		row.Floor, row.TouchFloor = f.S, f.Touch
		if row.Ggload.Err == "" {
			row.OfFloor = row.Ggload.LoadS / f.S
		}
		if row.Llama != nil && row.Llama.Err == "" {
			row.LlamaOfFloor = row.Llama.LoadS / f.S
		}
	}
	// the goals of several devices are those of whole layers per device;
	// other split modes are held to llama.cpp's time
	row.Goal = goal(*row, o.SplitMode == place.SplitLayer || !c.Multi(), o.Cold)
}

// emptyDirs removes every file under each directory, keeping the
// directories (a server made its cache's at start and writes into them).
func emptyDirs(dirs []string) error {
	for _, d := range dirs {
		err := filepath.WalkDir(d, func(p string, e fs.DirEntry, err error) error {
			if err != nil || e.IsDir() {
				return err
			}
			return os.Remove(p)
		})
		if err != nil {
			return err
		}
	}
	return nil
}
