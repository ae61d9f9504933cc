package serve

import (
	"github.com/ggload/ggload/place"
	"github.com/ggload/ggload/sample"
)

// Params are the server's options (the common_params llama-server reads
// in its engine). The zero value is llama-server's defaults; the
// context's own options (-c, -np, -kvu, -b, -ub, --embedding, --pooling,
// --swa-full) are the plan's, which the model was loaded with.
type Params struct {
	// Threads is the CPU backend's threads (-t); 0: infer's default.
	Threads int

	// NPredict is the server's default n_predict (-n); 0: -1, no limit.
	// A request's own n_predict takes priority.
	NPredict int
	// Keep is --keep, the default n_keep of a request (tokens of the
	// prompt kept by a context shift; -1: all).
	Keep int
	// ContextShift is --context-shift: a generation that reaches the end
	// of its slot's context drops half of what follows n_keep and goes on.
	ContextShift bool
	// CacheReuse is --cache-reuse: the least chunk of the cached prompt
	// reused by shifting it in the cache (0: off).
	CacheReuse int

	// CacheRAMMiB is --cache-ram: the host memory the prompt cache keeps
	// prompts in; 0: 8192 MiB, negative: no limit. NoCacheRAM is
	// --cache-ram 0: no prompt cache.
	CacheRAMMiB int
	NoCacheRAM  bool
	// NoCacheIdleSlots is --no-cache-idle-slots: idle slots are not saved
	// to the prompt cache (and cleared) when a new task starts.
	NoCacheIdleSlots bool

	// CtxCheckpoints is --ctx-checkpoints, the checkpoints a slot keeps
	// of a memory that cannot roll back; 0: 32, negative: none.
	CtxCheckpoints int
	// CheckpointMinStep is --checkpoint-min-step; 0: 8192.
	CheckpointMinStep int

	// SlotPromptSimilarity is --slot-prompt-similarity, the share of a
	// new prompt a slot's cached prompt must hold for the slot to be
	// chosen; 0: 0.1, negative: off (the least recently used slot).
	SlotPromptSimilarity float32

	// NoContBatching is -nocb: prompts join a step only when no slot
	// generates.
	NoContBatching bool

	// KVUnifiedPerSlot is --kv-unified-per-slot, a cap on a slot's context.
	KVUnifiedPerSlot int

	// SlotSavePath is --slot-save-path, the directory slot files are saved
	// to and restored from; "": slot save and restore are refused.
	SlotSavePath string

	// Sampling is the requests' default sampling (--temp, --top-k, ...,
	// -s), with the model's own (general.sampling.*) where it leaves a
	// field unset (Explicit); nil: common_params_sampling's defaults
	// with the model's own.
	Sampling *sample.Params
	// Stop is the default stop strings (-r, --reverse-prompt).
	Stop []string
	// Special is --special: special tokens' text is shown.
	Special bool
	// NoCachePrompt makes the requests' default cache_prompt false.
	NoCachePrompt bool
	// EmbdNormalize is the embeddings' default normalization
	// (--embd-normalize); 0: 2 (Euclidean). NoEmbdNormalize: -1.
	EmbdNormalize   int
	NoEmbdNormalize bool
}

// The defaults behind the zero values (common_params of the pin).
const (
	defaultCacheRAMMiB       = 8192
	defaultCtxCheckpoints    = 32
	defaultCheckpointMinStep = 8192
	defaultSlotSimilarity    = 0.1
)

// resolved are the params with their zero values made llama's.
type resolved struct {
	Params
	nPredict          int
	cacheRAMMiB       int // -1: no limit; 0: off
	nCtxCheckpoints   int
	checkpointMinStep int
	slotSimilarity    float32
	contBatching      bool
	cacheIdleSlots    bool
	embdNormalize     int
}

func (p Params) resolve() resolved {
	r := resolved{Params: p, nPredict: p.NPredict, cacheRAMMiB: p.CacheRAMMiB, nCtxCheckpoints: p.CtxCheckpoints,
		checkpointMinStep: p.CheckpointMinStep, slotSimilarity: p.SlotPromptSimilarity, contBatching: !p.NoContBatching,
		cacheIdleSlots: !p.NoCacheIdleSlots, embdNormalize: p.EmbdNormalize}
	if r.nPredict == 0 {
		r.nPredict = -1
	}
	switch {
	case p.NoCacheRAM:
		r.cacheRAMMiB = 0
	case r.cacheRAMMiB == 0:
		r.cacheRAMMiB = defaultCacheRAMMiB
	case r.cacheRAMMiB < 0:
		r.cacheRAMMiB = -1
	}
	switch {
	case r.nCtxCheckpoints == 0:
		r.nCtxCheckpoints = defaultCtxCheckpoints
	case r.nCtxCheckpoints < 0:
		r.nCtxCheckpoints = 0
	}
	if r.checkpointMinStep == 0 {
		r.checkpointMinStep = defaultCheckpointMinStep
	}
	switch {
	case r.slotSimilarity == 0:
		r.slotSimilarity = defaultSlotSimilarity
	case r.slotSimilarity < 0:
		r.slotSimilarity = 0
	}
	switch {
	case p.NoEmbdNormalize:
		r.embdNormalize = -1
	case r.embdNormalize == 0:
		r.embdNormalize = 2
	}
	return r
}

// PromptCacheLimit is the host memory the prompt cache may hold, as
// --cache-ram resolves: 0 without a cache; limited is false where the
// cache has no limit (--cache-ram -1). A model pool reserves it beside
// the plan's memory.
func (p Params) PromptCacheLimit() (bytes uint64, limited bool) {
	n := p.resolve().cacheRAMMiB
	if n < 0 {
		return 0, false
	}
	return uint64(n) << 20, true
}

// Options are one request's parameters (task_params), as llama-server's
// completion schema reads them from a request. Start from
// Engine.Defaults, which holds the server's defaults as the pin copies
// them into each request (params_base).
type Options struct {
	// Stream delivers each token to the request's callback as it comes
	// (the pin's partial responses); the final Result holds the whole
	// reply either way.
	Stream bool
	// CachePrompt reuses the slot's cached prompt (cache_prompt).
	CachePrompt bool
	// ReturnTokens fills Result.Tokens (return_tokens).
	ReturnTokens bool
	// ReturnProgress sends prompt progress events in stream mode.
	ReturnProgress bool
	// TimingsPerToken puts the timings in each partial event.
	TimingsPerToken bool
	// PostSamplingProbs gives n_probs after the sampler chain.
	PostSamplingProbs bool

	NKeep       int // n_keep (-1: all of the prompt)
	NDiscard    int // n_discard (0: half)
	NPredict    int // n_predict (-1: no limit)
	NIndent     int // n_indent
	NCacheReuse int // n_cache_reuse
	// TMaxPredictMS is t_max_predict_ms: after a new line, the generation
	// stops once it has taken this long (-1 or 0: no limit).
	TMaxPredictMS int64

	// Stop are the stop strings (the pin's antiprompt).
	Stop []string

	// Sampling is the request's sampler chain and seed (n_probs,
	// ignore_eos, logit_bias, a grammar: sample.Params).
	Sampling sample.Params

	// IDSlot is the slot asked for (id_slot); -1: any.
	IDSlot int

	// EmbdNormalize is the embeddings' normalization (embd_normalize: -1
	// none, 0 max absolute int16, 1 taxicab, 2 Euclidean, >2 p-norm).
	EmbdNormalize int

	// PreservedTokens are tokens whose text is shown though special (the
	// chat layer's preserved_tokens).
	PreservedTokens []int32
	// UserMessageStarts are the prompt's token indexes where a user
	// message starts, the last one the last user message (the chat
	// layer's message spans): where context checkpoints are made.
	UserMessageStarts []int
}

// ServerContext is llama-server's adjustment of the context options
// before it loads the model: with auto (no -np given), 4 slots over one
// unified cache; for embeddings, a batch of one ubatch (n_batch =
// n_ubatch, which pooling a whole sequence needs).
func ServerContext(c *place.ContextParams, auto bool) {
	if auto {
		c.NParallel, c.KVUnified = 4, true
	}
	if c.Embeddings {
		nb, nub := c.NBatch, c.NUBatch
		if nb == 0 {
			nb = 2048
		}
		if nub == 0 {
			nub = 512
		}
		if nb > nub {
			c.NBatch = nub
		}
	}
}
