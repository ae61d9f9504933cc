package main

import (
	"context"
	"io"
	"os"
	"os/exec"
	"strconv"

	"github.com/ggload/ggload/lab/bench"
	"github.com/ggload/ggload/place"
)

// decodeChildCmd is the hidden command --decode --processes runs in a
// child process for each side's measurement: a prompt and a generation,
// by ggload or by libllama, then exit.
const decodeChildCmd = "__decode-child"

// decodeCommand is the process of c: this executable with the hidden
// command and bf's runtime options.
func (bf *benchFlags) decodeCommand(ctx context.Context, c bench.DecodeChild) (*exec.Cmd, error) {
	exe, err := os.Executable()
	if err != nil {
		return nil, err
	}
	args := append([]string{decodeChildCmd, "--impl", c.Impl, "--target", c.Target, "--pp", strconv.Itoa(c.PP), "--tg", strconv.Itoa(c.TG),
		"--threads", strconv.Itoa(c.Threads)}, bf.runtimeOptions.args()...)
	args = append(args, "-ngl", c.Layers.String())
	return exec.CommandContext(ctx, exe, append(args, c.Model)...), nil
}

// runDecodeChild is one side's measured process (the bench runs it; it
// is no command of its own).
func runDecodeChild(ctx context.Context, args []string, stdout io.Writer) error {
	s := newOptions(decodeChildCmd, "ggload-bench "+decodeChildCmd+" --impl {ggload,llama} --target TARGET [options] MODEL",
		"One side of --decode --processes, in a process of its own (internal).")
	rf := defaultRuntimeOptions()
	c := bench.DecodeChild{Impl: bench.ImplGgload, Target: "none", PP: 512, TG: 128, Threads: 4}
	rf.add(s)
	s.value([]string{"--impl"}, "{ggload,llama}", "the side", func(v string) error {
		if v != bench.ImplGgload && v != bench.ImplLlama {
			return s.errorf("--impl: want ggload or llama")
		}
		c.Impl = v
		return nil
	})
	s.value([]string{"--target"}, "TARGET", "the target", func(v string) error { c.Target = v; return nil })
	for _, n := range []struct {
		name string
		dst  *int
	}{{"--pp", &c.PP}, {"--tg", &c.TG}, {"--threads", &c.Threads}} {
		s.value([]string{n.name}, "N", "", func(v string) (err error) {
			*n.dst, err = intIn(v, 1, 4096)
			return err
		})
	}
	s.value([]string{"-ngl"}, "N", "layers offloaded", func(v string) (err error) {
		c.Layers, err = place.ParseLayers(v)
		return err
	})
	model, err := s.parseModel(args, stdout)
	if err != nil {
		return err
	}
	c.Model = model
	rt, err := rf.open(ctx, nil)
	if err != nil {
		return err
	}
	defer rt.Close()
	return bench.RunDecodeChild(ctx, rt, c, stdout)
}
