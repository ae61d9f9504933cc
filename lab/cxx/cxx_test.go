package cxx_test

import (
	"path/filepath"
	"strings"
	"testing"

	"github.com/ggload/ggload/lab/cxx"
	"github.com/ggload/ggload/lab/testenv"
)

// llama.cpp's own llama-tokenize, built against the native set, runs and
// answers with the ids of its vocabulary.
func TestBuildTokenize(t *testing.T) {
	bin := cxx.Build(t, "llama-tokenize", []string{"tools/tokenize/tokenize.cpp"})
	vf := filepath.Join(testenv.SourceTree(t), "models", "ggml-vocab-llama-spm.gguf")
	out, err := cxx.Command(t, bin, "-m", vf, "-p", "Hello world", "--ids", "--log-disable").Output()
	if err != nil {
		t.Fatal(err)
	}
	// BOS, then "▁Hello" and "▁world" of llama's SentencePiece vocabulary
	if got := strings.TrimSpace(string(out)); got != "[1, 15043, 3186]" {
		t.Fatalf("llama-tokenize printed %q", got)
	}
	if again := cxx.Build(t, "llama-tokenize", []string{"tools/tokenize/tokenize.cpp"}); again != bin {
		t.Fatalf("a second build gave %s, not the cached %s", again, bin)
	}
}
