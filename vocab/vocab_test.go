package vocab_test

import (
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/ggload/ggload/gguf"
	"github.com/ggload/ggload/lab/testenv"
	"github.com/ggload/ggload/vocab"
)

// vocabFiles lists the pin's models/ggml-vocab-*.gguf files.
func vocabFiles(t testing.TB) []string {
	dir := filepath.Join(testenv.SourceTree(t), "models")
	files, err := filepath.Glob(filepath.Join(dir, "ggml-vocab-*.gguf"))
	if err != nil || len(files) == 0 {
		t.Fatalf("no vocabulary files in %s (%v)", dir, err)
	}
	return files
}

var opened sync.Map // path -> func() (*vocab.Vocab, error)

// openOnce opens a vocabulary once for all the tests of the run.
func openOnce(t testing.TB, path string) *vocab.Vocab {
	f, _ := opened.LoadOrStore(path, sync.OnceValues(func() (*vocab.Vocab, error) { return vocab.Open(path) }))
	v, err := f.(func() (*vocab.Vocab, error))()
	if err != nil {
		t.Fatal(err)
	}
	return v
}

type vocabCase struct {
	in  string
	ids []vocab.Token
}

// readCases reads a .inp/.out pair as test-tokenizer-0 does.
func readCases(t testing.TB, path string) []vocabCase {
	inp, err := os.ReadFile(path + ".inp")
	if err != nil {
		return nil
	}
	out, err := os.ReadFile(path + ".out")
	if err != nil {
		t.Fatal(err)
	}
	ins := strings.Split(string(inp), "\n__ggml_vocab_test__\n")
	if len(ins) > 0 && ins[len(ins)-1] == "" {
		ins = ins[:len(ins)-1]
	}
	lines := strings.Split(string(out), "\n")
	if len(lines) > 0 && lines[len(lines)-1] == "" {
		lines = lines[:len(lines)-1]
	}
	if len(ins) != len(lines) {
		t.Fatalf("%s: %d inputs, %d outputs", path, len(ins), len(lines))
	}
	var cases []vocabCase
	for i, in := range ins {
		var ids []vocab.Token
		for _, f := range strings.Fields(lines[i]) {
			n, err := strconv.Atoi(f)
			if err != nil {
				t.Fatalf("%s.out line %d: %v", path, i+1, err)
			}
			ids = append(ids, vocab.Token(n))
		}
		cases = append(cases, vocabCase{in, ids})
	}
	return cases
}

// TestTokenizerFiles tokenizes every input of the pin's .inp files as
// test-tokenizer-0 does (add_special false, parse_special false) and
// compares with its .out ids.
func TestTokenizerFiles(t *testing.T) {
	paired := 0
	for _, path := range vocabFiles(t) {
		if _, err := os.Stat(path + ".inp"); err != nil {
			continue // (a vocabulary without test pairs: TestLoadAll loads it)
		}
		paired++
		name := strings.TrimSuffix(strings.TrimPrefix(filepath.Base(path), "ggml-vocab-"), ".gguf")
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			cases := readCases(t, path)
			if len(cases) == 0 {
				t.Fatalf("%s.inp holds no test", path)
			}
			v := openOnce(t, path)
			bad := 0
			for _, c := range cases {
				got, err := v.Tokenize(c.in, false, false)
				if err != nil {
					t.Errorf("Tokenize(%q): %v", c.in, err)
					continue
				}
				if !slices.Equal(got, c.ids) {
					bad++
					if bad <= 5 {
						t.Errorf("Tokenize(%q)\n got %v\nwant %v", c.in, got, c.ids)
					}
				}
			}
			if bad > 0 {
				t.Errorf("%d of %d inputs differ", bad, len(cases))
			}
		})
	}
	if paired < 15 {
		t.Errorf("only %d vocabularies with .inp/.out pairs in the pinned source: it has 15", paired)
	}
}

// TestLoadAll loads every vocabulary file and checks the counts, special
// ids and token types against the file's metadata.
func TestLoadAll(t *testing.T) {
	for _, path := range vocabFiles(t) {
		name := strings.TrimSuffix(strings.TrimPrefix(filepath.Base(path), "ggml-vocab-"), ".gguf")
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			v := openOnce(t, path)
			f, err := gguf.Open(path)
			if err != nil {
				t.Fatal(err)
			}
			defer f.Close()
			tv, _ := f.Lookup("tokenizer.ggml.tokens")
			if got, want := v.NTokens(), int(tv.Len()); got != want {
				t.Errorf("NTokens = %d, metadata has %d tokens", got, want)
			}
			ids := map[string]vocab.Token{
				"tokenizer.ggml.bos_token_id":       v.BOS(),
				"tokenizer.ggml.eos_token_id":       v.EOS(),
				"tokenizer.ggml.eot_token_id":       v.EOT(),
				"tokenizer.ggml.unknown_token_id":   v.UNK(),
				"tokenizer.ggml.seperator_token_id": v.SEP(),
				"tokenizer.ggml.padding_token_id":   v.PAD(),
				"tokenizer.ggml.mask_token_id":      v.MASK(),
			}
			for key, got := range ids {
				if val, ok := f.Lookup(key); ok {
					want, _ := val.Uint()
					if want < uint64(v.NTokens()) && got != vocab.Token(want) {
						t.Errorf("%s: got %d, metadata says %d", key, got, want)
					}
				}
			}
			if tt, ok := f.Lookup("tokenizer.ggml.token_type"); ok {
				types, err := tt.Ints()
				if err != nil {
					t.Fatal(err)
				}
				attrOf := map[int64]vocab.Attr{1: vocab.AttrNormal, 2: vocab.AttrUnknown, 3: vocab.AttrControl, 4: vocab.AttrUserDefined, 5: vocab.AttrUnused, 6: vocab.AttrByte}
				for id, typ := range types[:v.NTokens()] {
					want := attrOf[typ]
					got := v.Attr(vocab.Token(id)) &^ (vocab.AttrLStrip | vocab.AttrRStrip)
					// the load may mark detected special tokens as control
					// (and control tokens named "unused" as unused)
					if got != want && got&^(vocab.AttrControl|vocab.AttrUnused|vocab.AttrUserDefined) != want&^(vocab.AttrControl|vocab.AttrUnused|vocab.AttrUserDefined) {
						t.Errorf("token %d (%q): attr %#x, type %d", id, v.Text(vocab.Token(id)), got, typ)
						break
					}
				}
			}
			for _, id := range []vocab.Token{v.BOS(), v.EOS(), v.EOT(), v.UNK(), v.SEP(), v.PAD(), v.NL()} {
				if id < vocab.Null || int(id) >= v.NTokens() {
					t.Errorf("special id %d out of range", id)
				}
			}
			for id := range vocab.Token(v.NTokens()) {
				if got, ok := v.TokenID(v.Text(id)); ok && got != id && v.Model() != "hybriddna" {
					t.Errorf("TokenID(Text(%d)) = %d", id, got)
					break
				}
			}
		})
	}
}

// TestDetokenizeRoundTrip checks that the .inp inputs come back from their
// tokens with the byte-level vocabularies that clean no spaces, where
// llama_detokenize is lossless for valid UTF-8.
func TestDetokenizeRoundTrip(t *testing.T) {
	dir := filepath.Join(testenv.SourceTree(t), "models")
	for _, name := range []string{"qwen2", "qwen35", "command-r", "llama-spm"} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			path := filepath.Join(dir, "ggml-vocab-"+name+".gguf")
			v := openOnce(t, path)
			for _, c := range readCases(t, path) {
				got, err := v.Detokenize(c.ids, false, false)
				if err != nil {
					t.Fatal(err)
				}
				if string(got) != c.in {
					t.Errorf("Detokenize(%v) = %q, want %q", c.ids, got, c.in)
				}
			}
		})
	}
}

// One Vocab serves Tokenize, AppendPiece, Detokenize and every other
// method from several goroutines at once (go test -race), each getting
// what it gets alone.
func TestConcurrentUse(t *testing.T) {
	dir := filepath.Join(testenv.SourceTree(t), "models")
	for _, name := range []string{"llama-spm", "qwen2", "bert-bge"} {
		v := openOnce(t, filepath.Join(dir, "ggml-vocab-"+name+".gguf"))
		inp, err := os.ReadFile(filepath.Join(dir, "ggml-vocab-"+name+".gguf.inp"))
		if err != nil {
			t.Fatal(err)
		}
		texts := strings.Split(string(inp), "\n__ggml_vocab_test__\n")
		want := make([][]vocab.Token, len(texts))
		for i, s := range texts {
			if want[i], err = v.Tokenize(s, true, true); err != nil {
				t.Fatal(err)
			}
		}
		var wg sync.WaitGroup
		errs := make(chan string, 4*len(texts))
		for g := range 4 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for k := range texts {
					i := (k + g*7) % len(texts)
					got, err := v.Tokenize(texts[i], true, true)
					if err != nil || !slices.Equal(got, want[i]) {
						errs <- name + ": input " + strconv.Itoa(i) + " tokenized differently at once"
						continue
					}
					if _, err := v.Detokenize(got, false, false); err != nil {
						errs <- name + ": " + err.Error()
					}
					var p []byte
					for _, tok := range got {
						if p, err = v.AppendPiece(p[:0], tok, 0, true); err != nil {
							errs <- name + ": " + err.Error()
						}
					}
					everyMethod(v, got)
				}
			}()
		}
		wg.Wait()
		close(errs)
		for e := range errs {
			t.Error(e)
		}
	}
}

// everyMethod calls each of the Vocab's other methods (its docs call them
// safe for concurrent use), with the ids of toks and ids out of range.
func everyMethod(v *vocab.Vocab, toks []vocab.Token) {
	_, _, _, _ = v.Type(), v.Pre(), v.Model(), v.NTokens()
	_, _, _, _, _, _, _, _, _ = v.BOS(), v.EOS(), v.EOT(), v.EOM(), v.UNK(), v.SEP(), v.NL(), v.PAD(), v.MASK()
	_, _, _, _, _, _ = v.FIMPre(), v.FIMSuf(), v.FIMMid(), v.FIMPad(), v.FIMRep(), v.FIMSep()
	_, _, _ = v.AddBOS(), v.AddEOS(), v.AddSEP()
	_, _ = v.EOG(), v.SuppressTokens()
	for _, t := range append(toks, -1, vocab.Token(v.NTokens()), 1<<30) {
		_, _, _, _ = v.IsEOG(t), v.IsControl(t), v.Score(t), v.Attr(t)
		v.TokenID(v.Text(t))
		v.AppendPiece(nil, t, 1, false)
	}
	v.Detokenize([]vocab.Token{-1, 1 << 30}, true, true)
}
