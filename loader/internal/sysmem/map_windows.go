package sysmem

import (
	"unsafe"

	"golang.org/x/sys/windows"
)

// Map commits n bytes of memory (page-aligned, zeroed) outside Go's heap:
// Unmap gives it back to the system at once. A refusal is an error, not
// the Go runtime's fatal out-of-memory.
func Map(n int) ([]byte, error) {
	p, err := windows.VirtualAlloc(0, uintptr(n), windows.MEM_COMMIT|windows.MEM_RESERVE, windows.PAGE_READWRITE)
	if err != nil {
		return nil, err
	}
	return unsafe.Slice((*byte)(*(*unsafe.Pointer)(unsafe.Pointer(&p))), n), nil
}

// Unmap gives back the memory b that Map committed, all of it.
func Unmap(b []byte) {
	if len(b) > 0 {
		_ = windows.VirtualFree(uintptr(unsafe.Pointer(&b[0])), 0, windows.MEM_RELEASE)
	}
}

// AddressSpace is never known here: Windows has no address-space limit
// to check.
func AddressSpace() (limit, used uint64, ok bool) { return 0, 0, false }
