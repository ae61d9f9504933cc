package place

import (
	"fmt"

	"github.com/ggload/ggload/loader/gguf"
)

// hparams are the model hyperparameters that placement depends on: which
// tensors an architecture creates, and the shapes of llama.cpp's
// supports_op probes. They are read as llama.cpp's load_hparams reads them.
type hparams struct {
	arch          string
	nLayerAll     int   // %s.block_count
	nLayerNextn   int   // %s.nextn_predict_layers
	nEmbd         int64 // %s.embedding_length
	nExpert       int64 // %s.expert_count
	nExpertUsed   []int64
	nHead         []int64
	nEmbdHeadV    int64 // layer 0, full attention
	nEmbdHeadVSWA int64
	isSWA         []bool
	ssmDState     int64
	ssmDInner     int64
	ssmNGroup     int64
	nEmbdPerLayer int64 // gemma4 per-layer embeddings
	ropeScaling   string
	leadingDense  int64 // deepseek2
	qLoraRank     int64 // deepseek2
	moeLayerStep  int64 // llama4
}

func (h *hparams) key(k string) string { return h.arch + "." + k }

func (h *hparams) nExpertUsedMax() int64 {
	var m int64
	for _, x := range h.nExpertUsed {
		m = max(m, x)
	}
	return m
}

func (h *hparams) swa(il int) bool { return il >= 0 && il < len(h.isSWA) && h.isSWA[il] }

// nEmbdHeadV0 is n_embd_head_v(0): the SWA head size when layer 0 is a
// sliding-window layer.
func (h *hparams) nEmbdHeadV0() int64 {
	if h.swa(0) {
		return h.nEmbdHeadVSWA
	}
	return h.nEmbdHeadV
}

func (h *hparams) nHead0() int64 {
	if len(h.nHead) == 0 {
		return 0
	}
	return h.nHead[0]
}

// readHparams reads what placement needs from the model's metadata. Only
// block_count is required; everything else has llama.cpp's default.
func readHparams(m *gguf.Model) (*hparams, error) {
	h := &hparams{arch: m.Architecture()}
	if h.arch == "" {
		return nil, fmt.Errorf("place: the model has no %s", gguf.KeyArchitecture)
	}
	nl, err := m.Uint(h.key("block_count"))
	if err != nil {
		return nil, fmt.Errorf("place: %w", err)
	}
	// llama.cpp v0.5.0 stops at LLAMA_MAX_LAYERS = 512 (a fixed array);
	// ggload's bound only keeps allocations sane
	if nl == 0 || nl > 1<<16 {
		return nil, fmt.Errorf("place: %s = %d, must be in [1, 65536]", h.key("block_count"), nl)
	}
	h.nLayerAll = int(nl)
	u := func(k string, def int64) int64 {
		if v, err := m.Uint(h.key(k)); err == nil && v < 1<<62 {
			return int64(v)
		}
		return def
	}
	h.nLayerNextn = int(u("nextn_predict_layers", 0))
	if h.nLayerNextn >= h.nLayerAll {
		h.nLayerNextn = 0
	}
	h.nEmbd = u("embedding_length", 0)
	h.nExpert = u("expert_count", 0)
	if h.nExpertUsed, err = keyOrArr(m, h.key("expert_used_count"), h.nLayerAll); err != nil {
		return nil, err
	}
	if h.nHead, err = keyOrArr(m, h.key("attention.head_count"), h.nLayerAll); err != nil {
		return nil, err
	}
	full := int64(0)
	if h.nHead0() > 0 {
		full = h.nEmbd / h.nHead0()
	}
	h.nEmbdHeadV = u("attention.value_length", full)
	h.nEmbdHeadVSWA = u("attention.value_length_swa", h.nEmbdHeadV)
	h.ssmDState = u("ssm.state_size", 0)
	h.ssmDInner = u("ssm.inner_size", 0)
	h.ssmNGroup = u("ssm.group_count", 0)
	h.nEmbdPerLayer = u("embedding_length_per_layer_input", 0)
	h.leadingDense = u("leading_dense_block_count", 0)
	h.qLoraRank = u("attention.q_lora_rank", 0)
	h.moeLayerStep = u("interleave_moe_layer_step", 0)
	h.ropeScaling, _ = m.String(h.key("rope.scaling.type"))
	h.isSWA = make([]bool, h.nLayerAll)
	h.readSWA(m, u)
	return h, nil
}

// readSWA sets the sliding-window layers as the architectures of the table
// define them (llama_hparams::set_swa_pattern with dense_first = false: a
// layer is SWA unless it is the last of each group of n).
func (h *hparams) readSWA(m *gguf.Model, u func(string, int64) int64) {
	pattern := func(n int64) {
		for il := range h.isSWA {
			h.isSWA[il] = n == 0 || int64(il)%n < n-1
		}
	}
	switch h.arch {
	case "gemma2":
		pattern(2)
	case "gemma3":
		if u("attention.sliding_window", 0) > 0 {
			pattern(u("attention.sliding_window_pattern", 6))
		}
	case "llama4":
		if _, ok := m.Lookup(h.key("attention.sliding_window")); !ok || u("attention.sliding_window", 1) != 0 {
			pattern(4)
		}
	case "gemma4":
		if v, ok := m.Lookup(h.key("attention.sliding_window_pattern")); ok && v.IsArray() {
			if b, err := v.Bools(); err == nil && len(b) == len(h.isSWA) {
				copy(h.isSWA, b)
			}
		}
	}
}

// keyOrArr reads a key that is either a scalar for every layer or an array
// with one value per layer (llama_model_loader::get_key_or_arr). Absent
// keys give zeros.
func keyOrArr(m *gguf.Model, key string, n int) ([]int64, error) {
	out := make([]int64, n)
	v, ok := m.Lookup(key)
	if !ok {
		return out, nil
	}
	if v.IsArray() {
		xs, err := v.Ints()
		if err != nil {
			return nil, fmt.Errorf("place: %s: %w", key, err)
		}
		if len(xs) != n {
			return nil, fmt.Errorf("place: key %s has wrong array length; expected %d, got %d", key, n, len(xs))
		}
		copy(out, xs)
		return out, nil
	}
	x, ok := v.Uint()
	if !ok {
		return nil, fmt.Errorf("place: key %s is %s, expected an unsigned integer", key, v.TypeName())
	}
	for i := range out {
		out[i] = int64(x)
	}
	return out, nil
}
