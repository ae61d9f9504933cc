package arch_test

import (
	"errors"
	"fmt"
	"testing"

	"github.com/ggload/ggload/ggml"
	"github.com/ggload/ggload/internal/replay/arch"
	"github.com/ggload/ggload/lab/synth"
)

type countPlacer struct{ n, skipped int }

func (c *countPlacer) Place(cr *arch.Creation) error {
	c.n++
	if cr.Skip {
		c.skipped++
	}
	return nil
}

// llamaError reports whether err is one of llama.cpp's own errors (a
// throw, a failed assertion): what the pin itself would say.
func llamaError(err error) bool {
	var t *arch.Throw
	var a *arch.Abort
	return errors.As(err, &t) || errors.As(err, &a)
}

// Every program the pin runs for every architecture replays with
// constructs the evaluator knows: the hyperparameters, the tensors, the
// memory module under several contexts, the context's parameters and
// split mode tensor's split states. An error is allowed only where it is
// llama.cpp's own (a draft model's context without its target, a split
// state llama.cpp would assert on).
func TestEveryArchitectureReplays(t *testing.T) {
	vf, err := synth.Vocab(64)
	if err != nil {
		t.Fatal(err)
	}
	contexts := []struct {
		name string
		p    arch.ContextParams
	}{
		{"defaults", arch.ContextParams{NCtx: 0, NBatch: 2048, NUBatch: 512, NSeqMax: 1, FlashAttn: -1, TypeK: ggml.TypeF16, TypeV: ggml.TypeF16, OffloadKQV: true}},
		{"np4 unified swa-full fa-off", arch.ContextParams{NCtx: 1024, NBatch: 512, NUBatch: 256, NSeqMax: 4, FlashAttn: 0, TypeK: ggml.TypeF32, TypeV: ggml.TypeF32, KVUnified: true, SWAFull: true}},
		{"q8_0 fa-on tensor split", arch.ContextParams{NCtx: 512, NBatch: 2048, NUBatch: 512, NSeqMax: 2, FlashAttn: 1, TypeK: ggml.TypeQ8_0, TypeV: ggml.TypeQ8_0, OffloadKQV: true, SplitMode: 3, MetaDevices: 2}},
	}
	var replayed, memories, splits int
	for _, a := range arch.Architectures() {
		m, err := synth.NewArchModel(a, vf, synth.ArchOptions{})
		if err != nil {
			if !arch.Projector(a) {
				t.Errorf("%s: %v", a, err)
			}
			continue
		}
		gm, err := m.Model(false)
		if err != nil {
			t.Fatal(err)
		}
		r, err := arch.Load(gm, arch.Options{})
		if err != nil {
			t.Errorf("%s: load: %v", a, err)
			continue
		}
		var c countPlacer
		if err := r.CreateTensors(&c); err != nil {
			t.Errorf("%s: create tensors: %v", a, err)
			continue
		}
		if c.n < len(gm.Weights) {
			t.Errorf("%s: %d creations for %d tensors", a, c.n, len(gm.Weights))
		}
		replayed++
		for _, cx := range contexts {
			var lines int
			ctx, err := r.InitContext(cx.p, func(string, string) { lines++ })
			if err != nil {
				if !llamaError(err) || arch.IsEvalError(err) {
					t.Errorf("%s: %s: context: %v", a, cx.name, err)
				}
				continue
			}
			if ctx.NSeqMax != max(1, cx.p.NSeqMax) || ctx.NCtx%256 != 0 || ctx.NUBatch > ctx.NBatch || lines == 0 || ctx.OutputBytes == 0 {
				t.Errorf("%s: %s: context %+v after %d log lines", a, cx.name, ctx, lines)
			}
			mem, err := r.CreateMemory(ctx.Memory())
			if err != nil {
				if !llamaError(err) {
					t.Errorf("%s: %s: memory: %v", a, cx.name, err)
				}
				continue
			}
			memories++
			for _, cache := range mem.Caches {
				for _, mt := range cache.Tensors {
					if mt.Layer < -1 || mt.Ne[0] < 0 || !mt.Type.Valid() {
						t.Errorf("%s: %s: %s tensor %s: layer %d, %v %v", a, cx.name, cache.Class, mt.Name, mt.Layer, mt.Type, mt.Ne)
					}
				}
			}
		}
		ok, err := r.SupportsTensorSplit()
		if err != nil {
			t.Errorf("%s: supports split mode tensor: %v", a, err)
			continue
		}
		if !ok {
			continue
		}
		byName := map[string]arch.Tensor{}
		for _, w := range gm.Weights {
			byName[w.Name] = arch.Tensor{Name: w.Name, Type: int(w.Type), Ne: w.Shape}
		}
		for _, n := range []int{1, 3} {
			d := arch.SplitDevices{N: n, Split: [16]float32{3, 1, 2}, Lookup: func(name string) (arch.Tensor, bool) {
				x, ok := byName[name]
				return x, ok
			}}
			for _, w := range gm.Weights {
				st, err := r.SplitState(byName[w.Name], d)
				if err != nil {
					if !llamaError(err) {
						t.Errorf("%s: split state of %s over %d: %v", a, w.Name, n, err)
					}
					continue
				}
				splits++
				if st.Axis.IsDim() {
					var sum int64
					for _, sg := range st.Segments {
						for _, l := range sg.Lengths {
							sum += l * int64(sg.Repeat)
						}
					}
					if sum != w.Shape[st.Axis] {
						t.Errorf("%s: %s over %d: %v adds up to %d of %d", a, w.Name, n, st, sum, w.Shape[st.Axis])
					}
				}
			}
		}
	}
	if replayed < 140 {
		t.Errorf("only %d architectures replayed", replayed)
	}
	t.Log(fmt.Sprintf("%d architectures, %d memory modules, %d split states", replayed, memories, splits))
}

// The split states of every tensor of a 128-layer llama over two devices
// (split mode tensor's share of planning).
//
//	go test -run XXX -bench SplitStates ./internal/arch
func BenchmarkSplitStates(b *testing.B) {
	vf, err := synth.Vocab(64)
	if err != nil {
		b.Fatal(err)
	}
	m, err := synth.NewArchModel("llama", vf, synth.ArchOptions{Layers: 128})
	if err != nil {
		b.Fatal(err)
	}
	gm, err := m.Model(false)
	if err != nil {
		b.Fatal(err)
	}
	r, err := arch.Load(gm, arch.Options{})
	if err != nil {
		b.Fatal(err)
	}
	if err := r.CreateTensors(&countPlacer{}); err != nil {
		b.Fatal(err)
	}
	byName := map[string]arch.Tensor{}
	for _, w := range gm.Weights {
		byName[w.Name] = arch.Tensor{Name: w.Name, Type: int(w.Type), Ne: w.Shape}
	}
	d := arch.SplitDevices{N: 2, Lookup: func(n string) (arch.Tensor, bool) { x, ok := byName[n]; return x, ok }}
	b.ReportMetric(float64(len(gm.Weights)), "tensors")
	for b.Loop() {
		for _, w := range gm.Weights {
			if _, err := r.SplitState(byName[w.Name], d); err != nil {
				b.Fatal(err)
			}
		}
	}
}
