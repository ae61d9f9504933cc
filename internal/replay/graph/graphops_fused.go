// Port of llama.cpp ggml/src/ggml.c (v0.5.0): the checks of the recurrent,
// linear-attention and fused ops.

package graph

import (
	"github.com/ggload/ggload/ggml/ops"
	"github.com/ggload/ggload/internal/replay/cpp"
)

// The recurrent, linear-attention and fused ops of the newer
// architectures: RWKV's, gated linear attention, Mamba's convolution and
// scan, the gated delta net (Qwen3-Next, Qwen3.5, Kimi's KDA), the
// lightning indexer of sparse attention (DeepSeek-V3.2, GLM-DSA), and the
// hyper-connections of DeepSeek V4.

// linearOps registers the recurrent and linear-attention ops.
func linearOps(out map[string]cpp.Builtin) {
	tensorOp(out, "ggml_rwkv_wkv6", 7, 6, func(c *gcall, ctx *ops.Context, ts []*ops.Tensor) (*ops.Tensor, error) {
		return c.lib().RWKVWKV6(ctx, ts[0], ts[1], ts[2], ts[3], ts[4], ts[5])
	})
	tensorOp(out, "ggml_gated_linear_attn", 7, 5, func(c *gcall, ctx *ops.Context, ts []*ops.Tensor) (*ops.Tensor, error) {
		return c.lib().GatedLinearAttn(ctx, ts[0], ts[1], ts[2], ts[3], ts[4], c.f32(6))
	})
	tensorOp(out, "ggml_rwkv_wkv7", 8, 7, func(c *gcall, ctx *ops.Context, ts []*ops.Tensor) (*ops.Tensor, error) {
		return c.lib().RWKVWKV7(ctx, ts[0], ts[1], ts[2], ts[3], ts[4], ts[5], ts[6])
	})
	tensorOp(out, "ggml_ssm_conv", 3, 2, func(c *gcall, ctx *ops.Context, ts []*ops.Tensor) (*ops.Tensor, error) {
		return c.lib().SSMConv(ctx, ts[0], ts[1])
	})
	tensorOp(out, "ggml_ssm_scan", 9, 7, func(c *gcall, ctx *ops.Context, ts []*ops.Tensor) (*ops.Tensor, error) {
		return c.lib().SSMScan(ctx, ts[0], ts[1], ts[2], ts[3], ts[4], ts[5], ts[6], c.i(8))
	})
	// ggml_gated_delta_net(ctx, q, k, v, g, beta, state, K)
	tensorOp(out, "ggml_gated_delta_net", 8, 6, func(c *gcall, ctx *ops.Context, ts []*ops.Tensor) (*ops.Tensor, error) {
		return c.lib().GatedDeltaNet(ctx, ts[0], ts[1], ts[2], ts[3], ts[4], ts[5], c.i(7))
	})
}

// fusedOps registers the fused ops.
func fusedOps(out map[string]cpp.Builtin) {
	// ggml_lightning_indexer(ctx, q, k, weights, mask)
	tensorOp(out, "ggml_lightning_indexer", 5, 4, func(c *gcall, ctx *ops.Context, ts []*ops.Tensor) (*ops.Tensor, error) {
		return c.lib().LightningIndexer(ctx, ts[0], ts[1], ts[2], ts[3])
	})
	// ggml_dsv4_hc_comb(ctx, mixes, scale, base, eps, n_iter)
	tensorOp(out, "ggml_dsv4_hc_comb", 6, 3, func(c *gcall, ctx *ops.Context, ts []*ops.Tensor) (*ops.Tensor, error) {
		return c.lib().DSV4HCComb(ctx, ts[0], ts[1], ts[2], c.f32(4), c.i(5))
	})
	// ggml_dsv4_hc_post(ctx, x, residual, post, comb): comb may be null
	tensorOp(out, "ggml_dsv4_hc_post", 5, 3, func(c *gcall, ctx *ops.Context, ts []*ops.Tensor) (*ops.Tensor, error) {
		comb, err := c.opt(4)
		if err != nil {
			return nil, err
		}
		return c.lib().DSV4HCPost(ctx, ts[0], ts[1], ts[2], comb)
	})
}
