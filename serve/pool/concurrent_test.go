package pool_test

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ggload/ggload/serve/pool"
)

// gate holds a model's load inside the loader (its progress callback)
// until it is opened.
type gate struct {
	entered chan struct{}
	open    chan struct{}
	calls   atomic.Int64
	once    sync.Once
}

func newGate() *gate { return &gate{entered: make(chan struct{}), open: make(chan struct{})} }

func (g *gate) progress(done, total uint64) bool {
	g.calls.Add(1)
	g.once.Do(func() { close(g.entered) })
	<-g.open
	return true
}

// TestConcurrentLoads: while one model's load is held inside the loader,
// another model loads and serves (loads run at once); the requests that
// ask for the held model at once all wait for its one load, and all get
// the same engine.
func TestConcurrentLoads(t *testing.T) {
	a, b := modelFile(t, 7), modelFile(t, 11)
	p := newPool(t, pool.Params{})
	g := newGate()
	oa := cpuOptions(a)
	oa.Load.Progress = g.progress
	if err := p.Add("a", oa); err != nil {
		t.Fatal(err)
	}
	if err := p.Add("b", cpuOptions(b)); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var loadsA atomic.Int64
	watched := make(chan struct{})
	events := p.Subscribe(ctx)
	go func() {
		defer close(watched)
		for ev := range events {
			if ev.Model == "a" && ev.Status == pool.Loading {
				loadsA.Add(1)
			}
		}
	}()
	n := 8
	if all() {
		n = 32
	}
	leases := make([]*pool.Lease, n)
	errs := make([]error, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			leases[i], errs[i] = p.Acquire(context.Background(), "a", true)
		}()
	}
	<-g.entered
	// a is inside its load: b loads beside it
	lb := acquire(t, p, "b")
	greedy(t, lb, []int32{1, 500}, 2)
	lb.Release()
	if s := status(t, p, "a"); s != pool.Loading {
		t.Fatalf("a is %s while its load is held", s)
	}
	close(g.open)
	wg.Wait()
	for i := range n {
		if errs[i] != nil {
			t.Fatal(errs[i])
		}
		if leases[i].Engine() != leases[0].Engine() {
			t.Fatal("two engines for one model")
		}
	}
	in, _ := p.Model("a")
	if in.Requests != n {
		t.Fatalf("%d requests on a, %d leased", in.Requests, n)
	}
	for _, l := range leases {
		l.Release()
		l.Release() // (a second release does nothing)
	}
	cancel()
	<-watched
	if loadsA.Load() != 1 {
		t.Fatalf("a loaded %d times", loadsA.Load())
	}
	if in, _ := p.Model("a"); in.Requests != 0 {
		t.Fatalf("%d requests left after the releases", in.Requests)
	}
}

// TestWaitForBusy: in room for one model, a request for the other waits
// while the resident one serves a request: refused when the wait ends
// (MaxWait), cancelled with its context, and served once the resident
// one is idle (evicted for it).
func TestWaitForBusy(t *testing.T) {
	a, b := modelFile(t, 7), modelFile(t, 11)
	need := needs(t, a, b)
	p := newPool(t, pool.Params{MaxWait: 200 * time.Millisecond, Budgets: []pool.Budget{{Device: pool.HostDevice, Bytes: max(need[0], need[1]) + 1}}})
	p.Add("a", cpuOptions(a))
	p.Add("b", cpuOptions(b))
	la := acquire(t, p, "a")
	// refused after the wait, with the reason
	t0 := time.Now()
	_, err := p.Acquire(context.Background(), "b", true)
	var room *pool.RoomError
	if !errors.As(err, &room) || !room.Waited || room.Alone || len(room.Short) != 1 || room.Short[0].Busy != need[0] {
		t.Fatalf("%v (%+v)", err, room)
	}
	if time.Since(t0) < 200*time.Millisecond {
		t.Fatalf("refused after %v", time.Since(t0))
	}
	t.Log(err)
	// a request that goes away stops waiting, and its load with it
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	_, err = p.Acquire(ctx, "b", true)
	cancel()
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatal(err)
	}
	waitStatus(t, p, "b", pool.Unloaded)
	if in, _ := p.Model("b"); in.Err != nil {
		t.Fatalf("a load nobody waited for failed: %v", in.Err)
	}
	// served once a is idle
	got := make(chan error, 1)
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		l, err := p.Acquire(ctx, "b", true)
		if err == nil {
			l.Release()
		}
		got <- err
	}()
	for status(t, p, "b") != pool.Loading {
		time.Sleep(time.Millisecond)
	}
	greedy(t, la, []int32{1, 500}, 2)
	la.Release()
	if err := <-got; err != nil {
		t.Fatal(err)
	}
	if s := status(t, p, "a"); s != pool.Unloaded {
		t.Fatalf("a is %s after b took its room", s)
	}
}

// TestModelsMax: --models-max caps the count where memory does not: the
// least recently used idle model goes.
func TestModelsMax(t *testing.T) {
	a, b, c := modelFile(t, 7), modelFile(t, 11), modelFile(t, 13)
	p := newPool(t, pool.Params{ModelsMax: 2})
	for n, path := range map[string]string{"a": a, "b": b, "c": c} {
		p.Add(n, cpuOptions(path))
	}
	for _, n := range []string{"a", "b", "a", "c"} {
		acquire(t, p, n).Release()
	}
	// b is the least recently used
	want := map[string]pool.Status{"a": pool.Loaded, "b": pool.Unloaded, "c": pool.Loaded}
	for n, s := range want {
		if got := status(t, p, n); got != s {
			t.Fatalf("%s is %s, want %s", n, got, s)
		}
	}
	if p.ModelsMax() != 2 {
		t.Fatal(p.ModelsMax())
	}
	// both busy: a third is refused, with the count as the reason
	q := newPool(t, pool.Params{ModelsMax: 1, MaxWait: -1})
	q.Add("a", cpuOptions(a))
	q.Add("b", cpuOptions(b))
	l := acquire(t, q, "a")
	defer l.Release()
	_, err := q.Acquire(context.Background(), "b", true)
	var room *pool.RoomError
	if !errors.As(err, &room) || room.Max != 1 || len(room.Short) != 0 {
		t.Fatalf("%v", err)
	}
	t.Log(err)
}
