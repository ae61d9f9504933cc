package bindings

import (
	"fmt"

	"github.com/ebitengine/purego"
	"golang.org/x/sys/windows"
)

// dlopen loads a DLL so that the DLLs it imports (ggml.dll imports
// ggml-base.dll) are looked for in its own directory first.
func dlopen(path string) (uintptr, error) {
	h, err := windows.LoadLibraryEx(path, 0, windows.LOAD_WITH_ALTERED_SEARCH_PATH)
	return uintptr(h), err
}

func dlsym(h uintptr, name string) (uintptr, error) {
	return windows.GetProcAddress(windows.Handle(h), name)
}

var cPutenvFn func(name, value string) int32

// cSetenvInit finds _putenv_s in the universal C runtime, whose environment
// copy is the one getenv reads in DLLs built against it (MSVC's default).
func cSetenvInit() {
	h, err := windows.LoadLibraryEx("ucrtbase.dll", 0, windows.LOAD_LIBRARY_SEARCH_SYSTEM32)
	if err != nil {
		return
	}
	if sym, err := windows.GetProcAddress(h, "_putenv_s"); err == nil {
		purego.RegisterFunc(&cPutenvFn, sym)
	}
}

func cSetenv(name, value string) error {
	if cPutenvFn == nil {
		return fmt.Errorf("bindings: cannot reach the C runtime's _putenv_s (ucrtbase.dll)")
	}
	if cPutenvFn(name, value) != 0 {
		return fmt.Errorf("bindings: _putenv_s %s failed", name)
	}
	return nil
}

// TrimHeap: the Windows C runtime's heap gives freed memory back itself;
// there is nothing to call.
func TrimHeap() bool { return false }

// moduleSymbol finds name in the DLL that holds addr; 0 where it cannot
// (not done on Windows: callers do without).
func moduleSymbol(addr uintptr, name string) uintptr { return 0 }

// registerFunc binds the C function at sym to fn.
func registerFunc(fn any, sym uintptr) { purego.RegisterFunc(fn, sym) }
