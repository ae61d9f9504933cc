package ggml

import (
	"errors"
	"fmt"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/ggload/ggload/bindings"
)

// Options choose the native set and the remote devices.
type Options struct {
	// LibDir forces one directory (like GGLOAD_LIB_DIR).
	LibDir string
	// Variant picks native/lib/<platform>-<Variant> (see bindings.FindOptions).
	Variant string
	// RPC lists ggml-rpc-server endpoints ("host:port") to register.
	RPC []string
	// RPCTimeout bounds the check of each endpoint (default 5s).
	RPCTimeout time.Duration
	// RPCIOTimeout and RPCDirect: see RPCOptions.
	RPCIOTimeout time.Duration
	RPCDirect    bool
}

// Runtime is the opened native release with its registered backends.
type Runtime struct {
	lib *bindings.Lib

	mu          sync.Mutex
	devices     map[bindings.Dev]*Device
	rpc         map[string][]*Device
	mappedNames map[bindings.Dev]string
	slack       map[bindings.Buft]uint64
	bufts       map[bindings.Buft]*buftInfo
	extras      map[bindings.Buft]bool
	guards      []*rpcGuard
}

var (
	rtMu  sync.Mutex
	rtOne *Runtime
)

// Open opens the native set (once per process; later calls share it) and
// registers the RPC endpoints of opts.
func Open(opts Options) (*Runtime, error) {
	lib, err := bindings.Open(bindings.FindOptions{Dir: opts.LibDir, Variant: opts.Variant})
	if err != nil {
		return nil, err
	}
	rtMu.Lock()
	if rtOne == nil {
		rtOne = &Runtime{lib: lib, devices: map[bindings.Dev]*Device{}, rpc: map[string][]*Device{}, mappedNames: map[bindings.Dev]string{}, slack: map[bindings.Buft]uint64{}, bufts: map[bindings.Buft]*buftInfo{}}
	}
	rt := rtOne
	rtMu.Unlock()
	for _, ep := range opts.RPC {
		if _, err := rt.AddRPCServerWith(ep, RPCOptions{Timeout: opts.RPCTimeout, IOTimeout: opts.RPCIOTimeout, Direct: opts.RPCDirect}); err != nil {
			return nil, err
		}
	}
	return rt, nil
}

// Lib exposes the raw native table. It is meant for tests and the
// conformance harness; code that can use the checked API should.
func (rt *Runtime) Lib() *bindings.Lib { return rt.lib }

// Version is ggml_version() of the opened library.
func (rt *Runtime) Version() string { return rt.lib.Version }

// Commit is ggml_commit() of the opened library.
func (rt *Runtime) Commit() string { return rt.lib.Commit }

// Location tells where the native set was found.
func (rt *Runtime) Location() bindings.Location { return rt.lib.Loc }

// Registry is a registered backend (ggml_backend_reg).
type Registry struct {
	rt *Runtime
	h  bindings.Reg
}

// Name of the backend ("CPU", "Vulkan", "RPC", "CUDA", ...).
func (r Registry) Name() string { return r.rt.RPCName(r.rt.lib.RegName(r.h)) }

// Devices of this backend.
func (r Registry) Devices() []*Device {
	n := r.rt.lib.RegDevCount(r.h)
	out := make([]*Device, 0, n)
	for i := uintptr(0); i < n; i++ {
		out = append(out, r.rt.device(r.rt.lib.RegDevGet(r.h, i)))
	}
	return out
}

// Backends lists the registered backends in registry order.
func (rt *Runtime) Backends() []Registry {
	n := rt.lib.RegCount()
	out := make([]Registry, 0, n)
	for i := uintptr(0); i < n; i++ {
		out = append(out, Registry{rt, rt.lib.RegGet(i)})
	}
	return out
}

// Devices lists every registered device in ggml's registry order.
func (rt *Runtime) Devices() []*Device {
	n := rt.lib.DevCount()
	out := make([]*Device, 0, n)
	for i := uintptr(0); i < n; i++ {
		out = append(out, rt.device(rt.lib.DevGet(i)))
	}
	return out
}

func (rt *Runtime) device(h bindings.Dev) *Device {
	rt.mu.Lock()
	defer rt.mu.Unlock()
	if d, ok := rt.devices[h]; ok {
		return d
	}
	d := &Device{rt: rt, h: h, name: rt.lib.DevName(h)}
	rt.devices[h] = d
	return d
}

// ErrUnknownDevice is wrapped by DeviceByName's error.
var ErrUnknownDevice = errors.New("unknown device")

// DeviceByName returns the device with that name (case-insensitive, as
// ggml_backend_dev_by_name); the error lists the valid names.
func (rt *Runtime) DeviceByName(name string) (*Device, error) {
	var names []string
	for _, d := range rt.Devices() {
		if strings.EqualFold(d.Name(), name) {
			return d, nil
		}
		names = append(names, d.Name())
	}
	return nil, fmt.Errorf("%w %q; devices: %s", ErrUnknownDevice, name, strings.Join(names, ", "))
}

// CPUDevice returns the first device of type CPU, or nil.
func (rt *Runtime) CPUDevice() *Device {
	h := rt.lib.DevByType(bindings.DevTypeCPU)
	if h == 0 {
		return nil
	}
	return rt.device(h)
}

// CPUBufferType is ggml_backend_cpu_buffer_type().
func (rt *Runtime) CPUBufferType() BufferType {
	return BufferType{rt, rt.lib.CPUBufferType()}
}

// ErrUnknownBufferType is wrapped by BufferTypeByName's error.
var ErrUnknownBufferType = errors.New("unknown buffer type")

// BufferTypes lists every buffer type a device offers: its default, its host
// type and its extra types, each once, in device order.
func (rt *Runtime) BufferTypes() []BufferType {
	var out []BufferType
	seen := map[bindings.Buft]bool{}
	add := func(b BufferType) {
		if b.h != 0 && !seen[b.h] {
			seen[b.h] = true
			out = append(out, b)
		}
	}
	for _, d := range rt.Devices() {
		add(d.BufferType())
		if h, ok := d.HostBufferType(); ok {
			add(h)
		}
		for _, x := range d.ExtraBufferTypes() {
			add(x)
		}
	}
	return out
}

// BufferTypeByName finds the default buffer type of a device by its name
// ("CPU", "Vulkan0", "RPC0[127.0.0.1:50052]"...). This is the namespace in
// which llama.cpp resolves -ot targets; the error lists the valid names.
func (rt *Runtime) BufferTypeByName(name string) (BufferType, error) {
	var names []string
	for _, d := range rt.Devices() {
		b := d.BufferType()
		if b.h == 0 {
			continue
		}
		if b.Name() == name {
			return b, nil
		}
		names = append(names, b.Name())
	}
	sort.Strings(names)
	return BufferType{}, fmt.Errorf("%w %q; buffer types: %s", ErrUnknownBufferType, name, strings.Join(names, ", "))
}

// writeOnly reports whether buffers of b cannot be read back: the CPU's
// extra buffer types (CPU_REPACK and the like) repack data on write and
// have no get_tensor.
func (rt *Runtime) writeOnly(b BufferType) bool {
	rt.mu.Lock()
	if rt.extras == nil {
		rt.mu.Unlock()
		extras := map[bindings.Buft]bool{}
		if cpu := rt.CPUDevice(); cpu != nil {
			for _, x := range cpu.ExtraBufferTypes() {
				extras[x.h] = true
			}
		}
		rt.mu.Lock()
		rt.extras = extras
	}
	defer rt.mu.Unlock()
	return rt.extras[b.h]
}

// WriteOnly reports whether buffers of this type cannot be read back: the
// CPU's extra buffer types (CPU_REPACK and the like) store data repacked.
func (b BufferType) WriteOnly() bool { return b.h != 0 && b.rt.writeOnly(b) }
