package arch

import (
	"errors"
	"fmt"
	"testing"

	"github.com/ggload/ggload/bindings"
)

// IsEvalError reports whether err is a construct the evaluator does not
// know (a defect of ggload, never of the file).
func IsEvalError(err error) bool {
	var e *evalError
	return errors.As(err, &e)
}

// RunOps runs a program body with "ctx" a no_alloc ggml context of a
// graph being built, "gf" its graph and "t" a 4×6 f32 tensor in it; the
// result is the body's integer.
func RunOps(t *testing.T, lib *bindings.Lib, body string) (int64, error) {
	t.Helper()
	r, err := Load(memModel(t, llamaWriter(t, false)), Options{})
	if err != nil {
		t.Fatal(err)
	}
	s := &GraphSession{r: r, lib: lib, weights: map[*Tensor]*bindings.Tensor{}}
	const n = 256
	g := &graphState{GraphSession: s, size: n, inGraph: map[*bindings.Tensor]bool{}}
	g.ctx = lib.Init(bindings.InitParams{MemSize: lib.TensorOverhead()*n + lib.GraphOverheadCustom(n, false), NoAlloc: true})
	if g.ctx == 0 {
		t.Fatal("ggml_init failed")
	}
	g.ctxSize, g.overhead = lib.GetMemSize(g.ctx), lib.TensorOverhead()
	g.gf = lib.NewGraphCustom(g.ctx, n, false)
	defer g.free()
	r.graph = g
	defer func() { r.graph = nil }()
	p, err := decodeProgram("fn test test.cpp:1\n(block (decl \"ctx\") (decl \"gf\"))\n(block (decl \"t\" (call ggml_new_tensor_2d ctx 0 4 6)) " + body + ")")
	if err != nil {
		t.Fatal(err)
	}
	resolveGlobals(p)
	resolveLocals(p)
	compile(p)
	v, err := r.call(p, Val{K: KObj, P: r.model}, []Val{{K: KNative, P: nativeCtx{g.ctx}}, {K: KNative, P: nativeGraph{g.gf}}})
	if err != nil {
		return 0, err
	}
	if v.K != KInt {
		return 0, fmt.Errorf("the body returned %s", v.describe())
	}
	return v.I, nil
}
