package bindings

import (
	"fmt"
	"os"
	"runtime"
	"sync"

	"github.com/ebitengine/purego"
)

var (
	libcOnce   sync.Once
	libcSetenv func(name, value string, overwrite int32) int32
)

// Setenv sets an environment variable for Go and for native code. Without
// cgo, os.Setenv does not reach the C library's environment, which is where
// ggml's backends read their settings (GGML_VK_VISIBLE_DEVICES, ...). Call it
// before Open for variables read while backends load.
func Setenv(name, value string) error {
	if err := os.Setenv(name, value); err != nil {
		return err
	}
	if runtime.GOOS == "windows" {
		return nil // one environment on Windows
	}
	libcOnce.Do(func() {
		for _, name := range []string{"libc.so.6", "libc.so", "/usr/lib/libSystem.B.dylib"} {
			h, err := purego.Dlopen(name, purego.RTLD_NOW|purego.RTLD_GLOBAL)
			if err != nil {
				continue
			}
			if sym, err := purego.Dlsym(h, "setenv"); err == nil {
				purego.RegisterFunc(&libcSetenv, sym)
				return
			}
		}
	})
	if libcSetenv == nil {
		return fmt.Errorf("bindings: cannot reach the C library's setenv")
	}
	if libcSetenv(name, value, 1) != 0 {
		return fmt.Errorf("bindings: setenv %s failed", name)
	}
	return nil
}
