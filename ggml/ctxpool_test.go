package ggml_test

import (
	"testing"
	"unsafe"

	"github.com/ggload/ggload/ggml/ops"
	"github.com/ggload/ggload/lab/testenv"
)

// A graph's context takes the memory a freed one left: what ggml makes in
// it starts fresh, whatever the last context wrote there.
func TestContextMemoryHandedOn(t *testing.T) {
	lib := testenv.Runtime(t).Ops()
	build := func(name string) (*ops.Context, *ops.Graph, *ops.Tensor) {
		t.Helper()
		c := lib.NewContext(1 << 20)
		if c == nil {
			t.Fatal("no context")
		}
		a, err := lib.NewTensor(c, 0, 2, [4]int64{8, 4, 1, 1})
		if err != nil {
			t.Fatal(err)
		}
		b, err := lib.NewTensor(c, 0, 2, [4]int64{8, 4, 1, 1})
		if err != nil {
			t.Fatal(err)
		}
		lib.SetName(a, name)
		sum, err := lib.Add(c, a, b)
		if err != nil {
			t.Fatal(err)
		}
		g := lib.NewGraph(c, 64)
		if err := lib.Expand(g, sum); err != nil {
			t.Fatal(err)
		}
		return c, g, a
	}
	c1, g1, a1 := build("first")
	if n := lib.NNodes(g1); n != 1 {
		t.Fatalf("first graph: %d nodes", n)
	}
	first := uintptr(unsafe.Pointer(a1))
	lib.Free(c1)
	c2, g2, _ := build("")
	defer lib.Free(c2)
	if n := lib.NNodes(g2); n != 1 {
		t.Errorf("a graph in handed-on memory: %d nodes, want 1", n)
	}
	// the same memory, and nothing of the first context's in it
	a2 := lib.Node(g2, 0).Src[0]
	if uintptr(unsafe.Pointer(a2)) != first {
		t.Errorf("the second context did not take the first's memory (%#x, %#x)", uintptr(unsafe.Pointer(a2)), first)
	}
	// an unnamed leaf gets its graph's name for it, not the name the
	// first context's tensor left there
	if name := ops.NameOf((*ops.Tensor)(a2)); name != "leaf_0" {
		t.Errorf("a new tensor in handed-on memory is named %q, want leaf_0", name)
	}
}
