// Command generate runs a GGUF model from Go: a prompt in, sampled text
// streamed out, with llama.cpp's defaults at every stage.
//
//	go run ./examples/generate MODEL.gguf "Once upon a time"
package main

import (
	"context"
	"log"
	"os"

	"github.com/ggload/ggload/ggml"
	"github.com/ggload/ggload/gguf"
	"github.com/ggload/ggload/infer"
	"github.com/ggload/ggload/loader"
	"github.com/ggload/ggload/place"
	"github.com/ggload/ggload/sample"
	"github.com/ggload/ggload/vocab"
)

func main() {
	ctx := context.Background()
	rt := must(ggml.Open(ctx, ggml.Options{}))              // the native libraries (ggload fetch)
	m := must(gguf.OpenModel(os.Args[1]))                   // the file's header, in pure Go
	plan := must(place.New(ctx, rt, m, place.Params{}))     // where each tensor goes, as llama.cpp decides
	model := must(loader.Load(ctx, plan, loader.Options{})) // the weights on their devices
	lctx := must(infer.New(model, infer.Params{}))          // a llama.cpp context
	v := must(vocab.Load(m))                                // llama.cpp's tokenizer
	smpl := must(sample.New(v, sample.Params{}))            // and its sampler chain
	toks := must(v.Tokenize(os.Args[2], true, true))
	for range 64 {
		must(0, lctx.Decode(infer.Batch{Tokens: toks}))
		id := must(smpl.Sample(must(lctx.Logits(-1))))
		if v.IsEOG(id) {
			break
		}
		smpl.Accept(id)
		os.Stdout.Write(must(v.AppendPiece(nil, id, 0, false)))
		toks = []vocab.Token{id}
	}
}

func must[T any](v T, err error) T {
	if err != nil {
		log.Fatal(err)
	}
	return v
}
