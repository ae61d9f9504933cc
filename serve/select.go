// Port of llama.cpp tools/server/server-context.cpp (get_available_slot)
// (v0.5.0).

package serve

// availableSlot is get_available_slot: the slot asked for, else the idle
// slot whose cached prompt shares the most of the new one (above
// --slot-prompt-similarity), else the least recently used idle one; nil
// when none is idle. A completion that would lose most of the chosen
// slot's prompt saves it to the prompt cache first, and takes the cached
// prompt that serves it best.
func (e *Engine) availableSlot(t *task) *slot {
	var ret *slot
	update := false
	if t.opts.IDSlot != -1 {
		ret = e.slotByID(t.opts.IDSlot)
	}
	if sim := e.p.slotSimilarity; sim != 0 {
		best := float32(0)
		for _, s := range e.slots {
			if t.opts.IDSlot != -1 && s.id != t.opts.IDSlot {
				continue
			}
			if s.processing() || len(s.prompt.tokens) == 0 {
				continue
			}
			lcp := commonPrefix(s.prompt.tokens, t.tokens)
			cur := float32(lcp) / float32(len(t.tokens))
			if cur > best && cur > sim {
				best, ret = cur, s
			}
		}
		if ret != nil {
			keep := (best * float32(len(t.tokens))) / float32(len(ret.prompt.tokens))
			if keep < 0.5 {
				update = true
			}
		}
	}
	if ret == nil {
		last := int64(-1)
		for _, s := range e.slots {
			if s.processing() {
				continue
			}
			if ret == nil || s.tLastUsed <= last {
				last, ret = s.tLastUsed, s
			}
		}
		if ret != nil {
			update = true
		}
	}
	// (the pin goes on with a slot asked for by id that is processing,
	// and would restore a cached prompt into its running sequence: that
	// slot is left alone, the task waits for it)
	if ret != nil && !ret.processing() && update && e.cache != nil && t.kind == taskCompletion {
		e.promptSave(ret)
		if !e.promptLoad(ret, t.tokens) {
			e.promptClear(ret)
		}
		e.cacheUpdate()
	}
	return ret
}
