package serve_test

import (
	"context"
	"fmt"

	"github.com/ggload/ggload/ggml"
	"github.com/ggload/ggload/gguf"
	"github.com/ggload/ggload/loader"
	"github.com/ggload/ggload/place"
	"github.com/ggload/ggload/serve"
)

// An engine of llama-server's default slots (-np 4 -kvu) on a model, and
// a streamed completion.
func Example() {
	ctx := context.Background()
	rt, err := ggml.Open(ctx, ggml.Options{})
	if err != nil {
		panic(err)
	}
	m, err := gguf.OpenModel("model.gguf")
	if err != nil {
		panic(err)
	}
	defer m.Close()
	plan, err := place.New(ctx, rt, m, place.Params{Context: place.ContextParams{NCtx: 8192, NParallel: 4, KVUnified: true}})
	if err != nil {
		panic(err)
	}
	lm, err := loader.Load(ctx, plan, loader.Options{})
	if err != nil {
		panic(err)
	}
	defer lm.Close()
	e, err := serve.New(lm, serve.Params{})
	if err != nil {
		panic(err)
	}
	defer e.Close()
	prompt, _ := e.Vocab().Tokenize("The capital of France is", true, true)
	o := e.Defaults()
	o.NPredict, o.Stream = 16, true
	r, err := e.Complete(ctx, prompt, o, func(ev serve.Event) error {
		if ev.Token != nil {
			fmt.Print(ev.Token.Text)
		}
		return nil
	})
	if err != nil {
		panic(err)
	}
	fmt.Println("\nstopped by", r.Stop, "after", r.NDecoded, "tokens")
}
