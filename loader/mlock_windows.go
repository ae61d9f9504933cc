package loader

import (
	"fmt"
	"unsafe"

	"golang.org/x/sys/windows"
)

// memLock locks a growing prefix of a memory range in RAM (llama_mlock):
// growTo extends the locked prefix page by page, growing the process's
// working set once when VirtualLock runs into it. The first failure is
// reported once and locking stops; loading goes on.
type memLock struct {
	addr   unsafe.Pointer
	locked uintptr
	failed bool
	what   string
	warn   func(string)
}

func newMemLock(addr unsafe.Pointer, what string, warn func(string)) *memLock {
	return &memLock{addr: addr, what: what, warn: warn}
}

var (
	kernel32                     = windows.NewLazySystemDLL("kernel32.dll")
	procGetProcessWorkingSetSize = kernel32.NewProc("GetProcessWorkingSetSize")
	procSetProcessWorkingSetSize = kernel32.NewProc("SetProcessWorkingSetSize")
)

func (l *memLock) growTo(target uintptr) {
	if l.failed || l.addr == nil {
		return
	}
	page := uintptr(windows.Getpagesize())
	target = (target + page - 1) &^ (page - 1)
	if target <= l.locked {
		return
	}
	n := target - l.locked
	start := uintptr(l.addr) + l.locked
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
	if err != nil {
		l.failed = true
		l.warn(fmt.Sprintf("VirtualLock of %s failed after locking %d bytes: %v; loading continues unlocked", l.what, l.locked, err))
		return
	}
	l.locked = target
}

// release unlocks what was locked.
func (l *memLock) release() {
	if l.locked > 0 {
		_ = windows.VirtualUnlock(uintptr(l.addr), l.locked)
		l.locked = 0
	}
}
