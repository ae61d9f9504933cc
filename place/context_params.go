// Port of llama.cpp common/arg.cpp and common/common.cpp (v0.5.0): the
// context options and common_context_params_to_llama.

package place

import (
	"fmt"
	"math"
	"strings"

	"github.com/ggload/ggload/ggml"
)

// ContextParams are llama.cpp's context options, as its command line
// spells and defaults them (common/arg.cpp; not the bare library's
// llama_context_default_params): the zero value is the CLI's defaults.
type ContextParams struct {
	// NCtx is the context in tokens (-c); 0: the model's trained context.
	NCtx int
	// NBatch and NUBatch are the logical and physical batch sizes (-b,
	// -ub); 0: 2048 and 512.
	NBatch, NUBatch int
	// NParallel is the number of sequences (-np); 0: 1.
	NParallel int
	// KVUnified keeps one KV buffer for every sequence (-kvu).
	KVUnified bool
	// TypeK and TypeV are the cache's element types (-ctk, -ctv); zero: f16.
	TypeK, TypeV CacheType
	// NoKVOffload keeps the KV cache in host memory (-nkvo).
	NoKVOffload bool
	// FlashAttn is Flash Attention (-fa); zero: auto.
	FlashAttn FlashAttn
	// SWAFull sizes the sliding-window layers' cache as the others'
	// (--swa-full).
	SWAFull bool
	// NOutputsMax is the most outputs a batch has (llama_context_params'
	// n_outputs_max); 0, as the CLI leaves it: n_batch. A draft model's
	// context has -np.
	NOutputsMax int
	// Embeddings makes the context output embeddings (--embeddings),
	// pooled as Pooling says (--pooling; zero: the model's pooling).
	Embeddings bool
	Pooling    Pooling

	// NRSSeq is the recurrent state's rollback snapshots per sequence
	// (llama_context_params' n_rs_seq; the common library sets it to
	// --spec-draft-n-max for the speculative types that draft from the
	// model itself, MTP, EAGLE-3, DFlash, DSpark): a recurrent or hybrid
	// model keeps the states before each of a ubatch's last NRSSeq
	// tokens, so that SeqRm can take back up to NRSSeq positions. 0: none;
	// an architecture without partial rollback ignores it, as llama.cpp
	// does.
	NRSSeq int

	// Skip plans the weights alone: no context.
	Skip bool

	// Custom, for a program that brings its own engine, is what it needs
	// instead of llama.cpp's context: planning (and the breakdown) count
	// it in place of the KV cache and compute buffers.
	Custom *CustomMemory
}

// CustomMemory is what an engine of its own needs beside the weights.
type CustomMemory struct {
	// PerLayer is what each layer keeps (its cache), with the layer: on
	// the layer's device, or in host memory when the layer stays on the
	// CPU.
	PerLayer uint64
	// PerDevice is what each device needs besides (scratch, compute), by
	// device name; "CPU" is host memory.
	PerDevice map[string]uint64
}

// checkSizes refuses the sizes llama.cpp cannot take, naming each by its
// option and value alone (llama.cpp reads them as unsigned: a negative
// -np is past LLAMA_MAX_SEQ, a negative -c pads to 0 or to billions).
func (cp *ContextParams) checkSizes() error {
	var bad []string
	for _, f := range []struct {
		opt string
		n   int
	}{{"-c", cp.NCtx}, {"-b", cp.NBatch}, {"-ub", cp.NUBatch}} {
		if f.n < 0 || f.n > math.MaxInt32 {
			bad = append(bad, fmt.Sprintf("%s %d", f.opt, f.n))
		}
	}
	if len(bad) > 0 {
		return fmt.Errorf("place: context: %s: sizes from 0 to %d", strings.Join(bad, ", "), math.MaxInt32)
	}
	if cp.NParallel < 0 || cp.NParallel > math.MaxInt32 {
		return fmt.Errorf("place: context: -np %d: n_seq_max must be <= 256", cp.NParallel)
	}
	return nil
}

// The CLI's defaults (common_params).
const (
	DefaultNBatch  = 2048
	DefaultNUBatch = 512
)

// CacheType is a KV cache element type; the zero value is f16.
type CacheType uint8

// The cache types llama.cpp's -ctk and -ctv take (kv_cache_types), in its
// order after the default.
const (
	CacheF16 CacheType = iota
	CacheF32
	CacheBF16
	CacheQ8_0
	CacheQ4_0
	CacheQ4_1
	CacheIQ4NL
	CacheQ5_0
	CacheQ5_1
)

var cacheTypes = [...]ggml.Type{CacheF16: ggml.TypeF16, CacheF32: ggml.TypeF32, CacheBF16: ggml.TypeBF16,
	CacheQ8_0: ggml.TypeQ8_0, CacheQ4_0: ggml.TypeQ4_0, CacheQ4_1: ggml.TypeQ4_1, CacheIQ4NL: ggml.TypeIQ4_NL,
	CacheQ5_0: ggml.TypeQ5_0, CacheQ5_1: ggml.TypeQ5_1}

// Type is the ggml type.
func (c CacheType) Type() ggml.Type {
	if int(c) < len(cacheTypes) {
		return cacheTypes[c]
	}
	return ggml.TypeF16
}

func (c CacheType) String() string { return c.Type().String() }

// CacheTypeNames lists the cache types as llama.cpp lists them (f32 first).
func CacheTypeNames() []string {
	order := []CacheType{CacheF32, CacheF16, CacheBF16, CacheQ8_0, CacheQ4_0, CacheQ4_1, CacheIQ4NL, CacheQ5_0, CacheQ5_1}
	out := make([]string, len(order))
	for i, c := range order {
		out[i] = c.String()
	}
	return out
}

// ParseCacheType is kv_cache_type_from_str: a ggml type name of the list.
func ParseCacheType(s string) (CacheType, error) {
	for c := range cacheTypes {
		if CacheType(c).String() == s {
			return CacheType(c), nil
		}
	}
	return 0, fmt.Errorf("Unsupported cache type: %s", s)
}

// Pooling is how a context pools its embeddings (llama_pooling_type); the
// zero value is the model's own.
type Pooling uint8

// Pooling types.
const (
	PoolingModel Pooling = iota
	PoolingNone
	PoolingMean
	PoolingCLS
	PoolingLast
	PoolingRank
)

var poolingNames = []string{"", "none", "mean", "cls", "last", "rank"}

func (p Pooling) String() string {
	if p == PoolingModel {
		return "the model's"
	}
	if int(p) < len(poolingNames) {
		return poolingNames[p]
	}
	return fmt.Sprintf("pooling(%d)", p)
}

// Llama is the pooling as llama_pooling_type: -1 for the model's.
func (p Pooling) Llama() int { return int(p) - 1 }

// ParsePooling reads --pooling's value.
func ParsePooling(s string) (Pooling, error) {
	for i, n := range poolingNames {
		if i > 0 && s == n {
			return Pooling(i), nil
		}
	}
	return 0, fmt.Errorf("pooling %q: want none, mean, cls, last or rank", s)
}

// FlashAttn is llama_flash_attn_type; the zero value is auto.
type FlashAttn uint8

// Flash Attention settings.
const (
	FlashAttnAuto FlashAttn = iota
	FlashAttnOn
	FlashAttnOff
)

func (f FlashAttn) String() string {
	switch f {
	case FlashAttnOn:
		return "enabled"
	case FlashAttnOff:
		return "disabled"
	}
	return "auto"
}

// Llama is the llama_flash_attn_type value.
func (f FlashAttn) Llama() int {
	switch f {
	case FlashAttnOn:
		return 1
	case FlashAttnOff:
		return 0
	}
	return -1
}

// ParseFlashAttn reads -fa's value as common/arg.cpp does: on, off or
// auto, and their truthy, falsey and autoy spellings.
func ParseFlashAttn(s string) (FlashAttn, error) {
	switch s {
	case "on", "enabled", "true", "1":
		return FlashAttnOn, nil
	case "off", "disabled", "false", "0":
		return FlashAttnOff, nil
	case "auto", "-1":
		return FlashAttnAuto, nil
	}
	return 0, fmt.Errorf("unknown value for --flash-attn: '%s'", s)
}

// LlamaContextParams are llama_context_params as a plan gives them to
// llama_init_from_model (Plan.LlamaContextParams): what package infer
// makes its context with. They have the fields, in order, of the
// replay's own (internal/replay/arch.ContextParams), which converts from
// them.
type LlamaContextParams struct {
	NCtx, NBatch, NUBatch, NSeqMax uint32
	FlashAttn                      int // llama_flash_attn_type: -1 auto, 0 disabled, 1 enabled
	TypeK, TypeV                   ggml.Type
	OffloadKQV, KVUnified, SWAFull bool
	NOutputsMax                    uint32 // the most outputs of a batch; 0: n_batch
	Embeddings                     bool
	PoolingType                    int    // llama_pooling_type: -1 the model's
	NRSSeq                         uint32 // rollback snapshots per sequence

	SplitMode   int // llama_split_mode of the model
	MetaDevices int // split mode tensor: the meta device's devices
}

// LlamaContextParams are the llama_context_params the plan's context
// options make (common_context_params_to_llama), with the model's split
// mode and the devices of its meta device.
func (p *Plan) LlamaContextParams() LlamaContextParams {
	c := p.Params.Context
	return LlamaContextParams{
		NCtx: uint32(c.NCtx), NBatch: uint32(c.batch()), NUBatch: uint32(c.ubatch()), NSeqMax: uint32(c.parallel()),
		FlashAttn: c.FlashAttn.Llama(), TypeK: c.TypeK.Type(), TypeV: c.TypeV.Type(),
		OffloadKQV: !c.NoKVOffload, KVUnified: c.KVUnified, SWAFull: c.SWAFull, NOutputsMax: uint32(c.NOutputsMax),
		Embeddings: c.Embeddings, PoolingType: c.Pooling.Llama(), NRSSeq: uint32(c.NRSSeq),
		SplitMode: p.Params.SplitMode.Llama(), MetaDevices: len(p.TensorDevices),
	}
}

// batch, ubatch and parallel are the options with their defaults applied.
func (c ContextParams) batch() int {
	if c.NBatch == 0 {
		return DefaultNBatch
	}
	return c.NBatch
}

func (c ContextParams) ubatch() int {
	if c.NUBatch == 0 {
		return DefaultNUBatch
	}
	return c.NUBatch
}

func (c ContextParams) parallel() int {
	if c.NParallel == 0 {
		return 1
	}
	return c.NParallel
}
