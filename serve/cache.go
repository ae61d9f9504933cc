// Port of llama.cpp tools/server/server-task.cpp (server_prompt_cache),
// tools/server/server-context.cpp (server_slot::prompt_save,
// prompt_load, prompt_clear, create_checkpoint) and common/common.cpp
// (common_prompt_checkpoint) (v0.5.0).

package serve

import (
	"github.com/ggload/ggload/infer"
)

// checkpoint is a common_prompt_checkpoint: the part of a sequence's
// memory that cannot be rolled back (infer.StatePartialOnly), when the
// slot's prompt held nTokens tokens.
type checkpoint struct {
	nTokens        int64
	idTask         int
	posMin, posMax int32
	data           []byte
}

func (c *checkpoint) size() int { return len(c.data) }

// cachedPrompt is a server_prompt_cache_state: a prompt, its checkpoints
// and its sequence's state.
type cachedPrompt struct {
	prompt prompt
	data   []byte
}

func (c *cachedPrompt) size() uint64 {
	n := uint64(len(c.data))
	for i := range c.prompt.checkpoints {
		n += uint64(c.prompt.checkpoints[i].size())
	}
	return n
}

// promptCache is server_prompt_cache: prompts kept in host memory, the
// oldest first, within a size (and a token count) limit.
type promptCache struct {
	states      []*cachedPrompt
	limitSize   uint64 // bytes; 0: no limit
	limitTokens int    // 0: no limit
}

func newPromptCache(limitMiB, limitTokens int) *promptCache {
	c := &promptCache{limitTokens: limitTokens}
	if limitMiB > 0 {
		c.limitSize = uint64(limitMiB) << 20
	}
	return c
}

func (c *promptCache) size() uint64 {
	n := uint64(0)
	for _, s := range c.states {
		n += s.size()
	}
	return n
}

func (c *promptCache) nTokens() int {
	n := 0
	for _, s := range c.states {
		n += len(s.prompt.tokens)
	}
	return n
}

// alloc is server_prompt_cache::alloc: room for a new state of the
// prompt (nil where the prompt is already cached, or bigger than the
// limit), the prompts it contains dropped, the oldest made room from.
func (c *promptCache) alloc(p *prompt, stateSize int) *cachedPrompt {
	for _, s := range c.states {
		if commonPrefix(s.prompt.tokens, p.tokens) == len(p.tokens) {
			return nil // (already in the cache)
		}
	}
	ckpt := uint64(0)
	for i := range p.checkpoints {
		ckpt += uint64(p.checkpoints[i].size())
	}
	sizeNew := uint64(stateSize) + ckpt
	if c.limitSize > 0 && sizeNew > c.limitSize {
		return nil
	}
	kept := c.states[:0]
	for _, s := range c.states {
		if commonPrefix(s.prompt.tokens, p.tokens) != len(s.prompt.tokens) {
			kept = append(kept, s)
		}
	}
	c.states = kept
	if c.limitSize > 0 {
		for len(c.states) > 0 && c.size()+sizeNew > c.limitSize {
			c.states = c.states[1:]
		}
	}
	s := &cachedPrompt{prompt: p.clone()}
	c.states = append(c.states, s)
	return s
}

// update is server_prompt_cache::update: the oldest prompts dropped
// past the size limit, then past the token limit (raised to what the
// size limit holds at the cache's bytes per token).
func (c *promptCache) update() {
	if c.limitSize > 0 {
		for len(c.states) > 0 && c.size() > c.limitSize {
			c.states = c.states[1:]
		}
	}
	perToken := max(float32(1), float32(c.size())/float32(max(1, c.nTokens())))
	limit := c.limitTokens
	if c.limitSize > 0 {
		limit = max(c.limitTokens, int(float32(c.limitSize)/perToken))
	}
	if c.limitTokens > 0 {
		for len(c.states) > 0 && c.nTokens() > limit {
			c.states = c.states[1:]
		}
	}
}

// cacheUpdate is prompt_cache->update(), and the cache's bytes noted.
func (e *Engine) cacheUpdate() {
	e.cache.update()
	e.cacheBytes.Store(int64(e.cache.size()))
}

// promptSave is server_slot::prompt_save: the slot's prompt and its
// sequence's state into the cache; false where nothing was saved.
func (e *Engine) promptSave(s *slot) bool {
	if len(s.prompt.tokens) == 0 || e.cache == nil {
		return false
	}
	size, err := e.ctx.SeqStateSize(int32(s.id), 0)
	if err != nil {
		return false
	}
	cur := e.cache.alloc(&s.prompt, size)
	if cur == nil {
		return false
	}
	if cur.data, err = e.ctx.SeqState(int32(s.id), 0); err != nil {
		e.cache.states = e.cache.states[:len(e.cache.states)-1]
		return false
	}
	e.cacheBytes.Store(int64(e.cache.size()))
	return true
}

// promptLoad is server_prompt_cache::load for the slot: the cached
// prompt that keeps the most of both the slot's and the new prompt
// restored in its place (the slot's own kept where none does better);
// false where a restore failed.
func (e *Engine) promptLoad(s *slot, tokens []int32) bool {
	c := e.cache
	lcpBest := commonPrefix(s.prompt.tokens, tokens)
	fKeepBest := float32(-1)
	if len(s.prompt.tokens) > 0 {
		fKeepBest = float32(lcpBest) / float32(len(s.prompt.tokens))
	}
	fSimBest := float32(lcpBest) / float32(len(tokens))
	best := -1
	for i, st := range c.states {
		lcp := commonPrefix(st.prompt.tokens, tokens)
		fKeep := float32(lcp) / float32(len(st.prompt.tokens))
		fSim := float32(lcp) / float32(len(tokens))
		if fKeep < 0.25 {
			continue
		}
		if fKeepBest < fKeep && fSimBest < fSim {
			fKeepBest, fSimBest, best = fKeep, fSim, i
		}
	}
	if best < 0 {
		return true
	}
	st := c.states[best]
	if n, err := e.ctx.SetSeqState(int32(s.id), st.data, 0); err != nil || n != len(st.data) {
		return false
	}
	s.prompt = st.prompt
	c.states = append(c.states[:best], c.states[best+1:]...)
	e.cacheBytes.Store(int64(c.size()))
	return true
}

// promptClear is server_slot::prompt_clear: the slot's sequence removed
// from the memory, its prompt forgotten.
func (e *Engine) promptClear(s *slot) {
	_ = e.ctx.SeqRm(int32(s.id), -1, -1) // (a whole sequence always goes)
	s.prompt.clear()
}

// createCheckpoint is create_checkpoint: before the batch that adds
// nTokensCur tokens to the slot, a checkpoint of its partial state at
// positions [posMin, posMax], the slot's list kept within
// --ctx-checkpoints (spaced by --checkpoint-min-step when full).
func (e *Engine) createCheckpoint(s *slot, nTokensCur int, posMin, posMax int32) {
	idTask := s.task.id
	nMax := e.p.nCtxCheckpoints
	cps := s.prompt.checkpoints
	last := int64(-1)
	for i := 0; len(cps)+1 >= nMax && i < len(cps); {
		if c := cps[i]; c.idTask != idTask && last >= 0 && c.nTokens <= last+int64(e.p.checkpointMinStep) {
			cps = append(cps[:i], cps[i+1:]...)
			continue
		}
		last = cps[i].nTokens
		i++
	}
	for len(cps) >= nMax && len(cps) > 0 {
		cps = cps[1:]
	}
	nNew := int64(len(s.prompt.tokens) - nTokensCur)
	kept := cps[:0]
	for _, c := range cps {
		if c.nTokens != nNew {
			kept = append(kept, c)
		}
	}
	cps = kept
	data, err := e.ctx.SeqState(int32(s.id), infer.StatePartialOnly)
	if err != nil {
		s.prompt.checkpoints = cps
		return
	}
	s.prompt.checkpoints = append(cps, checkpoint{nTokens: nNew, idTask: idTask, posMin: posMin, posMax: posMax, data: data})
}
