package pool_test

import (
	"context"
	"fmt"
	"log"

	"github.com/ggload/ggload/ggml"
	"github.com/ggload/ggload/serve/pool"
)

// A pool over a directory of models, each request naming its model: the
// pool loads it (evicting the least recently used idle model where the
// memory asks for it), the request runs on its engine, and the lease
// ends with the request.
func Example() {
	rt, err := ggml.Open(context.Background(), ggml.Options{})
	if err != nil {
		log.Fatal(err)
	}
	defer rt.Close()
	p, err := pool.New(rt, pool.Params{ModelsDir: "/srv/models", SleepIdle: 0})
	if err != nil {
		log.Fatal(err)
	}
	defer p.Close()

	l, err := p.Acquire(context.Background(), "qwen3-8b", true)
	if err != nil {
		log.Fatal(err) // a *pool.RoomError says which device lacks what
	}
	defer l.Release()
	e := l.Engine()
	prompt, _ := e.Vocab().Tokenize("The capital of France is", true, true)
	o := e.Defaults()
	o.NPredict = 16
	r, err := e.Complete(context.Background(), prompt, o, nil)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(r.Content)
	for _, in := range p.Models() {
		fmt.Println(in.Name, in.Status, in.Memory)
	}
}
