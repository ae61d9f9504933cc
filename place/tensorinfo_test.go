package place

import (
	"testing"

	"github.com/ggload/ggload/ggml"
)

// LookupTensor, the generic path's knowledge of a tensor, against llama.cpp's
// table (llama-arch.cpp's LLM_TENSOR_NAMES and LLM_TENSOR_INFOS).
func TestLookupTensor(t *testing.T) {
	tests := []struct {
		name  string
		tmpl  string
		layer int
		kind  string
		class LayerClass
		op    ggml.Op
		ok    bool
	}{
		{"token_embd.weight", "token_embd", -1, "TOKEN_EMBD", LayerInput, ggml.OpGetRows, true},
		{"output.weight", "output", -1, "OUTPUT", LayerOutput, ggml.OpMulMat, true},
		{"output.bias", "output", -1, "OUTPUT", LayerOutput, ggml.OpAdd, true}, // qwen2
		{"output_norm.weight", "output_norm", -1, "OUTPUT_NORM", LayerOutput, ggml.OpMul, true},
		{"output_norm.bias", "output_norm", -1, "OUTPUT_NORM", LayerOutput, ggml.OpAdd, true}, // rwkv6
		{"rope_freqs.weight", "rope_freqs", -1, "ROPE_FREQS", LayerRepeating, ggml.OpRope, true},
		{"rope_factors_long.weight", "rope_factors_long", -1, "ROPE_FACTORS_LONG", LayerRepeating, ggml.OpRope, true},
		{"token_embd_norm.weight", "token_embd_norm", -1, "TOKEN_EMBD_NORM", LayerRepeating, ggml.OpMul, true},
		{"blk.0.attn_q.weight", "blk.%d.attn_q", 0, "ATTN_Q", LayerRepeating, ggml.OpMulMat, true},
		{"blk.7.attn_q.bias", "blk.%d.attn_q", 7, "ATTN_Q", LayerRepeating, ggml.OpAdd, true},
		{"blk.3.attn_qkv.weight", "blk.%d.attn_qkv", 3, "ATTN_QKV", LayerRepeating, ggml.OpMulMat, true},
		{"blk.3.attn_q.scale", "blk.%d.attn_q", 3, "ATTN_Q", LayerRepeating, ggml.OpMulMat, true},
		{"blk.3.attn_q.input_scale", "blk.%d.attn_q", 3, "ATTN_Q", LayerRepeating, ggml.OpMulMat, true},
		{"blk.12.ffn_down_exps.weight", "blk.%d.ffn_down_exps", 12, "FFN_DOWN_EXPS", LayerRepeating, ggml.OpMulMatID, true},
		{"blk.12.ffn_down_exps.bias", "blk.%d.ffn_down_exps", 12, "FFN_DOWN_EXPS", LayerRepeating, ggml.OpAddID, true},
		{"blk.12.ffn_down_exps.scale", "blk.%d.ffn_down_exps", 12, "FFN_DOWN_EXPS", LayerRepeating, ggml.OpMulMatID, true},
		{"blk.4.ffn_gate_up_exps.weight", "blk.%d.ffn_gate_up_exps", 4, "FFN_GATE_UP_EXPS", LayerRepeating, ggml.OpMulMatID, true},
		{"blk.4.ffn_gate_inp_shexp.weight", "blk.%d.ffn_gate_inp_shexp", 4, "FFN_GATE_INP_SHEXP", LayerRepeating, ggml.OpMulMat, true},
		{"blk.4.exp_probs_b.bias", "blk.%d.exp_probs_b", 4, "FFN_EXP_PROBS_B", LayerRepeating, ggml.OpAdd, true},
		{"blk.10.post_attention_norm.weight", "blk.%d.post_attention_norm", 10, "ATTN_POST_NORM", LayerRepeating, ggml.OpMul, true},
		{"blk.10.post_ffw_norm.weight", "blk.%d.post_ffw_norm", 10, "FFN_POST_NORM", LayerRepeating, ggml.OpMul, true},
		{"blk.2.attn_kv_a_norm.weight", "blk.%d.attn_kv_a_norm", 2, "ATTN_KV_A_NORM", LayerRepeating, ggml.OpMul, true},
		{"blk.2.attn_k_b.weight", "blk.%d.attn_k_b", 2, "ATTN_K_B", LayerRepeating, ggml.OpMulMat, true},
		{"blk.61.nextn.eh_proj.weight", "blk.%d.nextn.eh_proj", 61, "NEXTN_EH_PROJ", LayerRepeating, ggml.OpMulMat, true},
		{"blk.61.nextn.embed_tokens.weight", "blk.%d.nextn.embed_tokens", 61, "NEXTN_EMBED_TOKENS", LayerRepeating, ggml.OpGetRows, true},
		// a template two kinds share: the one more architectures create
		// (SSM_A_NOSCAN, not mamba's SSM_A)
		{"blk.5.ssm_a", "blk.%d.ssm_a", 5, "SSM_A_NOSCAN", LayerRepeating, ggml.OpMul, true},
		{"blk.5.ssm_d", "blk.%d.ssm_d", 5, "SSM_D", LayerRepeating, ggml.OpMul, true},
		{"blk.5.ssm_conv1d.weight", "blk.%d.ssm_conv1d", 5, "SSM_CONV1D", LayerRepeating, ggml.OpSSMConv, true},
		{"blk.5.ssm_conv1d.bias", "blk.%d.ssm_conv1d", 5, "SSM_CONV1D", LayerRepeating, ggml.OpAdd, true},
		{"blk.5.ssm_dt.bias", "blk.%d.ssm_dt", 5, "SSM_DT", LayerRepeating, ggml.OpAdd, true},
		{"blk.1.time_mix_first.weight", "blk.%d.time_mix_first", 1, "TIME_MIX_FIRST", LayerRepeating, ggml.OpRWKVWKV6, true},
		{"blk.1.time_mix_lerp_fused.weight", "blk.%d.time_mix_lerp_fused", 1, "TIME_MIX_LERP_FUSED", LayerRepeating, ggml.OpAdd, true},
		{"blk.1.time_mix_ln.bias", "blk.%d.time_mix_ln", 1, "TIME_MIX_LN", LayerRepeating, ggml.OpAdd, true},
		{"cls.output.weight", "cls.output", -1, "CLS_OUT", LayerOutput, ggml.OpMulMat, true},
		// split experts: named by llama.cpp but without llm_tensor_info
		{"blk.3.ffn_gate.7.weight", "blk.%d.ffn_gate.%d", 3, "", 0, 0, false},
		// unknown
		{"blk.3.bogus.weight", "blk.%d.bogus", 3, "", 0, 0, false},
		{"v.blk.0.attn_q.weight", "v.blk.%d.attn_q", 0, "", 0, 0, false},
	}
	for _, tc := range tests {
		info, layer, ok := LookupTensor(tc.name)
		if layer != tc.layer || ok != tc.ok {
			t.Errorf("LookupTensor(%q) = %d, ok=%v; want %d, ok=%v", tc.name, layer, ok, tc.layer, tc.ok)
			continue
		}
		if !ok {
			if info != (TensorInfo{}) {
				t.Errorf("LookupTensor(%q): info %+v for an unknown tensor", tc.name, info)
			}
			continue
		}
		if info.Kind != tc.kind || info.Layer != tc.class || info.Op != tc.op {
			t.Errorf("LookupTensor(%q) info = %+v; want {%s %v %d}", tc.name, info, tc.kind, tc.class, tc.op)
		}
	}
}
