package pool

import (
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/ggload/ggload/place"
)

// option is a setting the pool reads: its spellings (the presets file's
// keys: the option's names without dashes and its environment variable),
// the spellings that turn a switch off, and how it applies.
type option struct {
	keys []string
	neg  []string
	set  func(o *Options, v string) error
}

// routerOptions are the settings the pool reads whatever reads the rest:
// where the model is, its names, and how it stays resident.
var routerOptions = []option{
	{keys: keyModel, set: func(o *Options, v string) error { o.Path = v; return nil }},
	{keys: keyMmproj, set: func(o *Options, v string) error { o.Mmproj = v; return nil }},
	{keys: keyDraft, set: func(o *Options, v string) error { o.Draft = v; return nil }},
	{keys: []string{"alias", "a", "LLAMA_ARG_ALIAS"}, set: func(o *Options, v string) error { o.Aliases = splitList(v); return nil }},
	{keys: []string{"tags", "LLAMA_ARG_TAGS"}, set: func(o *Options, v string) error { o.Tags = splitList(v); return nil }},
	{keys: []string{"load-on-startup", "__PRESET_LOAD_ON_STARTUP"}, set: func(o *Options, v string) error {
		o.LoadOnStartup = isTruthy(v)
		return nil
	}},
	// accepted as the router accepts it: no child process to stop here
	{keys: []string{"stop-timeout", "__PRESET_STOP_TIMEOUT"}, set: func(*Options, string) error { return nil }},
	{keys: []string{"dedup-cache-models", "__PRESET_DEDUP_CACHE_MODELS"}, set: func(*Options, string) error { return nil }},
	// ggload's: the pool's residency (the pin has a "pin" key in its
	// sources, commented out)
	{keys: []string{"pin"}, set: func(o *Options, v string) error {
		b, err := parseBool(v)
		o.Pin = b
		return err
	}},
	{keys: []string{"keep-alive"}, set: func(o *Options, v string) error {
		d, err := parseSeconds(v, true)
		o.KeepAlive = d
		return err
	}},
	{keys: []string{"sleep-idle-seconds"}, set: func(o *Options, v string) error {
		n, err := strconv.Atoi(v)
		if err != nil || n == 0 || n < -1 {
			return fmt.Errorf("invalid value: cannot be 0 or less than -1")
		}
		o.KeepAlive = time.Duration(n) * time.Second
		if n < 0 {
			o.KeepAlive = -1
		}
		return nil
	}},
}

// builtinOptions are the options the pool reads itself when the program
// gives no Configure: those that decide a model's memory.
var builtinOptions = []option{
	{keys: []string{"ctx-size", "c", "LLAMA_ARG_CTX_SIZE"}, set: intSetting(0, math.MaxInt32, func(o *Options, n int) { o.Place.Context.NCtx = n })},
	{keys: []string{"parallel", "np", "LLAMA_ARG_N_PARALLEL"}, set: intSetting(-1, 256, func(o *Options, n int) {
		o.Place.Context.NParallel = max(n, 0) // -1: auto
	})},
	{keys: []string{"n-gpu-layers", "ngl", "gpu-layers", "LLAMA_ARG_N_GPU_LAYERS"}, set: func(o *Options, v string) error {
		l, err := place.ParseLayers(v)
		o.Place.NGPULayers = l
		return err
	}},
	{keys: []string{"batch-size", "b", "LLAMA_ARG_BATCH"}, set: intSetting(1, math.MaxInt32, func(o *Options, n int) { o.Place.Context.NBatch = n })},
	{keys: []string{"ubatch-size", "ub", "LLAMA_ARG_UBATCH"}, set: intSetting(1, math.MaxInt32, func(o *Options, n int) { o.Place.Context.NUBatch = n })},
	{keys: []string{"threads", "t", "LLAMA_ARG_THREADS"}, set: intSetting(-1, 1024, func(o *Options, n int) { o.Serve.Threads = max(n, 0) })},
	{keys: []string{"kv-unified", "kvu", "LLAMA_ARG_KV_UNIFIED"}, neg: []string{"no-kv-unified", "no-kvu"}, set: func(o *Options, v string) error {
		b, err := parseBool(v)
		o.Place.Context.KVUnified = b
		return err
	}},
	{keys: []string{"cache-ram", "cram", "LLAMA_ARG_CACHE_RAM"}, set: intSetting(-1, math.MaxInt32, func(o *Options, n int) {
		o.Serve.CacheRAMMiB, o.Serve.NoCacheRAM = n, n == 0
	})},
	{keys: []string{"fit", "LLAMA_ARG_FIT"}, set: func(o *Options, v string) error {
		switch {
		case isTruthy(v):
			o.NoFit = false
		case isFalsey(v):
			o.NoFit = true
		default:
			return fmt.Errorf("error: unknown value for --fit: '%s'", v)
		}
		return nil
	}},
	{keys: []string{"fit-target", "fitt", "LLAMA_ARG_FIT_TARGET"}, set: func(o *Options, v string) error {
		o.Fit.Targets = nil
		for _, f := range strings.FieldsFunc(v, func(r rune) bool { return r == ',' || r == '/' }) {
			n, err := strconv.ParseUint(strings.TrimSpace(f), 10, 44)
			if err != nil {
				return fmt.Errorf("%q: want MiB", f)
			}
			o.Fit.Targets = append(o.Fit.Targets, n<<20)
		}
		return nil
	}},
	{keys: []string{"fit-ctx", "fitc", "LLAMA_ARG_FIT_CTX"}, set: intSetting(0, math.MaxInt32, func(o *Options, n int) { o.Fit.MinCtx = uint32(n) })},
	{keys: []string{"device", "dev", "LLAMA_ARG_DEVICE"}, set: func(o *Options, v string) error {
		o.Place.DeviceNames = splitList(v)
		return nil
	}},
}

// applySettings reads a model's settings into o: the router's options,
// then the others by Configure, or by the pool's own reader.
func applySettings(name string, settings []Setting, o *Options, configure func(string, []Setting, *Options) error) (err error) {
	var rest []Setting
	for _, s := range settings {
		opt, neg, ok := findOption(routerOptions, s.Key)
		if !ok {
			rest = append(rest, s)
			continue
		}
		if err := applyOption(opt, neg, s, o); err != nil {
			return err
		}
	}
	if configure != nil {
		defer func() {
			if r := recover(); r != nil {
				err = fmt.Errorf("preset '%s': the program's Configure panicked: %v", name, r)
			}
		}()
		return configure(name, rest, o)
	}
	for _, s := range rest {
		opt, neg, ok := findOption(builtinOptions, s.Key)
		if !ok {
			return fmt.Errorf("option '%s' not recognized in preset '%s' (the pool reads %s itself; a program reads the others with Params.Configure)", s.Key, name, builtinNames())
		}
		if err := applyOption(opt, neg, s, o); err != nil {
			return err
		}
	}
	return nil
}

func applyOption(opt *option, neg bool, s Setting, o *Options) error {
	v := s.Value
	if neg {
		// parse_bool_arg: a negated spelling's value is turned over
		b, err := parseBool(v)
		if err != nil {
			return fmt.Errorf("option '%s': %w", s.Key, err)
		}
		v = strconv.FormatBool(!b)
	}
	if err := opt.set(o, v); err != nil {
		return fmt.Errorf("option '%s' = '%s': %w", s.Key, s.Value, err)
	}
	return nil
}

func findOption(opts []option, key string) (*option, bool, bool) {
	for i := range opts {
		if slices.Contains(opts[i].keys, key) {
			return &opts[i], false, true
		}
		if slices.Contains(opts[i].neg, key) {
			return &opts[i], true, true
		}
	}
	return nil, false, false
}

func builtinNames() string {
	var names []string
	for _, o := range builtinOptions {
		names = append(names, o.keys[0])
	}
	return strings.Join(names, ", ")
}

func intSetting(lo, hi int, f func(*Options, int)) func(*Options, string) error {
	return func(o *Options, v string) error {
		n, err := strconv.Atoi(strings.TrimSpace(v))
		if err != nil || n < lo || n > hi {
			return fmt.Errorf("want an integer from %d to %d", lo, hi)
		}
		f(o, n)
		return nil
	}
}

// isTruthy and isFalsey are common_arg_utils' words.
func isTruthy(v string) bool { return v == "on" || v == "enabled" || v == "true" || v == "1" }
func isFalsey(v string) bool { return v == "off" || v == "disabled" || v == "false" || v == "0" }

func parseBool(v string) (bool, error) {
	switch {
	case isTruthy(v):
		return true, nil
	case isFalsey(v):
		return false, nil
	}
	return false, fmt.Errorf("invalid boolean value")
}

// parseSeconds reads seconds (negative: forever, where neg allows it).
func parseSeconds(v string, neg bool) (time.Duration, error) {
	n, err := strconv.ParseFloat(strings.TrimSpace(v), 64)
	if err != nil || math.IsNaN(n) || math.IsInf(n, 0) || n < 0 && !neg || n > 1e9 {
		return 0, fmt.Errorf("want seconds")
	}
	if n < 0 {
		return -1, nil
	}
	return time.Duration(n * float64(time.Second)), nil
}

// splitList is a comma-separated list, its items trimmed, empty ones
// dropped (as the router splits --alias and --tags).
func splitList(v string) []string {
	var out []string
	for _, s := range strings.Split(v, ",") {
		if s = strings.TrimSpace(s); s != "" {
			out = append(out, s)
		}
	}
	return out
}
