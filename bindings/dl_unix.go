//go:build darwin || freebsd || linux || netbsd

package bindings

import (
	"fmt"

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
