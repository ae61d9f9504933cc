package bindings

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"runtime"
	"strings"
	"sync"
	"unsafe"

	"github.com/ebitengine/purego"

	"github.com/ggload/ggload/native"
)

// Lib is the opened native set. There is at most one per process: ggml keeps
// its backend registry in process-wide state.
type Lib struct {
	Funcs
	Loc     Location
	Version string // ggml_version()
	Commit  string // ggml_commit()

	base, core uintptr
	// modules are the backend modules loaded, where Open was asked for
	// some (FindOptions.Backends); nil: every module of the set
	modules []string

	procMu sync.Mutex
	procs  map[procKey]any

	cpuTraits cpuTraits // (cputraits.go)
}

type procKey struct {
	reg  Reg
	name string
}

// ErrVersion is wrapped by Open's error when the library is not the pinned
// release.
var ErrVersion = errors.New("native ggml version differs from the pin")

var (
	openMu  sync.Mutex
	opened  *Lib
	openErr error
)

// Current is the native set this process opened (nil before the first
// Open that succeeded): for harnesses that drive the same libraries, such
// as a libllama in the same process.
func Current() *Lib {
	openMu.Lock()
	defer openMu.Unlock()
	return opened
}

// Open finds and opens the native set (see Find), checks it against the pin,
// routes ggml's log to log/slog, and loads every backend module in its
// directory, or those opts.Backends names. Later calls return the same
// Lib; asking for a different directory after one was opened is an
// error, as is asking for a module the first call left out.
func Open(opts FindOptions) (*Lib, error) {
	want, err := checkBackends(opts.Backends)
	if err != nil {
		return nil, err
	}
	openMu.Lock()
	defer openMu.Unlock()
	if opened != nil || openErr != nil {
		if openErr != nil {
			return nil, openErr
		}
		if err := opened.covers(want); err != nil {
			return nil, err
		}
		if opts.Dir != "" {
			if abs, _ := filepath.Abs(opts.Dir); abs != opened.Loc.Dir {
				return nil, fmt.Errorf("bindings: ggml is already open from %s; one process holds one native set (asked for %s)", opened.Loc.Dir, abs)
			}
		}
		return opened, nil
	}
	loc, err := Find(opts)
	if err != nil {
		return nil, err
	}
	lib, err := open(loc, want)
	if err != nil {
		// a half-opened native set cannot be unloaded safely; remember why
		openErr = err
		return nil, err
	}
	opened = lib
	return lib, nil
}

func open(loc Location, modules []string) (*Lib, error) {
	pin := native.Load()
	if err := checkAdded(loc, pin); err != nil {
		return nil, err
	}
	base, err := dlopen(loc.Base)
	if err != nil {
		return nil, fmt.Errorf("bindings: open %s: %w", loc.Base, err)
	}
	// check the version before anything else relies on the pinned layouts
	var version func() string
	if sym, err := dlsym(base, "ggml_version"); err == nil {
		purego.RegisterFunc(&version, sym)
	} else {
		return nil, fmt.Errorf("%w: %s has no ggml_version (older than the pinned ggml %s, llama.cpp %s)", ErrVersion, loc.Base, pin.GGMLVersion, pin.LlamaCppTag)
	}
	if v := version(); v != pin.GGMLVersion {
		return nil, fmt.Errorf("%w: %s is ggml %s, the pin is ggml %s (llama.cpp %s); fetch the pinned set with scripts/fetch-native.sh or point GGLOAD_LIB_DIR at a build of %s",
			ErrVersion, loc.Base, v, pin.GGMLVersion, pin.LlamaCppTag, pin.LlamaCppTag)
	}
	core, err := dlopen(loc.Core)
	if err != nil {
		return nil, fmt.Errorf("bindings: open %s: %w", loc.Core, err)
	}
	lib := &Lib{Loc: loc, base: base, core: core, procs: map[procKey]any{}}
	if err := lib.register(); err != nil {
		return nil, err
	}
	lib.Version = lib.Funcs.Version()
	lib.Commit = lib.Funcs.Commit()
	installLog(lib)
	lib.modules = lib.loadModules(loc.Dir, modules)
	if err := checkSingleBase(); err != nil {
		return nil, err
	}
	if err := lib.checkLayout(); err != nil {
		return nil, err
	}
	return lib, nil
}

// register fills every field of Funcs from the two libraries.
func (l *Lib) register() error {
	missing := bind(&l.Funcs, func(name string) (uintptr, error) {
		sym, err := dlsym(l.core, name)
		if err != nil {
			sym, err = dlsym(l.base, name)
		}
		return sym, err
	})
	if len(missing) > 0 {
		return fmt.Errorf("bindings: %s / %s lack %d symbols of the pinned API: %s", l.Loc.Base, l.Loc.Core, len(missing), strings.Join(missing, ", "))
	}
	return nil
}

// Bind fills every function field of the struct table points to that has
// a `c:"symbol"` tag with that symbol of the library h (OpenLibrary), as
// the bindings' own table is filled. A field tagged `opt:"1"` may be
// missing; the others missing make the error, which names them.
func Bind(table any, h uintptr) error {
	missing := bind(table, func(name string) (uintptr, error) { return LookupSymbol(h, name) })
	if len(missing) > 0 {
		return fmt.Errorf("bindings: the library lacks %s", strings.Join(missing, ", "))
	}
	return nil
}

// bind fills table's tagged fields from lookup and returns the names of
// the required symbols it could not find.
func bind(table any, lookup func(string) (uintptr, error)) []string {
	v := reflect.ValueOf(table).Elem()
	t := v.Type()
	var missing []string
	for i := 0; i < t.NumField(); i++ {
		f := t.Field(i)
		name := f.Tag.Get("c")
		if name == "" {
			continue
		}
		sym, err := lookup(name)
		if err != nil {
			if f.Tag.Get("opt") == "" {
				missing = append(missing, name)
			}
			continue
		}
		// unexported fields too: the table is the caller's own
		fv := v.Field(i)
		purego.RegisterFunc(reflect.NewAt(fv.Type(), unsafe.Pointer(fv.UnsafeAddr())).Interface(), sym)
	}
	return missing
}

// NewCallback makes a C function pointer that calls fn (purego's rules: fn
// takes and returns integers and pointers). Callbacks are never freed: make
// each once.
func NewCallback(fn any) uintptr { return purego.NewCallback(fn) }

// Proc returns the entry point a backend publishes under name through
// ggml_backend_reg_get_proc_address, bound to a Go function of type F, and
// false when the backend has none. Results are cached per (reg, name).
func Proc[F any](l *Lib, reg Reg, name string) (F, bool) {
	var zero F
	if reg == 0 {
		return zero, false
	}
	l.procMu.Lock()
	defer l.procMu.Unlock()
	key := procKey{reg, name}
	if f, ok := l.procs[key]; ok {
		if f == nil {
			return zero, false
		}
		return f.(F), true
	}
	addr := l.RegGetProcAddress(reg, name)
	if addr == 0 {
		l.procs[key] = nil
		return zero, false
	}
	var fn F
	purego.RegisterFunc(&fn, addr)
	l.procs[key] = fn
	return fn, true
}

// checkAdded refuses a prebuilt set to which modules of another release were
// added (scripts/build-native.sh --into writes .added with the tag).
func checkAdded(loc Location, pin native.Pin) error {
	b, err := os.ReadFile(filepath.Join(loc.Dir, ".added"))
	if err != nil {
		return nil
	}
	tag, mods, _ := strings.Cut(strings.TrimSpace(string(b)), " ")
	if tag != pin.LlamaCppTag {
		return fmt.Errorf("%w: %s holds %s built from llama.cpp %s beside a prebuilt %s set; rebuild them with scripts/build-native.sh linux-x64 cpu,rpc --into %s",
			ErrVersion, loc.Dir, mods, tag, pin.LlamaCppTag, filepath.Base(loc.Dir))
	}
	return nil
}

// checkSingleBase refuses a process that mapped two different libggml-base
// files: a module from another set resolved its own copy, and the two halves
// would not share ggml's state.
func checkSingleBase() error {
	if runtime.GOOS != "linux" {
		return nil
	}
	maps, err := os.ReadFile("/proc/self/maps")
	if err != nil {
		return nil
	}
	files := map[string]string{} // inode -> path
	for _, line := range strings.Split(string(maps), "\n") {
		fields := strings.Fields(line)
		if len(fields) < 6 {
			continue
		}
		path := fields[5]
		if !strings.HasPrefix(filepath.Base(path), "libggml-base") {
			continue
		}
		files[fields[3]+":"+fields[4]] = path
	}
	if len(files) > 1 {
		var paths []string
		for _, p := range files {
			paths = append(paths, p)
		}
		return fmt.Errorf("bindings: this process mapped %d different libggml-base files (%s): a backend module resolved a copy of its own; mixed sets must link its soname to the set's libggml-base (scripts/build-native.sh --into does this)", len(files), strings.Join(paths, ", "))
	}
	return nil
}

// checkLayout compares the Go mirrors with the library's own view of the
// same objects: a tensor made by ggml read through Tensor must agree with
// ggml's accessors, and DevProps with the device accessors.
func (l *Lib) checkLayout() error {
	ctx := l.Init(InitParams{MemSize: 4 * l.TensorOverhead(), NoAlloc: true})
	if ctx == 0 {
		return errors.New("bindings: ggml_init failed")
	}
	defer l.Free(ctx)
	ne := [4]int64{256, 3, 2, 1}
	t := l.NewTensor(ctx, 12 /* q4_K */, 3, &ne[0])
	l.SetName(t, "layout-probe")
	var bad []string
	if t.Type != 12 {
		bad = append(bad, fmt.Sprintf("type %d", t.Type))
	}
	if t.Ne != ne {
		bad = append(bad, fmt.Sprintf("ne %v", t.Ne))
	}
	if got := l.NBytes(t); uintptr(t.Ne[3])*t.Nb[3] != got {
		bad = append(bad, fmt.Sprintf("nb %v vs nbytes %d", t.Nb, got))
	}
	if name := GoString(&t.Name[0]); name != l.GetName(t) {
		bad = append(bad, fmt.Sprintf("name %q", name))
	}
	if t.Data != nil || t.Buffer != 0 || t.ViewSrc != nil {
		bad = append(bad, "data/buffer/view_src not zero in a no_alloc context")
	}
	if first := l.GetFirstTensor(ctx); first != t {
		bad = append(bad, "first tensor address")
	}
	for i := uintptr(0); i < l.DevCount(); i++ {
		d := l.DevGet(i)
		var p DevProps
		l.DevGetProps(d, &p)
		if GoString(p.Name) != l.DevName(d) || GoString(p.Description) != l.DevDescription(d) || p.Type != l.DevType(d) {
			bad = append(bad, fmt.Sprintf("device %d props (%q, type %d)", i, GoString(p.Name), p.Type))
		}
	}
	var tp ThreadpoolParams
	tp.CPUMask[0], tp.StrictCPU, tp.Paused = true, true, true
	l.ThreadpoolParamsInit(&tp, 3)
	if tp.NThreads != 3 || tp.Prio != 0 || tp.Poll != 50 || tp.StrictCPU || tp.Paused || tp.CPUMask[0] {
		bad = append(bad, fmt.Sprintf("ggml_threadpool_params_init's defaults read back as n_threads %d, prio %d, poll %d", tp.NThreads, tp.Prio, tp.Poll))
	}
	if len(bad) > 0 {
		return fmt.Errorf("bindings: the C struct mirrors do not match %s: %s", l.Loc.Base, strings.Join(bad, "; "))
	}
	return nil
}

// Ptr is a helper for tests and package ggml: the address of the first
// element of b (nil for an empty slice).
func Ptr(b []byte) unsafe.Pointer {
	if len(b) == 0 {
		return nil
	}
	return unsafe.Pointer(&b[0])
}

// OpenLibrary opens another native library of the set (libllama, for the
// comparison harness) the way the set itself is opened on this platform,
// and returns its handle for LookupSymbol.
func OpenLibrary(path string) (uintptr, error) { return dlopen(path) }

// LookupSymbol is the address of name in a library opened by OpenLibrary.
func LookupSymbol(h uintptr, name string) (uintptr, error) { return dlsym(h, name) }
