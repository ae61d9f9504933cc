//go:build !linux

package testenv

import "testing"

// Evict drops a file's pages from the page cache where it can (Linux).
func Evict(t testing.TB, path string) {}

// Resident is -1: the page cache is not asked here.
func Resident(t testing.TB, path string, off, n int64) int64 { return -1 }
