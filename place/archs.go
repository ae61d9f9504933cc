package place

// The tensor creation of each architecture in the table, as its
// load_arch_tensors in the pinned llama.cpp (src/models/<arch>.cpp) runs it:
// the tensors created once ("head", in order), then those created for every
// layer, each with its creation flags and, where llama.cpp branches on
// hyperparameters, the condition. The generic ".scale"/".input_scale" pass of
// load_tensors (src/llama-model.cpp:1566-1717) runs after it for every
// architecture (scaleOrder).

// archTensor is one create_tensor call.
type archTensor struct {
	tmpl     string // name template, as in tensorKinds ("blk.%d.attn_q")
	suffix   string // "weight", "bias", "" (ssm_a, ssm_d)
	required bool   // not TENSOR_NOT_REQUIRED
	dup      bool   // one file tensor created in every layer: the first creation owns it, later ones are TENSOR_DUPLICATED
	tied     bool   // token_embd created again as the output, TENSOR_DUPLICATED, when "output" was not created
	skip     bool   // TENSOR_SKIP: consumed, not placed
	lazy     bool   // TENSOR_READ_LAZY
	when     func(h *hparams, il int) bool
}

// archSpec is an architecture's creation sequence.
type archSpec struct {
	head    []archTensor // created once, in order; layer-class REPEATING ones go to layer 0 (bid 0)
	layer   []archTensor // created for each layer
	allLyrs bool         // the layer loop runs over n_layer_all (MTP blocks included), not n_layer
}

func req(t, s string) archTensor { return archTensor{tmpl: t, suffix: s, required: true} }
func opt(t, s string) archTensor { return archTensor{tmpl: t, suffix: s} }
func (a archTensor) if_(f func(h *hparams, il int) bool) archTensor {
	a.when = f
	return a
}

var (
	dense = func(h *hparams, _ int) bool { return h.nExpert == 0 }
	moe   = func(h *hparams, _ int) bool { return h.nExpert > 0 }
)

// outputTied is the usual head: optional output, else token_embd again.
func outputTied() []archTensor {
	return []archTensor{
		req("token_embd", "weight"),
		req("output_norm", "weight"),
		opt("output", "weight"),
		{tmpl: "token_embd", suffix: "weight", required: true, tied: true},
	}
}

// qkv is create_tensor_qkv (src/llama-model.cpp:3270-3306): the fused
// weight when the file has it, else the three separate ones; then the
// matching biases.
func qkv(required bool) []archTensor {
	return []archTensor{
		opt("blk.%d.attn_qkv", "weight"),
		opt("blk.%d.attn_qkv", "bias"),
		{tmpl: "blk.%d.attn_q", suffix: "weight", required: required},
		{tmpl: "blk.%d.attn_k", suffix: "weight", required: required},
		{tmpl: "blk.%d.attn_v", suffix: "weight", required: required},
		opt("blk.%d.attn_q", "bias"),
		opt("blk.%d.attn_k", "bias"),
		opt("blk.%d.attn_v", "bias"),
	}
}

func cat(parts ...[]archTensor) []archTensor {
	var out []archTensor
	for _, p := range parts {
		out = append(out, p...)
	}
	return out
}

func one(ts ...archTensor) []archTensor { return ts }

// fusedAlternatives: when the fused tensor of a layer is in the file,
// llama.cpp never creates the ones it replaces.
var fusedAlternatives = map[string][]string{
	"blk.%d.attn_qkv":         {"blk.%d.attn_q", "blk.%d.attn_k", "blk.%d.attn_v"},
	"blk.%d.ffn_gate_up_exps": {"blk.%d.ffn_gate_exps", "blk.%d.ffn_up_exps"},
}

var archSpecs = map[string]archSpec{
	// src/models/llama.cpp:34-92
	"llama": {
		head: outputTied(),
		layer: cat(
			one(req("blk.%d.attn_norm", "weight")),
			qkv(true),
			one(
				req("blk.%d.attn_output", "weight"),
				opt("blk.%d.attn_output", "bias"),
				req("blk.%d.ffn_norm", "weight"),
				archTensor{tmpl: "rope_factors_long", suffix: "weight", dup: true, when: longrope},
				archTensor{tmpl: "rope_factors_short", suffix: "weight", dup: true, when: longrope},
				archTensor{tmpl: "rope_freqs", suffix: "weight", dup: true, when: notLongrope},
				req("blk.%d.ffn_gate", "weight").if_(dense),
				req("blk.%d.ffn_down", "weight").if_(dense),
				req("blk.%d.ffn_up", "weight").if_(dense),
				opt("blk.%d.ffn_gate", "bias").if_(dense),
				opt("blk.%d.ffn_down", "bias").if_(dense),
				opt("blk.%d.ffn_up", "bias").if_(dense),
				req("blk.%d.ffn_gate_inp", "weight").if_(moe),
				opt("blk.%d.ffn_gate_exps", "weight").if_(moe),
				req("blk.%d.ffn_down_exps", "weight").if_(moe),
				req("blk.%d.ffn_up_exps", "weight").if_(moe),
			),
		),
	},
	// src/models/llama4.cpp:44-90
	"llama4": {
		head: outputTied(),
		layer: cat(
			one(req("blk.%d.attn_norm", "weight")),
			qkv(true),
			one(
				req("blk.%d.attn_output", "weight"),
				req("blk.%d.ffn_norm", "weight"),
				archTensor{tmpl: "rope_freqs", suffix: "weight", dup: true},
				req("blk.%d.ffn_gate_inp", "weight").if_(llama4MoE),
				req("blk.%d.ffn_gate_exps", "weight").if_(llama4MoE),
				req("blk.%d.ffn_down_exps", "weight").if_(llama4MoE),
				req("blk.%d.ffn_up_exps", "weight").if_(llama4MoE),
				req("blk.%d.ffn_gate_shexp", "weight").if_(llama4MoE),
				req("blk.%d.ffn_down_shexp", "weight").if_(llama4MoE),
				req("blk.%d.ffn_up_shexp", "weight").if_(llama4MoE),
				req("blk.%d.ffn_gate", "weight").if_(not(llama4MoE)),
				req("blk.%d.ffn_down", "weight").if_(not(llama4MoE)),
				req("blk.%d.ffn_up", "weight").if_(not(llama4MoE)),
			),
		),
	},
	// src/models/qwen2.cpp:19-47
	"qwen2": {
		head: []archTensor{
			req("token_embd", "weight"),
			req("output_norm", "weight"),
			opt("output", "weight"),
			opt("output", "bias"),
			{tmpl: "token_embd", suffix: "weight", required: true, tied: true},
		},
		layer: cat(
			one(req("blk.%d.attn_norm", "weight")),
			qkv(true),
			one(
				req("blk.%d.attn_output", "weight"),
				req("blk.%d.ffn_norm", "weight"),
				req("blk.%d.ffn_gate", "weight"),
				req("blk.%d.ffn_down", "weight"),
				req("blk.%d.ffn_up", "weight"),
			),
		),
	},
	// src/models/qwen2moe.cpp:16-59 (no tied output)
	"qwen2moe": {
		head: one(req("token_embd", "weight"), req("output_norm", "weight"), req("output", "weight")),
		layer: cat(
			one(req("blk.%d.attn_norm", "weight")),
			qkv(true),
			one(
				req("blk.%d.attn_output", "weight"),
				req("blk.%d.ffn_norm", "weight"),
				req("blk.%d.ffn_gate_inp", "weight"),
				req("blk.%d.ffn_gate_exps", "weight"),
				req("blk.%d.ffn_down_exps", "weight"),
				req("blk.%d.ffn_up_exps", "weight"),
				req("blk.%d.ffn_gate_inp_shexp", "weight"),
				req("blk.%d.ffn_gate_shexp", "weight"),
				req("blk.%d.ffn_down_shexp", "weight"),
				req("blk.%d.ffn_up_shexp", "weight"),
			),
		),
	},
	// src/models/qwen3.cpp:15-47
	"qwen3": {
		head: cat(outputTied(), one(opt("cls.output", "weight"))),
		layer: cat(
			one(req("blk.%d.attn_norm", "weight")),
			qkv(true),
			one(
				req("blk.%d.attn_output", "weight"),
				req("blk.%d.attn_k_norm", "weight"),
				req("blk.%d.attn_q_norm", "weight"),
				req("blk.%d.ffn_norm", "weight"),
				req("blk.%d.ffn_gate", "weight"),
				req("blk.%d.ffn_down", "weight"),
				req("blk.%d.ffn_up", "weight"),
			),
		),
	},
	// src/models/qwen3moe.cpp:14-56
	"qwen3moe": {
		head: outputTied(),
		layer: cat(
			one(req("blk.%d.attn_norm", "weight")),
			qkv(true),
			one(
				req("blk.%d.attn_output", "weight"),
				req("blk.%d.attn_k_norm", "weight"),
				req("blk.%d.attn_q_norm", "weight"),
				req("blk.%d.ffn_norm", "weight"),
				req("blk.%d.ffn_gate_inp", "weight"),
				req("blk.%d.ffn_gate_exps", "weight"),
				req("blk.%d.ffn_down_exps", "weight"),
				req("blk.%d.ffn_up_exps", "weight"),
			),
		),
	},
	// src/models/gemma.cpp:13-35: always tied
	"gemma": {
		head: one(req("token_embd", "weight"), req("output_norm", "weight"),
			archTensor{tmpl: "token_embd", suffix: "weight", required: true, tied: true}),
		layer: cat(
			one(req("blk.%d.attn_norm", "weight")),
			qkv(true),
			one(
				req("blk.%d.attn_output", "weight"),
				req("blk.%d.ffn_norm", "weight"),
				req("blk.%d.ffn_gate", "weight"),
				req("blk.%d.ffn_up", "weight"),
				req("blk.%d.ffn_down", "weight"),
			),
		),
	},
	// src/models/gemma2.cpp:30-54: always tied
	"gemma2": {
		head: one(req("token_embd", "weight"), req("output_norm", "weight"),
			archTensor{tmpl: "token_embd", suffix: "weight", required: true, tied: true}),
		layer: cat(
			one(req("blk.%d.attn_norm", "weight")),
			qkv(true),
			one(
				req("blk.%d.attn_output", "weight"),
				req("blk.%d.post_attention_norm", "weight"),
				req("blk.%d.ffn_norm", "weight"),
				req("blk.%d.ffn_gate", "weight"),
				req("blk.%d.ffn_up", "weight"),
				req("blk.%d.ffn_down", "weight"),
				req("blk.%d.post_ffw_norm", "weight"),
			),
		),
	},
	// src/models/gemma3.cpp:34-71
	"gemma3": {
		head: cat(outputTied(), one(opt("dense_2", "weight"), opt("dense_3", "weight"))),
		layer: cat(
			one(req("blk.%d.attn_norm", "weight")),
			qkv(true),
			one(
				req("blk.%d.attn_output", "weight"),
				req("blk.%d.post_attention_norm", "weight"),
				req("blk.%d.attn_k_norm", "weight"),
				req("blk.%d.attn_q_norm", "weight"),
				req("blk.%d.ffn_norm", "weight"),
				req("blk.%d.ffn_gate", "weight"),
				req("blk.%d.ffn_up", "weight"),
				req("blk.%d.ffn_down", "weight"),
				req("blk.%d.post_ffw_norm", "weight"),
			),
		),
	},
	// src/models/gemma4.cpp:37-140 (dense layers; the expert branch is
	// optional on ffn_gate_inp)
	"gemma4": {
		head: []archTensor{
			opt("output", "weight"),
			{tmpl: "token_embd", suffix: "weight", required: true, tied: true},
			req("token_embd", "weight"),
			{tmpl: "per_layer_token_embd", suffix: "weight", required: true, lazy: true, when: perLayerEmbd},
			req("per_layer_model_proj", "weight").if_(perLayerEmbd),
			req("per_layer_proj_norm", "weight").if_(perLayerEmbd),
			req("output_norm", "weight"),
		},
		layer: cat(
			one(req("blk.%d.attn_norm", "weight")),
			one(
				opt("blk.%d.attn_qkv", "weight"),
				req("blk.%d.attn_q", "weight"),
				opt("blk.%d.attn_k", "weight"),
				opt("blk.%d.attn_v", "weight"),
				req("blk.%d.attn_output", "weight"),
				req("blk.%d.attn_q_norm", "weight"),
				opt("blk.%d.attn_k_norm", "weight"),
				req("blk.%d.post_attention_norm", "weight"),
				opt("blk.%d.layer_output_scale", "weight"),
				archTensor{tmpl: "rope_freqs", suffix: "weight", dup: true, when: fullAttention},
				req("blk.%d.ffn_norm", "weight"),
				req("blk.%d.ffn_gate", "weight"),
				req("blk.%d.ffn_up", "weight"),
				req("blk.%d.ffn_down", "weight"),
				req("blk.%d.post_ffw_norm", "weight"),
				opt("blk.%d.ffn_gate_inp", "weight"),
				opt("blk.%d.ffn_gate_inp", "scale"),
				opt("blk.%d.pre_ffw_norm_2", "weight"),
				opt("blk.%d.post_ffw_norm_1", "weight"),
				opt("blk.%d.post_ffw_norm_2", "weight"),
				opt("blk.%d.ffn_gate_up_exps", "weight"),
				opt("blk.%d.ffn_gate_exps", "weight"),
				opt("blk.%d.ffn_up_exps", "weight"),
				opt("blk.%d.ffn_down_exps", "weight"),
				req("blk.%d.inp_gate", "weight").if_(perLayerEmbd),
				req("blk.%d.proj", "weight").if_(perLayerEmbd),
				req("blk.%d.post_norm", "weight").if_(perLayerEmbd),
			),
		),
	},
	// src/models/phi3.cpp:27-57
	"phi3": {
		head: outputTied(),
		layer: cat(
			one(req("blk.%d.attn_norm", "weight")),
			qkv(false),
			one(
				req("blk.%d.attn_output", "weight"),
				req("blk.%d.ffn_norm", "weight"),
				req("blk.%d.ffn_down", "weight"),
				req("blk.%d.ffn_up", "weight"),
				archTensor{tmpl: "rope_factors_long", suffix: "weight", dup: true},
				archTensor{tmpl: "rope_factors_short", suffix: "weight", dup: true},
			),
		),
	},
	// src/models/deepseek2.cpp:55-161 (the layer loop covers the MTP blocks,
	// whose tensors are TENSOR_SKIP unless MTP is loaded)
	"deepseek2": {
		head:    outputTied(),
		allLyrs: true,
		layer: one(
			req("blk.%d.attn_norm", "weight").if_(trunk),
			opt("blk.%d.attn_q_a_norm", "weight").if_(trunk),
			opt("blk.%d.attn_kv_a_norm", "weight").if_(trunk),
			opt("blk.%d.attn_q_a", "weight").if_(trunk),
			opt("blk.%d.attn_q_b", "weight").if_(trunk),
			opt("blk.%d.attn_q", "weight").if_(trunk),
			opt("blk.%d.attn_kv_a_mqa", "weight").if_(trunk),
			opt("blk.%d.attn_k_b", "weight").if_(trunk),
			opt("blk.%d.attn_v_b", "weight").if_(trunk),
			opt("blk.%d.attn_kv_b", "weight").if_(trunk),
			req("blk.%d.attn_output", "weight").if_(trunk),
			req("blk.%d.ffn_norm", "weight").if_(trunk),
			req("blk.%d.ffn_gate", "weight").if_(leadingDense),
			req("blk.%d.ffn_down", "weight").if_(leadingDense),
			req("blk.%d.ffn_up", "weight").if_(leadingDense),
			req("blk.%d.ffn_gate_inp", "weight").if_(deepseekMoE),
			opt("blk.%d.exp_probs_b", "bias").if_(deepseekMoE),
			req("blk.%d.ffn_down_exps", "weight").if_(deepseekMoE),
			opt("blk.%d.ffn_gate_up_exps", "weight").if_(deepseekMoE),
			req("blk.%d.ffn_gate_exps", "weight").if_(deepseekMoE),
			req("blk.%d.ffn_up_exps", "weight").if_(deepseekMoE),
			opt("blk.%d.ffn_gate_shexp", "weight").if_(deepseekMoE),
			opt("blk.%d.ffn_down_shexp", "weight").if_(deepseekMoE),
			opt("blk.%d.ffn_up_shexp", "weight").if_(deepseekMoE),
			archTensor{tmpl: "blk.%d.attn_norm", suffix: "weight", skip: true, when: mtpBlock},
			archTensor{tmpl: "blk.%d.nextn.eh_proj", suffix: "weight", skip: true, when: mtpBlock},
			archTensor{tmpl: "blk.%d.nextn.enorm", suffix: "weight", skip: true, when: mtpBlock},
			archTensor{tmpl: "blk.%d.nextn.hnorm", suffix: "weight", skip: true, when: mtpBlock},
			archTensor{tmpl: "blk.%d.nextn.embed_tokens", suffix: "weight", skip: true, when: mtpBlock},
			archTensor{tmpl: "blk.%d.nextn.shared_head_head", suffix: "weight", skip: true, when: mtpBlock},
			archTensor{tmpl: "blk.%d.nextn.shared_head_norm", suffix: "weight", skip: true, when: mtpBlock},
		),
	},
	// src/models/mamba.cpp:34-81
	"mamba": {
		head: outputTied(),
		layer: one(
			req("blk.%d.attn_norm", "weight"),
			req("blk.%d.ssm_in", "weight"),
			req("blk.%d.ssm_conv1d", "weight"),
			req("blk.%d.ssm_conv1d", "bias"),
			req("blk.%d.ssm_x", "weight"),
			req("blk.%d.ssm_dt", "weight"),
			req("blk.%d.ssm_dt", "bias"),
			req("blk.%d.ssm_a", ""),
			req("blk.%d.ssm_d", ""),
			req("blk.%d.ssm_out", "weight"),
		),
	},
	// src/models/mamba2.cpp:35-83
	"mamba2": {
		head: outputTied(),
		layer: one(
			req("blk.%d.attn_norm", "weight"),
			req("blk.%d.ssm_in", "weight"),
			req("blk.%d.ssm_conv1d", "weight"),
			req("blk.%d.ssm_conv1d", "bias"),
			req("blk.%d.ssm_dt", "bias"),
			req("blk.%d.ssm_a", ""),
			req("blk.%d.ssm_d", ""),
			req("blk.%d.ssm_norm", "weight"),
			req("blk.%d.ssm_out", "weight"),
		),
	},
	// src/models/rwkv6.cpp:26-88 (no tied output)
	"rwkv6": {
		head: one(
			req("token_embd", "weight"),
			req("token_embd_norm", "weight"),
			req("token_embd_norm", "bias"),
			req("output_norm", "weight"),
			req("output_norm", "bias"),
			req("output", "weight"),
		),
		layer: one(
			req("blk.%d.attn_norm", "weight"),
			req("blk.%d.attn_norm", "bias"),
			req("blk.%d.attn_norm_2", "weight"),
			req("blk.%d.attn_norm_2", "bias"),
			req("blk.%d.time_mix_w1", "weight"),
			req("blk.%d.time_mix_w2", "weight"),
			req("blk.%d.time_mix_lerp_x", "weight"),
			opt("blk.%d.time_mix_lerp_w", "weight"),
			opt("blk.%d.time_mix_lerp_k", "weight"),
			opt("blk.%d.time_mix_lerp_v", "weight"),
			opt("blk.%d.time_mix_lerp_r", "weight"),
			opt("blk.%d.time_mix_lerp_g", "weight"),
			opt("blk.%d.time_mix_lerp_fused", "weight"),
			req("blk.%d.time_mix_first", "weight"),
			req("blk.%d.time_mix_decay", "weight"),
			req("blk.%d.time_mix_decay_w1", "weight"),
			req("blk.%d.time_mix_decay_w2", "weight"),
			req("blk.%d.time_mix_key", "weight"),
			req("blk.%d.time_mix_value", "weight"),
			req("blk.%d.time_mix_receptance", "weight"),
			req("blk.%d.time_mix_gate", "weight"),
			req("blk.%d.time_mix_ln", "weight"),
			req("blk.%d.time_mix_ln", "bias"),
			req("blk.%d.time_mix_output", "weight"),
			req("blk.%d.channel_mix_lerp_k", "weight"),
			req("blk.%d.channel_mix_lerp_r", "weight"),
			req("blk.%d.channel_mix_key", "weight"),
			req("blk.%d.channel_mix_value", "weight"),
			req("blk.%d.channel_mix_receptance", "weight"),
		),
	},
}

func not(f func(h *hparams, il int) bool) func(h *hparams, il int) bool {
	return func(h *hparams, il int) bool { return !f(h, il) }
}

func longrope(h *hparams, _ int) bool    { return h.ropeScaling == "longrope" }
func notLongrope(h *hparams, _ int) bool { return h.ropeScaling != "longrope" }
func perLayerEmbd(h *hparams, _ int) bool {
	return h.nEmbdPerLayer > 0
}
func fullAttention(h *hparams, il int) bool { return !h.swa(il) }
func llama4MoE(h *hparams, il int) bool {
	return h.moeLayerStep > 0 && (il+1)%int(h.moeLayerStep) == 0
}
func trunk(h *hparams, il int) bool        { return il < h.nLayerAll-h.nLayerNextn }
func mtpBlock(h *hparams, il int) bool     { return il >= h.nLayerAll-h.nLayerNextn }
func leadingDense(h *hparams, il int) bool { return trunk(h, il) && int64(il) < h.leadingDense }
func deepseekMoE(h *hparams, il int) bool  { return trunk(h, il) && int64(il) >= h.leadingDense }

// scaleOrder is the generic pass's order within a layer: the ".scale" of
// every weight of the layer that was created, then the ".input_scale"s.
var scaleOrder = []string{
	"blk.%d.attn_q", "blk.%d.attn_k", "blk.%d.attn_v", "blk.%d.attn_output", "blk.%d.attn_qkv",
	"blk.%d.ffn_gate", "blk.%d.ffn_down", "blk.%d.ffn_up",
	"blk.%d.ffn_gate_shexp", "blk.%d.ffn_down_shexp", "blk.%d.ffn_up_shexp",
	"blk.%d.ffn_gate_exps", "blk.%d.ffn_down_exps", "blk.%d.ffn_up_exps",
	"blk.%d.ssm_in", "blk.%d.ssm_out",
}

// Architectures lists the architectures whose tensor creation the table
// knows.
func Architectures() []string {
	out := make([]string, 0, len(archSpecs))
	for a := range archSpecs {
		out = append(out, a)
	}
	return out
}
