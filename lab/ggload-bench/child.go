package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"slices"
	"strconv"
	"strings"

	"github.com/ggload/ggload/ggml"
	"github.com/ggload/ggload/lab/bench"
	"github.com/ggload/ggload/place"
)

// The measured processes of the bench: for each measurement the bench
// runs this executable again with the hidden command below, whose options
// say the bench.Load to make; it makes it (bench.RunLoad), prints one
// JSON bench.LoadResult on stdout and exits. An error of the load is in
// the JSON, an error of the command line is the exit status 2 and a line
// on stderr.

// loadChildCmd is the hidden command a bench runs in a child process for
// each measurement: one load, by ggload or by llama.cpp, then exit.
const loadChildCmd = "__bench-child"

// benchImpls are the loaders a measured process takes.
var benchImpls = []string{bench.ImplGgload, bench.ImplSequential, bench.ImplLlama}

// benchCommand is the process of p: this executable with the hidden
// command, p's load and bf's runtime options. A target over several
// devices is given both split options (-ts empty: the shares by free
// memory), one device neither.
func (bf *benchFlags) benchCommand(ctx context.Context, p bench.Process) (*exec.Cmd, error) {
	exe, err := os.Executable()
	if err != nil {
		return nil, err
	}
	l := p.Load
	args := append([]string{loadChildCmd, "--impl", l.Impl, "--mode", l.Case.Mode, "--target", l.Case.Target, "--readers", strconv.Itoa(l.Readers)}, bf.runtimeOptions.args()...)
	args = append(args, "-ngl", l.Placement.Layers.String())
	if l.Case.Multi() {
		var ts []string
		for _, x := range l.Placement.TensorSplit {
			ts = append(ts, strconv.FormatFloat(float64(x), 'g', -1, 32))
		}
		args = append(args, "-ts", strings.Join(ts, ","), "-sm", l.Placement.SplitMode.String())
	}
	for _, f := range []struct {
		on   bool
		name string
	}{{l.Idle, "--idle"}, {l.Placement.NoExtraBufts, "--no-extra-bufts"}, {l.Placement.Fit, "--fit"}, {p.EveryModule, "--all-backends"}} {
		if f.on {
			args = append(args, f.name)
		}
	}
	return exec.CommandContext(ctx, exe, append(args, l.Model)...), nil
}

// hostTarget reports whether a target (devices joined by +) puts weights
// on the CPU and RPC servers alone: none, or RPC devices.
func hostTarget(target string) bool {
	devs := strings.Split(target, "+")
	return target == "none" || !slices.ContainsFunc(devs, func(d string) bool { return !strings.HasPrefix(d, "RPC") })
}

// benchCPUModules reports whether the bench's process p registers the
// CPU's and RPC's backend modules alone: ggload's onto the CPU or RPC
// servers, as ggload's CLI does with -dev none or RPC servers alone
// (llama.cpp's process, and the baseline of the other targets, register
// every module).
func benchCPUModules(p bench.Process) bool {
	return p.Impl != bench.ImplLlama && hostTarget(p.Case.Target) && !p.EveryModule
}

// runLoadChild is one measured process (the bench runs it; it is no
// command of its own).
func runLoadChild(ctx context.Context, args []string, stdout io.Writer) error {
	s := newOptions(loadChildCmd, "ggload-bench "+loadChildCmd+" --impl {"+strings.Join(benchImpls, ",")+"} --mode MODE --target TARGET [options] MODEL",
		"One measured load of the bench, in a process of its own (internal).")
	rf := defaultRuntimeOptions()
	p := bench.Process{Load: bench.Load{Impl: bench.ImplGgload, Case: bench.Case{Mode: "none", Target: "none"}}}
	rf.add(s)
	addBenchLoad(s, &p)
	model, err := s.parseModel(args, stdout)
	if err != nil {
		return err
	}
	p.Model = model
	var backends []string
	if benchCPUModules(p) {
		// as ggload's CLI does with -dev none or RPC servers alone
		backends = ggml.HostBackends(rf.libDir, rf.variant)
	}
	open := func(ctx context.Context) (*ggml.Runtime, error) { return rf.open(ctx, backends) }
	return bench.RunLoad(ctx, p.Load, open, stdout)
}

// addBenchLoad registers the measured process's options, which fill p.
func addBenchLoad(s *options, p *bench.Process) {
	s.value([]string{"--impl"}, "{"+strings.Join(benchImpls, ",")+"}", "the loader", func(v string) error {
		if !slices.Contains(benchImpls, v) {
			return fmt.Errorf("want ggload, %s or llama", bench.ImplSequential)
		}
		p.Impl = v
		return nil
	})
	s.value([]string{"--mode"}, "MODE", "the load mode", func(v string) error {
		_, err := place.ParseLoadMode(v)
		p.Case.Mode = v
		return err
	})
	s.value([]string{"--target"}, "TARGET", "the target", func(v string) error {
		p.Case.Target = v
		return checkTarget(v)
	})
	s.value([]string{"-ngl"}, "N", "layers offloaded", func(v string) (err error) {
		p.Placement.Layers, err = place.ParseLayers(v)
		return err
	})
	s.value([]string{"-ts"}, "N0,N1,...", "the shares of the devices", func(v string) (err error) {
		p.Placement.TensorSplit, err = place.ParseTensorSplit(v)
		return err
	})
	s.value([]string{"-sm"}, "MODE", "the split mode", func(v string) (err error) {
		p.Placement.SplitMode, err = place.ParseSplitMode(v)
		return err
	})
	s.on([]string{"--idle"}, "everything but the load", func(on bool) { p.Idle = on })
	s.on([]string{"--all-backends"}, "register every backend module", func(on bool) { p.EveryModule = on })
	s.on([]string{"--no-extra-bufts"}, "no CPU_REPACK", func(on bool) { p.Placement.NoExtraBufts = on })
	s.on([]string{"--fit"}, "fit first", func(on bool) { p.Placement.Fit = on })
	s.value([]string{"--readers"}, "N", "ggload's readers", func(v string) (err error) {
		p.Readers, err = intIn(v, 0, maxReaders)
		return err
	})
}
