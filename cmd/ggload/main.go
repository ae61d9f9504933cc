// Command ggload puts the weights of a GGUF model on ggml devices the way
// llama.cpp does, and explains where everything went.
//
//	ggload                      run the embedded demo
//	ggload devices [--json]     backends, devices and their buffer types
//	ggload inspect FILE         what a GGUF file holds
//	ggload plan MODEL [flags]   where every tensor would go, without loading
//	ggload load MODEL [flags]   load it and report
//	ggload bench MODEL          time the load modes against llama.cpp
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"strings"
)

type command struct {
	name  string
	usage string
	run   func(ctx context.Context, args []string, stdout io.Writer) error
}

var commands []command

func register(c command) { commands = append(commands, c) }

// errUsage marks errors whose message is a usage line.
var errUsage = errors.New("usage")

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	if err := run(ctx, os.Args[1:], os.Stdout, os.Stderr); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			os.Exit(0)
		}
		fmt.Fprintln(os.Stderr, "ggload:", err)
		os.Exit(1)
	}
}

func run(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	level := slog.LevelWarn
	if os.Getenv("GGLOAD_DEBUG") != "" {
		level = slog.LevelDebug
	}
	slog.SetDefault(slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: level})))
	if len(args) == 0 {
		return runDemo(ctx, stdout)
	}
	name := args[0]
	if name == benchChildCmd {
		return runBenchChild(ctx, args[1:], stdout)
	}
	for _, c := range commands {
		if c.name == name {
			return c.run(ctx, args[1:], stdout)
		}
	}
	if name == "help" || name == "-h" || name == "--help" {
		printUsage(stdout)
		return nil
	}
	printUsage(stderr)
	return fmt.Errorf("unknown command %q", name)
}

func printUsage(w io.Writer) {
	fmt.Fprintln(w, "usage: ggload [command] [flags]")
	fmt.Fprintln(w, "\nwith no command, ggload runs its demo: a small generated model planned and loaded on every device.")
	fmt.Fprintln(w, "\ncommands:")
	for _, c := range commands {
		fmt.Fprintf(w, "  %-8s %s\n", c.name, c.usage)
	}
	fmt.Fprintln(w, "\nenvironment: GGLOAD_LIB_DIR (native libraries), GGLOAD_VARIANT (vulkan, cuda, src, none), GGLOAD_DEBUG (ggml's log)")
}

// newFlags makes a flag set that reports errors instead of exiting.
func newFlags(name string) *flag.FlagSet {
	fs := flag.NewFlagSet("ggload "+name, flag.ContinueOnError)
	fs.SetOutput(os.Stderr)
	return fs
}

// splitList splits a comma list, dropping empty items.
func splitList(s string) []string {
	var out []string
	for _, p := range strings.Split(s, ",") {
		if p = strings.TrimSpace(p); p != "" {
			out = append(out, p)
		}
	}
	return out
}

// parseArgs parses flags that may come before or after the positional
// arguments, as llama.cpp's tools allow, and returns the positionals.
func parseArgs(fs *flag.FlagSet, args []string) ([]string, error) {
	var pos []string
	for {
		if err := fs.Parse(args); err != nil {
			return nil, err
		}
		args = fs.Args()
		if len(args) == 0 {
			return pos, nil
		}
		pos = append(pos, args[0])
		args = args[1:]
	}
}
