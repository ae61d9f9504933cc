package infer_test

import (
	"context"
	"fmt"
	"log"

	"github.com/ggload/ggload/ggml"
	"github.com/ggload/ggload/gguf"
	"github.com/ggload/ggload/infer"
	"github.com/ggload/ggload/loader"
	"github.com/ggload/ggload/place"
	"github.com/ggload/ggload/sample"
	"github.com/ggload/ggload/vocab"
)

// From a path to text, as examples/generate does (and the README shows):
// plan, load, make a context, tokenize, then decode and sample, one
// token at a time. The model is random weights over a vocabulary of
// English word pieces (lab/synth), so the words come at random; a seed
// makes them the same each run, as in llama.cpp.
func Example() {
	ctx := context.Background()
	rt := must(ggml.Open(ctx, ggml.Options{}))
	defer rt.Close()
	m := must(gguf.OpenModel("../loader/testdata/tiny-words.gguf"))
	defer m.Close()
	plan := must(place.New(ctx, rt, m, place.Params{DeviceNames: []string{"none"}}))
	model := must(loader.Load(ctx, plan, loader.Options{}))
	defer model.Close()
	lctx := must(infer.New(model, infer.Params{}))
	defer lctx.Close()
	v := must(vocab.Load(m))
	smpl := must(sample.New(v, sample.Params{Seed: 7}))
	toks := must(v.Tokenize("the people of the", true, true))
	var text []byte
	for range 12 {
		must(0, lctx.Decode(infer.Batch{Tokens: toks}))
		id := must(smpl.Sample(must(lctx.Logits(-1))))
		if v.IsEOG(id) {
			break
		}
		smpl.Accept(id)
		text = must(v.AppendPiece(text, id, 0, false))
		toks = []vocab.Token{id}
	}
	fmt.Printf("%q\n", text)
	// Output:
	// " you has after when left made may no picture own where left"
}

func must[T any](v T, err error) T {
	if err != nil {
		log.Fatal(err)
	}
	return v
}
