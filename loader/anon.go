package loader

import (
	"fmt"
	"unsafe"

	"github.com/ggload/ggload/ggml"
	"github.com/ggload/ggload/loader/internal/sysmem"
)

// bounceMemory maps n bytes of memory outside Go's heap for a bounce
// buffer: freed at once when the load is done with it (the resident size
// comes back after a load), and, when the system refuses it (an address
// space limit, say), an error wrapping ggml.ErrOutOfMemory instead of the Go
// runtime's fatal out-of-memory. From 2 MiB on it asks for huge pages: a
// fresh buffer's first fill then takes a fault per 2 MiB, not per 4 KiB
// (on a virtual machine a fault may cost tens of microseconds: 25 ms for a
// 4 MiB tensor's first read into a buffer of small pages).
func bounceMemory(n int64, what string) ([]byte, error) {
	if n <= 0 {
		return nil, nil
	}
	b, err := sysmem.Map(int(n))
	if err != nil {
		return nil, fmt.Errorf("loader: cannot map %d bytes (%.2f MiB) of bounce memory for %s: %w: %w", n, float64(n)/(1<<20), what, err, ggml.ErrOutOfMemory)
	}
	if n >= 2<<20 {
		sysmem.AdviseHugePages(unsafe.Pointer(&b[0]), uint64(n))
	}
	return b, nil
}
