package arch

import (
	"github.com/ggload/ggload/internal/replay/cpp"
	"github.com/ggload/ggload/internal/replay/cpp/ast"
)

type archEntry struct{ Enum, Class, Hparams, Tensors string }

// builtins are the free functions the evaluator provides (ast.Builtins
// names them for the generator).
var builtins map[string]cpp.Builtin

func init() {
	builtins = map[string]cpp.Builtin{
		"llama_rope_scaling_type_from_string": bRopeScaling,
		"llm_ffn_op_type_from_string":         bFFNOp,
		"LLM_TN":                              bLLMTN,
		"LLM_KV":                              bLLMKV,
		// llama_model::gguf_kv, a string copy of the metadata, is not kept:
		// the loop that fills it sees no keys
		"gguf_get_n_kv":    func(*cpp.Frame, []*ast.Node) (cpp.Val, error) { return cpp.Int(0, ast.TI64), nil },
		"gguf_get_kv_type": cpp.Nop,
		"gguf_get_key":     func(*cpp.Frame, []*ast.Node) (cpp.Val, error) { return cpp.Str(""), nil },
		"gguf_kv_to_str":   func(*cpp.Frame, []*ast.Node) (cpp.Val, error) { return cpp.Str(""), nil },
	}
	for n, b := range memoryBuiltins() {
		builtins[n] = b
	}
	for n, b := range splitBuiltins() {
		builtins[n] = b
	}
	for n, b := range contextBuiltins() {
		builtins[n] = b
	}
	// another context (a draft model's target) exists only with
	// ctx_other, which ggload's contexts never have: llama_get_memory of
	// null is null; the others are reached only through it
	builtins["llama_get_memory"] = func(*cpp.Frame, []*ast.Node) (cpp.Val, error) { return cpp.Null, nil }
	for _, n := range []string{"llama_get_model", "llama_model_n_layer"} {
		builtins[n] = func(f *cpp.Frame, _ []*ast.Node) (cpp.Val, error) {
			return cpp.Void, f.Errorf("%s of another context (ggload plans one context)", n)
		}
	}
	// a backend sampler's graph: ggload's contexts have no samplers
	builtins["llama_sampler_backend_n_nodes"] = func(f *cpp.Frame, _ []*ast.Node) (cpp.Val, error) {
		return cpp.Void, f.Errorf("llama_sampler_backend_n_nodes: ggload plans contexts without backend samplers")
	}
	programs.Register(builtins)
}

// modelMethods are the llama_model_base members the evaluator provides.
var modelMethods = map[string]bool{"create_tensor": true, "tn": true, "arch_name": true, "type_name": true,
	"load_arch_hparams": true, "load_arch_tensors": true, "get_tensor": true, "tensor_split": true,
	"split_mode": true, "n_tensors": true}

func bRopeScaling(f *cpp.Frame, args []*ast.Node) (cpp.Val, error) {
	vs, err := cpp.EvalArgs(f, args)
	if err != nil {
		return cpp.Void, err
	}
	if len(vs) != 1 || vs[0].K != cpp.KStr {
		return cpp.Void, f.Errorf("llama_rope_scaling_type_from_string arguments")
	}
	for _, p := range ropeScalingTypes {
		if p[1] == vs[0].S {
			return cpp.Int(enumConsts[p[0]], ast.TI32), nil
		}
	}
	return cpp.Int(enumConsts["LLAMA_ROPE_SCALING_TYPE_UNSPECIFIED"], ast.TI32), nil
}

func bFFNOp(f *cpp.Frame, args []*ast.Node) (cpp.Val, error) {
	vs, err := cpp.EvalArgs(f, args)
	if err != nil {
		return cpp.Void, err
	}
	if len(vs) != 2 || vs[0].K != cpp.KStr {
		return cpp.Void, f.Errorf("llm_ffn_op_type_from_string arguments")
	}
	for _, p := range ffnOpTypes {
		if p[0] == vs[0].S {
			return cpp.Int(enumConsts[p[1]], ast.TI32), nil
		}
	}
	return vs[1], nil
}

// bLLMTN is LLM_TN(arch): a tensor namer, used as tn(...).
func bLLMTN(f *cpp.Frame, args []*ast.Node) (cpp.Val, error) {
	return cpp.Val{K: cpp.KFunc, P: &cpp.Method{Recv: cpp.Val{K: cpp.KObj, P: runOf(f).model}, Name: "tn"}}, nil
}

// bLLMKV is LLM_KV(arch): a key namer, used as kv(LLM_KV_...).
func bLLMKV(f *cpp.Frame, args []*ast.Node) (cpp.Val, error) {
	return cpp.Val{K: cpp.KFunc, P: &cpp.Method{Recv: runOf(f).ml, Name: "llm_kv"}}, nil
}
