package main

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/ggload/ggload/ggml"
	"github.com/ggload/ggload/lab/testenv"
	"github.com/ggload/ggload/place"
)

// pinOption is one add_opt(common_arg(...)) of the pin's common/arg.cpp.
type pinOption struct {
	line   int
	names  []string // args
	neg    []string // args_neg
	hints  []string // value_hint, value_hint_2
	help   string   // the help's text (its string literals)
	body   string   // the whole call, handler included
	values []string // the values it documents
	env    string   // set_env: the environment variable that sets it
}

// inScope are the fields and functions of llama.cpp's common parameters
// that make an option a model loading, placement, fit or device option:
// what common_model_params_to_llama passes on (devices, layers, split,
// load and lazy modes, overrides, buffer types, checks), the fit's
// parameters, NUMA, RPC servers and the device list, the model's file and
// where it comes from, and what is loaded with it (projector, adapters,
// control vectors, a draft model).
var inScope = regexp.MustCompile(`params\.(n_gpu_layers|main_gpu|split_mode|tensor_split|load_mode|lazy_mode|check_tensors|no_extra_bufts|no_host|devices|tensor_buft_overrides|kv_overrides|numa|fit_params\w*|no_op_offload|model\.\w+|mmproj\w*|no_mmproj\w*|image_m(?:in|ax)_tokens|lora_adapters|control_vector\w*|hf_token|n_ctx|n_parallel|kv_unified|cache_type_k|cache_type_v|no_kv_offload|flash_attn_type|n_batch|n_ubatch|swa_full|embedding|pooling_type)\b|params\.speculative\.draft\.(n_gpu_layers|devices|tensor_buft_overrides|mparams)\b|add_rpc_devices|common_print_available_devices|llama_print_build_info`)

// TestOptionsOfThePin holds ggload's options to the pin's common/arg.cpp:
// every model loading, placement, fit and device option there is either
// accepted by ggload plan and load, in every spelling and with every value
// it documents, with the same value placeholder and default, or refused
// with a reason that ggload plan --help lists. And every llama.cpp option
// ggload shows exists in the pin.
func TestOptionsOfThePin(t *testing.T) {
	src := testenv.SourceTree(t)
	argCpp, err := os.ReadFile(filepath.Join(src, "common", "arg.cpp"))
	if err != nil {
		t.Fatal(err)
	}
	commonH, err := os.ReadFile(filepath.Join(src, "common", "common.h"))
	if err != nil {
		t.Fatal(err)
	}
	all, err := parsePinOptions(string(argCpp))
	if err != nil {
		t.Fatal(err)
	}
	if len(all) < 300 {
		t.Fatalf("only %d options found in common/arg.cpp: the extraction is broken", len(all))
	}
	var scope []pinOption
	pinNames := map[string]pinOption{}
	for _, o := range all {
		for _, n := range append(append([]string{}, o.names...), o.neg...) {
			pinNames[n] = o
		}
		if inScope.MatchString(o.body) {
			scope = append(scope, o)
		}
	}
	modelPath := filepath.Join(t.TempDir(), "model.gguf")
	example := map[string][]string{
		"N": {"1"}, "-ngl N": {"-1", "-2", "-7"}, "INDEX": {"0", "-1"}, "FNAME": {modelPath}, "MODEL_URL": {"https://127.0.0.1:1/m.gguf"}, "TOKEN": {"hf_abc"}, "N0,N1,N2,...": {"3,1", "1"}, "MiB0,MiB1,MiB2,...": {"1024", "512,256"},
		"<tensor name pattern>=<buffer type>,...": {`blk\.0\.ffn_down=CPU`, "ffn_up=CPU,ffn_down=CPU"},
		"<dev1,dev2,..>": {"none", "Vulkan0", "Vulkan0,RPC0"}, "SERVERS": {"127.0.0.1:50052", "10.0.0.2:50052,10.0.0.3:50052"},
		"-ctk TYPE": {"q8_0", "f32"}, "-ctv TYPE": {"q5_1", "bf16"}, "KEY=TYPE:VALUE,...": {"llama.context_length=int:512", `tokenizer.ggml.add_bos_token=bool:false,"general.name=str:a,b"`},
	}
	// control vectors (cvec.go): scaled files, and a range of two values,
	// each its own argument
	example["FNAME:SCALE,..."] = append(example["FNAME:SCALE,..."], modelPath+":0.5", modelPath+":1,"+modelPath+":-2")
	example["START END"] = []string{"1 3"}
	// multimodal projectors (mmproj.go)
	example["FILE"] = []string{filepath.Join(t.TempDir(), "mmproj.gguf")}
	example["URL"] = []string{"https://127.0.0.1:1/mmproj.gguf"}
	example["DEVICE"] = []string{"Vulkan0"}
	// -hf (hub.go)
	example["<user>/<model>[:quant]"] = []string{"ggml-org/gemma-3-1b-it-GGUF", "ggml-org/GLM-4.7-Flash-GGUF:Q4_K_M"}
	pf := defaultPlaceFlags()
	ref, _, _, _ := planOptions(&pf)
	var help bytes.Buffer
	ref.printHelp(&help)
	accepted, refused, spellings := 0, 0, 0
	for _, po := range scope {
		spell := append(append([]string{}, po.names...), po.neg...)
		o, ok := ref.byName[po.names[0]]
		if !ok {
			t.Errorf("arg.cpp:%d %s: ggload neither takes nor names it", po.line, strings.Join(spell, ", "))
			continue
		}
		for _, n := range spell {
			if ref.byName[n] != o {
				t.Errorf("arg.cpp:%d: %s is not a spelling of ggload's %s", po.line, n, o.names[0])
			}
		}
		if o.env != po.env {
			t.Errorf("arg.cpp:%d %s: environment variable %q, the pin's %q", po.line, po.names[0], o.env, po.env)
		}
		if o.unsupported != "" {
			refused++
			for _, n := range spell {
				if !strings.Contains(help.String(), n) {
					t.Errorf("plan --help does not list the refused %s", n)
				}
				args := []string{n}
				if len(po.hints) > 0 {
					args = append(args, "x")
				}
				fresh := defaultPlaceFlags()
				s, _, _, _ := planOptions(&fresh)
				if _, err := s.parse(args); err == nil || !strings.Contains(err.Error(), o.unsupported) {
					t.Errorf("%v: %v", args, err)
				}
			}
			if !strings.Contains(help.String(), wrap(o.unsupported, 70)[0]) {
				t.Errorf("plan --help does not give the reason for %s", po.names[0])
			}
			continue
		}
		accepted++
		if testing.Verbose() {
			t.Logf("arg.cpp:%d %s %s: values %q", po.line, strings.Join(spell, ", "), strings.Join(po.hints, " "), po.values)
		}
		if got, want := o.value, strings.Join(po.hints, " "); got != want {
			t.Errorf("arg.cpp:%d %s: value %q, the pin's %q", po.line, po.names[0], got, want)
		}
		values := append(append(append([]string{}, po.values...), example[strings.Join(po.hints, " ")]...), example[po.names[0]+" "+strings.Join(po.hints, " ")]...)
		if len(po.hints) > 0 && len(values) == 0 {
			t.Errorf("arg.cpp:%d %s %s: no value to try", po.line, po.names[0], po.hints[0])
		}
		for _, n := range spell {
			var tries [][]string
			if len(po.hints) == 0 {
				tries = [][]string{{n}}
			}
			for _, v := range values {
				if len(po.hints) == 2 {
					a, b, _ := strings.Cut(v, " ")
					tries = append(tries, []string{n, a, b}, []string{n + "=" + a, b})
					continue
				}
				tries = append(tries, []string{n, v}, []string{n + "=" + v})
			}
			for _, args := range tries {
				spellings++
				fresh := defaultPlaceFlags()
				s, _, _, _ := planOptions(&fresh)
				if _, err := s.parse(args); err != nil && err != errVersion {
					t.Errorf("arg.cpp:%d: %v refused: %v", po.line, args, err)
					continue
				}
				if err := checkEffect(&fresh, po.names[0], args, string(commonH)); err != nil {
					t.Errorf("%v: %v", args, err)
				}
			}
		}
	}
	// the llama.cpp options ggload shows are the pin's
	for _, g := range ref.groups {
		if !strings.HasPrefix(g.title, "llama.cpp's") && g.title != "unsupported" {
			continue
		}
		for _, o := range g.opts {
			for _, n := range append(append([]string{}, o.names...), o.neg...) {
				if _, ok := pinNames[n]; !ok && !o.hidden {
					t.Errorf("ggload shows %s as llama.cpp's, but the pin has no such option", n)
				}
			}
		}
	}
	// llama.cpp's older spellings, outside the pin
	for _, n := range []string{"--no-mmap", "--mlock"} {
		if _, ok := pinNames[n]; ok {
			t.Errorf("%s is in the pin: show it as llama.cpp's", n)
		}
	}
	checkDefaults(t, string(commonH))
	t.Logf("llama.cpp %s: %d options in common/arg.cpp, %d of them model loading, placement, fit and device options: %d accepted (%d spellings and values tried), %d refused with a reason",
		pinTag(), len(all), len(scope), accepted, spellings, refused)
}

// checkEffect checks what an accepted option did, where the pin's source
// says what it must do.
func checkEffect(f *placeFlags, primary string, args []string, commonH string) error {
	v := ""
	if len(args) == 2 {
		v = args[1]
	} else if _, val, ok := strings.Cut(args[0], "="); ok {
		v = val
	}
	flag := strings.SplitN(args[0], "=", 2)[0]
	switch primary {
	case "-lm":
		if f.loadMode.String() != v {
			return fmt.Errorf("load mode %s", f.loadMode)
		}
	case "-lzm":
		if f.lazy.String() != v {
			return fmt.Errorf("lazy mode %s", f.lazy)
		}
	case "-sm":
		if f.sm.String() != v {
			return fmt.Errorf("split mode %s", f.sm)
		}
	case "--numa":
		if f.numa != numaNames[v] || f.numa == ggml.NUMADisabled {
			return fmt.Errorf("numa %d", f.numa)
		}
	case "-ngl":
		want := map[string]place.Layers{"auto": place.AutoLayers(), "-1": place.AutoLayers(), "all": place.AllLayers(), "-2": place.AllLayers(), "-7": place.AllLayers(), "1": place.NLayers(1)}[v]
		if f.ngl != want {
			return fmt.Errorf("ngl %s, want %s", f.ngl, want)
		}
	case "-fit":
		if b, _ := parseBool(v); f.fit != b {
			return fmt.Errorf("fit %v", f.fit)
		}
	case "--repack":
		if f.repack != (flag == "--repack") {
			return fmt.Errorf("repack %v", f.repack)
		}
	case "-cmoe":
		want := cString(commonH, "LLM_FFN_EXPS_REGEX")
		if len(f.overrides) != 1 || f.overrides[0].Pattern != want || f.overrides[0].BufferType != "CPU" {
			return fmt.Errorf("overrides %v, want %s=CPU", f.overrides, want)
		}
	case "-ncmoe", "-ncffn":
		re := map[string]string{"-ncmoe": "LLM_FFN_EXPS_REGEX", "-ncffn": "LLM_FFN_DENSE_REGEX"}[primary]
		want := `blk\.0` + cString(commonH, re)
		if len(f.overrides) != 1 || f.overrides[0].Pattern != want {
			return fmt.Errorf("overrides %v, want %s=CPU", f.overrides, want)
		}
	case "-fitt":
		if len(f.fitTargets) == 0 || f.fitTargets[0]>>20 == 0 {
			return fmt.Errorf("targets %v", f.fitTargets)
		}
	case "--control-vector-layer-range":
		if f.cvec.start != 1 || f.cvec.end != 3 {
			return fmt.Errorf("layer range %d %d", f.cvec.start, f.cvec.end)
		}
	case "--control-vector", "--control-vector-scaled":
		if len(f.cvec.files) == 0 {
			return fmt.Errorf("no control vector")
		}
	case "-hf":
		if f.hub.repo != v {
			return fmt.Errorf("-hf %q", f.hub.repo)
		}
	case "-hff":
		if f.hub.file != v {
			return fmt.Errorf("-hff %q", f.hub.file)
		}
	case "-mm":
		if f.mmproj.path != v {
			return fmt.Errorf("mmproj %q", f.mmproj.path)
		}
	case "-mmu":
		if f.mmproj.url != v {
			return fmt.Errorf("mmproj url %q", f.mmproj.url)
		}
	case "--mmproj-offload":
		if f.mmproj.offload != (flag == "--mmproj-offload") {
			return fmt.Errorf("mmproj offload %v", f.mmproj.offload)
		}
	case "--mmproj-auto":
		if f.mmproj.auto != (flag == "--mmproj-auto") {
			return fmt.Errorf("mmproj auto %v", f.mmproj.auto)
		}
	case "-mmdev":
		if want := v != "none"; f.mmproj.offload != want || want && f.mmproj.device != v {
			return fmt.Errorf("mmproj device %q, offload %v", f.mmproj.device, f.mmproj.offload)
		}
	case "--lora", "--lora-scaled":
		if len(f.lora.files) == 0 {
			return fmt.Errorf("no LoRA adapter")
		}
	}
	return nil
}

// cString is the value of a `const char * const NAME = "...";` of common.h.
func cString(src, name string) string {
	m := regexp.MustCompile(name + `\s*=\s*"((?:[^"\\]|\\.)*)"`).FindStringSubmatch(src)
	if m == nil {
		return "<" + name + " not found>"
	}
	return unescapeC(m[1])
}

// checkDefaults compares ggload's defaults with the pin's common_params.
func checkDefaults(t *testing.T, commonH string) {
	field := func(decl string) string {
		m := regexp.MustCompile(`\b` + regexp.QuoteMeta(decl) + `\s*=\s*([^;]+);`).FindStringSubmatch(commonH)
		if m == nil {
			t.Errorf("common.h: no default for %s", decl)
			return ""
		}
		return strings.TrimSpace(m[1])
	}
	d := defaultPlaceFlags()
	loadModes := map[string]place.LoadMode{"LLAMA_LOAD_MODE_AUTO": place.LoadAuto, "LLAMA_LOAD_MODE_NONE": place.LoadNone, "LLAMA_LOAD_MODE_MMAP": place.LoadMmap}
	lazyModes := map[string]place.LazyMode{"LLAMA_LAZY_MODE_AUTO": place.LazyAuto, "LLAMA_LAZY_MODE_OFF": place.LazyOff, "LLAMA_LAZY_MODE_ON": place.LazyOn}
	splitModes := map[string]place.SplitMode{"LLAMA_SPLIT_MODE_LAYER": place.SplitLayer, "LLAMA_SPLIT_MODE_NONE": place.SplitNone, "LLAMA_SPLIT_MODE_ROW": place.SplitRow}
	checks := []struct {
		decl string
		ok   func(v string) bool
	}{
		{"int32_t n_gpu_layers", func(v string) bool { n, _ := strconv.Atoi(v); return n == d.ngl.Llama() && d.ngl.IsAuto() }},
		{"int32_t main_gpu", func(v string) bool { n, _ := strconv.Atoi(v); return n == d.mg }},
		{"bool    fit_params", func(v string) bool { return (v == "true") == d.fit }},
		{"int32_t fit_params_min_ctx", func(v string) bool { n, _ := strconv.Atoi(v); return n == d.fitCtx }},
		{"std::vector<size_t> fit_params_target", func(v string) bool {
			return strings.Contains(strings.ReplaceAll(v, " ", ""), "1024*1024*1024") && place.DefaultFitTarget == 1<<30 && d.fitTargets == nil
		}},
		{"enum llama_split_mode split_mode", func(v string) bool { m, ok := splitModes[v]; return ok && m == d.sm }},
		{"enum llama_load_mode  load_mode", func(v string) bool { m, ok := loadModes[v]; return ok && m == d.loadMode }},
		{"enum llama_lazy_mode lazy_mode", func(v string) bool { m, ok := lazyModes[v]; return ok && m == d.lazy }},
		{"ggml_numa_strategy numa", func(v string) bool { return v == "GGML_NUMA_STRATEGY_DISABLED" && d.numa == ggml.NUMADisabled }},
		{"bool check_tensors", func(v string) bool { return (v == "true") == d.check }},
		{"bool no_op_offload", func(v string) bool { return (v == "true") == !d.opOffload }},
		{"bool no_extra_bufts", func(v string) bool { return (v == "true") == !d.repack }},
		{"bool no_host", func(v string) bool { return (v == "true") == d.noHost }},
	}
	for _, c := range checks {
		decl := regexp.MustCompile(`\s+`).ReplaceAllString(c.decl, " ")
		v := field(c.decl)
		if v == "" {
			// tolerate the alignment spaces of common.h
			v = fieldLoose(commonH, decl)
		}
		if v != "" && !c.ok(v) {
			t.Errorf("common.h %s = %s: ggload's default differs", c.decl, v)
		}
	}
}

func fieldLoose(src, decl string) string {
	parts := strings.Fields(decl)
	pat := strings.Join(quoteAll(parts), `\s+`) + `\s*=\s*([^;]+);`
	m := regexp.MustCompile(pat).FindStringSubmatch(src)
	if m == nil {
		return ""
	}
	return strings.TrimSpace(m[1])
}

func quoteAll(ss []string) []string {
	out := make([]string, len(ss))
	for i, s := range ss {
		out[i] = regexp.QuoteMeta(s)
	}
	return out
}

// parsePinOptions extracts every add_opt(common_arg(...)) of arg.cpp.
var setEnv = regexp.MustCompile(`\.set_env\(\s*"([A-Z0-9_]+)"\s*\)`)

func parsePinOptions(src string) ([]pinOption, error) {
	var out []pinOption
	const marker = "add_opt(common_arg("
	for i := 0; ; {
		j := strings.Index(src[i:], marker)
		if j < 0 {
			break
		}
		start := i + j + len("add_opt(common_arg")
		end, err := matchParen(src, start)
		if err != nil {
			return nil, fmt.Errorf("line %d: %w", strings.Count(src[:start], "\n")+1, err)
		}
		o := pinOption{line: strings.Count(src[:start], "\n") + 1, body: src[start : end+1]}
		// the calls chained on the option: .set_env("LLAMA_ARG_...")
		if outer, err := matchParen(src, i+j+len("add_opt")); err == nil {
			if m := setEnv.FindStringSubmatch(src[end:outer]); m != nil {
				o.env = m[1]
			}
		}
		args := splitTop(src[start+1 : end])
		var rest []string
		for _, a := range args {
			a = strings.TrimSpace(stripComments(a))
			if strings.HasPrefix(a, "{") && len(rest) == 0 {
				lits := literals(a)
				if o.names == nil {
					o.names = lits
				} else {
					o.neg = lits
				}
				continue
			}
			rest = append(rest, a)
		}
		if len(rest) < 2 || len(o.names) == 0 {
			return nil, fmt.Errorf("arg.cpp:%d: unexpected shape", o.line)
		}
		for _, h := range rest[:len(rest)-2] {
			if ls := literals(h); len(ls) == 1 && strings.HasPrefix(h, `"`) {
				o.hints = append(o.hints, ls[0])
			} else {
				o.hints = append(o.hints, h) // a computed placeholder
			}
		}
		help := rest[len(rest)-2]
		if strings.HasPrefix(help, "string_format(") {
			if inner := splitTop(help[len("string_format(") : len(help)-1]); len(inner) > 0 {
				help = inner[0]
			}
		}
		o.help = strings.Join(literals(help), "")
		o.values = documentedValues(o, boolWords(src))
		out = append(out, o)
		i = end
	}
	return out, nil
}

// documentedValues are the values an option names: in its placeholder
// ({a,b}, [a|b]), in its help ("- word: ..." lines, 'quoted' words) and
// in its handler (value == "word").
func documentedValues(o pinOption, boolWords []string) []string {
	seen := map[string]bool{}
	var out []string
	add := func(v string) {
		if v != "" && !seen[v] {
			seen[v] = true
			out = append(out, v)
		}
	}
	for _, h := range o.hints {
		if len(h) > 2 && (h[0] == '{' || h[0] == '[') {
			for _, w := range strings.FieldsFunc(h[1:len(h)-1], func(r rune) bool { return r == ',' || r == '|' }) {
				add(strings.TrimSpace(w))
			}
		}
	}
	for _, m := range regexp.MustCompile(`(?m)^- ([a-z0-9+]+):`).FindAllStringSubmatch(o.help, -1) {
		add(m[1])
	}
	for _, m := range regexp.MustCompile(`'([a-z]+)'`).FindAllStringSubmatch(o.help, -1) {
		add(m[1])
	}
	for _, m := range regexp.MustCompile(`value == "([^"]*)"`).FindAllStringSubmatch(o.body, -1) {
		add(m[1])
	}
	if strings.Contains(o.body, "is_truthy(value)") {
		for _, w := range boolWords {
			add(w)
		}
	}
	return out
}

// boolWords are the words arg.cpp's is_truthy and is_falsey take.
func boolWords(src string) []string {
	var out []string
	for _, fn := range []string{"is_truthy", "is_falsey"} {
		i := strings.Index(src, "::"+fn+"(const std::string & value) {")
		if i < 0 {
			continue
		}
		end := strings.Index(src[i:], "}")
		for _, m := range regexp.MustCompile(`value == "([^"]+)"`).FindAllStringSubmatch(src[i:i+end], -1) {
			out = append(out, m[1])
		}
	}
	return out
}

// matchParen returns the index of the parenthesis closing the one at
// open, skipping string and character literals and comments.
func matchParen(src string, open int) (int, error) {
	depth := 0
	for i := open; i < len(src); i++ {
		switch c := src[i]; c {
		case '"', '\'':
			j, err := skipLiteral(src, i)
			if err != nil {
				return 0, err
			}
			i = j
		case '/':
			if i+1 < len(src) && src[i+1] == '/' {
				i += strings.IndexByte(src[i:], '\n')
			} else if i+1 < len(src) && src[i+1] == '*' {
				i += strings.Index(src[i:], "*/") + 1
			}
		case '(', '{', '[':
			depth++
		case ')', '}', ']':
			depth--
			if depth == 0 {
				return i, nil
			}
		}
	}
	return 0, fmt.Errorf("unbalanced")
}

func skipLiteral(src string, i int) (int, error) {
	q := src[i]
	for j := i + 1; j < len(src); j++ {
		switch src[j] {
		case '\\':
			j++
		case q:
			return j, nil
		}
	}
	return 0, fmt.Errorf("unterminated literal")
}

// splitTop splits at the commas outside brackets, literals and comments.
func splitTop(s string) []string {
	var out []string
	depth, last := 0, 0
	for i := 0; i < len(s); i++ {
		switch c := s[i]; c {
		case '"', '\'':
			j, err := skipLiteral(s, i)
			if err != nil {
				return append(out, s[last:])
			}
			i = j
		case '/':
			if i+1 < len(s) && s[i+1] == '/' {
				if k := strings.IndexByte(s[i:], '\n'); k >= 0 {
					i += k
				}
			}
		case '(', '{', '[':
			depth++
		case ')', '}', ']':
			depth--
		case ',':
			if depth == 0 {
				out = append(out, s[last:i])
				last = i + 1
			}
		}
	}
	return append(out, s[last:])
}

// stripComments removes // comments outside literals.
func stripComments(s string) string {
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c == '"' || c == '\'' {
			j, err := skipLiteral(s, i)
			if err != nil {
				return b.String() + s[i:]
			}
			b.WriteString(s[i : j+1])
			i = j
			continue
		}
		if c == '/' && i+1 < len(s) && s[i+1] == '/' {
			k := strings.IndexByte(s[i:], '\n')
			if k < 0 {
				break
			}
			i += k - 1
			continue
		}
		b.WriteByte(c)
	}
	return b.String()
}

// literals are the string literals of a C++ expression, unescaped.
func literals(s string) []string {
	var out []string
	for i := 0; i < len(s); i++ {
		if s[i] == '\'' {
			if j, err := skipLiteral(s, i); err == nil {
				i = j
			}
			continue
		}
		if s[i] != '"' {
			continue
		}
		j, err := skipLiteral(s, i)
		if err != nil {
			break
		}
		out = append(out, unescapeC(s[i+1:j]))
		i = j
	}
	return out
}

func unescapeC(s string) string {
	r := strings.NewReplacer(`\n`, "\n", `\t`, "\t", `\"`, `"`, `\\`, `\`, `\'`, `'`)
	return r.Replace(s)
}

// The environment sets options as llama.cpp's tools read it: before the
// command line, which overrides it; LLAMA_ARG_NO_... turns a switch off;
// a bad value is an error naming the variable; a variable of an option
// ggload does not support is ignored with a note.
func TestOptionsFromTheEnvironment(t *testing.T) {
	parse := func(env map[string]string, args ...string) (placeFlags, *optionSet, error) {
		f := defaultPlaceFlags()
		s, _, _, _ := planOptions(&f)
		s.lookupEnv = func(k string) (string, bool) { v, ok := env[k]; return v, ok }
		_, err := s.parse(args)
		return f, s, err
	}
	f, s, err := parse(map[string]string{"LLAMA_ARG_N_GPU_LAYERS": "5", "LLAMA_ARG_NO_REPACK": "1", "LLAMA_ARG_LOAD_MODE": "dio", "LLAMA_ARG_FIT": "off", "HF_TOKEN": "x"}, "model.gguf")
	if err != nil {
		t.Fatal(err)
	}
	if n, _ := f.ngl.Count(); n != 5 || f.repack || f.loadMode != place.LoadDirectIO || f.fit || f.hfToken != "x" {
		t.Errorf("from the environment: -ngl %v, repack %v, -lm %v, -fit %v, -hft %q", f.ngl, f.repack, f.loadMode, f.fit, f.hfToken)
	}
	notes := strings.Join(s.notes, "\n")
	if strings.Contains(notes, "HF_TOKEN=x") {
		t.Errorf("the token is printed: %s", notes)
	}
	for _, want := range []string{"LLAMA_ARG_N_GPU_LAYERS=5 from the environment sets -ngl", "LLAMA_ARG_NO_REPACK=0 from the environment sets --repack", "HF_TOKEN=(hidden) from the environment sets -hft"} {
		if !strings.Contains(notes, want) {
			t.Errorf("notes %q lack %q", notes, want)
		}
	}
	f, s, err = parse(map[string]string{"LLAMA_ARG_N_GPU_LAYERS": "5", "LLAMA_ARG_REPACK": "0"}, "-ngl", "3", "--repack", "model.gguf")
	if err != nil {
		t.Fatal(err)
	}
	if n, _ := f.ngl.Count(); n != 3 || !f.repack {
		t.Errorf("the command line did not override the environment: -ngl %v, repack %v", f.ngl, f.repack)
	}
	if notes := strings.Join(s.notes, "\n"); !strings.Contains(notes, "LLAMA_ARG_N_GPU_LAYERS=5 from the environment is overridden by -ngl") {
		t.Errorf("notes %q", notes)
	}
	// MODEL on the command line overrides LLAMA_ARG_MODEL, as -m would
	f, s, err = parse(map[string]string{"LLAMA_ARG_MODEL": "env.gguf"}, "cli.gguf")
	if err != nil {
		t.Fatal(err)
	}
	if path, err := f.modelPath(s, []string{"cli.gguf"}); err != nil || path != "cli.gguf" {
		t.Errorf("MODEL with LLAMA_ARG_MODEL set: %q, %v", path, err)
	}
	if notes := strings.Join(s.notes, "\n"); !strings.Contains(notes, "LLAMA_ARG_MODEL=env.gguf from the environment is overridden by MODEL") || strings.Contains(notes, "sets -m") {
		t.Errorf("notes %q", notes)
	}
	for env, want := range map[string]string{"LLAMA_ARG_N_GPU_LAYERS": "LLAMA_ARG_N_GPU_LAYERS=lots (-ngl)", "LLAMA_ARG_REPACK": "LLAMA_ARG_REPACK=maybe (--repack): want on or off"} {
		val := map[string]string{"LLAMA_ARG_N_GPU_LAYERS": "lots", "LLAMA_ARG_REPACK": "maybe"}[env]
		if _, _, err := parse(map[string]string{env: val}, "model.gguf"); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%s=%s: %v", env, val, err)
		}
	}
}
