// Port of llama.cpp src/llama-adapter.cpp (v0.5.0): llama_adapter_cvec as
// the graphs read it (tensor_for, apply_to).

package graph

import (
	"fmt"

	"github.com/ggload/ggload/ggml/ops"
	"github.com/ggload/ggload/internal/replay/cpp"
	"github.com/ggload/ggload/internal/replay/cpp/ast"
)

// ControlVector is a context's llama_adapter_cvec as the graphs read it
// (tensor_for, apply_to): a direction tensor per layer (Tensors[0], and
// any layer past the slice or nil, has none) and the layers it applies
// to, both ends included; LayerStart and LayerEnd -1 (the zero value's
// empty Tensors too) apply none.
type ControlVector struct {
	Tensors              []*ops.Tensor
	LayerStart, LayerEnd int32
}

// SetControlVector sets the control vector the context's graphs are
// built with from now on.
func (c *Context) SetControlVector(cv ControlVector) {
	if c.rs != nil && c.rs.s != nil {
		c.rs.s.cvec = cv
	}
}

// cvecObject is the llama_adapter_cvec object of a graph's parameters.
func (s *GraphSession) cvecObject() *cpp.Object {
	cv := s.cvec
	if cv.Tensors == nil {
		cv.LayerStart, cv.LayerEnd = -1, -1
	}
	o := newShared("llama_adapter_cvec")
	o.Fields["layer_start"] = &cpp.Cell{T: ast.TI32, V: cpp.Int(int64(cv.LayerStart), ast.TI32)}
	o.Fields["layer_end"] = &cpp.Cell{T: ast.TI32, V: cpp.Int(int64(cv.LayerEnd), ast.TI32)}
	a := cpp.NewArray(ast.TPtr, len(cv.Tensors), false)
	for i, t := range cv.Tensors {
		a.Cells[i].V = cpp.Null
		if t != nil {
			a.Cells[i].V = cpp.Val{K: cpp.KNative, P: t}
		}
	}
	o.Fields["tensors"] = &cpp.Cell{V: cpp.Val{K: cpp.KArr, P: a}}
	return o
}

// Reserve is sched_reserve run again, as llama.cpp runs it at the next
// decode after the context's control vector changed: a new scheduler and
// the compute buffers reserved anew with the graphs as they are built
// now, over the memory's full context (init_full), as at the start (Res's
// buffers and counts are the new ones). The caller frees the graphs built
// on the scheduler before.
func (c *Context) Reserve() error {
	rs := c.rs
	if rs == nil {
		return fmt.Errorf("arch: the context is closed")
	}
	if !rs.own {
		return fmt.Errorf("arch: the scheduler is not the context's own")
	}
	if rs.sched != 0 {
		rs.lib.SchedFree(rs.sched)
		rs.sched = 0
	}
	if err := rs.scheduler(); err != nil {
		return err
	}
	rs.s.sched.h = rs.sched
	// the memory as init_full gives it (the decodes' views set on the
	// contexts before are not the reserve's)
	mctx, err := rs.s.kvContext(rs.p.Memory)
	if err != nil {
		return err
	}
	rs.s.mctx = mctx
	rs.out.Buffers = nil
	if err := rs.resolveFusedOps(); err != nil {
		return err
	}
	return rs.allocate()
}
