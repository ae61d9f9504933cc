//go:build linux

package loader_test

import (
	"context"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"testing"

	"github.com/ggload/ggload/ggml"
	"github.com/ggload/ggload/lab/testenv"
	"github.com/ggload/ggload/loader"
	"github.com/ggload/ggload/place"
)

// vmLocked is the process's VmLck, in bytes.
func vmLocked(t *testing.T) uint64 {
	t.Helper()
	b, err := os.ReadFile("/proc/self/status")
	if err != nil {
		t.Fatal(err)
	}
	for _, l := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(l, "VmLck:"); ok {
			kb, err := strconv.ParseUint(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(v), "kB")), 10, 64)
			if err != nil {
				t.Fatal(err)
			}
			return kb << 10
		}
	}
	t.Fatal("no VmLck in /proc/self/status")
	return 0
}

// lockSpan is the bytes of the pages that [base, base+size) touches.
func lockSpan(base uintptr, size uint64) uint64 {
	page := uint64(os.Getpagesize())
	start := uint64(base) &^ (page - 1)
	end := (uint64(base) + size + page - 1) &^ (page - 1)
	return end - start
}

// -lm mlock locks exactly the weight buffers and mmap+mlock exactly the
// pages of the mapping that hold weights, page-aligned at both ends
// whatever the buffer's alignment, as the process's VmLck shows at every
// step of five loads and closes in one process; Close unlocks at once. A
// limit below the model's size, or of zero, is named as the cause only
// then: the warning of an RLIMIT_MEMLOCK too small says so, a zero limit
// without CAP_IPC_LOCK is EPERM, and nothing stays locked after Close.
func TestMlockLocksTheWeights(t *testing.T) {
	if testenv.IsChild() {
		mlockChild(t, os.Getenv("GGLOAD_TEST_MLOCK"))
		return
	}
	setpriv, err1 := exec.LookPath("setpriv")
	prlimit, err2 := exec.LookPath("prlimit")
	if err1 != nil || err2 != nil || os.Geteuid() != 0 {
		testenv.Missing(t, "root", "needs root (CAP_IPC_LOCK), setpriv and prlimit (util-linux) to lock memory and to drop the capability")
	}
	drop := []string{setpriv, "--bounding-set=-ipc_lock", "--inh-caps=-ipc_lock"}
	for _, c := range []struct {
		name    string
		wrapper []string
	}{
		{"capable", nil},
		// half the model: the rlimit is the cause
		{"limited", append([]string{prlimit, "--memlock=1048576:1048576"}, drop...)},
		{"zero", append([]string{prlimit, "--memlock=0:0"}, drop...)},
	} {
		out := testenv.InChild(t, c.wrapper, "GGLOAD_TEST_MLOCK="+c.name)
		for _, l := range strings.Split(out, "\n") {
			if strings.Contains(l, "mlock:") {
				t.Logf("%s: %s", c.name, strings.TrimSpace(l))
			}
		}
	}
}

func mlockChild(t *testing.T, kase string) {
	rt := testenv.Runtime(t)
	path := testenv.ModelFile(t, rt, smallSpec)
	gm := testenv.OpenModel(t, path)
	if kase == "limited" && gm.NBytes <= 1<<20 {
		t.Fatalf("the model (%d bytes) must be larger than the 1 MiB limit", gm.NBytes)
	}
	base := vmLocked(t)
	for round := range 5 {
		for _, mode := range []place.LoadMode{place.LoadMlock, place.LoadMmapMlock} {
			p := planFor(t, rt, gm, func(p *place.Params) { p.LoadMode = mode; p.DeviceNames = []string{"none"} })
			lm, err := loader.Load(context.Background(), p, loader.Options{})
			if err != nil {
				t.Fatal(err)
			}
			verify(t, gm, lm)
			var want uint64
			if mode == place.LoadMlock {
				for _, b := range lm.Buffers() {
					if b.Buffer.IsHost() {
						want += lockSpan(uintptr(b.Buffer.Base()), b.Buffer.Size())
					}
				}
			} else {
				for pl := range lm.Placements() {
					if w := pl.Plan.Weight; pl.Path == loader.PathZeroCopy {
						want = max(want, lockSpan(0, uint64(w.Offset+w.Size)))
					}
				}
			}
			got := vmLocked(t) - base
			warn := strings.Join(lm.Warnings(), "; ")
			what := "round " + strconv.Itoa(round) + " " + mode.String()
			switch kase {
			case "capable":
				if warn != "" || got != want {
					t.Fatalf("%s: %d bytes locked, want %d (the weights' pages); warnings: %s", what, got, want, warn)
				}
			case "limited":
				if !strings.Contains(warn, "RLIMIT_MEMLOCK is 1048576 bytes") || !strings.Contains(warn, "too little") || !strings.Contains(warn, "ulimit -l") {
					t.Fatalf("%s: want the limit named as the cause: %q", what, warn)
				}
				if got > 1<<20 {
					t.Fatalf("%s: %d bytes locked past the limit", what, got)
				}
			case "zero":
				if !strings.Contains(warn, "operation not permitted") || !strings.Contains(warn, "may not lock memory") || got != 0 {
					t.Fatalf("%s: want EPERM named, nothing locked (%d bytes): %q", what, got, warn)
				}
			}
			if round == 0 {
				t.Logf("mlock: %s: %d bytes locked (%d wanted); %s", mode, got, want, warn)
			}
			if err := lm.Close(); err != nil {
				t.Fatal(err)
			}
			if now := vmLocked(t); now != base {
				t.Fatalf("%s: %d bytes still locked after Close", what, now-base)
			}
		}
	}
	if kase != "capable" {
		return
	}
	// a runtime closed before the model frees the weight buffers unlocked
	// (memory locked and freed would stay locked in the allocator's
	// heap), and the model's Close then unlocks nothing of what was freed
	own, err := ggml.Open(context.Background(), ggml.Options{})
	if err != nil {
		t.Fatal(err)
	}
	p, err := place.New(context.Background(), own, gm, place.Params{LoadMode: place.LoadMlock, DeviceNames: []string{"none"}})
	if err != nil {
		t.Fatal(err)
	}
	lm, err := loader.Load(context.Background(), p, loader.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if vmLocked(t) == base {
		t.Fatal("mlock locked nothing")
	}
	own.Close()
	if now := vmLocked(t); now != base {
		t.Errorf("%d bytes still locked after the runtime's Close", now-base)
	}
	if err := lm.Close(); err != nil {
		t.Fatal(err)
	}
}
