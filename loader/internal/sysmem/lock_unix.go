//go:build unix

package sysmem

import (
	"errors"
	"fmt"
	"unsafe"

	"golang.org/x/sys/unix"
)

const lockCall = "mlock"

func pageSize() int { return unix.Getpagesize() }

func lockRange(p unsafe.Pointer, n uintptr) error {
	return unix.Mlock(unsafe.Slice((*byte)(p), n))
}

func unlockRange(p unsafe.Pointer, n uintptr) {
	_ = unix.Munlock(unsafe.Slice((*byte)(p), n))
}

// lockFailure says why locking n more bytes failed: RLIMIT_MEMLOCK only
// when it is what refused them (no CAP_IPC_LOCK, and the bytes locked
// would pass it), with the way to raise it.
func lockFailure(err error, n uintptr) string {
	var lim unix.Rlimit
	haveLim := unix.Getrlimit(unix.RLIMIT_MEMLOCK, &lim) == nil
	limit := "unknown"
	if haveLim {
		limit = fmt.Sprintf("%d bytes (hard %d)", lim.Cur, lim.Max)
		if lim.Cur == unix.RLIM_INFINITY {
			limit = "unlimited"
		}
	}
	const raise = "raise it with 'ulimit -l unlimited' (as root) or LimitMEMLOCK= in a systemd unit"
	capable := canLockAnything()
	switch {
	case errors.Is(err, unix.ENOMEM):
		if !capable && haveLim && lim.Cur != unix.RLIM_INFINITY {
			if locked, ok := lockedNow(); !ok || uint64(locked)+uint64(n) > uint64(lim.Cur) {
				return fmt.Sprintf("%v: RLIMIT_MEMLOCK is %s, too little for %d more bytes; %s", err, limit, n, raise)
			}
		}
		return fmt.Sprintf("%v: not the limit (RLIMIT_MEMLOCK is %s%s): part of the range is not mapped memory", err, limit, capNote(capable))
	case errors.Is(err, unix.EPERM):
		return fmt.Sprintf("%v: the process may not lock memory (RLIMIT_MEMLOCK is %s%s); %s", err, limit, capNote(capable), raise)
	case errors.Is(err, unix.EAGAIN):
		return fmt.Sprintf("%v: the system could not lock the pages (RLIMIT_MEMLOCK is %s%s); memory the kernel can lock is short", err, limit, capNote(capable))
	}
	return fmt.Sprintf("%v (RLIMIT_MEMLOCK is %s)", err, limit)
}

func capNote(capable bool) string {
	if capable {
		return ", and CAP_IPC_LOCK lifts it"
	}
	return ""
}
