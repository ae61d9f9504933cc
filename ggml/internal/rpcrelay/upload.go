package rpcrelay

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"sync"
	"time"
)

// The guard's own sets. ggml's RPC client sends a tensor by copying it into
// a new message and, for a weight above HashThreshold, first hashing the
// whole of it on the calling thread and waiting one round trip for
// SET_TENSOR_HASH; through the guard, the bytes are then read and copied
// twice more. A Set skips all of that: the guard writes the requests the
// client would (SET_TENSOR_HASH, then SET_TENSOR with its cache flag) on the
// connection that holds the tensor's buffer, straight from the caller's
// memory, with the hash the caller worked out (on another core, or known
// from an earlier load), and with the probes ahead of the data: a reply is
// awaited only when its data is due, while other tensors' bytes fill the
// link. The server sees requests byte for byte as the client makes them,
// so its file cache ends as llama.cpp's would.

// HashThreshold is the size above which the client asks a server's file
// cache for a weight by its hash before sending it (HASH_THRESHOLD).
const HashThreshold = 10 << 20

// probesInFlight bounds the SET_TENSOR_HASH requests written ahead of
// their replies.
const probesInFlight = 64

// Set is one tensor's bytes for the guard to send to its server.
type Set struct {
	// Tensor is the packed rpc_tensor as the client serializes it; the
	// guard writes the handle of the buffer that holds it.
	Tensor [TensorSize]byte
	// Base is the base address of the tensor's buffer, as the server
	// gave it (ggml_backend_buffer_get_base on the client); 0 when
	// Tensor holds the server's handle of its buffer (a tensor as the
	// client sent it: Watch).
	Base   uint64
	Offset uint64 // into the tensor
	Size   uint64 // bytes set: len(Data), or what a probe asks for
	// Data is what is set; nil asks the server's cache only (Probe).
	Data []byte
	// Probe asks the server's file cache first, by Hash: a hit sets
	// the bytes without sending them, a miss sends them with the cache
	// flag (SET_TENSOR_HASH, as the client does for weights above
	// HashThreshold).
	Probe bool
	// Cache sends the bytes with the cache flag, without a probe: the
	// server's cache missed them already (a probe of Data nil).
	Cache bool
	// Get reads the Size bytes at Offset back into Data (GET_TENSOR)
	// instead of setting them, once every set queued before it is
	// written; Done is called when they are in. Reads queued one after
	// another are written ahead of their replies.
	Get bool
	// Hash returns FNV-1a of the bytes, 64 bits (hash/fnv's New64a),
	// waiting for it if need be; called once, when the probe is due.
	Hash func() uint64
	hash uint64
	// Done is called once, from another goroutine, when the set is
	// written or has failed; Data may be reused from then on.
	Done func(hit bool, err error)
}

// Send queues x on the connection that holds its buffer. It checks x
// first, as the server would (a request outside the buffer makes an honest
// server abort): an error here means nothing was queued and Done is not
// called.
func (g *Guard) Send(x *Set) error {
	if x.Done == nil {
		return errors.New("rpc set: no Done")
	}
	if x.Data != nil && uint64(len(x.Data)) != x.Size {
		return fmt.Errorf("rpc set: %d bytes of data for a set of %d", len(x.Data), x.Size)
	}
	if x.Data == nil && !x.Probe {
		return errors.New("rpc set: no data and no probe")
	}
	if x.Get && (x.Data == nil || x.Probe || x.Cache) {
		return errors.New("rpc set: a read needs its memory and takes no probe or cache flag")
	}
	if x.Probe && x.Hash == nil {
		return errors.New("rpc set: a probe without a hash")
	}
	g.mu.Lock()
	ref, ok := g.bases[x.Base]
	if x.Base == 0 {
		ok = false
		h := binary.LittleEndian.Uint64(x.Tensor[TensorBuffer:])
		for base, r := range g.bases {
			if r.handle == h {
				x.Base, ref, ok = base, r, true
				break
			}
		}
	}
	g.mu.Unlock()
	if !ok {
		return fmt.Errorf("rpc set: no buffer at base %#x on %s", x.Base, g.remote)
	}
	nb, ok := TensorNBytes(x.Tensor[:])
	if !ok {
		return fmt.Errorf("rpc set: a tensor of unknown type %d or size", binary.LittleEndian.Uint32(x.Tensor[TensorType:]))
	}
	data := binary.LittleEndian.Uint64(x.Tensor[TensorData:])
	end := x.Base + ref.size
	if data < x.Base || nb > end-data {
		return fmt.Errorf("rpc set: tensor of %d bytes at %#x outside its buffer [%#x, %#x)", nb, data, x.Base, end)
	}
	if x.Offset > nb || x.Size > nb-x.Offset {
		return fmt.Errorf("rpc set: [%d, +%d) outside the tensor's %d bytes", x.Offset, x.Size, nb)
	}
	binary.LittleEndian.PutUint64(x.Tensor[TensorBuffer:], ref.handle)
	s := ref.s
	s.io.Lock()
	if s.sets == nil {
		s.sets = &setter{g: g, s: s}
	}
	u := s.sets
	s.io.Unlock()
	u.push(x)
	return nil
}

// setter writes the guard's sets on one connection: a goroutine while it
// has any, which holds the connection meanwhile.
type setter struct {
	g *Guard
	s *rpcSession

	mu      sync.Mutex
	queue   []*Set
	running bool
}

func (u *setter) push(x *Set) {
	u.mu.Lock()
	u.queue = append(u.queue, x)
	if !u.running {
		u.running = true
		go u.run()
	}
	u.mu.Unlock()
}

// next takes the oldest queued set; with none it stops the goroutine
// (stop) or returns nil.
func (u *setter) next(stop bool) *Set {
	u.mu.Lock()
	defer u.mu.Unlock()
	if len(u.queue) == 0 {
		if stop {
			u.running = false
		}
		return nil
	}
	x := u.queue[0]
	u.queue[0] = nil
	u.queue = u.queue[1:]
	return x
}

// reply is the server's answer to a probe.
type reply struct {
	x   *Set
	hit bool
	err error
}

// run writes sets until none is queued and none awaits a reply.
func (u *setter) run() {
	s := u.s
	s.io.Lock()
	defer s.io.Unlock()
	r := u.begin()
	var readers sync.WaitGroup
	if r.failed == nil {
		readers.Add(1)
		go func() {
			defer readers.Done()
			u.readReplies(r.server, r.expect, r.replies)
		}()
	}
	for r.step() {
	}
	close(r.expect)
	readers.Wait()
}

// setRun is one run of a setter: what it has written and awaits, and the
// sets it holds back. Only the run's goroutine touches it.
type setRun struct {
	u       *setter
	server  net.Conn
	failed  error      // the first failure: every set from then on gets it
	expect  chan *Set  // the sets whose replies the reader takes, in order
	replies chan reply // their replies
	// inflight are the requests written whose replies are not handled yet
	inflight int
	// probing are the probes in flight whose bytes go after a miss: a
	// read waits for them, as the sets before it are written first
	probing int
	misses  []*Set // probes that missed: their bytes go next
	// dirty are the hashes whose data is not written yet: a probe for
	// the same bytes waits for it, as it would behind the client's
	// one-at-a-time sets, so that the cache answers it
	dirty map[uint64]int
	held  []*Set // probes waiting on a dirty hash
}

// begin starts a run on the connection, failed from the start when the
// server is gone; the caller holds s.io.
func (u *setter) begin() *setRun {
	g := u.g
	r := &setRun{u: u, server: u.s.server, expect: make(chan *Set, probesInFlight), replies: make(chan reply, probesInFlight), dirty: map[uint64]int{}}
	if r.server == nil || g.Err() != nil {
		r.failed = g.Err()
		if r.failed == nil {
			r.failed = fmt.Errorf("%w: %s: the connection is closed", ErrFailed, g.remote)
		}
	}
	return r
}

// fail records the run's first failure, of command op, on the guard and
// drops the connection.
func (r *setRun) fail(op string, err error) {
	if r.failed != nil {
		return
	}
	g := r.u.g
	g.Fail(op, err)
	r.failed = g.Err()
	if r.failed == nil {
		r.failed = fmt.Errorf("%w: %s: %s: %w", ErrFailed, g.remote, op, err)
	}
	r.u.s.dropServer()
}

// step does the run's next piece of work; false: the run is over (a push
// from then on starts another).
func (r *setRun) step() bool {
	r.drain()
	if r.failed != nil {
		r.failPending()
	}
	if len(r.misses) > 0 {
		x := r.misses[0]
		r.misses = r.misses[1:]
		r.write(x, 1)
		return true
	}
	x := r.u.next(r.inflight == 0 && len(r.held) == 0)
	switch {
	case x == nil:
		return r.idle()
	case r.failed != nil:
		x.Done(false, r.failed)
	case x.Get:
		r.read(x)
	case !x.Probe:
		r.write(x, cacheFlag(x))
	default:
		r.probe(x)
	}
	return true
}

// drain handles the replies that are in.
func (r *setRun) drain() {
	for {
		select {
		case rep := <-r.replies:
			r.handle(rep)
		default:
			return
		}
	}
}

// failPending gives the run's failure to the misses and the held probes.
func (r *setRun) failPending() {
	for _, x := range r.misses {
		x.Done(false, r.failed)
	}
	r.misses = nil
	for _, x := range r.held {
		x.Done(false, r.failed)
	}
	r.held = nil
}

// idle is a step with nothing queued: it waits for a reply, or ends the
// run when none is due.
func (r *setRun) idle() bool {
	if r.inflight > 0 {
		r.handle(<-r.replies)
		return true
	}
	if len(r.held) == 0 {
		return false
	}
	// cannot happen (a held probe waits on a set in flight, which
	// settles it): they go now
	clear(r.dirty)
	r.u.mu.Lock()
	r.u.queue = append(r.u.queue, r.held...)
	r.u.mu.Unlock()
	r.held = nil
	return true
}

// requeue puts xs back at the head of the queue.
func (r *setRun) requeue(xs ...*Set) {
	r.u.mu.Lock()
	r.u.queue = append(xs, r.u.queue...)
	r.u.mu.Unlock()
}

// write sends x's bytes (SET_TENSOR) with the cache flag given.
func (r *setRun) write(x *Set, cacheFlag byte) {
	err := r.u.writeSet(r.server, x, cacheFlag)
	r.settle(x)
	if err != nil {
		r.fail("SET_TENSOR", err)
		x.Done(false, r.failed)
		return
	}
	x.Done(false, nil)
}

// read asks for x's bytes back (GET_TENSOR), once no earlier probe may
// still miss and send its bytes.
func (r *setRun) read(x *Set) {
	if r.probing > 0 {
		r.requeue(x)
		r.handle(<-r.replies)
		return
	}
	r.ask(x, "GET_TENSOR", r.u.writeGet)
}

// probe asks the server's cache for x by its hash (SET_TENSOR_HASH), or
// holds it while a set of the same bytes is on its way.
func (r *setRun) probe(x *Set) {
	if x.hash == 0 {
		x.hash = x.Hash()
	}
	if r.dirty[x.hash] > 0 {
		r.held = append(r.held, x)
		return
	}
	if r.ask(x, "SET_TENSOR_HASH", r.u.writeProbe) && x.Data != nil {
		r.dirty[x.hash]++
		r.probing++
	}
}

// settle ends x's claim on its hash once its data is written, or not
// needed (a hit), or failed: the probes held for the same bytes go next.
func (r *setRun) settle(x *Set) {
	if !x.Probe || x.Data == nil {
		return
	}
	if r.dirty[x.hash]--; r.dirty[x.hash] > 0 {
		return
	}
	delete(r.dirty, x.hash)
	var keep, again []*Set
	for _, h := range r.held {
		if h.hash == x.hash {
			again = append(again, h)
		} else {
			keep = append(keep, h)
		}
	}
	r.held = keep
	if len(again) > 0 {
		r.requeue(again...)
	}
}

// handle takes the reply to a probe or a read.
func (r *setRun) handle(rep reply) {
	r.inflight--
	x := rep.x
	if x.Probe && x.Data != nil {
		r.probing--
	}
	switch {
	case x.Get:
		if rep.err != nil {
			r.fail("GET_TENSOR", rep.err)
		}
		x.Done(false, r.failed)
	case rep.err != nil:
		r.fail("SET_TENSOR_HASH", rep.err)
		r.settle(x)
		x.Done(false, r.failed)
	case rep.hit:
		r.settle(x)
		x.Done(true, nil)
	case x.Data == nil:
		x.Done(false, nil) // a probe only: the caller sends the bytes
	default:
		r.misses = append(r.misses, x)
	}
}

// ask writes x's request of command op, whose reply the reader takes,
// once fewer than probesInFlight are unanswered; false: it failed (Done
// is called).
func (r *setRun) ask(x *Set, op string, write func(net.Conn, *Set) error) bool {
	if r.inflight == probesInFlight {
		r.handle(<-r.replies)
	}
	if r.failed != nil {
		x.Done(false, r.failed)
		return false
	}
	if err := write(r.server, x); err != nil {
		r.fail(op, err)
		x.Done(false, r.failed)
		return false
	}
	r.inflight++
	r.expect <- x
	return true
}

// cacheFlag is the cache flag of x's SET_TENSOR when no probe went
// before it.
func cacheFlag(x *Set) byte {
	if x.Cache {
		return 1
	}
	return 0
}

// readReplies reads the replies to the probes and reads in order; after a
// failure the rest get the error.
func (u *setter) readReplies(server net.Conn, expect <-chan *Set, replies chan<- reply) {
	var bad error
	var rsp [9]byte
	for x := range expect {
		if bad == nil && x.Get {
			bad = u.readGet(server, x)
		} else if bad == nil {
			server.SetReadDeadline(time.Now().Add(u.g.ioTimeout))
			if _, err := io.ReadFull(server, rsp[:]); err != nil {
				bad = err
			} else if n := binary.LittleEndian.Uint64(rsp[:8]); n != 1 {
				bad = u.g.broken("a reply of %d bytes where the protocol has 1", n)
			} else if rsp[8] > 1 {
				bad = u.g.broken("result %d where 0 or 1 is allowed", rsp[8])
			} else {
				u.g.received.Add(9)
			}
		}
		replies <- reply{x: x, hit: bad == nil && rsp[8] == 1, err: bad}
	}
}

// readGet reads the reply to x's GET_TENSOR into x.Data: its size, which
// must be what was asked, then the bytes.
func (u *setter) readGet(server net.Conn, x *Set) error {
	var rh [8]byte
	server.SetReadDeadline(time.Now().Add(u.g.ioTimeout))
	if _, err := io.ReadFull(server, rh[:]); err != nil {
		return err
	}
	if n := binary.LittleEndian.Uint64(rh[:]); n != x.Size {
		return u.g.broken("a reply of %d bytes to a request for %d", n, x.Size)
	}
	for pos := 0; pos < len(x.Data); pos += streamPiece {
		server.SetReadDeadline(time.Now().Add(u.g.ioTimeout))
		if _, err := io.ReadFull(server, x.Data[pos:min(len(x.Data), pos+streamPiece)]); err != nil {
			return err
		}
	}
	u.g.received.Add(8 + x.Size)
	return nil
}

// writeGet writes x's GET_TENSOR: the tensor, the offset, the size.
func (u *setter) writeGet(server net.Conn, x *Set) error {
	return u.writeTensorReq(server, CmdGetTensor, x, x.Size)
}

// writeProbe writes x's SET_TENSOR_HASH: the tensor, the offset, the hash.
func (u *setter) writeProbe(server net.Conn, x *Set) error {
	return u.writeTensorReq(server, CmdSetTensorHash, x, x.hash)
}

// writeTensorReq writes a request of command cmd that holds x's tensor,
// its offset and one more u64 (GET_TENSOR's size, SET_TENSOR_HASH's hash).
func (u *setter) writeTensorReq(server net.Conn, cmd byte, x *Set, last uint64) error {
	var req [9 + TensorSize + 16]byte
	req[0] = cmd
	binary.LittleEndian.PutUint64(req[1:], TensorSize+16)
	copy(req[9:], x.Tensor[:])
	binary.LittleEndian.PutUint64(req[9+TensorSize:], x.Offset)
	binary.LittleEndian.PutUint64(req[9+TensorSize+8:], last)
	server.SetWriteDeadline(time.Now().Add(u.g.ioTimeout))
	if _, err := server.Write(req[:]); err != nil {
		return err
	}
	u.g.sent.Add(uint64(len(req)))
	return nil
}

// writeSet writes x's SET_TENSOR: the tensor, the cache flag, the offset,
// then the data, under one write deadline per streamPiece.
func (u *setter) writeSet(server net.Conn, x *Set, cacheFlag byte) error {
	var hdr [9 + TensorSize + 9]byte
	hdr[0] = CmdSetTensor
	binary.LittleEndian.PutUint64(hdr[1:], TensorSize+9+uint64(len(x.Data)))
	copy(hdr[9:], x.Tensor[:])
	hdr[9+TensorSize] = cacheFlag
	binary.LittleEndian.PutUint64(hdr[9+TensorSize+1:], x.Offset)
	server.SetWriteDeadline(time.Now().Add(u.g.ioTimeout))
	first := min(len(x.Data), streamPiece)
	bufs := net.Buffers{hdr[:], x.Data[:first]}
	if _, err := bufs.WriteTo(server); err != nil {
		return err
	}
	for pos := first; pos < len(x.Data); pos += streamPiece {
		server.SetWriteDeadline(time.Now().Add(u.g.ioTimeout))
		if _, err := server.Write(x.Data[pos:min(len(x.Data), pos+streamPiece)]); err != nil {
			return err
		}
	}
	u.g.sent.Add(uint64(len(hdr) + len(x.Data)))
	return nil
}
