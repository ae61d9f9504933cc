//go:build !linux

package sysmem

import "unsafe"

// AnonMemory lists nothing here: there is no /proc/self/maps to read.
func AnonMemory() Ranges { return nil }

// AdviseNewMemory advises nothing here.
func AdviseNewMemory(before Ranges) Ranges { return nil }

// AdviseHugePages does nothing here.
func AdviseHugePages(p unsafe.Pointer, n uint64) {}

// Release does nothing here.
func (rs Ranges) Release() {}

// Prefaulter faults nothing in here.
type Prefaulter struct{}

// Prefault faults nothing in here.
func Prefault(rs Ranges) *Prefaulter { return &Prefaulter{} }

// Wait returns at once.
func (pf *Prefaulter) Wait() {}

// Finish returns at once.
func (pf *Prefaulter) Finish() {}

// PopulateLater is false here: a mapping's pages are mapped in by mmap
// or by faults.
func PopulateLater() bool { return false }

// PopulateMapped maps nothing in here.
func PopulateMapped(p unsafe.Pointer, n uint64, fd int, off int64) *Prefaulter {
	return &Prefaulter{}
}
