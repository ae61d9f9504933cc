// Command ggload-bench times ggload against llama.cpp of the same pin:
// each load mode onto each target, every load in a fresh process, every
// figure a median with its range beside this machine's floor for the
// case; with --decode, the forward pass as llama-bench times it.
//
//	ggload-bench [MODEL] [options]
//
// It is a developer's tool, not part of ggload: it drives libllama in
// process through lab/llama, the tests' oracle, and writes its generated
// models with lab/synth. ggload-bench --help lists its options.
package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"syscall"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	ownProcess = true
	err := run(ctx, os.Args[1:], os.Stdout, os.Stderr)
	stop()
	os.Exit(exitCode(err, os.Stderr))
}

// exitCode prints err and returns the exit status: 2 for a command line
// the bench cannot take, 1 for other errors.
func exitCode(err error, stderr io.Writer) int {
	if err == nil || errors.Is(err, errHelp) {
		return 0
	}
	fmt.Fprintln(stderr, "ggload-bench:", err)
	var ue *usageError
	if errors.As(err, &ue) {
		return 2
	}
	return 1
}

// run runs the bench, or one of its measured processes.
func run(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	level := slog.LevelWarn
	if os.Getenv("GGLOAD_DEBUG") != "" {
		level = slog.LevelDebug
	}
	slog.SetDefault(slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: level})))
	if len(args) > 0 {
		switch args[0] {
		case loadChildCmd:
			return runLoadChild(ctx, args[1:], stdout)
		case decodeChildCmd:
			return runDecodeChild(ctx, args[1:], stdout)
		}
	}
	return runBench(ctx, args, stdout)
}
