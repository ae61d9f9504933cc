package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"math"
	"os"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/ggload/ggload/ggml"
)

// usageError is a command line the bench cannot take: exit status 2.
type usageError struct{ msg string }

func (e *usageError) Error() string { return e.msg }

// options are one command's options: Go's flag package, each option
// under all its names (-ngl, --gpu-layers), and the positional arguments
// anywhere among them.
type options struct {
	fs    *flag.FlagSet
	usage string // the usage line
	about string
	help  []optionHelp
}

type optionHelp struct{ names, value, text string }

func newOptions(name, usage, about string) *options {
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	return &options{fs: fs, usage: usage, about: about}
}

// value registers an option that takes a value, which set checks and
// keeps.
func (o *options) value(names []string, value, help string, set func(string) error) {
	for _, n := range names {
		o.fs.Func(strings.TrimLeft(n, "-"), help, set)
	}
	o.help = append(o.help, optionHelp{strings.Join(names, ", "), value, help})
}

// on registers a switch.
func (o *options) on(names []string, help string, set func(bool)) {
	for _, n := range names {
		o.fs.BoolFunc(strings.TrimLeft(n, "-"), help, func(v string) error {
			b, err := strconv.ParseBool(v)
			set(b)
			return err
		})
	}
	o.help = append(o.help, optionHelp{strings.Join(names, ", "), "", help})
}

// errHelp is what parse returns after printing the help.
var errHelp = errors.New("help printed")

// parse reads args and returns the positional arguments; -h and --help
// print the help on stdout.
func (o *options) parse(args []string, stdout io.Writer) ([]string, error) {
	var pos []string
	for {
		err := o.fs.Parse(args)
		if errors.Is(err, flag.ErrHelp) {
			o.printHelp(stdout)
			return nil, errHelp
		}
		if err != nil {
			return nil, &usageError{fmt.Sprintf("%s: %v", o.fs.Name(), err)}
		}
		args = o.fs.Args()
		if len(args) == 0 {
			return pos, nil
		}
		pos, args = append(pos, args[0]), args[1:]
	}
}

// parseModel reads args, whose one positional argument is MODEL.
func (o *options) parseModel(args []string, stdout io.Writer) (string, error) {
	pos, err := o.parse(args, stdout)
	if err != nil {
		return "", err
	}
	if len(pos) != 1 {
		return "", o.errorf("one MODEL expected, got %d arguments; usage: %s", len(pos), o.usage)
	}
	return pos[0], nil
}

// errorf is a usage error of the command.
func (o *options) errorf(format string, args ...any) error {
	return &usageError{o.fs.Name() + ": " + fmt.Sprintf(format, args...)}
}

func (o *options) printHelp(w io.Writer) {
	fmt.Fprintf(w, "usage: %s\n\n%s\n\noptions:\n", o.usage, o.about)
	for _, h := range o.help {
		fmt.Fprintf(w, "  %s %s\n      %s\n", h.names, h.value, h.text)
	}
}

// runtimeOptions open the runtime: the native set and the RPC servers.
type runtimeOptions struct {
	libDir, variant, rpc string
	rpcDirect            bool
	rpcIO                time.Duration
}

func defaultRuntimeOptions() runtimeOptions { return runtimeOptions{rpcIO: time.Minute} }

func (r *runtimeOptions) add(o *options) {
	o.value([]string{"--lib-dir"}, "DIR", "the native ggml libraries (default: as ggload finds them)", func(v string) error {
		if st, err := os.Stat(v); err != nil || !st.IsDir() {
			return fmt.Errorf("not a directory")
		}
		r.libDir = v
		return nil
	})
	o.value([]string{"--variant"}, "{vulkan,cuda,src,none}", "the native set's variant (default: GGLOAD_VARIANT, then automatic)", func(v string) error {
		switch v {
		case "", "vulkan", "cuda", "src", "none":
			r.variant = v
			return nil
		}
		return fmt.Errorf("want vulkan, cuda, src or none")
	})
	o.value([]string{"--rpc"}, "SERVERS", "comma-separated RPC servers (host:port) to use as devices", func(v string) error {
		eps, err := ggml.ParseRPCServers(v)
		r.rpc = strings.Join(eps, ",")
		return err
	})
	o.on([]string{"--rpc-direct"}, "connect ggml's RPC client straight to the servers, without ggload's guard", func(on bool) { r.rpcDirect = on })
	o.value([]string{"--rpc-timeout"}, "DURATION", "declare an RPC server failed when it stays silent this long in use, 100ms to 24h (default: 1m)", func(v string) error {
		d, err := time.ParseDuration(v)
		if err != nil || d < 100*time.Millisecond || d > 24*time.Hour {
			return fmt.Errorf("want a duration from 100ms to 24h")
		}
		r.rpcIO = d
		return nil
	})
}

// args are the options again, for a child process.
func (r *runtimeOptions) args() []string {
	out := []string{"--rpc-timeout", r.rpcIO.String()}
	for _, kv := range [][2]string{{"--lib-dir", r.libDir}, {"--variant", r.variant}, {"--rpc", r.rpc}} {
		if kv[1] != "" {
			out = append(out, kv[0], kv[1])
		}
	}
	if r.rpcDirect {
		out = append(out, "--rpc-direct")
	}
	return out
}

// ownProcess is set where this process runs one command and ends (main,
// and the bench's children): a child then loads only the backend modules
// it needs. A caller of run within a longer process (the tests) loads
// every module, which later calls may need.
var ownProcess bool

// open opens the runtime with the backend modules given (nil: every one)
// in a process of its own, with every one otherwise.
func (r *runtimeOptions) open(ctx context.Context, backends []string) (*ggml.Runtime, error) {
	if !ownProcess {
		backends = nil
	}
	return ggml.Open(ctx, ggml.Options{Logger: slog.Default(), LibDir: r.libDir, Variant: r.variant, Backends: backends,
		RPC: splitList(r.rpc), RPCTimeout: 5 * time.Second, RPCIOTimeout: r.rpcIO, RPCDirect: r.rpcDirect})
}

// splitList splits a comma list, dropping blanks and empty items.
func splitList(s string) []string {
	items := strings.Split(s, ",")
	for i := range items {
		items[i] = strings.TrimSpace(items[i])
	}
	return slices.DeleteFunc(items, func(x string) bool { return x == "" })
}

// intIn reads an integer in [lo, hi].
func intIn(v string, lo, hi int) (int, error) {
	n, err := strconv.Atoi(strings.TrimSpace(v))
	if err != nil || n < lo || n > hi {
		return 0, fmt.Errorf("want an integer from %d to %d", lo, hi)
	}
	return n, nil
}

// byteUnits are the units a size may end with.
var byteUnits = map[string]float64{"": 1, "K": 1 << 10, "KIB": 1 << 10, "M": 1 << 20, "MIB": 1 << 20, "MB": 1e6,
	"G": 1 << 30, "GIB": 1 << 30, "GB": 1e9, "T": 1 << 40, "TIB": 1 << 40}

// sizeIn reads a size (1GiB, 512MiB, 4G, plain bytes) in [lo, hi].
func sizeIn(v string, lo, hi int64) (int64, error) {
	u := strings.ToUpper(strings.TrimSpace(v))
	digits := strings.TrimRightFunc(u, func(r rune) bool { return r >= 'A' && r <= 'Z' })
	f, err := strconv.ParseFloat(digits, 64)
	mult, ok := byteUnits[strings.TrimSpace(u[len(digits):])]
	n := f * mult
	if err != nil || !ok || n < float64(lo) || n > float64(hi) || math.IsNaN(n) {
		return 0, fmt.Errorf("want a size from %s to %s, such as 1GiB or 512MiB", sizeString(lo), sizeString(hi))
	}
	return int64(n), nil
}

// sizeString prints a size in the largest binary unit that divides it.
func sizeString(n int64) string {
	for _, u := range []string{"TiB", "GiB", "MiB", "KiB"} {
		m := int64(byteUnits[strings.ToUpper(u)])
		if n >= m && n%m == 0 {
			return fmt.Sprintf("%d%s", n/m, u)
		}
	}
	return fmt.Sprint(n)
}
