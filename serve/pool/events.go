package pool

import (
	"context"
	"time"
)

// Event is a change of the pool, as the router's /models/sse tells it:
// a model's new status ("status_change"), or the catalog read again
// (Reload: "models_reload", Model "*").
type Event struct {
	Model  string
	Status Status
	// Err is why a load failed (Status Unloaded) or was refused.
	Err error
	// Removed: the model left the catalog.
	Removed bool
	Reload  bool
	// Dropped is how many events before this one the subscriber lost
	// (it did not keep up).
	Dropped int
	Time    time.Time
}

// maxQueued bounds the events a subscriber has not taken yet; past it
// the oldest are dropped (and the next event says how many).
const maxQueued = 4096

type subscriber struct {
	queue   []Event
	dropped int
	wake    chan struct{} // (buffered: one wake-up pending at most)
}

// Subscribe delivers the pool's events, in order, on a channel that is
// closed when ctx is done or the pool closes. A subscriber that does not
// keep up loses the oldest events past a few thousand, never blocks the
// pool.
func (p *Pool) Subscribe(ctx context.Context) <-chan Event {
	out := make(chan Event)
	s := &subscriber{wake: make(chan struct{}, 1)}
	p.mu.Lock()
	if p.closed {
		p.mu.Unlock()
		close(out)
		return out
	}
	p.subs[s] = struct{}{}
	p.wg.Add(1)
	p.mu.Unlock()
	go func() {
		defer p.wg.Done()
		defer close(out)
		defer func() {
			p.mu.Lock()
			delete(p.subs, s)
			p.mu.Unlock()
		}()
		for {
			select {
			case <-s.wake:
			case <-ctx.Done():
				return
			case <-p.ctx.Done():
				return
			}
			p.mu.Lock()
			q := s.queue
			s.queue = nil
			if len(q) > 0 {
				q[0].Dropped, s.dropped = s.dropped, 0
			}
			p.mu.Unlock()
			for _, ev := range q {
				select {
				case out <- ev:
				case <-ctx.Done():
					return
				case <-p.ctx.Done():
					return
				}
			}
		}
	}()
	return out
}

// emitLocked queues ev for every subscriber.
func (p *Pool) emitLocked(ev Event) {
	ev.Time = time.Now()
	for s := range p.subs {
		if len(s.queue) >= maxQueued {
			s.queue = s.queue[1:]
			s.dropped++
		}
		s.queue = append(s.queue, ev)
		select {
		case s.wake <- struct{}{}:
		default:
		}
	}
}
