// Command greedy runs a GGUF model from Go: it plans the model's
// placement as llama.cpp would, loads the weights, makes a context, then
// decodes the prompt's token ids and prints the greedy tokens that
// follow, each the argmax of the logits llama.cpp's forward pass gives.
//
//	go run ./examples/greedy MODEL.gguf 1,15,300 8
package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"

	"github.com/ggload/ggload/ggml"
	"github.com/ggload/ggload/gguf"
	"github.com/ggload/ggload/infer"
	"github.com/ggload/ggload/loader"
	"github.com/ggload/ggload/place"
)

func main() {
	if len(os.Args) != 4 {
		fmt.Fprintln(os.Stderr, "usage: greedy MODEL.gguf ID,ID,... STEPS")
		os.Exit(2)
	}
	var prompt []int32
	for _, f := range strings.Split(os.Args[2], ",") {
		id, err := strconv.ParseInt(f, 10, 32)
		if err != nil {
			fmt.Fprintf(os.Stderr, "greedy: token %q: %v\n", f, err)
			os.Exit(2)
		}
		prompt = append(prompt, int32(id))
	}
	steps, err := strconv.Atoi(os.Args[3])
	if err != nil || steps < 0 {
		fmt.Fprintf(os.Stderr, "greedy: steps %q: want a count\n", os.Args[3])
		os.Exit(2)
	}
	if err := greedy(os.Stdout, os.Args[1], prompt, steps, place.Params{}); err != nil {
		fmt.Fprintln(os.Stderr, "greedy:", err)
		os.Exit(1)
	}
}

// greedy decodes the prompt, then steps tokens, each fed back.
func greedy(w io.Writer, path string, prompt []int32, steps int, params place.Params) error {
	ctx := context.Background()
	rt, err := ggml.Open(ctx, ggml.Options{})
	if err != nil {
		return err
	}
	m, err := gguf.OpenModel(path)
	if err != nil {
		return err
	}
	defer m.Close()
	plan, err := place.New(ctx, rt, m, params)
	if err != nil {
		return err
	}
	model, err := loader.Load(ctx, plan, loader.Options{})
	if err != nil {
		return err
	}
	defer model.Close()
	lctx, err := infer.New(model, infer.Params{})
	if err != nil {
		return err
	}
	defer lctx.Close()

	batch := prompt
	for i := 0; i <= steps; i++ {
		if err := lctx.Decode(infer.Batch{Tokens: batch}); err != nil {
			return err
		}
		if i == steps {
			break
		}
		logits, err := lctx.Logits(-1)
		if err != nil {
			return err
		}
		next := int32(infer.Argmax(logits))
		fmt.Fprintln(w, next)
		batch = []int32{next}
	}
	return nil
}
