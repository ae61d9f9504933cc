package loader_test

import (
	"context"
	"errors"
	"regexp"
	"runtime"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/ggload/ggload/ggml"
	"github.com/ggload/ggload/gguf"
	"github.com/ggload/ggload/lab/testenv"
	"github.com/ggload/ggload/loader"
	"github.com/ggload/ggload/place"
)

// threeDevices plans the small model over an RPC server (loopback) and
// Vulkan0, the input layer on the CPU: three pipelines (the RPC server's,
// Vulkan0's, host memory's). laneOf names each tensor's pipeline as
// Stats.Devices does.
func threeDevices(t *testing.T, mode place.LoadMode) (*gguf.Model, *place.Plan, map[string]string) {
	t.Helper()
	rt := testenv.Runtime(t)
	testenv.Vulkan(t)
	ep := testenv.RPC(t, 1)[0]
	rpc := ""
	for _, d := range rt.Devices() {
		if d.IsRPC() && d.Endpoint() == ep {
			rpc = d.Name()
		}
	}
	spec := smallSpec
	spec.Tied = false // token_embd on the CPU, output.weight on a device
	gm := testenv.OpenModel(t, testenv.ModelFile(t, rt, spec))
	p := planFor(t, rt, gm, func(p *place.Params) {
		p.LoadMode = mode
		p.DeviceNames = []string{rpc, "Vulkan0"}
		p.TensorSplit = []float32{1, 1}
		p.NGPULayers = place.NLayers(99)
	})
	laneOf := map[string]string{}
	for _, tp := range p.Tensors {
		if tp.Context < 0 || tp.Shared {
			continue
		}
		lane := "host"
		if !tp.BufferType.IsHost() && tp.Device != nil && tp.Device.Type() != ggml.DeviceCPU {
			lane = tp.Device.Name()
		}
		laneOf[tp.Name] = lane
	}
	lanes := map[string]bool{}
	for _, l := range laneOf {
		lanes[l] = true
	}
	if len(lanes) != 3 {
		t.Fatalf("the plan has pipelines %v, want the RPC server's, Vulkan0's and host memory's", lanes)
	}
	return gm, p, laneOf
}

// The devices load at once: the first tensor of every device waits, in
// the tests' hook, until every device has started one; loading one device
// after another could not get past it. With Options.Sequential each
// device's tensors come together, one device after the other, and nothing
// waits. Either way every tensor reads back equal to the file, and
// Stats.Devices accounts for every byte.
func TestDevicesLoadAtOnce(t *testing.T) {
	for _, sequential := range []bool{false, true} {
		name := "at-once"
		if sequential {
			name = "sequential"
		}
		t.Run(name, func(t *testing.T) {
			gm, p, laneOf := threeDevices(t, place.LoadNone)
			var (
				mu      sync.Mutex
				started = map[string]bool{}
				order   []string
				all     = make(chan struct{})
			)
			restore := loader.SetBeforeTensor(func(seq int, name string) {
				lane := laneOf[name]
				mu.Lock()
				order = append(order, lane)
				first := !started[lane]
				started[lane] = true
				if len(started) == 3 && first {
					close(all)
				}
				mu.Unlock()
				if !first || sequential {
					return
				}
				select {
				case <-all:
				case <-time.After(20 * time.Second):
					t.Errorf("the first tensor of %s waited 20 s for the other devices to start: they do not load at once", lane)
				}
			})
			defer restore()
			lm, err := loader.Load(context.Background(), p, loader.Options{Sequential: sequential})
			if err != nil {
				t.Fatal(err)
			}
			defer lm.Close()
			verify(t, gm, lm)
			var sum uint64
			var names []string
			for _, d := range lm.Stats.Devices {
				sum += d.Bytes
				names = append(names, d.Device)
				if d.Tensors == 0 || d.Bytes == 0 {
					t.Errorf("device %+v moved nothing", d)
				}
			}
			if sum != lm.Stats.Bytes || len(names) != 3 {
				t.Fatalf("devices %+v account for %d of %d bytes", lm.Stats.Devices, sum, lm.Stats.Bytes)
			}
			if sequential {
				// a, a, b, b, c: no device comes back once another started
				var seen []string
				for i, l := range order {
					if i > 0 && l == order[i-1] {
						continue
					}
					if slices.Contains(seen, l) {
						t.Fatalf("sequential load went back to %s: %v", l, order)
					}
					seen = append(seen, l)
				}
			}
		})
	}
}

// A context cancelled while every device is loading stops them all: the
// devices that were not struck start few more tensors (each waits a little
// in the hook, so that they would finish every tensor if they went on),
// the error wraps ErrCanceled, and the buffers and goroutines are back
// where they were.
func TestCancelStopsEveryDevice(t *testing.T) {
	for _, mode := range []place.LoadMode{place.LoadNone, place.LoadMmap} {
		t.Run(mode.String(), func(t *testing.T) {
			_, p, laneOf := threeDevices(t, mode)
			total := map[string]int{}
			for _, l := range laneOf {
				total[l]++
			}
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			var (
				mu     sync.Mutex
				count  = map[string]int{}
				struck = ""
				after  = map[string]int{} // tensors started after the cancel
			)
			restore := loader.SetBeforeTensor(func(seq int, name string) {
				lane := laneOf[name]
				mu.Lock()
				count[lane]++
				if struck != "" {
					after[lane]++
				}
				if struck == "" && lane != "host" && count[lane] == 3 {
					struck = lane
					cancel()
				}
				mu.Unlock()
				time.Sleep(5 * time.Millisecond)
			})
			defer restore()
			buffers, goroutines := testenv.LiveBuffers(), runtime.NumGoroutine()
			lm, err := loader.Load(ctx, p, loader.Options{})
			if err == nil {
				lm.Close()
				t.Fatal("the load succeeded after its context was cancelled")
			}
			if !errors.Is(err, loader.ErrCanceled) || !errors.Is(err, context.Canceled) {
				t.Fatalf("error %v: want ErrCanceled and context.Canceled", err)
			}
			// it names where the load was: a tensor, its device, how far
			if !regexp.MustCompile(`\(at tensor \S+ (onto \S+|into host memory), [0-9.]+ MiB of [0-9.]+ MiB moved\)$`).MatchString(err.Error()) {
				t.Errorf("the error names no tensor and device: %v", err)
			}
			// and so does its place
			if e, ok := err.(*loader.Error); !ok || e.Op != "load" || e.Tensor == "" || e.Device == "" || e.Off < 0 || !strings.Contains(err.Error(), "at tensor "+e.Tensor+" ") {
				t.Errorf("the place %+v: %v", e, err)
			}
			mu.Lock()
			defer mu.Unlock()
			if struck == "" {
				t.Fatal("no device reached its third tensor")
			}
			for lane, n := range after {
				if n > 2 {
					t.Errorf("%s started %d tensors after the cancel (of %d, %d before it)", lane, n, total[lane], count[lane]-n)
				}
			}
			if n := testenv.LiveBuffers(); n != buffers {
				t.Fatalf("%d buffers live after the cancelled load, %d before", n, buffers)
			}
			if n := settleGoroutines(goroutines); n > goroutines {
				t.Fatalf("%d goroutines after the cancelled load, %d before", n, goroutines)
			}
			t.Logf("cancelled at the third tensor of %s: tensors started per device %v of %v; after the cancel %v", struck, count, total, after)
		})
	}
}
