//go:build !linux

package rpc_test

import "testing"

// evict drops a file's pages from the page cache where it can (Linux).
func evict(t *testing.T, path string) {}

// resident is -1: the page cache is not asked here.
func resident(t *testing.T, path string, off, n int64) int64 { return -1 }

// readahead is 0: the page cache is not asked here.
func readahead(path string) int64 { return 0 }
