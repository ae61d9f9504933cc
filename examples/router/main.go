// Command router mounts llama-server's HTTP API in router mode, over a
// pool of the models of a directory, in a program's own mux: each
// request names its model ("model": "NAME", the file's name without
// .gguf), which the pool loads where it fits the memory, evicting the
// least recently used idle model where it does not.
//
//	go run ./examples/router DIR [ADDRESS]
//
//	curl localhost:8080/llm/models
//	curl localhost:8080/llm/v1/completions -d '{"model": "NAME", "prompt": "Hello", "max_tokens": 8}'
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
	"github.com/ggload/ggload/place"
	"github.com/ggload/ggload/serve/httpapi"
	"github.com/ggload/ggload/serve/pool"
)

func main() {
	if len(os.Args) < 2 || len(os.Args) > 3 {
		fmt.Fprintln(os.Stderr, "usage: router DIR [ADDRESS]")
		os.Exit(2)
	}
	addr := "127.0.0.1:8080"
	if len(os.Args) == 3 {
		addr = os.Args[2]
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	rt, err := ggml.Open(ctx, ggml.Options{})
	if err != nil {
		fmt.Fprintln(os.Stderr, "router:", err)
		os.Exit(1)
	}
	defer rt.Close()
	mux, closePool, err := newMux(rt, pool.Params{ModelsDir: os.Args[1],
		Defaults: pool.Options{Place: place.Params{Context: place.ContextParams{NCtx: 4096}}}})
	if err != nil {
		fmt.Fprintln(os.Stderr, "router:", err)
		os.Exit(1)
	}
	defer closePool()
	srv := &http.Server{Addr: addr, Handler: mux, ReadHeaderTimeout: 10 * time.Second, IdleTimeout: time.Minute}
	go func() {
		<-ctx.Done()
		srv.Close()
	}()
	fmt.Fprintf(os.Stderr, "router: listening on http://%s/llm/\n", addr)
	if err := srv.ListenAndServe(); err != http.ErrServerClosed {
		fmt.Fprintln(os.Stderr, "router:", err)
		os.Exit(1)
	}
}

// newMux opens the pool and returns the program's mux: its own /healthz,
// and llama-server's API over the pool under /llm/.
func newMux(rt *ggml.Runtime, p pool.Params) (http.Handler, func(), error) {
	pl, err := pool.New(rt, p)
	if err != nil {
		return nil, nil, err
	}
	api := httpapi.New(httpapi.NewRouter(pl, httpapi.RouterOptions{}), httpapi.Options{})
	api.SetReady()

	mux := http.NewServeMux()
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "ok\n") })
	mux.Handle("/llm/", http.StripPrefix("/llm", api))
	return mux, func() { pl.Close() }, nil
}
