//go:build unix

package loader

import (
	"fmt"
	"unsafe"

	"golang.org/x/sys/unix"
)

// memLock locks a growing prefix of a memory range in RAM (llama_mlock):
// growTo extends the locked prefix page by page. The first failure is
// reported once, with the limit and the fix, and locking stops; loading
// goes on.
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

func (l *memLock) growTo(target uintptr) {
	if l.failed || l.addr == nil {
		return
	}
	page := uintptr(unix.Getpagesize())
	target = (target + page - 1) &^ (page - 1)
	if target <= l.locked {
		return
	}
	n := target - l.locked
	if err := unix.Mlock(unsafe.Slice((*byte)(unsafe.Add(l.addr, l.locked)), n)); err != nil {
		l.failed = true
		var lim unix.Rlimit
		limit := "unknown"
		if unix.Getrlimit(unix.RLIMIT_MEMLOCK, &lim) == nil {
			limit = fmt.Sprintf("%d bytes (hard %d)", lim.Cur, lim.Max)
		}
		l.warn(fmt.Sprintf("mlock of %s failed after locking %d bytes: %v; RLIMIT_MEMLOCK is %s; raise it with 'ulimit -l unlimited' (as root) or LimitMEMLOCK= in a systemd unit; loading continues unlocked", l.what, l.locked, err, limit))
		return
	}
	l.locked = target
}

// release unlocks what was locked.
func (l *memLock) release() {
	if l.locked > 0 {
		_ = unix.Munlock(unsafe.Slice((*byte)(l.addr), l.locked))
		l.locked = 0
	}
}
