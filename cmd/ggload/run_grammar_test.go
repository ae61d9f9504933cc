package main

import (
	"bytes"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"

	"github.com/ggload/ggload/lab/cxx"
	"github.com/ggload/ggload/lab/testenv"
)

// grammarCases are run's cases under grammars: every grammar of the
// pin's grammars/ folder (a sample of them by default, all with
// GGLOAD_GRAMMAR_ALL=1) and JSON schemas, greedy and seeded.
func grammarCases(t *testing.T) [][]string {
	dir := filepath.Join(testenv.SourceTree(t), "grammars")
	files, err := filepath.Glob(filepath.Join(dir, "*.gbnf"))
	if err != nil || len(files) < 5 {
		t.Fatalf("the pin's grammars: %v", err)
	}
	sort.Strings(files)
	all := os.Getenv("GGLOAD_GRAMMAR_ALL") == "1"
	var cases [][]string
	for i, f := range files {
		if !all && !strings.HasSuffix(f, "/json.gbnf") && !strings.HasSuffix(f, "/arithmetic.gbnf") {
			continue
		}
		cases = append(cases, []string{"--grammar-file", f, "-p", "Answer:", "-n", "24", "--temp", "0"})
		if all || i%2 == 0 {
			cases = append(cases, []string{"--grammar-file", f, "-p", "Answer:", "-n", "24", "-s", "7"})
		}
	}
	schemaFile := filepath.Join(t.TempDir(), "schema.json")
	if err := os.WriteFile(schemaFile, []byte(`{"type":"object","properties":{"name":{"type":"string","maxLength":12},"age":{"type":"integer","minimum":0,"maximum":150},"tags":{"type":"array","items":{"enum":["a","b"]},"maxItems":3}},"required":["name"]}`), 0o644); err != nil {
		t.Fatal(err)
	}
	cases = append(cases,
		[]string{"-j", `{"type":"object","properties":{"ok":{"type":"boolean"},"n":{"type":"number"}},"required":["ok"]}`, "-p", "{", "-n", "32", "-s", "3"},
		[]string{"--grammar", `root ::= "yes" | "no" | [0-9]+ " apples"`, "-p", "Q:", "-n", "8", "-s", "11"},
	)
	if all {
		cases = append(cases,
			[]string{"-jf", schemaFile, "-p", "JSON:", "-n", "40", "--temp", "0"},
			[]string{"-jf", schemaFile, "-p", "JSON:", "-n", "40", "-s", "5"},
			[]string{"-j", `{"type":"string","pattern":"^[a-z]{2,5}-[0-9]+$"}`, "-p", "id:", "-n", "16", "-s", "9"},
			[]string{"-j", `{"oneOf":[{"type":"null"},{"type":"array","items":{"type":"integer"},"minItems":1}]}`, "-p", "x", "-n", "24", "--temp", "0"},
			[]string{"--grammar", `root ::= "é" [^\x00-\x7f]* "."`, "-p", "ü", "-n", "12", "-s", "2"},
		)
	}
	return cases
}

// ggload run under a grammar or a JSON schema prints what llama-completion
// -no-cnv prints, byte for byte: the pin's grammars and schemas, greedy
// and seeded, on a SentencePiece and a BPE vocabulary.
func TestRunGrammarMatchesLlamaCompletion(t *testing.T) {
	bin := cxx.Build(t, "llama-completion", []string{"tools/completion/completion.cpp", "tools/completion/main.cpp"})
	vocabs := []string{"llama-spm"}
	if os.Getenv("GGLOAD_GRAMMAR_ALL") == "1" {
		vocabs = append(vocabs, "llama-bpe")
	}
	cases := grammarCases(t)
	for _, name := range vocabs {
		t.Run(name, func(t *testing.T) {
			path := textModel(t, "llama", name)
			for _, c := range cases {
				t.Run(strings.Join(c, " "), func(t *testing.T) {
					args := append([]string{"-m", path, "-t", "2", "-dev", "none", "-no-cnv"}, c...)
					want, err := cxx.Command(t, bin, args...).Output()
					if err != nil {
						t.Fatalf("llama-completion %s: %v", strings.Join(args, " "), err)
					}
					got, err := runCLI(t, append([]string{"run", path, "-t", "2", "-dev", "none"}, c...)...)
					if err != nil {
						t.Fatal(err)
					}
					if !bytes.Equal([]byte(got), want) {
						t.Fatalf("ggload run printed\n%q\nllama-completion printed\n%q", got, want)
					}
					if c[0] != "--grammar" {
						return
					}
					// a negative control: without the grammar, other text
					free, err := runCLI(t, append([]string{"run", path, "-t", "2", "-dev", "none"}, c[2:]...)...)
					if err != nil {
						t.Fatal(err)
					}
					if free == got {
						t.Fatalf("the same text without the grammar: %q", free)
					}
				})
			}
		})
	}
}

// A grammar or a schema llama.cpp refuses is refused, the error naming
// the place or the flag.
func TestRunGrammarErrors(t *testing.T) {
	path := textModel(t, "llama", "llama-spm")
	bad := filepath.Join(t.TempDir(), "bad.gbnf")
	if err := os.WriteFile(bad, []byte("root ::= \"a\"\nfoo ::= (\"b\"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"--grammar", `root ::= "a" | [b`}, "line 1, column 18: unexpected end of input"},
		{[]string{"--grammar-file", bad}, "line 3, column 1: expecting ')' at"},
		{[]string{"--grammar", `rot ::= "a"`}, "grammar does not contain a 'root' symbol"},
		{[]string{"--grammar", `root ::= root "a"`}, "left recursion detected"},
		{[]string{"--grammar-file", filepath.Join(t.TempDir(), "none.gbnf")}, "failed to open file"},
		{[]string{"-j", `{"type": 5}`}, "JSON schema conversion failed:\nJSON schema error at #: type must be a string or an array of strings"},
		{[]string{"-j", `{"type": "object"`}, "parse error at line 1, column 18"},
		{[]string{"-j", `{"type":"string","pattern":"^(a$"}`}, "Invalid pattern ^(a$: unbalanced parentheses"},
	} {
		_, err := runCLI(t, append([]string{"run", path, "-dev", "none", "-p", "x", "-n", "2"}, c.args...)...)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%v: error %v, want one saying %q", c.args, err, c.want)
		}
	}
}
