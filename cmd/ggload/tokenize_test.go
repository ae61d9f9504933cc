package main

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/ggload/ggload/lab/cxx"
	"github.com/ggload/ggload/lab/testenv"
)

// ggload tokenize prints what llama.cpp's own llama-tokenize (built from
// the pin's tools/tokenize/tokenize.cpp) prints, byte for byte, and fails
// where it fails: every option that changes the output, over vocabularies
// of three types (SPM with BOS, BPE without, WPM with CLS and SEP).
func TestTokenizeMatchesLlamaTokenize(t *testing.T) {
	src := testenv.SourceTree(t)
	bin := cxx.Build(t, "llama-tokenize", []string{"tools/tokenize/tokenize.cpp"})
	dir := t.TempDir()
	file := filepath.Join(dir, "prompt.txt")
	// a trailing newline (kept by -f), an escape, a NUL byte (a piece
	// printed as a C string), special tokens' texts, invalid UTF-8
	if err := os.WriteFile(file, []byte("line one\\tx <s> [SEP]\n\x00 caf\xc3\xa9 \xe2\x82 \xf0\x9f\xa6\x99\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	prompt := `Hello <s> world\n\tX \x41\xe2\x82\xac\x4 \q </s> [CLS] <|endoftext|> 🦙 a\`
	stdin := "from\\nstdin <|im_start|> [MASK]\r\n"
	// every case on SPM; on the others, the ones whose output depends on
	// the vocabulary (each run of llama-tokenize loads it anew)
	cases := []struct {
		args  []string
		stdin string
		all   bool
	}{
		{args: []string{"-p", prompt}, all: true},
		{args: []string{"-p", prompt, "--ids"}},
		{args: []string{"-p", prompt, "--show-count", "--no-bos"}},
		{args: []string{"-p", prompt, "--no-parse-special", "--ids", "--show-count"}, all: true},
		{args: []string{"-p", prompt, "--no-escape"}},
		{args: []string{"-f", file}, all: true},
		{args: []string{"-f", file, "--no-escape", "--ids"}},
		{args: []string{"-p", "ignored", "-f", file, "--show-count"}},
		{args: []string{"--stdin", "-p", "ignored"}, stdin: stdin, all: true},
		{args: []string{"--stdin", "--no-escape", "--ids", "--no-parse-special"}, stdin: stdin},
		{args: []string{"-p", " "}},
		{args: []string{}},                                        // no prompt: exit 1
		{args: []string{"-f", filepath.Join(dir, "missing.txt")}}, // exit 1
	}
	for _, name := range []string{"llama-spm", "qwen2", "bert-bge"} {
		model := filepath.Join(src, "models", "ggml-vocab-"+name+".gguf")
		for _, c := range cases {
			if name != "llama-spm" && !c.all {
				continue
			}
			args := append([]string{"-m", model, "--log-disable"}, c.args...)
			cmd := cxx.Command(t, bin, args...)
			cmd.Stdin = strings.NewReader(c.stdin)
			var want, stderr bytes.Buffer
			cmd.Stdout, cmd.Stderr = &want, &stderr
			theirErr := cmd.Run()

			tokenizeStdin = strings.NewReader(c.stdin)
			var got bytes.Buffer
			ourErr := run(context.Background(), append([]string{"tokenize"}, args...), &got, &bytes.Buffer{})
			tokenizeStdin = os.Stdin

			if (ourErr != nil) != (theirErr != nil) {
				t.Errorf("%s %q: ggload: %v; llama-tokenize: %v\n%s", name, c.args, ourErr, theirErr, stderr.Bytes())
			}
			if !bytes.Equal(got.Bytes(), want.Bytes()) {
				t.Errorf("%s %q:\nggload:\n%q\nllama-tokenize:\n%q", name, c.args, got.Bytes(), want.Bytes())
			}
		}
	}
}

// The escapes of -p, -f and --stdin are llama.cpp's string_process_escapes,
// \x with strtol's reading of two characters included.
func TestTokenizeEscapes(t *testing.T) {
	for in, want := range map[string]string{
		`a\nb\tc\rd\\e\'f\"g`: "a\nb\tc\rd\\e'f\"g",
		`\x41\x4a\x4`:         "AJ\\x4",
		`\x 5\x+6\x-1\x\t`:    "\x05\x06\xff\\x\t",
		`\q\`:                 `\q\`,
		`\x4g`:                `\x4g`,
	} {
		if got := processEscapes(in); got != want {
			t.Errorf("%q: %q, want %q", in, got, want)
		}
	}
}
