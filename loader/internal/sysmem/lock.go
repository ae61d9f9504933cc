package loader

import (
	"fmt"
	"sync"
	"unsafe"
)

// memLock locks a growing prefix of a memory range in RAM (llama_mlock):
// growTo extends the locked prefix page by page, never past the pages the
// range covers (its first page holds its first byte, its last page its
// last byte, whatever their alignment). The first failure is reported once,
// with its cause, and locking stops; loading goes on. release unlocks what
// was locked, before the memory is freed.
type memLock struct {
	mu     sync.Mutex
	addr   unsafe.Pointer // the range's first byte
	base   unsafe.Pointer // its page
	span   uintptr        // bytes from base to the end of the range's last page
	locked uintptr        // bytes locked from base (whole pages)
	failed bool
	what   string
	warn   func(string)
}

func newMemLock(addr unsafe.Pointer, size uintptr, what string, warn func(string)) *memLock {
	l := &memLock{addr: addr, what: what, warn: warn}
	if addr == nil || size == 0 {
		return l
	}
	page := uintptr(pageSize())
	skew := uintptr(addr) & (page - 1)
	l.base = unsafe.Add(addr, -int(skew))
	l.span = (skew + size + page - 1) &^ (page - 1)
	return l
}

// growTo locks the range's first target bytes (whole pages).
func (l *memLock) growTo(target uintptr) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.failed || l.base == nil {
		return
	}
	page := uintptr(pageSize())
	skew := uintptr(l.addr) - uintptr(l.base)
	want := min((skew+target+page-1)&^(page-1), l.span)
	if want <= l.locked {
		return
	}
	n := want - l.locked
	if err := lockRange(unsafe.Add(l.base, l.locked), n); err != nil {
		l.failed = true
		l.warn(fmt.Sprintf("%s of %s failed after locking %d bytes: %s; loading continues unlocked", lockCall, l.what, l.locked, lockFailure(err, n)))
		return
	}
	l.locked = want
}

// release unlocks what was locked.
func (l *memLock) release() {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.locked > 0 {
		unlockRange(l.base, l.locked)
		l.locked = 0
	}
}

// lockedBytes is how much of the range is locked (whole pages).
func (l *memLock) lockedBytes() uintptr {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.locked
}
