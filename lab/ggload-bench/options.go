package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	"github.com/ggload/ggload/ggml"
	"github.com/ggload/ggload/lab/bench"
	"github.com/ggload/ggload/place"
)

// benchFlags are the bench's options: the runtime's, and the bench's
// own, parsed into bench.Options.
type benchFlags struct {
	runtimeOptions
	o    bench.Options
	size string // --size as given, for its messages
}

// Ranges of the bench's numeric options.
const (
	maxRuns      = 100
	maxReaders   = 256
	maxDevices   = 16
	minBenchSize = 1 << 20
	maxBenchSize = 1 << 40
)

// benchOptions registers the bench's options on a new set, in the order
// of the help; parsing fills bf.
func benchOptions(bf *benchFlags) *options {
	s := newOptions("ggload-bench", "ggload-bench [MODEL] [options]",
		"Time each load mode, ggload against llama.cpp of the same pin, each load in a fresh process (MODEL, or a generated model of --size written once into the user cache). Every figure is a median with its range, beside this machine's floor for the case.")
	bf.runtimeOptions.add(s)
	bf.addCases(s)
	bf.addModel(s)
	bf.addLoaders(s)
	bf.addSource(s)
	bf.addDecode(s)
	s.on([]string{"--json"}, "print JSON", func(on bool) { bf.o.JSON = on })
	s.value([]string{"--save"}, "FILE", "also write the JSON report to FILE", func(v string) error { bf.o.Save = v; return nil })
	return s
}

// checkTarget checks a target: none, a device, or devices joined by +.
func checkTarget(t string) error {
	for _, d := range strings.Split(t, "+") {
		if d == "" || (d == "none" && t != "none") {
			return fmt.Errorf("target %q: want none, a device, or devices joined by +", t)
		}
	}
	return nil
}

// addCases registers what is timed: the load modes, the targets, and the
// processes per measurement.
func (bf *benchFlags) addCases(s *options) {
	s.value([]string{"--modes"}, "MODE,...", "load modes to time, comma-separated, as ggload's -lm takes them (default: none,mmap,dio)", func(v string) error {
		modes := splitList(v)
		if len(modes) == 0 {
			return fmt.Errorf("no load modes named")
		}
		for _, m := range modes {
			if _, err := place.ParseLoadMode(m); err != nil {
				return err
			}
		}
		bf.o.Modes = modes
		return nil
	})
	s.value([]string{"--targets"}, "TARGET,...", "where to load, comma-separated: none (the CPU), a device name, or device names joined by + to split the weights over them (RPC0+RPC1); auto: the CPU and every GPU (default: auto)", func(v string) error {
		ts := splitList(v)
		if len(ts) == 0 {
			return fmt.Errorf("no targets named")
		}
		for _, t := range ts {
			if err := checkTarget(t); err != nil {
				return err
			}
		}
		bf.o.Targets = ts
		return nil
	})
	s.value([]string{"--runs"}, "N", fmt.Sprintf("processes per measurement, 1 to %d; the median is reported with the range (default: 3)", maxRuns), func(v string) (err error) {
		bf.o.Runs, err = intIn(v, 1, maxRuns)
		return err
	})
}

// addDecode registers --decode and its measurements.
func (bf *benchFlags) addDecode(s *options) {
	d := func() *bench.DecodeOptions {
		if bf.o.Decode == nil {
			bf.o.Decode = &bench.DecodeOptions{PP: 512, TG: 128, Threads: ggml.MathThreads()}
		}
		return bf.o.Decode
	}
	s.on([]string{"--decode"}, "time the forward pass instead of the loads, as llama-bench does: a prompt of --pp tokens and --tg generated tokens, ggload's context against libllama's in one process, run after run (and say whether their logits are identical)",
		func(on bool) {
			if on {
				d()
			} else {
				bf.o.Decode = nil
			}
		})
	s.on([]string{"--processes"}, "with --decode: each side in processes of its own, run after run (a fresh process each: the model loaded, a context made, a prompt and a generation untimed, then timed), and their peak resident memory compared",
		func(on bool) { d().Processes = on })
	for _, c := range []struct {
		name, help string
		hi         int
		dst        func() *int
	}{
		{"--pp", "prompt tokens of --decode, 1 to 4096 (default: 512)", 4096, func() *int { return &d().PP }},
		{"--tg", "generated tokens of --decode, 1 to 4096 (default: 128)", 4096, func() *int { return &d().TG }},
		{"--threads", fmt.Sprintf("CPU threads of --decode, 1 to 1024 (default: the physical cores, %d here, as llama-bench counts them)", ggml.MathThreads()), 1024, func() *int { return &d().Threads }},
	} {
		s.value([]string{c.name}, "N", c.help, func(v string) (err error) {
			*c.dst(), err = intIn(v, 1, c.hi)
			return err
		})
	}
}

// addModel registers the generated model's options.
func (bf *benchFlags) addModel(s *options) {
	s.value([]string{"--size"}, "SIZE[,SIZE...]", fmt.Sprintf("size of the generated model when no MODEL is given, %s to %s; several (1GiB,4GiB,8GiB): each is timed in turn, then each case's cost per GiB against the first size's (goal: within 10%%) (default: 1GiB)", sizeString(minBenchSize), sizeString(maxBenchSize)),
		func(v string) error {
			sizes := splitList(v)
			if len(sizes) == 0 {
				return fmt.Errorf("no size given")
			}
			var ns []int64
			for _, sz := range sizes {
				n, err := sizeIn(sz, minBenchSize, maxBenchSize)
				if err != nil {
					return fmt.Errorf("%s: %w", sz, err)
				}
				ns = append(ns, n)
			}
			bf.o.Sizes, bf.size = ns, strings.Join(sizes, ",")
			return nil
		})
	s.value([]string{"--type"}, "TYPE", "weight type of the generated model (default: q8_0)", func(v string) error {
		if _, ok := ggml.TypeByName(v); !ok {
			return fmt.Errorf("not a ggml type")
		}
		bf.o.Type = v
		return nil
	})
}

// addLoaders registers the loaders' options: what both are given, whether
// llama.cpp is timed, and ggload's readers.
func (bf *benchFlags) addLoaders(s *options) {
	s.value([]string{"-ngl", "--gpu-layers", "--n-gpu-layers"}, "N", "layers offloaded, for both loaders: a number, auto or all (default: auto)", func(v string) error {
		n, err := place.ParseLayers(v)
		if err != nil {
			return fmt.Errorf("want a number of layers, auto or all")
		}
		bf.o.Layers = n
		return nil
	})
	s.value([]string{"-sm", "--split-mode"}, "{layer,row,tensor}", "how a target split over several devices spreads the weights, for both loaders (default: layer)", func(v string) error {
		m, err := place.ParseSplitMode(v)
		if err != nil || m == place.SplitNone {
			return fmt.Errorf("want layer, row or tensor")
		}
		bf.o.SplitMode = m
		return nil
	})
	s.value([]string{"-ts", "--tensor-split"}, "N0,N1,...", "the share of the model for each device of a target split over several, for both loaders (default: by free memory)", func(v string) error {
		ts, err := place.ParseTensorSplit(v)
		if err == nil && len(ts) >= maxDevices {
			err = fmt.Errorf("%d values: at most %d", len(ts), maxDevices-1)
		}
		bf.o.TensorSplit = ts
		return err
	})
	s.on([]string{"--no-llama"}, "do not time llama.cpp", func(on bool) { bf.o.NoLlama = on })
	s.on([]string{"--fit"}, "both loaders fit first, in the timed load, as their CLIs' default -fit does: the model and a default context measured against the devices' memory (ggload's place.Fit, llama.cpp's common_fit_params), then the weights loaded",
		func(on bool) { bf.o.Fit = on })
	s.on([]string{"-nr", "--no-repack", "--no-extra-bufts"}, "keep the CPU's extra buffer types (CPU_REPACK) out, for both loaders", func(on bool) { bf.o.NoExtraBufts = on })
	s.value([]string{"--readers"}, "N", fmt.Sprintf("ggload's parallel readers, 0 to %d (0: automatic) (default: 0)", maxReaders), func(v string) (err error) {
		bf.o.Readers, err = intIn(v, 0, maxReaders)
		return err
	})
}

// addSource registers how the model's bytes arrive: from a cold page cache,
// or over HTTP.
func (bf *benchFlags) addSource(s *options) {
	s.on([]string{"--cold"}, "time cold loads: the model's pages are written back and evicted from the page cache before every process "+
		"(posix_fadvise DONTNEED, no root needed), the floors are this machine's cold read (one O_DIRECT pass at the best queue depth), "+
		"and the modes are none,mmap,dio,auto unless --modes says otherwise", func(on bool) { bf.o.Cold = on })
	s.value([]string{"--rpc-cache-dir"}, "DIR,...", "the file caches of the RPC servers (ggml-rpc-server -c, under LLAMA_CACHE) to empty before every process: loads onto servers whose cache is cold; without it a cache stays warm after the first load",
		func(v string) error {
			bf.o.RPCCacheDirs = splitList(v)
			for _, d := range bf.o.RPCCacheDirs {
				if st, err := os.Stat(d); err != nil || !st.IsDir() {
					return fmt.Errorf("%s: not a directory", d)
				}
			}
			return nil
		})
	s.on([]string{"--no-back-memory"}, "on a virtual machine whose balloon reports free memory to its host, do not fault in and free, before every process, the memory it will take "+
		"(by default the bench does, so that each process finds fresh pages as fast as this machine makes them, not as slow as after the host took them back: a process that starts after a pause)",
		func(on bool) { bf.o.NoBackMemory = on })
	s.value([]string{"--http"}, "RATE", "instead of the load modes, serve the model on loopback over a link of RATE a second (1GiB, 100MiB/s, ...) and time: "+
		"the plan from the URL against from the file, and a streaming load from the URL onto each target against the link (goal: 90%)",
		func(v string) error {
			n, err := sizeIn(strings.TrimSuffix(v, "/s"), 1<<20, 1<<40)
			bf.o.HTTPRate = float64(n)
			return err
		})
	s.value([]string{"--http-latency"}, "DURATION", "with --http: how long the server waits before each answer, a round trip's worth (e.g. 20ms) (default: 0)", func(v string) error {
		d, err := time.ParseDuration(v)
		if err == nil && (d < 0 || d > 10*time.Second) {
			err = fmt.Errorf("out of range: want 0 to 10s")
		}
		bf.o.HTTPLatency = d
		return err
	})
}

// runBench is the bench itself.
func runBench(ctx context.Context, args []string, stdout io.Writer) error {
	bf := benchFlags{runtimeOptions: defaultRuntimeOptions()}
	s := benchOptions(&bf)
	pos, err := s.parse(args, stdout)
	if err != nil {
		return err
	}
	if len(pos) > 1 {
		return s.errorf("at most one MODEL, got %s", strings.Join(pos, " "))
	}
	if len(pos) == 1 && len(bf.o.Sizes) > 1 {
		return s.errorf("--size %s generates models of several sizes: give no MODEL", bf.size)
	}
	if bf.o.HTTPRate > 0 && len(bf.o.Sizes) > 1 {
		return s.errorf("--http times one model: give one --size")
	}
	rt, err := bf.open(ctx, nil)
	if err != nil {
		return err
	}
	model := ""
	if len(pos) == 1 {
		model = pos[0]
	}
	o := bf.o
	o.Command, o.CPUModules, o.Log = bf.benchCommand, benchCPUModules, os.Stderr
	if o.Decode != nil {
		d := *o.Decode
		d.Command = bf.decodeCommand
		o.Decode = &d
	}
	return bench.Run(ctx, rt, model, o, stdout)
}
