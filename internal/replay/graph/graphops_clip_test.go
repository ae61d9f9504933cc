package graph_test

import (
	"errors"
	"testing"

	"github.com/ggload/ggload/internal/replay/arch"
)

// The projectors' ops are builtins of the graph programs: each makes
// ggml's tensor from the evaluator's arguments, and what ggml would
// assert on is an Abort.
func TestGraphOpsClip(t *testing.T) {
	ne := func(expr string, i int) string {
		return `(return (idx (mem "ne" ` + expr + `) ` + string(rune('0'+i)) + `))`
	}
	// a kernel of 2x2 patches of 3 channels to 5, an image of 8x6, depthwise
	// kernels of 3x3 for 3 channels, a signal of 10 by 4 channels
	const decls = `(decl "k" (call ggml_new_tensor_4d ctx 1 2 2 3 5)) (decl "img" (call ggml_new_tensor_4d ctx 0 8 6 3 1))
		(decl "dw" (call ggml_new_tensor_4d ctx 0 3 3 1 3)) (decl "sig" (call ggml_new_tensor_2d ctx 0 10 4)) `
	cases := []struct {
		name string
		body string
		want int64
	}{
		{"conv_2d", ne(`(call ggml_conv_2d ctx k img 2 2 0 0 1 1)`, 2), 5},
		{"conv_2d_direct", ne(`(call ggml_conv_2d_direct ctx k img 2 2 0 0 1 1)`, 1), 3},
		{"conv_2d_dw", ne(`(call ggml_conv_2d_dw ctx dw img 1 1 1 1 1 1)`, 0), 8},
		{"conv_2d_dw_direct", ne(`(call ggml_conv_2d_dw_direct ctx dw img 1 1 1 1 1 1)`, 1), 6},
		{"conv_1d", `(block (decl "k1" (call ggml_new_tensor_3d ctx 1 3 4 5)) ` + ne(`(call ggml_conv_1d ctx k1 sig 1 1 1)`, 1) + `)`, 5},
		{"conv_1d_dw", `(block (decl "d1" (call ggml_new_tensor_3d ctx 1 3 1 4)) ` + ne(`(call ggml_conv_1d_dw ctx d1 sig 1 1 1)`, 0) + `)`, 10},
		{"im2col", ne(`(call ggml_im2col ctx k img 2 2 0 0 1 1 1 1)`, 0), 12},
		{"col2im_1d", `(block (decl "cols" (call ggml_new_tensor_2d ctx 0 8 5)) ` + ne(`(call ggml_col2im_1d ctx cols 2 4 0)`, 0) + `)`, 10},
		{"pool_1d", ne(`(call ggml_pool_1d ctx t 1 2 2 0)`, 0), 2},
		{"pad_reflect_1d", ne(`(call ggml_pad_reflect_1d ctx t 1 2)`, 0), 7},
		{"roll", ne(`(call ggml_roll ctx t 1 -2 0 0)`, 1), 6},
		{"interpolate", ne(`(call ggml_interpolate ctx t 8 12 1 1 1)`, 1), 12},
		{"upscale", ne(`(call ggml_upscale ctx t 2 0)`, 0), 8},
		{"argsort", `(return (mem "type" (call ggml_argsort ctx t 1)))`, 26},
		{"win_part", `(block (decl "x" (call ggml_new_tensor_3d ctx 0 4 5 5)) ` + ne(`(call ggml_win_part ctx x 2)`, 3) + `)`, 9},
		{"win_unpart", `(block (decl "w" (call ggml_new_tensor_4d ctx 0 4 2 2 9)) ` + ne(`(call ggml_win_unpart ctx w 5 5 2)`, 1) + `)`, 5},
		{"unary ops", ne(`(call ggml_hardsigmoid ctx (call ggml_hardswish ctx (call ggml_log ctx (call ggml_cos ctx (call ggml_sin ctx (call ggml_elu ctx (call ggml_step ctx (call ggml_gelu_quick ctx (call ggml_gelu_erf ctx t)))))))))`, 0), 4},
		{"in-place ops", `(return (bin "==" (mem "view_src" (call ggml_relu_inplace ctx (call ggml_gelu_inplace ctx t))) t))`, 1},
		{"sum", ne(`(call ggml_sum ctx t)`, 1), 1},
		{"swiglu_swapped", ne(`(call ggml_swiglu_swapped ctx t)`, 0), 2},
		{"glu splits", ne(`(call ggml_geglu_erf_split ctx (call ggml_geglu_quick_split ctx t t) t)`, 1), 6},
	}
	for _, c := range cases {
		v, err := runOps(t, `(block `+decls+c.body+`)`)
		if err != nil {
			t.Errorf("%s: %v", c.name, err)
			continue
		}
		if v != c.want {
			t.Errorf("%s = %d, want %d", c.name, v, c.want)
		}
	}
	for _, c := range []struct{ name, body string }{
		{"conv_2d of unlike channels", `(return (call ggml_conv_2d ctx k sig 1 1 0 0 1 1))`},
		{"conv_2d of stride 0", `(return (call ggml_conv_2d ctx k img 0 1 0 0 1 1))`},
		{"pool_1d wider than its input", `(return (call ggml_pool_1d ctx t 0 9 1 0))`},
		{"upscale by 1", `(return (call ggml_upscale ctx t 1 0))`},
		{"win_part of 0", `(return (call ggml_win_part ctx t 0))`},
		{"interpolate of F16", `(return (call ggml_interpolate ctx k 4 4 3 5 0))`},
		{"pad_reflect_1d past the row", `(return (call ggml_pad_reflect_1d ctx t 4 0))`},
	} {
		_, err := runOps(t, `(block `+decls+c.body+`)`)
		var a *arch.Abort
		if !errors.As(err, &a) {
			t.Errorf("%s: %v, want an Abort", c.name, err)
		}
	}
}
