package ggload_test

import (
	"context"
	"fmt"
	"log"

	"github.com/ggload/ggload"
	"github.com/ggload/ggload/chat"
	"github.com/ggload/ggload/place"
	"github.com/ggload/ggload/sample"
)

// tinyWords is a tiny model of English word pieces: its weights are
// synthesized, its vocabulary is a real one.
const tinyWords = "loader/testdata/tiny-words.gguf"

// A model opened from its path, and text streamed from a prompt: here
// on the CPU alone (-dev none), eight tokens, with a fixed seed.
func ExampleOpen() {
	ctx := context.Background()
	m, err := ggload.Open(ctx, tinyWords, ggload.Options{Place: place.Params{DeviceNames: []string{"none"}}})
	if err != nil {
		log.Fatal(err)
	}
	defer m.Close()
	g := ggload.GenerateOptions{NPredict: 8, Sampling: sample.Params{Seed: 42}}
	for piece, err := range m.Generate(ctx, "the people of the", g) {
		if err != nil {
			log.Fatal(err)
		}
		fmt.Print(piece)
	}
	fmt.Println()
	// Output:
	// story back form him few more big under
}

// A conversation rendered with the model's chat template (ChatML, which
// llama.cpp falls back to where a model has none), and the reply parsed.
func ExampleModel_Chat() {
	ctx := context.Background()
	m, err := ggload.Open(ctx, tinyWords, ggload.Options{Place: place.Params{DeviceNames: []string{"none"}}})
	if err != nil {
		log.Fatal(err)
	}
	defer m.Close()
	msgs := []chat.Message{{Role: "system", Content: "Be brief."}, {Role: "user", Content: "Hello"}}
	p, err := m.ChatPrompt(msgs, ggload.ChatOptions{})
	if err != nil {
		log.Fatal(err)
	}
	fmt.Printf("%q\n", p.Prompt)
	reply, err := m.Chat(ctx, msgs, ggload.ChatOptions{GenerateOptions: ggload.GenerateOptions{NPredict: 6, Sampling: sample.Params{Seed: 7}}})
	if err != nil {
		log.Fatal(err)
	}
	fmt.Printf("%s: %q\n", reply.Role, reply.Content)
	// Output:
	// "<|im_start|>system\nBe brief.<|im_end|>\n<|im_start|>user\nHello<|im_end|>\n<|im_start|>assistant\n"
	// assistant: " may even tell try when will"
}

// Embeddings of a model opened as an embedding model (llama-server's
// --embeddings, pooled by their mean): one unit vector a text.
func ExampleModel_Embed() {
	ctx := context.Background()
	m, err := ggload.Open(ctx, tinyWords, ggload.Options{Place: place.Params{DeviceNames: []string{"none"},
		Context: place.ContextParams{Embeddings: true, Pooling: place.PoolingMean}}})
	if err != nil {
		log.Fatal(err)
	}
	defer m.Close()
	vecs, err := m.Embed(ctx, []string{"the people", "of the world"})
	if err != nil {
		log.Fatal(err)
	}
	for _, v := range vecs {
		var n float32
		for _, x := range v {
			n += x * x
		}
		fmt.Printf("%d dimensions, norm² %.4f, first %.4f\n", len(v), n, v[0])
	}
	// Output:
	// 64 dimensions, norm² 1.0000, first -0.0284
	// 64 dimensions, norm² 1.0000, first -0.0062
}
