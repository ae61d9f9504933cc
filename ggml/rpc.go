package ggml

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/ggload/ggload/bindings"
	"github.com/ggload/ggload/ggml/internal/rpcrelay"
)

// rpcMaxDevices bounds the device count a server may announce (the native
// client makes a device for each; a scheduler takes 16 backends).
const rpcMaxDevices = 64

// ErrRPCFailed is wrapped by Device.Err when an RPC server failed, stopped
// answering or broke the protocol while in use.
var ErrRPCFailed = rpcrelay.ErrFailed

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
	// Memory, when not 0, is the most memory (free and total) each of the
	// server's devices reports, in bytes: a budget for a host shared with
	// other work, which placement and -fit then keep to. The server's own
	// figures still apply where they are lower. It needs the guard (not
	// Direct).
	Memory uint64
}

// ErrRPCUnreachable is wrapped by AddRPCServer's error when an endpoint does
// not answer as a compatible ggml-rpc-server within the timeout.
var ErrRPCUnreachable = errors.New("rpc endpoint unreachable")

// ErrRPCEndpoint is wrapped by the error for an endpoint that is not
// host:port with a port from 1 to 65535 (CheckRPCEndpoint).
var ErrRPCEndpoint = errors.New("malformed rpc endpoint")

// CheckRPCEndpoint checks an endpoint's form, host:port (a host name, an
// IPv4 address, or an IPv6 one in brackets), without reaching it.
func CheckRPCEndpoint(endpoint string) (err error) {
	defer placed(&err, "rpc_check_endpoint", at{endpoint: endpoint})
	host, port, err := net.SplitHostPort(endpoint)
	if err != nil || host == "" || strings.ContainsFunc(host, func(r rune) bool { return r <= ' ' || r == 0x7f }) {
		return fmt.Errorf("%w: %q is not host:port", ErrRPCEndpoint, endpoint)
	}
	if p, err := strconv.Atoi(port); err != nil || p <= 0 || p > 65535 {
		return fmt.Errorf("%w: %q has no port from 1 to 65535", ErrRPCEndpoint, endpoint)
	}
	return nil
}

// DefaultRPCTimeout bounds an endpoint's check when the context has no
// deadline.
const DefaultRPCTimeout = 5 * time.Second

// ProbeRPC connects to a ggml-rpc-server, performs the protocol handshake and
// asks for its device count, within ctx (and DefaultRPCTimeout when ctx has
// no deadline). It never involves native code, so a dead or foreign
// endpoint is an error, not a crash.
func ProbeRPC(ctx context.Context, endpoint string) (devices uint32, err error) {
	defer placed(&err, "rpc_probe", at{endpoint: endpoint})
	return probeRPC(ctx, endpoint, DefaultRPCTimeout)
}

func probeRPC(ctx context.Context, endpoint string, timeout time.Duration) (devices uint32, err error) {
	if timeout <= 0 {
		timeout = DefaultRPCTimeout
	}
	if _, ok := ctx.Deadline(); !ok {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, timeout)
		defer cancel()
	}
	deadline, _ := ctx.Deadline()
	timeout = time.Until(deadline)
	if err := CheckRPCEndpoint(endpoint); err != nil {
		return 0, err
	}
	var d net.Dialer
	conn, err := d.DialContext(ctx, "tcp", endpoint)
	if err != nil {
		return 0, fmt.Errorf("%w: %s: %w", ErrRPCUnreachable, endpoint, err)
	}
	defer conn.Close()
	// a cancelled context ends the exchange at once
	stop := context.AfterFunc(ctx, func() { conn.SetDeadline(time.Unix(1, 0)) })
	defer stop()
	if err := conn.SetDeadline(deadline); err != nil {
		return 0, fmt.Errorf("%w: %s: %w", ErrRPCUnreachable, endpoint, err)
	}
	call := func(cmd byte, req []byte, rspSize int) ([]byte, error) {
		msg := make([]byte, 9+len(req))
		msg[0] = cmd
		binary.LittleEndian.PutUint64(msg[1:], uint64(len(req)))
		copy(msg[9:], req)
		if _, err := conn.Write(msg); err != nil {
			return nil, err
		}
		var hdr [8]byte
		if _, err := io.ReadFull(conn, hdr[:]); err != nil {
			return nil, err
		}
		if n := binary.LittleEndian.Uint64(hdr[:]); n != uint64(rspSize) {
			return nil, fmt.Errorf("answered %d bytes where %d were expected (not a ggml-rpc-server of protocol %d.x?)", n, rspSize, rpcrelay.ProtoMajor)
		}
		rsp := make([]byte, rspSize)
		_, err := io.ReadFull(conn, rsp)
		return rsp, err
	}
	hello, err := call(rpcrelay.CmdHello, make([]byte, rpcrelay.ConnCapsSize), 4+rpcrelay.ConnCapsSize)
	if err != nil {
		return 0, fmt.Errorf("%w: %s: handshake: %w", ErrRPCUnreachable, endpoint, wrapTimeout(err, timeout))
	}
	if hello[0] != rpcrelay.ProtoMajor || hello[1] > rpcrelay.ProtoMinor {
		return 0, fmt.Errorf("%w: %s speaks RPC protocol %d.%d.%d, ggml %s needs %d.%d", ErrRPCUnreachable, endpoint, hello[0], hello[1], hello[2], "0.25.1", rpcrelay.ProtoMajor, rpcrelay.ProtoMinor)
	}
	cnt, err := call(rpcrelay.CmdDevCount, nil, 4)
	if err != nil {
		return 0, fmt.Errorf("%w: %s: device count: %w", ErrRPCUnreachable, endpoint, wrapTimeout(err, timeout))
	}
	n := binary.LittleEndian.Uint32(cnt)
	if n > rpcMaxDevices {
		return 0, fmt.Errorf("%w: %s: device count: %d devices announced, more than the %d a server may have (not a ggml-rpc-server?)", ErrRPCUnreachable, endpoint, n, rpcMaxDevices)
	}
	return n, nil
}

func wrapTimeout(err error, timeout time.Duration) error {
	var ne net.Error
	if errors.As(err, &ne) && ne.Timeout() {
		return fmt.Errorf("no answer within %v (is the server busy with another client?)", timeout)
	}
	return err
}

// AddRPCServer checks a ggml-rpc-server endpoint within ctx (ProbeRPC,
// with o.Timeout when ctx has no deadline), registers it with ggml behind
// a guard (see RPCOptions) and returns its devices. Registrations are the
// process's: an endpoint registered before, by any Runtime, is not checked
// again, and its devices are returned.
func (rt *Runtime) AddRPCServer(ctx context.Context, endpoint string, o RPCOptions) (_ []*Device, err error) {
	defer placed(&err, "rpc_add_server", at{endpoint: endpoint})
	if err := rt.begin(); err != nil {
		return nil, err
	}
	defer rt.end()
	// one registration at a time, so that an endpoint is registered once
	rpcAddMu.Lock()
	defer rpcAddMu.Unlock()
	rt.mu.Lock()
	reg, ok := rt.rpc[endpoint]
	rt.mu.Unlock()
	if ok {
		return rt.wrapDevices(reg.devs), nil
	}

	lib := rt.lib
	add, ok := bindings.Proc[func(string) bindings.Reg](lib, lib.RegByName("RPC"), "ggml_backend_rpc_add_server")
	if !ok {
		return nil, fmt.Errorf("ggml: the RPC backend is not loaded from %s (build it: scripts/build-native.sh linux-x64 cpu,rpc --into %s): %w", lib.Loc.Dir, dirBase(lib.Loc.Dir), errors.ErrUnsupported)
	}
	n, err := probeRPC(ctx, endpoint, o.Timeout)
	if err != nil {
		return nil, err
	}
	if n == 0 {
		return nil, fmt.Errorf("%w: %s offers no devices", ErrRPCUnreachable, endpoint)
	}
	if o.Direct && o.Memory != 0 {
		return nil, fmt.Errorf("ggml: rpc %s: a memory budget needs the guard (RPCOptions.Direct is set)", endpoint)
	}
	native := endpoint
	var g *rpcrelay.Guard
	if !o.Direct {
		if g, err = rpcrelay.New(endpoint, o.IOTimeout, n); err != nil {
			return nil, err
		}
		g.SetMemory(o.Memory)
		native = g.Addr()
		// before any name is read and cached
		rt.mu.Lock()
		rt.guards = append(rt.guards, g)
		rt.mu.Unlock()
	}
	// the native client aborts the process when it cannot connect (out of
	// descriptors): make sure it can
	if err := descriptorHeadroom(rpcDescriptors); err != nil {
		return nil, fmt.Errorf("%w: %s: %w", ErrRPCUnreachable, endpoint, err)
	}
	h := add(native)
	if h == 0 {
		if g != nil && g.Err() != nil {
			// the guard's failure is told, not wrapped: a registration that
			// fails is ErrRPCUnreachable, never ErrRPCFailed (a server that
			// failed in use)
			return nil, fmt.Errorf("%w: %s: the RPC backend refused it: %v", ErrRPCUnreachable, endpoint, g.Err())
		}
		return nil, fmt.Errorf("%w: %s: the RPC backend refused it", ErrRPCUnreachable, endpoint)
	}
	reg = &rpcReg{guard: g}
	for i := uintptr(0); i < lib.RegDevCount(h); i++ {
		reg.devs = append(reg.devs, lib.RegDevGet(h, i))
	}
	if g != nil {
		if err := g.Err(); err != nil {
			// told, not wrapped, as above
			return nil, fmt.Errorf("%w: %s: %v", ErrRPCUnreachable, endpoint, err)
		}
	}
	// known before any runtime can list the devices
	rt.mu.Lock()
	rt.rpc[endpoint] = reg
	rt.mu.Unlock()
	lib.Register(h)
	devs := rt.wrapDevices(reg.devs)
	for _, d := range devs {
		d.fixed() // what never changes, read while there is room to connect
	}
	return devs, nil
}

// rpcConnDescriptors is how many descriptors one connection of the native
// client takes: its own and the guard's two (its end, and its connection
// to the server).
const rpcConnDescriptors = 3

// rpcRoom makes sure, before a native call on a guarded RPC device, that
// the native client can connect if the call makes it: it connects anew
// whenever it holds no buffer or backend of the endpoint, and aborts the
// process when the connection fails. Without the room it records the
// failure on the guard (Device.Err reports it) and returns it; the call
// must then not be made.
func (rt *Runtime) rpcRoom(g *rpcrelay.Guard) error {
	if g == nil {
		return nil
	}
	if err := descriptorHeadroom(rpcConnDescriptors); err != nil {
		g.Fail("connect", err)
		return fmt.Errorf("%w: %s: %w", ErrRPCFailed, g.Remote(), err)
	}
	return nil
}

var rpcAddMu sync.Mutex

// wrapDevices returns the runtime's devices for native handles.
func (rt *Runtime) wrapDevices(hs []bindings.Dev) []*Device {
	out := make([]*Device, len(hs))
	for i, h := range hs {
		out[i] = rt.device(h)
	}
	return out
}

// guardOf is the guard in front of an RPC device, nil for other devices.
func (p *process) guardOf(h bindings.Dev) *rpcrelay.Guard {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, reg := range p.rpc {
		for _, d := range reg.devs {
			if d == h {
				return reg.guard
			}
		}
	}
	return nil
}

// RPCName rewrites the guards' loopback addresses in a native name, log
// line or description to the endpoints they stand for.
func (rt *Runtime) RPCName(s string) string {
	rt.mu.Lock()
	guards := rt.guards
	rt.mu.Unlock()
	for _, g := range guards {
		s = g.Rename(s)
	}
	return s
}

// RPCTraffic is what went through the guard of an RPC device: bytes sent to
// its server and received from it (0, 0 for an unguarded device).
func (d *Device) RPCTraffic() (sent, received uint64) {
	if d.guard == nil {
		return 0, 0
	}
	return d.guard.Traffic()
}

// Endpoint is an RPC device's server ("host:port"), "" for other devices.
func (d *Device) Endpoint() string {
	if d.guard != nil {
		return d.guard.Remote()
	}
	if d.IsRPC() {
		return d.rt.lib.DevDescription(d.h)
	}
	return ""
}

// Err reports a failure of the device's RPC server while in use (wrapping
// ErrRPCFailed and naming the endpoint); nil for healthy and non-RPC
// devices; for a meta device, the failures of the devices it spans and a
// split it mirrored instead of aborting. Once it is non-nil, results from
// the device are meaningless. The error is an *Error of op "rpc" (an RPC
// device) or "meta_device", joining those of the parts.
func (d *Device) Err() error {
	if parts := d.Parts(); parts != nil {
		var errs []error
		d.rt.devMu.Lock()
		ms := d.split.Value()
		d.rt.devMu.Unlock()
		if ms != nil {
			if err := ms.Err(); err != nil {
				errs = append(errs, Error{Op: "split_state", Device: d.name}.wrap(err))
			}
		}
		for _, x := range parts {
			errs = append(errs, x.Err())
		}
		if err := errors.Join(errs...); err != nil {
			return &Error{Op: "meta_device", Device: d.name, Err: err}
		}
		return nil
	}
	if d.guard == nil {
		return nil
	}
	if err := d.guard.Err(); err != nil {
		return &Error{Op: "rpc", Device: d.name, Endpoint: d.guard.Remote(), Err: err}
	}
	return nil
}

// RPCEndpoints lists the endpoints registered in the process.
func (rt *Runtime) RPCEndpoints() []string {
	rt.mu.Lock()
	defer rt.mu.Unlock()
	out := make([]string, 0, len(rt.rpc))
	for ep := range rt.rpc {
		out = append(out, ep)
	}
	return out
}

func dirBase(dir string) string {
	for i := len(dir) - 1; i >= 0; i-- {
		if dir[i] == '/' || dir[i] == '\\' {
			return dir[i+1:]
		}
	}
	return dir
}
