//go:build linux

package loader

import (
	"bufio"
	"bytes"
	"context"
	"log/slog"
	"os"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/ggload/ggload/ggml"
	"github.com/ggload/ggload/lab/synth"
	"github.com/ggload/ggload/lab/testenv"
	"github.com/ggload/ggload/loader/internal/sysmem"
	"github.com/ggload/ggload/place"
)

// eachSmaps calls fn with every field of /proc/self/smaps ("Rss:", "10
// kB"), the bounds of the mapping it describes and the mapping's path (""
// for anonymous memory).
func eachSmaps(t *testing.T, fn func(start, end uintptr, path, key, value string)) {
	t.Helper()
	b, err := os.ReadFile("/proc/self/smaps")
	if err != nil {
		t.Skip("no /proc/self/smaps")
	}
	var start, end uintptr
	path := ""
	sc := bufio.NewScanner(bytes.NewReader(b))
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		if len(f) == 0 {
			continue
		}
		if se := strings.SplitN(f[0], "-", 2); len(se) == 2 && !strings.HasSuffix(f[0], ":") {
			s, err1 := strconv.ParseUint(se[0], 16, 64)
			e, err2 := strconv.ParseUint(se[1], 16, 64)
			start, end, path = uintptr(s), uintptr(e), ""
			if err1 != nil || err2 != nil {
				start, end = 0, 0
			}
			if len(f) >= 6 {
				path = f[5]
			}
			continue
		}
		if len(f) >= 2 && end > start {
			fn(start, end, path, f[0], f[1])
		}
	}
}

// smapsOf sums what /proc/self/smaps says of the mappings inside rs: the
// resident bytes, and the bytes of the mappings that may get huge pages.
func smapsOf(t *testing.T, rs sysmem.Ranges) (rss, eligible uint64) {
	t.Helper()
	eachSmaps(t, func(s, e uintptr, _, key, value string) {
		in := false
		for _, r := range rs {
			in = in || (s >= r[0] && e <= r[1])
		}
		switch {
		case !in:
		case key == "Rss:":
			kb, _ := strconv.ParseUint(value, 10, 64)
			rss += kb << 10
		case key == "THPeligible:" && value == "1":
			eligible += uint64(e - s)
		}
	})
	return rss, eligible
}

// A Vulkan buffer of a software device (lavapipe) lies in this process:
// the memory that appears while it is allocated is found, gets huge pages,
// and the prefaulter faults all of it in.
func TestDeviceMemoryInProcess(t *testing.T) {
	testenv.Runtime(t)
	vk := testenv.Vulkan(t)
	const n = 64 << 20
	ctx, err := vk.Runtime().NewContext(ggml.ContextParams{Tensors: 1, NoAlloc: true})
	if err != nil {
		t.Fatal(err)
	}
	defer ctx.Free()
	x, err := ctx.NewTensor(ggml.TypeI8, n)
	if err != nil {
		t.Fatal(err)
	}
	before := sysmem.AnonMemory()
	if before == nil {
		t.Skip("no /proc/self/maps")
	}
	buf, err := ctx.AllocTensors(vk.BufferType())
	if err != nil {
		t.Fatal(err)
	}
	defer buf.Free()
	rs := sysmem.AdviseNewMemory(before)
	if len(rs) == 0 {
		t.Skipf("%s (%s) keeps its memory outside this process: nothing to advise", vk.Name(), vk.Description())
	}
	if got := rs.Bytes(); got < n || got > n+64<<20 {
		t.Fatalf("%d bytes found for a buffer of %d: %v", got, n, rs)
	}
	thp, _ := os.ReadFile("/sys/kernel/mm/transparent_hugepage/enabled")
	// the buffer's memory may get huge pages; other memory the process
	// made meanwhile (a native thread's stack, which the kernel may keep
	// from huge pages) is not judged
	if _, eligible := smapsOf(t, rs); eligible < n && len(thp) > 0 && !strings.Contains(string(thp), "[never]") {
		t.Errorf("%d of the buffer's %d bytes are eligible for huge pages (THP: %s)", eligible, n, strings.TrimSpace(string(thp)))
	}
	sysmem.Prefault(rs).Finish()
	if rss, _ := smapsOf(t, rs); rss < n {
		t.Fatalf("%d of %d bytes resident after faulting in (MADV_POPULATE_WRITE needs Linux 5.14)", rss, n)
	}
	// and the buffer works as before: a write through ggml reads back
	data := bytes.Repeat([]byte{0x5a}, 4096)
	if err := x.Set(data, n-4096); err != nil {
		t.Fatal(err)
	}
	got := make([]byte, 4096)
	if err := x.Get(got, n-4096); err != nil || !bytes.Equal(got, data) {
		t.Fatalf("read back %v: %x...", err, got[:8])
	}
}

// An mmap load leaves the pages under its zero-copy buffers mapped in, as
// MAP_POPULATE did, though they are mapped in while the load runs
// (MADV_POPULATE_READ): nothing of the tiny model is read through the
// mapping otherwise, so without it they would not be resident.
func TestZeroCopyPagesMappedIn(t *testing.T) {
	if !sysmem.PopulateLater() {
		t.Skip("MADV_POPULATE_READ needs Linux 5.14 (mmap populates the whole mapping itself before)")
	}
	rt := testenv.Runtime(t)
	gm := testenv.OpenModel(t, "testdata/tiny-llama.gguf")
	p, err := place.New(context.Background(), rt, gm, place.Params{LoadMode: place.LoadMmap, DeviceNames: []string{"none"}, NoExtraBufts: true})
	if err != nil {
		t.Fatal(err)
	}
	lm, err := Load(context.Background(), p, Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer lm.Close()
	const page = 4096
	var rs sysmem.Ranges
	var want uint64
	for _, b := range lm.buffers {
		if !b.Mapped {
			continue
		}
		lo := uintptr(lm.mappings[b.File].Addr(b.First)) &^ (page - 1)
		hi := (uintptr(lm.mappings[b.File].Addr(b.First)) + uintptr(b.Last-b.First) + page - 1) &^ (page - 1)
		rs = append(rs, [2]uintptr{lo, hi})
		want += uint64(hi - lo)
	}
	if want == 0 {
		t.Fatal("no zero-copy buffer in an mmap load on the CPU")
	}
	if rss, _ := smapsOf(t, rs); rss < want {
		t.Fatalf("%d of the %d bytes under the zero-copy buffers are mapped in", rss, want)
	}
}

// The host buffer type of a software device (lavapipe's Vulkan_Host) is
// plain memory in this process, as its device buffers are: it gets huge
// pages and is faulted in ahead of the readers (a fault per 4 KiB page
// cost the host's share of a load five times its reading on a virtual
// machine).
func TestSoftwareHostBufferAdvised(t *testing.T) {
	rt := testenv.Runtime(t)
	vk := testenv.Vulkan(t)
	if !softwareDevice(vk) {
		t.Skipf("%s (%s) is not a software device", vk.Name(), vk.Description())
	}
	thp, _ := os.ReadFile("/sys/kernel/mm/transparent_hugepage/enabled")
	if !strings.Contains(string(thp), "[madvise]") {
		t.Skipf("transparent huge pages are %q, not madvise: advice cannot be told from the default", strings.TrimSpace(string(thp)))
	}
	// token_embd stays on the host, in Vulkan_Host
	spec := synth.Spec{Layers: 2, Embd: 256, FF: 512, Heads: 4, Vocab: 32768, Weights: ggml.TypeQ8_0}
	gm := testenv.OpenModel(t, testenv.ModelFile(t, rt, spec))
	p, err := place.New(context.Background(), rt, gm, place.Params{LoadMode: place.LoadNone, DeviceNames: []string{vk.Name()}, NGPULayers: place.NLayers(99), NoExtraBufts: true})
	if err != nil {
		t.Fatal(err)
	}
	lm, err := Load(context.Background(), p, Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer lm.Close()
	found := false
	for _, b := range lm.buffers {
		if !b.BufferType.IsHost() || b.Device.Type() == ggml.DeviceCPU || b.Buffer.Base() == nil {
			continue
		}
		found = true
		base := uintptr(b.Buffer.Base())
		// its whole pages: the first and the last
		if !thpEligible(t, (base+4095)&^4095) || !thpEligible(t, (base+uintptr(b.Buffer.Size()))&^4095-1) {
			t.Errorf("the %s buffer (%d bytes at %#x) lies in memory without huge pages advised", b.BufferType.Name(), b.Buffer.Size(), base)
		}
	}
	if !found {
		t.Fatalf("no host buffer of %s in the load: %v", vk.Name(), lm.buffers)
	}
}

// thpEligible reports whether the mapping of this process holding addr may
// get transparent huge pages (smaps' THPeligible).
func thpEligible(t *testing.T, addr uintptr) bool {
	t.Helper()
	found, eligible := false, false
	eachSmaps(t, func(s, e uintptr, _, key, value string) {
		if s <= addr && addr < e && key == "THPeligible:" {
			found, eligible = true, value == "1"
		}
	})
	if !found {
		t.Fatalf("no mapping holds %#x", addr)
	}
	return eligible
}

// vmFlags are the VmFlags of the mapping that holds addr.
func vmFlags(t *testing.T, addr uintptr) []string {
	t.Helper()
	b, err := os.ReadFile("/proc/self/smaps")
	if err != nil {
		t.Skip("no /proc/self/smaps")
	}
	in := false
	for _, line := range strings.Split(string(b), "\n") {
		f := strings.Fields(line)
		if len(f) == 0 {
			continue
		}
		if se := strings.SplitN(f[0], "-", 2); len(se) == 2 && !strings.HasSuffix(f[0], ":") {
			s, err1 := strconv.ParseUint(se[0], 16, 64)
			e, err2 := strconv.ParseUint(se[1], 16, 64)
			in = err1 == nil && err2 == nil && uintptr(s) <= addr && addr < uintptr(e)
			continue
		}
		if in && f[0] == "VmFlags:" {
			return f[1:]
		}
	}
	return nil
}

// A software device's staging ring is plain memory of this process too:
// its slots get huge pages and are faulted in ahead of the reads into
// them, and closing the ring stops the faulting before it frees them.
func TestSoftwareStagingRingFaultedIn(t *testing.T) {
	testenv.Runtime(t)
	vk := testenv.Vulkan(t)
	if !softwareDevice(vk) {
		t.Skipf("%s (%s) is not a software device", vk.Name(), vk.Description())
	}
	const size = 8 << 20
	l := &load{o: Options{StagingSlots: 2, StagingSize: size, Logger: slog.New(slog.DiscardHandler)}, model: &Model{}}
	ln := &lane{l: l}
	r, err := ln.ring(&LoadedBuffer{BufferType: vk.BufferType(), Device: vk})
	if err != nil || r == nil {
		t.Fatalf("no staging ring for %s: %v", vk.Name(), err)
	}
	defer r.close()
	if r.faults == nil {
		t.Fatal("the ring's slots are not faulted in")
	}
	r.faults.Finish()
	var rs sysmem.Ranges
	for _, b := range r.slots {
		base := uintptr(b.Base())
		if thp, _ := os.ReadFile("/sys/kernel/mm/transparent_hugepage/enabled"); strings.Contains(string(thp), "[madvise]") && !thpEligible(t, base) {
			// what ggload does is advise them (the mapping's hg flag); the
			// kernel then decides
			if flags := vmFlags(t, base); !slices.Contains(flags, "hg") || slices.Contains(flags, "nh") {
				t.Errorf("slot at %#x: no huge pages advised (VmFlags %v)", base, flags)
			}
		}
		rs = append(rs, [2]uintptr{(base + 4095) &^ 4095, (base + size) &^ 4095})
	}
	var want uint64
	for _, x := range rs {
		want += uint64(x[1] - x[0])
	}
	if rss := residentIn(t, rs); rss < want {
		t.Fatalf("%d of the slots' %d bytes are resident after faulting in", rss, want)
	}
	if err := r.close(); err != nil {
		t.Fatal(err)
	}
	if r.faults != nil || r.slots != nil {
		t.Fatal("close left the faulting or the slots")
	}
}

// residentIn is the resident memory of the pages of rs (mincore); a page
// no longer mapped counts as not resident.
func residentIn(t *testing.T, rs sysmem.Ranges) uint64 {
	t.Helper()
	var n uint64
	var vec [1]byte
	for _, r := range rs {
		for a := r[0]; a < r[1]; a += 4096 {
			switch _, _, errno := unix.Syscall(unix.SYS_MINCORE, a, 4096, uintptr(unsafe.Pointer(&vec[0]))); errno {
			case 0:
				n += uint64(vec[0]&1) * 4096
			case unix.ENOMEM:
			default:
				t.Fatalf("mincore: %v", errno)
			}
		}
	}
	return n
}

// fromArenas has glibc serve the next allocations of a few MiB from its
// arenas, as it does in a program that has freed a larger one (its mmap
// threshold rises to that size), not from mappings of their own, which
// free unmaps.
func fromArenas(t *testing.T, rt *ggml.Runtime) {
	t.Helper()
	b, err := rt.CPUBufferType().Alloc(8 << 20)
	if err != nil {
		t.Fatal(err)
	}
	b.Free()
}

// offMainThread runs fn on a thread other than the process's first, to
// which it is locked.
func offMainThread(fn func()) {
	done := make(chan struct{})
	var run func()
	run = func() {
		runtime.LockOSThread()
		defer runtime.UnlockOSThread()
		if unix.Gettid() == unix.Getpid() {
			go run() // while this goroutine holds the first thread
			<-done
			return
		}
		fn()
		close(done)
	}
	go run()
	<-done
}

// Closing a software device's staging ring drops the pages of its slots
// before it frees them: glibc keeps a freed chunk's pages where it merges
// into the top of a thread's arena (malloc_trim releases only the main
// arena's top), so 1 MiB slots, faulted in, stayed resident in the arenas
// of the threads that had loaded, and a program loading onto lavapipe
// without mmap grew by up to 10% over 500 loads.
func TestClosedStagingRingLeavesNoPages(t *testing.T) {
	fromArenas(t, testenv.Runtime(t))
	vk := testenv.Vulkan(t)
	if !softwareDevice(vk) {
		t.Skipf("%s (%s) is not a software device", vk.Name(), vk.Description())
	}
	const size = 1 << 20 // the slots of a load without direct I/O
	l := &load{o: Options{StagingSlots: 4, StagingSize: size, Logger: slog.New(slog.DiscardHandler)}, model: &Model{}}
	ln := &lane{l: l}
	r, err := ln.ring(&LoadedBuffer{BufferType: vk.BufferType(), Device: vk})
	if err != nil || r == nil {
		t.Fatalf("no staging ring for %s: %v", vk.Name(), err)
	}
	r.faults.Finish()
	var rs sysmem.Ranges
	for _, b := range r.slots {
		rs = append(rs, sysmem.WholePages(b.Base(), b.Size())...)
	}
	if len(rs) != 4 {
		r.close()
		t.Fatalf("the ring's memory is %v, not its 4 slots", rs)
	}
	freedLeavesNoPages(t, "the staging slots", rs, r.close)
}

// freedLeavesNoPages checks that the pages of rs, faulted in, are gone
// once free has freed them, but for the first page of each, which the
// allocator writes into a freed chunk.
func freedLeavesNoPages(t *testing.T, what string, rs sysmem.Ranges, free func() error) {
	t.Helper()
	if len(rs) == 0 || residentIn(t, rs) < rs.Bytes()/2 {
		free()
		t.Fatalf("%s %v are not faulted in", what, rs)
	}
	if err := free(); err != nil {
		t.Fatal(err)
	}
	if n := residentIn(t, rs); n > uint64(len(rs))*4096 {
		t.Errorf("%d bytes of %s' %d stay resident once freed", n, what, rs.Bytes())
	}
}

// Model.Close drops the pages of the CPU's weight buffers before it frees
// them, for the same reason, and so does the runtime's Close where it
// frees them first (the model's Close then touches nothing).
func TestClosedModelLeavesNoPages(t *testing.T) {
	for _, by := range []string{"model", "runtime"} {
		t.Run(by, func(t *testing.T) { closedModelLeavesNoPages(t, by) })
	}
}

func closedModelLeavesNoPages(t *testing.T, by string) {
	testenv.Runtime(t) // the shared one sets the environment up
	rt, err := ggml.Open(context.Background(), ggml.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer rt.Close()
	fromArenas(t, rt)
	spec := synth.Spec{Layers: 2, Embd: 256, FF: 512, Heads: 4, Vocab: 4096, Weights: ggml.TypeQ8_0}
	gm := testenv.OpenModel(t, testenv.ModelFile(t, rt, spec))
	p, err := place.New(context.Background(), rt, gm, place.Params{LoadMode: place.LoadNone, DeviceNames: []string{"none"}})
	if err != nil {
		t.Fatal(err)
	}
	// allocated on a thread other than the process's first, as a
	// program's loads mostly are: glibc gives it an arena of its own
	var lm *Model
	offMainThread(func() { lm, err = Load(context.Background(), p, Options{}) })
	if err != nil {
		t.Fatal(err)
	}
	var rs sysmem.Ranges
	for _, b := range lm.buffers {
		rs = append(rs, sysmem.WholePages(b.Buffer.Base(), b.Buffer.Size())...)
	}
	if by == "model" {
		freedLeavesNoPages(t, "the CPU's weight buffers", rs, lm.Close)
		return
	}
	freedLeavesNoPages(t, "the CPU's weight buffers", rs, func() error { rt.Close(); return nil })
	if err := lm.Close(); err != nil { // touching none of the freed memory
		t.Errorf("the model's Close after the runtime's: %v", err)
	}
}

// An mmap load onto a device reads the tensors that leave the mapping from
// the file: while it runs, the only pages of the file mapped into the
// process are those under the zero-copy buffers (and those a fault maps
// around them), though the device's tensors, many times more bytes, pass
// through the same page cache. Copied out of the mapping, they were
// faulted in there too.
func TestMmapReadsWhatLeavesTheMapping(t *testing.T) {
	rt := testenv.Runtime(t)
	testenv.Vulkan(t)
	path := testenv.ModelFile(t, rt, synth.Spec{Layers: 8, Embd: 512, FF: 2048, Heads: 4, Vocab: 2048, Weights: ggml.TypeQ8_0, Embeddings: ggml.TypeQ8_0})
	gm := testenv.OpenModel(t, path)
	p, err := place.New(context.Background(), rt, gm, place.Params{LoadMode: place.LoadMmap, DeviceNames: []string{"Vulkan0"}, NoExtraBufts: true})
	if err != nil {
		t.Fatal(err)
	}
	// a fault maps a few pages around it, or the page cache's whole folio
	// (up to a 2 MiB huge page)
	const huge = 2 << 20
	var spans, allowed, device uint64
	for _, c := range p.Contexts {
		for _, b := range c.Buffers {
			if c.Mapped {
				spans += uint64(b.Last - b.First)
				allowed += uint64((b.Last+huge-1)&^(huge-1) - b.First&^(huge-1))
			}
		}
		if !c.Mapped && !c.BufferType.IsHost() {
			device += c.Size
		}
	}
	if allowed == 0 || device < 8*allowed {
		t.Fatalf("the plan maps %d bytes and puts %d on the device: want a few mapped, many more on the device", allowed, device)
	}
	// the resident pages of the file's mappings
	mappedIn := func() uint64 {
		var rss uint64
		eachSmaps(t, func(_, _ uintptr, p, key, value string) {
			if p == path && key == "Rss:" {
				kb, _ := strconv.ParseUint(value, 10, 64)
				rss += kb << 10
			}
		})
		return rss
	}
	var mu sync.Mutex
	peak, calls := uint64(0), 0
	old := beforeTensor
	beforeTensor = func(int, string) {
		mu.Lock()
		defer mu.Unlock()
		peak, calls = max(peak, mappedIn()), calls+1
	}
	lm, err := Load(context.Background(), p, Options{})
	beforeTensor = old
	if err != nil {
		t.Fatal(err)
	}
	defer lm.Close()
	if lm.Stats.Moved[PathStaged] != device || calls == 0 {
		t.Fatalf("%d of the device's %d bytes staged (%d tensors seen)", lm.Stats.Moved[PathStaged], device, calls)
	}
	if peak > allowed {
		t.Fatalf("%d bytes of the file were mapped in during the load, where the zero-copy buffers span %d", peak, allowed)
	}
	// MemoryOf counts what the load maps in: the zero-copy buffers' ranges
	// (the whole files where mmap populates all of them itself)
	want := spans
	if !sysmem.PopulateLater() {
		want = uint64(gm.Files[0].Size)
	}
	if m := MemoryOf(p, Options{}); m.MappedIn != want || m.Mapped != uint64(gm.Files[0].Size) {
		t.Errorf("MemoryOf: %d bytes mapped in of %d mapped, want %d of %d", m.MappedIn, m.Mapped, want, gm.Files[0].Size)
	}
}
