package pool_test

import (
	"context"
	"errors"
	"testing"

	"github.com/ggload/ggload/lab/testenv"
	"github.com/ggload/ggload/place"
	"github.com/ggload/ggload/serve/pool"
)

// TestFitInRoom: a model is planned with -fit in the room the pool can
// give it on Vulkan0: a budget one byte short of the model's full offload
// makes -fit keep layers on the CPU (and the device holds no more than
// its budget); a pinned model's memory shrinks the room the same way,
// while an idle model that can leave is evicted instead (the control:
// the newcomer gets every layer); and a budget below what the model needs
// with no layer offloaded refuses it, with -fit's reasoning.
func TestFitInRoom(t *testing.T) {
	a, b := modelFile(t, 7), modelFile(t, 11)
	vk := testenv.Vulkan(t)
	opts := func(path string, ngl place.Layers) pool.Options {
		o := cpuOptions(path)
		o.Place.DeviceNames = []string{vk.Name()}
		o.Place.NGPULayers = ngl
		o.Place.Context.NBatch, o.Place.Context.NUBatch = 32, 32 // (compute buffers smaller than the layers)
		o.Fit.Targets = []uint64{0}
		return o
	}
	vkHeld := func(in pool.Info) uint64 {
		for _, m := range in.Memory {
			if m.Device == vk.Name() {
				return m.Bytes
			}
		}
		return 0
	}
	// what the model holds on Vulkan0 with every layer and with none
	var full, none uint64
	var layers int
	{
		p := newPool(t, pool.Params{ModelsMax: -1})
		p.Add("all", opts(a, place.AutoLayers()))
		p.Add("none", opts(a, place.NLayers(0)))
		for _, n := range []string{"all", "none"} {
			acquire(t, p, n).Release()
		}
		in, _ := p.Model("all")
		full, layers = vkHeld(in), in.Fit.Plan.GPULayers
		in, _ = p.Model("none")
		none = vkHeld(in)
		p.Close()
	}
	if none >= full || layers < 2 {
		t.Fatalf("%d bytes with no layer, %d with %d layers: the model cannot show -fit's choice", none, full, layers)
	}
	budget := func(n uint64) pool.Params {
		return pool.Params{Budgets: []pool.Budget{{Device: vk.Name(), Bytes: n}}}
	}
	checkFewer := func(p *pool.Pool, name string, within uint64) {
		t.Helper()
		in, _ := p.Model(name)
		if in.Fit == nil || in.Fit.Status != place.FitAdjusted || in.Fit.Plan.GPULayers >= layers || vkHeld(in) > within {
			t.Fatalf("%s: %d of %d layers, %d bytes on %s (room %d): %v", name, in.Fit.Plan.GPULayers, layers, vkHeld(in), vk.Name(), within, in.Fit.Reasoning)
		}
	}

	t.Run("budget", func(t *testing.T) {
		p := newPool(t, budget(full-1))
		p.Add("a", opts(a, place.AutoLayers()))
		acquire(t, p, "a").Release()
		checkFewer(p, "a", full-1)
	})
	t.Run("pinned", func(t *testing.T) {
		p := newPool(t, budget(full+none-1))
		ob := opts(b, place.NLayers(0))
		ob.Pin = true
		p.Add("b", ob)
		p.Add("a", opts(a, place.AutoLayers()))
		acquire(t, p, "b").Release()
		acquire(t, p, "a").Release()
		checkFewer(p, "a", full-1)
		if status(t, p, "b") != pool.Loaded {
			t.Fatal("the pinned model was evicted")
		}
	})
	t.Run("evictable", func(t *testing.T) {
		p := newPool(t, budget(full+none-1))
		p.Add("b", opts(b, place.NLayers(0)))
		p.Add("a", opts(a, place.AutoLayers()))
		acquire(t, p, "b").Release()
		acquire(t, p, "a").Release()
		in, _ := p.Model("a")
		if in.Fit.Status != place.FitUnchanged || in.Fit.Plan.GPULayers != layers || status(t, p, "b") != pool.Unloaded {
			t.Fatalf("%s, %d of %d layers; b %s", in.Fit.Status, in.Fit.Plan.GPULayers, layers, status(t, p, "b"))
		}
	})
	t.Run("refused", func(t *testing.T) {
		p := newPool(t, budget(none-1))
		p.Add("a", opts(a, place.AutoLayers()))
		_, err := p.Acquire(context.Background(), "a", true)
		var room *pool.RoomError
		if !errors.As(err, &room) || !room.Alone || room.Short[0].Device != vk.Name() || room.Short[0].Need != none {
			t.Fatalf("%v", err)
		}
		in, _ := p.Model("a")
		if in.Fit == nil || in.Fit.Plan.GPULayers != 0 {
			t.Fatalf("-fit: %+v", in.Fit)
		}
		t.Log(err)
	})
}
