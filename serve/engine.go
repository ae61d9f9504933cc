// Port of llama.cpp tools/server/server-context.cpp (server_context_impl:
// load_model's slots, the task handling of process_single_task) and
// tools/server/server-queue.cpp (server_queue) (v0.5.0).

package serve

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"sync"
	"sync/atomic"
	"time"

	"github.com/ggload/ggload/infer"
	"github.com/ggload/ggload/loader"
	"github.com/ggload/ggload/sample"
	"github.com/ggload/ggload/vocab"
)

// ErrClosed is wrapped by the errors of a closed Engine's methods, and of
// the requests it had when it closed.
var ErrClosed = errors.New("serve: the engine is closed")

// Engine is llama-server's engine on one loaded model: its slots over
// one context, and the loop that schedules them. Its methods may be
// called from any goroutine; each request runs on the caller's.
type Engine struct {
	model *loader.Model
	ctx   *infer.Context
	vocab *vocab.Vocab
	info  infer.Info
	p     resolved

	defaults Options
	nCtxSlot int
	addBOS   bool
	nSWA     int
	seqRm    seqRmType
	epoch    time.Time

	// the task queue (server_queue)
	mu       sync.Mutex
	queue    []*task
	deferred []*task
	nextID   int
	closed   bool
	wake     chan struct{}
	done     chan struct{}

	// the loop's own
	slots []*slot
	batch batch
	cache *promptCache
	// nEmptyConsecutive counts the steps that had nothing to decode
	nEmptyConsecutive int

	cacheBytes atomic.Int64 // the prompt cache's bytes, for Memory

	// decodeHook, set by tests alone, sees each batch before it is decoded
	// and can make it fail
	decodeHook func(infer.Batch) error
}

// seqRmType is common_context_seq_rm_type: how much of a sequence the
// memory can remove.
type seqRmType int

const (
	seqRmNo   seqRmType = iota // no memory
	seqRmPart                  // any part
	seqRmFull                  // whole sequences only (recurrent)
	seqRmRS                    // parts, up to the rollback snapshots
)

// New makes the engine on a loaded model: a context of the plan's
// options (-c, -np, -kvu, -b, -ub, --embedding, --pooling), -np slots
// over it, and the loop that runs them. The model stays the caller's:
// close it after the engine.
func New(m *loader.Model, p Params) (*Engine, error) {
	if m == nil || m.Plan == nil || m.Plan.Model == nil {
		return nil, fmt.Errorf("serve: no model")
	}
	v, err := vocab.Load(m.Plan.Model)
	if err != nil {
		return nil, fmt.Errorf("serve: %w", err)
	}
	c, err := infer.New(m, infer.Params{Threads: p.Threads})
	if err != nil {
		return nil, fmt.Errorf("serve: %w", err)
	}
	e := &Engine{model: m, ctx: c, vocab: v, info: c.Info(), p: p.resolve(), epoch: time.Now(),
		wake: make(chan struct{}, 1), done: make(chan struct{})}
	if err := e.init(); err != nil {
		c.Close()
		return nil, err
	}
	go e.run()
	return e, nil
}

// init is load_model's and init's part after the context: the server's
// options the context refuses turned off, the slots, the prompt cache,
// the request defaults.
func (e *Engine) init() error {
	in := e.info
	if e.p.Threads < 0 {
		return fmt.Errorf("serve: %d threads", e.p.Threads)
	}
	if !in.CanShift {
		// (ctx_shift and cache_reuse are not supported by this context)
		e.p.ContextShift = false
		e.p.CacheReuse = 0
	}
	e.nSWA = in.NSWA
	if pc := e.model.Plan.Params.Context; pc.SWAFull {
		e.nSWA = 0
	}
	e.addBOS = e.vocab.AddBOS()
	e.nCtxSlot = in.NCtxSeq
	if e.p.KVUnifiedPerSlot > 0 {
		e.nCtxSlot = min(e.nCtxSlot, e.p.KVUnifiedPerSlot)
	}
	if in.NCtxTrain > 0 {
		e.nCtxSlot = min(e.nCtxSlot, in.NCtxTrain)
	}
	var err error
	if e.seqRm, err = e.probeSeqRm(); err != nil {
		return err
	}
	for i := range max(in.NSeqMax, 1) {
		e.slots = append(e.slots, &slot{id: i, nCtx: e.nCtxSlot, tLastUsed: -1, iBatch: -1})
	}
	if e.p.cacheRAMMiB != 0 {
		e.cache = newPromptCache(e.p.cacheRAMMiB, in.NCtx)
	} else {
		e.p.cacheIdleSlots = false
	}
	e.defaults = e.makeDefaults()
	return nil
}

// probeSeqRm is common_context_can_seq_rm: with rollback snapshots,
// bounded; else two tokens decoded and the last one removed, the memory
// cleared after.
func (e *Engine) probeSeqRm() (seqRmType, error) {
	if !e.info.Memory {
		return seqRmNo, nil
	}
	if e.info.NRSSeq > 0 {
		return seqRmRS, nil
	}
	res := seqRmPart
	if err := e.ctx.Decode(infer.Batch{Tokens: []int32{0, 0}}); err != nil {
		res = seqRmNo
	} else if err := e.ctx.SeqRm(0, 1, -1); err != nil {
		res = seqRmFull
	}
	if err := e.ctx.Clear(); err != nil {
		return seqRmNo, fmt.Errorf("serve: %w", err)
	}
	return res, nil
}

// makeDefaults are the requests' defaults (eval_llama_cmpl_schema's
// copy of params_base).
func (e *Engine) makeDefaults() Options {
	// the defaults resolved, every field meant as it is: a request sets
	// the fields it names, a zero among them included
	// (the model's own, general.sampling.*, where the options leave a
	// field unset: common_init_from_params)
	var sp sample.Params
	if e.p.Sampling != nil {
		sp = *e.p.Sampling
	}
	sp.FromModel(e.model.Plan.Model)
	sp = sp.Resolved()
	sp.Explicit = sample.SetAll
	return Options{CachePrompt: !e.p.NoCachePrompt, NKeep: e.p.Keep, NPredict: e.p.nPredict, NCacheReuse: e.p.CacheReuse,
		TMaxPredictMS: -1, Stop: append([]string(nil), e.p.Stop...), Sampling: sp, IDSlot: -1, EmbdNormalize: e.p.embdNormalize}
}

// Defaults are a request's options before the request sets its own.
func (e *Engine) Defaults() Options {
	o := e.defaults
	o.Stop = append([]string(nil), o.Stop...)
	o.Sampling.LogitBias = append([]sample.LogitBias(nil), o.Sampling.LogitBias...)
	o.Sampling.Samplers = append([]sample.Kind(nil), o.Sampling.Samplers...)
	o.Sampling.DrySequenceBreakers = append([]string(nil), o.Sampling.DrySequenceBreakers...)
	return o
}

// Vocab is the model's vocabulary (the HTTP layer tokenizes with it).
func (e *Engine) Vocab() *vocab.Vocab { return e.vocab }

// Info is what the engine serves: the context, and each slot's context
// (n_ctx_slot).
type Info struct {
	infer.Info
	NSlots   int
	NCtxSlot int
}

// Info describes the engine.
func (e *Engine) Info() Info { return Info{Info: e.info, NSlots: len(e.slots), NCtxSlot: e.nCtxSlot} }

// Memory is what an engine holds, exactly: the model's weight buffers,
// the context's (KV cache, recurrent state, compute), and the prompt
// cache's host memory now.
type Memory struct {
	Weights          []Buffer
	Context          []infer.Allocation
	PromptCache      uint64
	PromptCacheLimit uint64 // 0: no limit (or no cache)
}

// Buffer is one weight buffer.
type Buffer struct {
	BufferType string
	Device     string
	Bytes      uint64
	Mapped     bool // a mapping of the file (host memory the kernel may page out)
}

// Memory reports the engine's memory.
func (e *Engine) Memory() Memory {
	var m Memory
	for _, b := range e.model.Buffers() {
		dev := ""
		if b.Device != nil {
			dev = b.Device.Name()
		}
		m.Weights = append(m.Weights, Buffer{BufferType: b.BufferType.Name(), Device: dev, Bytes: b.Buffer.Size(), Mapped: b.Mapped})
	}
	m.Context = append(m.Context, e.ctx.Memory...)
	m.PromptCache = uint64(e.cacheBytes.Load())
	if e.cache != nil {
		m.PromptCacheLimit = e.cache.limitSize
	}
	return m
}

// Close stops the engine: the requests it holds end with ErrClosed, the
// context is freed. The model stays open. Closing twice does nothing.
func (e *Engine) Close() error {
	e.mu.Lock()
	if e.closed {
		e.mu.Unlock()
		<-e.done
		return nil
	}
	e.closed = true
	e.mu.Unlock()
	e.notify()
	<-e.done
	return e.ctx.Close()
}

// taskKind is server_task_type.
type taskKind int

const (
	taskCompletion taskKind = iota
	taskEmbedding
	taskRerank
	taskInfill
	taskCancel
	taskSlotGet
	taskSlotSave
	taskSlotRestore
	taskSlotErase
)

// task is a server_task: a request, or an action on the slots.
type task struct {
	id     int
	kind   taskKind
	tokens []int32
	opts   Options
	target int    // a cancel's task
	slotID int    // a slot action's slot
	file   string // a slot action's file name
	out    *outbox
}

func (t *task) needEmbd() bool { return t.kind == taskEmbedding || t.kind == taskRerank }
func (t *task) needSampling() bool {
	return t.kind == taskCompletion || t.kind == taskInfill
}

// outbox is a task's results, from the loop to the request's goroutine
// (server_response, one per task).
type outbox struct {
	mu     sync.Mutex
	items  []any
	notify chan struct{}
}

func newOutbox() *outbox { return &outbox{notify: make(chan struct{}, 1)} }

func (o *outbox) send(v any) {
	o.mu.Lock()
	o.items = append(o.items, v)
	o.mu.Unlock()
	select {
	case o.notify <- struct{}{}:
	default:
	}
}

func (o *outbox) take() []any {
	o.mu.Lock()
	defer o.mu.Unlock()
	items := o.items
	o.items = nil
	return items
}

// post queues a task (at the front: a cancel); a cancel takes the task
// it cancels out of the queues (cleanup_pending_task).
func (e *Engine) post(t *task, front bool) error {
	e.mu.Lock()
	if e.closed {
		e.mu.Unlock()
		return ErrClosed
	}
	if t.kind == taskCancel {
		drop := func(q []*task) []*task {
			out := q[:0]
			for _, x := range q {
				if x.id != t.target {
					out = append(out, x)
				}
			}
			return out
		}
		e.queue, e.deferred = drop(e.queue), drop(e.deferred)
	}
	if front {
		e.queue = append([]*task{t}, e.queue...)
	} else {
		e.queue = append(e.queue, t)
	}
	e.mu.Unlock()
	e.notify()
	return nil
}

func (e *Engine) notify() {
	select {
	case e.wake <- struct{}{}:
	default:
	}
}

func (e *Engine) newTask(kind taskKind, tokens []int32, o Options) *task {
	e.mu.Lock()
	id := e.nextID
	e.nextID++
	e.mu.Unlock()
	return &task{id: id, kind: kind, tokens: tokens, opts: o, out: newOutbox()}
}

// defer sets a task aside until a slot is released.
func (e *Engine) deferTask(t *task) {
	e.mu.Lock()
	e.deferred = append(e.deferred, t)
	e.mu.Unlock()
}

// popDeferred is pop_deferred_task: on a slot's release, the first
// deferred task that asks for that slot, else the first one, goes to the
// front of the queue.
func (e *Engine) popDeferred(slotID int) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if len(e.deferred) == 0 {
		return
	}
	k := 0
	for i, t := range e.deferred {
		if t.slotFor() == slotID {
			k = i
			break
		}
	}
	t := e.deferred[k]
	e.deferred = append(e.deferred[:k], e.deferred[k+1:]...)
	e.queue = append([]*task{t}, e.queue...)
}

// slotFor is the slot a task asks for (id_slot), -1 for any.
func (t *task) slotFor() int {
	switch t.kind {
	case taskSlotSave, taskSlotRestore, taskSlotErase:
		return t.slotID
	case taskCompletion, taskInfill, taskEmbedding, taskRerank:
		return t.opts.IDSlot
	}
	return -1
}

// run is the loop (server_queue::start_loop): the queued tasks, then a
// step of the slots; it waits only when no slot is processing.
func (e *Engine) run() {
	defer close(e.done)
	// the context's calls keep one thread (the CPU backend's workers spin
	// at their barriers; see infer's onThread)
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	for {
		if e.processTasks() {
			break
		}
		e.updateSlots()
		if e.anyProcessing() {
			continue
		}
		e.mu.Lock()
		idle := len(e.queue) == 0 && !e.closed
		e.mu.Unlock()
		if idle {
			<-e.wake
		}
	}
	e.shutdown()
}

// processTasks takes the queue's tasks in order; true when the engine
// closed.
func (e *Engine) processTasks() bool {
	for {
		e.mu.Lock()
		if e.closed {
			e.mu.Unlock()
			return true
		}
		if len(e.queue) == 0 {
			e.mu.Unlock()
			return false
		}
		t := e.queue[0]
		e.queue = e.queue[1:]
		e.mu.Unlock()
		e.processTask(t)
	}
}

// shutdown ends every request: those in slots and those waiting.
func (e *Engine) shutdown() {
	for _, s := range e.slots {
		if s.processing() {
			s.task.out.send(&Error{Type: ErrUnavailable, Msg: ErrClosed.Error()})
			s.task = nil
			s.state = slotIdle
		}
	}
	e.mu.Lock()
	pending := append(e.queue, e.deferred...)
	e.queue, e.deferred = nil, nil
	e.mu.Unlock()
	for _, t := range pending {
		if t.out != nil {
			t.out.send(&Error{Type: ErrUnavailable, Msg: ErrClosed.Error()})
		}
	}
}

func (e *Engine) anyProcessing() bool {
	for _, s := range e.slots {
		if s.processing() {
			return true
		}
	}
	return false
}

// processTask is process_single_task.
func (e *Engine) processTask(t *task) {
	switch t.kind {
	case taskCompletion, taskInfill, taskEmbedding, taskRerank:
		s := e.availableSlot(t)
		if s == nil || s.processing() {
			e.deferTask(t)
			return
		}
		if !e.launch(s, t) {
			// the slot stays free: a task deferred for want of one takes
			// it (the pin drops the task and pops none, which leaves the
			// deferred tasks waiting forever once every slot is idle)
			e.popDeferred(s.id)
			return
		}
		if e.p.cacheIdleSlots {
			for _, o := range e.slots {
				if o.processing() {
					continue
				}
				if e.promptSave(o) {
					e.cacheUpdate()
				}
				if e.info.KVUnified {
					e.promptClear(o)
				}
			}
		}
	case taskCancel:
		for _, s := range e.slots {
			if s.task != nil && s.task.id == t.target {
				e.release(s)
				break
			}
		}
	case taskSlotGet:
		infos := make([]SlotInfo, len(e.slots))
		for i, s := range e.slots {
			infos[i] = e.slotInfo(s)
		}
		t.out.send(infos)
	case taskSlotSave, taskSlotRestore, taskSlotErase:
		e.slotAction(t)
	}
}

// await posts the task and waits for its result on the caller's
// goroutine, handing its events to on; a cancelled context or a failing
// (or panicking) callback cancels the task.
func (e *Engine) await(ctx context.Context, t *task, on func(Event) error) (any, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	if err := e.post(t, false); err != nil {
		return nil, err
	}
	return e.wait(ctx, t, on)
}

// wait is await's wait for a task posted.
func (e *Engine) wait(ctx context.Context, t *task, on func(Event) error) (any, error) {
	for {
		select {
		case <-ctx.Done():
			e.cancel(t.id)
			return nil, ctx.Err()
		case <-t.out.notify:
		}
		for _, v := range t.out.take() {
			switch v := v.(type) {
			case *Event:
				if on == nil {
					continue
				}
				if err := callSafely(on, *v); err != nil {
					e.cancel(t.id)
					return nil, err
				}
			case *Error:
				return nil, v
			default:
				return v, nil
			}
		}
	}
}

// cancel posts the cancel of a task (at the front of the queue).
func (e *Engine) cancel(id int) {
	c := e.newTask(taskCancel, nil, Options{})
	c.target = id
	c.out = nil
	_ = e.post(c, true) // (a closed engine has ended the task already)
}

// callSafely calls the request's callback, a panic turned into an error.
func callSafely(on func(Event) error, ev Event) (err error) {
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("serve: the request's callback panicked: %v", r)
		}
	}()
	return on(ev)
}

// Complete runs a completion of the prompt's tokens with the options
// (start from Defaults), as llama-server's /completion does: it returns
// when the generation stops, or the context is done. With o.Stream, each
// event goes to on (on the caller's goroutine) as it comes; an error
// from on ends the request with that error.
func (e *Engine) Complete(ctx context.Context, prompt []int32, o Options, on func(Event) error) (*Result, error) {
	return e.completion(ctx, taskCompletion, prompt, o, on)
}

// Infill is Complete for a fill-in-the-middle prompt (the pin's /infill
// task: an infill's slots batch with infills only).
func (e *Engine) Infill(ctx context.Context, prompt []int32, o Options, on func(Event) error) (*Result, error) {
	return e.completion(ctx, taskInfill, prompt, o, on)
}

func (e *Engine) completion(ctx context.Context, kind taskKind, prompt []int32, o Options, on func(Event) error) (*Result, error) {
	v, err := e.await(ctx, e.newTask(kind, prompt, o), on)
	if err != nil {
		return nil, err
	}
	return v.(*Result), nil
}

// Request is one completion of those Post posts together.
type Request struct {
	Prompt  []int32
	Options Options
	Infill  bool // an infill (Engine.Infill), not a completion
}

// Pending is a completion posted, to be waited for.
type Pending struct {
	e   *Engine
	ctx context.Context
	t   *task
}

// Post posts completions at once, in order, as the pin's post_tasks
// does for a request of several prompts or of n_cmpl completions: the
// engine takes them in that order, in the same step. Each must then be
// waited for (Wait), each on its own goroutine.
func (e *Engine) Post(ctx context.Context, reqs []Request) ([]*Pending, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	out := make([]*Pending, len(reqs))
	ts := make([]*task, len(reqs))
	for i, r := range reqs {
		kind := taskCompletion
		if r.Infill {
			kind = taskInfill
		}
		ts[i] = e.newTask(kind, r.Prompt, r.Options)
		out[i] = &Pending{e: e, ctx: ctx, t: ts[i]}
	}
	e.mu.Lock()
	if e.closed {
		e.mu.Unlock()
		return nil, ErrClosed
	}
	e.queue = append(e.queue, ts...)
	e.mu.Unlock()
	e.notify()
	return out, nil
}

// Wait is Complete's wait for a posted completion: its events go to on,
// its result or error comes back; the context given to Post ends it.
func (p *Pending) Wait(on func(Event) error) (*Result, error) {
	v, err := p.e.wait(p.ctx, p.t, on)
	if err != nil {
		return nil, err
	}
	return v.(*Result), nil
}

// Embed is an embedding of the prompt (the pin's /embedding task): the
// engine's context must output embeddings (--embedding).
func (e *Engine) Embed(ctx context.Context, prompt []int32, o Options) (*Embedding, error) {
	if !e.info.Embeddings {
		return nil, errorf(ErrNotSupported, "This server does not support embeddings. Start it with `--embeddings`")
	}
	v, err := e.await(ctx, e.newTask(taskEmbedding, prompt, o), nil)
	if err != nil {
		return nil, err
	}
	return v.(*Embedding), nil
}

// Rerank is the rank score of a query and document, formatted as the
// model's rerank prompt (the pin's /rerank task, one document): the
// engine's context must rank (--reranking: --embedding --pooling rank).
func (e *Engine) Rerank(ctx context.Context, prompt []int32, o Options) (float32, error) {
	if !e.info.Embeddings || e.info.Pooling != poolingRank {
		return 0, errorf(ErrNotSupported, "This server does not support reranking. Start it with `--reranking`")
	}
	v, err := e.await(ctx, e.newTask(taskRerank, prompt, o), nil)
	if err != nil {
		return 0, err
	}
	return v.(float32), nil
}

// Slots describes each slot (the pin's /slots).
func (e *Engine) Slots(ctx context.Context) ([]SlotInfo, error) {
	v, err := e.await(ctx, e.newTask(taskSlotGet, nil, Options{}), nil)
	if err != nil {
		return nil, err
	}
	return v.([]SlotInfo), nil
}

// llama_pooling_type's values the engine asks for.
const (
	poolingNone = 0
	poolingLast = 3
	poolingRank = 4
)
