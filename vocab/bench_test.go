package vocab_test

import (
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/ggload/ggload/lab/testenv"
	"github.com/ggload/ggload/vocab"
)

// BenchmarkOpen loads the 262k-token gemma-4 vocabulary.
func BenchmarkOpen(b *testing.B) {
	path := filepath.Join(testenv.SourceTree(b), "models", "ggml-vocab-gemma-4.gguf")
	for b.Loop() {
		if _, err := vocab.Open(path); err != nil {
			b.Fatal(err)
		}
	}
}

// benchText is about 1 MiB of mixed text: the pin's .inp inputs repeated,
// then random code points from several scripts.
func benchText(b *testing.B) string {
	dir := filepath.Join(testenv.SourceTree(b), "models")
	var sb strings.Builder
	for _, name := range []string{"llama-bpe", "qwen2", "gemma-4", "bert-bge"} {
		inp, err := os.ReadFile(filepath.Join(dir, "ggml-vocab-"+name+".gguf.inp"))
		if err != nil {
			b.Fatal(err)
		}
		sb.Write(inp)
	}
	base := strings.ReplaceAll(sb.String(), "\n__ggml_vocab_test__\n", "\n")
	sb.Reset()
	for sb.Len() < 768<<10 {
		sb.WriteString(base)
	}
	r := rand.New(rand.NewPCG(1, 2))
	ranges := [][2]rune{{0x20, 0x7e}, {0xa0, 0x24f}, {0x370, 0x3ff}, {0x400, 0x4ff}, {0x4e00, 0x9fff}, {0x3040, 0x30ff}, {0xac00, 0xd7a3}, {0x1f300, 0x1f64f}, {0x600, 0x6ff}, {0x900, 0x97f}}
	for sb.Len() < 1<<20 {
		if r.IntN(6) == 0 {
			sb.WriteByte(" \n\t"[r.IntN(3)])
			continue
		}
		rg := ranges[r.IntN(len(ranges))]
		sb.WriteRune(rg[0] + rune(r.IntN(int(rg[1]-rg[0]+1))))
	}
	return sb.String()
}

// BenchmarkTokenize tokenizes 1 MiB of mixed text with four vocabularies.
func BenchmarkTokenize(b *testing.B) {
	text := benchText(b)
	for _, name := range []string{"llama-bpe", "qwen2", "gemma-4", "bert-bge"} {
		b.Run(name, func(b *testing.B) {
			v, err := vocab.Open(filepath.Join(testenv.SourceTree(b), "models", "ggml-vocab-"+name+".gguf"))
			if err != nil {
				b.Fatal(err)
			}
			b.SetBytes(int64(len(text)))
			for b.Loop() {
				if _, err := v.Tokenize(text, false, false); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
