package ggml

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/fnv"
	"io"
	"math"
	"net"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"
	"unsafe"

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
	// NativeSets leaves tensor data to ggml's own RPC client, as
	// llama.cpp sends it: each weight above 10 MiB hashed on the calling
	// thread and asked of the server's file cache with one round trip
	// before it is copied into a message and sent. By default the guard
	// sends what Device.SendRPC is given itself (the same requests,
	// without the copies, with the hash worked out by the caller and the
	// cache's questions ahead of the data).
	NativeSets bool
}

// ErrRPCUnreachable is wrapped by AddRPCServer's error when an endpoint does
// not answer as a compatible ggml-rpc-server within the timeout.
var ErrRPCUnreachable = errors.New("rpc endpoint unreachable")

// ErrRPCEndpoint is wrapped by the error for an endpoint that is not
// host:port with a port from 1 to 65535 (CheckRPCEndpoint).
var ErrRPCEndpoint = errors.New("malformed rpc endpoint")

// ParseRPCServers reads a comma-separated list of RPC servers (--rpc):
// the endpoints, each checked by CheckRPCEndpoint, blanks and empty items
// dropped; a list of none is an error.
func ParseRPCServers(list string) ([]string, error) {
	var eps []string
	for _, ep := range strings.Split(list, ",") {
		if ep = strings.TrimSpace(ep); ep == "" {
			continue
		}
		if err := CheckRPCEndpoint(ep); err != nil {
			return nil, err
		}
		eps = append(eps, ep)
	}
	if len(eps) == 0 {
		return nil, fmt.Errorf("no RPC servers named")
	}
	return eps, nil
}

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
// again, and its devices are returned, unless o asks for another guard
// than it has (Direct, Memory or NativeSets differ): that is an error,
// since ggml cannot forget a registration.
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
		if was := reg.opts; was.Direct != o.Direct || was.Memory != o.Memory || was.NativeSets != o.NativeSets {
			return nil, fmt.Errorf("ggml: rpc %s: registered before with other options (%s), now asked with %s: a process registers an endpoint once", endpoint, was.guardString(), o.guardString())
		}
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
		g.SetOwnSets(!o.NativeSets)
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
	reg = &rpcReg{guard: g, opts: o}
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

// guardString names the options that shape an endpoint's guard.
func (o RPCOptions) guardString() string {
	if o.Direct {
		return "direct"
	}
	s := "guarded"
	if o.Memory != 0 {
		s += fmt.Sprintf(", a memory budget of %d bytes", o.Memory)
	}
	if o.NativeSets {
		s += ", native sets"
	}
	return s
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

// RPCHashThreshold is the size above which a weight is asked of an RPC
// server's file cache, by its hash, before it is sent (the pin's
// HASH_THRESHOLD, 10 MiB).
const RPCHashThreshold = rpcrelay.HashThreshold

// RPCHash is the hash by which an RPC server's file cache knows bytes, as
// ggml's client works it out: FNV-1a, 64 bits.
func RPCHash(data []byte) uint64 {
	h := fnv.New64a()
	h.Write(data)
	return h.Sum64()
}

// RPCSet is tensor data for the server behind a guarded RPC device, which
// the guard sends itself (Device.SendRPC), or (Get) reads back from it.
type RPCSet struct {
	Tensor *Tensor
	Offset uint64 // into the tensor
	Size   uint64 // bytes set
	// Data is what is set (Size bytes); nil asks the server's file cache
	// only (Probe): Done then says whether it had the bytes.
	Data []byte
	// Probe asks the server's file cache for the bytes by their hash
	// first, as ggml's client does for a weight buffer's tensor above
	// RPCHashThreshold: a hit sets them without sending them.
	Probe bool
	// Cache sends the bytes with the cache flag (the server keeps them
	// in its file cache) and without a probe: for bytes a probe of Data
	// nil found missing.
	Cache bool
	// Get reads the Size bytes at Offset back into Data instead, once
	// every request queued before it is written; Done is called when
	// they are in (and Data must be kept until then). Reads queued one
	// after another go out ahead of their replies: one round trip for
	// all of them, where ggml's client waits one per read.
	Get bool
	// Hash returns the bytes' RPCHash, waiting for it if need be; it is
	// called once, when the probe is due, on another goroutine.
	Hash func() uint64
	// Done is called once, on another goroutine, when the request is
	// written to the server's connection (hit: the cache had the bytes)
	// or has failed; Data may be reused from then on. Requests written
	// are ahead of every later native call on the device.
	Done func(hit bool, err error)
}

// SendsRPC reports whether d takes tensor data through SendRPC: an RPC
// device behind a guard that sends it (not RPCOptions.Direct or
// NativeSets).
func (d *Device) SendsRPC() bool { return d.guard != nil && d.guard.OwnSets() }

// SplitsRPC reports whether d is a meta device over RPC devices that all
// take tensor data through SendRPC: its tensors split along a dimension go
// to them through their guards (Tensor.SplitFor).
func (d *Device) SplitsRPC() bool {
	parts := d.Parts()
	return d.IsMeta() && len(parts) > 0 && !slices.ContainsFunc(parts, func(p *Device) bool { return !p.SendsRPC() })
}

// SendRPC queues x on the connection that holds x.Tensor's buffer. The
// request is checked against the tensor and its buffer first; an error
// means nothing was queued and Done will not be called. A server that
// fails meanwhile gets Done an error wrapping ErrRPCFailed, as Device.Err
// then reports.
func (d *Device) SendRPC(x RPCSet) (err error) {
	defer placed(&err, "rpc_set_tensor", at{dev: d})
	if !d.SendsRPC() {
		return fmt.Errorf("ggml: %s: tensor data goes through the native client here: %w", d.name, errors.ErrUnsupported)
	}
	if x.Tensor == nil {
		return errors.New("ggml: rpc set: no tensor")
	}
	b, err := x.Tensor.hold("rpc set")
	if err != nil {
		return err
	}
	defer x.Tensor.unhold(b)
	c := x.Tensor.c
	if c.Buffer == 0 || c.Data == nil {
		return fmt.Errorf("ggml: rpc set: tensor %s has no memory", x.Tensor.name)
	}
	set := &rpcrelay.Set{Base: uint64(uintptr(d.rt.lib.BufferGetBase(c.Buffer))), Offset: x.Offset, Size: x.Size, Data: x.Data, Probe: x.Probe, Cache: x.Cache, Get: x.Get, Hash: x.Hash, Done: x.Done}
	if err := packTensor(&set.Tensor, c); err != nil {
		return fmt.Errorf("ggml: rpc set: tensor %s: %w", x.Tensor.name, err)
	}
	if err := d.guard.Send(set); err != nil {
		return fmt.Errorf("ggml: tensor %s to %s: %w", x.Tensor.name, d.name, err)
	}
	return nil
}

// packTensor writes c as ggml's RPC client serializes a tensor (rpc_tensor;
// the buffer handle is the guard's to fill).
func packTensor(dst *[rpcrelay.TensorSize]byte, c *bindings.Tensor) error {
	le := binary.LittleEndian
	le.PutUint64(dst[0:], uint64(uintptr(unsafe.Pointer(c))))
	le.PutUint32(dst[rpcrelay.TensorType:], uint32(c.Type))
	for i := range 4 {
		if c.Ne[i] < 0 || c.Ne[i] > math.MaxUint32 || uint64(c.Nb[i]) > math.MaxUint32 {
			return fmt.Errorf("shape %v / strides %v do not fit the RPC protocol's 32 bits", c.Ne, c.Nb)
		}
		le.PutUint32(dst[rpcrelay.TensorNe+4*i:], uint32(c.Ne[i]))
		le.PutUint32(dst[rpcrelay.TensorNb+4*i:], uint32(c.Nb[i]))
	}
	le.PutUint32(dst[rpcrelay.TensorOp:], uint32(c.Op))
	for i, p := range c.OpParams {
		le.PutUint32(dst[rpcrelay.TensorOp+4+4*i:], uint32(p))
	}
	at := rpcrelay.TensorOp + 4 + 4*len(c.OpParams)
	le.PutUint32(dst[at:], uint32(c.Flags))
	at += 4
	for _, s := range c.Src {
		le.PutUint64(dst[at:], uint64(uintptr(unsafe.Pointer(s))))
		at += 8
	}
	le.PutUint64(dst[at:], uint64(uintptr(unsafe.Pointer(c.ViewSrc))))
	le.PutUint64(dst[at+8:], uint64(c.ViewOffs))
	le.PutUint64(dst[at+16:], uint64(uintptr(c.Data)))
	at += 24
	// the name as snprintf leaves it: NUL-terminated, zeros after
	name := dst[at : at+bindings.MaxName]
	clear(name)
	for i := 0; i < bindings.MaxName-1 && c.Name[i] != 0; i++ {
		name[i] = c.Name[i]
	}
	return nil
}
