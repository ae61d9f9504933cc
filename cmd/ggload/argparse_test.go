package main

import (
	"bufio"
	"fmt"
	"io"
	"math"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/ggload/ggload/lab/cxx"
	"github.com/ggload/ggload/sample"
)

// argParser is llama.cpp's own option parser (common_params_parse, as
// llama-completion calls it) in a process of its own (testdata/
// argparse.cpp): it answers each command line with what it leaves in
// common_params, or "refused".
type argParser struct {
	mu  sync.Mutex
	in  io.WriteCloser
	out *bufio.Reader
}

var (
	argParserOnce sync.Once
	argParserBin  string
)

// newArgParser starts the oracle for the test (or fuzz target), built once.
func newArgParser(t testing.TB) *argParser {
	t.Helper()
	src, err := filepath.Abs(filepath.Join("testdata", "argparse.cpp"))
	if err != nil {
		t.Fatal(err)
	}
	bin := cxx.Build(t, "argparse", []string{src})
	cmd := cxx.Command(t, bin)
	in, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		in.Close()
		cmd.Wait()
	})
	return &argParser{in: in, out: bufio.NewReaderSize(out, 1<<16)}
}

// parse is llama.cpp's answer to the arguments.
func (a *argParser) parse(args []string) (string, error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if _, err := io.WriteString(a.in, strings.Join(args, "\x1f")+"\n"); err != nil {
		return "", err
	}
	line, err := a.out.ReadString('\n')
	return strings.TrimSuffix(line, "\n"), err
}

// oracleLine is what argparse.cpp prints for run's options as ggload
// parsed them: ggload's answer, in llama.cpp's terms.
func oracleLine(args []string) (string, error) {
	pf := defaultPlaceFlags()
	rf := newRunFlags()
	s := runOptions(&pf, &rf)
	s.lookupEnv = func(string) (string, bool) { return "", false }
	if _, err := s.parse(args); err != nil {
		return "refused", err
	}
	p := rf.text.sampling.params(nil, rf.text.escape).Resolved()
	b := func(f float32) string { return fmt.Sprintf("%08x", math.Float32bits(f)) }
	nPredict, nBatch, nUBatch, nParallel := -1, pf.context.NBatch, pf.context.NUBatch, max(pf.context.NParallel, 1)
	if rf.stepsSet {
		nPredict = rf.steps
	}
	if nBatch == 0 {
		nBatch = 2048
	}
	if nUBatch == 0 {
		nUBatch = 512
	}
	// a default -t is the physical cores as llama.cpp counts them (run
	// then takes fewer while other processes keep the CPUs busy)
	threads := rf.threads
	if threads == 0 {
		threads = mathThreads()
	}
	ignore := 0
	if p.IgnoreEOS {
		ignore = 1
	}
	line := fmt.Sprintf("ok seed=%d top_k=%d top_p=%s min_p=%s xtc_p=%s xtc_t=%s typ_p=%s temp=%s dyn_range=%s dyn_exp=%s"+
		" last_n=%d n_prev=%d repeat=%s freq=%s present=%s dry_mult=%s dry_base=%s dry_allowed=%d dry_last_n=%d"+
		" adaptive_target=%s adaptive_decay=%s mirostat=%d sigma=%s tau=%s eta=%s ignore_eos=%d"+
		" n_predict=%d n_ctx=%d n_batch=%d n_ubatch=%d n_parallel=%d threads=%d",
		p.Seed, p.TopK, b(p.TopP), b(p.MinP), b(p.XTCProbability), b(p.XTCThreshold), b(p.TypP), b(p.Temp), b(p.DynatempRange),
		b(p.DynatempExponent), p.PenaltyLastN, p.NPrev, b(p.PenaltyRepeat), b(p.PenaltyFreq), b(p.PenaltyPresent), b(p.DryMultiplier),
		b(p.DryBase), p.DryAllowedLength, p.DryPenaltyLastN, b(p.AdaptiveTarget), b(p.AdaptiveDecay), p.Mirostat, b(p.TopNSigma),
		b(p.MirostatTau), b(p.MirostatEta), ignore, nPredict, pf.context.NCtx, nBatch, nUBatch, nParallel, threads)
	line += " bias="
	for _, lb := range p.LogitBias {
		line += fmt.Sprintf("%d:%s,", lb.Token, b(lb.Bias))
	}
	line += " samplers="
	for _, k := range p.Samplers {
		line += fmt.Sprintf("%d,", int(k))
	}
	line += " breakers="
	for _, br := range p.DrySequenceBreakers {
		line += fmt.Sprintf("%x,", br)
	}
	return line, nil
}

// The oracle prints n_parallel as given; ggload keeps -np 0 as 1, which is
// what llama.cpp's context makes of it (std::max(1u, n_seq_max)).
func normalizeOracle(line string) string {
	return strings.Replace(line, " n_parallel=0 ", " n_parallel=1 ", 1)
}

// ggloadStricter are command lines llama.cpp's parser takes and ggload
// refuses where it is given, because llama.cpp then fails (or ggload
// bounds it): the words ggload's refusal must hold.
var ggloadStricter = map[string]string{
	"-c\x1f-1":    "llama.cpp reads it as 4294967295 tokens and cannot make the context",
	"-c\x1f-300":  "a negative context size",
	"-np\x1f-3":   "n_seq_max must be <= 256",
	"-b\x1f-5":    "a negative size",
	"-ub\x1f-1":   "a negative size",
	"-b\x1f0":     "llama.cpp's context would take no tokens",
	"-t\x1f2000":  "2000 threads: ggload takes up to 1024",
	"-b\x1f12x":   "", // (12: taken, as llama.cpp takes it)
	"-np\x1f300":  "",
	"-c\x1f-0":    "",
	"-t\x1f3abc":  "",
	"-n\x1f-5":    "",
	"-c\x1f512ab": "",
}

// argCases are values for each kind of option: the numbers llama.cpp
// reads with std::stoi, std::stoul and std::stof, and the formats of -l.
func argCases() [][]string {
	ints := []string{"5", "-0.5", " 12abc", "+7", "0x10", "2147483647", "2147483648", "-2147483648", "-2147483649",
		"99999999999999999999", "", "abc", " ", "1e3", "-", "+-1", "\t42", "\v\f\r 3", "007", "-0"}
	floats := []string{"0.5", "1e308", "-1e308", "1e-40", "1.4e-45", "0x1p-149", "1e-50", "inf", "-Infinity", "nan", "NAN(123)",
		"-nan", "0x1.8p1", " 12abc", "+.5", ".", "1e", "0x", "0xg", "3.4028235e38", "3.4028236e38", "1.17549434e-38",
		"1.1754943e-38", "-0", "", "abc", "1,5", "0x1p128", "0x.8", "1e+", "1.5e-3x", "0x1.fffffep-127", "7e-46",
		"123456789012345678901234567890", "0.000000000000000000000000000000000000000000001", "1e-99999", "1e99999",
		"0x1p-99999", "infinityx", "nan(", "nan(a_1)", "   -.25e+2x", "nan(0x400000)", "nan(12abc)", "nan(0x3fffff)", "nan(012)", "nan()",
		"nan(99999999999999999999)", "-nan(5)", "\t1.5"}
	var out [][]string
	for _, v := range ints {
		out = append(out, []string{"--top-k", v}, []string{"--dry-allowed-length", v})
	}
	for _, v := range floats {
		out = append(out, []string{"--top-p", v}, []string{"--mirostat-lr", v})
	}
	for _, v := range []string{"-1", "4294967296", "-18446744073709551616", "18446744073709551615", "18446744073709551616",
		"0", " 7", "-2", "12abc", "abc", "+5", ""} {
		out = append(out, []string{"--seed", v})
	}
	for _, v := range []string{"15043+1", "15043-1", "15043+1,15044-1", "15043", "15043+", " 7 - 2.5", "-5+3", "5x1", "5+abc",
		"99999999999+1", "5+1e308", "5+nan", "0x10+1", "+5+1", "5 + 1", "5++1", "5+-1", "2147483648+1", "-2147483648-1", "5+ "} {
		out = append(out, []string{"-l", v})
	}
	for _, v := range []string{"-1", "0", "1", "2", "3abc", "2000", "x"} {
		out = append(out, []string{"-t", v})
	}
	for _, v := range []string{"-1", "-2", "-5", "100", "x"} {
		out = append(out, []string{"-n", v})
	}
	for _, v := range []string{"16", "0", "-1", "-300", "1000", "512ab", "-0"} {
		out = append(out, []string{"-c", v})
	}
	for _, v := range []string{"-3", "0", "1", "2", "300"} {
		out = append(out, []string{"-np", v})
	}
	for _, v := range []string{"-5", "0", "256", "12x"} {
		out = append(out, []string{"-b", v})
	}
	out = append(out, []string{"-ub", "-1"}, []string{"-ub", "64"})
	for _, c := range [][]string{
		{"--repeat-last-n", "-1"}, {"--repeat-last-n", "0"}, {"--repeat-last-n", "100"}, {"--dry-penalty-last-n", "-1"},
		{"--dry-penalty-last-n", "3"}, {"--temp", "-1"}, {"--temp", "nan"}, {"--temp", "0"}, {"--repeat-penalty", "0"},
		{"--repeat-penalty", "-1"}, {"--repeat-penalty", "1e-39"}, {"--repeat-penalty", "inf"}, {"--repeat-penalty", "nan"},
		{"--repeat-penalty", "1.2"}, {"--presence-penalty", "inf"}, {"--frequency-penalty", "-nan"}, {"--presence-penalty", "1"},
		{"--dry-base", "0.5"}, {"--dry-base", "2"}, {"--samplers", "top_k;TOP-P;bogus"}, {"--samplers", ""},
		{"--sampler-seq", "kmt?"}, {"--sampler-seq", ""}, {"--samplers", "top_k", "--sampler-seq", "mt"},
		{"--sampler-seq", "mt", "--samplers", "top_k"}, {"--mirostat", "3"}, {"--mirostat", "1"}, {"--dynatemp-exp", "0"},
		{"--ignore-eos"}, {"--xtc-threshold", "0"}, {"--typical", "0"}, {"--adaptive-target", "0"}, {"--top-nsigma", "0"},
		{"--min-p", "0"}, {"--mirostat-ent", "0"}, {"--adaptive-decay", "0"}, {"--dry-multiplier", "0.8"},
	} {
		out = append(out, c)
	}
	return out
}

// run's options take and refuse what llama.cpp's own parser takes and
// refuses, with the same values: the numbers as std::stoi, std::stoul and
// std::stof read them (trailing text ignored, ERANGE refused), -l as its
// std::stringstream reads it. Where ggload refuses a value llama.cpp
// takes and then fails on, the refusal says why (ggloadStricter).
func TestRunOptionsMatchArgParse(t *testing.T) {
	oracle := newArgParser(t)
	var same, stricter int
	for _, args := range argCases() {
		want, err := oracle.parse(args)
		if err != nil {
			t.Fatalf("the oracle: %v", err)
		}
		want = normalizeOracle(want)
		got, gerr := oracleLine(args)
		key := strings.Join(args, "\x1f")
		if why, ok := ggloadStricter[key]; ok && why != "" {
			if got != "refused" || !strings.Contains(gerr.Error(), why) {
				t.Errorf("%q: ggload %v, want its refusal saying %q", args, gerr, why)
			}
			stricter++
			continue
		}
		if got != want {
			t.Errorf("%q:\nggload    %s (%v)\nllama.cpp %s", args, got, gerr, want)
			continue
		}
		same++
	}
	// a negative control: the comparison sees a difference
	if a, b := oracleLine([]string{"--top-p", "0.5"}); a == normalizeOracle(must(oracle.parse([]string{"--top-p", "0.25"}))) || b != nil {
		t.Error("the comparison does not tell 0.5 from 0.25")
	}
	t.Logf("%d command lines as llama.cpp parses them, %d refused where llama.cpp fails later", same, stricter)
	// --dry-sequence-breaker clears the defaults once per process in
	// llama.cpp (a static flag): one command line in a process of its own
	dry := newArgParser(t)
	args := []string{"--dry-sequence-breaker", "a", "--dry-sequence-breaker", "none", "--dry-sequence-breaker", "b\\n"}
	want, _ := dry.parse(args)
	if got, err := oracleLine(args); got != normalizeOracle(want) {
		t.Errorf("%q:\nggload    %s (%v)\nllama.cpp %s", args, got, err, want)
	}
}

func must(s string, err error) string {
	if err != nil {
		panic(err)
	}
	return s
}

// sample.Params{} resolves to what llama.cpp's parser leaves with no
// option given.
func TestZeroSamplingParamsAreTheCLIDefaults(t *testing.T) {
	oracle := newArgParser(t)
	want, err := oracle.parse([]string{"-n", "-1"})
	if err != nil {
		t.Fatal(err)
	}
	if got, _ := oracleLine([]string{"-n", "-1"}); got != normalizeOracle(want) {
		t.Errorf("defaults:\nggload    %s\nllama.cpp %s", got, want)
	}
	if (sample.Params{}).Resolved().Seed != sample.DefaultSeed {
		t.Error("Params{}'s seed is not the random one")
	}
}
