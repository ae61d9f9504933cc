// Port of llama.cpp tools/server/server-context.cpp (update_slots,
// pre_decode, decode, post_decode, send_embedding, send_rerank) and
// common/common.cpp (common_embd_normalize) (v0.5.0).

package serve

import (
	"errors"
	"fmt"
	"math"
	"slices"

	"github.com/ggload/ggload/infer"
)

// batchToken is one token of a step's batch (server_batch::token).
type batchToken struct {
	slot     int
	task     *task // the slot's task when the token was added
	tok      int32
	pos      int32
	output   bool
	isPrompt bool
}

// batch is a step's server_batch.
type batch struct {
	toks    []batchToken
	batched *slot // the slot the batch's kind of task is taken from
	alloc   int
}

func (b *batch) add(s *slot, tok, pos int32, output, isPrompt bool) bool {
	if len(b.toks) >= b.alloc {
		return false
	}
	b.toks = append(b.toks, batchToken{slot: s.id, task: s.task, tok: tok, pos: pos, output: output, isPrompt: isPrompt})
	return true
}

// view is the part of the batch one decode runs: the batch's tokens it
// holds, and each one's index in the decoded batch.
type view struct {
	idx []int
	row map[int]int
}

func (v *view) has(i int) bool { _, ok := v.row[i]; return ok }

// updateSlots is update_slots: the batch built, decoded n_batch tokens
// at a time (halved while the memory has no room), each part's outputs
// sampled.
func (e *Engine) updateSlots() {
	if !e.anyProcessing() {
		return
	}
	e.preDecode()
	nBatch := e.info.NBatch
	for off := 0; off < len(e.batch.toks); {
		n := min(nBatch, len(e.batch.toks)-off)
		v := e.viewOf(off, n)
		if len(v.idx) == 0 {
			off += n
			continue
		}
		ok, fatal := e.decode(&nBatch, v)
		if fatal {
			break
		}
		if !ok {
			continue
		}
		nBatch = e.info.NBatch
		off += n
	}
}

// viewOf is the batch's tokens [off, off+n) whose slot still runs the
// task they were added for.
func (e *Engine) viewOf(off, n int) view {
	v := view{row: map[int]int{}}
	for i := off; i < off+n; i++ {
		t := &e.batch.toks[i]
		if s := e.slots[t.slot]; s.task != t.task || !s.processing() {
			continue
		}
		v.row[i] = len(v.idx)
		v.idx = append(v.idx, i)
	}
	return v
}

// inferBatch is the view as infer decodes it.
func (e *Engine) inferBatch(v view) infer.Batch {
	b := infer.Batch{Tokens: make([]int32, len(v.idx)), Pos: make([]int32, len(v.idx)), SeqIDs: make([][]int32, len(v.idx)), Logits: make([]bool, len(v.idx))}
	for k, i := range v.idx {
		t := &e.batch.toks[i]
		b.Tokens[k], b.Pos[k], b.SeqIDs[k], b.Logits[k] = t.tok, t.pos, []int32{int32(t.slot)}, t.output
	}
	return b
}

func (e *Engine) decodeBatch(b infer.Batch) error {
	if e.decodeHook != nil {
		if err := e.decodeHook(b); err != nil {
			return err
		}
	}
	return e.ctx.Decode(b)
}

// decode is decode(): true when the view was decoded (and its outputs
// taken), false to try again with the n_batch it halved; fatal when the
// step cannot go on.
func (e *Engine) decode(nBatch *int, v view) (ok, fatal bool) {
	err := e.decodeBatch(e.inferBatch(v))
	if err == nil {
		e.postDecode(v, nil)
		return true, false
	}
	if errors.Is(err, infer.ErrNoMemorySlot) {
		if *nBatch == 1 {
			// (the pin ends every slot here; the view's token is one slot's)
			e.failView(v, "Context size has been exceeded.")
			return true, false
		}
		if !e.tryClearIdleSlots() {
			*nBatch /= 2
		}
		return false, false
	}
	// a failed compute: each slot of the view decoded alone, those that
	// fail ended (the pin ends every slot)
	e.isolate(v)
	return true, false
}

// slotsOf are the view's slots, in the order of their first token.
func (e *Engine) slotsOf(v view) []*slot {
	var out []*slot
	for _, i := range v.idx {
		if s := e.slots[e.batch.toks[i].slot]; !slices.Contains(out, s) {
			out = append(out, s)
		}
	}
	return out
}

// rollback takes the view's tokens of slot s out of the memory.
func (e *Engine) rollback(s *slot, v view) {
	for _, i := range v.idx {
		if t := &e.batch.toks[i]; t.slot == s.id {
			_ = e.ctx.SeqRm(int32(s.id), t.pos, -1)
			return
		}
	}
}

// failView ends the view's slots with the error, their memory cleared.
func (e *Engine) failView(v view, msg string) {
	for _, s := range e.slotsOf(v) {
		e.failSlot(s, msg)
	}
}

func (e *Engine) failSlot(s *slot, msg string) {
	if !s.processing() {
		return
	}
	e.sendError(s, errorf(ErrServer, "%s", msg))
	e.release(s)
	e.promptClear(s)
}

// isolate decodes each slot's tokens of a failed view alone, after
// taking the view out of every slot's memory: a slot whose tokens fail
// again is ended ("Compute error."), the others go on.
func (e *Engine) isolate(v view) {
	slots := e.slotsOf(v)
	for _, s := range slots {
		e.rollback(s, v)
	}
	for _, s := range slots {
		sub := view{row: map[int]int{}}
		for _, i := range v.idx {
			if e.batch.toks[i].slot == s.id {
				sub.row[i] = len(sub.idx)
				sub.idx = append(sub.idx, i)
			}
		}
		if err := e.decodeBatch(e.inferBatch(sub)); err != nil {
			e.rollback(s, sub)
			e.failSlot(s, "Compute error.")
			continue
		}
		e.postDecode(sub, s)
	}
}

// tryClearIdleSlots is try_clear_idle_slots: with a unified cache, the
// first idle slot that holds a prompt is cleared to make room.
func (e *Engine) tryClearIdleSlots() bool {
	if !e.info.KVUnified {
		return false
	}
	for _, s := range e.slots {
		if !s.processing() && len(s.prompt.tokens) > 0 {
			e.promptClear(s)
			return true
		}
	}
	return false
}

// preDecode is pre_decode: context shifts, then the batch: each
// generating slot's sampled token, then the prompts.
func (e *Engine) preDecode() {
	for _, s := range e.slots {
		if s.state == slotGenerating && len(s.prompt.tokens)+1 >= s.nCtx {
			e.contextShift(s)
		}
	}
	b := &e.batch
	b.toks, b.batched, b.alloc = b.toks[:0], nil, max(e.info.NBatch, len(e.slots))
	var generating []*slot
	for _, s := range e.slots {
		if s.state != slotGenerating {
			continue
		}
		if b.batched == nil {
			b.batched = s
		} else if !canBatchWith(b.batched, s) {
			continue
		}
		generating = append(generating, s)
	}
	for _, s := range generating {
		s.iBatch = len(b.toks)
		b.add(s, s.sampled, int32(len(s.prompt.tokens)), true, false)
		s.prompt.tokens = append(s.prompt.tokens, s.sampled)
	}
	if !e.p.contBatching && len(b.toks) > 0 {
		return
	}
	nBatch := e.info.NBatch
	for _, s := range e.slots {
		if len(b.toks) >= nBatch {
			break
		}
		if !s.processing() || (b.batched != nil && !canBatchWith(b.batched, s)) {
			continue
		}
		if s.state == slotProcessingPrompt || s.state == slotStarted {
			if s.state == slotStarted && !e.startPrompt(s) {
				continue
			}
			if !e.canSplit(s) && len(b.toks)+len(s.task.tokens) > nBatch {
				continue // (it waits for a batch it fits whole)
			}
			if err := e.addPrompt(s); err != nil {
				e.failSlot(s, err.Error())
				continue
			}
		}
		if b.batched == nil {
			b.batched = s
		}
	}
}

// contextShift is pre_decode's context shift of a slot that reached the
// end of its context: half of what follows n_keep dropped (n_discard),
// the rest moved down.
func (e *Engine) contextShift(s *slot) {
	if !e.p.ContextShift {
		e.sendError(s, errorf(ErrServer, "context shift is disabled"))
		e.release(s)
		return
	}
	o := &s.task.opts
	nKeep := o.NKeep
	if nKeep < 0 {
		nKeep = len(s.task.tokens)
	}
	if e.addBOS {
		nKeep++
	}
	nKeep = min(s.nCtx-4, nKeep)
	nLeft := len(s.prompt.tokens) - nKeep
	nDiscard := o.NDiscard
	if nDiscard == 0 {
		nDiscard = nLeft / 2
	}
	nDiscard = min(max(nDiscard, 0), max(0, nLeft-1))
	id := int32(s.id)
	if err := e.ctx.SeqRm(id, int32(nKeep), int32(nKeep+nDiscard)); err != nil {
		e.failSlot(s, err.Error())
		return
	}
	if err := e.ctx.SeqAdd(id, int32(nKeep+nDiscard), int32(len(s.prompt.tokens)), int32(-nDiscard)); err != nil {
		e.failSlot(s, err.Error())
		return
	}
	toks := slices.Clone(s.prompt.tokens)
	for i := nKeep + nDiscard; i < len(toks); i++ {
		toks[i-nDiscard] = toks[i]
	}
	toks = toks[:len(s.prompt.tokens)-nDiscard]
	s.prompt.clear()
	s.prompt.tokens = toks
	s.truncated = true
}

// startPrompt is the SLOT_STATE_STARTED part of pre_decode: the prompt
// checked against the slot's context, the cached prefix kept (chunks
// shifted in with --cache-reuse; a checkpoint restored where the memory
// cannot roll back), the slot's prompt cut to it; false when the task
// ended here.
func (e *Engine) startPrompt(s *slot) bool {
	t := s.task
	s.stats.tStart = e.now()
	s.state = slotProcessingPrompt
	nTok := len(t.tokens)
	if nTok == 0 {
		e.sendFinal(s)
		e.release(s)
		return false
	}
	if t.needSampling() && !e.info.Memory {
		e.sendError(s, errorf(ErrServer, "the current context does not logits computation. skipping"))
		e.release(s)
		return false
	}
	nPast := 0
	if !e.canSplit(s) {
		if nTok > e.info.NUBatch {
			e.sendError(s, errorf(ErrServer, "input (%d tokens) is too large to process. increase the physical batch size (current batch size: %d)", nTok, e.info.NUBatch))
			e.release(s)
			return false
		}
		if nTok > s.nCtx {
			e.sendError(s, errorf(ErrExceedContextSize, "input (%d tokens) is larger than the max context size (%d tokens). skipping", nTok, s.nCtx))
			e.release(s)
			return false
		}
	} else {
		if nTok >= s.nCtx {
			e.sendError(s, errorf(ErrExceedContextSize, "request (%d tokens) exceeds the available context size (%d tokens), try increasing it", nTok, s.nCtx))
			e.release(s)
			return false
		}
		if t.opts.CachePrompt {
			nPast = commonPrefix(s.prompt.tokens, t.tokens)
			if e.info.CanShift && t.opts.NCacheReuse > 0 {
				var err error
				if nPast, err = e.reuseChunks(s, nPast); err != nil {
					e.failSlot(s, err.Error())
					return false
				}
			}
		}
		var err error
		if nPast, err = e.restoreCheckpoint(s, nPast); err != nil {
			e.failSlot(s, err.Error())
			return false
		}
	}
	if nPast == nTok && nPast > 0 {
		nPast-- // (at least one token is evaluated, for its logits)
	}
	s.stats.nPromptCached, s.stats.nPromptProcessed = nPast, 0
	s.prompt.tokens = s.prompt.tokens[:nPast]
	if t.opts.Stream {
		e.sendPartial(s, nil, t.opts.ReturnProgress, !t.opts.ReturnProgress)
	}
	return true
}

// reuseChunks is --cache-reuse: past the common prefix, each chunk of at
// least n_cache_reuse tokens the cached prompt shares with the new one
// is shifted to its new position in the memory; the tokens reused.
func (e *Engine) reuseChunks(s *slot, nPast int) (int, error) {
	cached, toks := s.prompt.tokens, s.task.tokens
	headC, headP := nPast, nPast
	id := int32(s.id)
	for headC < len(cached) && headP < len(toks) {
		n := 0
		for headC+n < len(cached) && headP+n < len(toks) && cached[headC+n] == toks[headP+n] {
			n++
		}
		if n < s.task.opts.NCacheReuse {
			headC++
			continue
		}
		if err := e.ctx.SeqRm(id, int32(headP), int32(headC)); err != nil {
			return 0, err
		}
		if err := e.ctx.SeqAdd(id, int32(headC), int32(headC+n), int32(headP-headC)); err != nil {
			return 0, err
		}
		for i := range n {
			cached[headP+i] = cached[headC+i]
			nPast++
		}
		headC += n
		headP += n
	}
	return nPast, nil
}

// restoreCheckpoint is the checkpoint part of pre_decode: where the
// memory no longer holds what the kept prefix needs (a recurrent state
// past it, a window that slid), the latest checkpoint before it is
// restored, or the whole prompt is processed again; the checkpoints
// past the new end are dropped.
func (e *Engine) restoreCheckpoint(s *slot, nPast int) (int, error) {
	posNext := nPast
	hasNew := 0
	if nPast >= len(s.task.tokens) {
		hasNew = 1
	}
	thold := max(0, posNext-e.nSWA-hasNew)
	if nPast > 0 && nPast <= len(s.prompt.tokens) {
		posMin := int(e.ctx.SeqPosMin(int32(s.id)))
		if posMin == -1 {
			return 0, fmt.Errorf("serve: slot %d: n_past = %d but its sequence is not in the memory", s.id, nPast)
		}
		if posMin >= thold {
			found := -1
			for i := len(s.prompt.checkpoints) - 1; i >= 0; i-- {
				c := &s.prompt.checkpoints[i]
				if int(c.posMax) > posNext {
					continue
				}
				if int(c.posMin) < thold || c.posMin == 0 {
					found = i
					break
				}
			}
			if found >= 0 {
				c := &s.prompt.checkpoints[found]
				if n, err := e.ctx.SetSeqState(int32(s.id), c.data, infer.StatePartialOnly); err != nil || n != len(c.data) {
					return 0, fmt.Errorf("serve: checkpoint size mismatch: expected %d, got %d (%v)", len(c.data), n, err)
				}
				posNext = min(posNext, max(int(c.posMin)+1, int(c.posMax)))
				nPast = min(min(posNext, len(s.prompt.tokens)), int(c.nTokens))
			} else {
				posNext, nPast = 0, 0
			}
		}
	}
	kept := s.prompt.checkpoints[:0]
	for _, c := range s.prompt.checkpoints {
		if int(c.posMax) <= posNext {
			kept = append(kept, c)
		}
	}
	s.prompt.checkpoints = kept
	return nPast, nil
}

// addPrompt adds the next chunk of the slot's prompt to the batch (what
// follows the cached part removed from the memory first), up to n_batch,
// stopping early where a checkpoint is due (at a user message, and 4 +
// n_ubatch and 4 tokens before the end); it makes that checkpoint
// before the chunk is decoded.
func (e *Engine) addPrompt(s *slot) error {
	b := &e.batch
	t := s.task
	nBatch, nUBatch := e.info.NBatch, e.info.NUBatch
	nPrev := len(b.toks)
	if err := e.ctx.SeqRm(int32(s.id), int32(len(s.prompt.tokens)), -1); err != nil {
		return fmt.Errorf("serve: failed to remove sequence %d from %d: %w", s.id, len(s.prompt.tokens), err)
	}
	doCkpt := e.p.nCtxCheckpoints > 0 && t.kind == taskCompletion && (e.seqRm == seqRmFull || e.seqRm == seqRmRS || e.nSWA > 0)
	starts := t.opts.UserMessageStarts
	lastUser := -1
	if len(starts) > 0 {
		lastUser = starts[len(starts)-1]
	}
	isUserStart := func(pos int) bool { return slices.Contains(starts, pos) }
	cps := func() []checkpoint { return s.prompt.checkpoints }
fill:
	for len(s.prompt.tokens) < len(t.tokens) && len(b.toks) < nBatch {
		cur := t.tokens[len(s.prompt.tokens)]
		b.add(s, cur, int32(len(s.prompt.tokens)), t.needEmbd(), true)
		s.prompt.tokens = append(s.prompt.tokens, cur)
		if doCkpt && isUserStart(len(s.prompt.tokens)) {
			pos := len(s.prompt.tokens)
			if c := cps(); pos == lastUser || len(c) == 0 || int64(pos) > c[len(c)-1].nTokens+int64(e.p.checkpointMinStep) {
				break
			}
		}
		if doCkpt {
			for _, offset := range []int{4 + nUBatch, 4} {
				if len(t.tokens) == len(s.prompt.tokens)+min(nBatch, offset) {
					break fill
				}
			}
		}
	}
	nCur := len(b.toks) - nPrev
	nStart := len(s.prompt.tokens) - nCur
	nearEnd := len(t.tokens) < len(s.prompt.tokens)+nUBatch
	if len(s.prompt.tokens) == len(t.tokens) {
		s.state = slotDonePrompt
		b.toks[len(b.toks)-1].output = true
		s.stats.nGen = 0
		s.iBatch = len(b.toks) - 1
		s.initSampler()
	} else if !isUserStart(nStart) && !nearEnd {
		doCkpt = false
	}
	posMin, posMax := e.ctx.SeqPosMin(int32(s.id)), e.ctx.SeqPosMax(int32(s.id))
	if doCkpt && posMin < 0 {
		doCkpt = false
	}
	if c := cps(); doCkpt && !(len(c) == 0 || nStart == lastUser || nearEnd || int64(nStart) > c[len(c)-1].nTokens+int64(e.p.checkpointMinStep)) {
		doCkpt = false
	}
	if doCkpt {
		e.createCheckpoint(s, nCur, posMin, posMax)
	}
	return nil
}

// postDecode is post_decode for a decoded view (only: of that slot
// alone): progress events, then each slot whose output is in the view
// sampled (or its embeddings sent).
func (e *Engine) postDecode(v view, only *slot) {
	nowUS := e.now()
	for _, i := range v.idx {
		t := &e.batch.toks[i]
		if s := e.slots[t.slot]; t.isPrompt && s.stats.isSet() && s.task == t.task {
			s.stats.nPromptProcessed++
			s.stats.tPromptLast = nowUS
		}
	}
	for _, s := range e.slots {
		if only != nil && s != only {
			continue
		}
		if s.state == slotProcessingPrompt || s.state == slotDonePrompt {
			if s.task.opts.Stream && s.task.opts.ReturnProgress {
				e.sendPartial(s, nil, true, false)
			}
		}
		if !v.has(s.iBatch) || !s.processing() {
			continue
		}
		row := v.row[s.iBatch]
		if s.state == slotDonePrompt {
			switch s.task.kind {
			case taskEmbedding:
				e.sendEmbedding(s, v)
				e.release(s)
				s.iBatch = -1
				continue
			case taskRerank:
				e.sendRerank(s, v)
				e.release(s)
				s.iBatch = -1
				continue
			}
			s.state = slotGenerating
		} else if s.state != slotGenerating {
			continue
		}
		e.sampleNext(s, row)
	}
}

// sampleNext is post_decode's sampling of a generating slot from its
// output row: the token accepted, its text processed, the response sent
// when the generation stops.
func (e *Engine) sampleNext(s *slot, row int) {
	logits, err := e.ctx.Logits(row)
	var id int32
	if err == nil {
		id, err = s.smpl.Sample(logits)
	}
	if err == nil {
		// common_sampler_accept(smpl, id, true): the grammar takes the
		// token, or throws (a token it cannot take ends the request as
		// the pin's iterate ends it)
		err = s.smpl.Accept(id)
	}
	s.iBatch = -1
	if err != nil {
		e.sendError(s, errorf(ErrServer, "got exception: %s", exceptionText(err)))
		e.release(s)
		return
	}
	now := e.now()
	s.stats.nGen++
	if s.stats.nGen == 1 {
		s.stats.tPromptLast = now
	}
	s.stats.tGenLast = now
	res := TokenOutput{ID: id, Text: e.piece(id, e.acceptSpecial(s, id)), Prob: 1}
	if s.task.opts.Sampling.NProbs > 0 {
		e.populateProbs(s, &res, logits)
	}
	if !e.processToken(&res, s) {
		e.sendFinal(s)
		e.release(s)
	}
}

// sendEmbedding is send_embedding: the sequence's pooled embedding,
// normalized, or each of its tokens' (pooling none).
func (e *Engine) sendEmbedding(s *slot, v view) {
	res := &Embedding{NTokens: len(s.task.tokens)}
	n := e.info.NEmbdOut
	for _, i := range v.idx {
		t := &e.batch.toks[i]
		if !t.output || t.slot != s.id {
			continue
		}
		var embd []float32
		var err error
		if e.info.Pooling == poolingNone {
			embd, err = e.ctx.EmbeddingsIth(v.row[i])
		} else {
			embd, err = e.ctx.Embeddings(int32(s.id))
		}
		if err != nil {
			res.Vectors = append(res.Vectors, make([]float32, n))
			continue
		}
		if e.info.Pooling != poolingNone {
			res.Vectors = append(res.Vectors, normalize(embd, s.task.opts.EmbdNormalize))
			break
		}
		res.Vectors = append(res.Vectors, embd)
	}
	s.task.out.send(res)
}

// sendRerank is send_rerank: the rank pooling's first output.
func (e *Engine) sendRerank(s *slot, v view) {
	score := float32(-1e6)
	for _, i := range v.idx {
		t := &e.batch.toks[i]
		if !t.output || t.slot != s.id {
			continue
		}
		embd, err := e.ctx.Embeddings(int32(s.id))
		if err != nil {
			embd, err = e.ctx.EmbeddingsIth(v.row[i])
		}
		if err != nil || len(embd) == 0 {
			score = -1e6
			continue
		}
		score = embd[0]
	}
	s.task.out.send(score)
}

// normalize is common_embd_normalize.
func normalize(in []float32, norm int) []float32 {
	sum := 0.0
	switch norm {
	case -1:
		sum = 1
	case 0:
		for _, x := range in {
			sum = max(sum, math.Abs(float64(x)))
		}
		sum /= 32760.0
	case 2:
		for _, x := range in {
			sum += float64(x * x)
		}
		sum = math.Sqrt(sum)
	default:
		for _, x := range in {
			sum += math.Pow(math.Abs(float64(x)), float64(norm))
		}
		sum = math.Pow(sum, 1/float64(norm))
	}
	scale := float32(0)
	if sum > 0 {
		scale = float32(1 / sum)
	}
	out := make([]float32, len(in))
	for i, x := range in {
		out[i] = x * scale
	}
	return out
}
