// Port of llama.cpp ggml/src/ggml.c (v0.5.0): the checks of the ops of the
// projectors' graphs.

package graph

import (
	"github.com/ggload/ggload/ggml/ops"
	"github.com/ggload/ggload/internal/replay/cpp"
)

// conv6 is the shape of the 2D convolutions: two tensors, then strides,
// paddings and dilations of both dimensions (ints).
type conv6 func(*ops.Lib, *ops.Context, *ops.Tensor, *ops.Tensor, int32, int32, int32, int32, int32, int32) (*ops.Tensor, error)

// conv3 is the shape of the 1D convolutions: two tensors, then stride,
// padding and dilation.
type conv3 func(*ops.Lib, *ops.Context, *ops.Tensor, *ops.Tensor, int32, int32, int32) (*ops.Tensor, error)

// ggml_NAME(ctx, a, b, s0, s1, p0, p1, d0, d1)
func conv2D(out map[string]cpp.Builtin, name string, fn conv6) {
	tensorOp(out, name, 9, 2, func(c *gcall, ctx *ops.Context, ts []*ops.Tensor) (*ops.Tensor, error) {
		return fn(c.lib(), ctx, ts[0], ts[1], c.i32(3), c.i32(4), c.i32(5), c.i32(6), c.i32(7), c.i32(8))
	})
}

// ggml_NAME(ctx, a, b, s0, p0, d0)
func conv1D(out map[string]cpp.Builtin, name string, fn conv3) {
	tensorOp(out, name, 6, 2, func(c *gcall, ctx *ops.Context, ts []*ops.Tensor) (*ops.Tensor, error) {
		return fn(c.lib(), ctx, ts[0], ts[1], c.i32(3), c.i32(4), c.i32(5))
	})
}

// clipOps registers the ops of the multimodal projectors' graphs (the
// vision and audio encoders): convolutions, im2col and col2im, pooling,
// windows, resampling, padding by reflection, roll, and the activations,
// GLUs and reductions they use.
func clipOps(out map[string]cpp.Builtin) {
	for name, fn := range map[string]op1{
		"ggml_gelu_erf": (*ops.Lib).GeluErf, "ggml_gelu_quick": (*ops.Lib).GeluQuick,
		"ggml_gelu_inplace": (*ops.Lib).GeluInplace, "ggml_relu_inplace": (*ops.Lib).ReluInplace,
		"ggml_step": (*ops.Lib).Step, "ggml_elu": (*ops.Lib).Elu, "ggml_sin": (*ops.Lib).Sin,
		"ggml_cos": (*ops.Lib).Cos, "ggml_log": (*ops.Lib).Log, "ggml_sum": (*ops.Lib).Sum,
		"ggml_hardswish": (*ops.Lib).Hardswish, "ggml_hardsigmoid": (*ops.Lib).Hardsigmoid,
		"ggml_swiglu_swapped": (*ops.Lib).SwigluSwapped,
	} {
		unary(out, name, fn)
	}
	for name, fn := range map[string]op2{
		"ggml_geglu_quick_split": (*ops.Lib).GegluQuickSplit, "ggml_geglu_erf_split": (*ops.Lib).GegluErfSplit,
	} {
		binary(out, name, fn)
	}
	for name, fn := range map[string]conv6{
		"ggml_conv_2d": (*ops.Lib).Conv2D, "ggml_conv_2d_direct": (*ops.Lib).Conv2DDirect,
		"ggml_conv_2d_dw": (*ops.Lib).Conv2DDw, "ggml_conv_2d_dw_direct": (*ops.Lib).Conv2DDwDirect,
	} {
		conv2D(out, name, fn)
	}
	for name, fn := range map[string]conv3{
		"ggml_conv_1d": (*ops.Lib).Conv1D, "ggml_conv_1d_dw": (*ops.Lib).Conv1DDw,
	} {
		conv1D(out, name, fn)
	}
	// ggml_im2col(ctx, a, b, s0, s1, p0, p1, d0, d1, is_2D, dst_type)
	tensorOp(out, "ggml_im2col", 11, 2, func(c *gcall, ctx *ops.Context, ts []*ops.Tensor) (*ops.Tensor, error) {
		return c.lib().Im2Col(ctx, ts[0], ts[1], c.i32(3), c.i32(4), c.i32(5), c.i32(6), c.i32(7), c.i32(8), c.v[9].Truthy(), c.i32(10))
	})
	// ggml_col2im_1d(ctx, a, s0, oc, p0)
	tensorOp(out, "ggml_col2im_1d", 5, 1, func(c *gcall, ctx *ops.Context, ts []*ops.Tensor) (*ops.Tensor, error) {
		return c.lib().Col2Im1D(ctx, ts[0], c.i32(2), c.i32(3), c.i32(4))
	})
	// ggml_pool_1d(ctx, a, op, k0, s0, p0)
	tensorOp(out, "ggml_pool_1d", 6, 1, func(c *gcall, ctx *ops.Context, ts []*ops.Tensor) (*ops.Tensor, error) {
		return c.lib().Pool1D(ctx, ts[0], c.i32(2), c.i32(3), c.i32(4), c.i32(5))
	})
	tensorOp(out, "ggml_pad_reflect_1d", 4, 1, func(c *gcall, ctx *ops.Context, ts []*ops.Tensor) (*ops.Tensor, error) {
		return c.lib().PadReflect1D(ctx, ts[0], c.i32(2), c.i32(3))
	})
	tensorOp(out, "ggml_roll", 6, 1, func(c *gcall, ctx *ops.Context, ts []*ops.Tensor) (*ops.Tensor, error) {
		return c.lib().Roll(ctx, ts[0], [4]int32{c.i32(2), c.i32(3), c.i32(4), c.i32(5)})
	})
	// ggml_interpolate(ctx, a, ne0, ne1, ne2, ne3, mode): mode a uint32_t
	tensorOp(out, "ggml_interpolate", 7, 1, func(c *gcall, ctx *ops.Context, ts []*ops.Tensor) (*ops.Tensor, error) {
		return c.lib().Interpolate(ctx, ts[0], c.ne(2, 4), uint32(c.i(6)))
	})
	tensorOp(out, "ggml_upscale", 4, 1, func(c *gcall, ctx *ops.Context, ts []*ops.Tensor) (*ops.Tensor, error) {
		return c.lib().Upscale(ctx, ts[0], c.i32(2), c.i32(3))
	})
	tensorOp(out, "ggml_argsort", 3, 1, func(c *gcall, ctx *ops.Context, ts []*ops.Tensor) (*ops.Tensor, error) {
		return c.lib().Argsort(ctx, ts[0], c.i32(2))
	})
	tensorOp(out, "ggml_win_part", 3, 1, func(c *gcall, ctx *ops.Context, ts []*ops.Tensor) (*ops.Tensor, error) {
		return c.lib().WinPart(ctx, ts[0], c.i32(2))
	})
	// ggml_win_unpart(ctx, a, w0, h0, w)
	tensorOp(out, "ggml_win_unpart", 5, 1, func(c *gcall, ctx *ops.Context, ts []*ops.Tensor) (*ops.Tensor, error) {
		return c.lib().WinUnpart(ctx, ts[0], c.i32(2), c.i32(3), c.i32(4))
	})
}
