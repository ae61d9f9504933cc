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
	"strconv"
	"strings"
	"time"

	"github.com/ggload/ggload/ggml"
	"github.com/ggload/ggload/gguf"
	"github.com/ggload/ggload/lab/llama"
	"github.com/ggload/ggload/loader"
	"github.com/ggload/ggload/place"
)

// The child protocol: for each measurement the bench runs this executable
// again with the hidden command below, which makes one load (by ggload or
// by llama.cpp, in the same native set), prints one JSON childResult on
// stdout and exits. The parent times the whole process and reads the rest
// from the JSON; an error of the load is in the JSON, an error of the
// command line is the exit status 2 and a line on stderr.

// benchChildCmd is the hidden command a bench runs in a child process for
// each measurement: one load, by ggload or by llama.cpp, then exit.
const benchChildCmd = "__bench-child"

// implSequential is ggload loading one device after another
// (loader.Options.Sequential): each device's time alone.
const implSequential = "ggload-sequential"

// childResult is what a child prints.
type childResult struct {
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
	Devices []childDevice `json:"devices,omitempty"`
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
	// (placeFlags.backends)
	Backends []string `json:"backends,omitempty"`
	Err      string   `json:"error,omitempty"`
}

// childDevice is one device's upload pipeline in a child's load.
type childDevice struct {
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
// and peak RSS. idle: everything but the load (the baseline).
func (bf *benchFlags) child(ctx context.Context, path, impl string, c benchCase, idle bool, extra ...string) (measurement, error) {
	exe, err := os.Executable()
	if err != nil {
		return measurement{}, err
	}
	args := []string{benchChildCmd, "--impl", impl, "--mode", c.Mode, "--target", c.Target, "--rpc-timeout", bf.rpcIO.String(), "--readers", strconv.Itoa(bf.readers)}
	for _, kv := range [][2]string{{"--lib-dir", bf.libDir}, {"--variant", bf.variant}, {"--rpc", bf.rpc}, {"-ngl", bf.ngl}} {
		if kv[1] != "" {
			args = append(args, kv[0], kv[1])
		}
	}
	if bf.ts != "" && c.multi() {
		args = append(args, "-ts", bf.ts)
	}
	if bf.sm != "" && c.multi() {
		args = append(args, "-sm", bf.sm)
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
	args = append(append(args, extra...), path)
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

// childArgs are the child's parsed arguments.
type childArgs struct {
	rf      runtimeFlags
	impl    string
	mode    string
	target  string
	ngl     place.Layers
	ts      []float32
	sm      place.SplitMode
	idle    bool
	all     bool // every backend module, whatever the target
	noExtra bool
	readers int
	path    string
}

// runBenchChild is one measured process (ggload bench runs it; it is no
// command of its own).
func runBenchChild(ctx context.Context, args []string, stdout io.Writer) error {
	s := newOptionSet(benchChildCmd, "One measured load of ggload bench, in a process of its own (internal).",
		"ggload "+benchChildCmd+" --impl {ggload,"+implSequential+",llama} --mode MODE --target TARGET [options] MODEL")
	a := childArgs{rf: defaultRuntimeFlags(), impl: "ggload", mode: "none", target: "none"}
	a.rf.add(s)
	a.rf.addRPC(s)
	s.add(&option{names: []string{"--impl"}, value: "{ggload," + implSequential + ",llama}", set: func(v string) error {
		if !contains([]string{"ggload", implSequential, "llama"}, v) {
			return fmt.Errorf("want ggload, %s or llama", implSequential)
		}
		a.impl = v
		return nil
	}})
	s.add(&option{names: []string{"--mode"}, value: "MODE", set: func(v string) error {
		if _, err := place.ParseLoadMode(v); err != nil {
			return withHint(err, v, place.LoadModeNames())
		}
		a.mode = v
		return nil
	}})
	s.add(&option{names: []string{"--target"}, value: "TARGET", set: func(v string) error {
		for _, d := range strings.Split(v, "+") {
			if d == "" || (d == "none" && v != "none") {
				return fmt.Errorf("want none, a device, or devices joined by +")
			}
		}
		a.target = v
		return nil
	}})
	s.add(&option{names: []string{"-ngl"}, value: "N", set: func(v string) error {
		n, err := place.ParseLayers(v)
		a.ngl = n
		return err
	}})
	s.add(&option{names: []string{"-ts"}, value: "N0,N1,...", set: func(v string) error {
		ts, err := place.ParseTensorSplit(v)
		a.ts = ts
		return err
	}})
	s.add(&option{names: []string{"-sm"}, value: "MODE", set: func(v string) error {
		m, err := place.ParseSplitMode(v)
		a.sm = m
		return err
	}})
	s.add(&option{names: []string{"--idle"}, on: func(on bool) error { a.idle = on; return nil }})
	s.add(&option{names: []string{"--all-backends"}, on: func(on bool) error { a.all = on; return nil }})
	s.add(&option{names: []string{"--no-extra-bufts"}, on: func(on bool) error { a.noExtra = on; return nil }})
	s.add(&option{names: []string{"--readers"}, value: "N", set: func(v string) error {
		n, err := intIn(v, 0, maxReaders)
		a.readers = int(n)
		return err
	}})
	pos, err := s.parse(args)
	if err != nil {
		return helpOr(s, stdout, err)
	}
	if len(pos) != 1 {
		return s.errorf("one MODEL expected, got %d arguments; usage: %s", len(pos), s.usage[0])
	}
	a.path = pos[0]
	res, err := benchOnce(ctx, a)
	if err != nil {
		res.Err = err.Error()
	}
	res.PeakRSS = peakRSS()
	return json.NewEncoder(stdout).Encode(res)
}

func benchOnce(ctx context.Context, a childArgs) (childResult, error) {
	var res childResult
	var backends []string
	if a.impl != "llama" && targetCPUOrRPC(a.target) && !a.all {
		// as the CLI does with -dev none or RPC servers alone
		// (llama.cpp's process, and the baseline of the other targets,
		// load every module)
		backends = a.rf.cpuBackends()
	}
	rt, err := a.rf.openWith(ctx, backends)
	if err != nil {
		return res, err
	}
	for _, b := range rt.Backends() {
		res.Backends = append(res.Backends, b.Name())
	}
	mode, err := place.ParseLoadMode(a.mode)
	if err != nil {
		return res, err
	}
	params := place.Params{}
	params.LoadMode = mode
	params.Devices = strings.Split(a.target, "+")
	params.NGPULayers = a.ngl
	params.TensorSplit = a.ts
	params.SplitMode = a.sm
	params.NoExtraBufts = a.noExtra
	// the weights alone, as llama.cpp's child loads them (no context is
	// made, and what a load keeps is the weights' buffers)
	params.Context.Skip = true
	m, err := gguf.OpenModel(a.path)
	if err != nil {
		return res, err
	}
	defer m.Close()
	if a.impl != "llama" {
		// ggload's plan and load make one connection to each RPC server
		// (llama.cpp's load, in this process too, connects as it does)
		defer place.KeepConnected(rt, params)()
	}
	p, err := place.New(rt, m, params)
	if err != nil {
		return res, err
	}
	res.HostResident = hostResident(p)
	if a.impl == "llama" {
		lib, err := llama.Open(rt)
		if err != nil {
			return res, err
		}
		if a.idle {
			return res, nil
		}
		ld, err := llama.LoadFor(rt, a.path, params)
		if err != nil {
			return res, err
		}
		stop := res.timeLoad()
		lm, _, err := lib.LoadModel(ld)
		stop()
		if err != nil {
			return res, err
		}
		lm.Free()
		return res, nil
	}
	if a.idle {
		return res, nil
	}
	stop := res.timeLoad()
	lm, err := loader.Load(ctx, p, loader.Options{Readers: a.readers, Sequential: a.impl == implSequential})
	stop()
	if err != nil {
		return res, err
	}
	for _, d := range lm.Stats.Devices {
		res.Devices = append(res.Devices, childDevice{Device: d.Device, Bytes: d.Bytes, S: d.Time.Seconds(), Staging: d.Staging, Bounce: d.Bounce, RPC: sendsRPC(p, d.Device)})
		res.Staging += d.Staging + d.Bounce
	}
	res.Staging += lm.Stats.Direct // direct reads' bounce buffers, by design too
	res.DirectCopied = lm.Stats.DirectCopied
	res.RPCCached = lm.Stats.RPCCached
	return res, lm.Close()
}

// timeLoad starts timing the load call; the function it returns ends it,
// setting LoadS and KernelS.
func (res *childResult) timeLoad() func() {
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
