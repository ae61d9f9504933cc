package loader

import (
	"unsafe"

	"golang.org/x/sys/windows"
)

// anonMap commits n bytes of memory (page-aligned, zeroed) outside Go's
// heap: anonUnmap gives it back to the system at once.
func anonMap(n int) ([]byte, error) {
	p, err := windows.VirtualAlloc(0, uintptr(n), windows.MEM_COMMIT|windows.MEM_RESERVE, windows.PAGE_READWRITE)
	if err != nil {
		return nil, err
	}
	return unsafe.Slice((*byte)(*(*unsafe.Pointer)(unsafe.Pointer(&p))), n), nil
}

func anonUnmap(b []byte) {
	if len(b) > 0 {
		_ = windows.VirtualFree(uintptr(unsafe.Pointer(&b[0])), 0, windows.MEM_RELEASE)
	}
}
