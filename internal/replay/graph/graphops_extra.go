// Port of llama.cpp ggml/src/ggml.c (v0.5.0): the checks of the
// chunked-attention, index and pooling ops.

package graph

import (
	"github.com/ggload/ggload/ggml/ops"
	"github.com/ggload/ggload/internal/replay/cpp"
)

// extraOps registers the ops of the chunked linear attention (triangular
// masks and solves), of the sparse attentions' index arithmetic, and the
// pooling.
func extraOps(out map[string]cpp.Builtin) {
	op(out, "ggml_arange", 4, func(c *gcall) (cpp.Val, error) {
		ctx, err := c.ctx(0)
		if err != nil {
			return cpp.Void, err
		}
		return c.result(c.lib().Arange(ctx, c.f32(1), c.f32(2), c.f32(3)))
	})
	tensorOp(out, "ggml_tri", 3, 1, func(c *gcall, ctx *ops.Context, ts []*ops.Tensor) (*ops.Tensor, error) {
		return c.lib().Tri(ctx, ts[0], c.i32(2))
	})
	// ggml_solve_tri(ctx, a, b, left, lower, uni)
	tensorOp(out, "ggml_solve_tri", 6, 2, func(c *gcall, ctx *ops.Context, ts []*ops.Tensor) (*ops.Tensor, error) {
		return c.lib().SolveTri(ctx, ts[0], ts[1], c.v[3].Truthy(), c.v[4].Truthy(), c.v[5].Truthy())
	})
	// ggml_pool_2d(ctx, a, op, k0, k1, s0, s1, p0, p1)
	tensorOp(out, "ggml_pool_2d", 9, 1, func(c *gcall, ctx *ops.Context, ts []*ops.Tensor) (*ops.Tensor, error) {
		return c.lib().Pool2D(ctx, ts[0], c.i32(2), c.i(3), c.i(4), c.i(5), c.i(6), c.f32(7), c.f32(8))
	})
}
