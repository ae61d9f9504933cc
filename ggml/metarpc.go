package ggml

import (
	"encoding/binary"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/ggload/ggload/ggml/internal/rpcrelay"
)

// A meta device over RPC servers sets a tensor split along a dimension
// slice by slice, and each slice row by row where its rows are strided in
// the whole (a split along dimension 0): one SET_TENSOR request of a few
// kilobytes per row and device, each copied into a message of its own by
// ggml's client, and each relayed. SetSplit sends each server its whole
// slice instead, gathered in Go, in one request through the guard: the
// same bytes land in the same place, and the servers' file caches are
// asked exactly what the client would ask them (nothing, where every row
// is under the hash threshold).
//
// A tensor split in whole planes (along dimension 1 of a matrix: each
// server's slice is one run of the whole) is one request per server
// either way, but ggml's client sends them one server after another, each
// copied into a message, a slice above the hash threshold hashed on the
// calling thread first. Through the guards the servers get their slices at
// once, straight from the caller's memory, hashed on other cores; a slice
// above the threshold is asked of the server's cache first, as the client
// asks it. A caller that knows such a slice's hash from an earlier load
// asks with it before it has the tensor's bytes (Split.Ask): where the
// caches set every slice, the tensor need not be read.
//
// Where a slice lies on its server is not exported by ggml (the meta
// buffer allocates each device's slices in a context of its own). It is
// learnt per tensor from the requests ggml's client makes when it clears
// the tensor's first row or plane (the guards watch them): a small
// request per server and segment, with no reply, which the guards keep
// from the servers, since the set overwrites every byte of it. Mirrored
// tensors keep the client's way.

// metaWatchMu serializes the clears that learn slices: a watch is on every
// guard of the meta device while one runs.
var metaWatchMu sync.Mutex

// metaLearnWait bounds the wait for the guards to read the clears that
// learn slices (a server that is gone leaves the tensor to ggml's client).
const metaLearnWait = 5 * time.Second

// SplitSet is what a split set did.
type SplitSet struct {
	// Direct is true when the guards sent the tensor; false (and nothing
	// sent) when it cannot go that way, and Set is the way.
	Direct bool
	Sent   uint64 // bytes of tensor data set through the guards
	// Cached is the part of Sent that servers' file caches set (asked
	// by hash, not sent); Hashed the bytes hashed to ask them.
	Cached, Hashed uint64
	// Hashes are the hashes worked out to ask the caches, a slice's each.
	Hashes []SliceHash
}

// SliceHash is the hash by which a server's file cache knows a slice: the
// Size bytes at Off in the whole tensor.
type SliceHash struct {
	Off, Size int64
	Hash      uint64
}

// SplitSlice is one server's slice of a tensor set through the guards.
type SplitSlice struct {
	Device *Device
	Size   int64
	// Off is where the slice lies in the whole tensor when it is one run
	// of it (Size bytes); -1 when it is gathered out of the whole.
	Off int64
	// Probes is true when the slice is asked of its server's file cache
	// by its hash before it is sent (one request above the hash threshold
	// into a weight buffer), as ggml's client asks.
	Probes bool
}

// splitScratch keeps the slices gathered for servers once sent, for the
// next tensor's: a load sets one tensor after another.
var splitScratch scratch

// scratch is a few byte buffers kept for reuse.
type scratch struct {
	mu   sync.Mutex
	bufs [][]byte
}

// get returns n bytes, in a buffer kept if one is big enough.
func (s *scratch) get(n int64) []byte {
	s.mu.Lock()
	defer s.mu.Unlock()
	for i, b := range s.bufs {
		if int64(cap(b)) >= n {
			s.bufs = slices.Delete(s.bufs, i, i+1)
			return b[:n]
		}
	}
	return make([]byte, n)
}

// put keeps b for a later get; of more than a few, the smallest go.
func (s *scratch) put(b []byte) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.bufs = append(s.bufs, b[:0])
	if len(s.bufs) > MetaMaxDevices {
		slices.SortFunc(s.bufs, func(x, y []byte) int { return cap(y) - cap(x) })
		s.bufs = s.bufs[:MetaMaxDevices]
	}
}

// metaCopy is a run of rows copied from the whole tensor into one
// device's slice, as the meta buffer copies them.
type metaCopy struct {
	src, dst     int64 // offsets of the first row
	size, rows   int64
	sstep, dstep int64
}

// SetSplit sets all of t, a tensor in a buffer of a meta device whose
// devices are all RPC servers behind guards that send tensor data
// (Device.SendsRPC), from src (t's size), through the guards: each
// server gets its slice, laid out as ggml's meta buffer lays it out, in
// one request. It returns with Direct false, having sent nothing, where
// it cannot go this way (another device, a mirrored or partial tensor, a
// slice that would be asked of a server's file cache row by row); Set is
// the way then. (SplitFor then Set, in one.)
func (t *Tensor) SetSplit(src []byte) (SplitSet, error) {
	s, err := t.SplitFor()
	if s == nil || err != nil {
		return SplitSet{}, err
	}
	return s.Set(src)
}

// A Split sets one tensor of a meta device over RPC servers through their
// guards: Ask asks the servers' file caches for the slices whose hashes a
// caller knows (from an earlier load), without the tensor's bytes; Set
// sends the rest of it. Its methods are for one goroutine.
type Split struct {
	t       *Tensor
	parts   []*Device
	st      SplitState
	l       metaLayout
	copies  [][]metaCopy
	slices  []SplitSlice
	learnt  bool
	descs   [][rpcrelay.TensorSize]byte // nil when not learnt plainly
	hit     []bool                      // set by its server's cache (Ask)
	missed  []bool                      // asked, and its cache missed it
	cached  uint64
	settled bool // every slice set
}

// SplitFor is how t, a tensor in a buffer of a meta device whose devices
// are all RPC servers behind guards that send tensor data
// (Device.SendsRPC), is set through the guards: nil (and no error) where
// it cannot go that way (another device, a mirrored or partial tensor, a
// slice that would be asked of a server's file cache row by row). It
// makes no request; Ask and Set do.
func (t *Tensor) SplitFor() (*Split, error) {
	b, err := t.hold("set")
	if err != nil {
		return nil, err
	}
	defer t.unhold(b)
	c, lib := t.c, t.rt.lib
	if c.Buffer == 0 || c.Data == nil || c.ViewSrc != nil || !t.isContiguous() || t.NBytes() == 0 {
		return nil, nil
	}
	d := t.rt.device(lib.BuftGetDevice(lib.BufferGetType(c.Buffer)))
	ms := d.split.Value()
	if !d.SplitsRPC() || ms == nil {
		return nil, nil
	}
	parts := d.Parts()
	st, ok := ms.fn(t.name)
	if !ok || !st.Axis.IsDim() || st.Check(t.typ, t.ne, len(parts)) != nil {
		return nil, nil
	}
	l := st.layout(t.ne, len(parts), t.typ.TypeSize(), t.typ.BlockSize())
	copies, ok := st.copies(l, t.ne, t.typ.BlockSize())
	if !ok {
		return nil, nil
	}
	weights := lib.BufferGetUsage(c.Buffer) == int32(UsageWeights)
	s := &Split{t: t, parts: parts, st: st, l: l, copies: copies}
	rows := false // some slice is gathered row by row out of the whole
	for _, cs := range copies {
		for _, cp := range cs {
			// the client asks the cache for each request above the
			// threshold: a row that big goes its way
			if cp.rows > 1 && cp.size > RPCHashThreshold && weights {
				return nil, nil
			}
			rows = rows || cp.rows > 1
		}
	}
	s.slices = make([]SplitSlice, len(parts))
	for j, cs := range copies {
		n := l.slices[j].bytes
		// one request above the threshold, as the client makes it: its
		// cache is asked first
		s.slices[j] = SplitSlice{Device: parts[j], Size: n, Off: runOf(cs, n), Probes: !rows && n > RPCHashThreshold && weights}
	}
	s.hit, s.missed = make([]bool, len(parts)), make([]bool, len(parts))
	return s, nil
}

// Slices are the servers' slices, one per device of the meta device
// (Size 0 for one that holds none of the tensor).
func (s *Split) Slices() []SplitSlice { return s.slices }

// Done reports whether the servers' caches set every slice (Ask): there is
// nothing left for Set to send.
func (s *Split) Done() bool { return s.settled }

// learn learns where the slices lie on their servers, once; false where
// the requests do not tell it plainly (Set is the way then).
func (s *Split) learn() (bool, error) {
	if !s.learnt {
		d, err := s.t.learnSlices(s.parts, s.st, s.l, s.copies)
		if err != nil {
			return false, err
		}
		s.descs, s.learnt = d, true
	}
	return s.descs != nil, nil
}

// splitResult is the answer to a slice's request.
type splitResult struct {
	j   int
	hit bool
	err error
}

// Ask asks the servers' file caches for the slices that probe whose
// hashes hash knows (hash is called with each slice's index), and waits
// for the answers: a slice a cache set is not sent by Set, one it missed
// is sent with the cache flag, as after the client's own probe. It
// returns the bytes the caches set (nothing where the tensor cannot go
// through the guards: Set then reports Direct false).
func (s *Split) Ask(hash func(j int) (uint64, bool)) (cached uint64, err error) {
	t := s.t
	defer placed(&err, "tensor_set", at{t: t, size: t.NBytes()})
	b, err := t.hold("set")
	if err != nil {
		return 0, err
	}
	defer t.unhold(b)
	type ask struct {
		j int
		h uint64
	}
	var asks []ask
	for j, sl := range s.slices {
		if sl.Probes && !s.hit[j] && !s.missed[j] {
			if h, ok := hash(j); ok {
				asks = append(asks, ask{j, h})
			}
		}
	}
	if len(asks) == 0 {
		return 0, nil
	}
	if ok, err := s.learn(); !ok || err != nil {
		return 0, err
	}
	done := make(chan splitResult, len(asks))
	sent := 0
	for _, a := range asks {
		set := &rpcrelay.Set{Tensor: s.descs[a.j], Size: uint64(s.slices[a.j].Size), Probe: true,
			Hash: func() uint64 { return a.h }, Done: func(hit bool, err error) { done <- splitResult{a.j, hit, err} }}
		if err = s.parts[a.j].guard.Send(set); err != nil {
			err = fmt.Errorf("ggml: tensor %s to %s: %w", t.name, s.parts[a.j].name, err)
			break
		}
		sent++
	}
	for range sent {
		x := <-done
		switch {
		case x.err != nil:
			if err == nil {
				err = fmt.Errorf("ggml: tensor %s to %s: %w", t.name, s.parts[x.j].name, x.err)
			}
		case x.hit:
			s.hit[x.j] = true
			cached += uint64(s.slices[x.j].Size)
		default:
			s.missed[x.j] = true
		}
	}
	s.cached += cached
	if err != nil {
		return 0, err
	}
	s.settled = true
	for j, sl := range s.slices {
		if sl.Size > 0 && !s.hit[j] {
			s.settled = false
		}
	}
	return cached, nil
}

// Set sends the slices the servers' caches did not set (Ask) from src,
// the whole tensor: each server its slice, laid out as ggml's meta buffer
// lays it out, in one request, to all servers at once. A slice that
// probes and was not asked for is asked of its cache first by its hash,
// worked out here on another goroutine (r.Hashes). r.Direct is false,
// and nothing sent, where the tensor cannot go through the guards after
// all (Tensor.Set is the way then).
func (s *Split) Set(src []byte) (r SplitSet, err error) {
	t := s.t
	defer placed(&err, "tensor_set", at{t: t, size: uint64(len(src))})
	b, err := t.hold("set")
	if err != nil {
		return r, err
	}
	defer t.unhold(b)
	if uint64(len(src)) != t.NBytes() {
		return r, fmt.Errorf("ggml: set of tensor %s: %d bytes for its %d", t.name, len(src), t.NBytes())
	}
	if ok, err := s.learn(); !ok || err != nil {
		return r, err
	}
	done := make(chan splitResult, len(s.parts))
	sent := 0
	r.Hashes = make([]SliceHash, 0, len(s.parts)) // (not grown: Hash writes into it)
	wait := func() {
		for range sent {
			x := <-done
			if x.err != nil && err == nil {
				err = fmt.Errorf("ggml: tensor %s to %s: %w", t.name, s.parts[x.j].name, x.err)
			}
			if x.hit {
				r.Cached += uint64(s.slices[x.j].Size)
			}
		}
	}
	for j, cs := range s.copies {
		sl := s.slices[j]
		if sl.Size == 0 || s.hit[j] {
			continue
		}
		data, kept := sliceOf(src, cs, sl.Size)
		release := func() {
			if kept {
				splitScratch.put(data)
			}
		}
		set := &rpcrelay.Set{Tensor: s.descs[j], Size: uint64(sl.Size), Data: data,
			Done: func(hit bool, err error) { release(); done <- splitResult{j, hit, err} }}
		switch {
		case !sl.Probes:
		case s.missed[j]:
			set.Cache = true
		default:
			hash := make(chan uint64, 1)
			go func() { hash <- RPCHash(data) }()
			r.Hashes = append(r.Hashes, SliceHash{Off: sl.Off, Size: sl.Size})
			h := &r.Hashes[len(r.Hashes)-1].Hash
			// (called before Done: read once the answers are in)
			set.Probe, set.Hash = true, func() uint64 { *h = <-hash; return *h }
			r.Hashed += uint64(sl.Size)
		}
		if e := s.parts[j].guard.Send(set); e != nil {
			if set.Probe {
				set.Hash() // the hash read data
			}
			release()
			wait()
			return SplitSet{}, fmt.Errorf("ggml: tensor %s to %s: %w", t.name, s.parts[j].name, e)
		}
		sent++
		r.Sent += uint64(sl.Size)
	}
	if wait(); err != nil {
		return SplitSet{}, err
	}
	r.Direct = true
	r.Cached += s.cached
	for j, sl := range s.slices {
		if s.hit[j] {
			r.Sent += uint64(sl.Size)
		}
	}
	s.settled = true
	return r, nil
}

// copies are the copies the meta buffer makes of a tensor of shape ne set
// whole, per device, in its order: each segment's share of every row of
// the whole (the stride along the next dimension) into the slice, after
// what earlier segments put there. ok is false where the copies do not
// fill every slice exactly once.
func (s SplitState) copies(l metaLayout, ne Shape, blck int64) (out [][]metaCopy, ok bool) {
	axis := int(s.Axis)
	if axis > 2 {
		return nil, false
	}
	step := l.nb[axis+1]
	if step <= 0 || l.size%step != 0 {
		return nil, false
	}
	rows := l.size / step
	out = make([][]metaCopy, len(l.slices))
	filled := make([]int64, len(l.slices))
	var from int64
	for _, sg := range s.Segments {
		for range sg.Repeat {
			for j, v := range sg.Lengths {
				size := v * l.nb[axis]
				if axis == 0 {
					size = v / blck * l.nb[0]
				}
				if size == 0 {
					continue
				}
				out[j] = append(out[j], metaCopy{src: from, dst: filled[j], size: size, rows: rows, sstep: step, dstep: l.slices[j].nb[axis+1]})
				from += size
				filled[j] += size
			}
		}
	}
	if from != step {
		return nil, false
	}
	for j, sl := range l.slices {
		if filled[j]*rows != sl.bytes {
			return nil, false
		}
		for _, cp := range out[j] {
			if cp.dst+(cp.rows-1)*cp.dstep+cp.size > sl.bytes {
				return nil, false
			}
		}
	}
	return out, true
}

// sliceOf is a device's slice of n bytes, made by copies cs from the whole
// tensor src: a run of src itself where the slice is one (src must then be
// kept until it is sent), or else gathered into a scratch buffer (kept: to
// be put back).
func sliceOf(src []byte, cs []metaCopy, n int64) (data []byte, kept bool) {
	if at := runOf(cs, n); at >= 0 {
		return src[at : at+n], false
	}
	data = splitScratch.get(n)
	gather(data, src, cs)
	return data, true
}

// runOf is where a slice of n bytes made by copies cs lies in the whole
// tensor when it is one run of it; -1 when it is gathered.
func runOf(cs []metaCopy, n int64) int64 {
	if len(cs) == 1 && cs[0].rows == 1 && cs[0].dst == 0 && cs[0].size == n {
		return cs[0].src
	}
	return -1
}

// gather copies a device's rows out of the whole tensor src into its
// slice dst.
func gather(dst, src []byte, cs []metaCopy) {
	for _, cp := range cs {
		for i := range cp.rows {
			at := cp.dst + i*cp.dstep
			copy(dst[at:at+cp.size], src[cp.src+i*cp.sstep:])
		}
	}
}

// learnSlices makes ggml's meta buffer name each device's slice of t to its
// server, with a watch on every guard, and takes the slices from the
// requests as ggml's client names them (nil for a device with none); nil
// where the requests do not tell them plainly. It clears t's first chunk
// bytes (one step along the split's next dimension): the meta buffer
// clears each device's share of it, one request per copy (copies), without
// a reply, so that nothing waits for the link to drain; the set that
// follows overwrites every byte cleared, so the guards keep the clears
// back from the servers (Watch.Withhold). It waits until the guards have
// read every one of those requests: were one forwarded after the set, it
// would undo part of it.
func (t *Tensor) learnSlices(parts []*Device, st SplitState, l metaLayout, copies [][]metaCopy) ([][rpcrelay.TensorSize]byte, error) {
	if len(st.Segments) != 1 || st.Segments[0].Repeat != 1 {
		// the meta buffer clears segments along the first two
		// dimensions only (it asserts it)
		if st.Axis != SplitAxis0 && st.Axis != SplitAxis1 {
			return nil, nil
		}
	}
	metaWatchMu.Lock()
	defer metaWatchMu.Unlock()
	var guards []*rpcrelay.Guard
	watches := map[*rpcrelay.Guard]*rpcrelay.Watch{}
	want := map[*rpcrelay.Guard]int{}
	for j, p := range parts {
		if watches[p.guard] == nil {
			watches[p.guard] = p.guard.Watch()
			guards = append(guards, p.guard)
		}
		want[p.guard] += len(copies[j])
	}
	for g, n := range want {
		watches[g].Withhold(t.name, uint32(t.typ), n)
	}
	t.rt.lib.TensorMemset(t.c, 0, 0, uintptr(l.nb[int(st.Axis)+1]))
	for g, n := range want {
		watches[g].Wait(n, metaLearnWait)
	}
	le := binary.LittleEndian
	// each guard's requests for t, a slice once, in the order asked
	asked := map[*rpcrelay.Guard][][rpcrelay.TensorSize]byte{}
	for _, g := range guards {
		var ids []uint64
		for _, req := range watches[g].Stop() {
			if !rpcrelay.TensorNamed(req[:], t.name) || le.Uint32(req[rpcrelay.TensorType:]) != uint32(t.typ) {
				continue
			}
			if id := le.Uint64(req[0:]); !slices.Contains(ids, id) {
				ids = append(ids, id)
				asked[g] = append(asked[g], req)
			}
		}
	}
	for _, p := range parts {
		if err := p.Err(); err != nil {
			return nil, err
		}
	}
	// the devices the meta buffer clears, in its order
	var order []int
	for _, sg := range st.Segments {
		for range sg.Repeat {
			for j, v := range sg.Lengths {
				if v != 0 && !slices.Contains(order, j) {
					order = append(order, j)
				}
			}
		}
	}
	descs := make([][rpcrelay.TensorSize]byte, len(parts))
	next := map[*rpcrelay.Guard]int{}
	for _, j := range order {
		g := parts[j].guard
		k := next[g]
		if k >= len(asked[g]) {
			return nil, nil
		}
		next[g] = k + 1
		req, sl := asked[g][k], l.slices[j]
		for i := range 4 {
			if int64(le.Uint32(req[rpcrelay.TensorNe+4*i:])) != sl.ne[i] || int64(le.Uint32(req[rpcrelay.TensorNb+4*i:])) != sl.nb[i] {
				return nil, nil
			}
		}
		descs[j] = req
	}
	for _, g := range guards {
		if next[g] != len(asked[g]) {
			return nil, nil
		}
	}
	return descs, nil
}

// SplitWindow is a window of a server's slice (Split.Windows): the N
// bytes at At in the whole tensor; Got holds what the server has for them
// once read back (Split.ReadBack).
type SplitWindow struct {
	Device *Device
	At, N  int64
	Got    []byte
	j      int   // the slice's device
	in     int64 // where the window lies in the slice
}

// Windows draws from seed a window of at most n bytes of each server's
// slice, within one run of the whole tensor.
func (s *Split) Windows(seed uint64, n int64) []SplitWindow {
	next := func() uint64 { seed = seed*6364136223846793005 + 1442695040888963407; return seed >> 11 }
	var ws []SplitWindow
	for j, cs := range s.copies {
		if len(cs) == 0 || n <= 0 {
			continue
		}
		cp := cs[next()%uint64(len(cs))]
		row := int64(next() % uint64(cp.rows))
		m := min(n, cp.size)
		off := int64(next() % uint64(cp.size-m+1))
		ws = append(ws, SplitWindow{Device: s.parts[j], At: cp.src + row*cp.sstep + off, N: m, j: j, in: cp.dst + row*cp.dstep + off})
	}
	return ws
}

// ReadBack reads windows ws (Windows) back from their servers into their
// Got, queued behind what the split sent them or asked of their caches.
// It returns once the reads are queued; wait waits for them. The split
// must have been set through the guards (Set with Direct, or Done after
// Ask).
func (s *Split) ReadBack(ws []SplitWindow) (wait func() error, err error) {
	t := s.t
	if !s.settled || s.descs == nil {
		return nil, fmt.Errorf("ggml: read back of tensor %s: not set through the guards", t.name)
	}
	b, err := t.hold("get")
	if err != nil {
		return nil, err
	}
	defer t.unhold(b)
	done := make(chan splitResult, len(ws))
	sent := 0
	wait = func() error {
		var first error
		for range sent {
			if x := <-done; x.err != nil && first == nil {
				first = fmt.Errorf("ggml: reading back tensor %s from %s: %w", t.name, s.parts[x.j].name, x.err)
			}
		}
		return first
	}
	for k := range ws {
		w := &ws[k]
		w.Got = make([]byte, w.N)
		set := &rpcrelay.Set{Tensor: s.descs[w.j], Offset: uint64(w.in), Size: uint64(w.N), Data: w.Got, Get: true,
			Done: func(_ bool, err error) { done <- splitResult{j: w.j, err: err} }}
		if err := s.parts[w.j].guard.Send(set); err != nil {
			wait()
			return nil, fmt.Errorf("ggml: reading back tensor %s from %s: %w", t.name, s.parts[w.j].name, err)
		}
		sent++
	}
	return wait, nil
}
