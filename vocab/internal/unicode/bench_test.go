package unicode

import (
	"math/rand"
	"strings"
	"testing"
	"unicode/utf8"
)

// mixedText is about 1 MiB of valid UTF-8 drawn from the test corpus'
// pieces.
func mixedText() string {
	rng := rand.New(rand.NewSource(3))
	var atoms []string
	for _, a := range corpusAtoms {
		if utf8.ValidString(a) {
			atoms = append(atoms, a)
		}
	}
	var b strings.Builder
	for b.Len() < 1<<20 {
		b.WriteString(atoms[rng.Intn(len(atoms))])
		if rng.Intn(3) == 0 {
			b.WriteByte(' ')
		}
	}
	return b.String()
}

func benchmarkSplit(b *testing.B, pre string) {
	text := mixedText()
	exprs := PreRegexes[pre]
	b.SetBytes(int64(len(text)))
	b.ReportAllocs()
	for b.Loop() {
		if _, err := RegexSplit(text, exprs, true); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkRegexSplitLlama3(b *testing.B) { benchmarkSplit(b, "LLAMA3") }
func BenchmarkRegexSplitGPT2(b *testing.B)   { benchmarkSplit(b, "GPT2") }
