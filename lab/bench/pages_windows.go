package bench

import (
	"unsafe"

	"golang.org/x/sys/windows"
)

// freshPages commits n bytes of memory no one has touched.
func freshPages(n int) ([]byte, error) {
	p, err := windows.VirtualAlloc(0, uintptr(n), windows.MEM_COMMIT|windows.MEM_RESERVE, windows.PAGE_READWRITE)
	if err != nil {
		return nil, err
	}
	return unsafe.Slice((*byte)(*(*unsafe.Pointer)(unsafe.Pointer(&p))), n), nil
}

func releasePages(b []byte) {
	windows.VirtualFree(uintptr(unsafe.Pointer(&b[0])), 0, windows.MEM_RELEASE)
}
