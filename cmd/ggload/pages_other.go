//go:build unix && !linux

package main

// adviseHugePages does nothing where madvise has no MADV_HUGEPAGE.
func adviseHugePages(b []byte) {}
