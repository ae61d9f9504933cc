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

// decodeChildCmd is the hidden command bench --decode --processes runs
// in a child process for each side's measurement: a prompt and a
// generation, by ggload or by libllama, then exit.
const decodeChildCmd = "__decode-child"

// decodeCommand is the process of c: this executable with the hidden
// command and bf's runtime options.
func (bf *benchFlags) decodeCommand(ctx context.Context, c bench.DecodeChild) (*exec.Cmd, error) {
	exe, err := os.Executable()
	if err != nil {
		return nil, err
	}
	r := &bf.runtimeFlags
	args := []string{decodeChildCmd, "--impl", c.Impl, "--target", c.Target, "--pp", strconv.Itoa(c.PP), "--tg", strconv.Itoa(c.TG),
		"--threads", strconv.Itoa(c.Threads), "--rpc-timeout", r.rpcIO.String()}
	for _, kv := range [][2]string{{"--lib-dir", r.libDir}, {"--variant", r.variant}, {"--rpc", r.rpc}, {"-ngl", c.Layers.String()}} {
		if kv[1] != "" {
			args = append(args, kv[0], kv[1])
		}
	}
	return exec.CommandContext(ctx, exe, append(args, c.Model)...), nil
}

// runDecodeChild is one side's measured process (ggload bench runs it;
// it is no command of its own).
func runDecodeChild(ctx context.Context, args []string, stdout io.Writer) error {
	s := newOptionSet(decodeChildCmd, "One side of ggload bench --decode --processes, in a process of its own (internal).",
		"ggload "+decodeChildCmd+" --impl {ggload,llama} --target TARGET [options] MODEL")
	rf := defaultRuntimeFlags()
	c := bench.DecodeChild{Impl: bench.ImplGgload, Target: "none", PP: 512, TG: 128, Threads: 4}
	rf.add(s)
	rf.addRPC(s)
	s.add(&option{names: []string{"--impl"}, value: "{ggload,llama}", set: func(v string) error {
		if v != bench.ImplGgload && v != bench.ImplLlama {
			return s.errorf("--impl: want ggload or llama")
		}
		c.Impl = v
		return nil
	}})
	s.add(&option{names: []string{"--target"}, value: "TARGET", set: func(v string) error { c.Target = v; return nil }})
	for _, n := range []struct {
		name string
		dst  *int
	}{{"--pp", &c.PP}, {"--tg", &c.TG}, {"--threads", &c.Threads}} {
		s.add(&option{names: []string{n.name}, value: "N", set: func(v string) error {
			x, err := intIn(v, 1, 4096)
			*n.dst = int(x)
			return err
		}})
	}
	s.add(&option{names: []string{"-ngl"}, value: "N", set: func(v string) error {
		n, err := place.ParseLayers(v)
		c.Layers = n
		return err
	}})
	pos, err := s.parse(args)
	if err != nil {
		return helpOr(s, stdout, err)
	}
	if len(pos) != 1 {
		return s.errorf("one MODEL expected, got %d arguments; usage: %s", len(pos), s.usage[0])
	}
	c.Model = pos[0]
	rt, err := rf.openWith(ctx, nil)
	if err != nil {
		return err
	}
	defer rt.Close()
	return bench.RunDecodeChild(ctx, rt, c, stdout)
}
