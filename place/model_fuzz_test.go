package place_test

import (
	"bytes"
	"context"
	"math"
	"testing"

	"github.com/ggload/ggload/gguf"
	"github.com/ggload/ggload/lab/synth"
	"github.com/ggload/ggload/lab/testenv"
	"github.com/ggload/ggload/place"
)

// FuzzModelMetadata plans files whose metadata one key made hostile: a
// key of a small llama, MoE llama or gemma4 file set to another value,
// of its own type or another, to an array of any length, or taken away.
// Each plan, with its context, is made or refused in Go (no panic, no
// native assert), and a plan made places every weight once.
func FuzzModelMetadata(f *testing.F) {
	rt := testenv.Runtime(f)
	specs := []synth.Spec{
		{Layers: 2, Embd: 64, FF: 128, Heads: 2, Vocab: 64},
		{Layers: 2, Embd: 64, FF: 64, Heads: 2, Vocab: 64, Experts: 4, ExpertsUsed: 2},
		{Arch: "gemma4", Layers: 3, Embd: 64, FF: 128, Heads: 2, Vocab: 64, PerLayer: 32},
	}
	bases := make([]*gguf.File, len(specs))
	for i, s := range specs {
		w, err := s.Writer(rt)
		if err != nil {
			f.Fatal(err)
		}
		var buf bytes.Buffer
		if _, err := w.WriteTo(&buf); err != nil {
			f.Fatal(err)
		}
		if bases[i], err = gguf.NewReader(bytes.NewReader(buf.Bytes()), int64(buf.Len())); err != nil {
			f.Fatal(err)
		}
	}
	for i := range specs {
		for k := range 12 {
			f.Add(uint8(i), uint8(k), uint8(k%9), int64(0), 0.0, "", uint8(3))
		}
	}
	f.Add(uint8(0), uint8(5), uint8(0), int64(1<<31), math.Inf(1), "x", uint8(255))
	f.Fuzz(func(t *testing.T, model, key, kind uint8, ival int64, fval float64, sval string, n uint8) {
		base := bases[int(model)%len(bases)]
		w := gguf.NewWriter()
		w.Alignment = base.Alignment
		for _, kv := range base.KV {
			if err := w.Set(kv.Key, kv.Value); err != nil {
				t.Fatal(err)
			}
		}
		for _, ti := range base.Tensors {
			if err := w.AddTensorReader(ti.Name, ti.Type, ti.Shape[:max(ti.NDims, 1)], base.Data(ti)); err != nil {
				t.Fatal(err)
			}
		}
		k := base.KV[int(key)%len(base.KV)].Key
		var v gguf.Value
		var err error
		switch kind % 9 {
		case 0:
			v = gguf.Uint32(uint32(ival))
		case 1:
			v = gguf.Int32(int32(ival))
		case 2:
			v = gguf.Float32(float32(fval))
		case 3:
			v = gguf.String(sval)
		case 4:
			v = gguf.Bool(ival&1 != 0)
		case 5:
			xs := make([]int32, n)
			for i := range xs {
				xs[i] = int32(ival) + int32(i)
			}
			v, err = gguf.Array(xs)
		case 6:
			xs := make([]float32, n)
			for i := range xs {
				xs[i] = float32(fval) * float32(i)
			}
			v, err = gguf.Array(xs)
		case 7:
			v = gguf.Uint64(uint64(ival))
		case 8:
			w.Delete(k)
		}
		if err != nil {
			t.Fatal(err)
		}
		if kind%9 != 8 {
			if err := w.Set(k, v); err != nil {
				t.Fatal(err)
			}
		}
		var buf bytes.Buffer
		if _, err := w.WriteTo(&buf); err != nil {
			t.Fatal(err)
		}
		g, err := gguf.NewReader(bytes.NewReader(buf.Bytes()), int64(buf.Len()))
		if err != nil {
			return
		}
		m, err := gguf.NewModel(g)
		if err != nil {
			return
		}
		var p place.Params
		p.Context.NCtx = 256
		pl, err := place.New(context.Background(), rt, m, p)
		if err == nil {
			checkPlan(t, m, pl)
		} else if err.Error() == "" {
			t.Fatal("an error without a message")
		}
	})
}
