package ggml

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"strconv"
	"time"

	"github.com/ggload/ggload/bindings"
)

// The parts of ggml's RPC protocol (v7, pinned) that ggload speaks itself to
// check an endpoint before the native client, which aborts the process on a
// failed connection, is pointed at it.
const (
	rpcProtoMajor   = 7
	rpcProtoMinor   = 0
	rpcCmdHello     = 14
	rpcCmdDevCount  = 15
	rpcConnCapsSize = 24
	// rpcMaxDevices bounds the device count a server may announce (the
	// native client makes a device for each; a scheduler takes 16 backends)
	rpcMaxDevices = 64
)

// ErrRPCUnreachable is wrapped by AddRPCServer's error when an endpoint does
// not answer as a compatible ggml-rpc-server within the timeout.
var ErrRPCUnreachable = errors.New("rpc endpoint unreachable")

// ProbeRPC connects to a ggml-rpc-server, performs the protocol handshake and
// asks for its device count, all within timeout. It never involves native
// code, so a dead or foreign endpoint is an error, not a crash.
func ProbeRPC(endpoint string, timeout time.Duration) (devices uint32, err error) {
	if timeout <= 0 {
		timeout = 5 * time.Second
	}
	host, port, err := net.SplitHostPort(endpoint)
	if err != nil || host == "" {
		return 0, fmt.Errorf("%w: %q is not host:port", ErrRPCUnreachable, endpoint)
	}
	if p, err := strconv.Atoi(port); err != nil || p <= 0 || p > 65535 {
		return 0, fmt.Errorf("%w: %q has no valid port", ErrRPCUnreachable, endpoint)
	}
	deadline := time.Now().Add(timeout)
	conn, err := net.DialTimeout("tcp", endpoint, timeout)
	if err != nil {
		return 0, fmt.Errorf("%w: %s: %v", ErrRPCUnreachable, endpoint, err)
	}
	defer conn.Close()
	if err := conn.SetDeadline(deadline); err != nil {
		return 0, fmt.Errorf("%w: %s: %v", ErrRPCUnreachable, endpoint, err)
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
			return nil, fmt.Errorf("answered %d bytes where %d were expected (not a ggml-rpc-server of protocol %d.x?)", n, rspSize, rpcProtoMajor)
		}
		rsp := make([]byte, rspSize)
		_, err := io.ReadFull(conn, rsp)
		return rsp, err
	}
	hello, err := call(rpcCmdHello, make([]byte, rpcConnCapsSize), 4+rpcConnCapsSize)
	if err != nil {
		return 0, fmt.Errorf("%w: %s: handshake: %v", ErrRPCUnreachable, endpoint, wrapTimeout(err, timeout))
	}
	if hello[0] != rpcProtoMajor || hello[1] > rpcProtoMinor {
		return 0, fmt.Errorf("%w: %s speaks RPC protocol %d.%d.%d, ggml %s needs %d.%d", ErrRPCUnreachable, endpoint, hello[0], hello[1], hello[2], "0.25.1", rpcProtoMajor, rpcProtoMinor)
	}
	cnt, err := call(rpcCmdDevCount, nil, 4)
	if err != nil {
		return 0, fmt.Errorf("%w: %s: device count: %v", ErrRPCUnreachable, endpoint, wrapTimeout(err, timeout))
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

// AddRPCServer checks a ggml-rpc-server endpoint (ProbeRPC), registers it
// with ggml behind a guard (see RPCOptions) and returns its devices.
// Registering the same endpoint twice returns the devices of the first
// registration.
func (rt *Runtime) AddRPCServer(endpoint string, timeout time.Duration) ([]*Device, error) {
	return rt.AddRPCServerWith(endpoint, RPCOptions{Timeout: timeout})
}

// AddRPCServerWith is AddRPCServer with every option.
func (rt *Runtime) AddRPCServerWith(endpoint string, o RPCOptions) ([]*Device, error) {
	rt.mu.Lock()
	if devs, ok := rt.rpc[endpoint]; ok {
		rt.mu.Unlock()
		return devs, nil
	}
	rt.mu.Unlock()

	reg := rt.lib.RegByName("RPC")
	add, ok := bindings.Proc[func(string) bindings.Reg](rt.lib, reg, "ggml_backend_rpc_add_server")
	if !ok {
		return nil, fmt.Errorf("ggml: the RPC backend is not loaded from %s (build it: scripts/build-native.sh linux-x64 cpu,rpc --into %s)", rt.lib.Loc.Dir, dirBase(rt.lib.Loc.Dir))
	}
	n, err := ProbeRPC(endpoint, o.Timeout)
	if err != nil {
		return nil, err
	}
	if n == 0 {
		return nil, fmt.Errorf("%w: %s offers no devices", ErrRPCUnreachable, endpoint)
	}
	native := endpoint
	var g *rpcGuard
	if !o.Direct {
		if g, err = newRPCGuard(endpoint, o.IOTimeout, n); err != nil {
			return nil, err
		}
		native = g.local
		// before any name is read and cached
		rt.mu.Lock()
		rt.guards = append(rt.guards, g)
		rt.mu.Unlock()
	}
	h := add(native)
	if h == 0 {
		return nil, fmt.Errorf("%w: %s: the RPC backend refused it", ErrRPCUnreachable, endpoint)
	}
	rt.lib.Register(h)
	devs := Registry{rt, h}.Devices()
	rt.mu.Lock()
	rt.rpc[endpoint] = devs
	if g != nil {
		for _, d := range devs {
			d.guard = g
		}
	}
	rt.mu.Unlock()
	return devs, nil
}

// RPCName rewrites the guards' loopback addresses in a native name, log
// line or description to the endpoints they stand for.
func (rt *Runtime) RPCName(s string) string {
	rt.mu.Lock()
	guards := rt.guards
	rt.mu.Unlock()
	for _, g := range guards {
		s = g.rename(s)
	}
	return s
}

// RPCTraffic is what went through the guard of an RPC device: bytes sent to
// its server and received from it (0, 0 for an unguarded device).
func (d *Device) RPCTraffic() (sent, received uint64) {
	if d.guard == nil {
		return 0, 0
	}
	return d.guard.sent.Load(), d.guard.received.Load()
}

// Endpoint is an RPC device's server ("host:port"), "" for other devices.
func (d *Device) Endpoint() string {
	if d.guard != nil {
		return d.guard.remote
	}
	if d.IsRPC() {
		return d.rt.lib.DevDescription(d.h)
	}
	return ""
}

// Err reports a failure of the device's RPC server while in use (wrapping
// ErrRPCFailed and naming the endpoint); nil for healthy and non-RPC
// devices. Once it is non-nil, results from the device are meaningless.
func (d *Device) Err() error {
	if d.guard == nil {
		return nil
	}
	return d.guard.Err()
}

// RPCEndpoints lists the registered endpoints.
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
