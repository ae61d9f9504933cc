package pool_test

import (
	"context"
	"errors"
	"os"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/ggload/ggload/lab/testenv"
	"github.com/ggload/ggload/loader"
	"github.com/ggload/ggload/serve/pool"
)

// fds is the process's open file descriptors (-1 where it cannot tell).
func fds() int {
	es, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		return -1
	}
	return len(es)
}

// settle waits (a little) for the goroutines to come down to n.
func settle(n int) int {
	for range 200 {
		if g := runtime.NumGoroutine(); g <= n {
			return g
		}
		time.Sleep(5 * time.Millisecond)
	}
	return runtime.NumGoroutine()
}

// TestFaults: a model whose file is not a model, a progress callback
// that panics, a request that gives up: each fails its own load or
// request with the reason, while another model loads and serves beside
// them; afterwards the pool's goroutines, files and buffers are gone.
func TestFaults(t *testing.T) {
	a := modelFile(t, 7)
	dir := t.TempDir()
	bad := dir + "/bad.gguf"
	if err := os.WriteFile(bad, []byte("GGUF not really a model"), 0o644); err != nil {
		t.Fatal(err)
	}
	testenv.Runtime(t)
	g0, f0, b0 := runtime.NumGoroutine(), fds(), testenv.LiveBuffers()
	p, err := pool.New(testenv.Runtime(t), pool.Params{})
	if err != nil {
		t.Fatal(err)
	}
	p.Add("a", cpuOptions(a))
	p.Add("bad", cpuOptions(bad))
	op := cpuOptions(a)
	op.Load.Progress = func(done, total uint64) bool { panic("a progress callback that panics") }
	p.Add("panics", op)
	gate := newGate()
	og := cpuOptions(a)
	og.Load.Progress = gate.progress
	p.Add("held", og)

	// the held model's load is inside the loader before its requests come
	loaded := make(chan error, 1)
	go func() { loaded <- p.Load(context.Background(), "held") }()
	<-gate.entered
	rounds := 2
	if all() {
		rounds = 8
	}
	var wg sync.WaitGroup
	errs := make(chan error, 64)
	for range rounds {
		for _, name := range []string{"a", "bad", "panics"} {
			wg.Add(1)
			go func() {
				defer wg.Done()
				l, err := p.Acquire(context.Background(), name, true)
				if err != nil {
					errs <- err
					return
				}
				greedy(t, l, []int32{1, 500}, 2)
				l.Release()
			}()
		}
		// a request that gives up while its model loads
		wg.Add(1)
		go func() {
			defer wg.Done()
			ctx, cancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
			defer cancel()
			if _, err := p.Acquire(ctx, "held", true); !errors.Is(err, context.DeadlineExceeded) {
				errs <- errors.New("the held model's request did not give up: " + err.Error())
			}
		}()
	}
	wg.Wait()
	close(errs)
	var badErrs, panicErrs int
	for err := range errs {
		switch {
		case errors.Is(err, pool.ErrLoad) && strings.Contains(err.Error(), "name=bad"):
			badErrs++
		case errors.Is(err, pool.ErrLoad) && errors.Is(err, loader.ErrPanicked):
			panicErrs++
		default:
			t.Fatalf("unexpected: %v", err)
		}
	}
	if badErrs != rounds || panicErrs != rounds {
		t.Fatalf("%d failures of bad, %d of the panicking callback, want %d each", badErrs, panicErrs, rounds)
	}
	for name, want := range map[string]pool.Status{"a": pool.Loaded, "bad": pool.Unloaded, "panics": pool.Unloaded} {
		in, _ := p.Model(name)
		if in.Status != want || (want == pool.Unloaded) != (in.Err != nil) {
			t.Fatalf("%s: %s %v", name, in.Status, in.Err)
		}
	}
	// the held load goes on without the requests that gave up: opened,
	// it ends loaded and idle
	if s := status(t, p, "held"); s != pool.Loading {
		t.Fatalf("held is %s", s)
	}
	close(gate.open)
	if err := <-loaded; err != nil {
		t.Fatal(err)
	}
	waitStatus(t, p, "held", pool.Loaded)
	if err := p.Close(); err != nil {
		t.Fatal(err)
	}
	if g := settle(g0); g > g0 {
		buf := make([]byte, 1<<16)
		t.Fatalf("%d goroutines, %d before the pool:\n%s", g, g0, buf[:runtime.Stack(buf, true)])
	}
	if f := fds(); f != f0 {
		t.Fatalf("%d files open, %d before the pool", f, f0)
	}
	if b := testenv.LiveBuffers(); b != b0 {
		t.Fatalf("%d buffers live, %d before the pool", b, b0)
	}
	if _, err := p.Acquire(context.Background(), "a", true); !errors.Is(err, pool.ErrClosed) {
		t.Fatalf("after Close: %v", err)
	}
}

// TestConfigurePanics: a program's Configure that panics fails the
// pool's opening with the model's name, not the process.
func TestConfigurePanics(t *testing.T) {
	dir := t.TempDir()
	copyModel(t, modelFile(t, 7), dir, "m.gguf")
	_, err := pool.New(testenv.Runtime(t), pool.Params{ModelsDir: dir, Configure: func(string, []pool.Setting, *pool.Options) error {
		panic("Configure panics")
	}})
	if err == nil || !strings.Contains(err.Error(), "'m'") || !strings.Contains(err.Error(), "panicked") {
		t.Fatal(err)
	}
}
