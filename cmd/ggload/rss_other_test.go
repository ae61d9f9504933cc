//go:build !linux

package main

import "os"

// peakRSS is not measured off Linux (where ru_maxrss is in KiB).
func peakRSS(ps *os.ProcessState) (int64, bool) { return 0, false }
