package graph

import (
	"fmt"
	"sort"
	"testing"

	"github.com/ggload/ggload/ggml/ops"
	"github.com/ggload/ggload/internal/replay/arch"
	"github.com/ggload/ggload/internal/replay/cpp"
)

// RunOps runs a program body with "ctx" a no_alloc ggml context of a
// graph being built, "gf" its graph and "t" a 4×6 f32 tensor in it; the
// result is the body's integer.
func RunOps(t *testing.T, lib *ops.Lib, r *arch.Run, body string) (int64, error) {
	t.Helper()
	s := &GraphSession{r: r, lib: lib, weights: map[*arch.Tensor]*ops.Tensor{}}
	const n = 256
	g := &graphState{GraphSession: s}
	g.ctx = lib.NewContext(lib.TensorOverhead()*n + lib.GraphOverheadCustom(n, false))
	if g.ctx == nil {
		t.Fatal("ggml_init failed")
	}
	g.gf = lib.NewGraph(g.ctx, n)
	defer g.free()
	r.Session = g
	defer func() { r.Session = nil }()
	p, err := cpp.DecodeProgram("fn test test.cpp:1\n(block (decl \"ctx\") (decl \"gf\"))\n(block (decl \"t\" (call ggml_new_tensor_2d ctx 0 4 6)) " + body + ")")
	if err != nil {
		t.Fatal(err)
	}
	arch.Library().Prepare(p)
	v, err := r.Call(p, cpp.Val{K: cpp.KObj, P: r.Model()}, []cpp.Val{{K: cpp.KNative, P: g.ctx}, {K: cpp.KNative, P: g.gf}})
	if err != nil {
		return 0, err
	}
	if v.K != cpp.KInt {
		return 0, fmt.Errorf("the body returned %s", v.Describe())
	}
	return v.I, nil
}

// GGMLOps are the ggml functions the graph programs call, by name.
func GGMLOps() []string {
	var out []string
	for n := range ggmlBuiltins() {
		out = append(out, n)
	}
	sort.Strings(out)
	return out
}
