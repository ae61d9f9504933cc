package tests

import (
	"context"
	"math"
	"testing"

	"github.com/ggload/ggload/ggml"
	"github.com/ggload/ggload/infer"
	"github.com/ggload/ggload/lab/llama"
	"github.com/ggload/ggload/lab/synth"
	"github.com/ggload/ggload/lab/testenv"
	"github.com/ggload/ggload/loader"
	"github.com/ggload/ggload/place"
)

// decodeCase is one configuration of the forward pass's comparison with
// libllama: the plan's options, the prompt, the greedy steps.
type decodeCase struct {
	name   string
	params func(p *place.Params)
	prompt int // tokens
	steps  int
}

// greedy runs a prompt then steps greedy tokens on ggload's context and
// on libllama's, and compares every output's logits bit for bit.
func greedy(t *testing.T, rt *ggml.Runtime, l *llama.Lib, path string, c decodeCase) {
	t.Helper()
	params := place.Params{}
	if c.params != nil {
		c.params(&params)
	}
	m := testenv.OpenModel(t, path)
	plan, err := place.New(context.Background(), rt, m, params)
	if err != nil {
		t.Fatal(err)
	}
	mdl, err := loader.Load(context.Background(), plan, loader.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer mdl.Close()
	ours, err := infer.New(mdl, infer.Params{Threads: 2})
	if err != nil {
		t.Fatal(err)
	}
	defer ours.Close()

	ld, err := llama.LoadFor(rt, path, params)
	if err != nil {
		t.Fatal(err)
	}
	lm, _, err := l.LoadModel(ld)
	if err != nil {
		t.Fatal(err)
	}
	defer lm.Free()
	cp, err := l.ContextParamsFor(params.Context)
	if err != nil {
		t.Fatal(err)
	}
	theirs, _, err := lm.NewContext(cp)
	if err != nil {
		t.Fatal(err)
	}
	defer theirs.Free()
	if err := theirs.SetThreads(2, 2); err != nil {
		t.Fatal(err)
	}
	nVocab, err := lm.NVocab()
	if err != nil {
		t.Fatal(err)
	}
	tokens := make([]int32, c.prompt)
	for i := range tokens {
		tokens[i] = int32((i*7919 + 13) % nVocab)
	}
	for step := 0; step <= c.steps; step++ {
		if err := ours.Decode(infer.Batch{Tokens: tokens}); err != nil {
			t.Fatalf("step %d: %v", step, err)
		}
		if err := theirs.Decode(tokens, nil, nil, nil); err != nil {
			t.Fatalf("step %d: %v", step, err)
		}
		a, err := ours.Logits(-1)
		if err != nil {
			t.Fatal(err)
		}
		b, err := theirs.Logits(-1, nVocab)
		if err != nil {
			t.Fatal(err)
		}
		if len(a) != len(b) {
			t.Fatalf("step %d: %d logits, llama.cpp %d", step, len(a), len(b))
		}
		for i := range a {
			if math.Float32bits(a[i]) != math.Float32bits(b[i]) {
				t.Fatalf("step %d: logit %d: ggload %v, llama.cpp %v", step, i, a[i], b[i])
			}
		}
		next := int32(infer.Argmax(a))
		t.Logf("step %d: argmax %d (%v)", step, next, a[next])
		tokens = []int32{next}
	}
}

func TestDecodeLlama(t *testing.T) {
	rt := testenv.Runtime(t)
	l := openLlama(t, rt)
	path := testenv.ModelFile(t, rt, synth.Spec{Layers: 2, Embd: 256, FF: 512, Heads: 4, HeadsKV: 2, Vocab: 512, Distinct: true})
	cpu := func(p *place.Params) { p.DeviceNames = []string{"none"} }
	for _, c := range []decodeCase{
		{name: "defaults", prompt: 8, steps: 4},
		{name: "cpu", params: cpu, prompt: 8, steps: 4},
		{name: "ngl1", params: func(p *place.Params) { p.NGPULayers = place.NLayers(1) }, prompt: 8, steps: 3},
		{name: "cpu-fa-on", params: func(p *place.Params) { cpu(p); p.Context.FlashAttn = place.FlashAttnOn }, prompt: 8, steps: 3},
		{name: "fa-off", params: func(p *place.Params) { p.Context.FlashAttn = place.FlashAttnOff }, prompt: 8, steps: 3},
		{name: "cpu-fa-off", params: func(p *place.Params) { cpu(p); p.Context.FlashAttn = place.FlashAttnOff }, prompt: 8, steps: 3},
		{name: "q8-cache", params: func(p *place.Params) { p.Context.TypeK, p.Context.TypeV = place.CacheQ8_0, place.CacheQ8_0 }, prompt: 8, steps: 3},
		{name: "cpu-ub32", params: func(p *place.Params) { cpu(p); p.Context.NUBatch = 32; p.Context.NBatch = 64 }, prompt: 60, steps: 2},
		{name: "np2-kvu", params: func(p *place.Params) { p.Context.NParallel = 2; p.Context.KVUnified = true }, prompt: 8, steps: 2},
	} {
		t.Run(c.name, func(t *testing.T) { greedy(t, rt, l, path, c) })
	}
}
