// Port of llama.cpp src/llama-context.cpp (v0.5.0): llama_context's
// construction and llama_context::decode.

// Package infer runs a loaded model: a llama.cpp context on a
// loader.Model (its memory allocated where the plan put it, its scheduler
// over the plan's backends, its compute buffers reserved), and
// llama_decode's and llama_encode's forward pass, which builds llama.cpp's
// own graph for each ubatch (replayed from the pinned release), sets its
// inputs, computes it and copies out the logits and embeddings.
//
// A batch is tokens or input embeddings (Batch.Embd, llama_batch.embd:
// what a projector gives), the graph's own selection between the two.
//
// Sequences are removed, copied (within a stream, or a whole stream's
// cells and buffers into another's), kept and moved (SeqAdd, SeqDiv) as
// llama_memory_seq_* do; a move's keys are rotated at the next Decode by
// the K-shift graph the pin's llama_kv_cache::build_graph_shift builds.
//
// The context's options are the plan's (place.Params.Context): the plan
// sized the memory and the compute buffers with them, and -fit chose them.
//
// The memories that run: the KV cache (one stream, or one per sequence),
// its iSWA pair, the DeepSeek sparse-attention pair (an MLA cache and its
// indexer's, and with sliding-window layers beside them), MiniMax's
// sparse-attention pair (MSA), DeepSeek-V4's compressed memory (a raw
// sliding-window pair, compressed caches and their compressors' states,
// with rollback snapshots), the recurrent state and the hybrids of a KV
// cache or an iSWA pair and a recurrent state, and Qwen4-Exp's indexed
// hybrid (its indexer cache in the attention cache's cells, for its
// block-sparse attention, and its n-gram embeddings read back from the
// cells' tokens); the encoder of an encoder-decoder (T5) and of the
// embedding models. The batch's bookkeeping and the inputs' set_input are
// written to the pin's llama-batch.cpp, llama-kv-cache.cpp,
// llama-kv-cache-dsv4.cpp, llama-memory-hybrid-idx.cpp,
// llama-memory-recurrent.cpp and llama-graph.cpp, and held to libllama's
// logits bit for bit by the tests. What a backend would abort on at
// compute is refused before anything computes, saying which.
package infer

import (
	"cmp"
	"errors"
	"fmt"
	"maps"
	"math"
	"os"
	"runtime"
	"slices"
	"sync"
	"time"

	"github.com/ggload/ggload/ggml"
	"github.com/ggload/ggload/ggml/ops"
	"github.com/ggload/ggload/internal/replay"
	"github.com/ggload/ggload/internal/replay/arch"
	"github.com/ggload/ggload/internal/replay/graph"
	"github.com/ggload/ggload/loader"
	"github.com/ggload/ggload/place"
)

// ErrClosed is wrapped by the errors of a closed Context's methods.
var ErrClosed = errors.New("infer: the context is closed")

// ErrNoMemorySlot is wrapped by Decode's error where the memory has no
// room for the batch (llama_decode's 1): nothing was decoded, and a
// smaller batch, or one after a sequence is removed, may fit.
var ErrNoMemorySlot = errors.New("failed to find a memory slot")

// Params are a context's own options (the rest are the plan's). The
// zero value is what ggload run does without options.
type Params struct {
	// Threads is the CPU backend's thread count for a batch of one token
	// (llama.cpp's n_threads) and for larger ones (n_threads_batch), as
	// -t sets both. Zero: the physical cores (ggml.MathThreads), as
	// llama.cpp's tools default -t, and fewer while other processes keep
	// the CPUs busy, for the graphs whose results the count does not
	// change (see threadPolicy): on a busy machine the CPU backend's
	// threads, which wait for each other by spinning, would otherwise
	// wait for threads the kernel is not running.
	Threads int
	// Poll is how busily, from 1 to 100, the thread pool's threads wait
	// for the next graph (llama.cpp's --poll); zero: 50, the default of
	// llama.cpp's tools; NoPoll: they sleep at once.
	Poll int
}

// NoPoll is a Params.Poll of none: llama.cpp's --poll 0.
const NoPoll = -1

// Context is a llama.cpp context on a loaded model. Its methods may be
// called from several goroutines; they run one at a time. Close waits
// for the call in progress; afterwards every method answers ErrClosed.
// The model must stay open while the context is.
type Context struct {
	mu     sync.Mutex
	closed bool

	model *loader.Model
	lib   *ops.Lib
	rep   *replay.Replay
	gc    *graph.Context

	cacheCtxs []*ggml.Context
	cacheBufs []*ggml.Buffer
	caches    []*kvCache      // the memory's KV caches (an iSWA memory: the base, then the SWA cache; a DSV4 memory: its raw pair, then its compressed caches)
	recr      *recCache       // its recurrent state (a recurrent or hybrid memory)
	dsv4      *dsv4Mem        // DeepSeek-V4's memory beside its KV caches (kvcache_dsv4.go)
	cross     *crossState     // the encoder's output, for an encoder-decoder's decoder
	memTensor [][]*ops.Tensor // each cache's tensors, in the memory's order

	nBatch, nUBatch, nSeqMax uint32
	causal                   bool
	encoding                 bool // the graph being filled is the encoder's

	// embdRows are the token embedding's rows: the vocabulary a batch's
	// tokens are checked against before the first decode gives nVocab
	embdRows int

	// the last batch's outputs: rows of logits, and each token's row
	nVocab int
	// nEmbdInp is the width of an input embedding (n_embd_inp())
	nEmbdInp int64
	logits   []float32
	batchOut int // the outputs of the batch being decoded
	nEmbd    int
	embd     []float32           // per output, without pooling
	embdSeq  map[int32][]float32 // per sequence, pooled
	outRow   []int32             // per batch token: its row, -1 where it is no output
	outputs  int

	// Memory is what the context allocated, per buffer, as New made it; a
	// decode that reserves the compute buffers again (after a control
	// vector or adapters changed) replaces it. Read it between calls, or
	// from other goroutines through Allocations.
	Memory []Allocation

	timings Timings
	last    *graph.Step // the last graph, kept for the next ubatch of its shape
	lastKey string
	// the graph before it, kept too: a ubatch of its shape allocates it
	// again instead of building it (a prompt's graph after the steps of
	// a generation)
	kept    *graph.Step
	keptKey string

	threads *threadPolicy // each graph's CPU threads (threads.go)

	cvec *cvecState // the control vector (cvec.go); nil: none applied yet

	loras []loraEntry // the LoRA adapters applied (lora.go)
	// needReserve is llama_context's sched_need_reserve: the adapters or
	// the control vector changed, and the next decode reserves the
	// compute buffers again and builds its graphs anew (reserveAgain)
	needReserve bool
}

// Timings are what the context's decodes took.
type Timings struct {
	Graphs  int           // graphs built
	Reused  int           // ubatches that reused the graph before them
	Kept    int           // ubatches that took the graph kept from before that, allocated again
	Build   time.Duration // building and allocating them
	Compute time.Duration // setting their inputs, computing them, reading the logits
}

// Timings are the decodes' timings so far.
func (c *Context) Timings() Timings {
	if c.hold() != nil {
		return Timings{}
	}
	defer c.mu.Unlock()
	return c.timings
}

// Allocations is what the context allocated, per buffer (Memory), read
// under the context's lock.
func (c *Context) Allocations() []Allocation {
	if c.hold() != nil {
		return nil
	}
	defer c.mu.Unlock()
	return slices.Clone(c.Memory)
}

// Allocation is one buffer a context allocated.
type Allocation struct {
	What       string `json:"what"` // "KV cache", "compute"
	BufferType string `json:"buffer_type"`
	Bytes      uint64 `json:"bytes"`
}

// New makes a context on the model with the plan's context options, as
// llama_init_from_model does.
func New(m *loader.Model, p Params) (*Context, error) {
	if m == nil || m.Plan == nil {
		return nil, fmt.Errorf("infer: no model")
	}
	if p.Threads < 0 || p.Threads > maxThreads {
		return nil, fmt.Errorf("infer: %d threads: want 0 (the default) to %d", p.Threads, maxThreads)
	}
	if p.Poll < NoPoll || p.Poll > 100 {
		return nil, fmt.Errorf("infer: poll %d: want 0 (the default, 50), NoPoll or 1 to 100", p.Poll)
	}
	var c *Context
	err := m.Use("infer.New", func() (err error) {
		c, err = newContext(m, p)
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("infer: %w", err)
	}
	return c, nil
}

// newContext is New with the model held.
func newContext(m *loader.Model, p Params) (*Context, error) {
	plan := m.Plan
	if plan.Params.Context.Skip {
		return nil, fmt.Errorf("infer: the plan has no context (its context options say to skip it)")
	}
	rep, err := replay.New(plan.Model, arch.Options{LoadMTP: plan.Params.LoadMTP, Overrides: plan.Params.KVOverrides},
		arch.ContextParams(plan.LlamaContextParams()))
	if err != nil {
		return nil, fmt.Errorf("infer: %w", err)
	}
	cm := plan.Context
	if cm == nil {
		return nil, fmt.Errorf("infer: the plan has no context")
	}
	c := &Context{model: m, lib: plan.Runtime().Ops(), rep: rep,
		nBatch: rep.Context.NBatch, nUBatch: rep.Context.NUBatch, nSeqMax: rep.Context.NSeqMax, causal: rep.Context.CausalAttn}
	if err := c.checkMemory(cm); err != nil {
		return nil, err
	}
	if c.nEmbdInp, err = rep.Run.Hparams().Call("n_embd_inp"); err != nil {
		return nil, fmt.Errorf("infer: %w", err)
	}
	if err := c.allocCache(cm); err != nil {
		c.free()
		return nil, err
	}
	weights := map[int]*ops.Tensor{}
	i := 0
	for pl := range m.Placements() {
		if i >= len(plan.Tensors) || pl.Plan == nil || pl.Plan.Name != plan.Tensors[i].Name {
			c.free()
			return nil, fmt.Errorf("infer: the model's placement %d is not its plan's", i)
		}
		if pl.Tensor != nil {
			weights[i] = pl.Tensor.Native()
			if pl.Plan.Name == "token_embd.weight" && c.embdRows == 0 {
				c.embdRows = int(pl.Tensor.Shape()[1])
			}
		}
		i++
	}
	devs := make([]ops.Dev, 0, len(plan.Devices))
	for _, d := range plan.Devices {
		devs = append(devs, d.Handle())
	}
	at := graph.Placement{
		WeightTensor: func(t *arch.Tensor) *ops.Tensor {
			if t.Index < 0 || t.Index >= len(plan.Tensors) || plan.Tensors[t.Index].Name != t.Name {
				return nil
			}
			return weights[t.Index]
		},
		CacheTensor: func(ci, j int) *ops.Tensor {
			if ci < len(c.memTensor) && j < len(c.memTensor[ci]) {
				return c.memTensor[ci][j]
			}
			return nil
		},
	}
	c.gc, err = graph.NewContext(rep.Run, graph.ReserveParams{Lib: c.lib, Memory: rep.Memory, At: at, Devices: devs,
		LayerDevice: func(il int) ops.Dev {
			if il >= 0 && il < len(plan.LayerDevices) && plan.LayerDevices[il] != nil {
				return plan.LayerDevices[il].Handle()
			}
			return plan.CPU.Handle()
		},
		NGPULayers: plan.NGPULayers(), NTensors: plan.NTensors(), TensorOverrides: len(plan.Params.Overrides) > 0})
	if err != nil {
		c.free()
		return nil, fmt.Errorf("infer: %w", err)
	}
	c.threads = newThreadPolicy(p.Threads, newLoadMeter(), time.Now())
	poll := defaultPoll
	switch {
	case p.Poll == NoPoll:
		poll = 0
	case p.Poll > 0:
		poll = p.Poll
	}
	c.gc.NThreads = c.threads.max
	c.gc.Pool = ops.ThreadpoolParams{Threads: c.threads.max, Poll: poll}
	c.noteCompute()
	return c, nil
}

// noteCompute lists the reserve's compute buffers in Memory, by the plan's
// names of their buffer types, in place of those it listed before.
func (c *Context) noteCompute() {
	plan := c.model.Plan
	names := map[ops.Buft]string{plan.CPU.BufferType().Handle(): plan.CPU.BufferType().Name()}
	for _, d := range plan.Devices {
		names[d.BufferType().Handle()] = d.BufferType().Name()
		if hb, ok := d.HostBufferType(); ok {
			names[hb.Handle()] = hb.Name()
		}
	}
	var kept []Allocation // (a new slice: a caller may hold the old one)
	for _, a := range c.Memory {
		if a.What != "compute" {
			kept = append(kept, a)
		}
	}
	c.Memory = kept
	for _, b := range c.gc.Res.Buffers {
		if b.Bytes > 1 {
			name, ok := names[b.Buft]
			if !ok {
				name = c.lib.BuftName(b.Buft)
			}
			c.Memory = append(c.Memory, Allocation{What: "compute", BufferType: name, Bytes: b.Bytes})
		}
	}
}

// checkMemory refuses the memories the forward pass does not run yet.
func (c *Context) checkMemory(cm *place.ContextMemory) error {
	if cm.AllocErr != nil {
		return fmt.Errorf("infer: %s: llama.cpp would abort allocating the context's memory: %w", c.rep.Run.Arch, cm.AllocErr)
	}
	mem := c.rep.Memory
	if mem == nil || len(mem.Caches) == 0 {
		return nil
	}
	n := map[string]int{"llama_kv_cache": 1, "llama_kv_cache_iswa": 2, "llama_kv_cache_dsa": 2, "llama_kv_cache_dsa_iswa": 3, "llama_kv_cache_msa": 2,
		"llama_memory_recurrent": 1, "llama_memory_hybrid": 2, "llama_memory_hybrid_iswa": 3, "llama_memory_hybrid_idx": 3,
		"llama_kv_cache_dsv4": 8}[mem.Class]
	if mem.Class == "llama_memory_hybrid_idx" && len(mem.Caches) == 2 {
		n = 2 // (a model without an indexer has no indexer cache)
	}
	if n == 0 || len(mem.Caches) != n {
		return fmt.Errorf("infer: %s: memory %s of %d caches: its forward pass is not run by ggload yet", c.rep.Run.Arch, mem.Class, len(mem.Caches))
	}
	if len(cm.Caches) != len(mem.Caches) {
		return fmt.Errorf("infer: the plan's memory is not the context's")
	}
	for i := range cm.Caches {
		if len(cm.Caches[i].Tensors) != len(mem.Caches[i].Tensors) {
			return fmt.Errorf("infer: the plan's memory is not the context's")
		}
	}
	return nil
}

// allocCache allocates the KV cache's tensors in buffers of the buffer
// types the plan gave them, one buffer per type, cleared, as
// llama_kv_cache's constructor does.
func (c *Context) allocCache(cm *place.ContextMemory) error {
	mem := c.rep.Memory
	if mem == nil || len(mem.Caches) == 0 {
		return nil
	}
	rt := c.model.Plan.Runtime()
	for ci, mc := range mem.Caches {
		pc := cm.Caches[ci]
		byBT := map[ggml.BufferType]*ggml.Context{}
		var order []ggml.BufferType
		for _, t := range pc.Tensors {
			if _, ok := byBT[t.BufferType]; ok {
				continue
			}
			ctx, err := rt.NewContext(ggml.ContextParams{Tensors: len(pc.Tensors), NoAlloc: true})
			if err != nil {
				return fmt.Errorf("infer: the KV cache: %w", err)
			}
			byBT[t.BufferType] = ctx
			order = append(order, t.BufferType)
			c.cacheCtxs = append(c.cacheCtxs, ctx)
		}
		ts := make([]*ops.Tensor, len(mc.Tensors))
		for j, mt := range mc.Tensors {
			nd := 4
			for nd > 1 && mt.Ne[nd-1] == 1 {
				nd--
			}
			t, err := byBT[pc.Tensors[j].BufferType].NewTensor(mt.Type, mt.Ne[:nd]...)
			if err == nil {
				err = t.SetName(mt.Name)
			}
			if err != nil {
				return fmt.Errorf("infer: the cache tensor %s: %w", mt.Name, err)
			}
			ts[j] = t.Native()
		}
		for _, bt := range order {
			b, err := byBT[bt].AllocTensors(bt)
			if err != nil {
				return fmt.Errorf("infer: the KV cache: %w", err)
			}
			if b == nil {
				continue
			}
			c.cacheBufs = append(c.cacheBufs, b)
			if err := b.Clear(0); err != nil {
				return fmt.Errorf("infer: the KV cache: %w", err)
			}
			c.Memory = append(c.Memory, Allocation{What: "KV cache", BufferType: bt.Name(), Bytes: b.Size()})
		}
		c.memTensor = append(c.memTensor, ts)
		switch mc.Class {
		case "llama_memory_recurrent":
			c.recr = newRecCache(mc.Cells, mc.NRSSeq, ts)
			c.recr.setLayers(mc, ts)
		case "llama_dsv4_comp_state":
			if c.dsv4 == nil {
				c.dsv4 = &dsv4Mem{nSeqMax: c.nSeqMax, nRSSeq: mc.NRSSeq, rsIdx: make([]uint32, c.nSeqMax)}
			}
			k := 0
			for k < 2 && c.dsv4.states[k] != nil {
				k++
			}
			c.dsv4.states[k] = newDSV4State(mc, ts)
		default:
			c.caches = append(c.caches, newKVCache(mc, ts, c.rep.Run.Hparams()))
		}
	}
	return nil
}

// free releases what the context holds.
func (c *Context) free() {
	c.dropGraph()
	c.freeControlVector()
	if c.gc != nil {
		c.gc.Close()
		c.gc = nil
	}
	for _, ctx := range c.cacheCtxs {
		ctx.Free()
	}
	for _, b := range c.cacheBufs {
		b.Free()
	}
	c.cacheBufs = nil
	c.cacheCtxs, c.caches, c.recr, c.memTensor, c.dsv4 = nil, nil, nil, nil, nil
}

// Close frees the context; closing twice does nothing.
func (c *Context) Close() error {
	if c == nil {
		return nil
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if !c.closed {
		c.closed = true
		c.free()
	}
	return nil
}

func (c *Context) hold() error {
	c.mu.Lock()
	if c.closed {
		c.mu.Unlock()
		return ErrClosed
	}
	return nil
}

// Batch is what llama_decode takes: tokens, and optionally their
// positions, sequences and which of them output logits.
type Batch struct {
	Tokens []int32
	// Embd, in place of Tokens, are the tokens' input embeddings
	// (llama_batch.embd): one row each of the model's n_embd_inp floats,
	// as a projector's output gives them.
	Embd   [][]float32
	Pos    []int32   // nil: each sequence continues where its cache ends
	SeqIDs [][]int32 // nil: every token in sequence 0
	Logits []bool    // nil: the last token only
}

// Decode runs the model on the batch, as llama_decode does: validated,
// split into ubatches of n_ubatch tokens, each put in the KV cache and
// computed; the logits of the tokens that output are kept until the next
// call (Logits).
func (c *Context) Decode(b Batch) error {
	if err := c.hold(); err != nil {
		return err
	}
	defer c.mu.Unlock()
	return c.model.Use("decode", func() error {
		if c.rep.Memory == nil || len(c.rep.Memory.Caches) == 0 {
			// a model without memory encodes, as llama_decode does
			return c.encodeLocked(b)
		}
		u, err := c.prepare(b, c.embeddings())
		if err != nil {
			return err
		}
		return c.checked("decode", func() error { return c.decode(u) })
	})
}

// checked runs fn on the context's thread between two looks at the
// devices: a device whose RPC server failed (before, or while fn ran) makes
// the outputs meaningless, so they are dropped and the failure returned.
func (c *Context) checked(what string, fn func() error) error {
	if err := c.devicesErr(); err != nil {
		return fmt.Errorf("infer: %s: %w", what, err)
	}
	for _, e := range c.loras {
		if e.a.Closed() {
			// (its tensors are freed: the graphs must not read them)
			return fmt.Errorf("infer: %s: the LoRA adapter %s was closed while applied: %w", what, e.a.Plan.Path, loader.ErrClosed)
		}
	}
	err := c.onThread(fn)
	if derr := c.devicesErr(); derr != nil {
		c.resetOutputs()
		c.dropGraph()
		return errors.Join(fmt.Errorf("infer: %s: %w", what, derr), err)
	}
	return err
}

// devicesErr is the first failure of a device the model runs on (an RPC
// server gone, on its own or under a meta device).
func (c *Context) devicesErr() error {
	for _, d := range c.model.Plan.Devices {
		if err := d.Err(); err != nil {
			return err
		}
	}
	return nil
}

// onThread runs fn with the calling goroutine locked to its OS thread.
// The CPU backend's workers spin at their barriers; a caller that hops
// between threads from one native call to the next leaves the Go
// scheduler a thread to hand its processor to and spin on, which takes a
// core from them (on two cores, a third of the generation speed). Locked
// for the call, the goroutine keeps its thread and no other is woken: a
// thread of the context's own, fed through a channel, costs two wake-ups
// a call (0.2 ms a token here).
func (c *Context) onThread(fn func() error) error {
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	return fn()
}

// prepare validates the batch and fills in what it leaves out, as
// llama_batch_allocr::init does.
func (c *Context) prepare(b Batch, outputAll bool) (*graph.Ubatch, error) {
	n := len(b.Tokens)
	if b.Embd != nil {
		if b.Tokens != nil {
			return nil, fmt.Errorf("infer: decode: a batch of tokens and embeddings: one or the other")
		}
		n = len(b.Embd)
		for i, row := range b.Embd {
			if int64(len(row)) != c.nEmbdInp {
				return nil, fmt.Errorf("infer: decode: embedding %d has %d values; the model takes %d (n_embd_inp)", i, len(row), c.nEmbdInp)
			}
		}
		b.Tokens = make([]int32, n) // (not read)
	}
	if n == 0 {
		return nil, fmt.Errorf("infer: decode: n_tokens == 0")
	}
	if uint32(n) > c.nBatch {
		return nil, fmt.Errorf("infer: decode: %d tokens, more than n_batch = %d", n, c.nBatch)
	}
	if !c.causal && uint32(n) > c.nUBatch {
		return nil, fmt.Errorf("infer: decode: non-causal attention requires n_ubatch >= n_tokens (%d > %d)", n, c.nUBatch)
	}
	if (b.Pos != nil && len(b.Pos) != n) || (b.SeqIDs != nil && len(b.SeqIDs) != n) || (b.Logits != nil && len(b.Logits) != n) {
		return nil, fmt.Errorf("infer: decode: %d tokens, %d positions, %d sequence lists, %d logit flags", n, len(b.Pos), len(b.SeqIDs), len(b.Logits))
	}
	nVocab := c.vocabSize()
	u := &graph.Ubatch{Tokens: b.Tokens, Pos: b.Pos, SeqIDs: b.SeqIDs, Output: b.Logits, Embd: b.Embd}
	for i, t := range b.Tokens {
		if nVocab > 0 && (t < 0 || int(t) >= nVocab) {
			return nil, fmt.Errorf("infer: decode: invalid token[%d] = %d (the vocabulary has %d)", i, t, nVocab)
		}
	}
	if u.SeqIDs == nil {
		u.SeqIDs = make([][]int32, n)
		for i := range u.SeqIDs {
			u.SeqIDs[i] = []int32{0}
		}
	}
	for i, ids := range u.SeqIDs {
		if len(ids) == 0 {
			return nil, fmt.Errorf("infer: decode: token %d has no sequence", i)
		}
		for _, s := range ids {
			if s < 0 || uint32(s) >= c.nSeqMax {
				return nil, fmt.Errorf("infer: decode: invalid seq_id[%d] = %d > %d", i, s, c.nSeqMax)
			}
		}
	}
	if u.Pos == nil {
		// each token goes on from its first sequence's next position;
		// every sequence it is in moves on past it
		next := map[int32]int32{}
		at := func(s int32) int32 {
			if p, ok := next[s]; ok {
				return p
			}
			return c.seqPosMax(s) + 1
		}
		u.Pos = make([]int32, n)
		for i, ids := range u.SeqIDs {
			u.Pos[i] = at(ids[0])
			for _, s := range ids {
				next[s] = u.Pos[i] + 1
			}
		}
	}
	if err := c.checkPositions(u); err != nil {
		return nil, err
	}
	switch {
	case outputAll:
		u.Output = make([]bool, n)
		for i := range u.Output {
			u.Output[i] = true
		}
	case u.Output == nil:
		u.Output = make([]bool, n)
		u.Output[n-1] = true
	}
	return u, nil
}

// checkPositions holds the batch's sequences and positions to what
// llama_batch_allocr::init requires of them (llama_decode then fails
// with -1): each sequence's positions continue the memory's (Y = X + 1;
// with M-RoPE, past it) without gaps, sequences coupled by a token have
// not diverged in the memory, no sequence is in two incompatible sets,
// and no sequence's positions decrease.
func (c *Context) checkPositions(u *graph.Ubatch) error {
	type span struct {
		lo, hi int32
		at     map[int32]bool
	}
	spans := map[int32]*span{}
	var order []int32
	coupled := map[[2]int32]bool{} // s1 coupled to s0: a token of both, s0 first
	for i, ids := range u.SeqIDs {
		for k, s := range ids {
			sp := spans[s]
			if sp == nil {
				sp = &span{lo: u.Pos[i], hi: u.Pos[i], at: map[int32]bool{}}
				spans[s] = sp
				order = append(order, s)
			}
			sp.lo, sp.hi = min(sp.lo, u.Pos[i]), max(sp.hi, u.Pos[i])
			sp.at[u.Pos[i]] = true
			if k > 0 {
				coupled[[2]int32{s, ids[0]}] = true
			}
		}
	}
	slices.Sort(order)
	hasMemory := len(c.caches) > 0 || c.recr != nil
	mrope := false
	if rt, _ := c.rep.Run.Hparams().Field("rope_type"); rt == ropeTypeMRoPE || rt == ropeTypeIMRoPE {
		mrope = true
	}
	for _, s := range order {
		sp := spans[s]
		p0 := int32(-1)
		if hasMemory {
			p0 = c.seqPosMax(s)
		}
		const inconsistent = "infer: decode: the tokens of sequence %d in the batch have inconsistent positions: the memory's last position for it is X = %d, the batch's first is Y = %d; %s"
		switch {
		case mrope && u.Embd == nil && p0 >= 0 && p0 >= sp.lo:
			return fmt.Errorf(inconsistent, s, p0, sp.lo, "with M-RoPE it must be X < Y")
		case mrope && u.Embd != nil && p0 >= 0 && p0 > sp.lo:
			return fmt.Errorf(inconsistent, s, p0, sp.lo, "with M-RoPE it must be X <= Y")
		case mrope:
		case p0 >= 0 && sp.lo != p0+1:
			return fmt.Errorf(inconsistent, s, p0, sp.lo, "the positions must go on consecutively (Y = X + 1)")
		case int(sp.hi-sp.lo+1) > len(sp.at):
			return fmt.Errorf("infer: decode: sequence %d's positions in the batch are not continuous (%d to %d, %d of them)", s, sp.lo, sp.hi, len(sp.at))
		}
	}
	if hasMemory {
		// (in llama.cpp's order: by the coupled sequence, then the one
		// it is coupled to)
		pairs := slices.SortedFunc(maps.Keys(coupled), func(a, b [2]int32) int {
			return cmp.Or(cmp.Compare(a[0], b[0]), cmp.Compare(a[1], b[1]))
		})
		for _, k := range pairs {
			s1, s0 := k[0], k[1]
			if c.seqPosMin(s0) != c.seqPosMin(s1) || c.seqPosMax(s0) != c.seqPosMax(s1) {
				return fmt.Errorf("infer: decode: sequence %d is coupled to %d in the batch, but they have diverged in the memory", s1, s0)
			}
		}
	}
	// a sequence's tokens all share some set of sequences, and its
	// positions do not decrease
	sets := map[int32]seqSet{}
	last := map[int32]int32{}
	for i, ids := range u.SeqIDs {
		set := seqSetOf(ids)
		for _, s := range ids {
			cur, ok := sets[s]
			if !ok {
				cur = set
			} else {
				for w := range cur {
					cur[w] &= set[w]
				}
			}
			if cur.empty() {
				return fmt.Errorf("infer: decode: sequence %d belongs to incompatible sequence sets (token %d)", s, i)
			}
			sets[s] = cur
			if p, ok := last[s]; ok && u.Pos[i] < p {
				return fmt.Errorf("infer: decode: sequence %d's positions decrease (token %d: %d after %d)", s, i, u.Pos[i], p)
			}
			last[s] = u.Pos[i]
		}
	}
	return nil
}

// seqPosMin is the memory's first position of the sequence, -1 where it
// has none (llama_memory_i::seq_pos_min: an iSWA cache's is its
// sliding-window cache's, a hybrid's the greater of its two memories').
func (c *Context) seqPosMin(seq int32) int32 {
	if seq < 0 || seq >= maxSeq {
		return -1
	}
	if c.dsv4 != nil {
		return c.dsv4SeqPosMax(seq)
	}
	attn := int32(-1)
	if kc := c.posCache(); kc != nil {
		attn = kc.stream(seq).seqPosMin(seq)
	}
	switch {
	case c.recr != nil && len(c.caches) > 0:
		return max(attn, c.recr.seqPosMin(seq))
	case c.recr != nil:
		return c.recr.seqPosMin(seq)
	}
	return attn
}

// vocabSize is the output's width: the token embedding's rows.
func (c *Context) vocabSize() int {
	if c.nVocab > 0 {
		return c.nVocab
	}
	return c.embdRows
}

// update is llama_context::memory_update: each cache's pending stream
// copies, then its K-shift where positions moved (the shift's graph
// built by the pin's llama_kv_cache::build_graph_shift, computed, the
// shifts forgotten); a graph kept for reuse is not reused after an
// update.
func (c *Context) update() error {
	updated := false
	defer func() {
		if updated {
			c.dropGraph()
		}
	}()
	for ci, kc := range c.caches {
		if kc.update(c.lib) {
			updated = true
		}
		if !kc.hasShift() {
			continue
		}
		updated = true
		if kc.rope {
			if err := c.kShift(ci, kc); err != nil {
				return err
			}
		}
		for _, s := range kc.streams {
			s.resetShift()
		}
	}
	if c.dsv4 != nil {
		for _, st := range c.dsv4.states {
			if st.applyCopies(c.lib) {
				updated = true
			}
		}
	}
	return nil
}

// kShift builds, fills and computes cache ci's K-shift graph.
func (c *Context) kShift(ci int, kc *kvCache) error {
	c.dropGraph() // (the scheduler's allocation is the shift's now)
	st, err := c.gc.BuildShift(ci)
	if err != nil {
		return fmt.Errorf("infer: K-shift: %w", err)
	}
	defer st.Free()
	for _, in := range st.Inputs() {
		if in.Class != "llm_graph_input_k_shift" {
			return fmt.Errorf("infer: K-shift: an input %s", in.Class)
		}
		// (a cache without layers shifts nothing: its graph leaves the
		// input out, which set_input_k_shift asserts on)
		if err := unallocatedOf(in, "k_shift"); err != nil {
			return fmt.Errorf("infer: K-shift: %s: %w", c.rep.Run.Arch, err)
		}
		if t := member(in, "k_shift"); t != nil {
			if err := c.set(t, typeI32, i32s(kc.shifts()), 4); err != nil {
				return fmt.Errorf("infer: K-shift: %w", err)
			}
		}
		if t := member(in, "k_rot"); t != nil {
			if err := c.setHadamard(t); err != nil {
				return fmt.Errorf("infer: K-shift: %w", err)
			}
		}
	}
	if err := c.compute(st); err != nil {
		return fmt.Errorf("infer: K-shift: %w", err)
	}
	return nil
}

// decode is llama_context::decode for a prepared batch.
func (c *Context) decode(b *graph.Ubatch) error {
	if err := c.reserveAgain(); err != nil {
		return err
	}
	if err := c.update(); err != nil {
		return err
	}
	n := len(b.Tokens)
	nOutAll := 0
	for _, o := range b.Output {
		if o {
			nOutAll++
		}
	}
	if c.dsv4 != nil {
		return c.decodeDSV4(b, nOutAll)
	}
	// the ubatches, as the memory's init_batch splits the batch (a cache
	// of several streams: equal splits), and their slots, found on a copy
	// of the cells first (prepare): where one does not fit, nothing changes
	ubs := splitSimple(b, int(c.nUBatch))
	multi := len(c.caches) > 0 && len(c.caches[0].streams) > 1
	switch {
	case c.recr != nil && c.embeddings():
		// every token outputs: a recurrent state splits by sequence
		ubs = splitSeq(b, int(c.nUBatch))
	case multi || c.recr != nil:
		// a recurrent state splits equally: sequentially, unless a hybrid's
		// KV cache has one stream
		// (with rollback snapshots, each sequence's last n_rs_seq + 1
		// tokens stay together)
		sequential := multi || len(c.caches) == 0
		keep := 0
		if c.recr != nil && c.recr.nRSSeq > 0 {
			keep = int(c.recr.nRSSeq) + 1
		}
		var err error
		if ubs, err = splitEqual(b, int(c.nUBatch), sequential, keep); err != nil {
			return err
		}
	}
	slots := make([][]slot, len(ubs)) // per ubatch, per cache
	for k := range slots {
		slots[k] = make([]slot, len(c.caches))
	}
	if c.recr != nil {
		dry := c.recr.clone()
		for _, u := range ubs {
			if err := dry.findSlot(u); err != nil {
				return err
			}
		}
	}
	for ci, kc := range c.caches {
		if ci == 1 && c.rep.Memory.Class == "llama_memory_hybrid_idx" {
			// the indexer's cells are the attention cache's: its slots too
			for k := range slots {
				slots[k][1] = slots[k][0]
			}
			continue
		}
		// (one ubatch, as every step of a generation: its slot is found on
		// the cells themselves, which finding does not change)
		dry := kc
		if len(ubs) > 1 {
			dry = kc.clone()
		}
		for k, u := range ubs {
			sl, ok := dry.findSlot(u)
			if !ok {
				return fmt.Errorf("infer: decode: %w for batch of size %d", ErrNoMemorySlot, n)
			}
			if len(ubs) > 1 {
				dry.apply(sl, u)
			}
			slots[k][ci] = sl
		}
	}
	c.startOutputs(n, nOutAll)
	for k, u := range ubs {
		nOut := u.outputs(nOutAll == n)
		views := make([]graph.KVView, len(c.caches))
		for ci, kc := range c.caches {
			kc.apply(slots[k][ci], u)
			views[ci] = kc.view(slots[k][ci])
		}
		if c.rep.Memory.Class == "llama_kv_cache_msa" {
			views[0].NPos = c.caches[0].nPos()
		}
		var rs *graph.RSView
		if c.recr != nil {
			if err := c.recr.findSlot(u); err != nil {
				return err
			}
			v := c.recr.view()
			rs = &v
		}
		if err := c.step(u, nOut, views, rs, slots[k]); err != nil {
			c.forgetUbatch(u)
			return err
		}
	}
	return nil
}

// forgetUbatch is llama_context::decode's cleanup after a ubatch fails:
// each of its sequences loses what it put in the memory, from its first
// position on (a memory seq_rm, its refusal ignored).
func (c *Context) forgetUbatch(u *ubatch) {
	first := map[int32]int32{}
	for i, ids := range u.SeqIDs {
		if p, ok := first[ids[0]]; !ok || u.Pos[i] < p {
			first[ids[0]] = u.Pos[i]
		}
	}
	for _, s := range slices.Sorted(maps.Keys(first)) {
		c.seqRm(s, first[s], -1)
	}
}

// startOutputs forgets the last batch's outputs before a batch of n
// tokens, nOut of which output (all of them where nOut is n), none of
// which has a row yet.
func (c *Context) startOutputs(n, nOut int) {
	c.resetOutputs()
	c.batchOut = nOut
	c.outRow = make([]int32, n)
	for i := range c.outRow {
		c.outRow[i] = -1
	}
}

// outputs are the ubatch's outputs: its tokens that output, or with all
// (every token of the batch outputs), every one.
func (u *ubatch) outputs(all bool) int {
	if all {
		return len(u.Tokens)
	}
	n := 0
	for _, o := range u.Output {
		if o {
			n++
		}
	}
	return n
}

// step builds, fills and computes one ubatch's graph and keeps its
// logits.
func (c *Context) step(u *ubatch, nOut int, views []graph.KVView, rs *graph.RSView, slots []slot) error {
	t0 := time.Now()
	key := reuseKey(u, nOut, views, rs)
	if c.dsv4 != nil && c.dsv4.cur != nil {
		key += " dsv4 " + c.dsv4.cur.key()
	}
	st := c.last
	switch {
	case st != nil && key == c.lastKey && os.Getenv("LLAMA_GRAPH_REUSE_DISABLE") == "":
		c.timings.Reused++
	case c.kept != nil && key == c.keptKey && os.Getenv("LLAMA_GRAPH_REUSE_DISABLE") == "":
		// the graph before the last one had this shape: the same graph
		// llama.cpp would build, allocated again
		st = c.kept
		if err := st.Realloc(); err != nil {
			c.dropGraph()
			return fmt.Errorf("infer: decode: %w", err)
		}
		c.kept, c.keptKey, c.last, c.lastKey = c.last, c.lastKey, st, key
		c.timings.Kept++
	default:
		// a graph of another shape: built anew (llm_graph_result::can_reuse
		// refuses the last one); the last one is kept
		if c.kept != nil {
			c.kept.Free()
		}
		c.kept, c.keptKey, c.last, c.lastKey = c.last, c.lastKey, nil, ""
		var err error
		if c.dsv4 != nil && c.dsv4.cur != nil {
			st, err = c.gc.BuildDSV4(u.Ubatch, nOut, c.dsv4.cur.view)
		} else {
			st, err = c.gc.Build(u.Ubatch, nOut, views, rs)
		}
		if err != nil {
			return fmt.Errorf("infer: decode: %w", err)
		}
		c.last, c.lastKey = st, key
		c.timings.Graphs++
	}
	t1 := time.Now()
	c.timings.Build += t1.Sub(t0)
	defer func() { c.timings.Compute += time.Since(t1) }()
	if err := c.checkEmbdReads(st, u, nOut); err != nil {
		return fmt.Errorf("infer: decode: %s: %w", c.rep.Run.Arch, err)
	}
	if err := c.setInputs(st, u, nOut, slots); err != nil {
		c.dropGraph()
		return err
	}
	if err := c.compute(st); err != nil {
		c.dropGraph()
		return fmt.Errorf("infer: decode: %w", err)
	}
	if nOut == 0 {
		return nil
	}
	c.keepOutputs(st, u, nOut)
	all := nOut == len(u.Tokens)
	for i, bi := range u.index {
		if all || u.Output[i] {
			c.outRow[bi] = int32(c.outputs)
			c.outputs++
		}
	}
	return nil
}

// reuseKey says what a graph is built for, as llm_graph_params::allow_reuse
// and the inputs' can_reuse compare it: the ubatch's shape (and with an
// equal split, its sequences), the outputs, each cache's view.
func reuseKey(u *ubatch, nOut int, views []graph.KVView, rs *graph.RSView) string {
	k := fmt.Sprint(len(u.Tokens), u.NSeqs, u.Equal, seqsIf(u), nOut, views, u.Embd != nil)
	if rs != nil {
		k += fmt.Sprint(*rs)
	}
	return k
}

func seqsIf(u *ubatch) []int32 {
	if u.Equal {
		return u.seqsUnq()
	}
	return []int32{int32(len(u.seqsUnq()))}
}

// dropGraph frees the graphs kept for reuse.
func (c *Context) dropGraph() {
	for _, st := range []*graph.Step{c.last, c.kept} {
		if st != nil {
			st.Free()
		}
	}
	c.last, c.lastKey, c.kept, c.keptKey = nil, "", nil, ""
}

// Logits are the logits of the last batch's token i (negative: counted
// from the last output), as llama_get_logits_ith gives them: a copy.
func (c *Context) Logits(i int) ([]float32, error) {
	return c.AppendLogits(nil, i)
}

// AppendLogits appends the logits of the last batch's token i to dst, as
// Logits gives them, and returns the extended slice: a program that reads
// many rows (every prompt position's) reuses one row's memory.
func (c *Context) AppendLogits(dst []float32, i int) ([]float32, error) {
	if err := c.hold(); err != nil {
		return dst, err
	}
	defer c.mu.Unlock()
	row := c.row(i)
	if row < 0 || c.nVocab == 0 || len(c.logits) < int(row+1)*c.nVocab {
		return dst, fmt.Errorf("infer: logits: token %d of the last batch has no logits (%d outputs)", i, c.outputs)
	}
	return append(dst, c.logits[int(row)*c.nVocab:int(row+1)*c.nVocab]...), nil
}

// row is the output row of the last batch's token i (negative: counted
// from the last output, the outputs in batch order, as llama.cpp
// reorders them); -1 where it has none.
func (c *Context) row(i int) int32 {
	if i < 0 && -i <= c.outputs {
		k := c.outputs + i
		for j, r := range c.outRow {
			if r < 0 {
				continue
			}
			if k == 0 {
				i = j
				break
			}
			k--
		}
	}
	if i >= 0 && i < len(c.outRow) {
		return c.outRow[i]
	}
	return -1
}

// NVocab is the logits' width (0 before the first decode).
func (c *Context) NVocab() int {
	if c.hold() != nil {
		return 0
	}
	defer c.mu.Unlock()
	return c.nVocab
}

// Clear empties the memory, its cells and its buffers' data, as
// llama_memory_clear(mem, true) does.
func (c *Context) Clear() error {
	if err := c.hold(); err != nil {
		return err
	}
	defer c.mu.Unlock()
	for _, kc := range c.caches {
		kc.clear()
	}
	if c.recr != nil {
		c.recr.clear()
	}
	if c.dsv4 != nil {
		clear(c.dsv4.rsIdx)
	}
	for _, b := range c.cacheBufs {
		if err := b.Clear(0); err != nil {
			return fmt.Errorf("infer: clear: %w", err)
		}
	}
	return nil
}

// SeqRm removes sequence seq's positions [p0, p1) from the cache (a
// negative seq: every sequence's; a negative bound: open), as
// llama_memory_seq_rm does (a recurrent state's refuses a negative seq,
// as the pin's does: Clear empties it).
func (c *Context) SeqRm(seq, p0, p1 int32) error {
	if err := c.hold(); err != nil {
		return err
	}
	defer c.mu.Unlock()
	if seq >= int32(c.nSeqMax) && seq >= 0 {
		return fmt.Errorf("infer: seq_rm: sequence %d of %d", seq, c.nSeqMax)
	}
	return c.seqRm(seq, p0, p1)
}

// seqRm is llama_memory_i::seq_rm: a recurrent state first (a hybrid's
// KV cache is left as it is where the state refuses), then the caches.
func (c *Context) seqRm(seq, p0, p1 int32) error {
	if c.dsv4 != nil {
		return c.dsv4SeqRm(seq, p0, p1)
	}
	if c.recr != nil {
		if err := c.recr.seqRm(seq, p0, p1); err != nil {
			return err
		}
	}
	for _, kc := range c.caches {
		kc.seqRm(seq, p0, p1)
	}
	return nil
}

// SeqCp makes the positions [p0, p1) of sequence src also dst's.
func (c *Context) SeqCp(src, dst, p0, p1 int32) error {
	if err := c.hold(); err != nil {
		return err
	}
	defer c.mu.Unlock()
	if src < 0 || dst < 0 || uint32(src) >= c.nSeqMax || uint32(dst) >= c.nSeqMax {
		return fmt.Errorf("infer: seq_cp: sequences %d, %d of %d", src, dst, c.nSeqMax)
	}
	if c.dsv4 != nil {
		return c.dsv4SeqCp(src, dst, p0, p1)
	}
	for _, kc := range c.caches {
		if err := kc.seqCp(src, dst, p0, p1); err != nil {
			return err
		}
	}
	if c.recr != nil {
		c.recr.seqCp(src, dst)
	}
	return nil
}

// SeqAdd moves sequence seq's positions [p0, p1) by d (a negative bound:
// open), as llama_memory_seq_add does; a position moved below 0 leaves
// the cache. The keys of the moved cells are rotated to their new
// positions at the next Decode (llama.cpp's K-shift), as llama.cpp does.
func (c *Context) SeqAdd(seq, p0, p1, d int32) error {
	return c.seqMove("seq_add", seq, func(kc *kvCells) { kc.seqAdd(seq, p0, p1, d) }, func(r *recCache) { r.seqAdd(seq, p0, p1, d) })
}

// SeqDiv divides sequence seq's positions [p0, p1) by d (a negative
// bound: open), as llama_memory_seq_div does, the keys rotated at the
// next Decode.
func (c *Context) SeqDiv(seq, p0, p1, d int32) error {
	if d <= 0 {
		return fmt.Errorf("infer: seq_div: by %d", d)
	}
	return c.seqMove("seq_div", seq, func(kc *kvCells) { kc.seqDiv(seq, p0, p1, d) }, func(r *recCache) { r.seqDiv(seq, p0, p1, d) })
}

// CanShift says whether the memory's positions can move (SeqAdd,
// SeqDiv), as llama_memory_can_shift does.
func (c *Context) CanShift() bool {
	if c.hold() != nil {
		return false
	}
	defer c.mu.Unlock()
	return c.canShift() == nil
}

// canShift is why the memory's caches cannot shift (llama_kv_cache's
// get_can_shift, which its update aborts on), nil where they can.
func (c *Context) canShift() error {
	if len(c.caches) == 0 {
		return nil
	}
	if c.dsv4 != nil {
		return fmt.Errorf("llama.cpp's DSV4 memory says its positions do not move (llama_kv_cache_dsv4::get_can_shift: its compressed rows are of block positions)")
	}
	if c.rep.Run.Arch == "step35" {
		return fmt.Errorf("step35's layers rope dimensions of their own, and llama.cpp's K-shift rotates one n_rot for all")
	}
	if rt, _ := c.rep.Run.Hparams().Field("rope_type"); rt == ropeTypeMRoPE || rt == ropeTypeIMRoPE {
		return fmt.Errorf("positions of several dimensions (M-RoPE) do not move (GGML_ASSERT(hparams.n_pos_per_embd() == 1))")
	}
	return nil
}

// llama_rope_type's multi-section kinds.
const (
	ropeTypeNone   = -1
	ropeTypeMRoPE  = 8
	ropeTypeIMRoPE = 40
)

// seqMove is seq_add's and seq_div's: checked as llama.cpp asserts, then
// each KV cache's stream of the sequence and the recurrent state moved.
func (c *Context) seqMove(op string, seq int32, kv func(*kvCells), rec func(*recCache)) error {
	if err := c.hold(); err != nil {
		return err
	}
	defer c.mu.Unlock()
	if seq < 0 || uint32(seq) >= c.nSeqMax {
		return fmt.Errorf("infer: %s: sequence %d of %d", op, seq, c.nSeqMax)
	}
	if c.dsv4 != nil {
		return c.dsv4Move(op, seq, kv)
	}
	if err := c.canShift(); err != nil {
		return fmt.Errorf("infer: %s: %s: %w", op, c.rep.Run.Arch, err)
	}
	for _, kc := range c.caches {
		kv(kc.stream(seq))
	}
	if c.recr != nil {
		rec(c.recr)
	}
	return nil
}

// SeqKeep removes every sequence but seq from the cache.
func (c *Context) SeqKeep(seq int32) error {
	if err := c.hold(); err != nil {
		return err
	}
	defer c.mu.Unlock()
	if seq < 0 || uint32(seq) >= c.nSeqMax {
		return fmt.Errorf("infer: seq_keep: sequence %d of %d", seq, c.nSeqMax)
	}
	if c.dsv4 != nil {
		c.dsv4SeqKeep(seq)
		return nil
	}
	for _, kc := range c.caches {
		kc.stream(seq).seqKeep(seq)
	}
	if c.recr != nil {
		c.recr.seqKeep(seq)
	}
	return nil
}

// SeqPosMin is the first position of the sequence in the memory, -1 if
// none (llama_memory_seq_pos_min).
func (c *Context) SeqPosMin(seq int32) int32 {
	if c.hold() != nil {
		return -1
	}
	defer c.mu.Unlock()
	return c.seqPosMin(seq)
}

// SeqPosMax is the last position of the sequence in the cache, -1 if none.
func (c *Context) SeqPosMax(seq int32) int32 {
	if c.hold() != nil {
		return -1
	}
	defer c.mu.Unlock()
	return c.seqPosMax(seq)
}

// seqPosMax is the memory's last position of the sequence (the caches of
// an iSWA memory hold the same positions), -1 where it has none.
func (c *Context) seqPosMax(seq int32) int32 {
	if seq < 0 || seq >= maxSeq {
		return -1
	}
	switch {
	case c.dsv4 != nil:
		return c.dsv4SeqPosMax(seq)
	case c.recr != nil && len(c.caches) > 0:
		// a hybrid: the lesser of its two memories' (llama_memory_hybrid)
		return min(c.recr.seqPosMax(seq), c.posCache().stream(seq).seqPosMax(seq))
	case c.recr != nil:
		return c.recr.seqPosMax(seq)
	case len(c.caches) > 0:
		return c.posCache().stream(seq).seqPosMax(seq)
	}
	return -1
}

// posCache is the KV cache whose positions are the memory's: an iSWA
// memory's sliding-window cache (llama_kv_cache_iswa's seq_pos_min and
// seq_pos_max ask it: the base cache holds a superset), else the first;
// nil without one.
func (c *Context) posCache() *kvCache {
	for _, k := range c.caches {
		if k.streams[0].nSWA > 0 {
			return k
		}
	}
	if len(c.caches) > 0 {
		return c.caches[0]
	}
	return nil
}

// Argmax is the index of the greatest logit, the first of equal ones
// (NaN is less than any number); -1 for no logits.
func Argmax(logits []float32) int {
	if len(logits) == 0 {
		return -1
	}
	best := 0
	for i, v := range logits {
		if v > logits[best] || (math.IsNaN(float64(logits[best])) && !math.IsNaN(float64(v))) {
			best = i
		}
	}
	return best
}
