package arch

import (
	"errors"
	"fmt"
	"testing"

	"github.com/ggload/ggload/ggml/ops"
)

// IsEvalError reports whether err is a construct the evaluator does not
// know (a defect of ggload, never of the file).
func IsEvalError(err error) bool {
	var e *EvalError
	return errors.As(err, &e)
}

// RunOps runs a program body with "ctx" a no_alloc ggml context of a
// graph being built, "gf" its graph and "t" a 4×6 f32 tensor in it; the
// result is the body's integer.
func RunOps(t *testing.T, lib *ops.Lib, body string) (int64, error) {
	t.Helper()
	r, err := Load(memModel(t, llamaWriter(t, false)), Options{})
	if err != nil {
		t.Fatal(err)
	}
	s := &GraphSession{r: r, lib: lib, weights: map[*Tensor]*ops.Tensor{}}
	const n = 256
	g := &graphState{GraphSession: s}
	g.ctx = lib.NewContext(lib.TensorOverhead()*n + lib.GraphOverheadCustom(n, false))
	if g.ctx == nil {
		t.Fatal("ggml_init failed")
	}
	g.gf = lib.NewGraph(g.ctx, n)
	defer g.free()
	r.graph = g
	defer func() { r.graph = nil }()
	p, err := DecodeProgram("fn test test.cpp:1\n(block (decl \"ctx\") (decl \"gf\"))\n(block (decl \"t\" (call ggml_new_tensor_2d ctx 0 4 6)) " + body + ")")
	if err != nil {
		t.Fatal(err)
	}
	programs.prepare(p)
	v, err := r.Call(p, Val{K: KObj, P: r.model}, []Val{{K: KNative, P: g.ctx}, {K: KNative, P: g.gf}})
	if err != nil {
		return 0, err
	}
	if v.K != KInt {
		return 0, fmt.Errorf("the body returned %s", v.Describe())
	}
	return v.I, nil
}
