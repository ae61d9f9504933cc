package pool

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/ggload/ggload/loader"
	"github.com/ggload/ggload/serve"
)

// ErrRunning: Load of a model that is already resident or loading.
var ErrRunning = errors.New("model is already running")

// errUnloaded ends a load that Unload (or a reload) stopped.
var errUnloaded = errors.New("unloaded while it loaded")

// Lease is one request's use of a loaded model: the model stays resident
// (it is never evicted nor unloaded for idleness) until Release. A lease
// is released once; Release after an Unload that ended the model's
// requests does nothing.
type Lease struct {
	p     *Pool
	m     *model
	gen   uint64
	e     *serve.Engine
	lm    *loader.Model
	opts  Options
	stamp []fileTimes
	once  sync.Once
}

// Engine is the model's engine.
func (l *Lease) Engine() *serve.Engine { return l.e }

// Model is the loaded model (its plan, its file's metadata).
func (l *Lease) Model() *loader.Model { return l.lm }

// Name is the model's name (the request may have used an alias).
func (l *Lease) Name() string { return l.m.name }

// Options are the model's options (its path, aliases, tags, Extra).
func (l *Lease) Options() Options { return l.opts }

// Release ends the request's use of the model.
func (l *Lease) Release() {
	l.once.Do(func() {
		p, m := l.p, l.m
		p.mu.Lock()
		defer p.mu.Unlock()
		if m.gen != l.gen || m.refs == 0 {
			return // (the model was unloaded under the request)
		}
		m.refs--
		m.lastUsed = time.Now()
		if m.refs == 0 {
			if m.draining && m.st == stLoaded {
				p.unloadAsyncLocked(m, stUnloaded)
			} else {
				p.armIdleLocked(m)
			}
		}
		p.notifyLocked()
	})
}

// Acquire is a lease on the model of a name or alias: at once where it
// is resident; else, with autoload, once it is loaded (the load that one
// request starts serves every request that waits for it); else
// ErrNotLoaded. A load that does not fit waits for room (see
// Params.MaxWait) within ctx; its failure is the error of every request
// that waited for it.
func (p *Pool) Acquire(ctx context.Context, name string, autoload bool) (*Lease, error) {
	p.mu.Lock()
	var seen *job // the load this request waits for
	for {
		m, err := p.lookupLocked(name)
		if err != nil {
			p.mu.Unlock()
			return nil, err
		}
		if seen != nil && seen.finished() {
			if err := seen.err; err != nil && !errors.Is(err, errNobodyWaits) {
				p.mu.Unlock()
				return nil, err
			}
			seen = nil
		}
		if !autoload && (m.st != stLoaded || m.draining) {
			p.mu.Unlock()
			return nil, fmt.Errorf("model '%s': %w", m.name, ErrNotLoaded)
		}
		switch m.st {
		case stLoaded:
			if m.draining {
				break
			}
			l := p.leaseLocked(m)
			p.mu.Unlock()
			err := m.checkFiles(l)
			if err == nil {
				return l, nil
			}
			p.mu.Lock()
			p.staleLocked(m, l, err)
			continue
		case stUnloaded, stSleeping:
			p.startJobLocked(m, false)
		}
		if m.job != nil {
			seen = m.job
		}
		ch := p.changed
		m.waiting++
		p.mu.Unlock()
		select {
		case <-ch:
		case <-ctx.Done():
		}
		p.mu.Lock()
		m.waiting--
		if ctx.Err() != nil {
			if j := m.job; m.waiting == 0 && j != nil && !j.detached {
				j.stopAdmitting(errNobodyWaits)
			}
			p.notifyLocked()
			p.mu.Unlock()
			return nil, fmt.Errorf("request cancelled while waiting for model name=%s: %w", m.name, ctx.Err())
		}
	}
}

// leaseLocked takes a lease on the resident model m.
func (p *Pool) leaseLocked(m *model) *Lease {
	m.refs++
	m.useSeq++
	m.lastUsed = time.Now()
	if m.timer != nil {
		m.timer.Stop()
		m.timer = nil
	}
	return &Lease{p: p, m: m, gen: m.gen, e: m.e, lm: m.lm, opts: m.opts, stamp: m.stamp}
}

// staleLocked gives back the lease of a model whose file changed: the
// model drains and unloads, and the next load reads the file anew.
func (p *Pool) staleLocked(m *model, l *Lease, err error) {
	p.log.Warn("pool: model file changed; unloading it", "model", m.name, "err", err)
	if m.gen == l.gen && m.refs > 0 {
		m.refs--
	}
	if m.st == stLoaded && m.gen == l.gen {
		m.draining, m.stale = true, fmt.Errorf("model '%s' unloads: %w", m.name, err)
		if m.refs == 0 {
			p.unloadAsyncLocked(m, stUnloaded)
		}
	}
	p.notifyLocked()
}

// Load loads the model of a name (the router's /models/load) and waits
// for it within ctx; the load goes on when ctx ends first. A resident
// model is ErrRunning.
func (p *Pool) Load(ctx context.Context, name string) error {
	p.mu.Lock()
	m, err := p.lookupLocked(name)
	if err != nil {
		p.mu.Unlock()
		return err
	}
	switch m.st {
	case stLoaded, stUnloading:
		p.mu.Unlock()
		return fmt.Errorf("model '%s': %w", m.name, ErrRunning)
	case stUnloaded, stSleeping:
		p.startJobLocked(m, true)
	}
	j := m.job
	p.mu.Unlock()
	select {
	case <-j.done:
		return j.err
	case <-ctx.Done():
		return ctx.Err()
	}
}

// Unload unloads the model of a name (the router's /models/unload): a
// load in progress is stopped; a resident model takes no new requests,
// and its requests have StopTimeout to finish before they are ended
// (serve.ErrClosed). It returns once the model's memory is freed, or ctx
// ends (the model then unloads when its requests end).
func (p *Pool) Unload(ctx context.Context, name string) error {
	p.mu.Lock()
	m, err := p.lookupLocked(name)
	p.mu.Unlock()
	if err != nil {
		return err
	}
	return p.unload(ctx, m)
}

func (p *Pool) unload(ctx context.Context, m *model) error {
	p.mu.Lock()
	switch m.st {
	case stUnloaded, stSleeping:
		p.mu.Unlock()
		return fmt.Errorf("model '%s': %w", m.name, ErrNotLoaded)
	case stAdmitting, stLoading:
		j := m.job
		j.cancelWith(errUnloaded)
		p.mu.Unlock()
		select {
		case <-j.done:
			return nil
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	if m.st == stLoaded && !m.draining {
		m.draining = true
		if m.refs == 0 {
			p.unloadAsyncLocked(m, stUnloaded)
		}
		p.notifyLocked()
	}
	deadline := time.NewTimer(p.p.StopTimeout)
	defer deadline.Stop()
	for m.st == stLoaded || m.st == stUnloading {
		ch := p.changed
		p.mu.Unlock()
		select {
		case <-ch:
		case <-ctx.Done():
			return ctx.Err()
		case <-deadline.C:
			p.mu.Lock()
			if m.st == stLoaded {
				p.log.Warn("pool: requests still running after the stop timeout; ending them", "model", m.name, "requests", m.refs)
				p.unloadAsyncLocked(m, stUnloaded)
			}
			p.mu.Unlock()
		}
		p.mu.Lock()
	}
	p.mu.Unlock()
	return nil
}

// unloadAsyncLocked starts the unload of a resident model on a goroutine
// of its own.
func (p *Pool) unloadAsyncLocked(m *model, to state) {
	free := p.startUnloadLocked(m, to)
	p.wg.Add(1)
	go func() {
		defer p.wg.Done()
		free()
	}()
}

// startUnloadLocked marks a resident model unloading and returns what
// frees it (run without p.mu): its engine (its requests end with
// serve.ErrClosed), its weights, its file.
func (p *Pool) startUnloadLocked(m *model, to state) func() {
	m.st = stUnloading
	if m.timer != nil {
		m.timer.Stop()
		m.timer = nil
	}
	e, lm, gm := m.e, m.lm, m.gm
	return func() {
		if e != nil {
			e.Close()
		}
		if lm != nil {
			lm.Close()
		}
		if gm != nil {
			gm.Close()
		}
		p.mu.Lock()
		m.e, m.lm, m.gm, m.res, m.stamp = nil, nil, nil, nil, nil
		m.refs, m.gen, m.draining, m.st = 0, 0, false, to
		delete(p.leaving, m)
		if m.stale != nil {
			m.err, m.stale = m.stale, nil
		}
		p.log.Info("pool: unloaded", "model", m.name, "status", to.status())
		p.notifyLocked()
		p.emitLocked(Event{Model: m.name, Status: to.status(), Err: m.err})
		p.mu.Unlock()
	}
}

// armIdleLocked starts the timer that unloads an idle model after its
// keep-alive (Options.KeepAlive, else Params.SleepIdle).
func (p *Pool) armIdleLocked(m *model) {
	ka := m.opts.KeepAlive
	if ka == 0 {
		ka = p.p.SleepIdle
	}
	if ka <= 0 || m.opts.Pin || p.closed || m.st != stLoaded {
		return
	}
	if m.timer != nil {
		m.timer.Stop()
	}
	seq, gen := m.useSeq, m.gen
	m.timer = time.AfterFunc(ka, func() {
		p.mu.Lock()
		if p.closed || m.st != stLoaded || m.gen != gen || m.useSeq != seq || m.refs > 0 || m.waiting > 0 {
			p.mu.Unlock()
			return
		}
		p.log.Info("pool: idle; unloading", "model", m.name, "after", ka)
		p.unloadAsyncLocked(m, stSleeping)
		p.mu.Unlock()
	})
}
