package loader_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"runtime"
	"sort"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ggload/ggload/ggml"
	"github.com/ggload/ggload/gguf"
	"github.com/ggload/ggload/lab/synth"
	"github.com/ggload/ggload/lab/testenv"
	"github.com/ggload/ggload/loader"
	"github.com/ggload/ggload/place"
)

// stressSpec is small (about 0.6 MiB) so that hundreds of loads fit in
// seconds, with q4_0 matrices, which the CPU repacks (CPU_REPACK) where it
// has the kernels (AVX2, ARM dot product).
var stressSpec = synth.Spec{Layers: 2, Embd: 256, FF: 512, Heads: 4, Vocab: 256, Weights: ggml.TypeQ4_0, Embeddings: ggml.TypeQ8_0}

// stressRuns is how many loads each case makes (GGLOAD_STRESS_RUNS
// overrides it).
func stressRuns(t *testing.T) int {
	if s := os.Getenv("GGLOAD_STRESS_RUNS"); s != "" {
		n, err := strconv.Atoi(s)
		if err != nil || n <= 0 {
			t.Fatalf("GGLOAD_STRESS_RUNS=%q", s)
		}
		return n
	}
	return 30
}

// stressTarget is where a stress load puts the weights.
type stressTarget struct {
	name    string
	devices []string
	extra   bool // the CPU's extra buffer types (CPU_REPACK)
}

func stressTargets(t *testing.T, rt *ggml.Runtime) []stressTarget {
	t.Helper()
	testenv.Vulkan(t)
	ep := testenv.RPC(t, 1)[0]
	var rpc string
	for _, d := range rt.Devices() {
		if d.IsRPC() && d.Endpoint() == ep {
			rpc = d.Name()
		}
	}
	if rpc == "" {
		t.Fatalf("no device for the RPC server at %s", ep)
	}
	return []stressTarget{
		{"CPU_REPACK", []string{"none"}, true},
		{"Vulkan0", []string{"Vulkan0"}, false},
		{rpc, []string{rpc}, false},
	}
}

var stressModes = []place.LoadMode{place.LoadNone, place.LoadMmap, place.LoadMlock, place.LoadMmapMlock, place.LoadDirectIO}

// stressFile writes a fresh copy of pristine at path, dated an hour back:
// a write during the load then always changes its modification time, on
// filesystems with coarse timestamps too.
func stressFile(t *testing.T, path string, pristine []byte) {
	t.Helper()
	if err := os.WriteFile(path, pristine, 0o644); err != nil {
		t.Fatal(err)
	}
	old := time.Now().Add(-time.Hour)
	if err := os.Chtimes(path, old, old); err != nil {
		t.Fatal(err)
	}
}

// stressLoad opens the model at path and plans it for target in mode.
func stressPlan(t *testing.T, rt *ggml.Runtime, path string, target stressTarget, mode place.LoadMode) (*gguf.Model, *place.Plan, int) {
	t.Helper()
	gm, err := gguf.OpenModel(path)
	if err != nil {
		t.Fatal(err)
	}
	params := place.Params{}
	params.LoadMode = mode
	params.DeviceNames = target.devices
	params.NoExtraBufts = !target.extra
	p, err := place.New(context.Background(), rt, gm, params)
	if err != nil {
		gm.Close()
		t.Fatal(err)
	}
	n := 0
	for _, tp := range p.Tensors {
		if tp.Context >= 0 && !tp.Shared {
			n++
		}
	}
	return gm, p, n
}

// settleGoroutines waits for the goroutines to come back to n (an RPC
// guard's relay ends when the native client closes its connection).
func settleGoroutines(n int) int {
	deadline := time.Now().Add(5 * time.Second)
	for time.Now().Before(deadline) && runtime.NumGoroutine() > n {
		time.Sleep(5 * time.Millisecond)
	}
	return runtime.NumGoroutine()
}

// A model file truncated, replaced by rename, or rewritten at a random
// point of a load, for every load mode onto the CPU with repacking, Vulkan0
// and an RPC server. The loads run in a child process: a fault that
// reached native code would kill it and fail the test here.
//
//   - truncated (at a random byte of the file, before a random tensor):
//     every load ends with an error naming the file and a tensor;
//   - replaced by rename: the load goes on with the file it opened (its
//     descriptor and mapping) and succeeds; every readable tensor equals
//     the original, and CheckFile reports the replacement;
//   - rewritten in place (0xff over a random range, which makes a NaN
//     scale or value): every load ends with an error naming the file (its
//     modification time changed); with --check-tensors the bad rows may be
//     what is reported.
//
// After each load the live buffers and the goroutines are back where they
// were. A last pass rewrites the file after a successful load and checks
// what Verify and CheckFile see.
func TestFileChangesMidLoad(t *testing.T) {
	if !testenv.IsChild() {
		out := testenv.InChild(t, nil)
		for _, l := range strings.Split(out, "\n") {
			if strings.Contains(l, "stress:") {
				t.Log(strings.TrimSpace(l))
			}
		}
		return
	}
	if runtime.GOOS == "windows" {
		t.Skip("Windows refuses to truncate, rewrite or replace a file that is mapped: nothing to strike with")
	}
	rt := testenv.Runtime(t)
	targets := stressTargets(t, rt)
	runs := stressRuns(t)
	dir := t.TempDir()
	pristine, err := os.ReadFile(testenv.ModelFile(t, rt, stressSpec))
	if err != nil {
		t.Fatal(err)
	}
	other := stressSpec
	other.Seed = 99 // same layout, other weights
	replacement, err := os.ReadFile(testenv.ModelFile(t, rt, other))
	if err != nil {
		t.Fatal(err)
	}
	if len(replacement) != len(pristine) || bytes.Equal(replacement, pristine) {
		t.Fatal("the replacement model is not a same-sized other file")
	}
	rng := rand.New(rand.NewPCG(uint64(time.Now().UnixNano()), 14))
	path := filepath.Join(dir, "model.gguf")
	repacked := 0
	start := time.Now()
	for _, scenario := range []string{"truncate", "rename", "rewrite"} {
		for _, target := range targets {
			for _, mode := range stressModes {
				var loaded, failed int
				example := ""
				for run := range runs {
					stressFile(t, path, pristine)
					gm, p, n := stressPlan(t, rt, path, target, mode)
					for _, tp := range p.Tensors {
						if tp.Context >= 0 && tp.BufferType.WriteOnly() {
							repacked++
						}
					}
					k := rng.IntN(n)
					cut := rng.Int64N(int64(len(pristine)))
					opts := loader.Options{CheckTensors: rng.IntN(2) == 0, Readers: 1 + rng.IntN(3)}
					var struck string
					restore := loader.SetBeforeTensor(func(seq int, name string) {
						if seq != k {
							return
						}
						struck = name
						switch scenario {
						case "truncate":
							if err := os.Truncate(path, cut); err != nil {
								t.Error(err)
							}
						case "rename":
							tmp := path + ".new"
							if err := os.WriteFile(tmp, replacement, 0o644); err == nil {
								err = os.Rename(tmp, path)
							} else {
								t.Error(err)
							}
						case "rewrite":
							if err := rewrite(path, gm, rng); err != nil {
								t.Error(err)
							}
						}
					})
					buffers, goroutines := testenv.LiveBuffers(), runtime.NumGoroutine()
					lm, err := loader.Load(context.Background(), p, opts)
					restore()
					what := fmt.Sprintf("%s/%s/%s run %d (before tensor %d of %d, %q; cut at %d; %+v)", scenario, target.name, mode, run, k, n, struck, cut, opts)
					if struck == "" {
						t.Fatalf("%s: the hook never ran", what)
					}
					switch scenario {
					case "truncate", "rewrite":
						if err == nil {
							lm.Close()
							t.Fatalf("%s: the load succeeded", what)
						}
						if !strings.Contains(err.Error(), path) {
							t.Fatalf("%s: the error does not name the file: %v", what, err)
						}
						if e, ok := err.(*loader.Error); !ok || e.Path != path {
							t.Fatalf("%s: the place %+v: %v", what, e, err)
						}
						if scenario == "truncate" && !strings.Contains(err.Error(), "tensor '") {
							t.Fatalf("%s: the error does not name a tensor: %v", what, err)
						}
						if scenario == "rewrite" && !errors.Is(err, loader.ErrFileChanged) && !errors.Is(err, loader.ErrInvalidData) {
							t.Fatalf("%s: want the change or the bad rows reported: %v", what, err)
						}
						failed++
						if example == "" {
							example = err.Error()
						}
					case "rename":
						if err != nil {
							t.Fatalf("%s: %v", what, err)
						}
						checkAgainst(t, what, lm, pristine)
						if err := lm.CheckFile(); !errors.Is(err, loader.ErrFileChanged) || !strings.Contains(err.Error(), "replaced") {
							t.Fatalf("%s: CheckFile after the rename: %v", what, err)
						}
						lm.Close()
						loaded++
					}
					gm.Close()
					if after := testenv.LiveBuffers(); after != buffers {
						t.Fatalf("%s: %d buffers live after the load, %d before", what, after, buffers)
					}
					if after := settleGoroutines(goroutines); after > goroutines {
						t.Fatalf("%s: %d goroutines after the load, %d before", what, after, goroutines)
					}
				}
				t.Logf("stress: %-8s %-10s %-10s %d loads: %d loaded, %d failed cleanly %s", scenario, target.name, mode, runs, loaded, failed, example)
			}
		}
	}
	if repacked == 0 {
		t.Logf("stress: no tensor was repacked: this CPU has no repacking kernels for q4_0")
	}
	t.Logf("stress: %d loads in %v", 3*len(targets)*len(stressModes)*runs, time.Since(start).Round(time.Millisecond))
	checkRewriteAfterLoad(t, rt, targets, path, pristine, rng)
}

// rewrite overwrites a random range of a random tensor of the file with
// 0xff bytes: NaN as f32 and f16, and a NaN scale in every quantized block
// it covers (it covers at least one).
func rewrite(path string, gm *gguf.Model, rng *rand.Rand) error {
	w := gm.Weights[rng.IntN(len(gm.Weights))]
	n := min(w.Size, 64+rng.Int64N(4096))
	off := w.Offset + rng.Int64N(w.Size-n+1)
	f, err := os.OpenFile(path, os.O_WRONLY, 0)
	if err != nil {
		return err
	}
	defer f.Close()
	_, err = f.WriteAt(bytes.Repeat([]byte{0xff}, int(n)), off)
	return err
}

// checkAgainst reads every readable tensor back and compares it with the
// bytes of the original file.
func checkAgainst(t *testing.T, what string, lm *loader.Model, want []byte) {
	t.Helper()
	for pl := range lm.Placements() {
		if pl.Tensor == nil || pl.Plan.BufferType.WriteOnly() {
			continue
		}
		got, err := pl.Tensor.Bytes()
		if err != nil {
			t.Fatalf("%s: %s: %v", what, pl.Plan.Name, err)
		}
		w := pl.Plan.Weight
		if !bytes.Equal(got, want[w.Offset:w.Offset+w.Size]) {
			t.Fatalf("%s: tensor %s differs from the file that was opened", what, pl.Plan.Name)
		}
	}
}

// checkRewriteAfterLoad rewrites the file after a successful load and
// checks what can see it: CheckFile always (the modification time);
// Verify for tensors copied into buffers that can be read back; for
// zero-copy tensors the mapping shows the new bytes, so Verify finds them
// equal to the file (the model now computes with the new bytes); tensors
// in write-only buffers (CPU_REPACK) cannot be read back at all.
func checkRewriteAfterLoad(t *testing.T, rt *ggml.Runtime, targets []stressTarget, path string, pristine []byte, rng *rand.Rand) {
	for _, target := range targets {
		for _, mode := range stressModes {
			stressFile(t, path, pristine)
			gm, p, _ := stressPlan(t, rt, path, target, mode)
			lm, err := loader.Load(context.Background(), p, loader.Options{})
			if err != nil {
				t.Fatalf("%s/%s: %v", target.name, mode, err)
			}
			// rewrite one tensor of each kind of path
			byPath := map[loader.Path]loader.Placement{}
			for pl := range lm.Placements() {
				if pl.Tensor != nil && pl.Path != loader.PathShared {
					key := pl.Path
					if pl.Plan.BufferType.WriteOnly() {
						key = "write-only"
					}
					byPath[key] = pl
				}
			}
			var keys []string
			for k := range byPath {
				keys = append(keys, string(k))
			}
			sort.Strings(keys)
			for _, k := range keys {
				pl := byPath[loader.Path(k)]
				w := pl.Plan.Weight
				f, err := os.OpenFile(path, os.O_WRONLY, 0)
				if err != nil {
					t.Fatal(err)
				}
				_, err = f.WriteAt(bytes.Repeat([]byte{0xff}, int(min(w.Size, 256))), w.Offset)
				f.Close()
				if err != nil {
					t.Fatal(err)
				}
				if err := lm.CheckFile(); !errors.Is(err, loader.ErrFileChanged) || !strings.Contains(err.Error(), "written") {
					t.Fatalf("%s/%s: CheckFile after rewriting %s: %v", target.name, mode, pl.Plan.Name, err)
				}
				_, verr := lm.Verify()
				switch {
				case k == "write-only" || k == string(loader.PathZeroCopy):
					if verr != nil && strings.Contains(verr.Error(), pl.Plan.Name) {
						t.Fatalf("%s/%s: Verify reported %s (%s): %v", target.name, mode, pl.Plan.Name, k, verr)
					}
				default:
					if verr == nil || !strings.Contains(verr.Error(), pl.Plan.Name) {
						t.Fatalf("%s/%s: Verify did not see %s (%s) rewritten: %v", target.name, mode, pl.Plan.Name, k, verr)
					}
				}
				// put the bytes back for the next kind
				f, _ = os.OpenFile(path, os.O_WRONLY, 0)
				f.WriteAt(pristine[w.Offset:w.Offset+min(w.Size, 256)], w.Offset)
				f.Close()
				t.Logf("stress: rewritten after a %s/%s load: %s (%s): CheckFile saw it; Verify %s", target.name, mode, pl.Plan.Name, k, map[bool]string{true: "saw it", false: "cannot"}[verr != nil])
			}
			lm.Close()
			gm.Close()
		}
	}
}

// The repro of a file truncated under an mmap load onto Vulkan0 (ggload
// load -ngl 99 --load-mode mmap, then, from another process while it
// loads, truncate -s to 40%): native code used to copy the tensors out of
// the mapping itself and died of SIGBUS. Here the truncation comes from
// another goroutine at a random moment inside the load's duration (measured
// by a clean load first), as the shell's would; the loads run in a child
// process, so that a crash fails the test. Every load the truncation
// struck must end with an error naming the file and a tensor; three such
// loads are needed (a truncation that lands after the load finished does
// not count).
func TestTruncatedDuringMmapLoadToVulkan(t *testing.T) {
	if !testenv.IsChild() {
		out := testenv.InChild(t, nil)
		for _, l := range strings.Split(out, "\n") {
			if strings.Contains(l, "load failed:") || strings.Contains(l, "struck") {
				t.Log(strings.TrimSpace(l))
			}
		}
		return
	}
	if runtime.GOOS == "windows" {
		t.Skip("Windows refuses to truncate a file that is mapped: nothing to strike with")
	}
	rt := testenv.Runtime(t)
	vk := testenv.Vulkan(t)
	spec := synth.BenchSpec(32<<20, ggml.TypeQ8_0)
	pristine, err := os.ReadFile(testenv.ModelFile(t, rt, spec))
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "sb.gguf")
	plan := func() (*gguf.Model, *place.Plan) {
		if err := os.WriteFile(path, pristine, 0o644); err != nil {
			t.Fatal(err)
		}
		gm, err := gguf.OpenModel(path)
		if err != nil {
			t.Fatal(err)
		}
		params := place.Params{}
		params.LoadMode, params.NGPULayers = place.LoadMmap, place.NLayers(99)
		params.DeviceNames = []string{vk.Name()}
		p, err := place.New(context.Background(), rt, gm, params)
		if err != nil {
			t.Fatal(err)
		}
		on := 0
		for _, tp := range p.Tensors {
			if tp.Device == vk {
				on++
			}
		}
		if on == 0 {
			t.Fatal("no tensor placed on Vulkan0")
		}
		return gm, p
	}
	// the first load pays for the device's warm-up (pipelines, pools):
	// the shortest of three clean loads is the duration to aim inside
	var clean time.Duration
	for i := 0; i < 3; i++ {
		gm, p := plan()
		start := time.Now()
		lm, err := loader.Load(context.Background(), p, loader.Options{})
		if err != nil {
			t.Fatal(err)
		}
		if d := time.Since(start); i == 0 || d < clean {
			clean = d
		}
		lm.Close()
		gm.Close()
	}
	struck := 0
	for attempt := 0; attempt < 20 && struck < 3; attempt++ {
		gm, p := plan()
		delay := time.Duration(float64(clean) * (0.1 + 0.6*rand.Float64()))
		var done atomic.Int64 // when the truncation had happened
		buffers := testenv.LiveBuffers()
		start := time.Now()
		timer := time.AfterFunc(delay, func() {
			if err := os.Truncate(path, int64(len(pristine))*4/10); err != nil {
				t.Error(err)
			}
			done.Store(time.Now().UnixNano())
		})
		lm, err := loader.Load(context.Background(), p, loader.Options{})
		end := time.Now().UnixNano()
		for !timer.Stop() && done.Load() == 0 {
			time.Sleep(time.Millisecond) // running: let it finish
		}
		if err == nil {
			// a success is right only if the file was whole until the
			// load's last check, just before it returned
			if d := done.Load(); d != 0 && d < end-int64(5*time.Millisecond) {
				lm.Close()
				t.Fatalf("attempt %d: the load succeeded from a file truncated under it after %v", attempt, delay)
			}
			lm.Close()
			gm.Close()
			took := time.Duration(end - start.UnixNano())
			t.Logf("attempt %d: the truncation at %v came after the load (%v)", attempt, delay, took)
			clean = min(clean, took) // aim inside the loads as they run now
			continue
		}
		struck++
		if !strings.Contains(err.Error(), path) || !strings.Contains(err.Error(), "tensor '") {
			t.Fatalf("the error does not name the file and a tensor: %v", err)
		}
		if e, ok := err.(*loader.Error); !ok || e.Path != path || e.Tensor == "" || !strings.Contains(err.Error(), "'"+e.Tensor+"'") {
			t.Fatalf("the place %+v: %v", e, err)
		}
		if n := testenv.LiveBuffers(); n != buffers {
			t.Fatalf("%d buffers live after the failed load, %d before", n, buffers)
		}
		gm.Close()
		t.Logf("attempt %d, truncated after %v of a %v load: load failed: %v", attempt, delay.Round(time.Millisecond), clean.Round(time.Millisecond), err)
	}
	if struck < 3 {
		t.Fatalf("only %d of 20 truncations landed inside a load", struck)
	}
	t.Logf("%d loads struck, each ended with an error", struck)
}
