package vocab_test

import (
	"fmt"
	"math"
	"math/rand/v2"
	"path/filepath"
	"strings"
	"testing"

	"github.com/ggload/ggload/gguf"
	"github.com/ggload/ggload/lab/testenv"
	"github.com/ggload/ggload/vocab"
)

// A vocabulary whose metadata is wrong in any one key (a wrong type, an
// empty or short array, ids out of range, garbage bytes) is refused with
// an error naming the file, or loads and then tokenizes, prints and
// detokenizes without a panic: never a crash.
func TestBadMetadata(t *testing.T) {
	dir := filepath.Join(testenv.SourceTree(t), "models")
	rng := rand.New(rand.NewPCG(1, 2))
	texts := []string{"Hello world", " \t\n  x", "héllo <s></s><|endoftext|> 123 ✓", "\xff\xfe", ""}
	for _, name := range []string{"llama-spm", "bert-bge", "gpt-2"} {
		base, err := gguf.Open(filepath.Join(dir, "ggml-vocab-"+name+".gguf"))
		if err != nil {
			t.Fatal(err)
		}
		var kv []gguf.KV
		for k, v := range base.Pairs() {
			kv = append(kv, gguf.KV{Key: k, Value: v})
		}
		n := 0
		if v, ok := base.Lookup("tokenizer.ggml.tokens"); ok {
			n = int(v.Len())
		}
		defer base.Close() // (its arrays are read from it as they are written)
		bad := map[string][]gguf.Value{}
		for _, e := range kv {
			if !strings.HasPrefix(e.Key, "tokenizer.") {
				continue
			}
			vals := []gguf.Value{gguf.String("x"), gguf.Uint32(math.MaxUint32), gguf.Int32(-7), gguf.Float32(float32(math.NaN()))}
			if e.Value.IsArray() {
				vals = append(vals, arr(t, []uint32{}), arr(t, []string{"a"}), arr(t, randInt32s(rng, n)), arr(t, make([]float32, max(n-1, 0))))
			}
			if strings.HasSuffix(e.Key, "_token_id") {
				vals = append(vals, gguf.Uint32(uint32(n)), gguf.Uint32(uint32(n+100)), gguf.Int32(-2))
			}
			bad[e.Key] = vals
		}
		bad["tokenizer.ggml.merges"] = append(bad["tokenizer.ggml.merges"], arr(t, []string{"", " ", "a", "a b c", "  ", "Ġ Ġ"}))
		bad["tokenizer.ggml.precompiled_charsmap"] = []gguf.Value{arr(t, []uint8{1, 0, 0, 0}), arr(t, randBytes(rng, 64)), arr(t, []uint8{8, 0, 0, 0, 1, 2, 3, 4, 5, 6, 7, 8, 'a'})}
		bad["tokenizer.ggml.model"] = append(bad["tokenizer.ggml.model"], gguf.String("t5"), gguf.String("rwkv"), gguf.String("plamo2"), gguf.String("none"), gguf.String("nonsense"))
		bad["tokenizer.ggml.pre"] = append(bad["tokenizer.ggml.pre"], gguf.String("nonsense"), gguf.String("gemma4"), gguf.String("kimi-k2"))
		for key, vals := range bad {
			for i, val := range vals {
				w := gguf.NewWriter()
				for _, e := range kv {
					v := e.Value
					if e.Key == key {
						v = val
					}
					if err := w.Set(e.Key, v); err != nil {
						t.Fatal(err)
					}
				}
				if _, ok := lookupKV(kv, key); !ok {
					if err := w.Set(key, val); err != nil {
						t.Fatal(err)
					}
				}
				path := filepath.Join(t.TempDir(), fmt.Sprintf("%s-%d.gguf", strings.ReplaceAll(key, ".", "_"), i))
				if err := w.WriteFile(path); err != nil {
					t.Fatal(err)
				}
				exercise(t, path, texts)
			}
		}
	}
}

func arr(t *testing.T, elems any) gguf.Value {
	v, err := gguf.Array(elems)
	if err != nil {
		t.Fatal(err)
	}
	return v
}

func lookupKV(kv []gguf.KV, key string) (gguf.Value, bool) {
	for _, e := range kv {
		if e.Key == key {
			return e.Value, true
		}
	}
	return gguf.Value{}, false
}

// exercise opens path and uses the vocabulary every way; an error must
// name the file, and nothing may panic.
func exercise(t *testing.T, path string, texts []string) {
	t.Helper()
	defer func() {
		if r := recover(); r != nil {
			t.Errorf("%s: panic: %v", filepath.Base(path), r)
		}
	}()
	v, err := vocab.Open(path)
	if err != nil {
		if !strings.Contains(err.Error(), filepath.Base(path)) {
			t.Errorf("an error that does not name the file: %v", err)
		}
		return
	}
	for _, s := range texts {
		for _, special := range []bool{false, true} {
			toks, err := v.Tokenize(s, special, special)
			if err != nil {
				continue
			}
			if _, err := v.Detokenize(toks, special, special); err != nil {
				continue
			}
		}
	}
	ids := []vocab.Token{-1, 0, 1, vocab.Token(v.NTokens() - 1), vocab.Token(v.NTokens()), math.MaxInt32}
	for i := 0; i < v.NTokens(); i += max(1, v.NTokens()/300) {
		ids = append(ids, vocab.Token(i))
	}
	for _, id := range ids {
		v.AppendPiece(nil, id, 1, true)
		v.AppendPiece(nil, id, 0, false)
	}
	v.Detokenize(ids, true, true)
}

func randInt32s(rng *rand.Rand, n int) []int32 {
	out := make([]int32, n)
	for i := range out {
		out[i] = int32(rng.IntN(12)) - 2
	}
	return out
}

func randBytes(rng *rand.Rand, n int) []byte {
	out := make([]byte, n)
	for i := range out {
		out[i] = byte(rng.IntN(256))
	}
	return out
}
