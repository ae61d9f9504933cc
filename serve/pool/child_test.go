package pool_test

import (
	"context"
	"fmt"
	"os"
	"runtime"
	"runtime/debug"
	"strconv"
	"strings"

	"github.com/ggload/ggload/bindings"
	"github.com/ggload/ggload/ggml"
	"github.com/ggload/ggload/serve/pool"
)

// childEnv makes the test binary a child of BenchmarkResidentRSS: "DIR
// NAME,NAME,...": a pool over the models directory that loads the named
// models and serves one request on each, then prints its resident
// memory, what the pool counts, and the Go heap.
const childEnv = "GGLOAD_POOL_CHILD"

func child(arg string) int {
	fail := func(err error) int { fmt.Fprintln(os.Stderr, err); return 1 }
	dir, list, ok := strings.Cut(arg, " ")
	if !ok {
		return fail(fmt.Errorf("%s: want DIR NAMES", childEnv))
	}
	if _, ok := os.LookupEnv("GGML_VK_VISIBLE_DEVICES"); !ok {
		_ = bindings.Setenv("GGML_VK_VISIBLE_DEVICES", "0")
	}
	rt, err := ggml.Open(context.Background(), ggml.Options{})
	if err != nil {
		return fail(err)
	}
	o := benchOptions(1)
	o.Serve.NoCacheRAM = true
	p, err := pool.New(rt, pool.Params{ModelsDir: dir, ModelsMax: -1, Defaults: o})
	if err != nil {
		return fail(err)
	}
	counted := uint64(0)
	for _, name := range strings.Split(list, ",") {
		l, err := p.Acquire(context.Background(), name, true)
		if err != nil {
			return fail(err)
		}
		o := l.Engine().Defaults()
		o.NPredict = 1
		if _, err := l.Engine().Complete(context.Background(), benchPrompt, o, nil); err != nil {
			return fail(err)
		}
		l.Release()
	}
	for _, m := range p.Memory() {
		counted += m.Held
	}
	for _, name := range strings.Split(list, ",") {
		if in, err := p.Model(name); err != nil || in.Status != pool.Loaded {
			return fail(fmt.Errorf("%s is not resident: %v %v", name, in.Status, err))
		}
	}
	// (the Go heap's garbage returned first: what stays is what is held)
	runtime.GC()
	debug.FreeOSMemory()
	st, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return fail(err)
	}
	var rss uint64
	for _, l := range strings.Split(string(st), "\n") {
		if f := strings.Fields(l); len(f) >= 2 && f[0] == "VmRSS:" {
			kb, _ := strconv.ParseUint(f[1], 10, 64)
			rss = kb << 10
		}
	}
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	fmt.Println(rss, counted, ms.HeapInuse)
	return 0
}
