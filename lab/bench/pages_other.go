//go:build unix && !linux

package bench

// adviseHugePages does nothing where madvise has no MADV_HUGEPAGE.
func adviseHugePages(b []byte) {}
