package sample_test

import (
	"fmt"
	"log"
	"strings"

	"github.com/ggload/ggload/sample"
	"github.com/ggload/ggload/vocab"
)

// Draw tokens from logits with llama.cpp's default sampler chain
// (common_sampler_init's), seeded: the same seed draws the same tokens
// as llama.cpp. The logits here favour three words; a model's come from
// infer.Context.Logits.
func ExampleSampler() {
	v, err := vocab.Open("../loader/testdata/tiny-words.gguf")
	if err != nil {
		log.Fatal(err)
	}
	s, err := sample.New(v, sample.Params{Seed: 42}) // zero fields: llama.cpp's defaults
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(strings.TrimSpace(s.String())) // the chain, as llama.cpp prints it
	logits := make([]float32, v.NTokens())
	for i, w := range []string{"the", "people", "of"} {
		toks, err := v.Tokenize(w, false, false)
		if err != nil {
			log.Fatal(err)
		}
		logits[toks[0]] = float32(3 - i)
	}
	var text []byte
	for range 8 {
		id, err := s.Sample(logits)
		if err != nil {
			log.Fatal(err)
		}
		s.Accept(id)
		if text, err = v.AppendPiece(text, id, 0, false); err != nil {
			log.Fatal(err)
		}
	}
	fmt.Printf("%q\n", text)
	// Output:
	// logits -> ?penalties -> ?dry -> ?top-n-sigma -> top-k -> ?typical -> top-p -> min-p -> ?xtc -> temp-ext -> dist
	// " people the people the the the the the"
}
