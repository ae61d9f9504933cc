//go:build linux

package loader_test

import (
	"context"
	"fmt"
	"os"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/ggload/ggload/ggml"
	"github.com/ggload/ggload/lab/synth"
	"github.com/ggload/ggload/lab/testenv"
	"github.com/ggload/ggload/loader"
	"github.com/ggload/ggload/place"
)

// residentSize is the process's VmRSS, in bytes.
func residentSize(t *testing.T) uint64 {
	t.Helper()
	b, err := os.ReadFile("/proc/self/status")
	if err != nil {
		t.Fatal(err)
	}
	for _, l := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(l, "VmRSS:"); ok {
			kb, err := strconv.ParseUint(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(v), "kB")), 10, 64)
			if err != nil {
				t.Fatal(err)
			}
			return kb << 10
		}
	}
	t.Fatal("no VmRSS in /proc/self/status")
	return 0
}

// A long-running program that loads and closes models keeps its resident
// size: 500 load/close cycles in one process (GGLOAD_RSS_CYCLES sets
// another count) of a 46 MiB model without mmap onto the CPU and Vulkan0
// end within 10% of the resident size after the first, and so do a fifth
// as many in the other modes and rounds of four concurrent loads, with no
// allocator setting in the environment (Close hands what native code
// freed back to the system). Without that, glibc keeps the freed staging
// memory in its arenas once a freed weight buffer has raised its mmap
// threshold, and the resident size grows with every load; and where a
// freed buffer merged into the top of another thread's arena, which
// malloc_trim leaves, it grew by up to 10% over 500 loads onto lavapipe.
func TestResidentSizeAfterManyLoads(t *testing.T) {
	if !testenv.IsChild() {
		for _, v := range []string{"MALLOC_ARENA_MAX", "MALLOC_MMAP_THRESHOLD_", "MALLOC_TRIM_THRESHOLD_", "GLIBC_TUNABLES"} {
			if _, set := os.LookupEnv(v); set {
				t.Skipf("%s is set: the test measures glibc's defaults; unset it", v)
			}
		}
		out := testenv.InChild(t, nil)
		for _, l := range strings.Split(out, "\n") {
			if strings.Contains(l, "resident:") {
				t.Log(strings.TrimSpace(l[strings.Index(l, "resident:"):]))
			}
		}
		return
	}
	cycles := 500
	if s := os.Getenv("GGLOAD_RSS_CYCLES"); s != "" {
		n, err := strconv.Atoi(s)
		if err != nil || n <= 0 {
			t.Fatalf("GGLOAD_RSS_CYCLES=%q", s)
		}
		cycles = n
	}
	rt := testenv.Runtime(t)
	path := testenv.ModelFile(t, rt, synth.Spec{Layers: 8, Embd: 1024, FF: 2816, Heads: 8, Vocab: 8192, Weights: ggml.TypeQ4_0, Embeddings: ggml.TypeQ8_0})
	gm := testenv.OpenModel(t, path)
	devices := []string{"none"}
	if _, err := rt.DeviceByName("Vulkan0"); err == nil {
		devices = append(devices, "Vulkan0")
	} else if testenv.Required("vulkan") {
		t.Fatal("Vulkan0 is required here")
	}
	within := func(what string, first, now uint64) {
		t.Helper()
		var ms runtime.MemStats
		runtime.ReadMemStats(&ms)
		t.Logf("resident: %s: %.1f MiB after the first, %.1f MiB at the end (%+.1f%%; Go's heap holds %.1f MiB)", what, float64(first)/(1<<20), float64(now)/(1<<20), 100*(float64(now)/float64(first)-1), float64(ms.HeapSys-ms.HeapReleased)/(1<<20))
		limit := 1.1 * float64(first)
		if raceDetector {
			// the race detector's runtime keeps shadow memory for what
			// Go's heap has ever held and for every goroutine: it grows
			// with the loads' goroutines whatever the loader frees
			limit += 32 << 20
		}
		if float64(now) > limit {
			t.Errorf("%s: the resident size grew from %d to %d bytes", what, first, now)
		}
	}
	for _, dev := range devices {
		for _, mode := range []place.LoadMode{place.LoadNone, place.LoadDirectIO, place.LoadMmap} {
			p := planFor(t, rt, gm, func(p *place.Params) { p.LoadMode = mode; p.DeviceNames = []string{dev} })
			var first uint64
			n := cycles
			if mode != place.LoadNone {
				n = max(cycles/5, 2)
			}
			for i := range n {
				lm, err := loader.Load(context.Background(), p, loader.Options{})
				if err != nil {
					t.Fatal(err)
				}
				if err := lm.Close(); err != nil {
					t.Fatal(err)
				}
				if i == 0 {
					first = residentSize(t)
				}
			}
			within(fmt.Sprintf("%s %s, %d cycles", dev, mode, n), first, residentSize(t))
		}
		p := planFor(t, rt, gm, func(p *place.Params) { p.LoadMode = place.LoadDirectIO; p.DeviceNames = []string{dev} })
		var first uint64
		rounds := max(cycles/50, 2)
		for r := range rounds {
			var wg sync.WaitGroup
			errs := make([]error, 4)
			for k := range errs {
				wg.Go(func() {
					lm, err := loader.Load(context.Background(), p, loader.Options{})
					if err == nil {
						err = lm.Close()
					}
					errs[k] = err
				})
			}
			wg.Wait()
			for _, err := range errs {
				if err != nil {
					t.Fatal(err)
				}
			}
			if r == 0 {
				first = residentSize(t)
			}
		}
		within(fmt.Sprintf("%s dio, %d rounds of 4 concurrent loads", dev, rounds), first, residentSize(t))
	}
}
