package ggml

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// ggml's RPC client aborts the process when a server stops answering in the
// middle of a command (GGML_ABORT "Remote RPC server crashed"). A model
// spread over several hosts must not die with one of them, so by default
// each endpoint is reached through a guard: a relay on the loopback
// interface that forwards the protocol byte for byte and, when the server
// fails or stays silent past the I/O timeout, records the error and from then
// on answers the client itself with well-formed replies (allocations fail,
// reads return zeros, writes are dropped). The native client never sees a
// broken connection; Go code asks Device.Err and stops.

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

// rpcRemembered are the per-device queries whose last live answer is
// replayed once the server is gone (the client asks them again when it
// makes new objects). Their requests are a device index at most, so the
// answers stay few; queries about tensors or buffers are made up instead.
var rpcRemembered = map[byte]bool{rpcCmdGetAlignment: true, rpcCmdGetMaxSize: true, rpcCmdGetDeviceMem: true, rpcCmdDevCount: true}

// ErrRPCFailed is wrapped by Device.Err when an RPC server failed or stopped
// answering while in use.
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

	mu       sync.Mutex
	err      error // first failure of the current session
	conns    int   // client connections open
	answers  map[string][]byte
	sent     atomic.Uint64 // bytes forwarded to the server
	received atomic.Uint64
}

func newRPCGuard(remote string, ioTimeout time.Duration) (*rpcGuard, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, fmt.Errorf("ggml: rpc guard for %s: %w", remote, err)
	}
	if ioTimeout <= 0 {
		ioTimeout = 60 * time.Second
	}
	g := &rpcGuard{remote: remote, local: ln.Addr().String(), ln: ln, ioTimeout: ioTimeout, answers: map[string][]byte{}}
	go g.accept()
	return g, nil
}

func (g *rpcGuard) accept() {
	for {
		c, err := g.ln.Accept()
		if err != nil {
			return
		}
		go g.serve(c)
	}
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
	}
	g.mu.Unlock()
}

// serve relays one client connection until the client closes it.
func (g *rpcGuard) serve(client net.Conn) {
	defer client.Close()
	g.mu.Lock()
	if g.conns == 0 {
		// a new session: the native client has dropped every object of
		// the last one, so an old failure no longer applies
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
	hdr := make([]byte, 9)
	buf := make([]byte, 64<<10)
	for {
		if _, err := io.ReadFull(client, hdr); err != nil {
			return // the client is done
		}
		cmd, size := hdr[0], binary.LittleEndian.Uint64(hdr[1:])
		if int(cmd) >= rpcCmdCount {
			return // not protocol 7: drop the connection
		}
		// small requests are kept (replies are synthesised from them);
		// big ones (tensor data) are streamed
		var req []byte
		if size <= 4096 {
			req = make([]byte, size)
			if _, err := io.ReadFull(client, req); err != nil {
				return
			}
		}
		if server != nil && g.Err() == nil {
			consumed, err := g.forward(client, server, hdr, req, size, buf)
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
)

// forward sends one command to the server and relays its reply. On a server
// failure the guard is marked failed and forward says how many bytes of a
// streamed request it had taken from the client.
func (g *rpcGuard) forward(client, server net.Conn, hdr, req []byte, size uint64, buf []byte) (consumed uint64, err error) {
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
		for consumed < size {
			n := min(uint64(len(buf)), size-consumed)
			if _, err := io.ReadFull(client, buf[:n]); err != nil {
				return consumed, errClientGone
			}
			consumed += n
			server.SetWriteDeadline(time.Now().Add(g.ioTimeout))
			if _, err := server.Write(buf[:n]); err != nil {
				g.fail("send "+rpcCmdName(cmd), err)
				return consumed, errServerFailed
			}
		}
	}
	g.sent.Add(9 + size)
	if rpcReplySize[cmd] == -1 {
		return consumed, nil
	}
	server.SetReadDeadline(time.Now().Add(g.ioTimeout))
	var rh [8]byte
	if _, err := io.ReadFull(server, rh[:]); err != nil {
		g.fail(rpcCmdName(cmd), err)
		return consumed, errServerFailed
	}
	n := binary.LittleEndian.Uint64(rh[:])
	if n <= 4096 {
		rsp := make([]byte, n)
		if _, err := io.ReadFull(server, rsp); err != nil {
			g.fail(rpcCmdName(cmd), err)
			return consumed, errServerFailed
		}
		if cmd == rpcCmdHello && len(rsp) == 4+rpcConnCapsSize {
			clear(rsp[4:])
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
	if _, err := client.Write(rh[:]); err != nil {
		return consumed, errClientGone
	}
	for left := n; left > 0; {
		k := min(uint64(len(buf)), left)
		server.SetReadDeadline(time.Now().Add(g.ioTimeout))
		if _, err := io.ReadFull(server, buf[:k]); err != nil {
			// the client waits for the rest of the reply: zeros
			g.fail(rpcCmdName(cmd), err)
			clear(buf)
			for ; left > 0; left -= min(uint64(len(buf)), left) {
				if _, err := client.Write(buf[:min(uint64(len(buf)), left)]); err != nil {
					return consumed, errClientGone
				}
			}
			server.Close()
			return consumed, nil // the reply is complete; the server is gone for the next command
		}
		if _, err := client.Write(buf[:k]); err != nil {
			return consumed, errClientGone
		}
		left -= k
	}
	g.received.Add(8 + n)
	return consumed, nil
}

// synthesize answers a command the server can no longer answer.
func (g *rpcGuard) synthesize(client net.Conn, cmd byte, req []byte) error {
	size := rpcReplySize[cmd]
	var rsp []byte
	switch {
	case size == -1:
		return nil
	case size == -2: // GET_TENSOR: rpc_tensor, offset, size
		n := uint64(0)
		if len(req) >= 8 {
			n = binary.LittleEndian.Uint64(req[len(req)-8:])
		}
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
			case rpcCmdGetAlignment:
				binary.LittleEndian.PutUint64(rsp, 32)
			case rpcCmdGetMaxSize:
				binary.LittleEndian.PutUint64(rsp, 1<<62)
			case rpcCmdBufferGetBase:
				binary.LittleEndian.PutUint64(rsp, 1<<12) // never dereferenced here
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
// device, then a packed rpc_tensor with ne[4] at 20 and nb[4] at 36): the
// largest ne[i]·nb[i] over the row dimensions 1-3, which is ggml_nbytes for
// contiguous tensors (nb[0] counts blocks, not elements, so dimension 0 is
// left out).
func rpcTensorBytes(req []byte) uint64 {
	const ne, nb = 4 + 20, 4 + 36
	if len(req) < nb+16 {
		return 0
	}
	n := uint64(0)
	for i := 1; i < 4; i++ {
		n = max(n, uint64(binary.LittleEndian.Uint32(req[ne+4*i:]))*uint64(binary.LittleEndian.Uint32(req[nb+4*i:])))
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
