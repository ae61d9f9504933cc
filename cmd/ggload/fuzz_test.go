package main

import (
	"strconv"
	"strings"
	"testing"
	"unicode/utf8"
)

// The fuzz targets of run's option parsers. Those of llama.cpp's numbers
// and of -l are differential: each value goes to llama.cpp's own parser
// (testdata/argparse.cpp) too, and both must take it with the same value,
// or both refuse it (go test -fuzz FuzzFloatOption ./cmd/ggload).

// argvSafe reports whether s can be one argument of a command line and of
// the oracle's protocol (no NUL, newline or 0x1f).
func argvSafe(s string) bool { return !strings.ContainsAny(s, "\x00\n\x1f") }

// differential compares ggload's and llama.cpp's answers to one option.
func differential(t *testing.T, oracle *argParser, args []string) {
	for _, a := range args {
		if !argvSafe(a) {
			return
		}
	}
	if why, ok := ggloadStricter[strings.Join(args, "\x1f")]; ok && why != "" {
		return
	}
	want, err := oracle.parse(args)
	if err != nil {
		t.Fatalf("the oracle: %v", err)
	}
	if got, gerr := oracleLine(args); got != normalizeOracle(want) {
		t.Errorf("%q:\nggload    %s (%v)\nllama.cpp %s", args, got, gerr, want)
	}
}

func FuzzIntOption(f *testing.F) {
	oracle := newArgParser(f)
	for _, v := range []string{"5", "-0.5", " 12abc", "2147483648", "-2147483649", "0x10", "+-1", ""} {
		f.Add(v)
	}
	f.Fuzz(func(t *testing.T, v string) { differential(t, oracle, []string{"--top-k", v}) })
}

func FuzzFloatOption(f *testing.F) {
	oracle := newArgParser(f)
	for _, v := range []string{"0.5", "1e308", "1e-40", "0x1p-149", "nan(12)", "-inf", "1.17549434e-38", ".5e", ""} {
		f.Add(v)
	}
	f.Fuzz(func(t *testing.T, v string) { differential(t, oracle, []string{"--top-p", v}) })
}

func FuzzSeedOption(f *testing.F) {
	oracle := newArgParser(f)
	for _, v := range []string{"-1", "4294967296", "-18446744073709551616", "7x", ""} {
		f.Add(v)
	}
	f.Fuzz(func(t *testing.T, v string) { differential(t, oracle, []string{"--seed", v}) })
}

func FuzzLogitBiasOption(f *testing.F) {
	oracle := newArgParser(f)
	for _, v := range []string{"15043+1", "15043+1,15044-1", " 7 - 2.5", "5+", "99999999999+1", "5+nan(1)"} {
		f.Add(v)
	}
	f.Fuzz(func(t *testing.T, v string) { differential(t, oracle, []string{"-l", v}) })
}

// The context sizes and run's own counts: -c, -np, -b, -ub, -t, -n, as
// llama.cpp's stoi reads them, ggload refusing the negative sizes that
// llama.cpp fails on later (ggloadStricter's).
func FuzzContextOptions(f *testing.F) {
	oracle := newArgParser(f)
	for _, c := range []struct{ flag, v string }{{"-c", "16"}, {"-np", "0"}, {"-b", "12x"}, {"-t", "-1"}, {"-n", "-2"}, {"-ub", "1"}} {
		f.Add(c.flag, c.v)
	}
	flags := []string{"-c", "-np", "-b", "-ub", "-t", "-n"}
	f.Fuzz(func(t *testing.T, flag, v string) {
		if !strings.HasPrefix(flag, "-") {
			flag = flags[len(flag)%len(flags)]
		}
		n, err := stoi(v)
		if !contains(flags, flag) {
			return
		}
		negative := err == nil && n < 0 && flag != "-n" && flag != "-t"
		zeroBatch := err == nil && n == 0 && (flag == "-b" || flag == "-ub")
		if negative || zeroBatch || flag == "-t" && err == nil && n > maxRunThreads {
			// ggload refuses these where llama.cpp fails later
			if got, _ := oracleLine([]string{flag, v}); got != "refused" {
				t.Errorf("%s %q: taken (%s)", flag, v, got)
			}
			return
		}
		differential(t, oracle, []string{flag, v})
	})
}

// --tokens takes non-negative ids separated by commas, or refuses the
// list naming what it wants; every list it takes reads back the same.
func FuzzTokensOption(f *testing.F) {
	for _, v := range []string{"1,2,3", " 4, 5", "-1", "1,,2", "2147483648", ""} {
		f.Add(v)
	}
	f.Fuzz(func(t *testing.T, v string) {
		pf, rf := defaultPlaceFlags(), newRunFlags()
		s := runOptions(&pf, &rf)
		if _, err := s.parse([]string{"--tokens", v}); err != nil {
			if !strings.Contains(err.Error(), "want token ids") {
				t.Errorf("%q: %v", v, err)
			}
			return
		}
		parts := strings.Split(v, ",")
		if len(parts) != len(rf.tokens) {
			t.Fatalf("%q: %d ids of %d fields", v, len(rf.tokens), len(parts))
		}
		for i, p := range parts {
			if n, err := strconv.Atoi(strings.TrimSpace(p)); err != nil || int32(n) != rf.tokens[i] || n < 0 {
				t.Errorf("%q: field %d is %d", v, i, rf.tokens[i])
			}
		}
	})
}

// Any option of run with any value (or the environment's): an error or a
// setting, never a panic, and an error names the option.
func FuzzRunOptions(f *testing.F) {
	pf, rf := defaultPlaceFlags(), newRunFlags()
	var names []string
	for n := range runOptions(&pf, &rf).byName {
		names = append(names, n)
	}
	for _, c := range [][2]string{{"--temp", "nan"}, {"-l", "1+1"}, {"--samplers", "x;top_k"}, {"-c", "-1"}, {"--dry-sequence-breaker", "none"},
		{"--control-vector-scaled", "a:b"}, {"--lora-scaled", "x:1e999"}, {"-ot", "(=CPU"}, {"--override-kv", "a=int:x"}} {
		f.Add(c[0], c[1])
	}
	f.Fuzz(func(t *testing.T, name, v string) {
		if !utf8.ValidString(name) {
			return
		}
		if _, ok := runOptions(&pf, &rf).byName[name]; !ok {
			name = names[len(name)%len(names)]
		}
		pf, rf := defaultPlaceFlags(), newRunFlags()
		s := runOptions(&pf, &rf)
		s.lookupEnv = func(string) (string, bool) { return "", false }
		o := s.byName[name]
		args := []string{name}
		if o.value != "" && !o.optValue {
			args = append(args, v)
		}
		if o.set2 != nil {
			args = append(args, v)
		}
		if _, err := s.parse(args); err != nil && err != errHelp && err != errVersion && !strings.Contains(err.Error(), name) {
			t.Errorf("%q: the error does not name the option: %v", args, err)
		}
	})
}
