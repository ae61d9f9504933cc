//go:build darwin || freebsd || linux || netbsd

package bindings

import (
	"fmt"
	"sync"

	"github.com/ebitengine/purego"
)

// dlopen opens a shared library with its symbols visible to the libraries
// it loads later (backend modules resolve ggml-base through the process).
func dlopen(path string) (uintptr, error) {
	return purego.Dlopen(path, purego.RTLD_NOW|purego.RTLD_GLOBAL)
}

func dlsym(h uintptr, name string) (uintptr, error) { return purego.Dlsym(h, name) }

var cSetenvFn func(name, value string, overwrite int32) int32

// cSetenvInit finds setenv in the C library the native code uses.
func cSetenvInit() {
	for _, name := range []string{"libc.so.6", "libc.so", "/usr/lib/libSystem.B.dylib"} {
		h, err := dlopen(name)
		if err != nil {
			continue
		}
		if sym, err := dlsym(h, "setenv"); err == nil {
			purego.RegisterFunc(&cSetenvFn, sym)
			return
		}
	}
}

func cSetenv(name, value string) error {
	if cSetenvFn == nil {
		return fmt.Errorf("bindings: cannot reach the C library's setenv")
	}
	if cSetenvFn(name, value, 1) != 0 {
		return fmt.Errorf("bindings: setenv %s failed", name)
	}
	return nil
}

var (
	trimOnce sync.Once
	trimFn   func(pad uintptr) int32          // glibc's malloc_trim
	reliefFn func(zone, goal uintptr) uintptr // macOS's malloc_zone_pressure_relief
)

// TrimHeap hands the memory the C allocator holds free back to the system:
// glibc's malloc_trim(0), which returns the free pages of every arena (glibc
// keeps what native code frees, one arena per thread that allocated), or
// macOS's malloc_zone_pressure_relief. It reports whether the C library has
// such a call (musl has none).
func TrimHeap() bool {
	trimOnce.Do(func() {
		for _, name := range []string{"libc.so.6", "/usr/lib/libSystem.B.dylib"} {
			h, err := dlopen(name)
			if err != nil {
				continue
			}
			if sym, err := dlsym(h, "malloc_trim"); err == nil {
				purego.RegisterFunc(&trimFn, sym)
				return
			}
			if sym, err := dlsym(h, "malloc_zone_pressure_relief"); err == nil {
				purego.RegisterFunc(&reliefFn, sym)
				return
			}
		}
	})
	switch {
	case trimFn != nil:
		trimFn(0)
	case reliefFn != nil:
		reliefFn(0, 0)
	default:
		return false
	}
	return true
}

// dlInfo mirrors Dl_info of <dlfcn.h>.
type dlInfo struct {
	fname *byte
	fbase uintptr
	sname *byte
	saddr uintptr
}

var (
	dladdrOnce sync.Once
	dladdrFn   func(addr uintptr, info *dlInfo) int32
)

// moduleSymbol finds name in the shared library that holds addr: dladdr
// names the library, dlopen of that name gives the handle of the library
// already loaded, dlsym the symbol; 0 where a step fails.
func moduleSymbol(addr uintptr, name string) uintptr {
	dladdrOnce.Do(func() {
		for _, lib := range []string{"libc.so.6", "libdl.so.2", "/usr/lib/libSystem.B.dylib"} {
			h, err := dlopen(lib)
			if err != nil {
				continue
			}
			if sym, err := dlsym(h, "dladdr"); err == nil {
				purego.RegisterFunc(&dladdrFn, sym)
				return
			}
		}
	})
	if dladdrFn == nil {
		return 0
	}
	var info dlInfo
	if dladdrFn(addr, &info) == 0 || info.fname == nil {
		return 0
	}
	h, err := purego.Dlopen(GoString(info.fname), purego.RTLD_NOW|purego.RTLD_LOCAL)
	if err != nil {
		return 0
	}
	sym, err := dlsym(h, name)
	if err != nil {
		return 0
	}
	return sym
}

// registerFunc binds the C function at sym to fn.
func registerFunc(fn any, sym uintptr) { purego.RegisterFunc(fn, sym) }
