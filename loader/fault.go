package loader

import (
	"fmt"
	"runtime/debug"
	"unsafe"
)

// touch reads one byte of every page of [p, p+n) in Go with faults turned
// into panics and recovers them: a mapped file that shrank gives an error
// here instead of a SIGBUS inside native code, which would kill the
// process.
func touch(p unsafe.Pointer, n uint64) (err error) {
	if n == 0 {
		return nil
	}
	old := debug.SetPanicOnFault(true)
	defer func() {
		debug.SetPanicOnFault(old)
		if r := recover(); r != nil {
			err = fmt.Errorf("reading mapped memory faulted (%v): the file shrank after it was opened?", r)
		}
	}()
	const page = 4096
	var sink byte
	b := unsafe.Slice((*byte)(p), n)
	for i := uint64(0); i < n; i += page {
		sink += b[i]
	}
	sink += b[n-1]
	touchSink = sink
	return nil
}

// touchSink keeps the compiler from dropping touch's reads.
var touchSink byte
