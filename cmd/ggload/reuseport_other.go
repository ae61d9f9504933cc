//go:build !linux && !darwin

package main

import (
	"fmt"
	"runtime"
)

// reusePort refuses --reuse-port where ggload does not set SO_REUSEPORT.
func reusePort(fd uintptr) error {
	return fmt.Errorf("--reuse-port: SO_REUSEPORT is not supported on %s", runtime.GOOS)
}
