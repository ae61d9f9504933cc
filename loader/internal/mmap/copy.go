package mmap

import (
	"fmt"
	"runtime/debug"
	"unsafe"
)

// Copy copies len(dst) bytes of mapped file memory at src into dst,
// in Go and with faults turned into panics, which it recovers: a mapped
// file that shrank gives an error here instead of a SIGBUS inside native
// code, which would kill the process. dst is anonymous memory (a Go slice,
// a pinned staging buffer, a host weight buffer), so that native code that
// reads it afterwards never touches the file. fault is the offset of dst
// at which the fault happened (-1 without one).
func Copy(dst []byte, src unsafe.Pointer) (fault int64, err error) {
	if len(dst) == 0 {
		return -1, nil
	}
	old := debug.SetPanicOnFault(true)
	defer func() {
		debug.SetPanicOnFault(old)
		if r := recover(); r != nil {
			af, ok := r.(interface{ Addr() uintptr })
			if !ok {
				panic(r)
			}
			fault = int64(af.Addr() - uintptr(src))
			if fault < 0 || fault >= int64(len(dst)) {
				fault = 0
			}
			if re, ok := r.(error); ok {
				err = re // a runtime.Error with the faulting address
			} else {
				err = fmt.Errorf("%v", r)
			}
		}
	}()
	// in pieces under 1 MiB: Go's memmove writes bigger copies with
	// non-temporal stores, which push dst out of the caches just before
	// native code reads it (repacks it, uploads it)
	from := unsafe.Slice((*byte)(src), len(dst))
	for off := 0; off < len(dst); off += copyPiece {
		end := min(off+copyPiece, len(dst))
		copy(dst[off:end], from[off:end])
	}
	return -1, nil
}

// copyPiece is the most Copy copies at once.
const copyPiece = 512 << 10
