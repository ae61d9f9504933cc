package place

// Tensor kinds and per-architecture tensor creation of the pinned llama.cpp
// release (checked out at /tmp/llama.cpp-v0.5.0). Every entry cites the line of
// src/llama-arch.cpp it comes from: first the LLM_TENSOR_NAMES line (name
// template), then the LLM_TENSOR_INFOS line (layer class and op).

import (
	"strconv"
	"strings"

	"github.com/ggload/ggload/ggml"
)

// LayerClass is where a tensor belongs in llama.cpp's layer model.
type LayerClass int

const (
	LayerInput LayerClass = iota
	LayerOutput
	LayerRepeating
)

func (c LayerClass) String() string {
	switch c {
	case LayerInput:
		return "input"
	case LayerOutput:
		return "output"
	case LayerRepeating:
		return "repeating"
	}
	return "LayerClass(" + strconv.Itoa(int(c)) + ")"
}

// TensorInfo is llama.cpp's llm_tensor_info for one tensor kind.
type TensorInfo struct {
	Kind  string // the llm_tensor enum name without the prefix, e.g. "ATTN_Q"
	Layer LayerClass
	Op    ggml.Op
}

// tensorKinds maps a GGUF tensor name template with the layer number replaced
// by %d and without the ".weight"/".bias" suffix to its info. It covers every
// llm_tensor that the tensor creation of llama, llama4, qwen2, qwen2moe, qwen3,
// qwen3moe, gemma, gemma2, gemma3, phi3, deepseek2, mamba, mamba2 and rwkv6
// uses (src/models/<arch>.cpp, create_tensor_qkv and create_tensor_gate_up_exps
// in src/llama-model.cpp:3253-3306, and the generic ".scale"/".input_scale"
// pass in src/llama-model.cpp:1566-1717).
//
// Three templates are shared by two llm_tensor kinds in LLM_TENSOR_NAMES; the
// entry here is the one the architectures above use:
//   - "blk.%d.ssm_a": SSM_A (REPEATING, SSM_SCAN, used by mamba/mamba2) and
//     SSM_A_NOSCAN (REPEATING, MUL, used by qwen3next, qwen4exp, bailingmoe3,
//     kimi-linear); names llama-arch.cpp:498 and :487, infos :837 and :838.
//   - "blk.%d.attn_kv_a_norm": ATTN_KV_A_NORM and ATTN_KV_NORM, both
//     REPEATING/MUL; names llama-arch.cpp:520 and :526, infos :893 and :755.
//   - "token_embd_norm": TOKEN_EMBD_NORM (REPEATING, MUL) and
//     OUTPUT_NORM_LFM2 (OUTPUT, MUL, lfm2 only); names llama-arch.cpp:480 and :436, infos :724 and :732.
//
// The split-expert templates "blk.%d.ffn_gate.%d", "blk.%d.ffn_down.%d" and
// "blk.%d.ffn_up.%d" (LLM_TENSOR_FFN_*_EXP, llama-arch.cpp:451-453) are NOT
// here: LLM_TENSOR_INFOS has no entry for them, no architecture creates them,
// and llama.cpp would fail on a file holding them ("wrong number of tensors",
// llama-model-loader.cpp:1398). lookupTensor recognises them and reports
// ok=false.
var tensorKinds = map[string]TensorInfo{
	// input / output
	"token_embd":         {Kind: "TOKEN_EMBD", Layer: LayerInput, Op: ggml.OpGetRows},          // llama-arch.cpp:434, :720
	"token_embd_norm":    {Kind: "TOKEN_EMBD_NORM", Layer: LayerRepeating, Op: ggml.OpMul},     // llama-arch.cpp:480, :724
	"output_norm":        {Kind: "OUTPUT_NORM", Layer: LayerOutput, Op: ggml.OpMul},            // llama-arch.cpp:435, :731
	"output":             {Kind: "OUTPUT", Layer: LayerOutput, Op: ggml.OpMulMat},              // llama-arch.cpp:437, :725
	"cls.output":         {Kind: "CLS_OUT", Layer: LayerOutput, Op: ggml.OpMulMat},             // llama-arch.cpp:483, :727
	"dense_2":            {Kind: "DENSE_2_OUT", Layer: LayerOutput, Op: ggml.OpMulMat},         // llama-arch.cpp:575, :729
	"dense_3":            {Kind: "DENSE_3_OUT", Layer: LayerOutput, Op: ggml.OpMulMat},         // llama-arch.cpp:576, :730
	"rope_freqs":         {Kind: "ROPE_FREQS", Layer: LayerRepeating, Op: ggml.OpRope},         // llama-arch.cpp:438, :735
	"rope_factors_long":  {Kind: "ROPE_FACTORS_LONG", Layer: LayerRepeating, Op: ggml.OpRope},  // llama-arch.cpp:495, :736
	"rope_factors_short": {Kind: "ROPE_FACTORS_SHORT", Layer: LayerRepeating, Op: ggml.OpRope}, // llama-arch.cpp:496, :737

	// attention (create_tensor_qkv) and dense FFN
	"blk.%d.attn_norm":           {Kind: "ATTN_NORM", Layer: LayerRepeating, Op: ggml.OpMul},      // llama-arch.cpp:440, :878
	"blk.%d.attn_norm_2":         {Kind: "ATTN_NORM_2", Layer: LayerRepeating, Op: ggml.OpMul},    // llama-arch.cpp:473, :879
	"blk.%d.attn_q":              {Kind: "ATTN_Q", Layer: LayerRepeating, Op: ggml.OpMulMat},      // llama-arch.cpp:441, :738
	"blk.%d.attn_k":              {Kind: "ATTN_K", Layer: LayerRepeating, Op: ggml.OpMulMat},      // llama-arch.cpp:442, :739
	"blk.%d.attn_v":              {Kind: "ATTN_V", Layer: LayerRepeating, Op: ggml.OpMulMat},      // llama-arch.cpp:443, :740
	"blk.%d.attn_qkv":            {Kind: "ATTN_QKV", Layer: LayerRepeating, Op: ggml.OpMulMat},    // llama-arch.cpp:474, :741
	"blk.%d.attn_output":         {Kind: "ATTN_OUT", Layer: LayerRepeating, Op: ggml.OpMulMat},    // llama-arch.cpp:444, :742
	"blk.%d.attn_q_norm":         {Kind: "ATTN_Q_NORM", Layer: LayerRepeating, Op: ggml.OpMul},    // llama-arch.cpp:459, :888
	"blk.%d.attn_k_norm":         {Kind: "ATTN_K_NORM", Layer: LayerRepeating, Op: ggml.OpMul},    // llama-arch.cpp:460, :889
	"blk.%d.post_attention_norm": {Kind: "ATTN_POST_NORM", Layer: LayerRepeating, Op: ggml.OpMul}, // llama-arch.cpp:458, :881
	"blk.%d.ffn_norm":            {Kind: "FFN_NORM", Layer: LayerRepeating, Op: ggml.OpMul},       // llama-arch.cpp:447, :882
	"blk.%d.ffn_gate":            {Kind: "FFN_GATE", Layer: LayerRepeating, Op: ggml.OpMulMat},    // llama-arch.cpp:448, :744
	"blk.%d.ffn_down":            {Kind: "FFN_DOWN", Layer: LayerRepeating, Op: ggml.OpMulMat},    // llama-arch.cpp:449, :745
	"blk.%d.ffn_up":              {Kind: "FFN_UP", Layer: LayerRepeating, Op: ggml.OpMulMat},      // llama-arch.cpp:450, :746
	"blk.%d.post_ffw_norm":       {Kind: "FFN_POST_NORM", Layer: LayerRepeating, Op: ggml.OpMul},  // llama-arch.cpp:462, :886

	// MoE
	"blk.%d.ffn_gate_inp":       {Kind: "FFN_GATE_INP", Layer: LayerRepeating, Op: ggml.OpMulMat},       // llama-arch.cpp:446, :810
	"blk.%d.ffn_gate_exps":      {Kind: "FFN_GATE_EXPS", Layer: LayerRepeating, Op: ggml.OpMulMatID},    // llama-arch.cpp:454, :904
	"blk.%d.ffn_down_exps":      {Kind: "FFN_DOWN_EXPS", Layer: LayerRepeating, Op: ggml.OpMulMatID},    // llama-arch.cpp:456, :903
	"blk.%d.ffn_up_exps":        {Kind: "FFN_UP_EXPS", Layer: LayerRepeating, Op: ggml.OpMulMatID},      // llama-arch.cpp:457, :905
	"blk.%d.ffn_gate_up_exps":   {Kind: "FFN_GATE_UP_EXPS", Layer: LayerRepeating, Op: ggml.OpMulMatID}, // llama-arch.cpp:455, :906
	"blk.%d.ffn_gate_inp_shexp": {Kind: "FFN_GATE_INP_SHEXP", Layer: LayerRepeating, Op: ggml.OpMulMat}, // llama-arch.cpp:486, :809
	"blk.%d.ffn_gate_shexp":     {Kind: "FFN_GATE_SHEXP", Layer: LayerRepeating, Op: ggml.OpMulMat},     // llama-arch.cpp:466, :748
	"blk.%d.ffn_down_shexp":     {Kind: "FFN_DOWN_SHEXP", Layer: LayerRepeating, Op: ggml.OpMulMat},     // llama-arch.cpp:468, :747
	"blk.%d.ffn_up_shexp":       {Kind: "FFN_UP_SHEXP", Layer: LayerRepeating, Op: ggml.OpMulMat},       // llama-arch.cpp:467, :749
	"blk.%d.exp_probs_b":        {Kind: "FFN_EXP_PROBS_B", Layer: LayerRepeating, Op: ggml.OpAdd},       // llama-arch.cpp:469, :910

	// deepseek2 MLA
	"blk.%d.attn_q_a_norm":  {Kind: "ATTN_Q_A_NORM", Layer: LayerRepeating, Op: ggml.OpMul},    // llama-arch.cpp:519, :892
	"blk.%d.attn_kv_a_norm": {Kind: "ATTN_KV_A_NORM", Layer: LayerRepeating, Op: ggml.OpMul},   // llama-arch.cpp:520, :893
	"blk.%d.attn_q_a":       {Kind: "ATTN_Q_A", Layer: LayerRepeating, Op: ggml.OpMulMat},      // llama-arch.cpp:521, :750
	"blk.%d.attn_q_b":       {Kind: "ATTN_Q_B", Layer: LayerRepeating, Op: ggml.OpMulMat},      // llama-arch.cpp:522, :751
	"blk.%d.attn_kv_a_mqa":  {Kind: "ATTN_KV_A_MQA", Layer: LayerRepeating, Op: ggml.OpMulMat}, // llama-arch.cpp:523, :752
	"blk.%d.attn_kv_b":      {Kind: "ATTN_KV_B", Layer: LayerRepeating, Op: ggml.OpMulMat},     // llama-arch.cpp:524, :753
	"blk.%d.attn_k_b":       {Kind: "ATTN_K_B", Layer: LayerRepeating, Op: ggml.OpMulMat},      // llama-arch.cpp:578, :788
	"blk.%d.attn_v_b":       {Kind: "ATTN_V_B", Layer: LayerRepeating, Op: ggml.OpMulMat},      // llama-arch.cpp:579, :789

	// deepseek2 NextN / MTP blocks (blocks n_layer .. n_layer_all-1)
	"blk.%d.nextn.eh_proj":          {Kind: "NEXTN_EH_PROJ", Layer: LayerRepeating, Op: ggml.OpMulMat},          // llama-arch.cpp:582, :972
	"blk.%d.nextn.embed_tokens":     {Kind: "NEXTN_EMBED_TOKENS", Layer: LayerRepeating, Op: ggml.OpGetRows},    // llama-arch.cpp:583, :973
	"blk.%d.nextn.enorm":            {Kind: "NEXTN_ENORM", Layer: LayerRepeating, Op: ggml.OpMul},               // llama-arch.cpp:584, :974
	"blk.%d.nextn.hnorm":            {Kind: "NEXTN_HNORM", Layer: LayerRepeating, Op: ggml.OpMul},               // llama-arch.cpp:585, :975
	"blk.%d.nextn.shared_head_head": {Kind: "NEXTN_SHARED_HEAD_HEAD", Layer: LayerRepeating, Op: ggml.OpMulMat}, // llama-arch.cpp:586, :976
	"blk.%d.nextn.shared_head_norm": {Kind: "NEXTN_SHARED_HEAD_NORM", Layer: LayerRepeating, Op: ggml.OpMul},    // llama-arch.cpp:587, :977

	// mamba / mamba2 (ssm_a and ssm_d carry no suffix)
	"blk.%d.ssm_in":     {Kind: "SSM_IN", Layer: LayerRepeating, Op: ggml.OpMulMat},      // llama-arch.cpp:492, :811
	"blk.%d.ssm_conv1d": {Kind: "SSM_CONV1D", Layer: LayerRepeating, Op: ggml.OpSSMConv}, // llama-arch.cpp:488, :836
	"blk.%d.ssm_x":      {Kind: "SSM_X", Layer: LayerRepeating, Op: ggml.OpMulMat},       // llama-arch.cpp:497, :812
	"blk.%d.ssm_dt":     {Kind: "SSM_DT", Layer: LayerRepeating, Op: ggml.OpMulMat},      // llama-arch.cpp:489, :813
	"blk.%d.ssm_a":      {Kind: "SSM_A", Layer: LayerRepeating, Op: ggml.OpSSMScan},      // llama-arch.cpp:498, :837
	"blk.%d.ssm_d":      {Kind: "SSM_D", Layer: LayerRepeating, Op: ggml.OpMul},          // llama-arch.cpp:499, :842
	"blk.%d.ssm_norm":   {Kind: "SSM_NORM", Layer: LayerRepeating, Op: ggml.OpMul},       // llama-arch.cpp:493, :843
	"blk.%d.ssm_out":    {Kind: "SSM_OUT", Layer: LayerRepeating, Op: ggml.OpMulMat},     // llama-arch.cpp:494, :814

	// rwkv6 (token_embd_norm above is created with bid 0: REPEATING, placed in layer 0)
	"blk.%d.time_mix_w1":            {Kind: "TIME_MIX_W1", Layer: LayerRepeating, Op: ggml.OpMulMat},            // llama-arch.cpp:617, :817
	"blk.%d.time_mix_w2":            {Kind: "TIME_MIX_W2", Layer: LayerRepeating, Op: ggml.OpMulMat},            // llama-arch.cpp:618, :818
	"blk.%d.time_mix_lerp_x":        {Kind: "TIME_MIX_LERP_X", Layer: LayerRepeating, Op: ggml.OpMul},           // llama-arch.cpp:619, :860
	"blk.%d.time_mix_lerp_w":        {Kind: "TIME_MIX_LERP_W", Layer: LayerRepeating, Op: ggml.OpAdd},           // llama-arch.cpp:620, :867
	"blk.%d.time_mix_lerp_k":        {Kind: "TIME_MIX_LERP_K", Layer: LayerRepeating, Op: ggml.OpAdd},           // llama-arch.cpp:621, :868
	"blk.%d.time_mix_lerp_v":        {Kind: "TIME_MIX_LERP_V", Layer: LayerRepeating, Op: ggml.OpAdd},           // llama-arch.cpp:622, :869
	"blk.%d.time_mix_lerp_r":        {Kind: "TIME_MIX_LERP_R", Layer: LayerRepeating, Op: ggml.OpAdd},           // llama-arch.cpp:623, :870
	"blk.%d.time_mix_lerp_g":        {Kind: "TIME_MIX_LERP_G", Layer: LayerRepeating, Op: ggml.OpAdd},           // llama-arch.cpp:624, :871
	"blk.%d.time_mix_lerp_fused":    {Kind: "TIME_MIX_LERP_FUSED", Layer: LayerRepeating, Op: ggml.OpAdd},       // llama-arch.cpp:625, :872
	"blk.%d.time_mix_first":         {Kind: "TIME_MIX_FIRST", Layer: LayerRepeating, Op: ggml.OpRWKVWKV6},       // llama-arch.cpp:626, :877
	"blk.%d.time_mix_decay":         {Kind: "TIME_MIX_DECAY", Layer: LayerRepeating, Op: ggml.OpAdd},            // llama-arch.cpp:627, :873
	"blk.%d.time_mix_decay_w1":      {Kind: "TIME_MIX_DECAY_W1", Layer: LayerRepeating, Op: ggml.OpMulMat},      // llama-arch.cpp:628, :825
	"blk.%d.time_mix_decay_w2":      {Kind: "TIME_MIX_DECAY_W2", Layer: LayerRepeating, Op: ggml.OpMulMat},      // llama-arch.cpp:629, :826
	"blk.%d.time_mix_key":           {Kind: "TIME_MIX_KEY", Layer: LayerRepeating, Op: ggml.OpMulMat},           // llama-arch.cpp:630, :827
	"blk.%d.time_mix_value":         {Kind: "TIME_MIX_VALUE", Layer: LayerRepeating, Op: ggml.OpMulMat},         // llama-arch.cpp:631, :828
	"blk.%d.time_mix_receptance":    {Kind: "TIME_MIX_RECEPTANCE", Layer: LayerRepeating, Op: ggml.OpMulMat},    // llama-arch.cpp:632, :829
	"blk.%d.time_mix_gate":          {Kind: "TIME_MIX_GATE", Layer: LayerRepeating, Op: ggml.OpMulMat},          // llama-arch.cpp:633, :830
	"blk.%d.time_mix_ln":            {Kind: "TIME_MIX_LN", Layer: LayerRepeating, Op: ggml.OpMul},               // llama-arch.cpp:634, :861
	"blk.%d.time_mix_output":        {Kind: "TIME_MIX_OUTPUT", Layer: LayerRepeating, Op: ggml.OpMulMat},        // llama-arch.cpp:635, :831
	"blk.%d.channel_mix_lerp_k":     {Kind: "CHANNEL_MIX_LERP_K", Layer: LayerRepeating, Op: ggml.OpMul},        // llama-arch.cpp:636, :862
	"blk.%d.channel_mix_lerp_r":     {Kind: "CHANNEL_MIX_LERP_R", Layer: LayerRepeating, Op: ggml.OpMul},        // llama-arch.cpp:637, :863
	"blk.%d.channel_mix_key":        {Kind: "CHANNEL_MIX_KEY", Layer: LayerRepeating, Op: ggml.OpMulMat},        // llama-arch.cpp:638, :832
	"blk.%d.channel_mix_value":      {Kind: "CHANNEL_MIX_VALUE", Layer: LayerRepeating, Op: ggml.OpMulMat},      // llama-arch.cpp:639, :834
	"blk.%d.channel_mix_receptance": {Kind: "CHANNEL_MIX_RECEPTANCE", Layer: LayerRepeating, Op: ggml.OpMulMat}, // llama-arch.cpp:640, :833

	// gemma4 (per-layer embeddings, experts norms)
	"per_layer_token_embd":      {Kind: "PER_LAYER_TOKEN_EMBD", Layer: LayerInput, Op: ggml.OpGetRows},    // llama-arch.cpp:559, :913
	"per_layer_model_proj":      {Kind: "PER_LAYER_MODEL_PROJ", Layer: LayerRepeating, Op: ggml.OpMulMat}, // llama-arch.cpp:560, :914
	"per_layer_proj_norm":       {Kind: "PER_LAYER_PROJ_NORM", Layer: LayerRepeating, Op: ggml.OpMul},     // llama-arch.cpp:561, :915
	"blk.%d.layer_output_scale": {Kind: "LAYER_OUT_SCALE", Layer: LayerRepeating, Op: ggml.OpMul},         // llama-arch.cpp:476, :891
	"blk.%d.inp_gate":           {Kind: "PER_LAYER_INP_GATE", Layer: LayerRepeating, Op: ggml.OpMulMat},   // llama-arch.cpp:564, :918
	"blk.%d.proj":               {Kind: "PER_LAYER_PROJ", Layer: LayerRepeating, Op: ggml.OpMulMat},       // llama-arch.cpp:565, :919
	"blk.%d.post_norm":          {Kind: "PER_LAYER_POST_NORM", Layer: LayerRepeating, Op: ggml.OpMul},     // llama-arch.cpp:566, :920
	"blk.%d.pre_ffw_norm_2":     {Kind: "FFN_PRE_NORM_2", Layer: LayerRepeating, Op: ggml.OpMul},          // llama-arch.cpp:465, :883
	"blk.%d.post_ffw_norm_1":    {Kind: "FFN_POST_NORM_1", Layer: LayerRepeating, Op: ggml.OpMul},         // llama-arch.cpp:463, :884
	"blk.%d.post_ffw_norm_2":    {Kind: "FFN_POST_NORM_2", Layer: LayerRepeating, Op: ggml.OpMul},         // llama-arch.cpp:464, :885
}

// tensorSuffixes are the suffixes create_tensor is called with by the
// architectures above (plus the generic scale pass).
var tensorSuffixes = []string{"weight", "bias", "scale", "input_scale"}

// splitTensorName splits a full GGUF tensor name into its base and suffix.
// Names without a known suffix (blk.N.ssm_a, blk.N.ssm_d) return suffix "".
func splitTensorName(name string) (base, suffix string) {
	if i := strings.LastIndexByte(name, '.'); i >= 0 {
		last := name[i+1:]
		for _, s := range tensorSuffixes {
			if last == s {
				return name[:i], last
			}
		}
	}
	return name, ""
}

// lookupTensor parses a full GGUF tensor name ("blk.12.ffn_down_exps.weight",
// "token_embd.weight", "blk.3.ffn_gate.7.weight", "blk.0.ssm_a") into its
// template, its layer number (the first all-digit dot-separated component, -1
// if none) and its info. A "bias" suffix turns the op into OpAdd, or OpAddID
// when the kind's op is OpMulMatID (llama-model-loader.cpp:1188-1192); other
// suffixes keep the kind's op.
//
// The layer is the one in the name. llama.cpp places a REPEATING tensor by the
// bid its creation passed, which differs from the name for token_embd_norm
// (bid 0, rwkv6) and rope_freqs / rope_factors_* (one file tensor, placed in
// every layer): callers resolve those through archTensors.
func lookupTensor(name string) (tmpl string, layer int, info TensorInfo, ok bool) {
	base, suffix := splitTensorName(name)
	tmpl, layer = templateOf(base)
	info, ok = tensorKinds[tmpl]
	if !ok {
		return tmpl, layer, TensorInfo{}, false
	}
	if suffix == "bias" {
		if info.Op == ggml.OpMulMatID {
			info.Op = ggml.OpAddID
		} else {
			info.Op = ggml.OpAdd
		}
	}
	return tmpl, layer, info, true
}

// templateOf replaces every all-digit dot-separated component of base with
// %d and returns the first one as the layer (-1 if none).
func templateOf(base string) (string, int) {
	// fast path: "blk.N.rest" with no other number
	if rest, ok := strings.CutPrefix(base, "blk."); ok {
		if i := strings.IndexByte(rest, '.'); i > 0 && isDigits(rest[:i]) && !hasDigitPart(rest[i+1:]) {
			n, err := strconv.Atoi(rest[:i])
			if err == nil {
				return "blk.%d." + rest[i+1:], n
			}
		}
	}
	parts := strings.Split(base, ".")
	layer := -1
	for i, p := range parts {
		if !isDigits(p) {
			continue
		}
		if layer < 0 {
			n, err := strconv.Atoi(p)
			if err != nil {
				return base, -1
			}
			layer = n
		}
		parts[i] = "%d"
	}
	return strings.Join(parts, "."), layer
}

func hasDigitPart(s string) bool {
	for s != "" {
		i := strings.IndexByte(s, '.')
		part := s
		if i >= 0 {
			part, s = s[:i], s[i+1:]
		} else {
			s = ""
		}
		if isDigits(part) {
			return true
		}
	}
	return false
}

func isDigits(s string) bool {
	if s == "" {
		return false
	}
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return false
		}
	}
	return true
}

// TensorTemplates lists the name templates of llama.cpp's tensor info table
// that ggload knows.
func TensorTemplates() []string {
	out := make([]string, 0, len(tensorKinds))
	for t := range tensorKinds {
		out = append(out, t)
	}
	return out
}
