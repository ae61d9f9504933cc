package ggml

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

// The commands of protocol 7 and the size of their replies (-1: none;
// -2: the size the request asks for, GET_TENSOR).
const (
	rpcCmdAllocBuffer   = 0
	rpcCmdGetAlignment  = 1
	rpcCmdGetMaxSize    = 2
	rpcCmdBufferGetBase = 3
	rpcCmdFreeBuffer    = 4
	rpcCmdBufferClear   = 5
	rpcCmdSetTensor     = 6
	rpcCmdSetTensorHash = 7
	rpcCmdGetTensor     = 8
	rpcCmdCopyTensor    = 9
	rpcCmdGraphCompute  = 10
	rpcCmdGetDeviceMem  = 11
	rpcCmdInitTensor    = 12
	rpcCmdGetAllocSize  = 13
	rpcCmdGraphRecomp   = 16
	rpcCmdMemsetTensor  = 17
	rpcCmdCount         = 18
)

var rpcReplySize = [rpcCmdCount]int{
	rpcCmdAllocBuffer:   16,
	rpcCmdGetAlignment:  8,
	rpcCmdGetMaxSize:    8,
	rpcCmdBufferGetBase: 8,
	rpcCmdFreeBuffer:    -1,
	rpcCmdBufferClear:   -1,
	rpcCmdSetTensor:     -1,
	rpcCmdSetTensorHash: 1,
	rpcCmdGetTensor:     -2,
	rpcCmdCopyTensor:    1,
	rpcCmdGraphCompute:  -1,
	rpcCmdGetDeviceMem:  16,
	rpcCmdInitTensor:    -1,
	rpcCmdGetAllocSize:  8,
	rpcCmdHello:         4 + rpcConnCapsSize,
	rpcCmdDevCount:      4,
	rpcCmdGraphRecomp:   -1,
	rpcCmdMemsetTensor:  -1,
}

// The layout of a packed rpc_tensor (296 bytes) and of the requests that
// hold one.
const (
	rpcTensorSize   = 296
	rpcTensorType   = 8
	rpcTensorBuffer = 12
	rpcTensorNe     = 20
	rpcTensorNb     = 36
	rpcTensorOp     = 52
)

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
var rpcRemembered = map[byte]bool{rpcCmdGetAlignment: true, rpcCmdGetMaxSize: true, rpcCmdGetDeviceMem: true, rpcCmdDevCount: true}

// ErrRPCFailed is wrapped by Device.Err when an RPC server failed, stopped
// answering or broke the protocol while in use.
var ErrRPCFailed = errors.New("rpc server failed")

// RPCOptions tune how an endpoint is registered.
type RPCOptions struct {
	// Timeout bounds the connection and handshake check (default 5s).
	Timeout time.Duration
	// IOTimeout bounds every read and write to the server once in use: a
	// server silent for longer is declared failed (default 60s, which
	// leaves room for long graph computations).
	IOTimeout time.Duration
	// Direct points the native client at the endpoint itself, without the
	// guard: as llama.cpp does, and a failing server then aborts the
	// process.
	Direct bool
}

// rpcGuard relays one endpoint.
type rpcGuard struct {
	remote    string
	local     string // the address the native client is given
	ln        net.Listener
	ioTimeout time.Duration
	devices   uint32 // the server's device count (0: not known)

	mu       sync.Mutex
	err      error // first failure of the current session
	broke    bool  // err is a broken protocol: it stays for good
	conns    int   // client connections open
	answers  map[string][]byte
	align    map[uint32]uint64 // per device: alignment and maximum
	maxSize  map[uint32]uint64 // buffer size and memory, as first
	total    map[uint32]uint64 // answered
	sent     atomic.Uint64     // bytes forwarded to the server
	received atomic.Uint64
}

func newRPCGuard(remote string, ioTimeout time.Duration, devices uint32) (*rpcGuard, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, fmt.Errorf("ggml: rpc guard for %s: %w", remote, err)
	}
	if ioTimeout <= 0 {
		ioTimeout = 60 * time.Second
	}
	g := &rpcGuard{remote: remote, local: ln.Addr().String(), ln: ln, ioTimeout: ioTimeout, devices: devices,
		answers: map[string][]byte{}, align: map[uint32]uint64{}, maxSize: map[uint32]uint64{}, total: map[uint32]uint64{}}
	go g.accept()
	return g, nil
}

// accept takes the native client's connections for the life of the
// process. A failure to take one does not end it (the client, connected
// in the listener's backlog, would wait for its reply forever): out of
// descriptors, the guard gives up the one it keeps in reserve to take the
// connection, which then gets well-formed replies even if the server
// cannot be dialled (the failure is recorded), and takes a reserve again
// once it can; other failures (a connection aborted before it was taken)
// are retried with a growing pause.
func (g *rpcGuard) accept() {
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
func (g *rpcGuard) Err() error {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.err
}

func (g *rpcGuard) fail(op string, err error) {
	var ne net.Error
	if errors.As(err, &ne) && ne.Timeout() {
		err = fmt.Errorf("no answer within %v", g.ioTimeout)
	} else if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) {
		err = errors.New("connection closed by the server")
	}
	g.mu.Lock()
	if g.err == nil {
		g.err = fmt.Errorf("%w: %s: %s: %v", ErrRPCFailed, g.remote, op, err)
		g.broke = errors.Is(err, errBroken)
	}
	g.mu.Unlock()
}

// rpcBuffer is a buffer the server handed out on a connection.
type rpcBuffer struct {
	dev  uint32
	size uint64
}

// rpcSession is what the guard knows of one client connection: the
// buffer handles the server handed out on it (a server keeps buffers per
// connection).
type rpcSession struct {
	buffers map[uint64]rpcBuffer
}

// serve relays one client connection until the client closes it.
func (g *rpcGuard) serve(client net.Conn) {
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
	var server net.Conn
	if !failed {
		var err error
		server, err = net.DialTimeout("tcp", g.remote, g.ioTimeout)
		if err != nil {
			g.fail("connect", err)
		}
	}
	defer func() {
		if server != nil {
			server.Close()
		}
	}()
	s := &rpcSession{buffers: map[uint64]rpcBuffer{}}
	hdr := make([]byte, 9)
	buf := make([]byte, 1<<20)
	for {
		if _, err := io.ReadFull(client, hdr); err != nil {
			return // the client is done
		}
		cmd, size := hdr[0], binary.LittleEndian.Uint64(hdr[1:])
		if int(cmd) >= rpcCmdCount {
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
		if server != nil && g.Err() == nil {
			if err := s.checkRequest(cmd, req); err != nil {
				g.fail(rpcCmdName(cmd), err)
			}
		}
		if server != nil && g.Err() == nil {
			consumed, err := g.forward(s, client, server, hdr, req, size, buf)
			if err == nil {
				continue
			}
			if errors.Is(err, errClientGone) {
				return
			}
			// the server failed: the rest of the request is drained and
			// the reply made up below
			if req == nil {
				size -= consumed
			}
		}
		if server != nil {
			server.Close()
			server = nil
		}
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

var (
	errClientGone   = errors.New("client gone")
	errServerFailed = errors.New("server failed")
	errBroken       = fmt.Errorf("the reply breaks RPC protocol %d.%d", rpcProtoMajor, rpcProtoMinor)
)

// streamPiece is the most tensor data relayed under one write deadline.
const streamPiece = 4 << 20

// forward sends one command to the server and relays its reply once it
// has been checked. On a server failure or a reply that breaks the
// protocol the guard is marked failed and forward says how many bytes of
// a streamed request it had taken from the client.
func (g *rpcGuard) forward(s *rpcSession, client, server net.Conn, hdr, req []byte, size uint64, buf []byte) (consumed uint64, err error) {
	cmd := hdr[0]
	if cmd == rpcCmdHello && len(req) == rpcConnCapsSize {
		// no transport upgrade (RDMA): the guard relays plain TCP only
		clear(req)
	}
	server.SetWriteDeadline(time.Now().Add(g.ioTimeout))
	if _, err := server.Write(hdr); err != nil {
		g.fail("send "+rpcCmdName(cmd), err)
		return 0, errServerFailed
	}
	if req != nil {
		if _, err := server.Write(req); err != nil {
			g.fail("send "+rpcCmdName(cmd), err)
			return 0, errServerFailed
		}
	} else {
		// tensor data is relayed unread, a buffer at a time, under one
		// write deadline per streamPiece. (Splicing would save the copy,
		// but when the server fails it loses count of the bytes taken
		// from the client, which the guard must drain exactly to keep
		// answering it.)
		var deadline uint64
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
				g.fail("send "+rpcCmdName(cmd), err)
				return consumed, errServerFailed
			}
		}
	}
	g.sent.Add(9 + size)
	if cmd == rpcCmdFreeBuffer && len(req) == 8 {
		delete(s.buffers, binary.LittleEndian.Uint64(req))
	}
	want := rpcReplySize[cmd]
	if want == -1 {
		return consumed, nil
	}
	server.SetReadDeadline(time.Now().Add(g.ioTimeout))
	var rh [8]byte
	if _, err := io.ReadFull(server, rh[:]); err != nil {
		g.fail(rpcCmdName(cmd), err)
		return consumed, errServerFailed
	}
	n := binary.LittleEndian.Uint64(rh[:])
	if want == -2 {
		// GET_TENSOR: exactly the bytes asked for, streamed
		if len(req) < 8 || n != binary.LittleEndian.Uint64(req[len(req)-8:]) {
			g.fail(rpcCmdName(cmd), g.broken("a reply of %d bytes to a request for %d", n, rpcTail(req)))
			return consumed, errServerFailed
		}
		return consumed, g.relay(client, server, cmd, rh, n, buf)
	}
	if n != uint64(want) {
		g.fail(rpcCmdName(cmd), g.broken("a reply of %d bytes where the protocol has %d", n, want))
		return consumed, errServerFailed
	}
	rsp := make([]byte, n)
	if _, err := io.ReadFull(server, rsp); err != nil {
		g.fail(rpcCmdName(cmd), err)
		return consumed, errServerFailed
	}
	if cmd == rpcCmdHello {
		clear(rsp[4:])
	}
	if err := g.checkReply(s, cmd, req, rsp); err != nil {
		g.fail(rpcCmdName(cmd), err)
		return consumed, errServerFailed
	}
	if cmd == rpcCmdBufferGetBase {
		// every tensor address the client sends derives from a base: a
		// wrong one makes it send writes outside the buffer, which an
		// honest server answers by aborting. Asked twice, a base that
		// is not the server's own does not come back the same.
		again, err := g.ask(server, hdr, req, len(rsp))
		if err != nil {
			g.fail(rpcCmdName(cmd), err)
			return consumed, errServerFailed
		}
		if !bytes.Equal(again, rsp) {
			g.fail(rpcCmdName(cmd), g.broken("base address %#x, then %#x for the same buffer", binary.LittleEndian.Uint64(rsp), binary.LittleEndian.Uint64(again)))
			return consumed, errServerFailed
		}
	}
	if rpcRemembered[cmd] {
		g.mu.Lock()
		g.answers[string(append([]byte{cmd}, req...))] = rsp
		g.mu.Unlock()
	}
	if _, err := client.Write(append(rh[:], rsp...)); err != nil {
		return consumed, errClientGone
	}
	g.received.Add(8 + n)
	return consumed, nil
}

// ask sends a command of the guard's own (a copy of the client's) and
// reads its fixed-size reply.
func (g *rpcGuard) ask(server net.Conn, hdr, req []byte, want int) ([]byte, error) {
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
func (g *rpcGuard) relay(client, server net.Conn, cmd byte, rh [8]byte, n uint64, buf []byte) error {
	if _, err := client.Write(rh[:]); err != nil {
		return errClientGone
	}
	for left := n; left > 0; {
		k := min(uint64(len(buf)), left)
		server.SetReadDeadline(time.Now().Add(g.ioTimeout))
		if _, err := io.ReadFull(server, buf[:k]); err != nil {
			g.fail(rpcCmdName(cmd), err)
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
func (g *rpcGuard) broken(format string, args ...any) error {
	return fmt.Errorf("%w: %s", errBroken, fmt.Sprintf(format, args...))
}

// checkRequest refuses a request about a buffer the server never handed
// out on this connection (the native client only has handles from replies
// the guard let through, so this is a server's doing).
func (s *rpcSession) checkRequest(cmd byte, req []byte) error {
	var h uint64
	switch cmd {
	case rpcCmdBufferGetBase, rpcCmdFreeBuffer, rpcCmdBufferClear:
		if len(req) < 8 {
			return nil
		}
		h = binary.LittleEndian.Uint64(req)
	case rpcCmdSetTensorHash, rpcCmdGetTensor, rpcCmdInitTensor, rpcCmdMemsetTensor, rpcCmdCopyTensor:
		if len(req) < rpcTensorSize {
			return nil
		}
		h = binary.LittleEndian.Uint64(req[rpcTensorBuffer:])
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
func (g *rpcGuard) checkReply(s *rpcSession, cmd byte, req, rsp []byte) error {
	u64 := func(b []byte) uint64 { return binary.LittleEndian.Uint64(b) }
	dev := uint32(0)
	if len(req) >= 4 {
		dev = binary.LittleEndian.Uint32(req)
	}
	switch cmd {
	case rpcCmdHello:
		if rsp[0] != rpcProtoMajor || rsp[1] > rpcProtoMinor {
			return g.broken("the server says it speaks %d.%d.%d", rsp[0], rsp[1], rsp[2])
		}
	case rpcCmdDevCount:
		if n := binary.LittleEndian.Uint32(rsp); g.devices != 0 && n != g.devices {
			return g.broken("%d devices, %d when the endpoint was registered", n, g.devices)
		}
	case rpcCmdGetAlignment:
		a := u64(rsp)
		if a == 0 || a&(a-1) != 0 || a > rpcMaxAlignment {
			return g.broken("alignment %d of device %d is not a power of two up to %d", a, dev, rpcMaxAlignment)
		}
		g.mu.Lock()
		defer g.mu.Unlock()
		if old, ok := g.align[dev]; ok && old != a {
			return g.broken("alignment %d of device %d, %d before", a, dev, old)
		}
		g.align[dev] = a
	case rpcCmdGetMaxSize:
		m := u64(rsp)
		g.mu.Lock()
		defer g.mu.Unlock()
		if m < max(g.align[dev], 1) {
			return g.broken("maximum buffer size %d of device %d is below its alignment %d", m, dev, g.align[dev])
		}
		if old, ok := g.maxSize[dev]; ok && old != m {
			return g.broken("maximum buffer size %d of device %d, %d before", m, dev, old)
		}
		g.maxSize[dev] = m
	case rpcCmdGetDeviceMem:
		free, total := u64(rsp), u64(rsp[8:])
		if free > total {
			return g.broken("%d bytes free of %d on device %d", free, total, dev)
		}
		g.mu.Lock()
		defer g.mu.Unlock()
		if old, ok := g.total[dev]; ok && old != total {
			return g.broken("%d bytes of memory on device %d, %d before", total, dev, old)
		}
		g.total[dev] = total
	case rpcCmdAllocBuffer:
		if len(req) != 12 {
			return nil
		}
		asked, h, size := u64(req[4:]), u64(rsp), u64(rsp[8:])
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
	case rpcCmdBufferGetBase:
		if len(req) != 8 {
			return nil
		}
		b, ok := s.buffers[u64(req)]
		if !ok {
			return nil // refused before it was sent
		}
		base := u64(rsp)
		g.mu.Lock()
		a := max(g.align[b.dev], 1)
		g.mu.Unlock()
		if base == 0 || base%a != 0 {
			return g.broken("base address %#x of buffer %#x is not %d-aligned (or null)", base, u64(req), a)
		}
		if end, c := bits.Add64(base, b.size, 0); c != 0 || end > rpcMaxAddress {
			return g.broken("base address %#x of a %d-byte buffer ends past %#x", base, b.size, uint64(rpcMaxAddress))
		}
	case rpcCmdSetTensorHash, rpcCmdCopyTensor:
		if rsp[0] > 1 {
			return g.broken("result %d where 0 or 1 is allowed", rsp[0])
		}
	case rpcCmdGetAllocSize:
		if len(req) < 4+rpcTensorSize {
			return nil
		}
		t := req[4:]
		nb, ok := rpcTensorNBytes(t)
		if !ok {
			return nil // not a tensor the guard can size
		}
		v := u64(rsp)
		hi := nb + rpcRowPad(t)
		if rpcOpMayExpand[binary.LittleEndian.Uint32(t[rpcTensorOp:])] {
			// ops whose allocation may grow get room; weights and
			// other tensors get padding only
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
	}
	return nil
}

// rpcOpMayExpand are the ops whose allocation a backend may make larger
// than the tensor (ggml_op_alloc_size_may_expand of the pin: CUMSUM,
// MUL_MAT, MUL_MAT_ID, ARGSORT, TOP_K, FLASH_ATTN_EXT), by enum ggml_op's
// numbers.
var rpcOpMayExpand = map[uint32]bool{16: true, uint32(OpMulMat): true, uint32(OpMulMatID): true, 69: true, 70: true, 74: true}

// rpcTensorNBytes is ggml_nbytes of a packed rpc_tensor, false when its
// type is unknown or its size overflows.
func rpcTensorNBytes(t []byte) (uint64, bool) {
	typ := Type(binary.LittleEndian.Uint32(t[rpcTensorType:]))
	tr, ok := typ.Traits()
	if !ok || tr.BlockSize <= 0 || tr.TypeSize <= 0 {
		return 0, false
	}
	var ne, nb [4]uint64
	for i := range 4 {
		ne[i] = uint64(binary.LittleEndian.Uint32(t[rpcTensorNe+4*i:]))
		nb[i] = uint64(binary.LittleEndian.Uint32(t[rpcTensorNb+4*i:]))
		if ne[i] == 0 {
			return 0, true
		}
	}
	var n uint64
	if tr.BlockSize == 1 {
		n = uint64(tr.TypeSize)
	} else {
		hi, lo := bits.Mul64(ne[0], nb[0])
		if hi != 0 {
			return 0, false
		}
		n = lo / uint64(tr.BlockSize)
	}
	for i := range 4 {
		if i == 0 && tr.BlockSize != 1 {
			continue
		}
		hi, lo := bits.Mul64(ne[i]-1, nb[i])
		var c uint64
		n, c = bits.Add64(n, lo, 0)
		if hi != 0 || c != 0 {
			return 0, false
		}
	}
	return n, true
}

// rpcRowPad is the most a backend pads a tensor's allocation: one row of
// rpcPadColumns columns, plus an alignment's worth.
func rpcRowPad(t []byte) uint64 {
	typ := Type(binary.LittleEndian.Uint32(t[rpcTensorType:]))
	r, err := typ.RowSize(rpcPadColumns)
	if err != nil || r < 0 {
		r = 0
	}
	return uint64(r) + rpcMaxAlignment/256
}

// rpcTail is the last u64 of a request (GET_TENSOR's size), 0 if short.
func rpcTail(req []byte) uint64 {
	if len(req) < 8 {
		return 0
	}
	return binary.LittleEndian.Uint64(req[len(req)-8:])
}

// synthesize answers a command the server can no longer answer.
func (g *rpcGuard) synthesize(client net.Conn, cmd byte, req []byte) error {
	size := rpcReplySize[cmd]
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
			case rpcCmdHello:
				rsp[0], rsp[1] = rpcProtoMajor, rpcProtoMinor
			case rpcCmdDevCount:
				binary.LittleEndian.PutUint32(rsp, max(g.devices, 1))
			case rpcCmdGetAlignment:
				binary.LittleEndian.PutUint64(rsp, 32)
			case rpcCmdGetMaxSize:
				binary.LittleEndian.PutUint64(rsp, 1<<62)
			case rpcCmdBufferGetBase:
				// never dereferenced here; aligned for any alignment
				// the guard lets through
				binary.LittleEndian.PutUint64(rsp, rpcMaxAlignment)
			case rpcCmdGetAllocSize:
				binary.LittleEndian.PutUint64(rsp, rpcTensorBytes(req))
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

// rpcTensorBytes sizes the tensor in a GET_ALLOC_SIZE request (a uint32
// device, then a packed rpc_tensor): ggml_nbytes, which is what the client
// needs at least; 0 for a request too short to hold one.
func rpcTensorBytes(req []byte) uint64 {
	if len(req) < 4+rpcTensorSize {
		return 0
	}
	n, ok := rpcTensorNBytes(req[4:])
	if !ok {
		return 0
	}
	return n
}

func rpcCmdName(cmd byte) string {
	names := [...]string{"ALLOC_BUFFER", "GET_ALIGNMENT", "GET_MAX_SIZE", "BUFFER_GET_BASE", "FREE_BUFFER", "BUFFER_CLEAR", "SET_TENSOR", "SET_TENSOR_HASH",
		"GET_TENSOR", "COPY_TENSOR", "GRAPH_COMPUTE", "GET_DEVICE_MEMORY", "INIT_TENSOR", "GET_ALLOC_SIZE", "HELLO", "DEVICE_COUNT", "GRAPH_RECOMPUTE", "MEMSET_TENSOR"}
	if int(cmd) < len(names) {
		return names[cmd]
	}
	return fmt.Sprintf("command %d", cmd)
}

// rename replaces the guard's local address by the endpoint in a native
// name or description ("RPC0[127.0.0.1:40123]" → "RPC0[host:50052]").
func (g *rpcGuard) rename(s string) string { return strings.ReplaceAll(s, g.local, g.remote) }
