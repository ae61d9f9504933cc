package synth

import (
	"github.com/ggload/ggload/ggml"
	"github.com/ggload/ggload/internal/synthmodel"
)

// Tokenizer is a synthesized model's vocabulary (synthmodel's).
type Tokenizer = synthmodel.Tokenizer

// DemoVocab is a SentencePiece vocabulary of size common English word
// pieces (synthmodel's, which the demo's model holds).
func DemoVocab(size int) Tokenizer { return synthmodel.DemoVocab(size) }

// TinyWords is the model of loader/testdata/tiny-words.gguf, which the
// Examples of vocab, sample and infer run: a two-layer llama with a
// vocabulary of 1024 English word pieces (DemoVocab) that its output
// layer leans to, q4_0 matrices and q8_0 embeddings, 0.2 MiB.
var TinyWords = Spec{
	Name:       "tiny-words",
	Layers:     2,
	Embd:       64,
	FF:         128,
	Heads:      4,
	Vocab:      1024,
	Weights:    ggml.TypeQ4_0,
	Embeddings: ggml.TypeQ8_0,
	Seed:       61,
	Tokenizer:  &tinyVocab,
}

var tinyVocab = DemoVocab(1024)
