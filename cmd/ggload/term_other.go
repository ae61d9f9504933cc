//go:build !linux

package main

import "os"

// isTerminal is conservative where the check is not implemented: no
// progress bar.
func isTerminal(f *os.File) bool { return false }
