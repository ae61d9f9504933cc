//go:build !linux

package bench

import (
	"errors"
	"os"
	"time"
)

// kernelTime: the kernel's share is measured on Linux only.
func kernelTime() (time.Duration, bool) { return 0, false }

// openDirect: direct I/O is measured on Linux only.
func openDirect(path string) (*os.File, error) {
	return nil, errors.New("direct I/O is measured on Linux only")
}

// mapTime: mapping is measured on Linux only (0: not measured).
func mapTime(paths []string) float64 { return 0 }

// evictPageCache: cold loads are measured on Linux only.
func evictPageCache(paths []string) error {
	return errors.New("cold loads are measured on Linux only (posix_fadvise)")
}

// residentFraction: not measured off Linux.
func residentFraction(paths []string) float64 { return -1 }

// FreePageReporting: told on Linux only.
func FreePageReporting() bool { return false }

// backMemory: done on Linux only.
func backMemory(n uint64) uint64 { return 0 }
