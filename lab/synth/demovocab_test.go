package synth_test

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"

	"github.com/ggload/ggload/lab/synth"
	"github.com/ggload/ggload/lab/testenv"
	"github.com/ggload/ggload/vocab"
)

// tinyWords is the Examples' model, kept in the loader's testdata.
const tinyWords = "../../loader/testdata/tiny-words.gguf"

// loader/testdata/tiny-words.gguf is what synth.TinyWords writes, byte
// for byte (GGLOAD_UPDATE_TESTDATA=1 writes it again), and its
// vocabulary tokenizes words as whole pieces.
func TestTinyWordsFile(t *testing.T) {
	rt := testenv.Runtime(t)
	path := filepath.Join(t.TempDir(), "tiny-words.gguf")
	if _, err := synth.TinyWords.Write(rt, path); err != nil {
		t.Fatal(err)
	}
	got, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if os.Getenv("GGLOAD_UPDATE_TESTDATA") == "1" {
		if err := os.WriteFile(tinyWords, got, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(tinyWords)
	if err != nil {
		t.Fatalf("%v (GGLOAD_UPDATE_TESTDATA=1 writes it)", err)
	}
	if !bytes.Equal(got, want) {
		t.Fatalf("%s is not what synth.TinyWords writes (GGLOAD_UPDATE_TESTDATA=1 writes it again)", tinyWords)
	}
	v, err := vocab.Open(tinyWords)
	if err != nil {
		t.Fatal(err)
	}
	toks, err := v.Tokenize("the people", false, false)
	if err != nil {
		t.Fatal(err)
	}
	if len(toks) != 2 {
		t.Errorf("%q: %d tokens %v, want one per word", "the people", len(toks), toks)
	}
}
