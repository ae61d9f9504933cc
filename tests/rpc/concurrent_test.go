package rpc_test

import (
	"context"
	"errors"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/ggload/ggload/ggml"
	"github.com/ggload/ggload/lab/synth"
	"github.com/ggload/ggload/lab/testenv"
	"github.com/ggload/ggload/loader"
	"github.com/ggload/ggload/place"
)

// A model split over two RPC hosts (1 Gbit/s links) and Vulkan0, which
// load at once. A quarter of the way in, one host's server is killed, or
// the context is cancelled: the load fails in bounded time with the error
// that says why (ErrRPCFailed naming the dead host's endpoint; ErrCanceled),
// the host that was not struck stops before it has received its share,
// and the live buffers and goroutines are back where they started. Both
// load modes; -race covers the lanes' shared state.
func TestSeveralDevicesStopTogether(t *testing.T) {
	rt := testenv.Runtime(t)
	vk := testenv.Vulkan(t)
	// twelve 13 MiB layers: about 55 MiB per device, most of a second
	// on each link
	m := writeModel(t, rt, synth.Spec{Layers: 12, Embd: 1024, FF: 2816, Heads: 8, Vocab: 8000, Weights: ggml.TypeQ8_0, Embeddings: ggml.TypeQ8_0})
	const ioTimeout = 2 * time.Second
	for _, how := range []string{"killed", "canceled"} {
		for _, mode := range []place.LoadMode{place.LoadNone, place.LoadMmap} {
			t.Run(how+"/"+mode.String(), func(t *testing.T) {
				hosts := testenv.NetHosts(t, 2, testenv.NetOptions{Rate: "1gbit"})
				rpc := register(t, rt, hosts, ggml.RPCOptions{IOTimeout: ioTimeout})
				params := place.Params{}
				params.LoadMode = mode
				params.DeviceNames = append(append([]string{}, rpc...), vk.Name())
				params.TensorSplit = []float32{1, 1, 1}
				params.NGPULayers = place.NLayers(99)
				params.NoExtraBufts = true
				p, err := place.New(context.Background(), rt, m, params)
				if err != nil {
					t.Fatal(err)
				}
				placed := map[string]int64{}
				for _, tp := range p.Tensors {
					if tp.Device != nil && tp.Context >= 0 && !tp.Shared {
						placed[tp.Device.Name()] += tp.Bytes
					}
				}
				for _, d := range params.DeviceNames {
					if placed[d] == 0 {
						t.Fatalf("nothing placed on %s: %v", d, placed)
					}
				}
				survivor, _ := rt.DeviceByName(rpc[1])
				sent0, _ := survivor.RPCTraffic()
				buffers, goroutines := testenv.LiveBuffers(), runtime.NumGoroutine()
				ctx, cancel := context.WithCancel(context.Background())
				defer cancel()
				var struck time.Time
				lm, err := loader.Load(ctx, p, loader.Options{Progress: func(done, total uint64) bool {
					if struck.IsZero() && done > total/4 {
						struck = time.Now()
						if how == "killed" {
							hosts[0].Kill()
						} else {
							cancel()
						}
					}
					return true
				}})
				if err == nil {
					lm.Close()
					t.Fatalf("the load succeeded (struck: %v)", !struck.IsZero())
				}
				if struck.IsZero() {
					t.Fatalf("the load failed before it was struck: %v", err)
				}
				took := time.Since(struck)
				switch how {
				case "killed":
					if !errors.Is(err, ggml.ErrRPCFailed) || !strings.Contains(err.Error(), hosts[0].Endpoint) {
						t.Fatalf("error %v: want ErrRPCFailed naming %s", err, hosts[0].Endpoint)
					}
				case "canceled":
					if !errors.Is(err, loader.ErrCanceled) {
						t.Fatalf("error %v: want ErrCanceled", err)
					}
				}
				if took > 2*ioTimeout+10*time.Second {
					t.Fatalf("the load took %v to stop", took)
				}
				sent1, _ := survivor.RPCTraffic()
				if got := int64(sent1 - sent0); got >= placed[rpc[1]] {
					t.Errorf("%s (%s) received %d bytes, its whole share (%d): it did not stop", rpc[1], hosts[1].Endpoint, got, placed[rpc[1]])
				}
				if n := testenv.LiveBuffers(); n != buffers {
					t.Fatalf("%d buffers live after the failed load, %d before", n, buffers)
				}
				if n := settle(goroutines); n > goroutines {
					t.Fatalf("%d goroutines after the failed load, %d before", n, goroutines)
				}
				t.Logf("stopped %v after the strike; %s had received %.1f of its %.1f MiB: %v", took.Round(time.Millisecond), rpc[1], float64(sent1-sent0)/(1<<20), float64(placed[rpc[1]])/(1<<20), err)
			})
		}
	}
}
