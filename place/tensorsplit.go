package place

import (
	"fmt"
	"regexp"
	"strconv"
	"strings"

	"github.com/ggload/ggload/ggml"
	"github.com/ggload/ggload/internal/arch"
)

// Split mode tensor: the pinned llama.cpp makes one ggml meta device of the
// model's devices and places layers on it as on one GPU; the meta device
// holds each tensor in slices over its devices, as a callback of the model
// says (llama_meta_device_get_split_state). That callback is ported here:
// per tensor a split axis, the tensor whose quantization block size and
// layer rotation govern the slice boundaries, the segments of fused tensors
// (QKV, gate+up), and the granularity each slice is rounded to.

// noTensorSplit are the architectures llama.cpp refuses in split mode
// tensor (llm_arch_supports_sm_tensor).
var noTensorSplit = map[string]bool{
	"grok": true, "mpt": true, "plamo2": true, "minicpm3": true, "gemma3n": true,
	"mamba": true, "mamba2": true, "jamba": true, "falcon-h1": true, "olmo2": true,
	"olmoe": true, "deepseek2": true, "deepseek32": true, "hy_v4": true, "dots3note": true,
	"glm-dsa": true, "bitnet": true, "t5": true, "nemotron_h": true, "nemotron_h_moe": true,
	"granitehybrid": true, "minimax-01": true, "minimax-m2": true, "minimax-m3": true,
	"mistral4": true, "kimi-linear": true, "bailingmoe3": true, "kimi-k3": true,
	"qwen3tts": true, "qwen4exp": true,
}

// SupportsTensorSplit reports whether the pinned llama.cpp loads an
// architecture in split mode tensor.
func SupportsTensorSplit(arch string) bool { return !noTensorSplit[arch] }

func rx(s string) *regexp.Regexp { return regexp.MustCompile("^" + s + "$") }

// matcher reports whether a name matches any of the patterns given.
func matcher(name string) func(res ...*regexp.Regexp) bool {
	return func(res ...*regexp.Regexp) bool {
		for _, r := range res {
			if r.MatchString(name) {
				return true
			}
		}
		return false
	}
}

var (
	reQWeight       = rx(`blk\.\d*\.attn_q.weight`)
	reKVWeight      = rx(`blk\.\d*\.attn_(k|v).weight`)
	reQKVWeight     = rx(`blk\.\d*\.attn_qkv.weight`)
	reQBias         = rx(`blk\.\d*\.attn_q\.bias`)
	reKVBias        = rx(`blk\.\d*\.attn_(k|v)\.bias`)
	reQKVBias       = rx(`blk\.\d*\.attn_qkv.bias`)
	reQKNorm        = rx(`blk\.\d*\.attn_(q|k)_norm\.weight`)
	reKVCache       = rx(`cache_(k|v)_l\d*`)
	reIdxCache      = rx(`cache_idx_(k|v)_l\d*`)
	reDSV4State     = rx(`dsv4_(csa|hca|lid)_state_(kv|score)_l\d*`)
	reAttnSinks     = rx(`blk\.\d*\.attn_sinks.weight`)
	reAttnOutWeight = rx(`blk\.\d*\.attn_output.weight`)
	reAttnOutBias   = rx(`blk\.\d*\.attn_output.bias`)
	reAttnOutA      = rx(`blk\.\d*\.attn_output_a\.weight`)
	reAttnOutB      = rx(`blk\.\d*\.attn_output_b\.weight`)
	reAttnQB        = rx(`blk\.\d*\.attn_q_b\.weight`)
	reAttnGate      = rx(`blk\.\d*\.attn_gate.weight`)

	reSSMDt      = rx(`blk\.\d*\.ssm_dt.bias`)
	reSSMA       = rx(`blk\.\d*\.ssm_a`)
	reSSMAlpha   = rx(`blk\.\d*\.ssm_alpha.weight`)
	reSSMBeta    = rx(`blk\.\d*\.ssm_beta.weight`)
	reSSMBA      = rx(`blk\.\d*\.ssm_ba.weight`)
	reRCache     = rx(`cache_r_l\d*`)
	rePLERCache  = rx(`cache_ple_r_l\d*`)
	reSCache     = rx(`cache_s_l\d*`)
	reSSMConv1d  = rx(`blk\.\d*\.ssm_conv1d.weight`)
	reSSMOut     = rx(`blk\.\d*\.ssm_out.weight`)
	reFFNUpW     = rx(`blk\.\d*\.ffn_up(_exps)?.weight`)
	reFFNUpB     = rx(`blk\.\d*\.ffn_up(_exps)?.bias`)
	reFFNGateW   = rx(`blk\.\d*\.ffn_gate(_exps)?.weight`)
	reFFNGateB   = rx(`blk\.\d*\.ffn_gate(_exps)?.bias`)
	reFFNGateUpW = rx(`blk\.\d*\.ffn_gate_up(_exps)?.weight`)
	reFFNDownW   = rx(`blk\.\d*\.ffn_down(_exps)?.weight`)
	reFFNDownB   = rx(`blk\.\d*\.ffn_down.bias`)
	reFFNDownXB  = rx(`blk\.\d*\.ffn_down_exps.bias`)
	reFFNUpSh    = rx(`blk\.\d*\.ffn_up_shexp.weight`)
	reFFNGateSh  = rx(`blk\.\d*\.ffn_gate_shexp.weight`)
	reFFNDownSh  = rx(`blk\.\d*\.ffn_down_shexp.weight`)
	reOutputW    = rx(`output\.weight`)
	reOutputB    = rx(`output\.bias`)
)

// splitTensor is what the rules need of a tensor: its name, type and the
// shape it was created with.
type splitTensor struct {
	name  string
	typ   ggml.Type
	shape ggml.Shape
}

// tensorSplitter computes split states for a model on a meta device of n
// devices with llama.cpp's tensor split (its 16 floats).
type tensorSplitter struct {
	arch   string
	hp     *arch.Hparams
	n      int
	ts     [16]float32
	tensor func(name string) (splitTensor, bool) // llama_model::get_tensor
	nLayer int64                                 // hparams.n_layer()
	ilEff  map[int64]int64
	memo   map[string]int64
	err    error
}

func newTensorSplitter(h *hparams, n int, ts []float32, tensor func(string) (splitTensor, bool)) (*tensorSplitter, error) {
	s := &tensorSplitter{arch: h.arch, hp: h.run.Hparams(), n: n, tensor: tensor, ilEff: map[int64]int64{}, memo: map[string]int64{}}
	copy(s.ts[:], ts)
	s.nLayer = s.call("n_layer")
	return s, s.err
}

// abortf is an error where llama.cpp's callback asserts (and the process
// would abort).
func abortf(format string, args ...any) error {
	return fmt.Errorf("split mode tensor: "+format, args...)
}

func (s *tensorSplitter) field(name string) int64 {
	if v, ok := s.memo[name]; ok {
		return v
	}
	v, err := s.hp.Field(name)
	if err != nil && s.err == nil {
		s.err = err
	}
	s.memo[name] = v
	return v
}

func (s *tensorSplitter) call(method string, args ...int64) int64 {
	key := method
	for _, a := range args {
		key += "," + strconv.FormatInt(a, 10)
	}
	if v, ok := s.memo[key]; ok {
		return v
	}
	v, err := s.hp.Call(method, args...)
	if err != nil && s.err == nil {
		s.err = err
	}
	s.memo[key] = v
	return v
}

func (s *tensorSplitter) isRecr(il int64) bool { return s.call("is_recr", il) != 0 }
func (s *tensorSplitter) isSWA(il int64) bool  { return s.call("is_swa", il) != 0 }

// layerRank counts the earlier layers of il's kind (recurrent or not,
// sliding-window or not): a pattern of layer kinds that divides evenly by
// the device count would otherwise put the same rounding on one device.
func (s *tensorSplitter) layerRank(il int64) int64 {
	if v, ok := s.ilEff[il]; ok {
		return v
	}
	recr, swa := s.isRecr(il), s.isSWA(il)
	var n int64
	for p := int64(0); p < il; p++ {
		if s.isRecr(p) == recr && s.isSWA(p) == swa {
			n++
		}
	}
	s.ilEff[il] = n
	return n
}

type splitConfig struct {
	axis     ggml.SplitAxis
	axis0    splitTensor // the tensor whose block size and layer govern the slices
	self     bool        // axis0 is the tensor itself
	il       int64
	rotation int64
}

// config is get_tensor_config_impl: the axis, and the tensor named by
// suffix (or fallback) in the same layer.
func (s *tensorSplitter) config(t splitTensor, axis ggml.SplitAxis, suffix, fallback string) (splitConfig, error) {
	name := t.name
	var il, rotation int64
	prefix := ""
	n := int64(s.n)
	switch {
	case strings.HasPrefix(name, "blk."):
		end := strings.IndexByte(name[4:], '.')
		if end < 0 {
			return splitConfig{}, abortf("tensor %s: no layer number", name)
		}
		prefix = name[:4+end+1]
		v, err := leadingUint(name[4:])
		if err != nil {
			return splitConfig{}, fmt.Errorf("split mode tensor: tensor %s: layer number: %w", name, err)
		}
		il = v
		rotation = s.layerRank(il) % n
	case strings.HasPrefix(name, "cache_"):
		k := strings.Index(name[6:], "_l")
		if k < 0 {
			return splitConfig{}, abortf("tensor %s: no layer number", name)
		}
		v, err := leadingUint(name[6+k+2:])
		if err != nil {
			return splitConfig{}, fmt.Errorf("split mode tensor: tensor %s: layer number: %w", name, err)
		}
		il = v
		prefix = "blk." + strconv.FormatInt(il, 10) + "."
		rotation = s.layerRank(il) % n
	default:
		rotation = s.nLayer % n
	}
	c := splitConfig{axis: axis, axis0: t, self: suffix == "", il: il, rotation: rotation}
	if suffix != "" {
		a0, ok := s.tensor(prefix + suffix)
		if !ok {
			if fallback == "" {
				return splitConfig{}, abortf("tensor %s is split like %s, which the model does not have", name, prefix+suffix)
			}
			if a0, ok = s.tensor(prefix + fallback); !ok {
				return splitConfig{}, abortf("tensor %s is split like %s or %s, which the model does not have", name, prefix+suffix, prefix+fallback)
			}
		}
		c.axis0 = a0
	}
	return c, nil
}

// leadingUint parses the digits at the start of s as std::stoull does.
func leadingUint(s string) (int64, error) {
	i := 0
	for i < len(s) && s[i] >= '0' && s[i] <= '9' {
		i++
	}
	if i == 0 {
		return 0, fmt.Errorf("%q is not a number", s)
	}
	return strconv.ParseInt(s[:i], 10, 64)
}

func (s *tensorSplitter) isDSV4() bool {
	return s.arch == "deepseek4" || (s.arch == "dflash" && s.field("dsv4_hc_mult") > 0)
}

// qwenGate reports the architectures whose attention Q carries a gate
// (and the linear-attention layout of Qwen 3 Next and 3.5).
func (s *tensorSplitter) qwenGate() bool {
	switch s.arch {
	case "qwen3next", "qwen35", "qwen35moe", "qwen4exp":
		return true
	}
	return false
}

// tensorConfig is get_tensor_config.
func (s *tensorSplitter) tensorConfig(t splitTensor) (splitConfig, error) {
	name := t.name
	is := matcher(name)
	cfg := func(axis ggml.SplitAxis, suffix ...string) (splitConfig, error) {
		sfx, fb := "", ""
		if len(suffix) > 0 {
			sfx = suffix[0]
		}
		if len(suffix) > 1 {
			fb = suffix[1]
		}
		return s.config(t, axis, sfx, fb)
	}
	const (
		ax0, ax1, ax2 = ggml.SplitAxis0, ggml.SplitAxis1, ggml.SplitAxis2
		mir, part     = ggml.SplitMirrored, ggml.SplitPartial
	)
	if s.arch == "hrm_text" {
		return splitConfig{axis: mir, axis0: t, self: true}, nil
	}
	if s.isDSV4() {
		switch {
		case is(reKVCache, reDSV4State):
			return cfg(mir)
		case is(reAttnSinks):
			return cfg(ax0, "attn_output_a.weight")
		case is(reAttnQB):
			return cfg(ax1, "attn_output_a.weight")
		case is(reAttnOutA):
			return cfg(ax2)
		case is(reAttnOutB):
			return cfg(ax0)
		case is(reFFNUpSh, reFFNGateSh):
			return cfg(ax1, "ffn_down_shexp.weight")
		case is(reFFNDownSh):
			return cfg(ax0, "ffn_down_shexp.weight")
		}
	}
	switch {
	case is(reIdxCache), is(rePLERCache):
		return cfg(mir)
	// (the patterns match disjoint names: their order is free)
	case is(reQWeight, reKVWeight, reQKVWeight, reAttnGate):
		return cfg(ax1, "attn_output.weight", "ssm_out.weight")
	case is(reQBias, reKVBias, reQKVBias):
		return cfg(ax0, "attn_output.weight", "ssm_out.weight")
	case is(reQKNorm):
		if t.shape[1] == 1 {
			return cfg(mir, "attn_output.weight")
		}
		return cfg(ax1, "attn_output.weight")
	case is(reKVCache, reAttnSinks):
		return cfg(ax0, "attn_output.weight")
	case is(reAttnOutWeight):
		return cfg(ax0)
	case is(reAttnOutBias):
		return cfg(mir)
	case is(reSSMDt, reSSMA):
		return cfg(ax0, "ssm_out.weight")
	case is(reSSMAlpha, reSSMBeta, reSSMBA):
		return cfg(ax1, "ssm_out.weight")
	case is(reRCache, reSCache):
		if s.arch == "lfm2" || s.arch == "lfm2moe" {
			return cfg(mir)
		}
		return cfg(ax0, "ssm_out.weight")
	case is(reSSMConv1d):
		return cfg(ax1, "ssm_out.weight")
	case is(reSSMOut):
		return cfg(ax0)
	case is(reFFNUpW, reFFNGateW, reFFNGateUpW):
		return cfg(ax1, "ffn_down.weight", "ffn_down_exps.weight")
	case is(reFFNUpB, reFFNGateB, reFFNDownW):
		return cfg(ax0, "ffn_down.weight", "ffn_down_exps.weight")
	case is(reFFNDownB):
		return cfg(mir)
	case is(reFFNDownXB):
		return cfg(part, "ffn_down_exps.weight")
	case is(reOutputW):
		if s.isDSV4() {
			return cfg(mir)
		}
		return cfg(ax1)
	case is(reOutputB):
		if _, ok := s.tensor("output.weight"); !ok {
			return splitConfig{}, abortf("tensor %s without output.weight", name)
		}
		return cfg(ax0)
	}
	return cfg(mir)
}

type segment struct {
	ne int64
	nr uint32
}

// segments is get_split_segments: the segments of t along axis.
func (s *tensorSplitter) segments(t splitTensor, axis int, il int64) ([]segment, error) {
	name := t.name
	is := matcher(name)
	neAxis := t.shape[axis]
	if s.qwenGate() {
		if !s.isRecr(il) && is(reQKVWeight, reQKVBias) {
			nEmbd := s.call("n_head", il) * s.call("n_embd_head_k", il) * 2
			gqa := s.call("n_embd_v_gqa", il)
			if s.call("n_embd_k_gqa", il) != gqa || neAxis != nEmbd+2*gqa {
				return nil, abortf("tensor %s: %d along axis %d is not a gated Q of %d plus K and V of %d", name, neAxis, axis, nEmbd, gqa)
			}
			return []segment{{nEmbd, 1}, {gqa, 2}}, nil
		}
		headKDim, headVDim := s.field("ssm_d_state"), s.field("ssm_d_state")
		nK, nV := s.field("ssm_n_group"), s.field("ssm_dt_rank")
		keyDim, valueDim := headKDim*nK, headVDim*nV
		dConv := s.field("ssm_d_conv")
		if s.arch == "qwen3next" {
			if is(reQKVWeight, reSSMConv1d) {
				if neAxis != 2*keyDim+valueDim {
					return nil, abortf("tensor %s: %d along axis %d is not 2×%d+%d", name, neAxis, axis, keyDim, valueDim)
				}
				return []segment{{keyDim, 2}, {valueDim, 1}}, nil
			}
			if is(reRCache) {
				return []segment{{keyDim * (dConv - 1), 2}, {valueDim * (dConv - 1), 1}}, nil
			}
		} else {
			if nK == 0 {
				return nil, fmt.Errorf("split mode tensor: tensor %s: ssm_n_group is 0 (a division by zero)", name)
			}
			ratio := nV / nK
			switch {
			case is(reQKVWeight, reSSMConv1d):
				if neAxis != 2*keyDim+valueDim {
					return nil, abortf("tensor %s: %d along axis %d is not 2×%d+%d", name, neAxis, axis, keyDim, valueDim)
				}
				return []segment{{keyDim, uint32(2 + ratio)}}, nil
			case is(reAttnGate, reSSMOut):
				return []segment{{keyDim, uint32(ratio)}}, nil
			case is(reSSMDt, reSSMA, reSSMAlpha, reSSMBeta):
				return []segment{{nK, uint32(ratio)}}, nil
			case is(reRCache):
				return []segment{{keyDim * (dConv - 1), uint32(2 + ratio)}}, nil
			case is(reSCache):
				return []segment{{nK * headVDim * headVDim, uint32(ratio)}}, nil
			}
		}
		if is(reFFNGateUpW) {
			ff := s.call("n_ff_exp", il)
			if neAxis != 2*ff {
				return nil, abortf("tensor %s: %d along axis %d is not 2×n_ff_exp (%d)", name, neAxis, axis, ff)
			}
			return []segment{{ff, 2}}, nil
		}
		return []segment{{neAxis, 1}}, nil
	}
	switch {
	case is(reQKVWeight, reQKVBias):
		nEmbd := s.call("n_head", il) * s.call("n_embd_head_k", il)
		gqa := s.call("n_embd_v_gqa", il)
		if s.call("n_embd_k_gqa", il) != gqa || neAxis != nEmbd+2*gqa {
			return nil, abortf("tensor %s: %d along axis %d is not Q of %d plus K and V of %d", name, neAxis, axis, nEmbd, gqa)
		}
		return []segment{{nEmbd, 1}, {gqa, 2}}, nil
	case is(reFFNUpW, reFFNUpB):
		// a fused up+gate tensor named up (Phi 3) has two segments
		if ff := s.call("n_ff", il); neAxis == 2*ff {
			return []segment{{ff, 2}}, nil
		}
		return []segment{{neAxis, 1}}, nil
	case is(reFFNGateUpW):
		ff := s.call("n_ff_exp", il)
		if neAxis != 2*ff {
			return nil, abortf("tensor %s: %d along axis %d is not 2×n_ff_exp (%d)", name, neAxis, axis, ff)
		}
		return []segment{{ff, 2}}, nil
	}
	return []segment{{neAxis, 1}}, nil
}

func gcd(a, b int64) int64 {
	for b != 0 {
		a, b = b, a%b
	}
	if a < 0 {
		return -a
	}
	return a
}

// lcm is std::lcm (0 when either is 0).
func lcm(a, b int64) int64 {
	if a == 0 || b == 0 {
		return 0
	}
	v := a / gcd(a, b) * b
	if v < 0 {
		return -v
	}
	return v
}

func repeatN(n int, v int64) []int64 {
	out := make([]int64, n)
	for i := range out {
		out[i] = v
	}
	return out
}

// granularity is get_split_granularity: what each segment's slices are
// rounded to.
func (s *tensorSplitter) granularity(t splitTensor, blck, il int64, segs []segment) ([]int64, error) {
	name := t.name
	is := matcher(name)
	one := func(v int64) ([]int64, error) {
		if len(segs) != 1 {
			return nil, abortf("tensor %s has %d segments, its rule wants one", name, len(segs))
		}
		return []int64{v}, nil
	}
	if s.isRecr(il) {
		headDim := s.field("ssm_d_state")
		perf := lcm(blck, 128)
		qkv := lcm(perf, headDim)
		switch {
		case is(reQKVWeight, reAttnGate, reSSMConv1d, reSSMOut):
			return repeatN(len(segs), qkv), nil
		case is(reSSMDt, reSSMA, reSSMAlpha, reSSMBeta):
			if headDim == 0 {
				return nil, fmt.Errorf("split mode tensor: tensor %s: ssm_d_state is 0 (a division by zero)", name)
			}
			return repeatN(len(segs), qkv/headDim), nil
		case is(reSSMBA):
			if headDim == 0 {
				return nil, fmt.Errorf("split mode tensor: tensor %s: ssm_d_state is 0 (a division by zero)", name)
			}
			return repeatN(len(segs), 2*(qkv/headDim)), nil
		case is(reRCache):
			return repeatN(len(segs), qkv*(s.field("ssm_d_conv")-1)), nil
		case is(reSCache):
			return repeatN(len(segs), qkv*headDim), nil
		}
	} else {
		nGQA := s.call("n_gqa", il)
		headK := s.call("n_embd_head_k", il)
		nEmbdQ := nGQA * headK
		perf := blck
		for perf < 128 && perf*int64(s.n) < nEmbdQ {
			perf *= 2
		}
		gq := lcm(nEmbdQ, perf)
		if headK == 0 {
			return nil, fmt.Errorf("split mode tensor: tensor %s: n_embd_head_k is 0 (a division by zero)", name)
		}
		gHead := gq / headK
		dsv4 := s.isDSV4()
		if is(reAttnSinks) {
			if dsv4 {
				groups := s.field("dsv4_o_group_count")
				if groups == 0 {
					return nil, fmt.Errorf("split mode tensor: tensor %s: dsv4_o_group_count is 0 (a division by zero)", name)
				}
				return one(s.call("n_head", il) / groups)
			}
			return one(gHead)
		}
		if dsv4 {
			switch {
			case is(reAttnQB):
				groups := s.field("dsv4_o_group_count")
				if groups == 0 {
					return nil, fmt.Errorf("split mode tensor: tensor %s: dsv4_o_group_count is 0 (a division by zero)", name)
				}
				return one(s.call("n_head", il) / groups * headK)
			case is(reAttnOutA):
				return one(1)
			case is(reAttnOutB):
				rank := s.field("dsv4_o_lora_rank")
				if rank%blck != 0 {
					return nil, abortf("tensor %s: dsv4_o_lora_rank %d is not a multiple of the block size %d", name, rank, blck)
				}
				return one(rank)
			}
		}
		switch {
		case is(reQWeight, reQBias):
			if s.qwenGate() {
				return one(lcm(2*nEmbdQ, perf))
			}
			return one(gq)
		case is(reAttnOutWeight):
			return one(gq)
		case is(reAttnGate):
			if t.shape[1] == s.call("n_head", il) {
				return one(gHead)
			}
			return one(gq)
		}
		if nGQA == 0 {
			return nil, fmt.Errorf("split mode tensor: tensor %s: n_gqa is 0 (a division by zero)", name)
		}
		gkv := gq / nGQA
		switch {
		case is(reKVWeight, reKVBias, reKVCache):
			return one(gkv)
		case is(reQKVWeight, reQKVBias):
			if len(segs) != 2 {
				return nil, abortf("tensor %s has %d segments, its rule wants two", name, len(segs))
			}
			if s.qwenGate() {
				return []int64{lcm(2*nEmbdQ, perf), gkv}, nil
			}
			return []int64{gq, gkv}, nil
		}
	}
	if is(reFFNUpW, reFFNUpB, reFFNGateW, reFFNGateB, reFFNGateUpW, reFFNDownW, reFFNUpSh, reFFNGateSh, reFFNDownSh) {
		return one(lcm(blck, 128))
	}
	return one(1)
}

// state is llama_meta_device_get_split_state for one tensor.
func (s *tensorSplitter) state(t splitTensor) (ggml.SplitState, error) {
	st, err := s.stateOf(t)
	if err == nil && s.err != nil {
		err = s.err
	}
	if err != nil {
		return ggml.SplitState{}, err
	}
	return st, nil
}

func (s *tensorSplitter) stateOf(t splitTensor) (ggml.SplitState, error) {
	c, err := s.tensorConfig(t)
	if err != nil {
		return ggml.SplitState{}, err
	}
	n := s.n
	if c.axis.IsDim() {
		blck := c.axis0.typ.BlockSize()
		scan := make([]float32, n)
		for j := range scan {
			scan[j] = s.ts[(int64(j)+c.rotation)%int64(n)]
			if j > 0 {
				scan[j] += scan[j-1]
			}
		}
		segs, err := s.segments(t, int(c.axis), c.il)
		if err != nil {
			return ggml.SplitState{}, err
		}
		gran, err := s.granularity(t, blck, c.il, segs)
		if err != nil {
			return ggml.SplitState{}, err
		}
		if len(segs) > 16 {
			return ggml.SplitState{}, abortf("tensor %s has %d segments (at most 16)", t.name, len(segs))
		}
		st := ggml.SplitState{Axis: c.axis, Segments: make([]ggml.SplitSegment, len(segs))}
		total := scan[n-1]
		for i, sg := range segs {
			g := gran[i]
			if g <= 0 {
				return ggml.SplitState{}, fmt.Errorf("split mode tensor: tensor %s: granularity %d (a division by zero)", t.name, g)
			}
			lengths := make([]int64, n)
			var low int64
			j := 0
			for ; j < n-1; j++ {
				var high int64
				if total == 0 {
					high = sg.ne * int64(j+1) / int64(n)
				} else {
					// float arithmetic as llama.cpp's: the length times the
					// scan, over the total, truncated
					high = int64(float32(float32(sg.ne)*scan[j]) / total)
				}
				high -= high % g
				lengths[(int64(j)+c.rotation)%int64(n)] = high - low
				low = high
			}
			lengths[(int64(j)+c.rotation)%int64(n)] = sg.ne - low
			st.Segments[i] = ggml.SplitSegment{Lengths: lengths, Repeat: sg.nr}
		}
		return st, s.checkSlices(t, st)
	}
	st := ggml.SplitState{Axis: c.axis}
	if c.axis == ggml.SplitPartial {
		if c.self {
			return ggml.SplitState{}, abortf("tensor %s is a partial sum of itself", t.name)
		}
		src, err := s.stateOf(c.axis0)
		if err != nil {
			return ggml.SplitState{}, err
		}
		if !src.Axis.IsDim() {
			return ggml.SplitState{}, abortf("tensor %s is a partial sum of %s, which is not split along a dimension", t.name, c.axis0.name)
		}
		lengths := make([]int64, n)
		for j := range lengths {
			lengths[j] = src.Share(j)
		}
		st.Segments = []ggml.SplitSegment{{Lengths: lengths, Repeat: 1}}
		return st, s.checkSlices(t, st)
	}
	return st, nil
}

// checkSlices checks, before any native call, what ggml's meta buffer
// asserts of the tensor's split (ggml.SplitState.Check).
func (s *tensorSplitter) checkSlices(t splitTensor, st ggml.SplitState) error {
	if err := st.Check(t.typ, t.shape, s.n); err != nil {
		return fmt.Errorf("split mode tensor: tensor %s (%s, %v): %w", t.name, t.typ, t.shape, err)
	}
	return nil
}
