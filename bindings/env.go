package bindings

import (
	"os"
	"sync"
)

var cEnvOnce sync.Once

// Setenv sets an environment variable for Go and for native code. Without
// cgo, os.Setenv does not reach the C library's environment, which is where
// ggml's backends read their settings (GGML_VK_VISIBLE_DEVICES, ...). Call it
// before Open for variables read while backends load.
func Setenv(name, value string) error {
	if err := os.Setenv(name, value); err != nil {
		return err
	}
	cEnvOnce.Do(cSetenvInit)
	return cSetenv(name, value)
}
