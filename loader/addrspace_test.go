//go:build linux

package loader_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"
	"testing"

	"github.com/ggload/ggload/ggml"
	"github.com/ggload/ggload/lab/synth"
	"github.com/ggload/ggload/lab/testenv"
	"github.com/ggload/ggload/loader"
	"github.com/ggload/ggload/place"
	"golang.org/x/sys/unix"
)

// statusBytes is a "kB" line of /proc/self/status, in bytes.
func statusBytes(t *testing.T, key string) uint64 {
	t.Helper()
	b, err := os.ReadFile("/proc/self/status")
	if err != nil {
		t.Fatal(err)
	}
	for _, l := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(l, key+":"); ok {
			kb, err := strconv.ParseUint(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(v), "kB")), 10, 64)
			if err != nil {
				t.Fatal(err)
			}
			return kb << 10
		}
	}
	t.Fatalf("no %s in /proc/self/status", key)
	return 0
}

// Under an address-space limit (ulimit -v) sized from loader.MemoryOf, a
// load in every mode onto the CPU and Vulkan0 either succeeds, with the
// limit at the process's address space plus the bound (and the headroom
// the loader keeps for threads and the Go runtime), or, below that, is
// refused with an error wrapping ggml.ErrOutOfMemory before anything is
// allocated: never Go's fatal out-of-memory or a failed thread creation.
// The loads run in a child process, which sets its own limit.
func TestAddressSpaceLimit(t *testing.T) {
	if !testenv.IsChild() {
		for _, h := range []string{"default", "tight"} {
			out := testenv.InChild(t, nil, "GGLOAD_TEST_HEADROOM="+h)
			for _, l := range strings.Split(out, "\n") {
				if strings.Contains(l, "limit:") {
					t.Logf("%s headroom: %s", h, strings.TrimSpace(l[strings.Index(l, "limit:"):]))
				}
			}
		}
		return
	}
	rt := testenv.Runtime(t)
	path := testenv.ModelFile(t, rt, synth.Spec{Layers: 4, Embd: 1024, FF: 2816, Heads: 8, Vocab: 8192, Weights: ggml.TypeQ4_0, Embeddings: ggml.TypeQ8_0})
	gm := testenv.OpenModel(t, path)
	targets := [][]string{{"none"}}
	if _, err := rt.DeviceByName("Vulkan0"); err == nil {
		targets = append(targets, []string{"Vulkan0"})
	}
	// the loader's headroom, and a tight one: the bound itself holds
	headroom := uint64(256 << 20)
	if os.Getenv("GGLOAD_TEST_HEADROOM") == "tight" {
		headroom = 128 << 20
		defer loader.SetAddressHeadroom(headroom)()
	}
	setLimit := func(n uint64) {
		t.Helper()
		if err := unix.Setrlimit(unix.RLIMIT_AS, &unix.Rlimit{Cur: n, Max: unix.RLIM_INFINITY}); err != nil {
			t.Fatal(err)
		}
	}
	defer setLimit(unix.RLIM_INFINITY)
	for _, devs := range targets {
		for _, mode := range []place.LoadMode{place.LoadNone, place.LoadDirectIO, place.LoadMmap} {
			for _, o := range []loader.Options{{}, {CheckTensors: true}} {
				p := planFor(t, rt, gm, func(p *place.Params) { p.LoadMode = mode; p.DeviceNames = devs })
				m := loader.MemoryOf(p, o)
				what := fmt.Sprintf("%s %s check=%v", devs[0], mode, o.CheckTensors)
				// warm up: the backends' first use maps what they keep
				if lm, err := loader.Load(context.Background(), p, o); err != nil {
					t.Fatal(err)
				} else {
					lm.Close()
				}
				// (the process's address space drifts a little meanwhile:
				// the Go runtime's own threads and heap; under the race
				// detector, its runtime's memory for each thread and
				// goroutine besides, which no headroom of the loader's
				// counts: after a dio load here, the address space stayed
				// up to 72 MiB above what it was before plus the bound)
				drift := uint64(16 << 20)
				if raceDetector {
					drift = 128 << 20
				}
				used := statusBytes(t, "VmSize")
				bound := used + m.Total() + headroom
				fit := bound + drift
				for _, limit := range []uint64{used + m.Total()/2, bound - drift, fit} {
					setLimit(limit)
					lm, err := loader.Load(context.Background(), p, o)
					setLimit(unix.RLIM_INFINITY)
					switch {
					case limit >= fit && err != nil:
						t.Fatalf("%s: the load failed within its bound (%+v) under a limit of %d bytes: %v", what, m, limit, err)
					case limit < fit && (err == nil || !errors.Is(err, ggml.ErrOutOfMemory) || !strings.Contains(err.Error(), "ulimit -v")):
						if lm != nil {
							lm.Close()
						}
						t.Fatalf("%s: under a limit of %d bytes, %d short of the bound: %v", what, limit, bound-limit, err)
					case limit < fit:
						wantPlace(t, what, err, loader.Error{Op: "alloc", Path: path, Off: -1}, ggml.ErrOutOfMemory)
					}
					if lm != nil {
						verify(t, gm, lm)
						lm.Close()
					}
				}
				t.Logf("limit: %s: bound %.1f MiB (weights %.1f, mapped %.1f, staging %.1f, bounce %.1f, direct %.1f, checks %.1f)", what,
					float64(m.Total())/(1<<20), float64(m.Weights)/(1<<20), float64(m.Mapped)/(1<<20), float64(m.Staging)/(1<<20), float64(m.Bounce)/(1<<20), float64(m.Direct)/(1<<20), float64(m.Validate)/(1<<20))
			}
		}
	}
}
