// Command ggload puts the weights of a GGUF model on ggml devices the way
// llama.cpp does, and explains where everything went.
//
//	ggload                        run the embedded demo
//	ggload devices [options]      backends, devices and their buffer types
//	ggload inspect FILE           what a GGUF file holds
//	ggload plan MODEL [options]   where every tensor would go, without loading
//	ggload load MODEL [options]   load it and report
//
// plan and load take llama.cpp's model loading options as its common/arg.cpp
// spells them (-ngl, -sm, -ts, -mg, -ot, -dev, -lm, -lzm, -fit, ...).
package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"sort"
	"strings"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/ggload/ggload/bindings"
)

type command struct {
	name  string
	args  string // what follows the name in the usage line
	about string
	run   func(ctx context.Context, args []string, stdout io.Writer) error
}

var commands []command

func register(c command) {
	commands = append(commands, c)
	sort.SliceStable(commands, func(i, j int) bool { return order(commands[i].name) < order(commands[j].name) })
}

func order(name string) int {
	for i, n := range []string{"devices", "inspect", "plan", "load", "fetch"} {
		if n == name {
			return i
		}
	}
	return 99
}

func main() {
	ctx, sig := interruptible()
	ownProcess = true
	err := run(ctx, os.Args[1:], os.Stdout, os.Stderr)
	err = missingLibraries(ctx, err, os.Args[1:], os.Stdin, safe(os.Stderr), isTerminal(os.Stdin) && isTerminal(os.Stderr))
	os.Exit(exitCode(err, sig.Load(), safe(os.Stderr)))
}

// signalGrace is how long the work under way has, after SIGINT or
// SIGTERM, to stop and free what it made before ggload exits anyway.
const signalGrace = 750 * time.Millisecond

// interruptible cancels the context on the first SIGINT or SIGTERM, and
// records which; a second one ends the process at once. Whatever ggload
// is doing, it exits within a second of the first, with 130 or 143: work
// that does not notice the cancellation in time (a native call waiting on
// a device or a server) is left to the end of the process.
func interruptible() (context.Context, *atomic.Value) {
	ctx, cancel := context.WithCancel(context.Background())
	sig := &atomic.Value{}
	ch := make(chan os.Signal, 1)
	signal.Notify(ch, os.Interrupt, syscall.SIGTERM)
	go func() {
		s := <-ch
		sig.Store(s)
		signal.Stop(ch)
		cancel()
		time.AfterFunc(signalGrace, func() {
			code := exitCode(context.Canceled, s, io.Discard)
			fmt.Fprintf(os.Stderr, "ggload: interrupted: the work under way did not stop within %v; exiting\n", signalGrace)
			os.Exit(code)
		})
	}()
	return ctx, sig
}

// exitCode prints err and returns the exit status: 130 after SIGINT and
// 143 after SIGTERM (everything was freed on the way out), 2 for a
// command line ggload cannot take, 1 for other errors.
func exitCode(err error, sig any, stderr io.Writer) int {
	code := 0
	switch {
	case sig == os.Interrupt:
		code = 130
	case sig == syscall.SIGTERM:
		code = 143
	}
	if err == nil || errors.Is(err, errHelp) || errors.Is(err, errVersion) {
		return code
	}
	var ue *usageError
	switch {
	case code != 0:
		fmt.Fprintln(stderr, "ggload: interrupted:", err)
	case errors.As(err, &ue):
		fmt.Fprintln(stderr, "ggload:", err)
		return 2
	default:
		fmt.Fprintln(stderr, "ggload:", err)
		return 1
	}
	return code
}

func run(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	stdout, stderr = safe(stdout), safe(stderr)
	level := slog.LevelWarn
	if os.Getenv("GGLOAD_DEBUG") != "" {
		level = slog.LevelDebug
	}
	slog.SetDefault(slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: level})))
	if len(args) == 0 {
		return runDemo(ctx, stdout)
	}
	name := args[0]
	switch name {
	case "help", "-h", "--help", "--usage":
		if len(args) > 1 {
			for _, c := range commands {
				if c.name == args[1] {
					return c.run(ctx, []string{"--help"}, stdout)
				}
			}
		}
		printUsage(stdout)
		return nil
	case "version", "--version":
		printVersion(stdout)
		return nil
	case "--list-devices":
		var rf runtimeFlags
		rt, err := rf.open(ctx)
		if err != nil {
			return err
		}
		_, err = io.WriteString(stdout, listDevicesText(rt))
		return err
	}
	for _, c := range commands {
		if c.name == name {
			return c.run(ctx, args[1:], stdout)
		}
	}
	var names []string
	for _, c := range commands {
		names = append(names, c.name)
	}
	msg := fmt.Sprintf("unknown command %q", name)
	if strings.HasPrefix(name, "-") {
		msg = fmt.Sprintf("unknown option %s before a command", name)
	} else if n := nearest(name, names); n != "" {
		msg += fmt.Sprintf("; did you mean %s?", n)
	}
	return &usageError{"", msg}
}

func printUsage(w io.Writer) {
	fmt.Fprintln(w, "usage: ggload [command] [options]")
	fmt.Fprintln(w, "\nwith no command, ggload runs its demo: a small generated model planned and loaded on every device.")
	fmt.Fprintln(w, "\ncommands:")
	for _, c := range commands {
		fmt.Fprintf(w, "  ggload %-8s %-17s %s\n", c.name, c.args, c.about)
	}
	fmt.Fprintln(w, "  ggload --list-devices              the devices llama.cpp can offload to")
	fmt.Fprintln(w, "  ggload --version                   ggload's version and the native pin")
	fmt.Fprintln(w, "\n'ggload COMMAND --help' lists a command's options; plan and load take llama.cpp's model loading options.")
	fmt.Fprintln(w, "\nenvironment: GGLOAD_LIB_DIR (native libraries), GGLOAD_VARIANT (vulkan, cuda, src, none), GGLOAD_DEBUG (ggml's log)")
	fmt.Fprintln(w, "\nthe native libraries are looked for in:")
	for i, where := range bindings.SearchOrder() {
		fmt.Fprintf(w, "  %d. %s\n", i+1, where)
	}
}
