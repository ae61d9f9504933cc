package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/ggload/ggload/ggml"
	"github.com/ggload/ggload/internal/llama"
	"github.com/ggload/ggload/internal/synth"
	"github.com/ggload/ggload/loader"
	"github.com/ggload/ggload/loader/gguf"
	"github.com/ggload/ggload/place"
)

func init() {
	register(command{"bench", "[MODEL] [options]", "time load modes against llama.cpp of the same pin, each load in a fresh process", runBench})
	optionSets["bench"] = func() *optionSet { return benchOptions(&benchFlags{}) }
}

// benchChildCmd is the hidden command a bench runs in a child process for
// each measurement: one load, by ggload or by llama.cpp, then exit.
const benchChildCmd = "__bench-child"

type benchFlags struct {
	runtimeFlags
	modes   string
	targets string
	runs    int
	size    string
	typ     string
	noLlama bool
	noExtra bool
	readers int
	asJSON  bool
	save    string
}

// benchCase is one (load mode, target) pair.
type benchCase struct {
	Mode   string `json:"mode"`
	Target string `json:"target"` // "none" (CPU) or a device name
}

// childResult is what a child prints.
type childResult struct {
	LoadS float64 `json:"load_s"`
	// HostResident is what the load keeps in this process's memory by
	// design: host buffers, and device buffers of a device whose memory is
	// host memory (a software device such as lavapipe).
	HostResident uint64 `json:"host_resident"`
	Ring         uint64 `json:"ring"`
	// PeakRSS is the process's VmHWM at exit (the parent's rusage would
	// count the parent's own pages: the child starts as a copy of it).
	PeakRSS uint64 `json:"peak_rss"`
	Err     string `json:"error,omitempty"`
}

// measurement is one child process, seen from the parent.
type measurement struct {
	WallS   float64 `json:"wall_s"`
	LoadS   float64 `json:"load_s"`
	PeakRSS uint64  `json:"peak_rss"`
	child   childResult
}

type implResult struct {
	WallS    float64 `json:"wall_s"` // median whole-process time
	BestS    float64 `json:"best_s"` // fastest whole-process time
	LoadS    float64 `json:"load_s"` // median time of the load call alone
	GBps     float64 `json:"gb_per_s"`
	PeakRSS  uint64  `json:"peak_rss"`
	ExtraRSS int64   `json:"extra_rss"` // peak minus the idle process minus what stays resident by design
	Err      string  `json:"error,omitempty"`
}

type benchRow struct {
	benchCase
	Ggload implResult  `json:"ggload"`
	Llama  *implResult `json:"llama,omitempty"`
	Ratio  float64     `json:"ratio,omitempty"`      // ggload / llama.cpp, median whole-process times
	Best   float64     `json:"best_ratio,omitempty"` // the same for the fastest runs
	Ring   uint64      `json:"staging_ring"`
	Goal   string      `json:"goal,omitempty"`
}

type benchReport struct {
	Model       string  `json:"model"`
	Bytes       int64   `json:"bytes"`
	Runs        int     `json:"runs"`
	MemcpyGBps  float64 `json:"memcpy_gb_per_s"`      // warm destination
	FirstTouch  float64 `json:"first_touch_gb_per_s"` // fresh destination pages
	BaselineRSS uint64  `json:"baseline_rss"`
	// UploadGBps is, per device target, the rate of host→device copies from
	// its pinned host buffers: the ceiling for loads onto it.
	UploadGBps map[string]float64 `json:"upload_gb_per_s,omitempty"`
	Rows       []benchRow         `json:"rows"`
}

// Ranges of bench's numeric options.
const (
	maxRuns      = 100
	minBenchSize = 1 << 20
	maxBenchSize = 1 << 40
)

func benchOptions(bf *benchFlags) *optionSet {
	s := newOptionSet("bench", "Time each load mode, ggload against llama.cpp of the same pin, each load in a fresh process (MODEL, or a generated model of --size written once into the user cache).",
		"ggload bench [MODEL] [options]")
	bf.runtimeFlags.add(s)
	bf.runtimeFlags.addRPC(s)
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
	s.add(&option{names: []string{"--targets"}, value: "TARGET,...", help: "where to load: none (the CPU) and device names, comma-separated; auto: the CPU and every GPU (default: auto)",
		set: func(v string) error {
			if len(splitList(v)) == 0 {
				return fmt.Errorf("no targets named")
			}
			bf.targets = v
			return nil
		}})
	s.add(&option{names: []string{"--runs"}, value: "N", help: fmt.Sprintf("processes per measurement, 1 to %d; the median is reported (default: 3)", maxRuns),
		set: func(v string) error {
			n, err := intIn(v, 1, maxRuns)
			bf.runs = int(n)
			return err
		}})
	s.add(&option{names: []string{"--size"}, value: "SIZE", help: fmt.Sprintf("size of the generated model when no MODEL is given, %s to %s (default: 1GiB)", sizeString(minBenchSize), sizeString(maxBenchSize)),
		set: func(v string) error {
			if _, err := sizeIn(v, minBenchSize, maxBenchSize); err != nil {
				return err
			}
			bf.size = v
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
	s.add(&option{names: []string{"--no-llama"}, help: "do not time llama.cpp", on: func(on bool) error { bf.noLlama = on; return nil }})
	s.add(&option{names: []string{"-nr", "--no-repack"}, alias: []string{"--no-extra-bufts"}, help: "keep the CPU's extra buffer types (CPU_REPACK) out, for both loaders",
		on: func(on bool) error { bf.noExtra = on; return nil }})
	s.add(&option{names: []string{"--readers"}, value: "N", help: fmt.Sprintf("ggload's parallel readers, 0 to %d (0: automatic) (default: 0)", maxReaders),
		set: func(v string) error {
			n, err := intIn(v, 0, maxReaders)
			bf.readers = int(n)
			return err
		}})
	s.add(&option{names: []string{"--json"}, help: "print JSON", on: func(on bool) error { bf.asJSON = on; return nil }})
	s.add(&option{names: []string{"--save"}, value: "FILE", help: "also write the JSON report to FILE", set: func(v string) error { bf.save = v; return nil }})
	return s
}

func runBench(ctx context.Context, args []string, stdout io.Writer) error {
	bf := benchFlags{runtimeFlags: defaultRuntimeFlags(), modes: "none,mmap,dio", targets: "auto", runs: 3, size: "1GiB", typ: "q8_0"}
	s := benchOptions(&bf)
	pos, err := s.parse(args)
	if err != nil {
		return helpOr(s, stdout, err)
	}
	if len(pos) > 1 {
		return s.errorf("at most one MODEL, got %s", strings.Join(pos, " "))
	}
	rt, err := bf.open(ctx)
	if err != nil {
		return err
	}
	var path string
	if len(pos) == 1 {
		path = pos[0]
	} else if path, err = benchModel(rt, bf.size, bf.typ, os.Stderr); err != nil {
		return err
	}
	m, err := gguf.OpenModel(path)
	if err != nil {
		return err
	}
	size := int64(0)
	for _, f := range m.Files {
		size += f.Size
	}
	m.Close()
	var cases []benchCase
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
		if t != "none" {
			if _, err := rt.DeviceByName(t); err != nil {
				return fmt.Errorf("--targets: %w", err)
			}
		}
	}
	for _, mode := range splitList(bf.modes) {
		if _, err := place.ParseLoadMode(mode); err != nil {
			return fmt.Errorf("--modes: %w", err)
		}
		for _, t := range targets {
			cases = append(cases, benchCase{mode, t})
		}
	}
	rep := benchReport{Model: path, Bytes: size, Runs: bf.runs}
	rep.MemcpyGBps, rep.FirstTouch = memcpyBandwidth()
	for _, t := range targets {
		if t == "none" {
			continue
		}
		d, _ := rt.DeviceByName(t)
		if gbps, err := uploadCeiling(d); err != nil {
			return fmt.Errorf("upload ceiling of %s: %w", t, err)
		} else if gbps > 0 {
			if rep.UploadGBps == nil {
				rep.UploadGBps = map[string]float64{}
			}
			rep.UploadGBps[t] = gbps
		}
	}
	if !bf.asJSON {
		fmt.Fprintf(stdout, "model %s: %.2f GiB; memcpy %.1f GB/s (fresh pages %.1f GB/s); %d process(es) per measurement, median reported\n",
			path, float64(size)/(1<<30), rep.MemcpyGBps, rep.FirstTouch, bf.runs)
		for _, t := range targets {
			if g, ok := rep.UploadGBps[t]; ok {
				fmt.Fprintf(stdout, "%s: pinned host→device copies %.1f GB/s (the ceiling for loads onto it)\n", t, g)
			}
		}
	}
	base, err := bf.child(ctx, path, "ggload", benchCase{"none", "none"}, true)
	if err != nil {
		return fmt.Errorf("idle process: %w", err)
	}
	rep.BaselineRSS = base.PeakRSS
	for _, c := range cases {
		row := benchRow{benchCase: c}
		impls := []string{"ggload"}
		if !bf.noLlama {
			impls = append(impls, "llama")
		}
		var ms [2][]measurement
		for r := 0; r < bf.runs; r++ {
			for i, impl := range impls {
				if err := ctx.Err(); err != nil {
					return err
				}
				warmPageCache(m)
				mm, err := bf.child(ctx, path, impl, c, false)
				if err != nil {
					ms[i] = append(ms[i], measurement{child: childResult{Err: err.Error()}})
					continue
				}
				ms[i] = append(ms[i], mm)
			}
		}
		row.Ggload = summarize(ms[0], size, base.PeakRSS)
		if len(ms[0]) > 0 {
			row.Ring = ms[0][0].child.Ring
		}
		if !bf.noLlama {
			l := summarize(ms[1], size, base.PeakRSS)
			row.Llama = &l
			if row.Ggload.Err == "" && l.Err == "" && l.WallS > 0 {
				row.Ratio = row.Ggload.WallS / l.WallS
				row.Best = row.Ggload.BestS / l.BestS
			}
		}
		row.Goal = goal(row, size)
		rep.Rows = append(rep.Rows, row)
	}
	if bf.save != "" {
		b, err := json.MarshalIndent(rep, "", "  ")
		if err != nil {
			return err
		}
		if err := os.WriteFile(bf.save, append(b, '\n'), 0o644); err != nil {
			return fmt.Errorf("--save: %w", err)
		}
	}
	if bf.asJSON {
		enc := json.NewEncoder(stdout)
		enc.SetIndent("", "  ")
		return enc.Encode(rep)
	}
	printBench(stdout, rep)
	return nil
}

// warmPageCache reads the model's files so that every process starts from
// the same state: the file in the page cache (as after a first load).
func warmPageCache(m *gguf.Model) {
	buf := make([]byte, 8<<20)
	for _, p := range m.Paths {
		f, err := os.Open(p)
		if err != nil {
			continue
		}
		for {
			if _, err := f.Read(buf); err != nil {
				break
			}
		}
		f.Close()
	}
}

// goal states the target for the case, where there is one.
func goal(r benchRow, size int64) string {
	var parts []string
	if r.Llama != nil && r.Ratio > 0 {
		want := map[string]float64{"none/none": 0.5, "mmap/none": 1.0, "none/Vulkan0": 0.8}[r.Mode+"/"+r.Target]
		if want > 0 {
			parts = append(parts, fmt.Sprintf("time ≤ %.1f× llama.cpp: median %s, best %s", want, yesNo(r.Ratio <= want), yesNo(r.Best <= want)))
		}
	}
	if r.Target != "none" && r.Mode == "none" && r.Ggload.Err == "" {
		limit := int64(r.Ring) + size/20
		parts = append(parts, fmt.Sprintf("extra RSS ≤ ring + 5%%: %s", yesNo(r.Ggload.ExtraRSS <= limit)))
	}
	return strings.Join(parts, "; ")
}

func yesNo(ok bool) string {
	if ok {
		return "met"
	}
	return "missed"
}

func summarize(ms []measurement, size int64, baseRSS uint64) implResult {
	var ok []measurement
	var res implResult
	for _, m := range ms {
		if m.child.Err != "" {
			res.Err = m.child.Err
			continue
		}
		ok = append(ok, m)
	}
	if len(ok) == 0 {
		if res.Err == "" {
			res.Err = "no measurement"
		}
		return res
	}
	res.Err = ""
	sort.Slice(ok, func(i, j int) bool { return ok[i].WallS < ok[j].WallS })
	med := ok[len(ok)/2]
	res.WallS, res.LoadS, res.BestS = med.WallS, med.LoadS, ok[0].WallS
	res.GBps = float64(size) / med.WallS / 1e9
	for _, m := range ok {
		res.PeakRSS = max(res.PeakRSS, m.PeakRSS)
	}
	res.ExtraRSS = int64(res.PeakRSS) - int64(baseRSS) - int64(med.child.HostResident)
	return res
}

func printBench(w io.Writer, rep benchReport) {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "mode\ttarget\tggload s\tbest\tGB/s\tload s\tpeak RSS MiB\textra MiB\tllama.cpp s\tbest\tGB/s\tload s\tpeak RSS MiB\tratio\tbest\t")
	mib := func(n int64) string { return fmt.Sprintf("%.0f", float64(n)/(1<<20)) }
	for _, r := range rep.Rows {
		g := r.Ggload
		cols := []string{r.Mode, r.Target}
		if g.Err != "" {
			cols = append(cols, "error", "", "", "", "", "")
		} else {
			cols = append(cols, fmt.Sprintf("%.3f", g.WallS), fmt.Sprintf("%.3f", g.BestS), fmt.Sprintf("%.2f", g.GBps), fmt.Sprintf("%.3f", g.LoadS), mib(int64(g.PeakRSS)), mib(g.ExtraRSS))
		}
		switch {
		case r.Llama == nil:
			cols = append(cols, "", "", "", "", "", "", "")
		case r.Llama.Err != "":
			cols = append(cols, "error", "", "", "", "", "", "")
		default:
			l := r.Llama
			cols = append(cols, fmt.Sprintf("%.3f", l.WallS), fmt.Sprintf("%.3f", l.BestS), fmt.Sprintf("%.2f", l.GBps), fmt.Sprintf("%.3f", l.LoadS), mib(int64(l.PeakRSS)),
				fmt.Sprintf("%.2f×", r.Ratio), fmt.Sprintf("%.2f×", r.Best))
		}
		fmt.Fprintln(tw, strings.Join(cols, "\t")+"\t")
	}
	tw.Flush()
	fmt.Fprintf(w, "idle process peak RSS %.0f MiB; extra = peak − idle − what the load keeps in host memory by design\n", float64(rep.BaselineRSS)/(1<<20))
	for _, r := range rep.Rows {
		if r.Goal != "" {
			fmt.Fprintf(w, "%s→%s: %s\n", r.Mode, r.Target, r.Goal)
		}
		if r.Ggload.Err != "" {
			fmt.Fprintf(w, "%s→%s: ggload: %s\n", r.Mode, r.Target, r.Ggload.Err)
		}
		if r.Llama != nil && r.Llama.Err != "" {
			fmt.Fprintf(w, "%s→%s: llama.cpp: %s\n", r.Mode, r.Target, r.Llama.Err)
		}
	}
}

// child runs one measurement in a fresh process and returns its wall time
// and peak RSS. idle: everything but the load (the baseline).
func (bf *benchFlags) child(ctx context.Context, path, impl string, c benchCase, idle bool) (measurement, error) {
	exe, err := os.Executable()
	if err != nil {
		return measurement{}, err
	}
	args := []string{benchChildCmd, "--impl", impl, "--mode", c.Mode, "--target", c.Target, "--rpc-timeout", bf.rpcIO.String(), "--readers", strconv.Itoa(bf.readers)}
	for _, kv := range [][2]string{{"--lib-dir", bf.libDir}, {"--variant", bf.variant}, {"--rpc", bf.rpc}} {
		if kv[1] != "" {
			args = append(args, kv[0], kv[1])
		}
	}
	if bf.rpcDirect {
		args = append(args, "--rpc-direct")
	}
	if idle {
		args = append(args, "--idle")
	}
	if bf.noExtra {
		args = append(args, "--no-extra-bufts")
	}
	args = append(args, path)
	cmd := exec.CommandContext(ctx, exe, args...)
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	start := time.Now()
	err = cmd.Run()
	wall := time.Since(start)
	var res childResult
	if jerr := json.Unmarshal(out.Bytes(), &res); jerr != nil {
		msg := strings.TrimSpace(errb.String())
		if err == nil {
			err = jerr
		}
		return measurement{}, fmt.Errorf("%s child: %v %s", impl, err, lastLine(msg))
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

// runBenchChild is one measured process (ggload bench runs it; it is no
// command of its own).
func runBenchChild(ctx context.Context, args []string, stdout io.Writer) error {
	s := newOptionSet(benchChildCmd, "One measured load of ggload bench, in a process of its own (internal).",
		benchChildCmd+" --impl {ggload,llama} --mode MODE --target TARGET [options] MODEL")
	rf := defaultRuntimeFlags()
	rf.add(s)
	rf.addRPC(s)
	impl, mode, target := "ggload", "none", "none"
	var idle, noExtra bool
	var readers int
	str := func(p *string, words []string) func(string) error {
		return func(v string) error {
			if words != nil && !contains(words, v) {
				return fmt.Errorf("want %s", strings.Join(words, ", "))
			}
			*p = v
			return nil
		}
	}
	s.add(&option{names: []string{"--impl"}, value: "{ggload,llama}", set: str(&impl, []string{"ggload", "llama"})})
	s.add(&option{names: []string{"--mode"}, value: "MODE", set: func(v string) error {
		_, err := place.ParseLoadMode(v)
		mode = v
		return err
	}})
	s.add(&option{names: []string{"--target"}, value: "TARGET", set: str(&target, nil)})
	s.add(&option{names: []string{"--idle"}, on: func(on bool) error { idle = on; return nil }})
	s.add(&option{names: []string{"--no-extra-bufts"}, on: func(on bool) error { noExtra = on; return nil }})
	s.add(&option{names: []string{"--readers"}, value: "N", set: func(v string) error {
		n, err := intIn(v, 0, maxReaders)
		readers = int(n)
		return err
	}})
	pos, err := s.parse(args)
	if err != nil {
		return helpOr(s, stdout, err)
	}
	if len(pos) != 1 {
		return s.errorf("one MODEL expected, got %d arguments: usage: %s", len(pos), s.usage[0])
	}
	res, err := benchOnce(ctx, rf, impl, mode, target, idle, noExtra, readers, pos[0])
	if err != nil {
		res.Err = err.Error()
	}
	res.PeakRSS = peakRSS()
	return json.NewEncoder(stdout).Encode(res)
}

func benchOnce(ctx context.Context, rf runtimeFlags, impl, modeName, target string, idle, noExtra bool, readers int, path string) (childResult, error) {
	var res childResult
	rt, err := rf.open(ctx)
	if err != nil {
		return res, err
	}
	mode, err := place.ParseLoadMode(modeName)
	if err != nil {
		return res, err
	}
	params := place.Params{}
	params.LoadMode = mode
	params.Devices = []string{target}
	params.NoExtraBufts = noExtra
	m, err := gguf.OpenModel(path)
	if err != nil {
		return res, err
	}
	defer m.Close()
	p, err := place.New(rt, m, params)
	if err != nil {
		return res, err
	}
	res.HostResident = hostResident(p)
	if impl == "llama" {
		lib, err := llama.Open(rt)
		if err != nil {
			return res, err
		}
		if idle {
			return res, nil
		}
		ld := llama.Load{Path: path, NGPULayers: params.NGPULayers.Llama(), LoadMode: mode.Llama(), LazyMode: params.Lazy.Llama(), NoExtra: noExtra, Devices: []*ggml.Device{}}
		if target != "none" {
			d, err := rt.DeviceByName(target)
			if err != nil {
				return res, err
			}
			ld.Devices = []*ggml.Device{d}
		}
		start := time.Now()
		lm, _, err := lib.LoadModel(ld)
		res.LoadS = time.Since(start).Seconds()
		if err != nil {
			return res, err
		}
		lm.Free()
		return res, nil
	}
	if idle {
		return res, nil
	}
	start := time.Now()
	lm, err := loader.Load(ctx, p, loader.Options{Readers: readers})
	res.LoadS = time.Since(start).Seconds()
	if err != nil {
		return res, err
	}
	res.Ring = uint64(lm.Stats.StagingSlots) * lm.Stats.StagingSize
	return res, lm.Close()
}

// hostResident sums the allocated buffers a load keeps in this process's
// memory: host buffer types, the CPU's, and the device buffers of software
// devices whose "device memory" is this process's memory.
func hostResident(p *place.Plan) uint64 {
	var n uint64
	for _, c := range p.Contexts {
		if c.Mapped {
			continue
		}
		if c.BufferType.IsHost() || c.Device == nil || c.Device.Type() == ggml.DeviceCPU || softwareDevice(c.Device) {
			n += c.Size
		}
	}
	return n
}

func softwareDevice(d *ggml.Device) bool {
	desc := strings.ToLower(d.Description())
	return strings.Contains(desc, "llvmpipe") || strings.Contains(desc, "lavapipe") || strings.Contains(desc, "swiftshader")
}

// memcpyBandwidth measures one thread's copy bandwidth into warm pages and
// into pages freshly mapped from the kernel (what a load into a new buffer
// meets, huge pages advised as the loader does), best of three.
func memcpyBandwidth() (warm, fresh float64) {
	const n = 256 << 20
	src := make([]byte, n)
	for i := range src {
		src[i] = byte(i)
	}
	dst := make([]byte, n)
	copy(dst, src)
	for i := 0; i < 3; i++ {
		start := time.Now()
		copy(dst, src)
		warm = max(warm, n/time.Since(start).Seconds()/1e9)
		d, err := freshPages(n)
		if err != nil {
			continue
		}
		start = time.Now()
		copy(d, src)
		fresh = max(fresh, n/time.Since(start).Seconds()/1e9)
		releasePages(d)
	}
	return warm, fresh
}

// benchModel returns a generated llama model of about size bytes in the
// user cache directory, writing it once.
func benchModel(rt *ggml.Runtime, size, typ string, w io.Writer) (string, error) {
	want, err := parseSize(size)
	if err != nil {
		return "", fmt.Errorf("--size: %w", err)
	}
	t, ok := ggml.TypeByName(typ)
	if !ok {
		return "", fmt.Errorf("--type %q: not a ggml type", typ)
	}
	spec := synth.BenchSpec(want, t)
	dir, err := os.UserCacheDir()
	if err != nil {
		return "", err
	}
	dir = filepath.Join(dir, "ggload")
	path := filepath.Join(dir, fmt.Sprintf("bench-llama-%dx%d-%s.gguf", spec.Layers, spec.Embd, t))
	if f, err := gguf.Open(path); err == nil {
		f.Close()
		return path, nil
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", err
	}
	fmt.Fprintf(w, "writing %s (%.2f GiB, once)...\n", path, float64(spec.Bytes())/(1<<30))
	tmp := path + ".tmp"
	defer os.Remove(tmp)
	if _, err := spec.Write(rt, tmp); err != nil {
		return "", err
	}
	return path, os.Rename(tmp, path)
}

// parseSize reads 512MiB, 1GiB, 4G, 100M or plain bytes.
func parseSize(s string) (int64, error) {
	u := strings.ToUpper(strings.TrimSpace(s))
	mult := int64(1)
	for _, suf := range []struct {
		s string
		m int64
	}{{"GIB", 1 << 30}, {"MIB", 1 << 20}, {"KIB", 1 << 10}, {"GB", 1e9}, {"MB", 1e6}, {"G", 1 << 30}, {"M", 1 << 20}, {"K", 1 << 10}} {
		if strings.HasSuffix(u, suf.s) {
			u, mult = strings.TrimSuffix(u, suf.s), suf.m
			break
		}
	}
	f, err := strconv.ParseFloat(strings.TrimSpace(u), 64)
	if err != nil || f <= 0 {
		return 0, fmt.Errorf("%q: want a size such as 1GiB or 512MiB", s)
	}
	return int64(f * float64(mult)), nil
}

// peakRSS is this process's high-water resident set (VmHWM), 0 where
// /proc is missing.
func peakRSS() uint64 {
	b, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return 0
	}
	for _, line := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, "VmHWM:"); ok {
			kb, _ := strconv.ParseUint(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(v), "kB")), 10, 64)
			return kb << 10
		}
	}
	return 0
}

// uploadCeiling times copies of 256 MiB from the device's pinned host
// buffer type into a device buffer, best of three; 0 for devices without a
// host buffer type.
func uploadCeiling(d *ggml.Device) (float64, error) {
	host, ok := d.HostBufferType()
	if !ok {
		return 0, nil
	}
	n := uint64(256 << 20)
	if m := d.BufferType().MaxSize(); m > 0 && m < n {
		n = m &^ 4095
	}
	ctx, err := d.Runtime().NewContext(ggml.ContextParams{Tensors: 1, NoAlloc: true})
	if err != nil {
		return 0, err
	}
	defer ctx.Free()
	t, err := ctx.NewTensor(ggml.TypeI8, int64(n))
	if err != nil {
		return 0, err
	}
	buf, err := ctx.AllocTensors(d.BufferType())
	if err != nil {
		return 0, err
	}
	defer buf.Free()
	pinned, err := host.Alloc(n)
	if err != nil {
		return 0, err
	}
	defer pinned.Free()
	pinned.Clear(1)
	be, err := d.NewBackend()
	if err != nil {
		return 0, err
	}
	defer be.Free()
	best := 0.0
	for range 4 { // the first warms up
		start := time.Now()
		if err := be.SetTensorAsync(t, pinned.Base(), 0, n); err != nil {
			return 0, err
		}
		be.Synchronize()
		best = max(best, float64(n)/time.Since(start).Seconds()/1e9)
	}
	return best, nil
}
