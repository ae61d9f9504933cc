package bench

import (
	"os"
	"path/filepath"
	"runtime"
	"testing"

	"golang.org/x/sys/unix"
)

// A load call's kernel time is what the kernel spent for the process while
// it ran: fresh pages faulted in count, and it cannot exceed the call's
// time on every core.
func TestBenchKernelTime(t *testing.T) {
	var res LoadResult
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

// A balloon (virtio device 5) with feature bit 5 reports free pages; bit
// 5 of another device, or a balloon without it, does not.
func TestFreePageReporting(t *testing.T) {
	bit5 := "00000100000000000000000000000000100000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000\n"
	bit1 := "01000000000000000000000000000000100000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000000\n"
	for _, c := range []struct {
		devs map[string][2]string // name: device id, features
		want bool
	}{
		{map[string][2]string{"virtio0": {"0x0005", bit5}}, true},
		{map[string][2]string{"virtio0": {"0x0001", bit5}, "virtio1": {"0x0005", bit1}}, false},
		{map[string][2]string{"virtio0": {"0x0002", bit1}, "virtio3": {"0x0005\n", bit5}}, true},
		{map[string][2]string{"virtio0": {"0x0005", "0000"}}, false},
		{nil, false},
	} {
		dir := t.TempDir()
		for name, f := range c.devs {
			d := filepath.Join(dir, name)
			if err := os.Mkdir(d, 0o755); err != nil {
				t.Fatal(err)
			}
			os.WriteFile(filepath.Join(d, "device"), []byte(f[0]), 0o644)
			os.WriteFile(filepath.Join(d, "features"), []byte(f[1]), 0o644)
		}
		if got := freePageReportingAt(dir); got != c.want {
			t.Errorf("%v: %v, want %v", c.devs, got, c.want)
		}
	}
	if got := backMemory(64<<20 + 100); got != 64<<20 {
		t.Errorf("backMemory of 64 MiB and 100 bytes faulted in %d bytes", got)
	}
	if got := backMemory(0); got != 0 {
		t.Errorf("backMemory(0) = %d", got)
	}
}
