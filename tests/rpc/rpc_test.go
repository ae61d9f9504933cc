// Package rpc_test loads models onto ggml-rpc-servers on separate hosts:
// network namespaces joined by veth pairs (scripts/rpc-hosts.sh), each with
// its own server. Servers here die on purpose, so these tests live in their
// own binary: ggml keeps every registered device for the process's life.
package rpc_test

import (
	"bytes"
	"context"
	"errors"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/ggload/ggload/ggml"
	"github.com/ggload/ggload/gguf"
	"github.com/ggload/ggload/lab/synth"
	"github.com/ggload/ggload/lab/testenv"
	"github.com/ggload/ggload/loader"
	"github.com/ggload/ggload/place"
)

func TestMain(m *testing.M) {
	testenv.Main(m)
}

func register(t testing.TB, rt *ggml.Runtime, hosts []testenv.NetHost, o ggml.RPCOptions) []string {
	t.Helper()
	var names []string
	for _, h := range hosts {
		devs, err := rt.AddRPCServer(context.Background(), h.Endpoint, o)
		if err != nil {
			t.Fatalf("%s: %v\n%s", h.Endpoint, err, h.Log())
		}
		for _, d := range devs {
			names = append(names, d.Name())
		}
	}
	return names
}

func writeModel(t testing.TB, rt *ggml.Runtime, spec synth.Spec) *gguf.Model {
	t.Helper()
	return testenv.OpenModel(t, testenv.ModelFile(t, rt, spec))
}

// verify reads every tensor back from its device and compares it with the
// file; it returns the tensors checked per device.
func verify(t *testing.T, lm *loader.Model) map[string]int {
	t.Helper()
	v, err := lm.Verify()
	if err != nil {
		t.Fatal(err)
	}
	return v.ByDevice
}

var spec = synth.Spec{Layers: 6, Embd: 256, FF: 512, Heads: 4, Vocab: 512, Weights: ggml.TypeQ4_K, Embeddings: ggml.TypeQ8_0}

// Two RPC hosts and the local Vulkan device share the layers; every tensor
// reads back equal to the file, in both load modes.
func TestLoadAcrossHosts(t *testing.T) {
	rt := testenv.Runtime(t)
	testenv.Vulkan(t)
	hosts := testenv.NetHosts(t, 2, testenv.NetOptions{})
	rpc := register(t, rt, hosts, ggml.RPCOptions{})
	m := writeModel(t, rt, spec)
	for _, mode := range []place.LoadMode{place.LoadNone, place.LoadMmap} {
		t.Run(mode.String(), func(t *testing.T) {
			params := place.Params{}
			params.LoadMode = mode
			params.DeviceNames = append(append([]string{}, rpc...), "Vulkan0")
			params.TensorSplit = []float32{1, 1, 1}
			params.NoExtraBufts = true
			p, err := place.New(context.Background(), rt, m, params)
			if err != nil {
				t.Fatal(err)
			}
			layers := map[string]bool{}
			for _, d := range p.LayerDevices {
				layers[d.Name()] = true
			}
			for _, d := range params.DeviceNames {
				if !layers[d] {
					t.Fatalf("no layer on %s: %v", d, p.LayerDevices)
				}
			}
			var before [2]uint64
			for i, name := range rpc {
				d, _ := rt.DeviceByName(name)
				before[i], _ = d.RPCTraffic()
			}
			lm, err := loader.Load(context.Background(), p, loader.Options{})
			if err != nil {
				t.Fatal(err)
			}
			defer lm.Close()
			per := verify(t, lm)
			for i, name := range rpc {
				d, _ := rt.DeviceByName(name)
				sent, _ := d.RPCTraffic()
				var placed int64
				for _, tp := range p.Tensors {
					if tp.Device == d && tp.Context >= 0 && !tp.Shared {
						placed += tp.Bytes
					}
				}
				if per[name] == 0 || sent-before[i] < uint64(placed) {
					t.Errorf("%s (%s): %d tensors verified, %d bytes sent for %d placed", name, hosts[i].Endpoint, per[name], sent-before[i], placed)
				}
			}
			t.Logf("tensors verified per device: %v", per)
		})
	}
}

// settle waits for goroutines to drain back to n (the guards' relays end
// when the native client closes their connections).
func settle(n int) int {
	deadline := time.Now().Add(5 * time.Second)
	for time.Now().Before(deadline) && runtime.NumGoroutine() > n {
		time.Sleep(20 * time.Millisecond)
	}
	return runtime.NumGoroutine()
}

// A server killed in the middle of a load, and one that stops answering:
// the load fails in bounded time with an error naming the endpoint, and
// nothing is left allocated or running here.
func TestServerFailsMidLoad(t *testing.T) {
	rt := testenv.Runtime(t)
	big := spec
	big.Layers, big.Embd, big.FF = 8, 1024, 2816
	for _, how := range []string{"killed", "silent"} {
		t.Run(how, func(t *testing.T) {
			hosts := testenv.NetHosts(t, 1, testenv.NetOptions{})
			const ioTimeout = 2 * time.Second
			rpc := register(t, rt, hosts, ggml.RPCOptions{IOTimeout: ioTimeout})
			m := writeModel(t, rt, big)
			for _, mode := range []place.LoadMode{place.LoadNone, place.LoadMmap} {
				params := place.Params{}
				params.LoadMode = mode
				params.DeviceNames = rpc
				p, err := place.New(context.Background(), rt, m, params)
				if err != nil {
					t.Fatal(err)
				}
				if mode == place.LoadMmap && how == "silent" {
					break // the server stays frozen: one mode is enough
				}
				buffers, goroutines := testenv.LiveBuffers(), runtime.NumGoroutine()
				struck := false
				start := time.Now()
				lm, err := loader.Load(context.Background(), p, loader.Options{Progress: func(done, total uint64) bool {
					if !struck && done > total/3 {
						struck = true
						if how == "killed" {
							hosts[0].Kill()
						} else {
							hosts[0].Stop()
						}
					}
					return true
				}})
				elapsed := time.Since(start)
				if mode == place.LoadMmap {
					// the server was killed during the first load: this one
					// cannot even allocate
					struck = true
				}
				if err == nil {
					lm.Close()
					t.Fatalf("%s: load succeeded with the server %s (struck %v)", mode, how, struck)
				}
				if !errors.Is(err, ggml.ErrRPCFailed) || !strings.Contains(err.Error(), hosts[0].Endpoint) {
					t.Fatalf("%s: error %v: want ErrRPCFailed naming %s", mode, err, hosts[0].Endpoint)
				}
				if how == "silent" && !strings.Contains(err.Error(), "no answer within") {
					t.Fatalf("error %v: want the timeout named", err)
				}
				if elapsed > 5*ioTimeout+10*time.Second {
					t.Fatalf("%s: failing took %v", mode, elapsed)
				}
				if n := testenv.LiveBuffers(); n != buffers {
					t.Fatalf("%s: %d buffers live after the failed load, %d before", mode, n, buffers)
				}
				if n := settle(goroutines); n > goroutines {
					t.Fatalf("%s: %d goroutines after the failed load, %d before", mode, n, goroutines)
				}
				t.Logf("%s, %s: failed after %v: %v", how, mode, elapsed.Round(time.Millisecond), err)
			}
		})
	}
}

// Split mode tensor over two servers, one killed in the middle of the
// load: every tensor goes to both through ggml's meta buffer, which knows
// nothing of failures; the load fails naming the server, frees all it
// made, and the process lives on. Loaded again over healthy servers, every
// tensor reads back equal to the file.
func TestServerFailsMidTensorLoad(t *testing.T) {
	if err := ggml.MetaDeviceSupported(); err != nil {
		t.Skip(err)
	}
	rt := testenv.Runtime(t)
	big := spec
	big.Layers, big.Embd, big.FF = 6, 512, 1536
	m := writeModel(t, rt, big)
	var servers []*testenv.RPCServer
	var names []string
	for range 2 {
		s := testenv.StartRPCServer(t)
		devs, err := rt.AddRPCServer(context.Background(), s.Endpoint, ggml.RPCOptions{IOTimeout: 2 * time.Second})
		if err != nil {
			t.Fatalf("%s: %v\n%s", s.Endpoint, err, s.Output())
		}
		servers = append(servers, s)
		names = append(names, devs[0].Name())
	}
	params := place.Params{SplitMode: place.SplitTensor, DeviceNames: names, TensorSplit: []float32{1, 2}}
	p, err := place.New(context.Background(), rt, m, params)
	if err != nil {
		t.Fatal(err)
	}
	if len(p.TensorDevices) != 2 || len(p.Devices) != 1 || !p.Devices[0].IsMeta() {
		t.Fatalf("devices %v over %v", p.Devices, p.TensorDevices)
	}
	lm, err := loader.Load(context.Background(), p, loader.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if v := verify(t, lm); v[p.Devices[0].Name()] == 0 {
		t.Fatalf("no tensor verified on the meta device: %v", v)
	}
	lm.Close()

	buffers, goroutines := testenv.LiveBuffers(), runtime.NumGoroutine()
	struck := false
	lm, err = loader.Load(context.Background(), p, loader.Options{Progress: func(done, total uint64) bool {
		if !struck && done > total/3 {
			struck = true
			servers[1].Kill()
		}
		return true
	}})
	if err == nil {
		lm.Close()
		t.Fatalf("load succeeded with a server killed (struck %v)", struck)
	}
	if !errors.Is(err, ggml.ErrRPCFailed) || !strings.Contains(err.Error(), servers[1].Endpoint) {
		t.Fatalf("error %v: want ErrRPCFailed naming %s", err, servers[1].Endpoint)
	}
	if n := testenv.LiveBuffers(); n != buffers {
		t.Fatalf("%d buffers live after the failed load, %d before", n, buffers)
	}
	if n := settle(goroutines); n > goroutines {
		t.Fatalf("%d goroutines after the failed load, %d before", n, goroutines)
	}
	t.Logf("failed: %v", err)
}

// The servers' file cache (ggml-rpc-server -c): big tensors go by hash the
// second time, so the second load sends a fraction of the bytes over a
// 1 Gbit/s link and takes less time.
func TestServerFileCache(t *testing.T) {
	rt := testenv.Runtime(t)
	hosts := testenv.NetHosts(t, 1, testenv.NetOptions{Cache: true, Rate: "1gbit"})
	rpc := register(t, rt, hosts, ggml.RPCOptions{})
	// 2048-wide q8_0: the token embedding (69 MB) and the feed-forward
	// matrices (12 MB) are over the client's 10 MiB hash threshold
	m := writeModel(t, rt, synth.Spec{Layers: 1, Embd: 2048, FF: 5632, Heads: 16, Vocab: 32000, Tied: true})
	d, _ := rt.DeviceByName(rpc[0])
	var sent [2]uint64
	var took [2]time.Duration
	for i := range 2 {
		params := place.Params{}
		params.LoadMode = place.LoadNone
		params.DeviceNames = rpc
		p, err := place.New(context.Background(), rt, m, params)
		if err != nil {
			t.Fatal(err)
		}
		s0, _ := d.RPCTraffic()
		start := time.Now()
		lm, err := loader.Load(context.Background(), p, loader.Options{})
		if err != nil {
			t.Fatalf("load %d: %v\n%s", i+1, err, hosts[0].Log())
		}
		took[i] = time.Since(start)
		s1, _ := d.RPCTraffic()
		sent[i] = s1 - s0
		if i == 1 {
			verify(t, lm)
		}
		lm.Close()
	}
	t.Logf("first load %v (%.1f MiB sent), second %v (%.1f MiB sent)", took[0].Round(time.Millisecond), float64(sent[0])/(1<<20), took[1].Round(time.Millisecond), float64(sent[1])/(1<<20))
	if sent[1]*5 > sent[0] {
		t.Fatalf("second load sent %d bytes, first %d: the cache was not used", sent[1], sent[0])
	}
}

// The guard on loopback, without namespaces: a buffer on a server that is
// then killed can still be written, read (zeros) and freed without the
// process aborting, and Device.Err names the endpoint.
func TestGuardKeepsProcessAlive(t *testing.T) {
	rt := testenv.Runtime(t)
	s := testenv.StartRPCServer(t)
	devs, err := rt.AddRPCServer(context.Background(), s.Endpoint, ggml.RPCOptions{IOTimeout: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	d := devs[0]
	if d.Endpoint() != s.Endpoint || !strings.Contains(d.Description(), s.Endpoint) || !strings.Contains(d.BufferType().Name(), s.Endpoint) {
		t.Fatalf("names: endpoint %q, description %q, buffer type %q", d.Endpoint(), d.Description(), d.BufferType().Name())
	}
	ctx, err := rt.NewContext(ggml.ContextParams{Tensors: 1, NoAlloc: true})
	if err != nil {
		t.Fatal(err)
	}
	defer ctx.Free()
	x, err := ctx.NewTensor(ggml.TypeF32, 1024)
	if err != nil {
		t.Fatal(err)
	}
	buf, err := ctx.AllocTensors(d.BufferType())
	if err != nil {
		t.Fatal(err)
	}
	data := make([]byte, 4096)
	for i := range data {
		data[i] = byte(i)
	}
	if err := x.Set(data, 0); err != nil {
		t.Fatal(err)
	}
	if got, _ := x.Bytes(); !bytes.Equal(got, data) || d.Err() != nil {
		t.Fatalf("round trip before the kill: %v", d.Err())
	}
	s.Kill()
	if err := x.Set(data, 0); err != nil {
		t.Fatal(err)
	}
	got, err := x.Bytes()
	if err != nil {
		t.Fatal(err)
	}
	if err := d.Err(); !errors.Is(err, ggml.ErrRPCFailed) || !strings.Contains(err.Error(), s.Endpoint) {
		t.Fatalf("Err after the kill: %v", err)
	}
	if bytes.Equal(got, data) {
		t.Fatal("data read back from a dead server")
	}
	buf.Free()
}

// A memory budget for a server: its device reports at most that much,
// free and total, through the guard (what placement and -fit read); a
// direct connection cannot keep it and is refused.
func TestMemoryBudget(t *testing.T) {
	rt := testenv.Runtime(t)
	s := testenv.StartRPCServer(t)
	if _, err := rt.AddRPCServer(context.Background(), s.Endpoint, ggml.RPCOptions{Direct: true, Memory: 1 << 28}); err == nil || !strings.Contains(err.Error(), "needs the guard") {
		t.Fatalf("direct with a budget: %v", err)
	}
	devs, err := rt.AddRPCServer(context.Background(), s.Endpoint, ggml.RPCOptions{Memory: 1 << 28})
	if err != nil {
		t.Fatal(err)
	}
	free, total := devs[0].Memory()
	if free != 1<<28 || total != 1<<28 {
		t.Fatalf("budget 256 MiB: %d free of %d", free, total)
	}
	// a server without a budget reports the host's memory
	s2 := testenv.StartRPCServer(t)
	devs, err = rt.AddRPCServer(context.Background(), s2.Endpoint, ggml.RPCOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if _, total := devs[0].Memory(); total <= 1<<28 {
		t.Fatalf("no budget: %d total", total)
	}
}

// An endpoint is registered once per process (ggml cannot forget it): the
// same options again give the same devices; other ones (a budget, native
// sets, a direct connection) are refused with both sets named, not
// silently replaced by the first.
func TestRegisteredOnce(t *testing.T) {
	rt := testenv.Runtime(t)
	s := testenv.StartRPCServer(t)
	first, err := rt.AddRPCServer(context.Background(), s.Endpoint, ggml.RPCOptions{})
	if err != nil {
		t.Fatal(err)
	}
	again, err := rt.AddRPCServer(context.Background(), s.Endpoint, ggml.RPCOptions{IOTimeout: time.Minute})
	if err != nil || len(again) != len(first) || again[0].Name() != first[0].Name() {
		t.Fatalf("the same options again: %v, %v (first %v)", again, err, first)
	}
	for _, o := range []ggml.RPCOptions{{NativeSets: true}, {Memory: 1 << 28}, {Direct: true}} {
		_, err := rt.AddRPCServer(context.Background(), s.Endpoint, o)
		if err == nil || !strings.Contains(err.Error(), "registered before with other options (guarded)") || !strings.Contains(err.Error(), s.Endpoint) {
			t.Errorf("%+v after a plain registration: %v", o, err)
		}
	}
}
