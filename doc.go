// Package ggload is the one simple path from a model to text: open a
// model by its path, its URL or its Hugging Face repository, then
// generate text, chat and embed, from as many goroutines as you like.
//
//	m, err := ggload.Open(ctx, "model.gguf", ggload.Options{})
//	if err != nil {
//		return err
//	}
//	defer m.Close()
//	for piece, err := range m.Generate(ctx, "Once upon a time", ggload.GenerateOptions{}) {
//		if err != nil {
//			return err
//		}
//		fmt.Print(piece)
//	}
//
// It adds no behaviour of its own: Open does what `ggload serve MODEL`
// does before it listens (the runtime opened, the file read, the model
// placed with -fit as llama.cpp places it, the weights loaded,
// llama-server's engine started on them: package serve), and each call
// is a request to that engine, as llama-server's /completion,
// /v1/chat/completions and /v1/embeddings make it. The same seed and
// options give the same text, byte for byte.
//
// # Models
//
// Open's name is one of:
//
//   - a GGUF file's path (the first file of a split model);
//   - "hf:OWNER/NAME[:QUANT]": a Hugging Face repository, as llama.cpp's
//     -hf takes it (httpsrc.Pull: the Hugging Face cache shared with
//     llama.cpp and huggingface_hub; Options.Offline is --offline);
//   - an http:// or https:// URL: the file read over HTTP as ggload reads
//     one (httpsrc.OpenModel).
//
// The zero Options are llama.cpp's defaults and llama-server's: -fit on
// (the context shrunk to what the devices hold), 4 slots over one
// unified cache (-np auto), the CPU threads by the thread policy of
// package infer, the model's own sampling defaults. Every field is the
// option of the package that owns it.
//
// # Requests
//
// Generate streams text (an iter.Seq2 of pieces); Chat and ChatStream
// render the conversation with the model's chat template as llama-server
// renders it (package chat), and parse the reply into content, reasoning
// and tool calls; Embed gives the pooled, normalized embeddings of a
// model opened with Options.Place.Context.Embeddings (llama-server's
// --embeddings). Requests run at once in the engine's slots; a cancelled
// context, or a loop that stops ranging, ends its request and frees its
// slot.
//
// # Closing
//
// Close ends the requests under way (with serve.ErrClosed), stops the
// engine and frees everything Open made: the context, the weights'
// buffers, the runtime and the model's files. It may be called twice.
//
// For more than this path (a plan printed, weights read back, many
// models in one budget), the packages under it are each usable alone:
// place, loader, infer, serve, serve/pool, serve/httpapi.
package ggload
