package loader

import (
	"fmt"
	"log/slog"
	"sync"

	"github.com/ggload/ggload/ggml"
	"github.com/ggload/ggload/gguf"
	"github.com/ggload/ggload/loader/internal/hashindex"
	"github.com/ggload/ggload/place"
)

// Tensors bound for an RPC server behind ggml's guard are sent by the guard
// itself (ggml.Device.SendRPC), from the lane's bounce buffer: the
// requests the native client would make, without its copies. For a weight
// above 10 MiB, which the client would hash and ask of the server's file
// cache before sending, the hash is worked out on another goroutine while
// the lane reads the next tensor, or taken from the hash index
// (package hashindex) of an earlier load. A tensor whose hash the lane knows is
// asked of the server's cache where the lane comes to it, and the lane goes
// on without waiting for the answer (rpcAsks): the server reads its cache
// while the bytes of the tensors after it are on the wire, and a hit is a
// tensor neither read nor sent. At most rpcInFlight tensors of a lane are
// on their way at once, each in a bounce buffer of its own.

// rpcInFlight is how many of a lane's tensors may be queued to servers at
// once (the memory of the native queue: one bounce buffer and two
// messages).
const rpcInFlight = 3

// rpcFlight is a tensor queued to a server.
type rpcFlight struct {
	t      task
	mem    []byte // the bounce buffer
	buf    []byte // the tensor in it
	done   chan rpcDone
	hashed chan struct{} // closed once hash is set; nil when not hashed here
	hash   uint64
	fh     *hashindex.Index
	key    hashindex.Key
}

type rpcDone struct {
	hit bool
	err error
}

// rpcHashes are a load's hash indexes, one per file, opened on first use
// (nil for a file that has none).
type rpcHashes struct {
	mu    sync.Mutex
	files map[int]*hashindex.Index
}

// hashesFor is the index of the load's file i; nil when it has none (no
// local file, or the index is off).
func (l *load) hashesFor(i int) *hashindex.Index {
	h := &l.hashes
	h.mu.Lock()
	defer h.mu.Unlock()
	if fh, ok := h.files[i]; ok {
		return fh
	}
	if h.files == nil {
		h.files = map[int]*hashindex.Index{}
	}
	var fh *hashindex.Index
	if dir, f := hashindex.Dir(l.o.HashIndex), l.model.files[i]; dir != "" && f.f != nil {
		fh = hashindex.Open(dir, f.f, f.scattered())
	}
	h.files[i] = fh
	return fh
}

// save writes what the load added to the indexes; a failure is logged (the
// index is a cache).
func (h *rpcHashes) save(log *slog.Logger) {
	h.mu.Lock()
	defer h.mu.Unlock()
	for _, fh := range h.files {
		if err := fh.Save(); err != nil {
			log.Warn("the RPC hash index is not saved", "dir", fh.Dir(), "err", err)
		}
	}
}

// probes reports whether the client would ask the server's cache for t
// first: a weight buffer's tensor above the hash threshold.
func probes(t task) bool {
	return t.w.Size > ggml.RPCHashThreshold && t.pl.Buffer.Buffer.Usage() == ggml.UsageWeights
}

// markLeft marks the files whose tensors the load may leave unread
// (modelFile.leaves), before it maps or reads any of them: weights the RPC
// servers' caches may set. Read through a descriptor with readahead, or
// faulted into a mapping, the tensors before such a weight would bring its
// bytes in, up to two readahead windows of them (16–32 MiB on most
// disks), for nothing.
func (l *load) markLeft() {
	for i := range l.p.Tensors {
		tp := &l.p.Tensors[i]
		if tp.Weight == nil || tp.Device == nil || tp.Shared {
			continue
		}
		if f := l.model.files[tp.Weight.File]; f.local() && !f.leaves && l.mayLeave(tp) {
			f.leaves = true
		}
	}
}

// mayLeave reports whether the load may leave tp unread: a weight above
// the hash threshold bound for RPC servers through their guards whose hash
// the index knows, or a slice's, for a tensor split over servers.
func (l *load) mayLeave(tp *place.TensorPlan) bool {
	w, d := tp.Weight, tp.Device
	if w.Size <= ggml.RPCHashThreshold || tp.BufferType.IsHost() {
		return false
	}
	k := l.weightKey(w)
	switch {
	case d.SendsRPC():
		_, ok := l.hashesFor(w.File).Get(k)
		return ok
	case d.SplitsRPC():
		return l.hashesFor(w.File).Within(k)
	}
	return false
}

// rpcKey is t's range in the index of its file.
func (l *load) rpcKey(t task) hashindex.Key { return l.weightKey(t.w) }

// weightKey is w's range in the index of its file.
func (l *load) weightKey(w *gguf.Weight) hashindex.Key {
	return hashindex.Key{Off: l.model.files[w.File].base + w.Offset, Size: w.Size}
}

// knownHash is t's hash from the index of its file, if it has it.
func (l *load) knownHash(t task) (uint64, bool) {
	return l.hashesFor(t.w.File).Get(l.rpcKey(t))
}

// rpcError names t and its device in an error of sending it.
func (l *load) rpcError(t task, err error) error {
	return l.tensorError("load", t.pl.Plan, fmt.Errorf("loader: tensor '%s' to %s: %w", t.pl.Plan.Name, t.pl.Buffer.Device.Name(), err))
}

// countRPC adds to the load's RPC figures.
func (l *load) countRPC(cached, hashed uint64) {
	l.model.statsMu.Lock()
	l.model.Stats.RPCCached += cached
	l.model.Stats.RPCHashed += hashed
	l.model.statsMu.Unlock()
}

// ask asks t's server's cache for the bytes of hash h; the answer comes
// on the channel.
func (l *load) ask(t task, h uint64) (<-chan rpcDone, error) {
	done := make(chan rpcDone, 1)
	err := t.pl.Buffer.Device.SendRPC(ggml.RPCSet{Tensor: t.pl.Tensor, Size: uint64(t.w.Size), Probe: true,
		Hash: func() uint64 { return h }, Done: func(hit bool, err error) { done <- rpcDone{hit, err} }})
	if err != nil {
		return nil, l.rpcError(t, err)
	}
	return done, nil
}

// rpcAsks are a lane's questions to its servers' caches: tensors whose
// hash the index knows, asked for by it as the lane comes to them, without
// waiting for the answer. The lane goes on with the tensors after them
// while the server reads its cache (the link is not idle meanwhile), and
// takes the answers as they come: a hit is a tensor neither read nor
// sent; a miss is read and sent then, for the cache to keep.
type rpcAsks struct {
	// due are tensors to ask for, not asked yet. The questions are spread
	// over the lane's other sets, one per every bytes queued (the first at
	// once): the server then reads its cache between the sets that the
	// link brings meanwhile, rather than all questions at once while the
	// link idles (a lane staged biggest first comes to all of them first).
	due []rpcAsk
	// known are the lane's tensors to ask for: placement index → the hash
	// the index knows
	known   map[int]uint64
	every   uint64   // bytes of sets between two questions
	queued  uint64   // bytes of sets queued so far
	asked   int      // questions released
	pending []rpcAsk // asked, in the order asked
	// held are tensors whose bytes an earlier tensor of the lane was asked
	// for, by hash: they are asked once that answer is in (and, on a miss,
	// those bytes sent), as the client asks for a copy after it sent the
	// first, so that the cache can answer them
	held map[uint64][]rpcAsk
	// answered are the hashes whose first question is answered
	answered map[uint64]bool
}

// rpcAsk is a tensor asked for (done set) or held.
type rpcAsk struct {
	t    task
	src  source
	hash uint64
	done <-chan rpcDone
}

// askFor asks t's server's cache for the bytes of hash h, or holds t
// while an earlier question for the same bytes is unanswered.
func (ln *lane) askFor(a rpcAsk) error {
	as := &ln.asks
	if !as.answered[a.hash] {
		if q, ok := as.held[a.hash]; ok {
			as.held[a.hash] = append(q, a)
			return nil
		}
		if as.held == nil {
			as.held = map[uint64][]rpcAsk{}
		}
		as.held[a.hash] = nil
	}
	done, err := ln.l.ask(a.t, a.hash)
	if err != nil {
		return err
	}
	a.done = done
	as.pending = append(as.pending, a)
	return nil
}

// settleAsks takes the answers to the lane's questions in order: those in
// already, or (wait) all of them, the questions they lead to included.
func (ln *lane) settleAsks(wait bool) error {
	l, as := ln.l, &ln.asks
	for len(as.pending) > 0 {
		a := as.pending[0]
		var d rpcDone
		if wait {
			d = <-a.done
		} else {
			select {
			case d = <-a.done:
			default:
				return nil
			}
		}
		as.pending = as.pending[1:]
		if d.err != nil {
			return l.rpcError(a.t, d.err)
		}
		if d.hit {
			if err := ln.fromCache(a.t, a.src); err != nil {
				return err
			}
		} else if err := ln.sendDirect(a.t, a.src, true); err != nil {
			return err
		}
		if as.answered[a.hash] {
			continue
		}
		if as.answered == nil {
			as.answered = map[uint64]bool{}
		}
		as.answered[a.hash] = true
		held := as.held[a.hash]
		delete(as.held, a.hash)
		for _, h := range held {
			if err := ln.askFor(h); err != nil {
				return err
			}
		}
	}
	return nil
}

// fromCache counts t, which its server set from its cache: only a window
// is read, for the confirmation.
func (ln *lane) fromCache(t task, src source) error {
	q, err := ln.rpcQueueFor(t.pl.Buffer.Device)
	if err != nil {
		return err
	}
	if err := ln.sampleFrom(t, q, src); err != nil {
		return fmt.Errorf("loader: tensor '%s': %w", t.pl.Plan.Name, namingFile(err, src.file(), t.w))
	}
	ln.addDone(t.pl.Path, uint64(t.w.Size))
	ln.l.countRPC(uint64(t.w.Size), 0)
	return ln.l.progress()
}

// planAsks finds the lane's tensors to ask its server's cache for (those
// the client would probe whose hash the index knows) and spreads their
// questions over its other sets: one per every bytes of them.
func (ln *lane) planAsks() {
	as := &ln.asks
	var rest uint64
	for _, t := range ln.tasks {
		if t.w == nil || t.pl.Buffer == nil || t.pl.Buffer.Buffer.IsHost() || !t.pl.Buffer.Device.SendsRPC() {
			continue
		}
		var h uint64
		ok := false
		if probes(t) { // the index is opened only for such tensors
			h, ok = ln.l.knownHash(t)
		}
		if ok {
			if as.known == nil {
				as.known = map[int]uint64{}
			}
			as.known[t.i] = h
		} else {
			rest += uint64(t.w.Size)
		}
	}
	if len(as.known) > 0 {
		as.every = rest / uint64(len(as.known))
	}
}

// releaseAsks asks for the due tensors whose turn has come (all: every
// one).
func (ln *lane) releaseAsks(all bool) error {
	as := &ln.asks
	for len(as.due) > 0 && (all || as.asked == 0 || as.queued >= uint64(as.asked)*as.every) {
		a := as.due[0]
		as.due = as.due[1:]
		as.asked++
		if err := ln.askFor(a); err != nil {
			return err
		}
	}
	return nil
}

// rpcDirect sends task t through the guard of its RPC device: a weight
// whose hash the index knows is asked of the server's cache in its turn
// (rpcAsks), any other is read whole into a bounce buffer and queued.
func (ln *lane) rpcDirect(t task, src source) error {
	if t.w.Size == 0 {
		return nil
	}
	if err := ln.settleAsks(false); err != nil {
		return err
	}
	if h, ok := ln.asks.known[t.i]; ok {
		ln.asks.due = append(ln.asks.due, rpcAsk{t: t, src: src, hash: h})
		return ln.releaseAsks(false)
	}
	if err := ln.sendDirect(t, src, false); err != nil {
		return err
	}
	return ln.releaseAsks(false)
}

// sendDirect reads t whole into a bounce buffer and queues it to its
// server; asked: its server's cache was asked for it and missed.
func (ln *lane) sendDirect(t task, src source, asked bool) error {
	l := ln.l
	tp, w, b := t.pl.Plan, t.w, t.pl.Buffer
	q, err := ln.rpcQueueFor(b.Device) // the confirmation's reads
	if err != nil {
		return err
	}
	probe := probes(t)
	for len(ln.flights) >= rpcInFlight {
		if err := ln.land(); err != nil {
			return err
		}
	}
	mem, buf, err := ln.bounceFor(src, w, tp.Name)
	if err != nil {
		return err
	}
	if err := ln.readBounce(t, src, mem, buf); err != nil {
		return fmt.Errorf("loader: tensor '%s': %w", tp.Name, err)
	}
	ln.sample(t, q, buf)
	fl := &rpcFlight{t: t, mem: mem, buf: buf, done: make(chan rpcDone, 1)}
	set := ggml.RPCSet{Tensor: t.pl.Tensor, Size: uint64(len(buf)), Data: buf, Done: func(hit bool, err error) { fl.done <- rpcDone{hit, err} }}
	switch {
	case !probe:
	case asked:
		// the cache missed it: sent for it to keep, as after the
		// client's own probe
		set.Cache = true
	default:
		// a hash the index does not know: worked out meanwhile, for
		// the guard to ask the cache with before it sends the bytes
		fl.fh, fl.key = l.hashesFor(w.File), l.rpcKey(t)
		set.Probe = true
		fl.hashed = make(chan struct{})
		go func() {
			fl.hash = ggml.RPCHash(buf)
			close(fl.hashed)
		}()
		set.Hash = func() uint64 { <-fl.hashed; return fl.hash }
	}
	if err := b.Device.SendRPC(set); err != nil {
		if fl.hashed != nil {
			<-fl.hashed
		}
		ln.putBounce(mem)
		return l.rpcError(t, err)
	}
	ln.flights = append(ln.flights, fl)
	ln.asks.queued += uint64(len(buf))
	return deviceErr(b, tp.Name)
}

// land waits for the lane's oldest tensor on its way to be written to its
// server, and takes its bounce buffer back.
func (ln *lane) land() error {
	l := ln.l
	fl := ln.flights[0]
	ln.flights = ln.flights[1:]
	d := <-fl.done
	var hashed, cached uint64
	if fl.hashed != nil {
		<-fl.hashed // the hash read the buffer
		fl.fh.Put(fl.key, fl.hash)
		hashed = uint64(len(fl.buf))
	}
	if d.hit {
		cached = uint64(len(fl.buf))
	}
	l.countRPC(cached, hashed)
	ln.putBounce(fl.mem)
	if d.err != nil {
		return l.rpcError(fl.t, d.err)
	}
	return nil
}

// landAll waits for every tensor of the lane on its way; the first
// failure is returned.
func (ln *lane) landAll() error { return drain(&ln.flights, ln.land) }
