package main

import (
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"sort"
	"strconv"
	"strings"
)

// option is one command-line option as llama.cpp's tools take them: short
// and long spellings, a value or none, a help text that names its values
// and default.
type option struct {
	names []string // the spellings, the primary first ("-ngl", "--gpu-layers", ...)
	neg   []string // spellings that turn a switch off ("-nr", "--no-repack")
	alias []string // ggload's own spellings, accepted too
	value string   // the value's placeholder ("N", "MODE"); empty for a switch
	// optValue: the value may be left out; the next argument is taken as
	// the value only when it is one of optWords.
	optValue bool
	optWords []string
	help     string
	set      func(string) error // options with a value
	on       func(bool) error   // switches
	// set2 takes an option of two values (value "START END"), each its
	// own argument, as llama.cpp's options with a second value hint
	set2 func(a, b string) error
	// env is the environment variable that sets the option, as in
	// llama.cpp (pinEnv).
	env string
	// unsupported says why ggload refuses the option (llama.cpp has it).
	unsupported string
	// inert says why the option, accepted, changes nothing in ggload.
	inert  string
	hidden bool
	// secret: the value is never printed (a token).
	secret bool
}

func (o *option) spellings() []string {
	out := append(append(append([]string{}, o.names...), o.neg...), o.alias...)
	return out
}

// optionSet is a command's options.
type optionSet struct {
	cmd     string   // "plan"
	usage   []string // usage lines (after "usage: ")
	about   string
	groups  []optionGroup
	byName  map[string]*option
	given   map[*option]bool
	notes   []string           // one line each, printed before the command's output
	fromEnv map[*option]envSet // options the environment set (and the command line did not)
	// lookupEnv reads the environment (os.LookupEnv; tests replace it).
	lookupEnv func(string) (string, bool)
	helpReq   bool
	verReq    bool
}

type optionGroup struct {
	title string
	opts  []*option
}

// errHelp and errVersion are returned by parse when the help or the
// version was asked for.
var (
	errHelp    = errors.New("help requested")
	errVersion = errors.New("version requested")
)

// usageError is a command line ggload cannot take.
type usageError struct {
	cmd, msg string
}

func (e *usageError) Error() string {
	if e.cmd == "" {
		return e.msg + " (ggload --help lists the commands)"
	}
	return fmt.Sprintf("%s (ggload %s --help lists its options)", e.msg, e.cmd)
}

func newOptionSet(cmd, about string, usage ...string) *optionSet {
	s := &optionSet{cmd: cmd, about: about, usage: usage, byName: map[string]*option{}, given: map[*option]bool{}, fromEnv: map[*option]envSet{}, lookupEnv: os.LookupEnv}
	s.group("")
	s.add(&option{names: []string{"-h", "--help", "--usage"}, help: "print this help and exit", on: func(bool) error { s.helpReq = true; return nil }})
	s.add(&option{names: []string{"--version"}, help: "print ggload's version and the native pin, and exit", on: func(bool) error { s.verReq = true; return nil }})
	return s
}

// group starts a group of options in the help.
func (s *optionSet) group(title string) {
	s.groups = append(s.groups, optionGroup{title: title})
}

// add registers o in the current group.
func (s *optionSet) add(o *option) *option {
	if o.env == "" {
		o.env = pinEnv[o.names[0]]
	}
	for _, n := range o.spellings() {
		if _, dup := s.byName[n]; dup {
			panic("ggload: option " + n + " registered twice")
		}
		s.byName[n] = o
	}
	g := &s.groups[len(s.groups)-1]
	g.opts = append(g.opts, o)
	return o
}

func (s *optionSet) errorf(format string, args ...any) error {
	return &usageError{s.cmd, fmt.Sprintf(format, args...)}
}

// lookup finds an option by spelling; a long name with one dash or a
// short one with two is accepted as well (Go's flag package took both).
func (s *optionSet) lookup(name string) (*option, bool) {
	if o, ok := s.byName[name]; ok {
		return o, true
	}
	if strings.HasPrefix(name, "--") {
		o, ok := s.byName[name[1:]]
		return o, ok
	}
	o, ok := s.byName["-"+name]
	return o, ok
}

// parse applies the options in args, in order, and returns the other
// arguments. Options may come before, between and after them; "--" ends
// the options.
func (s *optionSet) parse(args []string) ([]string, error) {
	if err := s.applyEnv(); err != nil {
		return nil, err
	}
	var pos []string
	for i := 0; i < len(args); i++ {
		a := args[i]
		if a == "--" {
			pos = append(pos, args[i+1:]...)
			break
		}
		if len(a) < 2 || a[0] != '-' {
			pos = append(pos, a)
			continue
		}
		name, val, hasVal := strings.Cut(a, "=")
		o, ok := s.lookup(name)
		if !ok {
			if hint := s.suggest(name); hint != "" {
				return nil, s.errorf("unknown option %s; did you mean %s?", name, hint)
			}
			if others := s.elsewhere(name); len(others) > 0 {
				return nil, s.errorf("unknown option %s: it is an option of %s", name, strings.Join(others, " and "))
			}
			return nil, s.errorf("unknown option %s", name)
		}
		if o.unsupported != "" {
			return nil, s.errorf("%s is llama.cpp's, not supported by ggload: %s", name, o.unsupported)
		}
		s.overriddenByEnv(o, name)
		s.given[o] = true
		if o.set2 != nil {
			a := val
			if !hasVal {
				if i+1 >= len(args) {
					return nil, s.errorf("%s needs two values (%s)", name, o.value)
				}
				i++
				a = args[i]
			}
			if i+1 >= len(args) {
				return nil, s.errorf("%s needs two values (%s)", name, o.value)
			}
			i++
			if err := o.set2(a, args[i]); err != nil {
				return nil, s.errorf("%s %s %s: %v", name, a, args[i], err)
			}
			continue
		}
		if o.value == "" || o.optValue && !hasVal && (i+1 >= len(args) || !optValueNext(o, args[i+1])) {
			on := !contains(o.neg, name)
			if hasVal && !o.optValue {
				b, ok := parseBool(val)
				if !ok {
					return nil, s.errorf("%s=%s: want on or off (true, false, 1, 0, enabled, disabled)", name, val)
				}
				on = on == b
			}
			if o.optValue {
				if err := o.set(""); err != nil {
					return nil, s.errorf("%s: %v", name, err)
				}
			} else if err := o.on(on); err != nil {
				return nil, s.errorf("%s: %v", name, err)
			}
			if s.helpReq {
				return nil, errHelp
			}
			if s.verReq {
				return nil, errVersion
			}
			continue
		}
		if !hasVal {
			if i+1 >= len(args) {
				return nil, s.errorf("%s needs a value (%s)", name, o.value)
			}
			i++
			val = args[i]
		}
		if err := o.set(val); err != nil {
			return nil, s.errorf("%s %s: %v", name, val, err)
		}
	}
	return pos, nil
}

// envSet is an option the environment set: "VAR=value", and the note that
// says so.
type envSet struct {
	kv   string
	note int // index in notes
}

// setByEnv reports whether the environment set o and the command line
// did not.
func (s *optionSet) setByEnv(o *option) bool {
	_, ok := s.fromEnv[o]
	return ok
}

// overriddenByEnv notes, in place of the note that the environment set o,
// that the command line (by) overrides it.
func (s *optionSet) overriddenByEnv(o *option, by string) {
	if e, ok := s.fromEnv[o]; ok {
		delete(s.fromEnv, o)
		s.notes[e.note] = fmt.Sprintf("note: %s from the environment is overridden by %s", e.kv, by)
	}
}

// pinEnv are the environment variables of llama.cpp's options (the pin's
// common/arg.cpp, set_env), by primary spelling. As in llama.cpp, they are
// read before the command line, which overrides them; a switch with an
// off spelling also reads LLAMA_ARG_NO_..., which turns it off.
var pinEnv = map[string]string{
	"-c": "LLAMA_ARG_CTX_SIZE", "-np": "LLAMA_ARG_N_PARALLEL", "-kvu": "LLAMA_ARG_KV_UNIFIED",
	"-ctk": "LLAMA_ARG_CACHE_TYPE_K", "-ctv": "LLAMA_ARG_CACHE_TYPE_V", "-kvo": "LLAMA_ARG_KV_OFFLOAD",
	"-fa": "LLAMA_ARG_FLASH_ATTN", "-b": "LLAMA_ARG_BATCH", "-ub": "LLAMA_ARG_UBATCH", "--swa-full": "LLAMA_ARG_SWA_FULL",
	"--embedding": "LLAMA_ARG_EMBEDDINGS", "--pooling": "LLAMA_ARG_POOLING", "--rerank": "LLAMA_ARG_RERANKING",
	"--repack": "LLAMA_ARG_REPACK", "--no-host": "LLAMA_ARG_NO_HOST",
	"-mm": "LLAMA_ARG_MMPROJ", "-mmu": "LLAMA_ARG_MMPROJ_URL", "--mmproj-auto": "LLAMA_ARG_MMPROJ_AUTO",
	"--mmproj-offload": "LLAMA_ARG_MMPROJ_OFFLOAD", "-mmdev": "MTMD_BACKEND_DEVICE",
	"--image-min-tokens": "LLAMA_ARG_IMAGE_MIN_TOKENS", "--image-max-tokens": "LLAMA_ARG_IMAGE_MAX_TOKENS",
	"--rpc": "LLAMA_ARG_RPC", "-lm": "LLAMA_ARG_LOAD_MODE", "-lzm": "LLAMA_ARG_LAZY_MODE", "--numa": "LLAMA_ARG_NUMA",
	"-dev": "LLAMA_ARG_DEVICE", "-ot": "LLAMA_ARG_OVERRIDE_TENSOR", "-cmoe": "LLAMA_ARG_CPU_MOE",
	"-ncmoe": "LLAMA_ARG_N_CPU_MOE", "-ncffn": "LLAMA_ARG_N_CPU_FFN", "-ngl": "LLAMA_ARG_N_GPU_LAYERS",
	"-sm": "LLAMA_ARG_SPLIT_MODE", "-ts": "LLAMA_ARG_TENSOR_SPLIT", "-mg": "LLAMA_ARG_MAIN_GPU",
	"-fit": "LLAMA_ARG_FIT", "-fitp": "LLAMA_ARG_FIT_ESTIMATE", "-fitt": "LLAMA_ARG_FIT_TARGET", "-fitc": "LLAMA_ARG_FIT_CTX",
	"-m": "LLAMA_ARG_MODEL", "-mu": "LLAMA_ARG_MODEL_URL", "-dr": "LLAMA_ARG_DOCKER_REPO", "-hf": "LLAMA_ARG_HF_REPO",
	"-hff": "LLAMA_ARG_HF_FILE", "-hft": "HF_TOKEN", "--offline": "LLAMA_ARG_OFFLINE", "--spec-draft-hf": "LLAMA_ARG_SPEC_DRAFT_HF_REPO",
	"--spec-draft-cpu-moe": "LLAMA_ARG_SPEC_DRAFT_CPU_MOE", "--spec-draft-n-cpu-moe": "LLAMA_ARG_SPEC_DRAFT_N_CPU_MOE",
	"--spec-draft-ngl": "LLAMA_ARG_N_GPU_LAYERS_DRAFT", "--spec-draft-model": "LLAMA_ARG_SPEC_DRAFT_MODEL",
	"--spec-draft-type-k": "LLAMA_ARG_SPEC_DRAFT_CACHE_TYPE_K", "--spec-draft-type-v": "LLAMA_ARG_SPEC_DRAFT_CACHE_TYPE_V",
}

// applyEnv sets the options the environment names, in the order they were
// registered. An option ggload does not support is left alone, with a
// note (HF_TOKEN, say, is often set for other tools).
func (s *optionSet) applyEnv() error {
	for _, g := range s.groups {
		for _, o := range g.opts {
			if o.env == "" || o.hidden {
				continue
			}
			name, val, ok := o.env, "", false
			if len(o.neg) > 0 {
				off := strings.Replace(o.env, "LLAMA_ARG_", "LLAMA_ARG_NO_", 1)
				if _, set := s.lookupEnv(off); set {
					name, val, ok = off, "0", true
				}
			}
			if !ok {
				val, ok = s.lookupEnv(o.env)
			}
			if !ok {
				continue
			}
			if o.unsupported != "" {
				s.notes = append(s.notes, fmt.Sprintf("note: %s is set, for llama.cpp's %s, which ggload does not support (%s): ignored", name, o.names[0], o.unsupported))
				continue
			}
			switch {
			case o.value == "" && len(o.neg) > 0:
				b, isBool := parseBool(val)
				if !isBool {
					return s.errorf("environment variable %s=%s (%s): want on or off (true, false, 1, 0, enabled, disabled)", name, val, o.names[0])
				}
				if err := o.on(b); err != nil {
					return s.errorf("environment variable %s=%s (%s): %v", name, val, o.names[0], err)
				}
			case o.value == "":
				// a switch without an off spelling: set by a true value
				if b, _ := parseBool(val); !b {
					continue
				}
				if err := o.on(true); err != nil {
					return s.errorf("environment variable %s=%s (%s): %v", name, val, o.names[0], err)
				}
			default:
				if err := o.set(val); err != nil {
					return s.errorf("environment variable %s=%s (%s): %v", name, val, o.names[0], err)
				}
			}
			s.given[o] = true
			shown := val
			if o.secret {
				shown = "(hidden)"
			}
			s.fromEnv[o] = envSet{name + "=" + shown, len(s.notes)}
			s.notes = append(s.notes, fmt.Sprintf("note: %s=%s from the environment sets %s", name, shown, o.names[0]))
		}
	}
	return nil
}

// optionSets build each command's options (with throwaway state), to
// tell which command takes an option given to another.
var optionSets = map[string]func() *optionSet{}

// elsewhere lists the other commands that take the option.
func (s *optionSet) elsewhere(name string) []string {
	var out []string
	for cmd, build := range optionSets {
		if cmd == s.cmd {
			continue
		}
		if o, ok := build().lookup(name); ok && o.unsupported == "" && !o.hidden {
			out = append(out, "ggload "+cmd)
		}
	}
	sort.Strings(out)
	return out
}

// suggest is the known spelling nearest to name, "" when none is near.
func (s *optionSet) suggest(name string) string {
	bare := strings.TrimLeft(name, "-")
	best, bestD := "", math.MaxInt
	for n := range s.byName {
		nb := strings.TrimLeft(n, "-")
		d := editDistance(bare, nb)
		if strings.HasPrefix(nb, bare) && len(bare) >= 3 {
			d = min(d, 1)
		}
		if d < bestD || d == bestD && n < best {
			best, bestD = n, d
		}
	}
	if bestD <= max(1, len(bare)/3) {
		return best
	}
	return ""
}

// editDistance is the Levenshtein distance.
func editDistance(a, b string) int {
	prev := make([]int, len(b)+1)
	cur := make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			c := 1
			if a[i-1] == b[j-1] {
				c = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+c)
		}
		prev, cur = cur, prev
	}
	return prev[len(b)]
}

// nearest is the word of words nearest to w, "" when none is near.
func nearest(w string, words []string) string {
	best, bestD := "", math.MaxInt
	for _, c := range words {
		if d := editDistance(w, c); d < bestD {
			best, bestD = c, d
		}
	}
	if bestD <= max(1, len(w)/3) {
		return best
	}
	return ""
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

// optValueNext reports whether an option whose value may be left out
// takes next as its value: one of its words, or anything that is neither
// an option nor an existing file (a mistyped value, refused by the option).
func optValueNext(o *option, next string) bool {
	if contains(o.optWords, next) {
		return true
	}
	if strings.HasPrefix(next, "-") {
		return false
	}
	_, err := os.Stat(next)
	return err != nil
}

// parseBool reads llama.cpp's truthy and falsy words.
func parseBool(s string) (bool, bool) {
	switch s {
	case "on", "enabled", "true", "1":
		return true, true
	case "off", "disabled", "false", "0":
		return false, true
	}
	return false, false
}

// intIn parses an integer in [lo, hi].
func intIn(v string, lo, hi int64) (int64, error) {
	n, err := strconv.ParseInt(strings.TrimSpace(v), 10, 64)
	if err != nil {
		return 0, fmt.Errorf("want an integer from %d to %d", lo, hi)
	}
	if n < lo || n > hi {
		return 0, fmt.Errorf("out of range: want %d to %d", lo, hi)
	}
	return n, nil
}

// parseSize reads 512MiB, 1GiB, 4G, 100M or plain bytes.
func parseSize(s string) (int64, error) {
	u := strings.ToUpper(strings.TrimSpace(s))
	mult := int64(1)
	for _, suf := range []struct {
		s string
		m int64
	}{{"GIB", 1 << 30}, {"MIB", 1 << 20}, {"KIB", 1 << 10}, {"GB", 1e9}, {"MB", 1e6}, {"G", 1 << 30}, {"M", 1 << 20}, {"K", 1 << 10}} {
		if strings.HasSuffix(u, suf.s) {
			u, mult = strings.TrimSuffix(u, suf.s), suf.m
			break
		}
	}
	f, err := strconv.ParseFloat(strings.TrimSpace(u), 64)
	if err != nil || f <= 0 {
		return 0, fmt.Errorf("%q: want a size such as 1GiB or 512MiB", s)
	}
	return int64(f * float64(mult)), nil
}

// sizeIn parses a size (1GiB, 512MiB, 64KiB, 4G, plain bytes) in [lo, hi].
func sizeIn(v string, lo, hi int64) (int64, error) {
	n, err := parseSize(v)
	if err != nil {
		return 0, err
	}
	if n < lo || n > hi {
		return 0, fmt.Errorf("out of range: want %s to %s", sizeString(lo), sizeString(hi))
	}
	return n, nil
}

// sizeString prints a size in the largest binary unit that divides it.
func sizeString(n int64) string {
	for _, u := range []struct {
		s string
		m int64
	}{{"TiB", 1 << 40}, {"GiB", 1 << 30}, {"MiB", 1 << 20}, {"KiB", 1 << 10}} {
		if n >= u.m && n%u.m == 0 {
			return fmt.Sprintf("%d%s", n/u.m, u.s)
		}
	}
	return fmt.Sprint(n)
}

// printHelp writes the usage and every option, laid out as llama.cpp's
// help is: spellings and value in the first 40 columns, the help beside
// them, wrapped at 70 characters.
func (s *optionSet) printHelp(w io.Writer) {
	for i, u := range s.usage {
		if i == 0 {
			fmt.Fprintf(w, "usage: %s\n", u)
		} else {
			fmt.Fprintf(w, "       %s\n", u)
		}
	}
	if s.about != "" {
		fmt.Fprintf(w, "\n%s\n", s.about)
	}
	var unsupported []*option
	for _, g := range s.groups {
		var shown []*option
		for _, o := range g.opts {
			switch {
			case o.hidden:
			case o.unsupported != "":
				unsupported = append(unsupported, o)
			default:
				shown = append(shown, o)
			}
		}
		if len(shown) == 0 {
			continue
		}
		if g.title != "" {
			fmt.Fprintf(w, "\n----- %s -----\n", g.title)
		}
		fmt.Fprintln(w)
		for _, o := range shown {
			help := o.help
			if len(o.alias) > 0 {
				help += "\n(ggload also takes " + strings.Join(o.alias, ", ") + ")"
			}
			if o.inert != "" {
				help += "\naccepted; no effect in ggload: " + o.inert
			}
			if o.env != "" {
				help += "\n(env: " + o.env + ")"
			}
			fmt.Fprint(w, formatOption(append(append([]string{}, o.names...), o.neg...), o.value, help))
		}
	}
	if len(unsupported) > 0 {
		fmt.Fprintf(w, "\n----- llama.cpp's options that ggload does not support, and why -----\n\n")
		sort.SliceStable(unsupported, func(i, j int) bool { return unsupported[i].unsupported < unsupported[j].unsupported })
		for i := 0; i < len(unsupported); {
			j := i
			var names []string
			for ; j < len(unsupported) && unsupported[j].unsupported == unsupported[i].unsupported; j++ {
				names = append(names, strings.Join(unsupported[j].spellings(), ", "))
			}
			for _, l := range wrap(strings.Join(names, "; "), 78) {
				fmt.Fprintln(w, l)
			}
			for _, l := range wrap(unsupported[i].unsupported, 70) {
				fmt.Fprintf(w, "%8s%s\n", "", l)
			}
			i = j
		}
	}
}

// formatOption lays out one option as llama.cpp's help does.
func formatOption(names []string, value, help string) string {
	const lead, width = 40, 70
	var b strings.Builder
	for i, n := range names {
		switch {
		case i == 0 && len(names) == 1:
			b.WriteString(n)
		case i == 0:
			first := n + ", "
			b.WriteString(first + strings.Repeat(" ", max(0, 7-len(first))))
		case i < len(names)-1:
			b.WriteString(n + ", ")
		default:
			b.WriteString(n)
		}
	}
	if value != "" {
		b.WriteString(" " + value)
	}
	if b.Len() > lead-3 {
		b.WriteString("\n" + strings.Repeat(" ", lead))
	} else {
		b.WriteString(strings.Repeat(" ", lead-b.Len()))
	}
	for i, l := range wrap(help, width) {
		if i > 0 {
			b.WriteString(strings.Repeat(" ", lead))
		}
		b.WriteString(l + "\n")
	}
	return b.String()
}

// wrap breaks text into lines of at most width characters, keeping its
// own line breaks.
func wrap(text string, width int) []string {
	var out []string
	for _, para := range strings.Split(text, "\n") {
		line := ""
		for _, word := range strings.Fields(para) {
			if line != "" && len(line)+1+len(word) > width {
				out = append(out, line)
				line = ""
			}
			if line != "" {
				line += " "
			}
			line += word
		}
		out = append(out, line)
	}
	return out
}
