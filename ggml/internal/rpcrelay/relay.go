package rpcrelay

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math/bits"
	"net"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
)

// ggml's RPC client aborts the process when a server stops answering in the
// middle of a command, or answers with a reply of the wrong size
// (GGML_ABORT "Remote RPC server crashed or returned malformed response"),
// and trusts what a well-framed reply says: an alignment that is not a power
// of two, a buffer smaller than it asked for or an allocation size that
// wraps around end in an assertion or in tensors written over each other.
// A model spread over several hosts must not die with one of them, nor
// with a server that answers garbage (a bug, a version mismatch, a hostile
// host), so by default each endpoint is reached through a guard: a relay on
// the loopback interface that forwards the protocol and checks every reply
// of the pinned protocol (7.0) before the native client sees it. When the
// server fails, stays silent past the I/O timeout or breaks the protocol,
// the guard records the error (naming the endpoint and the command), drops
// the connection, and from then on answers the client itself with
// well-formed replies (allocations fail, reads return zeros, writes are
// dropped). The native client never sees a broken connection or a reply it
// would choke on; Go code asks Device.Err and stops. No reply makes the
// guard allocate more than the request it answers asked for.

// Limits the guard puts on what a server may answer.
const (
	// rpcMaxAlignment bounds a buffer type's alignment (ggml's backends
	// use 32 to 256 bytes); the base the guard makes up for a failed
	// server is aligned to it.
	rpcMaxAlignment = 1 << 20
	// rpcAllocSlack bounds how much larger than asked a buffer may be
	// (backends that round up to pages).
	rpcAllocSlack = 1 << 20
	// rpcPadColumns: a weight's allocation may exceed its bytes by the
	// padding of one row to 512 columns (CUDA, SYCL).
	rpcPadColumns = 512
	// rpcMaxAddress bounds where a buffer may end: no process or GPU
	// address space reaches past 57 bits (x86-64 with 5-level paging;
	// 48 to 52 bits elsewhere).
	rpcMaxAddress = 1 << 57
)

// rpcRemembered are the per-device queries whose last live answer is
// replayed once the server is gone (the client asks them again when it
// makes new objects). Their requests are a device index at most, so the
// answers stay few; queries about tensors or buffers are made up instead.
var rpcRemembered = map[byte]bool{CmdGetAlignment: true, CmdGetMaxSize: true, CmdGetDeviceMem: true, CmdDevCount: true}

// ErrFailed is wrapped by the guard's error when its server failed,
// stopped answering or broke the protocol while in use (ggml's
// ErrRPCFailed).
var ErrFailed = errors.New("rpc server failed")

// Guard relays one endpoint: New makes it listen on the loopback
// interface, Addr is where the native client is pointed, and every
// connection the client opens there is relayed to the server.
type Guard struct {
	remote    string
	local     string // the address the native client is given
	ln        net.Listener
	ioTimeout time.Duration
	devices   uint32 // the server's device count (0: not known)
	memCap    uint64 // most memory reported for each device (0: as the server says)
	ownSets   bool   // Send is taken (tensor data need not go through the client)

	mu       sync.Mutex
	bases    map[uint64]bufferRef // buffers by base address, of every connection
	err      error                // first failure of the current session
	broke    bool                 // err is a broken protocol: it stays for good
	conns    int                  // client connections open
	answers  map[string][]byte
	align    map[uint32]uint64 // per device: alignment and maximum
	maxSize  map[uint32]uint64 // buffer size and memory, as first
	total    map[uint32]uint64 // answered
	sent     atomic.Uint64     // bytes forwarded to the server
	received atomic.Uint64

	watchMu sync.Mutex // one Watch at a time
	watch   *Watch     // under mu: the tensors the client asks for, while set
}

func New(remote string, ioTimeout time.Duration, devices uint32) (*Guard, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, fmt.Errorf("ggml: rpc guard for %s: %w", remote, err)
	}
	if ioTimeout <= 0 {
		ioTimeout = 60 * time.Second
	}
	g := &Guard{remote: remote, local: ln.Addr().String(), ln: ln, ioTimeout: ioTimeout, devices: devices,
		answers: map[string][]byte{}, bases: map[uint64]bufferRef{}, align: map[uint32]uint64{}, maxSize: map[uint32]uint64{}, total: map[uint32]uint64{}}
	go g.accept()
	return g, nil
}

// SetMemory caps the memory (free and total) the guard reports for each
// of the server's devices; 0 reports the server's own figures. Call it
// before the client's first request.
func (g *Guard) SetMemory(bytes uint64) { g.memCap = bytes }

// SetOwnSets says whether the guard's own sets (Send) are used for this
// endpoint; when not, OwnSets tells callers to go through the client.
func (g *Guard) SetOwnSets(on bool) { g.ownSets = on }

// OwnSets reports whether the guard takes tensor data through Send.
func (g *Guard) OwnSets() bool { return g.ownSets }

// accept takes the native client's connections for the life of the
// process. A failure to take one does not end it (the client, connected
// in the listener's backlog, would wait for its reply forever): out of
// descriptors, the guard gives up the one it keeps in reserve to take the
// connection, which then gets well-formed replies even if the server
// cannot be dialled (the failure is recorded), and takes a reserve again
// once it can; other failures (a connection aborted before it was taken)
// are retried with a growing pause.
func (g *Guard) accept() {
	spare := reserveDescriptor()
	var pause time.Duration
	for {
		c, err := g.ln.Accept()
		if err == nil {
			pause = 0
			if spare == nil {
				spare = reserveDescriptor()
			}
			go g.serve(c)
			continue
		}
		if errors.Is(err, net.ErrClosed) {
			if spare != nil {
				spare.Close()
			}
			return
		}
		if outOfDescriptors(err) && spare != nil {
			spare.Close()
			spare = nil
			continue
		}
		pause = min(max(2*pause, 5*time.Millisecond), time.Second)
		time.Sleep(pause)
	}
}

// reserveDescriptor holds a descriptor for accept to give up when the
// process has no other (nil when it cannot).
func reserveDescriptor() *os.File {
	f, err := os.Open(os.DevNull)
	if err != nil {
		return nil
	}
	return f
}

// outOfDescriptors reports an error of the process or the system running
// out of file descriptors.
func outOfDescriptors(err error) bool {
	return errors.Is(err, syscall.EMFILE) || errors.Is(err, syscall.ENFILE)
}

// Err is the failure of the server in the current session, or nil.
func (g *Guard) Err() error {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.err
}

// Fail records a failure of the server in the current session.
func (g *Guard) Fail(op string, err error) {
	var ne net.Error
	if errors.As(err, &ne) && ne.Timeout() {
		err = fmt.Errorf("no answer within %v (%w)", g.ioTimeout, err)
	} else if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) {
		err = errors.New("connection closed by the server")
	}
	g.mu.Lock()
	if g.err == nil {
		g.err = fmt.Errorf("%w: %s: %s: %w", ErrFailed, g.remote, op, err)
		g.broke = errors.Is(err, errBroken)
	}
	g.mu.Unlock()
}

// rpcBuffer is a buffer the server handed out on a connection.
type rpcBuffer struct {
	dev  uint32
	size uint64
	base uint64 // once the client asked for it
}

// bufferRef is a buffer by its base address: the connection that holds it
// and its handle there.
type bufferRef struct {
	s      *rpcSession
	handle uint64
	size   uint64
}

// rpcSession is what the guard knows of one client connection: the
// buffer handles the server handed out on it (a server keeps buffers per
// connection), and the connection to the server, which the relay and the
// guard's own sets (upload.go) take turns on.
type rpcSession struct {
	buffers map[uint64]rpcBuffer // only the relay's goroutine touches it

	io     sync.Mutex // held for a whole exchange with the server
	server net.Conn   // nil once the server failed or the session ended
	sets   *setter    // the guard's own sets, made on first use

	relayBuf []byte // tensor data relayed a piece at a time (relayBuffer); the relay's goroutine's alone
}

// relayBuffer is the piece of memory the connection relays tensor data
// through, made when some first comes: most connections carry none.
func (s *rpcSession) relayBuffer() []byte {
	if s.relayBuf == nil {
		s.relayBuf = make([]byte, 1<<20)
	}
	return s.relayBuf
}

// dropServer closes the connection to the server; the caller holds s.io.
func (s *rpcSession) dropServer() {
	if s.server != nil {
		s.server.Close()
		s.server = nil
	}
}

// serve relays one client connection until the client closes it.
func (g *Guard) serve(client net.Conn) {
	defer client.Close()
	g.mu.Lock()
	if g.conns == 0 && !g.broke {
		// a new session: the native client has dropped every object of
		// the last one, so an old failure (a server that died, or
		// stayed silent) no longer applies. A server that broke the
		// protocol is not trusted again: the native client keeps some
		// answers for the life of the process (alignments, allocation
		// sizes), and those may have been made up since.
		g.err = nil
	}
	g.conns++
	failed := g.err != nil
	g.mu.Unlock()
	defer func() {
		g.mu.Lock()
		g.conns--
		g.mu.Unlock()
	}()
	s := &rpcSession{buffers: map[uint64]rpcBuffer{}}
	if !failed {
		server, err := net.DialTimeout("tcp", g.remote, g.ioTimeout)
		if err != nil {
			g.Fail("connect", err)
		} else {
			s.server = server
		}
	}
	defer g.endSession(s)
	hdr := make([]byte, 9)
	for {
		if _, err := io.ReadFull(client, hdr); err != nil {
			return // the client is done
		}
		cmd, size := hdr[0], binary.LittleEndian.Uint64(hdr[1:])
		if int(cmd) >= CmdCount {
			return // not protocol 7: drop the connection
		}
		// small requests are kept (replies are checked against them
		// and synthesised from them); big ones (tensor data) are
		// streamed
		var req []byte
		if size <= 4096 {
			req = make([]byte, size)
			if _, err := io.ReadFull(client, req); err != nil {
				return
			}
		}
		if cmd == CmdMemsetTensor && g.withhold(req) {
			// a clear without a reply that the set after it overwrites
			// (Watch.Withhold): the server is spared it, and it need
			// not wait for the connection, since nothing is sent
			continue
		}
		s.io.Lock()
		if s.server != nil && g.Err() == nil {
			if err := s.checkRequest(cmd, req); err != nil {
				g.Fail(CmdName(cmd), err)
			}
		}
		if cmd == CmdGetTensor || cmd == CmdMemsetTensor {
			g.watched(req)
		}
		if s.server != nil && g.Err() == nil {
			consumed, err := g.forward(s, client, s.server, hdr, req, size)
			if err == nil {
				s.io.Unlock()
				continue
			}
			if errors.Is(err, errClientGone) {
				s.io.Unlock()
				return
			}
			// the server failed: the rest of the request is drained and
			// the reply made up below
			if req == nil {
				size -= consumed
			}
		}
		s.dropServer()
		s.io.Unlock()
		if req == nil && size > 0 {
			if _, err := io.CopyN(io.Discard, client, int64(size)); err != nil {
				return
			}
		}
		if err := g.synthesize(client, cmd, req); err != nil {
			return
		}
	}
}

// Watch records the tensors the native client reads or clears on the
// server (GET_TENSOR and MEMSET_TENSOR requests) while it is on: each as
// the client serialized it (rpc_tensor, with the server's buffer handle).
// One Watch is on at a time; Stop ends it.
type Watch struct {
	g    *Guard
	got  [][TensorSize]byte
	more chan struct{} // a request was recorded

	// clears kept from the server (Withhold), under g.mu
	name string
	typ  uint32
	hold int
}

// Withhold makes the watch keep back from the server the next n clears to
// zero (MEMSET_TENSOR) of a tensor named name of type typ, still recording
// them. It is for a caller that clears a tensor only to see how ggml's
// client names it, and sets every byte it clears before the tensor is
// used: a clear has no reply, so the client cannot tell, and the server
// is spared writing bytes that are about to be overwritten.
func (w *Watch) Withhold(name string, typ uint32, n int) {
	w.g.mu.Lock()
	w.name, w.typ, w.hold = name, typ, n
	w.g.mu.Unlock()
}

// withholds reports whether a MEMSET_TENSOR request is one of the clears
// to keep back (Withhold).
func (w *Watch) withholds(req []byte) bool {
	return w.hold > 0 && len(req) == MemsetValue+1 && req[MemsetValue] == 0 &&
		binary.LittleEndian.Uint32(req[TensorType:]) == w.typ && TensorNamed(req, w.name)
}

// Watch starts recording (see type Watch); it waits for a Watch under way
// to stop.
func (g *Guard) Watch() *Watch {
	g.watchMu.Lock()
	w := &Watch{g: g, more: make(chan struct{}, 1)}
	g.mu.Lock()
	g.watch = w
	g.mu.Unlock()
	return w
}

// Wait waits until the watch has recorded n requests, or for timeout. A
// request without a reply (MEMSET_TENSOR) may reach the guard after the
// native call that made it returned. A request is recorded while the guard
// holds its connection, which it lets go only once the request is
// forwarded: a set sent after Wait returns reaches the server after it.
func (w *Watch) Wait(n int, timeout time.Duration) {
	g := w.g
	deadline := time.NewTimer(timeout)
	defer deadline.Stop()
	for {
		g.mu.Lock()
		have := len(w.got)
		g.mu.Unlock()
		if have >= n {
			return
		}
		select {
		case <-w.more:
		case <-deadline.C:
			return
		}
	}
}

// Stop ends the watch and returns what it recorded, in order. The
// requests of native calls that returned before Stop are all there, but
// for those without a reply (see Wait).
func (w *Watch) Stop() [][TensorSize]byte {
	g := w.g
	g.mu.Lock()
	g.watch = nil
	got := w.got
	g.mu.Unlock()
	g.watchMu.Unlock()
	return got
}

// withhold reports whether MEMSET_TENSOR request req is one of the clears
// the watch that is on keeps back (Withhold), recording it if so.
func (g *Guard) withhold(req []byte) bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	w := g.watch
	if w == nil || !w.withholds(req) {
		return false
	}
	w.hold--
	w.add(req)
	return true
}

// watched records a GET_TENSOR or MEMSET_TENSOR request req on the watch
// that is on, if any.
func (g *Guard) watched(req []byte) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if w := g.watch; w != nil && len(req) >= TensorSize {
		w.add(req)
	}
}

// add records req; the caller holds g.mu.
func (w *Watch) add(req []byte) {
	var t [TensorSize]byte
	copy(t[:], req)
	w.got = append(w.got, t)
	select {
	case w.more <- struct{}{}:
	default:
	}
}

// endSession forgets a connection the client closed: its buffers (the
// server frees them) and its server connection, once the guard's own sets
// on it are done.
func (g *Guard) endSession(s *rpcSession) {
	g.mu.Lock()
	for base, ref := range g.bases {
		if ref.s == s {
			delete(g.bases, base)
		}
	}
	g.mu.Unlock()
	s.io.Lock()
	s.dropServer()
	s.io.Unlock()
}

var (
	errClientGone   = errors.New("client gone")
	errServerFailed = errors.New("server failed")
	errBroken       = fmt.Errorf("the reply breaks RPC protocol %d.%d", ProtoMajor, ProtoMinor)
)

// streamPiece is the most tensor data relayed under one write deadline.
const streamPiece = 4 << 20

// forward sends one command to the server and relays its reply once it
// has been checked. On a server failure or a reply that breaks the
// protocol the guard is marked failed and forward says how many bytes of
// a streamed request it had taken from the client.
func (g *Guard) forward(s *rpcSession, client, server net.Conn, hdr, req []byte, size uint64) (consumed uint64, err error) {
	cmd := hdr[0]
	if consumed, err = g.send(s, client, server, hdr, req, size); err != nil {
		return consumed, err
	}
	if cmd == CmdFreeBuffer {
		g.freed(s, req)
	}
	want := ReplySize[cmd]
	if want == -1 {
		return consumed, nil
	}
	server.SetReadDeadline(time.Now().Add(g.ioTimeout))
	var rh [8]byte
	if _, err := io.ReadFull(server, rh[:]); err != nil {
		g.Fail(CmdName(cmd), err)
		return consumed, errServerFailed
	}
	n := binary.LittleEndian.Uint64(rh[:])
	if want == -2 {
		// GET_TENSOR: exactly the bytes asked for, streamed
		if len(req) < 8 || n != binary.LittleEndian.Uint64(req[len(req)-8:]) {
			g.Fail(CmdName(cmd), g.broken("a reply of %d bytes to a request for %d", n, rpcTail(req)))
			return consumed, errServerFailed
		}
		return consumed, g.relay(client, server, cmd, rh, n, s.relayBuffer())
	}
	rsp, err := g.reply(s, server, hdr, req, n, want)
	if err != nil {
		g.Fail(CmdName(cmd), err)
		return consumed, errServerFailed
	}
	if _, err := client.Write(append(rh[:], rsp...)); err != nil {
		return consumed, errClientGone
	}
	g.received.Add(8 + n)
	return consumed, nil
}

// send writes the client's command to the server: its header, then the
// request kept whole or, for tensor data, streamed from the client
// (consumed says how much of it was taken). The guard is marked failed
// when the server does not take it.
func (g *Guard) send(s *rpcSession, client, server net.Conn, hdr, req []byte, size uint64) (consumed uint64, err error) {
	cmd := hdr[0]
	if cmd == CmdHello && len(req) == ConnCapsSize {
		// no transport upgrade (RDMA): the guard relays plain TCP only
		clear(req)
	}
	server.SetWriteDeadline(time.Now().Add(g.ioTimeout))
	if _, err := server.Write(hdr); err != nil {
		g.Fail("send "+CmdName(cmd), err)
		return 0, errServerFailed
	}
	if req != nil {
		if _, err := server.Write(req); err != nil {
			g.Fail("send "+CmdName(cmd), err)
			return 0, errServerFailed
		}
	} else if consumed, err = g.stream(s, client, server, cmd, size); err != nil {
		return consumed, err
	}
	g.sent.Add(9 + size)
	return consumed, nil
}

// stream relays size bytes of tensor data from the client to the server
// unread, a buffer at a time, under one write deadline per streamPiece.
// (Splicing would save the copy, but when the server fails it loses count
// of the bytes taken from the client, which the guard must drain exactly
// to keep answering it.)
func (g *Guard) stream(s *rpcSession, client, server net.Conn, cmd byte, size uint64) (consumed uint64, err error) {
	var deadline uint64
	buf := s.relayBuffer()
	for consumed < size {
		n := min(uint64(len(buf)), size-consumed)
		if _, err := io.ReadFull(client, buf[:n]); err != nil {
			return consumed, errClientGone
		}
		consumed += n
		if consumed > deadline {
			server.SetWriteDeadline(time.Now().Add(g.ioTimeout))
			deadline = consumed + streamPiece
		}
		if _, err := server.Write(buf[:n]); err != nil {
			g.Fail("send "+CmdName(cmd), err)
			return consumed, errServerFailed
		}
	}
	return consumed, nil
}

// freed forgets the buffer a FREE_BUFFER request req frees.
func (g *Guard) freed(s *rpcSession, req []byte) {
	if len(req) != 8 {
		return
	}
	h := binary.LittleEndian.Uint64(req)
	if b, ok := s.buffers[h]; ok && b.base != 0 {
		g.mu.Lock()
		delete(g.bases, b.base)
		g.mu.Unlock()
	}
	delete(s.buffers, h)
}

// reply reads the server's fixed-size reply of n bytes, of which the
// protocol has want, checks it and makes it what the client gets: a
// device's memory capped, a buffer's base confirmed and recorded, a
// device query remembered for when the server is gone.
func (g *Guard) reply(s *rpcSession, server net.Conn, hdr, req []byte, n uint64, want int) ([]byte, error) {
	cmd := hdr[0]
	if n != uint64(want) {
		return nil, g.broken("a reply of %d bytes where the protocol has %d", n, want)
	}
	rsp := make([]byte, n)
	if _, err := io.ReadFull(server, rsp); err != nil {
		return nil, err
	}
	if cmd == CmdHello {
		clear(rsp[4:])
	}
	if err := g.checkReply(s, cmd, req, rsp); err != nil {
		return nil, err
	}
	if cmd == CmdGetDeviceMem && g.memCap > 0 {
		// the budget the guard was given for the server's devices
		binary.LittleEndian.PutUint64(rsp, min(binary.LittleEndian.Uint64(rsp), g.memCap))
		binary.LittleEndian.PutUint64(rsp[8:], min(binary.LittleEndian.Uint64(rsp[8:]), g.memCap))
	}
	if cmd == CmdBufferGetBase {
		if err := g.confirmBase(s, server, hdr, req, rsp); err != nil {
			return nil, err
		}
	}
	if rpcRemembered[cmd] {
		g.mu.Lock()
		g.answers[string(append([]byte{cmd}, req...))] = rsp
		g.mu.Unlock()
	}
	return rsp, nil
}

// confirmBase asks BUFFER_GET_BASE again and records the base rsp gave
// for the buffer. Every tensor address the client sends derives from a
// base: a wrong one makes it send writes outside the buffer, which an
// honest server answers by aborting. Asked twice, a base that is not the
// server's own does not come back the same.
func (g *Guard) confirmBase(s *rpcSession, server net.Conn, hdr, req, rsp []byte) error {
	again, err := g.ask(server, hdr, req, len(rsp))
	if err != nil {
		return err
	}
	if !bytes.Equal(again, rsp) {
		return g.broken("base address %#x, then %#x for the same buffer", binary.LittleEndian.Uint64(rsp), binary.LittleEndian.Uint64(again))
	}
	if len(req) != 8 {
		return nil
	}
	h := binary.LittleEndian.Uint64(req)
	if b, ok := s.buffers[h]; ok {
		b.base = binary.LittleEndian.Uint64(rsp)
		s.buffers[h] = b
		g.mu.Lock()
		g.bases[b.base] = bufferRef{s: s, handle: h, size: b.size}
		g.mu.Unlock()
	}
	return nil
}

// ask sends a command of the guard's own (a copy of the client's) and
// reads its fixed-size reply.
func (g *Guard) ask(server net.Conn, hdr, req []byte, want int) ([]byte, error) {
	server.SetWriteDeadline(time.Now().Add(g.ioTimeout))
	if _, err := server.Write(append(append([]byte{}, hdr...), req...)); err != nil {
		return nil, err
	}
	server.SetReadDeadline(time.Now().Add(g.ioTimeout))
	var rh [8]byte
	if _, err := io.ReadFull(server, rh[:]); err != nil {
		return nil, err
	}
	if n := binary.LittleEndian.Uint64(rh[:]); n != uint64(want) {
		return nil, g.broken("a reply of %d bytes where the protocol has %d", n, want)
	}
	rsp := make([]byte, want)
	if _, err := io.ReadFull(server, rsp); err != nil {
		return nil, err
	}
	return rsp, nil
}

// relay streams a GET_TENSOR reply of n bytes; when the server fails
// half way the client gets zeros for the rest (it waits for all n).
func (g *Guard) relay(client, server net.Conn, cmd byte, rh [8]byte, n uint64, buf []byte) error {
	if _, err := client.Write(rh[:]); err != nil {
		return errClientGone
	}
	for left := n; left > 0; {
		k := min(uint64(len(buf)), left)
		server.SetReadDeadline(time.Now().Add(g.ioTimeout))
		if _, err := io.ReadFull(server, buf[:k]); err != nil {
			g.Fail(CmdName(cmd), err)
			clear(buf)
			for ; left > 0; left -= min(uint64(len(buf)), left) {
				if _, err := client.Write(buf[:min(uint64(len(buf)), left)]); err != nil {
					return errClientGone
				}
			}
			server.Close()
			return nil // the reply is complete; the server is gone for the next command
		}
		if _, err := client.Write(buf[:k]); err != nil {
			return errClientGone
		}
		left -= k
	}
	g.received.Add(8 + n)
	return nil
}

// broken describes a reply that breaks the protocol.
func (g *Guard) broken(format string, args ...any) error {
	return fmt.Errorf("%w: %s", errBroken, fmt.Sprintf(format, args...))
}

// checkRequest refuses a request about a buffer the server never handed
// out on this connection (the native client only has handles from replies
// the guard let through, so this is a server's doing).
func (s *rpcSession) checkRequest(cmd byte, req []byte) error {
	var h uint64
	switch cmd {
	case CmdBufferGetBase, CmdFreeBuffer, CmdBufferClear:
		if len(req) < 8 {
			return nil
		}
		h = binary.LittleEndian.Uint64(req)
	case CmdSetTensorHash, CmdGetTensor, CmdInitTensor, CmdMemsetTensor, CmdCopyTensor:
		if len(req) < TensorSize {
			return nil
		}
		h = binary.LittleEndian.Uint64(req[TensorBuffer:])
		if h == 0 {
			return nil
		}
	default:
		return nil
	}
	if _, ok := s.buffers[h]; !ok {
		return fmt.Errorf("%w: the client was given buffer handle %#x, which the server never handed out", errBroken, h)
	}
	return nil
}

// checkReply checks a fixed-size reply against its request and what the
// server said before, and records what it hands out.
func (g *Guard) checkReply(s *rpcSession, cmd byte, req, rsp []byte) error {
	dev := uint32(0)
	if len(req) >= 4 {
		dev = binary.LittleEndian.Uint32(req)
	}
	switch cmd {
	case CmdHello:
		if rsp[0] != ProtoMajor || rsp[1] > ProtoMinor {
			return g.broken("the server says it speaks %d.%d.%d", rsp[0], rsp[1], rsp[2])
		}
	case CmdDevCount:
		if n := binary.LittleEndian.Uint32(rsp); g.devices != 0 && n != g.devices {
			return g.broken("%d devices, %d when the endpoint was registered", n, g.devices)
		}
	case CmdGetAlignment, CmdGetMaxSize, CmdGetDeviceMem:
		return g.checkDevice(cmd, dev, rsp)
	case CmdAllocBuffer:
		return g.checkAlloc(s, dev, req, rsp)
	case CmdBufferGetBase:
		return g.checkBase(s, req, rsp)
	case CmdSetTensorHash, CmdCopyTensor:
		if rsp[0] > 1 {
			return g.broken("result %d where 0 or 1 is allowed", rsp[0])
		}
	case CmdGetAllocSize:
		return g.checkAllocSize(dev, req, rsp)
	}
	return nil
}

// checkDevice checks what a server says of its device dev: an alignment,
// a maximum buffer size, its memory. Each must be what it said the first
// time: the native client keeps some of them for the life of the process.
func (g *Guard) checkDevice(cmd byte, dev uint32, rsp []byte) error {
	v := binary.LittleEndian.Uint64(rsp)
	g.mu.Lock()
	defer g.mu.Unlock()
	switch cmd {
	case CmdGetAlignment:
		if v == 0 || v&(v-1) != 0 || v > rpcMaxAlignment {
			return g.broken("alignment %d of device %d is not a power of two up to %d", v, dev, rpcMaxAlignment)
		}
		return g.steady(g.align, dev, v, "alignment %d of device %d, %d before")
	case CmdGetMaxSize:
		if v < max(g.align[dev], 1) {
			return g.broken("maximum buffer size %d of device %d is below its alignment %d", v, dev, g.align[dev])
		}
		return g.steady(g.maxSize, dev, v, "maximum buffer size %d of device %d, %d before")
	default: // CmdGetDeviceMem
		total := binary.LittleEndian.Uint64(rsp[8:])
		if v > total {
			return g.broken("%d bytes free of %d on device %d", v, total, dev)
		}
		return g.steady(g.total, dev, total, "%d bytes of memory on device %d, %d before")
	}
}

// steady records v as device dev's answer in m the first time, and
// refuses an answer that differs from it; format says so of v, dev and
// the first answer. The caller holds g.mu.
func (g *Guard) steady(m map[uint32]uint64, dev uint32, v uint64, format string) error {
	if old, ok := m[dev]; ok && old != v {
		return g.broken(format, v, dev, old)
	}
	m[dev] = v
	return nil
}

// checkAlloc checks the buffer ALLOC_BUFFER handed out on device dev and
// records it on the connection.
func (g *Guard) checkAlloc(s *rpcSession, dev uint32, req, rsp []byte) error {
	if len(req) != 12 {
		return nil
	}
	asked, h, size := binary.LittleEndian.Uint64(req[4:]), binary.LittleEndian.Uint64(rsp), binary.LittleEndian.Uint64(rsp[8:])
	if h == 0 {
		if size != 0 {
			return g.broken("a failed allocation of %d bytes on device %d with size %d", asked, dev, size)
		}
		return nil
	}
	if _, dup := s.buffers[h]; dup {
		return g.broken("buffer handle %#x handed out twice", h)
	}
	if size < asked || size-asked > rpcAllocSlack {
		return g.broken("a buffer of %d bytes for %d asked on device %d", size, asked, dev)
	}
	s.buffers[h] = rpcBuffer{dev: dev, size: size}
	return nil
}

// checkBase checks a buffer's base address: aligned as its device's
// buffers are, and the buffer within an address space.
func (g *Guard) checkBase(s *rpcSession, req, rsp []byte) error {
	if len(req) != 8 {
		return nil
	}
	h := binary.LittleEndian.Uint64(req)
	b, ok := s.buffers[h]
	if !ok {
		return nil // refused before it was sent
	}
	base := binary.LittleEndian.Uint64(rsp)
	g.mu.Lock()
	a := max(g.align[b.dev], 1)
	g.mu.Unlock()
	if base == 0 || base%a != 0 {
		return g.broken("base address %#x of buffer %#x is not %d-aligned (or null)", base, h, a)
	}
	if end, c := bits.Add64(base, b.size, 0); c != 0 || end > rpcMaxAddress {
		return g.broken("base address %#x of a %d-byte buffer ends past %#x", base, b.size, uint64(rpcMaxAddress))
	}
	return nil
}

// checkAllocSize checks the allocation size of a tensor on device dev:
// its bytes at least, and at most their row padding, or room for the
// ops whose allocation may grow, within the device's maximum.
func (g *Guard) checkAllocSize(dev uint32, req, rsp []byte) error {
	if len(req) < 4+TensorSize {
		return nil
	}
	t := req[4:]
	nb, ok := TensorNBytes(t)
	if !ok {
		return nil // not a tensor the guard can size
	}
	v := binary.LittleEndian.Uint64(rsp)
	hi := nb + rpcRowPad(t)
	if rpcOpMayExpand[binary.LittleEndian.Uint32(t[TensorOp:])] {
		// ops whose allocation may grow get room; weights and other
		// tensors get padding only
		hi = 2*nb + 64<<20
	}
	g.mu.Lock()
	if m, ok := g.maxSize[dev]; ok {
		hi = min(hi, max(m, nb))
	}
	g.mu.Unlock()
	if v < nb || v > hi {
		return g.broken("an allocation size of %d bytes for a tensor of %d on device %d (at most %d allowed)", v, nb, dev, hi)
	}
	return nil
}

// synthesize answers a command the server can no longer answer.
func (g *Guard) synthesize(client net.Conn, cmd byte, req []byte) error {
	size := ReplySize[cmd]
	var rsp []byte
	switch {
	case size == -1:
		return nil
	case size == -2: // GET_TENSOR: rpc_tensor, offset, size
		n := rpcTail(req)
		var rh [8]byte
		binary.LittleEndian.PutUint64(rh[:], n)
		if _, err := client.Write(rh[:]); err != nil {
			return err
		}
		zero := make([]byte, min(n, 1<<20))
		for left := n; left > 0; {
			k := min(uint64(len(zero)), left)
			if _, err := client.Write(zero[:k]); err != nil {
				return err
			}
			left -= k
		}
		return nil
	default:
		g.mu.Lock()
		rsp = g.answers[string(append([]byte{cmd}, req...))]
		g.mu.Unlock()
		if rsp == nil {
			rsp = make([]byte, size)
			switch cmd {
			case CmdHello:
				rsp[0], rsp[1] = ProtoMajor, ProtoMinor
			case CmdDevCount:
				binary.LittleEndian.PutUint32(rsp, max(g.devices, 1))
			case CmdGetAlignment:
				binary.LittleEndian.PutUint64(rsp, 32)
			case CmdGetMaxSize:
				binary.LittleEndian.PutUint64(rsp, 1<<62)
			case CmdBufferGetBase:
				// never dereferenced here; aligned for any alignment
				// the guard lets through
				binary.LittleEndian.PutUint64(rsp, rpcMaxAlignment)
			case CmdGetAllocSize:
				binary.LittleEndian.PutUint64(rsp, tensorBytes(req))
			}
			// ALLOC_BUFFER: a zero remote pointer, the allocation fails;
			// SET_TENSOR_HASH, COPY_TENSOR: 0, not done; memory: 0 free
		}
	}
	var rh [8]byte
	binary.LittleEndian.PutUint64(rh[:], uint64(len(rsp)))
	_, err := client.Write(append(rh[:], rsp...))
	return err
}

// Rename replaces the guard's local address by the endpoint in a native
// name or description ("RPC0[127.0.0.1:40123]" → "RPC0[host:50052]").
func (g *Guard) Rename(s string) string { return strings.ReplaceAll(s, g.local, g.remote) }

// Addr is the guard's loopback address, where the native client connects.
func (g *Guard) Addr() string { return g.local }

// Remote is the endpoint the guard relays to.
func (g *Guard) Remote() string { return g.remote }

// Traffic is the bytes the guard forwarded to the server and back.
func (g *Guard) Traffic() (sent, received uint64) { return g.sent.Load(), g.received.Load() }

// Close stops taking connections (those open are relayed until they end).
func (g *Guard) Close() error { return g.ln.Close() }
