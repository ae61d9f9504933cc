package ggml

import (
	"encoding/binary"
	"fmt"
	"slices"
	"sync"
	"time"
	"unsafe"

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
// asks it.
//
// Where a slice lies on its server is not exported by ggml (the meta
// buffer allocates each device's slices in a context of its own). It is
// learnt per tensor from the requests ggml's client makes when it reads
// one row of the tensor, or clears a tensor split in whole planes (the
// guards watch them): one small request per server. Mirrored tensors keep
// the client's way.

// metaWatchMu serializes the reads that learn slices: a watch is on every
// guard of the meta device while one runs.
var metaWatchMu sync.Mutex

// metaLearnMax bounds the bytes one read that learns slices may take.
const metaLearnMax = 4 << 20

// metaLearnWait bounds the wait for the guards to read the clears that
// learn slices (a server that is gone leaves the tensor to ggml's client).
const metaLearnWait = 5 * time.Second

// SplitSet is what SetSplit did.
type SplitSet struct {
	// Direct is true when the guards sent the tensor; false (and nothing
	// sent) when it cannot go that way, and Set is the way.
	Direct bool
	Sent   uint64 // bytes of tensor data set through the guards
	// Cached is the part of Sent that servers' file caches set (asked
	// by hash, not sent); Hashed the bytes hashed to ask them.
	Cached, Hashed uint64
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
// the way then.
func (t *Tensor) SetSplit(src []byte) (r SplitSet, err error) {
	defer placed(&err, "tensor_set", at{t: t, size: uint64(len(src))})
	b, err := t.hold("set")
	if err != nil {
		return r, err
	}
	defer t.unhold(b)
	if uint64(len(src)) != t.NBytes() || len(src) == 0 {
		return r, fmt.Errorf("ggml: set of tensor %s: %d bytes for its %d", t.name, len(src), t.NBytes())
	}
	c, lib := t.c, t.rt.lib
	if c.Buffer == 0 || c.Data == nil || c.ViewSrc != nil || !t.isContiguous() {
		return r, nil
	}
	d := t.rt.device(lib.BuftGetDevice(lib.BufferGetType(c.Buffer)))
	parts := d.Parts()
	ms := d.split.Value()
	if !d.IsMeta() || ms == nil || len(parts) == 0 {
		return r, nil
	}
	for _, p := range parts {
		if !p.SendsRPC() {
			return r, nil
		}
	}
	st, ok := ms.fn(t.name)
	if !ok || !st.Axis.IsDim() || st.Check(t.typ, t.ne, len(parts)) != nil {
		return r, nil
	}
	l := st.layout(t.ne, len(parts), t.typ.TypeSize(), t.typ.BlockSize())
	copies, ok := st.copies(l, t.ne, t.typ.BlockSize())
	if !ok {
		return r, nil
	}
	weights := lib.BufferGetUsage(c.Buffer) == int32(UsageWeights)
	rows := false
	for _, cs := range copies {
		for _, cp := range cs {
			// the client asks the cache for each request above the
			// threshold: a row that big goes its way
			if cp.rows > 1 && cp.size > RPCHashThreshold && weights {
				return r, nil
			}
			rows = rows || cp.rows > 1
		}
	}
	chunk := l.nb[int(st.Axis)+1]
	if rows && chunk > metaLearnMax {
		return r, nil
	}
	descs, err := t.learnSlices(parts, st, l, chunk, !rows)
	if err != nil || descs == nil {
		return r, err
	}

	type result struct {
		j   int
		hit bool
		err error
	}
	done := make(chan result, len(parts))
	sent := 0
	wait := func() {
		for range sent {
			x := <-done
			if x.err != nil && err == nil {
				err = fmt.Errorf("ggml: tensor %s to %s: %w", t.name, parts[x.j].name, x.err)
			}
			if x.hit {
				r.Cached += uint64(l.slices[x.j].bytes)
			}
		}
	}
	for j, cs := range copies {
		sl := l.slices[j]
		if sl.bytes == 0 {
			continue
		}
		data, kept := sliceOf(src, cs, sl.bytes)
		release := func() {
			if kept {
				splitScratch.put(data)
			}
		}
		set := &rpcrelay.Set{Tensor: descs[j], Size: uint64(sl.bytes), Data: data,
			Done: func(hit bool, err error) { release(); done <- result{j, hit, err} }}
		if !rows && sl.bytes > RPCHashThreshold && weights {
			// one request above the threshold, as the client makes it:
			// its cache is asked first, by the slice's hash, worked out
			// here meanwhile
			hash := make(chan uint64, 1)
			go func() { hash <- RPCHash(data) }()
			set.Probe, set.Hash = true, func() uint64 { return <-hash }
			r.Hashed += uint64(sl.bytes)
		}
		if e := parts[j].guard.Send(set); e != nil {
			if set.Probe {
				set.Hash() // the hash read data
			}
			release()
			wait()
			return SplitSet{}, fmt.Errorf("ggml: tensor %s to %s: %w", t.name, parts[j].name, e)
		}
		sent++
		r.Sent += uint64(sl.bytes)
	}
	if wait(); err != nil {
		return SplitSet{}, err
	}
	r.Direct = true
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
	if len(cs) == 1 && cs[0].rows == 1 && cs[0].dst == 0 && cs[0].size == n {
		return src[cs[0].src : cs[0].src+n], false
	}
	data = splitScratch.get(n)
	gather(data, src, cs)
	return data, true
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
// where the requests do not tell them plainly. A tensor whose slices are
// strided in the whole (rows) reads its first chunk bytes back; one whose
// slices are whole runs of it (planes) is cleared instead: a request of a
// few hundred bytes per server, where a read would bring the whole tensor
// back (the meta buffer reads and clears such a tensor only whole); the
// set that follows overwrites what the server cleared.
func (t *Tensor) learnSlices(parts []*Device, st SplitState, l metaLayout, chunk int64, planes bool) ([][rpcrelay.TensorSize]byte, error) {
	metaWatchMu.Lock()
	defer metaWatchMu.Unlock()
	var guards []*rpcrelay.Guard
	watches := map[*rpcrelay.Guard]*rpcrelay.Watch{}
	for _, p := range parts {
		if watches[p.guard] == nil {
			watches[p.guard] = p.guard.Watch()
			guards = append(guards, p.guard)
		}
	}
	if planes {
		t.rt.lib.TensorMemset(t.c, 0, 0, uintptr(t.NBytes()))
		// a clear has no reply: the guards may not have read it yet
		// (once they have, the sets below go after it)
		want := map[*rpcrelay.Guard]int{}
		for j, sl := range l.slices {
			if sl.bytes > 0 {
				want[parts[j].guard]++
			}
		}
		for g, n := range want {
			watches[g].Wait(n, metaLearnWait)
		}
	} else {
		buf := splitScratch.get(chunk)
		defer splitScratch.put(buf)
		t.rt.lib.TensorGet(t.c, unsafe.Pointer(&buf[0]), 0, uintptr(chunk))
	}
	le := binary.LittleEndian
	// each guard's requests for t, a slice once, in the order asked
	asked := map[*rpcrelay.Guard][][rpcrelay.TensorSize]byte{}
	for _, g := range guards {
		var ids []uint64
		for _, req := range watches[g].Stop() {
			if !sameName(req[:], t.name) || le.Uint32(req[rpcrelay.TensorType:]) != uint32(t.typ) {
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
	// the devices the meta buffer reads, in its order
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

// sameName reports whether a packed rpc_tensor is named name.
func sameName(req []byte, name string) bool {
	at := rpcrelay.TensorData + 8
	if len(name) >= len(req)-at || req[at+len(name)] != 0 {
		return false
	}
	return string(req[at:at+len(name)]) == name
}
