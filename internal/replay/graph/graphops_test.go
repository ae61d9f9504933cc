package graph_test

import (
	"errors"
	"testing"

	"github.com/ggload/ggload/internal/replay/arch"
	"github.com/ggload/ggload/internal/replay/graph"
	"github.com/ggload/ggload/internal/synthmodel"
	"github.com/ggload/ggload/lab/testenv"
)

func runOps(t *testing.T, body string) (int64, error) {
	t.Helper()
	rt := testenv.Runtime(t)
	path, err := synthmodel.DemoModel(rt)
	if err != nil {
		t.Fatal(err)
	}
	r, err := arch.Load(testenv.OpenModel(t, path), arch.Options{})
	if err != nil {
		t.Fatal(err)
	}
	return graph.RunOps(t, rt.Ops(), r, body)
}

// The ops the graph builders call make ggml's own tensors, with ggml's
// shapes; what ggml would assert on is refused first, as an Abort.
func TestGraphOps(t *testing.T) {
	ne := func(expr string, i int) string {
		return `(return (idx (mem "ne" ` + expr + `) ` + string(rune('0'+i)) + `))`
	}
	cases := []struct {
		name string
		body string
		want int64
	}{
		{"new_tensor_3d", ne(`(call ggml_new_tensor_3d ctx 0 2 3 5)`, 2), 5},
		{"mul_mat", `(block (decl "w" (call ggml_new_tensor_2d ctx 0 4 9)) ` + ne(`(call ggml_mul_mat ctx w t)`, 0) + `)`, 9},
		{"add broadcasts a row", `(block (decl "b" (call ggml_new_tensor_1d ctx 0 4)) ` + ne(`(call ggml_add ctx t b)`, 1) + `)`, 6},
		{"mul", ne(`(call ggml_mul ctx t t)`, 0), 4},
		{"div", ne(`(call ggml_div ctx t t)`, 1), 6},
		{"scale", ne(`(call ggml_scale ctx t 0.5)`, 0), 4},
		{"transpose", ne(`(call ggml_transpose ctx t)`, 0), 6},
		{"cont of a transpose", ne(`(call ggml_cont ctx (call ggml_transpose ctx t))`, 1), 4},
		{"cont_2d", ne(`(call ggml_cont_2d ctx t 24 1)`, 0), 24},
		{"reshape_3d", ne(`(call ggml_reshape_3d ctx t 2 2 6)`, 2), 6},
		{"reshape_4d", ne(`(call ggml_reshape_4d ctx t 2 2 3 2)`, 3), 2},
		{"view_2d", ne(`(call ggml_view_2d ctx t 2 3 16 0)`, 1), 3},
		{"permute", ne(`(call ggml_permute ctx (call ggml_reshape_3d ctx t 2 2 6) 0 2 1 3)`, 1), 6},
		// the experts: 3 experts of [4, 9], t's 6 rows as one token each choosing 2
		{"argsort_top_k", ne(`(call ggml_argsort_top_k ctx t 2)`, 0), 2},
		{"mul_mat_id", `(block (decl "as" (call ggml_new_tensor_3d ctx 0 4 9 3)) (decl "b" (call ggml_reshape_3d ctx t 4 1 6))
			(decl "ids" (call ggml_new_tensor_2d ctx 26 2 6)) ` + ne(`(call ggml_mul_mat_id ctx as b ids)`, 1) + `)`, 2},
		{"add_id", `(block (decl "a" (call ggml_new_tensor_3d ctx 0 4 2 6)) (decl "b" (call ggml_new_tensor_2d ctx 0 4 3))
			(decl "ids" (call ggml_new_tensor_2d ctx 26 2 6)) ` + ne(`(call ggml_add_id ctx a b ids)`, 2) + `)`, 6},
		{"repeat_4d", ne(`(call ggml_repeat_4d ctx t 8 6 2 1)`, 2), 2},
		{"swiglu halves the rows", ne(`(call ggml_swiglu ctx t)`, 0), 2},
		{"concat", ne(`(call ggml_concat ctx t t 1)`, 1), 12},
		{"clamp and fill", ne(`(call ggml_fill ctx (call ggml_clamp ctx t -1.0 1.0) 0.5)`, 1), 6},
		{"unary ops", ne(`(call ggml_softplus ctx (call ggml_sqrt ctx (call ggml_sqr ctx (call ggml_sigmoid ctx (call ggml_tanh ctx (call ggml_relu ctx (call ggml_gelu ctx (call ggml_silu ctx t))))))))`, 0), 4},
		{"sum_rows", ne(`(call ggml_sum_rows ctx t)`, 0), 1},
		{"soft_max", ne(`(call ggml_soft_max ctx t)`, 0), 4},
		{"soft_max_ext", ne(`(call ggml_soft_max_ext ctx t nullptr 1.0 0.0)`, 1), 6},
		{"norms", ne(`(call ggml_norm ctx (call ggml_rms_norm ctx t 0.00001) 0.00001)`, 1), 6},
		{"glu splits", ne(`(call ggml_reglu_split ctx (call ggml_geglu_split ctx (call ggml_swiglu_split ctx t t) t) t)`, 0), 4},
		{"cast", `(return (mem "type" (call ggml_cast ctx t 1)))`, 1},
		{"pad", ne(`(call ggml_pad ctx t 4 0 0 0)`, 0), 8},
		{"get_rows", `(block (decl "i" (call ggml_new_tensor_1d ctx 26 3)) ` + ne(`(call ggml_get_rows ctx t i)`, 1) + `)`, 3},
		{"nelements", `(return (call ggml_nelements t))`, 24},
		{"row_size", `(return (call ggml_row_size 1 10))`, 20},
		{"is_contiguous", `(return (bin "+" (call ggml_is_contiguous t) (call ggml_is_contiguous (call ggml_transpose ctx t))))`, 1},
		{"same shape and stride", `(return (bin "+" (call ggml_are_same_shape t t) (call ggml_are_same_stride t (call ggml_transpose ctx t))))`, 1},
		{"cpy", ne(`(call ggml_cpy ctx t (call ggml_new_tensor_2d ctx 1 4 6))`, 1), 6},
		{"names and flags", `(block (expr (call ggml_set_name t "x")) (expr (call ggml_format_name t "%s-%d" "y" 3)) (expr (call ggml_set_input t)) (expr (call ggml_set_output t)) (return 1))`, 1},
		{"rope_ext", `(block (decl "x" (call ggml_new_tensor_3d ctx 0 4 2 6)) (decl "pos" (call ggml_new_tensor_1d ctx 26 6))
			` + ne(`(call ggml_rope_ext ctx x pos nullptr 4 0 256 10000.0 1.0 0.0 1.0 32.0 1.0)`, 2) + `)`, 6},
		{"flash_attn_ext", `(block (decl "q" (call ggml_new_tensor_4d ctx 0 4 6 2 1)) (decl "k" (call ggml_new_tensor_4d ctx 1 4 8 2 1))
			(decl "fa" (call ggml_flash_attn_ext ctx q k k nullptr 1.0 0.0 0.0)) (expr (call ggml_flash_attn_ext_set_n_kv_max fa 8))
			(expr (call ggml_flash_attn_ext_add_sinks fa nullptr)) (expr (call ggml_prec_set_acc fa 10)) ` + ne(`fa`, 1) + `)`, 2},
		{"set_rows", `(block (decl "d" (call ggml_new_tensor_2d ctx 1 4 16)) (decl "i" (call ggml_new_tensor_1d ctx 27 6))
			` + ne(`(call ggml_set_rows ctx d t i)`, 1) + `)`, 16},
		{"hints", `(block (decl "m" (call ggml_mul_mat ctx t t)) (expr (call ggml_mul_mat_set_hint m 1)) (expr (call ggml_soft_max_add_sinks (call ggml_soft_max ctx t) nullptr)) (return 1))`, 1},
		{"a tensor's strides", `(return (idx (mem "nb" t) 1))`, 16},
		{"a tensor's flags after set_input", `(block (expr (call ggml_set_input t)) (return (bin "!=" (mem "flags" t) 0)))`, 1},
		{"a view's source", `(return (bin "==" (mem "view_src" (call ggml_view_2d ctx t 2 3 16 0)) t))`, 1},
		{"no view source", `(return (bin "==" (mem "view_src" t) nullptr))`, 1},
		{"an op's sources", `(return (bin "==" (idx (mem "src" (call ggml_mul ctx t t)) 1) t))`, 1},
		{"an op", `(return (bin "!=" (mem "op" (call ggml_mul ctx t t)) (mem "op" t)))`, 1},
		{"no data", `(return (bin "==" (mem "data" t) nullptr))`, 1},
		{"a name", `(block (expr (call ggml_set_name t "abc")) (return (call (mem "size" (mem "name" t)))))`, 3},
		{"the graph", `(block (expr (call ggml_build_forward_expand gf (call ggml_add ctx t t))) (return 1))`, 1},
	}
	for _, c := range cases {
		v, err := runOps(t, c.body)
		if err != nil {
			t.Errorf("%s: %v", c.name, err)
			continue
		}
		if v != c.want {
			t.Errorf("%s = %d, want %d", c.name, v, c.want)
		}
	}
	for _, c := range []struct{ name, body string }{
		{"mul_mat of mismatched rows", `(block (decl "w" (call ggml_new_tensor_2d ctx 0 5 9)) (return (call ggml_mul_mat ctx w t)))`},
		{"add that cannot repeat", `(block (decl "b" (call ggml_new_tensor_1d ctx 0 3)) (return (call ggml_add ctx t b)))`},
		{"reshape to another size", `(return (call ggml_reshape_3d ctx t 2 2 7))`},
		{"a view past the end", `(return (call ggml_view_2d ctx t 4 6 16 64))`},
		{"a null tensor", `(return (call ggml_cont ctx nullptr))`},
		{"rope of a wrong position count", `(block (decl "x" (call ggml_new_tensor_3d ctx 0 4 2 6)) (decl "pos" (call ggml_new_tensor_1d ctx 26 5))
			(return (call ggml_rope_ext ctx x pos nullptr 4 0 256 10000.0 1.0 0.0 1.0 32.0 1.0)))`},
		{"flash attention of unlike heads", `(block (decl "q" (call ggml_new_tensor_4d ctx 0 4 6 2 1)) (decl "k" (call ggml_new_tensor_4d ctx 1 5 8 2 1))
			(return (call ggml_flash_attn_ext ctx q k k nullptr 1.0 0.0 0.0)))`},
		{"row_size of a part of a block", `(return (call ggml_row_size 8 10))`},
		{"sinks on another op", `(block (decl "s" (call ggml_new_tensor_1d ctx 0 2)) (expr (call ggml_soft_max_add_sinks t s)) (return 0))`},
		{"top_k of more than there are", `(return (call ggml_argsort_top_k ctx t 5))`},
		{"mul_mat_id with an expert list per row missing", `(block (decl "as" (call ggml_new_tensor_3d ctx 0 4 9 3)) (decl "b" (call ggml_reshape_3d ctx t 4 1 6))
			(decl "ids" (call ggml_new_tensor_2d ctx 26 2 5)) (return (call ggml_mul_mat_id ctx as b ids)))`},
		{"concat of unlike rows", `(block (decl "b" (call ggml_new_tensor_2d ctx 0 5 6)) (return (call ggml_concat ctx t b 1)))`},
		{"repeat_4d to a size that does not divide", `(return (call ggml_repeat_4d ctx t 6 6 1 1))`},
		{"glu of unlike shapes", `(block (decl "b" (call ggml_new_tensor_2d ctx 0 4 5)) (return (call ggml_swiglu_split ctx t b)))`},
	} {
		_, err := runOps(t, c.body)
		var a *arch.Abort
		if !errors.As(err, &a) {
			t.Errorf("%s: %v, want an Abort", c.name, err)
		}
	}
	for _, body := range []string{
		`(return (call ggml_cont 5 t))`,
		`(return (call ggml_cont ctx 5))`,
		`(return (call ggml_cont ctx))`,
	} {
		if _, err := runOps(t, body); err == nil {
			t.Errorf("%s: no error", body)
		}
	}
}
