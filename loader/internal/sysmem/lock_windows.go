package sysmem

import (
	"unsafe"

	"golang.org/x/sys/windows"
)

const lockCall = "VirtualLock"

func pageSize() int { return windows.Getpagesize() }

var (
	kernel32                     = windows.NewLazySystemDLL("kernel32.dll")
	procGetProcessWorkingSetSize = kernel32.NewProc("GetProcessWorkingSetSize")
	procSetProcessWorkingSetSize = kernel32.NewProc("SetProcessWorkingSetSize")
)

// lockRange locks n bytes at p, growing the process's working set once
// when VirtualLock runs into it.
func lockRange(p unsafe.Pointer, n uintptr) error {
	start := uintptr(p)
	err := windows.VirtualLock(start, n)
	if err != nil {
		// the working set bounds what VirtualLock may lock: grow it once
		var lo, hi uintptr
		self := uintptr(windows.CurrentProcess())
		if r, _, _ := procGetProcessWorkingSetSize.Call(self, uintptr(unsafe.Pointer(&lo)), uintptr(unsafe.Pointer(&hi))); r != 0 {
			grow := n + 1<<20
			if r, _, _ := procSetProcessWorkingSetSize.Call(self, lo+grow, hi+grow); r != 0 {
				err = windows.VirtualLock(start, n)
			}
		}
	}
	return err
}

func unlockRange(p unsafe.Pointer, n uintptr) { _ = windows.VirtualUnlock(uintptr(p), n) }

// lockFailure says why VirtualLock failed.
func lockFailure(err error, n uintptr) string {
	return err.Error() + " (even after growing the working set)"
}
