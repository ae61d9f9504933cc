//go:build unix

package sysmem

import (
	"strconv"
	"strings"

	"golang.org/x/sys/unix"
)

// Map maps n bytes of anonymous memory (page-aligned, zeroed), outside
// Go's heap: Unmap gives it back to the system at once. A refusal (an
// address-space limit, say) is an error, not the Go runtime's fatal
// out-of-memory.
func Map(n int) ([]byte, error) {
	return unix.Mmap(-1, 0, n, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_PRIVATE|unix.MAP_ANON)
}

// Unmap gives back the memory b that Map mapped, all of it.
func Unmap(b []byte) { _ = unix.Munmap(b) }

// AddressSpace is the process's address-space limit (RLIMIT_AS) and its
// address space in use (VmSize), when there is a limit and the use is
// known.
func AddressSpace() (limit, used uint64, ok bool) {
	var lim unix.Rlimit
	if unix.Getrlimit(unix.RLIMIT_AS, &lim) != nil || lim.Cur == unix.RLIM_INFINITY {
		return 0, 0, false
	}
	v, found := statusField("VmSize:")
	if !found {
		return 0, 0, false
	}
	kb, err := strconv.ParseUint(strings.TrimSpace(strings.TrimSuffix(v, "kB")), 10, 64)
	if err != nil {
		return 0, 0, false
	}
	return uint64(lim.Cur), kb << 10, true
}
