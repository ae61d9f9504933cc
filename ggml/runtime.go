package ggml

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"slices"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/ggload/ggload/bindings"
	"github.com/ggload/ggload/ggml/internal/rpcrelay"
	"github.com/ggload/ggload/ggml/ops"
)

// Options choose the native set, the remote devices and where ggml's
// messages go.
type Options struct {
	// LibDir forces one directory (like GGLOAD_LIB_DIR).
	LibDir string
	// Variant picks native/lib/<platform>-<Variant> (see bindings.FindOptions).
	Variant string
	// Backends names the backend modules to load ("cpu", "rpc", "vulkan",
	// "cuda", ...: bindings.ModuleNames); nil loads every module of the
	// set, as llama.cpp's tools do. A program that puts weights on the CPU
	// alone skips a GPU backend's start with []string{"cpu"}; RPC's module
	// is added where RPC names servers. The first
	// Open of a process decides: a later one that asks for a module left
	// out fails (see bindings.FindOptions).
	Backends []string
	// RPC lists ggml-rpc-server endpoints ("host:port") to register.
	RPC []string
	// RPCTimeout bounds the check of each endpoint when the context of
	// Open has no deadline (default 5s).
	RPCTimeout time.Duration
	// RPCIOTimeout and RPCDirect: see RPCOptions.
	RPCIOTimeout time.Duration
	RPCDirect    bool
	// Logger receives the native libraries' messages while the runtime is
	// open. Nil keeps ggml quiet: warnings and errors go to slog.Default(),
	// the rest nowhere.
	Logger *slog.Logger
}

// process is what the native libraries hold once per process: the opened
// set, the RPC registrations (ggml cannot forget one) and what never
// changes about buffer types and devices.
type process struct {
	lib *bindings.Lib
	ops *ops.Lib // the graph API over lib

	mu          sync.Mutex
	rpc         map[string]*rpcReg // by endpoint
	guards      []*rpcrelay.Guard
	mappedNames map[bindings.Dev]string
	slack       map[bindings.Buft]uint64
	bufts       map[bindings.Buft]*buftInfo
	extras      map[bindings.Buft]bool
}

// rpcReg is an endpoint registered with ggml.
type rpcReg struct {
	devs  []bindings.Dev
	guard *rpcrelay.Guard // nil when registered direct
	opts  RPCOptions      // as registered
}

var (
	procMu  sync.Mutex
	procOne *process
)

// Runtime is an opened native release with its registered backends. Each
// Open returns a Runtime of its own over the process's one native set:
// Close frees what was made through it (contexts, buffers, backends,
// events, schedulers), and a closed Runtime, like every handle made
// through it, answers ErrClosed. A Runtime is safe for concurrent use.
type Runtime struct {
	*process
	logger *slog.Logger

	devMu   sync.Mutex
	devices map[bindings.Dev]*Device

	state  sync.RWMutex // read-held while a handle is made, write-held by Close
	closed bool
	uses   sync.WaitGroup // Use calls not done

	liveMu sync.Mutex
	live   map[freer]struct{}
}

// freer is a handle a Runtime frees on Close.
type freer interface{ Free() }

// Open opens the native set (the first call in a process loads it; later
// ones share it) and registers the RPC endpoints of opts, within ctx.
func Open(ctx context.Context, opts Options) (_ *Runtime, err error) {
	defer placed(&err, "open", at{})
	addLogger(opts.Logger) // before the libraries load, which logs
	backends := opts.Backends
	if backends != nil && len(opts.RPC) > 0 && !slices.Contains(backends, "rpc") {
		backends = append(slices.Clip(backends), "rpc")
	}
	lib, err := bindings.Open(bindings.FindOptions{Dir: opts.LibDir, Variant: opts.Variant, Backends: backends})
	if err != nil {
		removeLogger(opts.Logger)
		return nil, err
	}
	procMu.Lock()
	if procOne == nil {
		procOne = &process{lib: lib, ops: ops.New(lib), rpc: map[string]*rpcReg{}, mappedNames: map[bindings.Dev]string{}, slack: map[bindings.Buft]uint64{}, bufts: map[bindings.Buft]*buftInfo{}}
	}
	rt := &Runtime{process: procOne, logger: opts.Logger, devices: map[bindings.Dev]*Device{}, live: map[freer]struct{}{}}
	procMu.Unlock()
	for _, ep := range opts.RPC {
		o := RPCOptions{Timeout: opts.RPCTimeout, IOTimeout: opts.RPCIOTimeout, Direct: opts.RPCDirect}
		if _, err := rt.AddRPCServer(ctx, ep, o); err != nil {
			rt.Close()
			return nil, err
		}
	}
	return rt, nil
}

// Close frees every handle made through the runtime and not freed yet, and
// makes later calls that make handles return ErrClosed. The devices and
// the RPC registrations are the process's and stay. Closing twice, or a
// nil *Runtime, does nothing.
func (rt *Runtime) Close() error {
	if rt == nil {
		return nil
	}
	rt.state.Lock()
	if rt.closed {
		rt.state.Unlock()
		return nil
	}
	rt.closed = true
	rt.state.Unlock()
	rt.uses.Wait()
	rt.liveMu.Lock()
	var left []freer
	for f := range rt.live {
		left = append(left, f)
	}
	rt.liveMu.Unlock()
	// what computes or copies first, then what holds tensors, then memory
	rank := func(f freer) int {
		switch f.(type) {
		case *Scheduler:
			return 0
		case *Event, *Backend:
			return 1
		case *Context:
			return 2
		}
		return 3
	}
	sort.SliceStable(left, func(i, j int) bool { return rank(left[i]) < rank(left[j]) })
	for _, f := range left {
		f.Free()
	}
	removeLogger(rt.logger)
	ReleaseFreedMemory()
	return nil
}

// ReleaseFreedMemory hands what the C allocator holds free back to the
// system at once (glibc's malloc_trim(0), macOS's pressure relief):
// memory native code freed (host and software-device buffers, the
// backends' own) otherwise stays in the process, in glibc's per-thread
// arenas, and a long-running program's resident size grows with every
// load. Model.Close and Runtime.Close call it; it takes about a
// millisecond. It reports whether the C library has such a call.
func ReleaseFreedMemory() bool { return bindings.TrimHeap() }

// Use keeps Close from freeing anything until done is called, for work
// that writes through raw pointers into the runtime's buffers (a load
// filling pinned staging memory). Close waits for it, while handles can no
// longer be made, which ends such work with ErrClosed. Use fails once the
// runtime is closed.
func (rt *Runtime) Use() (done func(), err error) {
	defer placed(&err, "use", at{})
	if err := rt.begin(); err != nil {
		return nil, err
	}
	defer rt.end()
	rt.uses.Add(1)
	var once sync.Once
	return func() { once.Do(rt.uses.Done) }, nil
}

// ErrClosed is wrapped by the error of every use of a handle after it (or
// the Runtime it was made through) was freed or closed. It matches
// os.ErrClosed too, as the errors of a closed gguf file do: errors.Is(err,
// os.ErrClosed) holds for every closed handle in ggload.
var ErrClosed error = closedError{}

type closedError struct{}

func (closedError) Error() string        { return "use of a freed or closed handle" }
func (closedError) Is(target error) bool { return target == os.ErrClosed }

// begin holds the runtime open while a handle is made; end releases it.
func (rt *Runtime) begin() error {
	rt.state.RLock()
	if rt.closed {
		rt.state.RUnlock()
		return fmt.Errorf("%w: runtime closed", ErrClosed)
	}
	return nil
}

func (rt *Runtime) end() { rt.state.RUnlock() }

// keep records a handle for Close; drop forgets a freed one.
func (rt *Runtime) keep(f freer) {
	rt.liveMu.Lock()
	rt.live[f] = struct{}{}
	rt.liveMu.Unlock()
}

func (rt *Runtime) drop(f freer) {
	rt.liveMu.Lock()
	delete(rt.live, f)
	rt.liveMu.Unlock()
}

// Closed reports whether Close was called.
func (rt *Runtime) Closed() bool {
	rt.state.RLock()
	defer rt.state.RUnlock()
	return rt.closed
}

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
	rt.devMu.Lock()
	defer rt.devMu.Unlock()
	if d, ok := rt.devices[h]; ok {
		return d
	}
	d := &Device{rt: rt, h: h, name: rt.lib.DevName(h), guard: rt.guardOf(h)}
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
	return nil, &Error{Op: "dev_by_name", Device: name, Err: fmt.Errorf("%w %q; devices: %s", ErrUnknownDevice, name, strings.Join(names, ", "))}
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
	return BufferType{}, &Error{Op: "buft_by_name", BufferType: name, Err: fmt.Errorf("%w %q; buffer types: %s", ErrUnknownBufferType, name, strings.Join(names, ", "))}
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

// Ops is the native set's graph API (package ops), for code that builds
// graphs by the thousand, as ggload's replay of llama.cpp's graph code
// does. Its handles are the caller's to free; the Runtime's Close does not
// reach them.
func (rt *Runtime) Ops() *ops.Lib { return rt.ops }
