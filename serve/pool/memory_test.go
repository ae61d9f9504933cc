package pool_test

import (
	"context"
	"errors"
	"slices"
	"testing"

	"github.com/ggload/ggload/lab/testenv"
	"github.com/ggload/ggload/serve/pool"
)

// TestMemoryIsThePlan: what a loaded model holds, as its engine
// allocated it, is what its plan said to the byte, on the CPU; unloading
// gives every buffer back and the ledger returns to zero.
func TestMemoryIsThePlan(t *testing.T) {
	a := modelFile(t, 7)
	p := newPool(t, pool.Params{})
	if err := p.Add("a", cpuOptions(a)); err != nil {
		t.Fatal(err)
	}
	live := testenv.LiveBuffers()
	l := acquire(t, p, "a")
	in, err := p.Model("a")
	if err != nil {
		t.Fatal(err)
	}
	if in.Status != pool.Loaded || len(in.Memory) == 0 || !slices.Equal(in.Memory, in.Planned) {
		t.Fatalf("%s: held %v, planned %v", in.Status, in.Memory, in.Planned)
	}
	sum := uint64(0)
	for _, m := range l.Engine().Memory().Weights {
		sum += m.Bytes
	}
	for _, m := range l.Engine().Memory().Context {
		sum += m.Bytes
	}
	if h := held(p); h != sum || in.Memory[0].Bytes != sum {
		t.Fatalf("the pool holds %d, the engine %d", h, sum)
	}
	if testenv.LiveBuffers() <= live {
		t.Fatal("the load made no buffer")
	}
	greedy(t, l, []int32{1, 500, 600}, 4)
	l.Release()
	if err := p.Unload(context.Background(), "a"); err != nil {
		t.Fatal(err)
	}
	if h := held(p); h != 0 {
		t.Fatalf("%d bytes held after the unload", h)
	}
	if n := testenv.LiveBuffers(); n != live {
		t.Fatalf("%d buffers live after the unload, %d before the load", n, live)
	}
	if err := p.Unload(context.Background(), "a"); !errors.Is(err, pool.ErrNotLoaded) {
		t.Fatalf("a second unload: %v", err)
	}
}
