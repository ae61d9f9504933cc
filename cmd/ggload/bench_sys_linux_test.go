package main

import (
	"runtime"
	"testing"

	"golang.org/x/sys/unix"
)

// A load call's kernel time is what the kernel spent for the process while
// it ran: fresh pages faulted in count, and it cannot exceed the call's
// time on every core.
func TestBenchKernelTime(t *testing.T) {
	var res childResult
	stop := res.timeLoad()
	const n = 256 << 20
	b, err := unix.Mmap(-1, 0, n, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_PRIVATE|unix.MAP_ANON)
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i < n; i += 4096 {
		b[i] = 1 // a fault, and a page zeroed, each
	}
	stop()
	unix.Munmap(b)
	if res.KernelS == nil {
		t.Fatal("no kernel time on Linux")
	}
	k := *res.KernelS
	if k <= 0 || k > res.LoadS*float64(runtime.NumCPU())+0.01 {
		t.Fatalf("kernel %.4f s in a call of %.4f s on %d cores, after faulting in 256 MiB", k, res.LoadS, runtime.NumCPU())
	}
	t.Logf("kernel %.3f s of %.3f s", k, res.LoadS)
}
