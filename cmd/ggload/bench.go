package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/ggload/ggload/ggml"
	"github.com/ggload/ggload/gguf"
	"github.com/ggload/ggload/place"
)

// ggload bench times loads against llama.cpp of the same pin, each load in
// a fresh process. Its parts: this file (the command, its options, the
// run), bench_child.go (the measured child process and its protocol),
// bench_stats.go (medians and ranges), bench_floor.go (what this machine
// can do at best: the floors), bench_print.go (the table and the goals),
// bench_model.go (the generated model).

func init() {
	register(command{"bench", "[MODEL] [options]", "time load modes against llama.cpp of the same pin, each load in a fresh process", runBench})
	optionSets["bench"] = func() *optionSet { return benchOptions(&benchFlags{}) }
}

type benchFlags struct {
	runtimeFlags
	modes   string
	targets string
	runs    int
	size    string
	typ     string
	ngl     string
	ts      string
	sm      string
	noLlama bool
	noExtra bool
	readers int
	asJSON  bool
	save    string
	rate    float64       // --http: bytes a second
	cold    bool          // --cold: the model's pages evicted before every process
	rpcCold []string      // --rpc-cache-dir: servers' file caches emptied before every process
	latency time.Duration // --http-latency
	noBack  bool          // --no-back-memory
}

// benchCase is one (load mode, target) pair.
type benchCase struct {
	Mode string `json:"mode"`
	// Target is "none" (the CPU) or device names joined by '+': the
	// weights are split over them, which load at once.
	Target string `json:"target"`
}

// devices are the case's devices ("none": the CPU alone).
func (c benchCase) devices() []string { return strings.Split(c.Target, "+") }

// multi reports whether the case spreads the weights over several devices.
func (c benchCase) multi() bool { return len(c.devices()) > 1 }

// Ranges of bench's numeric options.
const (
	maxRuns      = 100
	minBenchSize = 1 << 20
	maxBenchSize = 1 << 40
)

// benchOptions registers bench's options on a new set, in the order of the
// help; parsing fills bf.
func benchOptions(bf *benchFlags) *optionSet {
	s := newOptionSet("bench", "Time each load mode, ggload against llama.cpp of the same pin, each load in a fresh process (MODEL, or a generated model of --size written once into the user cache). Every figure is a median with its range, beside this machine's floor for the case.",
		"ggload bench [MODEL] [options]")
	bf.runtimeFlags.add(s)
	bf.runtimeFlags.addRPC(s)
	bf.addCases(s)
	bf.addModel(s)
	bf.addLoaders(s)
	bf.addSource(s)
	s.add(&option{names: []string{"--json"}, help: "print JSON", on: func(on bool) error { bf.asJSON = on; return nil }})
	s.add(&option{names: []string{"--save"}, value: "FILE", help: "also write the JSON report to FILE", set: func(v string) error { bf.save = v; return nil }})
	return s
}

// addCases registers what is timed: the load modes, the targets, and the
// processes per measurement.
func (bf *benchFlags) addCases(s *optionSet) {
	s.add(&option{names: []string{"--modes"}, value: "MODE,...", help: "load modes to time, comma-separated, as -lm takes them (default: none,mmap,dio)",
		set: func(v string) error {
			modes := splitList(v)
			if len(modes) == 0 {
				return fmt.Errorf("no load modes named")
			}
			for _, m := range modes {
				if _, err := place.ParseLoadMode(m); err != nil {
					return withHint(err, m, place.LoadModeNames())
				}
			}
			bf.modes = strings.Join(modes, ",")
			return nil
		}})
	s.add(&option{names: []string{"--targets"}, value: "TARGET,...", help: "where to load, comma-separated: none (the CPU), a device name, or device names joined by + to split the weights over them (RPC0+RPC1); auto: the CPU and every GPU (default: auto)",
		set: func(v string) error {
			ts := splitList(v)
			if len(ts) == 0 {
				return fmt.Errorf("no targets named")
			}
			for _, t := range ts {
				for _, d := range strings.Split(t, "+") {
					if d == "" || (d == "none" && t != "none") {
						return fmt.Errorf("target %q: want none, a device, or devices joined by +", t)
					}
				}
			}
			bf.targets = v
			return nil
		}})
	s.add(&option{names: []string{"--runs"}, value: "N", help: fmt.Sprintf("processes per measurement, 1 to %d; the median is reported with the range (default: 3)", maxRuns),
		set: func(v string) error {
			n, err := intIn(v, 1, maxRuns)
			bf.runs = int(n)
			return err
		}})
}

// addModel registers the generated model's options.
func (bf *benchFlags) addModel(s *optionSet) {
	s.add(&option{names: []string{"--size"}, value: "SIZE[,SIZE...]", help: fmt.Sprintf("size of the generated model when no MODEL is given, %s to %s; several (1GiB,4GiB,8GiB): each is timed in turn, then each case's cost per GiB against the first size's (goal: within 10%%) (default: 1GiB)", sizeString(minBenchSize), sizeString(maxBenchSize)),
		set: func(v string) error {
			sizes := splitList(v)
			if len(sizes) == 0 {
				return fmt.Errorf("no size given")
			}
			for _, sz := range sizes {
				if _, err := sizeIn(sz, minBenchSize, maxBenchSize); err != nil {
					return fmt.Errorf("%s: %w", sz, err)
				}
			}
			bf.size = strings.Join(sizes, ",")
			return nil
		}})
	s.add(&option{names: []string{"--type"}, value: "TYPE", help: "weight type of the generated model (default: q8_0)",
		set: func(v string) error {
			if _, ok := ggml.TypeByName(v); !ok {
				return fmt.Errorf("not a ggml type")
			}
			bf.typ = v
			return nil
		}})
}

// addLoaders registers the loaders' options: what both are given, whether
// llama.cpp is timed, and ggload's readers.
func (bf *benchFlags) addLoaders(s *optionSet) {
	s.add(&option{names: []string{"-ngl", "--gpu-layers", "--n-gpu-layers"}, value: "N", help: "layers offloaded, for both loaders: a number, auto or all (default: auto)",
		set: func(v string) error {
			if _, err := place.ParseLayers(v); err != nil {
				return fmt.Errorf("want a number of layers, auto or all")
			}
			bf.ngl = v
			return nil
		}})
	s.add(&option{names: []string{"-sm", "--split-mode"}, value: "{layer,row,tensor}", help: "how a target split over several devices spreads the weights, for both loaders (default: layer)",
		set: func(v string) error {
			m, err := place.ParseSplitMode(v)
			if err != nil || m == place.SplitNone {
				return withHint(fmt.Errorf("want layer, row or tensor"), v, []string{"layer", "row", "tensor"})
			}
			bf.sm = v
			return nil
		}})
	s.add(&option{names: []string{"-ts", "--tensor-split"}, value: "N0,N1,...", help: "the share of the model for each device of a target split over several, for both loaders (default: by free memory)",
		set: func(v string) error {
			ts, err := place.ParseTensorSplit(v)
			if err != nil {
				return err
			}
			if len(ts) >= maxDevices {
				return fmt.Errorf("%d values: at most %d", len(ts), maxDevices-1)
			}
			bf.ts = v
			return nil
		}})
	s.add(&option{names: []string{"--no-llama"}, help: "do not time llama.cpp", on: func(on bool) error { bf.noLlama = on; return nil }})
	s.add(&option{names: []string{"-nr", "--no-repack"}, alias: []string{"--no-extra-bufts"}, help: "keep the CPU's extra buffer types (CPU_REPACK) out, for both loaders",
		on: func(on bool) error { bf.noExtra = on; return nil }})
	s.add(&option{names: []string{"--readers"}, value: "N", help: fmt.Sprintf("ggload's parallel readers, 0 to %d (0: automatic) (default: 0)", maxReaders),
		set: func(v string) error {
			n, err := intIn(v, 0, maxReaders)
			bf.readers = int(n)
			return err
		}})
}

// addSource registers how the model's bytes arrive: from a cold page cache,
// or over HTTP.
func (bf *benchFlags) addSource(s *optionSet) {
	s.add(&option{names: []string{"--cold"}, help: "time cold loads: the model's pages are written back and evicted from the page cache before every process " +
		"(posix_fadvise DONTNEED, no root needed), the floors are this machine's cold read (one O_DIRECT pass at the best queue depth), " +
		"and the modes are none,mmap,dio,auto unless --modes says otherwise",
		on: func(on bool) error { bf.cold = on; return nil }})
	s.add(&option{names: []string{"--rpc-cache-dir"}, value: "DIR,...", help: "the file caches of the RPC servers (ggml-rpc-server -c, under LLAMA_CACHE) to empty before every process: loads onto servers whose cache is cold; without it a cache stays warm after the first load",
		set: func(v string) error {
			bf.rpcCold = splitList(v)
			for _, d := range bf.rpcCold {
				if st, err := os.Stat(d); err != nil || !st.IsDir() {
					return fmt.Errorf("%s: not a directory", d)
				}
			}
			return nil
		}})
	s.add(&option{names: []string{"--no-back-memory"}, help: "on a virtual machine whose balloon reports free memory to its host, do not fault in and free, before every process, the memory it will take " +
		"(by default the bench does, so that each process finds fresh pages as fast as this machine makes them, not as slow as after the host took them back: a process that starts after a pause)",
		on: func(on bool) error { bf.noBack = on; return nil }})
	s.add(&option{names: []string{"--http"}, value: "RATE", help: "instead of the load modes, serve the model on loopback over a link of RATE a second (1GiB, 100MiB/s, ...) and time: " +
		"the plan from the URL against from the file, and a streaming load from the URL onto each target against the link (goal: 90%)",
		set: func(v string) error {
			n, err := sizeIn(strings.TrimSuffix(v, "/s"), 1<<20, 1<<40)
			bf.rate = float64(n)
			return err
		}})
	s.add(&option{names: []string{"--http-latency"}, value: "DURATION", help: "with --http: how long the server waits before each answer, a round trip's worth (e.g. 20ms) (default: 0)",
		set: func(v string) error {
			d, err := time.ParseDuration(v)
			if err == nil && (d < 0 || d > 10*time.Second) {
				err = fmt.Errorf("out of range: want 0 to 10s")
			}
			bf.latency = d
			return err
		}})
}

func runBench(ctx context.Context, args []string, stdout io.Writer) error {
	bf := benchFlags{runtimeFlags: defaultRuntimeFlags(), modes: "none,mmap,dio", targets: "auto", runs: 3, size: "1GiB", typ: "q8_0", ngl: "auto"}
	s := benchOptions(&bf)
	pos, err := s.parse(args)
	if err != nil {
		return helpOr(s, stdout, err)
	}
	if len(pos) > 1 {
		return s.errorf("at most one MODEL, got %s", strings.Join(pos, " "))
	}
	sizes := splitList(bf.size)
	if len(pos) == 1 && len(sizes) > 1 {
		return s.errorf("--size %s generates models of several sizes: give no MODEL", bf.size)
	}
	if bf.rate > 0 && len(sizes) > 1 {
		return s.errorf("--http times one model: give one --size")
	}
	if bf.cold && !s.given[s.byName["--modes"]] {
		bf.modes = "none,mmap,dio,auto"
	}
	rt, err := bf.open(ctx)
	if err != nil {
		return err
	}
	var reps []benchReport
	for _, sz := range sizes {
		path := ""
		if len(pos) == 1 {
			path = pos[0]
		} else if path, err = benchModel(rt, sz, bf.typ, os.Stderr); err != nil {
			return err
		}
		rep, err := bf.benchOne(ctx, rt, path, stdout)
		if err != nil {
			return err
		}
		if len(sizes) == 1 {
			return bf.output(stdout, rep)
		}
		if !bf.asJSON && rep.HTTP == nil {
			printBench(stdout, rep)
			fmt.Fprintln(stdout)
		}
		reps = append(reps, rep)
	}
	return bf.outputScale(stdout, reps)
}

// benchOne measures the model at path: every case, or the HTTP section.
func (bf *benchFlags) benchOne(ctx context.Context, rt *ggml.Runtime, path string, stdout io.Writer) (benchReport, error) {
	m, err := gguf.OpenModel(path)
	if err != nil {
		return benchReport{}, err
	}
	defer m.Close()
	size := int64(0)
	for _, f := range m.Files {
		size += f.Size
	}
	rep := benchReport{Model: path, Bytes: size, Runs: bf.runs, Cold: bf.cold, FreePageReporting: freePageReporting()}
	targets, err := bf.benchTargets(rt)
	if err != nil {
		return rep, err
	}
	if bf.cold {
		if err := evictPageCache(m.Paths); err != nil {
			return rep, fmt.Errorf("--cold: %w", err)
		}
	}
	if bf.rate > 0 {
		rep.HTTP, err = bf.measureHTTP(ctx, rt, m, targets, bf.rate)
		return rep, err
	}
	var cases []benchCase
	for _, mode := range splitList(bf.modes) {
		if _, err := place.ParseLoadMode(mode); err != nil {
			return rep, fmt.Errorf("--modes: %w", err)
		}
		for _, t := range targets {
			cases = append(cases, benchCase{mode, t})
		}
	}
	if err := bf.measureFloors(rt, m, cases, &rep); err != nil {
		return rep, err
	}
	if err := bf.warmRPCCaches(ctx, path, cases, &rep); err != nil {
		return rep, err
	}
	if !bf.asJSON {
		printFloors(stdout, rep)
	}
	base, err := bf.child(ctx, path, "ggload", benchCase{"none", "none"}, true, "--all-backends")
	if err != nil {
		return rep, fmt.Errorf("idle process: %w", err)
	}
	rep.BaselineRSS = base.PeakRSS
	// ggload's process onto the CPU loads fewer backend modules: its own
	// baseline
	baseCPU, err := bf.child(ctx, path, "ggload", benchCase{"none", "none"}, true)
	if err != nil {
		return rep, fmt.Errorf("idle process: %w", err)
	}
	rep.BaselineCPURSS = baseCPU.PeakRSS
	for _, c := range cases {
		row, err := bf.measureCase(ctx, m, c, &rep)
		if err != nil {
			return rep, err
		}
		rep.Rows = append(rep.Rows, row)
	}
	return rep, nil
}

// warmRPCCaches runs one untimed ggload load onto each target with an RPC
// server, unless --rpc-cache-dir empties the servers' caches before every
// process: a server started with its file cache (-c) keeps the weights
// above the hash threshold from that load on, and ggload's hash index has
// their hashes, so that every timed run of both loaders is alike, a
// reload (without it, the first row's first run alone would fill them).
// A server without a cache takes the load and keeps nothing. A failed
// warm-up is left for the timed runs to report.
func (bf *benchFlags) warmRPCCaches(ctx context.Context, path string, cases []benchCase, rep *benchReport) error {
	if len(bf.rpcCold) > 0 {
		return nil
	}
	for _, c := range cases {
		if !slices.ContainsFunc(c.devices(), isRPCName) || slices.Contains(rep.WarmedRPC, c.Target) {
			continue
		}
		if err := ctx.Err(); err != nil {
			return err
		}
		bf.child(ctx, path, "ggload", c, false)
		rep.WarmedRPC = append(rep.WarmedRPC, c.Target)
	}
	return nil
}

// backMemory, on a machine with free page reporting (freePageReporting),
// faults in and frees what the next process will take: twice the model
// (its weights, and its pages in the page cache or a server's copy) and
// 512 MiB, within the memory no one uses less 1 GiB. --no-back-memory
// leaves the memory as it is.
func (bf *benchFlags) backMemory(rep *benchReport) {
	if !rep.FreePageReporting || bf.noBack {
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

// saveAndJSON writes the report to --save's file, and prints it as JSON
// with --json (printed reports true).
func (bf *benchFlags) saveAndJSON(stdout io.Writer, rep any) (printed bool, err error) {
	if bf.save != "" {
		b, err := json.MarshalIndent(rep, "", "  ")
		if err != nil {
			return false, err
		}
		if err := os.WriteFile(bf.save, append(b, '\n'), 0o644); err != nil {
			return false, fmt.Errorf("--save: %w", err)
		}
	}
	if !bf.asJSON {
		return false, nil
	}
	enc := json.NewEncoder(stdout)
	enc.SetIndent("", "  ")
	return true, enc.Encode(rep)
}

// output saves the report (--save) and prints it, as JSON with --json.
func (bf *benchFlags) output(stdout io.Writer, rep benchReport) error {
	if printed, err := bf.saveAndJSON(stdout, rep); printed || err != nil {
		return err
	}
	if rep.HTTP != nil {
		printHTTP(stdout, rep.HTTP, rep.Bytes)
		return nil
	}
	printBench(stdout, rep)
	return nil
}

// benchTargets expands --targets and checks every device it names.
func (bf *benchFlags) benchTargets(rt *ggml.Runtime) ([]string, error) {
	targets := splitList(bf.targets)
	if len(targets) == 1 && targets[0] == "auto" {
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
func (bf *benchFlags) measureCase(ctx context.Context, m *gguf.Model, c benchCase, rep *benchReport) (benchRow, error) {
	baseRSS, ownRSS := rep.BaselineRSS, rep.BaselineRSS
	if targetCPUOrRPC(c.Target) {
		ownRSS = rep.BaselineCPURSS
	}
	size, floors := rep.Bytes, rep.Floors
	row := benchRow{benchCase: c}
	impls := []string{"ggload"}
	if c.multi() {
		impls = append(impls, implSequential)
	}
	if !bf.noLlama {
		impls = append(impls, "llama")
	}
	ms := make([][]measurement, len(impls))
	for r := 0; r < bf.runs; r++ {
		for i, impl := range impls {
			if err := ctx.Err(); err != nil {
				return row, err
			}
			bf.backMemory(rep)
			if bf.cold {
				if err := evictPageCache(m.Paths); err != nil {
					return row, fmt.Errorf("--cold: %w", err)
				}
				if f := residentFraction(m.Paths); f > row.ColdResident {
					row.ColdResident = f
				}
			} else {
				warmPageCache(m)
			}
			if err := emptyDirs(bf.rpcCold); err != nil {
				return row, fmt.Errorf("--rpc-cache-dir: %w", err)
			}
			mm, err := bf.child(ctx, m.Paths[0], impl, c, false)
			if err != nil {
				mm = measurement{child: childResult{Err: err.Error()}}
			}
			ms[i] = append(ms[i], mm)
		}
	}
	row.Ggload = summarize(ms[0], size, ownRSS)
	if ok := okOnly(ms[0]); len(ok) > 0 {
		row.Devices = deviceSummary(ok)
		row.Staging = ok[0].child.Staging
		row.MemLimit = memLimit(ok[0].child)
	}
	k := 1
	if c.multi() {
		seq := summarize(ms[k], size, ownRSS)
		row.Sequential = &seq
		if ok := okOnly(ms[k]); len(ok) > 0 {
			row.Solo = deviceSummary(ok)
		}
		k++
	}
	if !bf.noLlama {
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
	row.Goal = goal(row, bf.sm == "" || bf.sm == "layer" || !c.multi(), bf.cold)
	return row, nil
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
