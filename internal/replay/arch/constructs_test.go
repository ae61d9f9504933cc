package arch

import (
	"errors"
	"strings"
	"testing"

	"github.com/ggload/ggload/internal/replay/cpp"
)

// What the split state and context programs take from the arch library
// rather than from C++: the headers' structs, and ggml's and libc's
// functions.
func TestConstructs(t *testing.T) {
	cases := []struct {
		name string
		body string
		want any // int64 or string
	}{
		{"a header struct, value-initialized", `(block (decl "st" @"ggml_backend_meta_split_state") (return (bin "+" (mem "n_segments" st) (idx (mem "nr" st) 15))))`, int64(0)},
		{"a header struct by position", `(block (decl "st" @"ggml_backend_meta_split_state" (list 11)) (return (mem "axis" st)))`, int64(11)},
		{"GGML_PAD", `(return (call GGML_PAD 257 256))`, int64(512)},
		{"atoi", `(return (call atoi " -42x"))`, int64(-42)},
		{"getenv of nothing is null", `(return (bin "==" (call getenv "GGLOAD_NO_SUCH_VARIABLE_AT_ALL") nullptr))`, int64(1)},
		{"ggml_is_quantized", `(return (bin "+" (call ggml_is_quantized 8) (call ggml_is_quantized 1)))`, int64(1)},
		{"ggml_type_name", `(return (call ggml_type_name 8))`, "q8_0"},
		{"ggml_blck_size", `(return (call ggml_blck_size 8))`, int64(32)},
	}
	for _, c := range cases {
		checkValueWith(t, run, c.name, c.body, c.want)
	}
}

// A function of the arch library used other than as the pin uses it is
// the evaluator's error, naming it; llama.cpp's own failures are Throw or
// Abort.
func TestConstructFailures(t *testing.T) {
	cases := []struct {
		name, body, want string
	}{
		{"GGML_PAD by zero", `(return (call GGML_PAD 3 0))`, "GGML_PAD arguments"},
		{"getenv of a number", `(return (call getenv 3))`, "getenv arguments"},
		{"atoi of a number", `(return (call atoi 3))`, "atoi arguments"},
		{"ggml_blck_size of no type", `(return (call ggml_blck_size 1000))`, "ggml_blck_size of type 1000"},
		{"ggml_blck_size of a string", `(return (call ggml_blck_size "x"))`, "ggml_blck_size arguments"},
		{"ggml_type_name of no type", `(return (call ggml_type_name 1000))`, "ggml_type_name arguments"},
		{"a backend buffer", `(return (call ggml_backend_buffer_get_size 0))`, "ggload plans no backend"},
		{"get_tensor outside a split state", `(return (call (mem "get_tensor" this) "x"))`, "outside a split state"},
	}
	for _, c := range cases {
		_, err := run(t, c.body)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: %v, want %q", c.name, err, c.want)
		}
	}
}

// The llama.cpp functions the arch library adds, and the model loader's
// methods.
func TestLibrary(t *testing.T) {
	cases := []struct {
		name string
		body string
		want any
	}{
		{"ffn op from a string", `(return (bin "==" (call llm_ffn_op_type_from_string "geglu" 0) LLM_FFN_GEGLU))`, int64(1)},
		{"ffn op default", `(return (call llm_ffn_op_type_from_string "nonsense" 17))`, int64(17)},
		{"rope scaling from a string", `(return (bin "==" (call llama_rope_scaling_type_from_string "yarn") LLAMA_ROPE_SCALING_TYPE_YARN))`, int64(1)},
		{"rope scaling unknown", `(return (bin "==" (call llama_rope_scaling_type_from_string "x") LLAMA_ROPE_SCALING_TYPE_UNSPECIFIED))`, int64(1)},
		{"LLM_KV names a key", `(block (decl "kv" (call LLM_KV LLM_ARCH_LLAMA)) (return (call kv LLM_KV_CONTEXT_LENGTH)))`, "llama.context_length"},
		{"the loader's architecture name", `(return (call (mem "get_arch_name" ml)))`, "llama"},
		{"the file type's name", `(return (call (mem "ftype_name" ml)))`, "(guessed) all F32"},
		{"a file tensor", `(return (mem "name" (call (mem "get_tensor_meta" ml) "token_embd.weight")))`, "token_embd.weight"},
		{"no such file tensor", `(return (bin "==" (call (mem "get_weight" ml) "nothing") nullptr))`, int64(1)},
	}
	for _, c := range cases {
		checkValueWith(t, run, c.name, c.body, c.want)
	}
	if _, err := run(t, `(return (call (mem "require_weight" ml) "nothing"))`); err == nil || !strings.Contains(err.Error(), "tensor 'nothing' not found") {
		t.Errorf("require a missing tensor: %v", err)
	}
}

// The replay's values describe and print themselves.
func TestMessages(t *testing.T) {
	for _, v := range []cpp.Val{{K: cpp.KTensor, P: &Tensor{Name: "t"}}, {K: cpp.KTN, P: &tnVal{}}} {
		if v.Describe() == "" || v.Describe() == "value" || cpp.FormatValue(v) == "" {
			t.Errorf("%v describes as %q, formats as %q", v.K, v.Describe(), cpp.FormatValue(v))
		}
	}
}

// The arch library's functions and the loader's methods, misused, fail
// cleanly, as the evaluator's own errors (or llama.cpp's, where C++ would
// crash).
func TestMisusedConstructs(t *testing.T) {
	for _, body := range []string{
		`(return (mem "ne" (call (mem "get_tensor_meta" ml) "nothing")))`,
		`(return (call llm_ffn_op_type_from_string 1))`,
		`(return (call llama_rope_scaling_type_from_string 1))`,
		`(return (call llama_get_model 0))`,
		`(return (call (mem "get_key" ml)))`,
		`(return (call (mem "llm_kv" ml) 5))`,
		`(return (call (mem "get_weight" ml) (list 1)))`,
	} {
		_, err := run(t, body)
		var a *cpp.Abort
		var th *cpp.Throw
		if err == nil || !IsEvalError(err) && !errors.As(err, &a) && !errors.As(err, &th) {
			t.Errorf("%s: %v", body, err)
		}
	}
}
