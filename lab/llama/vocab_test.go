package llama_test

import (
	"bytes"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/ggload/ggload/lab/llama"
	"github.com/ggload/ggload/lab/testenv"
)

// The vocabulary binding reproduces the pin's own tokenizer test data
// (models/ggml-vocab-*.gguf.inp and .out, written by
// tests/test-tokenizer-0.cpp: add_special and parse_special off), and its
// buffer protocols agree with themselves: for a BPE vocabulary, every
// piece concatenated is what llama_detokenize gives.
func TestVocabAgainstPinData(t *testing.T) {
	rt := testenv.Runtime(t)
	src := testenv.SourceTree(t)
	l, err := llama.Open(rt)
	if err != nil {
		testenv.Missing(t, "llama", "%v", err)
	}
	for _, name := range []string{"llama-spm", "qwen2", "bert-bge"} {
		path := filepath.Join(src, "models", "ggml-vocab-"+name+".gguf")
		v, err := l.LoadVocab(path)
		if err != nil {
			t.Fatal(err)
		}
		inp, err := os.ReadFile(path + ".inp")
		if err != nil {
			t.Fatal(err)
		}
		out, err := os.ReadFile(path + ".out")
		if err != nil {
			t.Fatal(err)
		}
		texts := strings.Split(string(inp), "\n__ggml_vocab_test__\n")
		if texts[len(texts)-1] == "" { // the file ends with a separator
			texts = texts[:len(texts)-1]
		}
		lines := strings.Split(strings.TrimSuffix(string(out), "\n"), "\n")
		if len(texts) != len(lines) {
			t.Fatalf("%s: %d inputs, %d outputs", name, len(texts), len(lines))
		}
		for i, text := range texts {
			var want []int32
			for _, f := range strings.Fields(lines[i]) {
				n, err := strconv.Atoi(f)
				if err != nil {
					t.Fatal(err)
				}
				want = append(want, int32(n))
			}
			got, err := v.Tokenize(text, false, false)
			if err != nil {
				t.Fatal(err)
			}
			if !slices.Equal(got, want) {
				t.Errorf("%s: %q: %v, want %v", name, text, got, want)
			}
			var pieces []byte
			for _, id := range got {
				if pieces, err = v.AppendPiece(pieces, id, 0, false); err != nil {
					t.Fatal(err)
				}
			}
			text2, err := v.Detokenize(got, false, false)
			if err != nil {
				t.Fatal(err)
			}
			// SPM's detokenize strips the leading space, WPM's cleans the
			// spaces around punctuation
			if v.Type() == 2 && !bytes.Equal(pieces, text2) {
				t.Errorf("%s: %q: pieces %q, detokenized %q", name, text, pieces, text2)
			}
		}
		if v.NTokens() == 0 || v.BOS() < -1 || v.Text(0) == "" {
			t.Errorf("%s: %d tokens, bos %d, text 0 %q", name, v.NTokens(), v.BOS(), v.Text(0))
		}
		v.Free()
	}
	if _, err := l.LoadVocab(filepath.Join(t.TempDir(), "none.gguf")); err == nil {
		t.Error("a missing file loads")
	}
}
