package place_test

import (
	"context"
	"slices"
	"testing"

	"github.com/ggload/ggload/gguf"

	"github.com/ggload/ggload/lab/testenv"
	"github.com/ggload/ggload/place"
)

// fuzzKeys are the keys an -override-kv of FuzzParams may set: the llama
// model's hyperparameters.
var fuzzKeys = []string{"", "llama.block_count", "llama.context_length", "llama.embedding_length", "llama.attention.head_count", "llama.attention.head_count_kv", "llama.feed_forward_length", "llama.rope.dimension_count", "llama.vocab_size", "llama.attention.key_length", "llama.attention.value_length", "llama.expert_count", "llama.expert_used_count", "llama.attention.sliding_window", "llama.rope.scaling.original_context_length", "llama.attention.layer_norm_rms_epsilon"}

// FuzzParams plans a small llama model, with its context and by -fit,
// under any parameters a program may pass, hyperparameters overridden as
// --override-kv does: each plan is made or refused in Go, never by a
// native assert (which would end the process) nor a panic, and a plan
// made places every weight of the file once, on a device, each layer
// with its own.
func FuzzParams(f *testing.F) {
	rt := testenv.Runtime(f)
	m := writeModel(f, rt, small)
	devs := []string{"", "CPU", "Vulkan0", "none"}
	f.Add(int64(0), int64(0), int64(0), int64(0), uint8(0), uint8(0), uint8(0), uint16(0), int64(-1), uint8(0), int64(0), float32(0), float32(0), int64(0), int64(0), uint8(0), uint8(0), int64(0), uint8(0))
	f.Add(int64(1), int64(1), int64(1), int64(1), uint8(1), uint8(2), uint8(1), uint16(0xffff), int64(3), uint8(3), int64(0), float32(1), float32(2), int64(1), int64(2), uint8(2), uint8(1), int64(0), uint8(2))
	f.Fuzz(func(t *testing.T, nctx, nbatch, nubatch, npar int64, tk, tv, fa uint8, flags uint16, ngl int64, split uint8, mainGPU int64, ts1, ts2 float32, nout, ncpumoe int64, lm, key uint8, val int64, dev uint8) {
		var p place.Params
		p.Context.NCtx, p.Context.NBatch, p.Context.NUBatch, p.Context.NParallel = int(nctx), int(nbatch), int(nubatch), int(npar)
		p.Context.TypeK, p.Context.TypeV = place.CacheType(tk), place.CacheType(tv)
		p.Context.FlashAttn = place.FlashAttn(fa)
		p.Context.KVUnified = flags&1 != 0
		p.Context.NoKVOffload = flags&2 != 0
		p.Context.SWAFull = flags&4 != 0
		p.Context.NOutputsMax = int(nout)
		p.NoHost = flags&8 != 0
		p.NoExtraBufts = flags&16 != 0
		p.CPUMoE = flags&32 != 0
		p.NCPUMoE = int(ncpumoe)
		p.NGPULayers = place.NLayers(int(ngl))
		p.SplitMode = place.SplitMode(split)
		p.MainGPU = int(mainGPU)
		if flags&64 != 0 {
			p.TensorSplit = []float32{ts1}
		}
		if flags&128 != 0 {
			p.TensorSplit = []float32{ts1, ts2}
		}
		p.LoadMode = place.LoadMode(lm)
		if d := devs[int(dev)%len(devs)]; d != "" {
			p.DeviceNames = []string{d}
		}
		if k := fuzzKeys[int(key)%len(fuzzKeys)]; k != "" {
			p.KVOverrides = []place.KVOverride{{Key: k, Type: place.OverrideInt, Int: val}}
			if flags&256 != 0 {
				p.KVOverrides[0].Type = place.OverrideFloat
				p.KVOverrides[0].Float = float64(val) / 7
			}
		}
		pl, err := place.New(context.Background(), rt, m, p)
		if err == nil {
			checkPlan(t, m, pl)
		} else if err.Error() == "" {
			t.Fatal("an error without a message")
		}
		if flags&512 != 0 {
			if r, err := place.Fit(context.Background(), rt, m, p, place.FitOptions{}); err == nil && r.Plan != nil {
				checkPlan(t, m, r.Plan)
			}
		}
	})
}

// checkPlan fails t unless pl places every weight of m once, on a device
// and in a buffer type, and has a device for each layer and the output.
func checkPlan(t *testing.T, m *gguf.Model, pl *place.Plan) {
	t.Helper()
	if pl.LoadMode == place.LoadAuto || len(pl.LayerDevices) != pl.NLayer+1 || slices.Contains(pl.LayerDevices, nil) {
		t.Fatalf("load mode %v, %d layer devices for %d layers", pl.LoadMode, len(pl.LayerDevices), pl.NLayer)
	}
	placed := map[string]int{}
	for _, tp := range pl.Tensors {
		if tp.Duplicate {
			continue
		}
		placed[tp.Name]++
		if tp.Context >= 0 && (tp.Device == nil || tp.BufferType.Name() == "") || tp.Layer < -1 || tp.Layer > pl.NLayer {
			t.Fatalf("tensor %s: layer %d, context %d, device %v", tp.Name, tp.Layer, tp.Context, tp.Device)
		}
	}
	for _, w := range m.Weights {
		if placed[w.Name] != 1 {
			t.Fatalf("weight %s placed %d times", w.Name, placed[w.Name])
		}
	}
}
