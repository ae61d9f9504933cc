package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strconv"
	"strings"

	"github.com/ggload/ggload/ggml"
	"github.com/ggload/ggload/lab/bench"
	"github.com/ggload/ggload/place"
)

// The measured processes of ggload bench: for each measurement the bench
// runs this executable again with the hidden command below, whose options
// say the bench.Load to make; it makes it (bench.RunLoad), prints one
// JSON bench.LoadResult on stdout and exits. An error of the load is in
// the JSON, an error of the command line is the exit status 2 and a line
// on stderr.

// benchChildCmd is the hidden command a bench runs in a child process for
// each measurement: one load, by ggload or by llama.cpp, then exit.
const benchChildCmd = "__bench-child"

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
	l, r := p.Load, &bf.runtimeFlags
	args := []string{benchChildCmd, "--impl", l.Impl, "--mode", l.Case.Mode, "--target", l.Case.Target, "--rpc-timeout", r.rpcIO.String(), "--readers", strconv.Itoa(l.Readers)}
	for _, kv := range [][2]string{{"--lib-dir", r.libDir}, {"--variant", r.variant}, {"--rpc", r.rpc}, {"-ngl", l.Placement.Layers.String()}} {
		if kv[1] != "" {
			args = append(args, kv[0], kv[1])
		}
	}
	if l.Case.Multi() {
		var ts []string
		for _, x := range l.Placement.TensorSplit {
			ts = append(ts, strconv.FormatFloat(float64(x), 'g', -1, 32))
		}
		args = append(args, "-ts", strings.Join(ts, ","), "-sm", l.Placement.SplitMode.String())
	}
	if r.rpcDirect {
		args = append(args, "--rpc-direct")
	}
	if l.Idle {
		args = append(args, "--idle")
	}
	if l.Placement.NoExtraBufts {
		args = append(args, "--no-extra-bufts")
	}
	if l.Placement.Fit {
		args = append(args, "--fit")
	}
	if p.EveryModule {
		args = append(args, "--all-backends")
	}
	return exec.CommandContext(ctx, exe, append(args, l.Model)...), nil
}

// benchCPUModules reports whether the bench's process p registers the
// CPU's and RPC's backend modules alone: ggload's onto the CPU or RPC
// servers, as the CLI does with -dev none or RPC servers alone
// (llama.cpp's process, and the baseline of the other targets, register
// every module).
func benchCPUModules(p bench.Process) bool {
	return p.Impl != bench.ImplLlama && targetCPUOrRPC(p.Case.Target) && !p.EveryModule
}

// runBenchChild is one measured process (ggload bench runs it; it is no
// command of its own).
func runBenchChild(ctx context.Context, args []string, stdout io.Writer) error {
	s := newOptionSet(benchChildCmd, "One measured load of ggload bench, in a process of its own (internal).",
		"ggload "+benchChildCmd+" --impl {"+strings.Join(benchImpls, ",")+"} --mode MODE --target TARGET [options] MODEL")
	rf := defaultRuntimeFlags()
	p := bench.Process{Load: bench.Load{Impl: bench.ImplGgload, Case: bench.Case{Mode: "none", Target: "none"}}}
	rf.add(s)
	rf.addRPC(s)
	addBenchLoad(s, &p)
	pos, err := s.parse(args)
	if err != nil {
		return helpOr(s, stdout, err)
	}
	if len(pos) != 1 {
		return s.errorf("one MODEL expected, got %d arguments; usage: %s", len(pos), s.usage[0])
	}
	p.Model = pos[0]
	var backends []string
	if benchCPUModules(p) {
		// as the CLI does with -dev none or RPC servers alone
		backends = rf.cpuBackends()
	}
	open := func(ctx context.Context) (*ggml.Runtime, error) { return rf.openWith(ctx, backends) }
	return bench.RunLoad(ctx, p.Load, open, stdout)
}

// addBenchLoad registers the measured process's options, which fill p.
func addBenchLoad(s *optionSet, p *bench.Process) {
	s.add(&option{names: []string{"--impl"}, value: "{" + strings.Join(benchImpls, ",") + "}", set: func(v string) error {
		if !contains(benchImpls, v) {
			return fmt.Errorf("want ggload, %s or llama", bench.ImplSequential)
		}
		p.Impl = v
		return nil
	}})
	s.add(&option{names: []string{"--mode"}, value: "MODE", set: func(v string) error {
		if _, err := place.ParseLoadMode(v); err != nil {
			return withHint(err, v, place.LoadModeNames())
		}
		p.Case.Mode = v
		return nil
	}})
	s.add(&option{names: []string{"--target"}, value: "TARGET", set: func(v string) error {
		for _, d := range strings.Split(v, "+") {
			if d == "" || (d == "none" && v != "none") {
				return fmt.Errorf("want none, a device, or devices joined by +")
			}
		}
		p.Case.Target = v
		return nil
	}})
	s.add(&option{names: []string{"-ngl"}, value: "N", set: func(v string) error {
		n, err := place.ParseLayers(v)
		p.Placement.Layers = n
		return err
	}})
	s.add(&option{names: []string{"-ts"}, value: "N0,N1,...", set: func(v string) error {
		ts, err := place.ParseTensorSplit(v)
		p.Placement.TensorSplit = ts
		return err
	}})
	s.add(&option{names: []string{"-sm"}, value: "MODE", set: func(v string) error {
		m, err := place.ParseSplitMode(v)
		p.Placement.SplitMode = m
		return err
	}})
	s.add(&option{names: []string{"--idle"}, on: func(on bool) error { p.Idle = on; return nil }})
	s.add(&option{names: []string{"--all-backends"}, on: func(on bool) error { p.EveryModule = on; return nil }})
	s.add(&option{names: []string{"--no-extra-bufts"}, on: func(on bool) error { p.Placement.NoExtraBufts = on; return nil }})
	s.add(&option{names: []string{"--fit"}, on: func(on bool) error { p.Placement.Fit = on; return nil }})
	s.add(&option{names: []string{"--readers"}, value: "N", set: func(v string) error {
		n, err := intIn(v, 0, maxReaders)
		p.Readers = int(n)
		return err
	}})
}
