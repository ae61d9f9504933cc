package vocab_test

import (
	"fmt"
	"log"

	"github.com/ggload/ggload/vocab"
)

// Tokenize text as llama.cpp does, from a GGUF's header alone, and turn
// the tokens back into text. The vocabulary is SentencePiece's (llama's
// tokenizer type) over 1,024 English word pieces: words it holds are one
// token, others fall to their pieces.
func ExampleVocab_Tokenize() {
	v, err := vocab.Open("../loader/testdata/tiny-words.gguf")
	if err != nil {
		log.Fatal(err)
	}
	toks, err := v.Tokenize("the people of the valley", true, false) // add_special, parse_special
	if err != nil {
		log.Fatal(err)
	}
	for _, t := range toks {
		piece, err := v.AppendPiece(nil, t, 0, true)
		if err != nil {
			log.Fatal(err)
		}
		fmt.Printf("%d %q\n", t, piece)
	}
	text, err := v.Detokenize(toks, true, false) // remove_special, unparse_special
	if err != nil {
		log.Fatal(err)
	}
	fmt.Printf("%q\n", text)
	// Output:
	// 1 "<s>"
	// 449 " the"
	// 612 " people"
	// 450 " of"
	// 449 " the"
	// 431 " v"
	// 388 "a"
	// 410 "l"
	// 410 "l"
	// 396 "e"
	// 436 "y"
	// " the people of the valley"
}
