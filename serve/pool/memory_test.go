package pool_test

import (
	"context"
	"errors"
	"os"
	"runtime"
	"runtime/debug"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/ggload/ggload/ggml"
	"github.com/ggload/ggload/lab/testenv"
	"github.com/ggload/ggload/serve/pool"
)

// TestMemoryIsThePlan: what a loaded model holds, as its engine
// allocated it, is what its plan said to the byte, on the CPU; unloading
// gives every buffer back and the ledger returns to zero.
func TestMemoryIsThePlan(t *testing.T) {
	a := modelFile(t, 7)
	p := newPool(t, pool.Params{})
	if err := p.Add("a", cpuOptions(a)); err != nil {
		t.Fatal(err)
	}
	live := testenv.LiveBuffers()
	l := acquire(t, p, "a")
	in, err := p.Model("a")
	if err != nil {
		t.Fatal(err)
	}
	if in.Status != pool.Loaded || len(in.Memory) == 0 || !slices.Equal(in.Memory, in.Planned) {
		t.Fatalf("%s: held %v, planned %v", in.Status, in.Memory, in.Planned)
	}
	sum := uint64(0)
	for _, m := range l.Engine().Memory().Weights {
		sum += m.Bytes
	}
	for _, m := range l.Engine().Memory().Context {
		sum += m.Bytes
	}
	if h := held(p); h != sum || in.Memory[0].Bytes != sum {
		t.Fatalf("the pool holds %d, the engine %d", h, sum)
	}
	if testenv.LiveBuffers() <= live {
		t.Fatal("the load made no buffer")
	}
	greedy(t, l, []int32{1, 500, 600}, 4)
	l.Release()
	if err := p.Unload(context.Background(), "a"); err != nil {
		t.Fatal(err)
	}
	if h := held(p); h != 0 {
		t.Fatalf("%d bytes held after the unload", h)
	}
	if n := testenv.LiveBuffers(); n != live {
		t.Fatalf("%d buffers live after the unload, %d before the load", n, live)
	}
	if err := p.Unload(context.Background(), "a"); !errors.Is(err, pool.ErrNotLoaded) {
		t.Fatalf("a second unload: %v", err)
	}
}

// needs are the host memory two models hold once loaded (their exact
// figure, the plan's and the engine's alike).
func needs(t *testing.T, paths ...string) []uint64 {
	t.Helper()
	p := newPool(t, pool.Params{ModelsMax: -1})
	var out []uint64
	for i, path := range paths {
		name := string(rune('a' + i))
		if err := p.Add(name, cpuOptions(path)); err != nil {
			t.Fatal(err)
		}
		l := acquire(t, p, name)
		in, _ := p.Model(name)
		l.Release()
		out = append(out, in.Memory[0].Bytes)
	}
	p.Close()
	return out
}

// TestBudgetSmallerThanTwo: with a host budget one byte short of two
// models, requests that alternate between them never find both
// resident: each load evicts the other, the memory held never exceeds
// the budget, and each model answers as it did the first time. With
// room for both (the control), both stay.
func TestBudgetSmallerThanTwo(t *testing.T) {
	a, b := modelFile(t, 7), modelFile(t, 11)
	need := needs(t, a, b)
	prompt := []int32{1, 500, 600, 700}
	for _, tc := range []struct {
		name   string
		budget uint64
		both   bool
	}{{"short", need[0] + need[1] - 1, false}, {"room", need[0] + need[1], true}} {
		t.Run(tc.name, func(t *testing.T) {
			p := newPool(t, pool.Params{ModelsMax: -1, Budgets: []pool.Budget{{Device: pool.HostDevice, Bytes: tc.budget}}})
			for _, n := range []string{"a", "b"} {
				path := a
				if n == "b" {
					path = b
				}
				if err := p.Add(n, cpuOptions(path)); err != nil {
					t.Fatal(err)
				}
			}
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			// every change the pool makes keeps within the budget
			var loads int
			var over []uint64
			watched := make(chan struct{})
			events := p.Subscribe(ctx)
			go func() {
				defer close(watched)
				for ev := range events {
					if ev.Status == pool.Loaded && ev.Err == nil {
						loads++
					}
					if h := held(p); h > tc.budget {
						over = append(over, h)
					}
				}
			}()
			first := map[string][]int32{}
			rounds := 4
			if all() {
				rounds = 10
			}
			for i := range rounds {
				name := []string{"a", "b"}[i%2]
				l := acquire(t, p, name)
				if h := held(p); h > tc.budget {
					t.Fatalf("round %d: %d bytes held, budget %d", i, h, tc.budget)
				}
				toks := greedy(t, l, prompt, 6)
				if first[name] == nil {
					first[name] = toks
				} else if !slices.Equal(toks, first[name]) {
					t.Fatalf("round %d: %s answers %v, first %v", i, name, toks, first[name])
				}
				l.Release()
				other := []string{"b", "a"}[i%2]
				if got := status(t, p, other) == pool.Loaded; i > 0 && got != tc.both {
					t.Fatalf("round %d: %s resident: %v", i, other, got)
				}
			}
			if slices.Equal(first["a"], first["b"]) {
				t.Fatal("the two models answer alike: the test cannot tell them apart")
			}
			cancel()
			<-watched
			if len(over) > 0 {
				t.Fatalf("held over the budget %d: %v", tc.budget, over)
			}
			if want := 2; tc.both && loads != want || !tc.both && loads < rounds {
				t.Fatalf("%d loads in %d rounds", loads, rounds)
			}
		})
	}
}

// TestRefusedAlone: a model bigger than the budget is refused at once,
// with the device, its need and the room; nothing is allocated.
func TestRefusedAlone(t *testing.T) {
	a := modelFile(t, 7)
	need := needs(t, a)
	p := newPool(t, pool.Params{Budgets: []pool.Budget{{Device: pool.HostDevice, Bytes: need[0] - 1}}})
	if err := p.Add("a", cpuOptions(a)); err != nil {
		t.Fatal(err)
	}
	live := testenv.LiveBuffers()
	_, err := p.Acquire(context.Background(), "a", true)
	var room *pool.RoomError
	if !errors.As(err, &room) || !errors.Is(err, pool.ErrNoRoom) || !room.Alone || len(room.Short) != 1 ||
		room.Short[0].Device != pool.HostDevice || room.Short[0].Need != need[0] || room.Short[0].Room != need[0]-1 {
		t.Fatalf("%v (%+v)", err, room)
	}
	t.Log(err)
	if n := testenv.LiveBuffers(); n != live {
		t.Fatalf("%d buffers live, %d before", n, live)
	}
	in, _ := p.Model("a")
	if in.Status != pool.Unloaded || !errors.Is(in.Err, pool.ErrNoRoom) || held(p) != 0 {
		t.Fatalf("%s %v, %d held", in.Status, in.Err, held(p))
	}
}

// rss is a process's resident memory ("self" or a pid).
func rss(t testing.TB, pid string) uint64 {
	t.Helper()
	b, err := os.ReadFile("/proc/" + pid + "/status")
	if err != nil {
		t.Skip("no /proc: the resident memory cannot be read")
	}
	for _, l := range strings.Split(string(b), "\n") {
		if f := strings.Fields(l); len(f) >= 2 && f[0] == "VmRSS:" {
			kb, _ := strconv.ParseUint(f[1], 10, 64)
			return kb << 10
		}
	}
	t.Fatalf("no VmRSS for %s", pid)
	return 0
}

// TestUnloadFreesEveryByte: a model loaded and unloaded again and again
// on the CPU, on Vulkan0 and on an RPC server leaves nothing behind: the
// buffers are freed, the pool holds nothing, the device reports the free
// memory it reported before the load, and the resident memory of the
// process that held the model (this one; the RPC server) comes back to
// where it was, cycle after cycle (while a loaded model shows in it).
func TestUnloadFreesEveryByte(t *testing.T) {
	a := modelFile(t, 7)
	rt := testenv.Runtime(t)
	type where struct {
		name string
		dev  func(t *testing.T) (*ggml.Device, string) // the device, and the process that holds its memory
	}
	cases := []where{
		{"cpu", func(t *testing.T) (*ggml.Device, string) { return rt.CPUDevice(), "self" }},
		{"vulkan", func(t *testing.T) (*ggml.Device, string) { return testenv.Vulkan(t), "self" }},
		{"rpc", func(t *testing.T) (*ggml.Device, string) {
			ep := testenv.RPC(t, 1)[0]
			for _, d := range rt.Devices() {
				if d.Endpoint() == ep {
					return d, strconv.Itoa(testenv.RPCServerOf(ep).Cmd.Process.Pid)
				}
			}
			t.Fatalf("no device of %s", ep)
			return nil, ""
		}},
	}
	cycles := 1
	if all() {
		cycles = 16
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			d, pid := c.dev(t)
			p := newPool(t, pool.Params{})
			o := cpuOptions(a)
			if d != rt.CPUDevice() {
				o.Place.DeviceNames = []string{d.Name()}
			}
			p.Add("a", o)
			settled := func() uint64 {
				runtime.GC()
				debug.FreeOSMemory()
				return rss(t, pid)
			}
			var base, last uint64
			for i := range cycles + 1 {
				free0, _ := d.Memory()
				live := testenv.LiveBuffers()
				l := acquire(t, p, "a")
				greedy(t, l, []int32{1, 500, 600}, 4)
				l.Release()
				in, _ := p.Model("a")
				if !slices.Equal(in.Memory, in.Planned) {
					t.Errorf("cycle %d: the engine holds %v, its plan said %v", i, in.Memory, in.Planned)
				}
				loaded := settled()
				if err := p.Unload(context.Background(), "a"); err != nil {
					t.Fatal(err)
				}
				unloaded := settled()
				if free1, _ := d.Memory(); free1 != free0 {
					t.Fatalf("cycle %d: %s reports %d free after the unload, %d before the load", i, d.Name(), free1, free0)
				}
				if n := testenv.LiveBuffers(); n != live {
					t.Fatalf("cycle %d: %d buffers live, %d before", i, n, live)
				}
				for _, m := range p.Memory() {
					if m.Held != 0 {
						t.Fatalf("cycle %d: %d bytes held on %s", i, m.Held, m.Device)
					}
				}
				if loaded <= unloaded {
					t.Fatalf("cycle %d: the loaded model (%v) does not show in the resident memory: %d loaded, %d unloaded", i, in.Memory, loaded, unloaded)
				}
				t.Logf("cycle %d: %v held; resident %.1f MiB loaded, %.1f MiB unloaded", i, in.Memory, float64(loaded)/(1<<20), float64(unloaded)/(1<<20))
				if i == 0 {
					base = unloaded
				}
				last = unloaded
			}
			const slack = 4 << 20 // (the first cycles fill the process's caches)
			if last > base+slack {
				t.Fatalf("the resident memory grew from %d to %d over %d cycles", base, last, cycles)
			}
		})
	}
}
