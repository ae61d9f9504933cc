package pool

import (
	"context"
	"slices"
	"time"
)

// heldLocked is what the models other than except hold on account i
// (those with keep, where keep is not nil): reserved while they load,
// allocated while resident, until their unload has freed it.
func (p *Pool) heldLocked(i int, except *model, keep func(*model) bool) uint64 {
	n := uint64(0)
	for _, m := range p.allLocked() {
		if m == except || m.res == nil || keep != nil && !keep(m) {
			continue
		}
		n += m.res[i]
	}
	return n
}

// allLocked are the models that may hold memory: the catalog's, and
// those taken out of it whose unload has not finished.
func (p *Pool) allLocked() []*model {
	out := make([]*model, 0, len(p.models))
	for _, m := range p.models {
		out = append(out, m)
	}
	for m := range p.leaving {
		out = append(out, m)
	}
	return out
}

// evictable says whether m can be unloaded for another model's room:
// resident, idle, nobody waiting for it, not pinned.
func (m *model) evictable() bool {
	return m.st == stLoaded && m.refs == 0 && m.waiting == 0 && !m.opts.Pin && !m.draining
}

// running says whether m counts against --models-max: loading (room
// reserved) or resident.
func (m *model) running() bool { return m.st == stLoading || m.st == stLoaded }

// unknownFree marks a device that reports no free memory: its budget
// alone bounds what the pool gives.
const unknownFree = ^uint64(0)

// measureLive reads the free memory each device (not the host) reports
// now; the host's, and a device that reports none, are unknownFree.
func (p *Pool) measureLive() []uint64 {
	free := make([]uint64, len(p.ledger))
	for i, a := range p.ledger {
		free[i] = unknownFree
		if a.live {
			if f, t := a.dev.Memory(); f != 0 || t != 0 {
				free[i] = f
			}
		}
	}
	return free
}

// roomLocked is what account i can give m now: its budget less what the
// others hold, and no more than the device reports free less what the
// loads in flight at the measure (measured at when) may not have
// allocated yet.
func (p *Pool) roomLocked(i int, m *model, free []uint64, when time.Time) uint64 {
	room := sub(p.ledger[i].budget, p.heldLocked(i, m, nil))
	if free[i] != unknownFree {
		pending := p.heldLocked(i, m, func(o *model) bool {
			return o.st == stLoading || o.st == stLoaded && !o.doneAt.Before(when)
		})
		room = min(room, sub(free[i], pending))
	}
	return room
}

// shortLocked lists the accounts where m's need exceeds the room, and
// whether --models-max is reached by the others.
func (p *Pool) shortLocked(m *model, need, free []uint64, when time.Time) (short []int, full bool) {
	for i := range p.ledger {
		if need[i] > 0 && need[i] > p.roomLocked(i, m, free, when) {
			short = append(short, i)
		}
	}
	if p.p.ModelsMax > 0 {
		n := 0
		for _, o := range p.allLocked() {
			if o != m && o.running() {
				n++
			}
		}
		full = n >= p.p.ModelsMax
	}
	return short, full
}

// victimsLocked are the idle models to evict, least recently used first,
// so that m fits: only models that hold memory where m lacks it (or any,
// for the count), and none at all where evicting every such model would
// not be enough (then m waits for busy ones, or is refused).
func (p *Pool) victimsLocked(m *model, need, free []uint64, when time.Time, short []int, full bool) []*model {
	var cands []*model
	for _, o := range p.allLocked() {
		if o == m || !o.evictable() {
			continue
		}
		helps := full
		for _, i := range short {
			helps = helps || o.res[i] > 0
		}
		if helps {
			cands = append(cands, o)
		}
	}
	slices.SortFunc(cands, func(a, b *model) int { return a.lastUsed.Compare(b.lastUsed) })
	freed := make([]uint64, len(p.ledger))
	var out []*model
	for _, o := range cands {
		if p.fitsWith(m, need, free, when, short, freed) && (!full || len(out) > 0) {
			break
		}
		out = append(out, o)
		for i := range freed {
			freed[i] += o.res[i]
		}
	}
	if !p.fitsWith(m, need, free, when, short, freed) || full && len(out) == 0 {
		return nil
	}
	return out
}

// fitsWith says whether m fits once the memory freed is freed.
func (p *Pool) fitsWith(m *model, need, free []uint64, when time.Time, short []int, freed []uint64) bool {
	for _, i := range short {
		if need[i] > p.roomLocked(i, m, free, when)+freed[i] {
			return false
		}
	}
	return true
}

// aloneLocked says whether m cannot fit whatever is evicted: its need
// exceeds a budget less what pinned models hold, or pinned models alone
// reach --models-max.
func (p *Pool) aloneLocked(m *model, need []uint64) bool {
	pinned := func(o *model) bool { return o.opts.Pin }
	for i, a := range p.ledger {
		if need[i] > sub(a.budget, p.heldLocked(i, m, pinned)) {
			return true
		}
	}
	if p.p.ModelsMax > 0 {
		n := 0
		for _, o := range p.allLocked() {
			if o != m && o.running() && o.opts.Pin {
				n++
			}
		}
		return n >= p.p.ModelsMax
	}
	return false
}

// roomErrorLocked says why m does not fit.
func (p *Pool) roomErrorLocked(m *model, need, free []uint64, when time.Time, short []int, full, alone, waited bool) *RoomError {
	e := &RoomError{Model: m.name, Alone: alone, Waited: waited}
	pinned := func(o *model) bool { return o.opts.Pin }
	busy := func(o *model) bool { return !o.opts.Pin && !o.evictable() }
	for _, i := range short {
		a := p.ledger[i]
		s := Shortage{Device: a.name, Need: need[i], Room: p.roomLocked(i, m, free, when), Budget: a.budget, Held: p.heldLocked(i, m, nil),
			Pinned: p.heldLocked(i, m, pinned), Busy: p.heldLocked(i, m, busy)}
		if free[i] != unknownFree {
			s.Free = free[i]
		}
		e.Short = append(e.Short, s)
	}
	if full {
		e.Max = p.p.ModelsMax
	}
	return e
}

// recheckLive is how often a load that waits for a device's own free
// memory (others use the device) looks again: no event of the pool
// tells it.
const recheckLive = time.Second

// admit waits until m fits (evicting idle models, least recently used
// first, for its room), then reserves its need: from then on the room is
// the model's. It fails with a *RoomError where m cannot fit, or still
// does not when the wait ends (Params.MaxWait), or with the job's cause
// where the job is stopped.
func (p *Pool) admit(j *job, m *model, need []uint64) error {
	var until time.Time
	for {
		free := p.measureLive()
		when := time.Now()
		p.mu.Lock()
		if j.actx.Err() != nil {
			p.mu.Unlock()
			return context.Cause(j.actx)
		}
		short, full := p.shortLocked(m, need, free, when)
		if len(short) == 0 && !full {
			m.res, m.planned, m.st = need, need, stLoading
			j.admitting = false
			p.notifyLocked()
			p.mu.Unlock()
			return nil
		}
		if victims := p.victimsLocked(m, need, free, when, short, full); victims != nil {
			var frees []func()
			for _, v := range victims {
				p.log.Info("pool: evicting the least recently used idle model", "model", v.name, "for", m.name, "idle", time.Since(v.lastUsed))
				frees = append(frees, p.startUnloadLocked(v, stUnloaded))
			}
			p.mu.Unlock()
			for _, f := range frees {
				f()
			}
			continue
		}
		alone := p.aloneLocked(m, need)
		now := time.Now()
		if until.IsZero() && p.p.MaxWait > 0 {
			until = now.Add(p.p.MaxWait)
		}
		if alone || p.p.MaxWait < 0 || !now.Before(until) {
			e := p.roomErrorLocked(m, need, free, when, short, full, alone, !alone && p.p.MaxWait > 0)
			p.log.Warn("pool: refused", "model", m.name, "err", e)
			p.mu.Unlock()
			return e
		}
		ch := p.changed
		p.mu.Unlock()
		t := time.NewTimer(min(until.Sub(now), recheckLive))
		select {
		case <-ch:
		case <-j.actx.Done():
		case <-t.C:
		}
		t.Stop()
	}
}
