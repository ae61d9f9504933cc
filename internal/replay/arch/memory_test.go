package arch_test

import (
	"testing"

	"github.com/ggload/ggload/ggml"
	"github.com/ggload/ggload/gguf"
	"github.com/ggload/ggload/internal/replay/arch"
	"github.com/ggload/ggload/lab/synth"
)

// LFM2 with a sliding window keeps the hybrid of an iSWA cache and a
// recurrent state (llama_memory_hybrid_iswa): its attention layers in
// the sliding window's cache, its convolution layers in the recurrent
// state, each layer in one of them.
func TestHybridISWAMemory(t *testing.T) {
	m := archModel(t, "lfm2", synth.ConverterTypes)
	for _, swa := range []uint32{0, 64} {
		if swa > 0 {
			setKV(m, "lfm2.attention.sliding_window", gguf.Uint32(swa))
		}
		gm, err := m.Model(false)
		if err != nil {
			t.Fatal(err)
		}
		r, err := arch.Load(gm, arch.Options{})
		if err != nil {
			t.Fatal(err)
		}
		if err := r.CreateTensors(&countPlacer{}); err != nil {
			t.Fatal(err)
		}
		cx, err := r.InitContext(arch.ContextParams{NBatch: 2048, NUBatch: 512, NSeqMax: 1, FlashAttn: 1, TypeK: ggml.TypeF16, TypeV: ggml.TypeF16, OffloadKQV: true}, nil)
		if err != nil {
			t.Fatal(err)
		}
		mem, err := r.CreateMemory(cx.Memory())
		if err != nil {
			t.Fatal(err)
		}
		want := map[uint32][]string{0: {"llama_kv_cache", "llama_memory_recurrent"}, 64: {"llama_kv_cache", "llama_kv_cache", "llama_memory_recurrent"}}[swa]
		wantClass := map[uint32]string{0: "llama_memory_hybrid", 64: "llama_memory_hybrid_iswa"}[swa]
		var classes []string
		for _, c := range mem.Caches {
			classes = append(classes, c.Class)
		}
		if mem.Class != wantClass || len(classes) != len(want) {
			t.Fatalf("sliding window %d: %s of %v, want %s of %v", swa, mem.Class, classes, wantClass, want)
		}
		for i := range want {
			if classes[i] != want[i] {
				t.Errorf("sliding window %d: caches %v, want %v", swa, classes, want)
			}
		}
		// every layer is in one cache: attention or recurrent
		owner := map[int]int{}
		for ci, c := range mem.Caches {
			for _, mt := range c.Tensors {
				if o, ok := owner[mt.Layer]; ok && o != ci {
					t.Errorf("sliding window %d: layer %d in caches %d and %d", swa, mt.Layer, o, ci)
				}
				owner[mt.Layer] = ci
			}
		}
		n, err := r.Hparams().Field("n_layer_all")
		if err != nil || len(owner) != int(n) {
			t.Errorf("sliding window %d: %d of %d layers kept (%v)", swa, len(owner), n, err)
		}
		if swa > 0 {
			for l, ci := range owner {
				if ci == 0 {
					t.Errorf("layer %d in the full cache: with a sliding window every attention layer slides", l)
				}
			}
		}
	}
}
