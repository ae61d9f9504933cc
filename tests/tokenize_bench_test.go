package tests

import (
	"math/rand/v2"
	"path/filepath"
	"strings"
	"testing"

	"github.com/ggload/ggload/lab/llama"
	"github.com/ggload/ggload/lab/testenv"
	"github.com/ggload/ggload/vocab"
)

// Tokenizing 1 MiB of mixed text (the pin's test inputs, fragments of
// many scripts, code, whitespace runs) and loading a vocabulary of 262,144
// tokens, ggload against libllama in the same process:
//
//	go test -run '^$' -bench 'Tokenize|VocabLoad' -benchtime 5x ./tests

// benchText is about 1 MiB of mixed, valid UTF-8 text.
func benchText(b *testing.B, src string) string {
	r := rand.New(rand.NewPCG(1, 2))
	inputs := pinInputs(b, filepath.Join(src, "models", "ggml-vocab-llama-bpe.gguf.inp"))
	var sb strings.Builder
	for sb.Len() < 1<<20 {
		switch r.IntN(3) {
		case 0:
			sb.WriteString(inputs[r.IntN(len(inputs))])
		default:
			p := textPieces[r.IntN(len(textPieces))]
			if strings.ToValidUTF8(p, "") == p && !strings.ContainsRune(p, 0) {
				sb.WriteString(p)
			}
			sb.WriteByte(' ')
		}
	}
	return sb.String()
}

func BenchmarkTokenize(b *testing.B) {
	rt := testenv.Runtime(b)
	src := testenv.SourceTree(b)
	l, err := llama.Open(rt)
	if err != nil {
		testenv.Missing(b, "llama", "%v", err)
	}
	text := benchText(b, src)
	for _, name := range []string{"llama-bpe", "qwen2", "gemma-4", "bert-bge"} {
		path := filepath.Join(src, "models", "ggml-vocab-"+name+".gguf")
		ours, err := vocab.Open(path)
		if err != nil {
			b.Fatal(err)
		}
		theirs, err := l.LoadVocab(path)
		if err != nil {
			b.Fatal(err)
		}
		b.Run(name+"/ggload", func(b *testing.B) {
			b.SetBytes(int64(len(text)))
			for b.Loop() {
				if _, err := ours.Tokenize(text, true, true); err != nil {
					b.Fatal(err)
				}
			}
		})
		b.Run(name+"/llama.cpp", func(b *testing.B) {
			b.SetBytes(int64(len(text)))
			for b.Loop() {
				if _, err := theirs.Tokenize(text, true, true); err != nil {
					b.Fatal(err)
				}
			}
		})
		theirs.Free()
	}
}

func BenchmarkVocabLoad(b *testing.B) {
	rt := testenv.Runtime(b)
	src := testenv.SourceTree(b)
	l, err := llama.Open(rt)
	if err != nil {
		testenv.Missing(b, "llama", "%v", err)
	}
	path := filepath.Join(src, "models", "ggml-vocab-gemma-4.gguf")
	b.Run("gemma-4/ggload", func(b *testing.B) {
		for b.Loop() {
			if _, err := vocab.Open(path); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("gemma-4/llama.cpp", func(b *testing.B) {
		for b.Loop() {
			if err := l.LoadVocabOnly(path); err != nil {
				b.Fatal(err)
			}
		}
	})
}
