package ast

// Builtins are the functions the evaluator provides itself; the generator
// extracts every other function the programs call from the source.
var Builtins = map[string]bool{
	"create_tensor": true, "tn": true, "format": true,
	"std::to_string": true, "std::max": true, "std::min": true, "std::sqrt": true, "std::fill": true,
	"std::string": true, "std::runtime_error": true, "std::invalid_argument": true, "std::abs": true,
	"GGML_ASSERT": true, "GGML_ABORT": true, "assert": true,
	"llama_rope_scaling_type_from_string": true, "llm_ffn_op_type_from_string": true,
	"load_arch_hparams": true, "load_arch_tensors": true, "LLM_TN": true, "LLM_KV": true, "arch_name": true, "type_name": true,
	"gguf_get_n_kv": true, "gguf_get_kv_type": true, "gguf_get_key": true, "gguf_kv_to_str": true,
	"powf": true, "sqrtf": true, "std::pow": true, "std::log": true, "expf": true, "logf": true,
	// create_memory: the memory modules' constructors, the other context
	// a draft model's memory shares (none), std::move
	"new::llama_kv_cache": true, "new::llama_kv_cache_iswa": true, "new::llama_kv_cache_dsa": true,
	"new::llama_kv_cache_dsa_iswa": true, "new::llama_kv_cache_msa": true, "new::llama_kv_cache_dsv4": true,
	"new::llama_memory_recurrent": true, "new::llama_memory_hybrid": true, "new::llama_memory_hybrid_iswa": true,
	"new::llama_memory_hybrid_idx": true,
	// llama_meta_device_get_split_state
	"ggml_blck_size": true, "memset": true, "sizeof": true, "std::lcm": true, "std::regex_match": true,
	"std::stoull": true, "std::vector": true,
	// llama_init_from_model and llama_context's constructor
	"LLAMA_LOG_INFO": true, "LLAMA_LOG_WARN": true, "LLAMA_LOG_ERROR": true, "LLAMA_LOG_DEBUG": true,
	"GGML_PAD": true, "getenv": true, "atoi": true, "ggml_is_quantized": true, "ggml_type_name": true,
	"ggml_backend_buffer_get_size": true, "llama_sampler_chain_get": true, "llama_sampler_chain_n": true, "set_sampler": true,
	"llama_get_memory": true, "llama_get_model": true, "llama_model_n_layer": true, "llama_sampler_backend_n_nodes": true, "std::move": true,
}
