package tests

import (
	"path/filepath"
	"strings"
	"testing"

	"github.com/ggload/ggload/ggml"
	"github.com/ggload/ggload/gguf"
	"github.com/ggload/ggload/infer"
	"github.com/ggload/ggload/lab/synth"
	"github.com/ggload/ggload/lab/testenv"
	"github.com/ggload/ggload/place"
)

// archVariant synthesizes architecture name with the keys o sets and
// drops beside its own (a variant a converter writes for a checkpoint of
// that kind), filled with pseudo-random weights; its path.
func archVariant(t *testing.T, rt *ggml.Runtime, name string, o synth.ArchOptions) string {
	t.Helper()
	vf, err := gguf.Open(filepath.Join(testenv.SourceTree(t), "models", "ggml-vocab-"+synth.VocabName(name)+".gguf"))
	if err != nil {
		t.Fatal(err)
	}
	defer vf.Close()
	// (checked by llama.cpp's loading code alone: the graphs of these build)
	m, err := synth.NewArchModel(name, vf, o)
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	raw, filled := filepath.Join(dir, name+"-raw.gguf"), filepath.Join(dir, name+".gguf")
	if err := m.WriteFile(raw); err != nil {
		t.Fatal(err)
	}
	if err := synth.FillFile(rt, raw, filled, 1); err != nil {
		t.Fatal(err)
	}
	return filled
}

// The memories no synthesized architecture's defaults make, and long
// prompts over the indexed hybrid of Qwen4-Exp, against libllama, logits
// bit for bit:
//   - LFM2 with a sliding window keeps the hybrid of an iSWA pair of
//     caches and a recurrent state (llama_memory_hybrid_iswa): a prompt
//     of several ubatches past the window, greedy steps, on the CPU and
//     Vulkan0, and two sequences in a stream each;
//   - Qwen4-Exp's block-sparse attention pools blocks of 4 tokens and
//     keeps 16 of them plus the tail: prompts of 40 tokens in ubatches of
//     16, with flash attention on and off (its per-block bias, or its
//     per-cell one), on Vulkan0 a shorter one, and two sequences in one
//     stream (blocks of one sequence set each) and in a stream each;
//   - Qwen4-Exp without n-gram embeddings, as its converter writes a
//     checkpoint without them.
func TestDecodeVariants(t *testing.T) {
	rt := testenv.Runtime(t)
	l := openLlama(t, rt)
	lfm2SWA := archVariant(t, rt, "lfm2", synth.ArchOptions{Keys: []gguf.KV{{Key: "%s.attention.sliding_window", Value: gguf.Uint32(8)}}})
	qwen4 := filledArchs(t, rt, "qwen4exp")["qwen4exp"]
	noPLE := archVariant(t, rt, "qwen4exp", synth.ArchOptions{Drop: []string{"%s.ple.layers", "%s.ple.ngram_size", "%s.ple.heads_per_ngram",
		"%s.ple.conv_kernel", "%s.ple.eos_token_id", "%s.embedding_length_per_layer_input", "%s.ple.layer_multipliers",
		"%s.ple.head_offsets", "%s.ple.head_vocab_sizes"}})
	cpu := func(p *place.Params) { p.DeviceNames = []string{"none"} }
	ub := func(n int) func(p *place.Params) { return func(p *place.Params) { p.Context.NUBatch = n } }
	fa := func(on bool) func(p *place.Params) {
		return func(p *place.Params) {
			p.Context.FlashAttn = place.FlashAttnOff
			if on {
				p.Context.FlashAttn = place.FlashAttnOn
			}
		}
	}
	greedy := []struct {
		name, path    string
		set           []func(p *place.Params)
		prompt, steps int
		vulkan        bool
	}{
		{"lfm2-swa-cpu-ub8", lfm2SWA, []func(*place.Params){cpu, ub(8)}, 24, 3, false},
		{"lfm2-swa-vulkan-ub8", lfm2SWA, []func(*place.Params){ub(8)}, 24, 2, true},
		{"qwen4exp-cpu-ub16-fa-on", qwen4, []func(*place.Params){cpu, ub(16), fa(true)}, 40, 3, false},
		{"qwen4exp-cpu-ub16-fa-off", qwen4, []func(*place.Params){cpu, ub(16), fa(false)}, 40, 3, false},
		// (on lavapipe, a ubatch of 16 tokens or more takes llama.cpp's
		// process down, as it takes ggload's, inside the driver)
		{"qwen4exp-vulkan-ub4", qwen4, []func(*place.Params){ub(4)}, 12, 2, true},
		{"qwen4exp-no-ple-cpu-ub8", noPLE, []func(*place.Params){cpu, ub(8)}, 24, 3, false},
	}
	for _, c := range greedy {
		t.Run(c.name, func(t *testing.T) {
			gpu := ""
			if c.vulkan {
				gpu = testenv.Vulkan(t).Name()
			}
			dc := decodeCase{c.name, func(p *place.Params, gpu string) {
				if gpu != "" {
					p.DeviceNames = []string{gpu}
				}
				for _, f := range c.set {
					f(p)
				}
			}, c.prompt, c.steps}
			if status, detail := greedyRun(rt, l, c.path, dc, gpu, nil); status != "match" {
				t.Fatalf("%s: %s", status, detail)
			}
		})
	}
	np2 := func(unified bool) place.Params {
		return place.Params{DeviceNames: []string{"none"}, Context: place.ContextParams{NParallel: 2, KVUnified: unified, NCtx: 512}}
	}
	for _, c := range []struct {
		name, path string
		params     place.Params
		move       bool
	}{
		// (LFM2's attention layers all slide: its base cache has none,
		// and llama.cpp aborts shifting it; see below)
		{"lfm2-swa-cpu-np2", lfm2SWA, np2(false), false},
		{"qwen4exp-cpu-np2-kvu", qwen4, np2(true), true},
		{"qwen4exp-no-ple-cpu-np2", noPLE, np2(false), true},
	} {
		t.Run(c.name, func(t *testing.T) { sequencesMoving(t, rt, l, c.path, c.params, c.move) })
	}
	// a move of LFM2's positions: llama.cpp shifts its empty base cache
	// too, whose K-shift graph leaves the shift input out, and aborts
	// setting it (GGML_ASSERT(buffer)); ggload refuses the decode after
	// the move, saying so
	t.Run("lfm2-swa-k-shift-refused", func(t *testing.T) {
		ours, _, nVocab := bothContexts(t, rt, l, lfm2SWA, np2(false))
		if err := ours.Decode(infer.Batch{Tokens: []int32{1, 2, 3}}); err != nil {
			t.Fatal(err)
		}
		if !ours.CanShift() {
			t.Fatal("LFM2's memory says it cannot shift; llama.cpp's says it can")
		}
		if err := ours.SeqAdd(0, -1, -1, 2); err != nil {
			t.Fatal(err)
		}
		err := ours.Decode(infer.Batch{Tokens: []int32{int32(4 % nVocab)}})
		if err == nil || !strings.Contains(err.Error(), "K-shift") || !strings.Contains(err.Error(), "GGML_ASSERT(buffer)") {
			t.Fatalf("the decode after the move: %v, want the K-shift refused", err)
		}
	})
}
