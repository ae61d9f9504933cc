// Command server mounts llama-server's HTTP API, over a model ggload
// loads, in a program's own mux: the API answers under /llm/ (OpenAI's
// /llm/v1/chat/completions, /llm/v1/completions, /llm/v1/embeddings,
// llama.cpp's /llm/completion, ...) beside the program's own routes.
//
//	go run ./examples/server MODEL.gguf [ADDRESS]
//
//	curl localhost:8080/llm/v1/completions -d '{"prompt": "Hello", "max_tokens": 8}'
package main

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/signal"
	"time"

	"github.com/ggload/ggload/ggml"
	"github.com/ggload/ggload/gguf"
	"github.com/ggload/ggload/loader"
	"github.com/ggload/ggload/place"
	"github.com/ggload/ggload/serve"
	"github.com/ggload/ggload/serve/httpapi"
)

func main() {
	if len(os.Args) < 2 || len(os.Args) > 3 {
		fmt.Fprintln(os.Stderr, "usage: server MODEL.gguf [ADDRESS]")
		os.Exit(2)
	}
	addr := "127.0.0.1:8080"
	if len(os.Args) == 3 {
		addr = os.Args[2]
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	mux, closeAll, err := newMux(ctx, os.Args[1], place.Params{Context: place.ContextParams{NCtx: 4096, NParallel: 4, KVUnified: true}})
	if err != nil {
		fmt.Fprintln(os.Stderr, "server:", err)
		os.Exit(1)
	}
	defer closeAll()
	srv := &http.Server{Addr: addr, Handler: mux, ReadHeaderTimeout: 10 * time.Second, IdleTimeout: time.Minute}
	go func() {
		<-ctx.Done()
		srv.Close()
	}()
	fmt.Fprintf(os.Stderr, "server: listening on http://%s/llm/\n", addr)
	if err := srv.ListenAndServe(); err != http.ErrServerClosed {
		fmt.Fprintln(os.Stderr, "server:", err)
		os.Exit(1)
	}
}

// newMux loads the model and returns the program's mux: its own
// /healthz, and llama-server's API under /llm/.
func newMux(ctx context.Context, path string, params place.Params) (http.Handler, func(), error) {
	rt, err := ggml.Open(ctx, ggml.Options{})
	if err != nil {
		return nil, nil, err
	}
	m, err := gguf.OpenModel(path)
	if err != nil {
		return nil, nil, err
	}
	plan, err := place.New(ctx, rt, m, params)
	if err != nil {
		m.Close()
		return nil, nil, err
	}
	lm, err := loader.Load(ctx, plan, loader.Options{})
	if err != nil {
		m.Close()
		return nil, nil, err
	}
	e, err := serve.New(lm, serve.Params{})
	if err != nil {
		lm.Close()
		m.Close()
		return nil, nil, err
	}
	mo, err := httpapi.NewModel(e, lm, path, []string{"my-model"}, nil, httpapi.Settings{})
	if err != nil {
		e.Close()
		lm.Close()
		m.Close()
		return nil, nil, err
	}
	api := httpapi.New(httpapi.Single{M: mo}, httpapi.Options{})
	api.SetReady()

	mux := http.NewServeMux()
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "ok\n") })
	mux.Handle("/llm/", http.StripPrefix("/llm", api))
	return mux, func() {
		e.Close()
		lm.Close()
		m.Close()
	}, nil
}
