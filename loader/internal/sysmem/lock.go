package sysmem

import (
	"fmt"
	"sync"
	"unsafe"
)

// Lock locks a growing prefix of a memory range in RAM (llama_mlock):
// GrowTo extends the locked prefix page by page, never past the pages the
// range covers (its first page holds its first byte, its last page its
// last byte, whatever their alignment). The first failure is reported once,
// with its cause, and locking stops; loading goes on. Release unlocks what
// was locked, before the memory is freed. Its methods may be called at
// once from several goroutines.
type Lock struct {
	mu     sync.Mutex
	addr   unsafe.Pointer // the range's first byte
	base   unsafe.Pointer // its page
	span   uintptr        // bytes from base to the end of the range's last page
	locked uintptr        // bytes locked from base (whole pages)
	failed bool
	what   string
	warn   func(string)
}

// NewLock is the lock of the size bytes at addr, which locks nothing yet;
// a failure to lock them is reported to warn, in a sentence that names
// the range as what.
func NewLock(addr unsafe.Pointer, size uintptr, what string, warn func(string)) *Lock {
	l := &Lock{addr: addr, what: what, warn: warn}
	if addr == nil || size == 0 {
		return l
	}
	page := uintptr(pageSize())
	skew := uintptr(addr) & (page - 1)
	l.base = unsafe.Add(addr, -int(skew))
	l.span = (skew + size + page - 1) &^ (page - 1)
	return l
}

// Addr is the range's first byte.
func (l *Lock) Addr() unsafe.Pointer { return l.addr }

// GrowTo locks the range's first target bytes (whole pages).
func (l *Lock) GrowTo(target uintptr) {
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

// Release unlocks what was locked.
func (l *Lock) Release() {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.locked > 0 {
		unlockRange(l.base, l.locked)
		l.locked = 0
	}
}
