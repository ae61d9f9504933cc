package main

import (
	"os"
	"syscall"
)

// peakRSS is an exited child's peak resident memory, in bytes.
func peakRSS(ps *os.ProcessState) (int64, bool) {
	ru, ok := ps.SysUsage().(*syscall.Rusage)
	if !ok {
		return 0, false
	}
	return ru.Maxrss << 10, true // (KiB on Linux)
}
