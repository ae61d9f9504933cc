package serve_test

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"testing"

	"github.com/ggload/ggload/infer"
	"github.com/ggload/ggload/lab/llama"
	"github.com/ggload/ggload/lab/testenv"
	"github.com/ggload/ggload/place"
	"github.com/ggload/ggload/sample"
	"github.com/ggload/ggload/serve"
)

// Requests at once share each step's batch (prompt chunks and generated
// tokens of every slot): the batches the engine decoded, decoded again
// by libllama in the same order on a context of the same options, give
// each request's greedy tokens. The batches held several sequences, and a prompt beside a
// generation (continuous batching).
func TestContinuousBatchingIsLlamas(t *testing.T) {
	path := textModel(t, "llama", "llama-spm", 2)
	cp := place.ContextParams{NCtx: 1024, NParallel: 4, KVUnified: true, NBatch: 64}
	e := newEngine(t, path, 1024, serve.Params{NoCacheRAM: true}, func(c *place.ContextParams) { *c = cp })
	var mu sync.Mutex
	var batches []infer.Batch
	e.SetDecodeHook(func(b infer.Batch) error {
		mu.Lock()
		batches = append(batches, b)
		mu.Unlock()
		return nil
	})
	n := 4
	if all() {
		n = 8
	}
	prompts := make([][]int32, n)
	results := make([]*serve.Result, n)
	var wg sync.WaitGroup
	for i := range prompts {
		// prompts of different lengths, one longer than n_batch
		text := fmt.Sprintf("Request number %d asks", i)
		for range i * 12 {
			text += " more"
		}
		prompts[i] = tokens(t, e, text)
		wg.Add(1)
		go func() {
			defer wg.Done()
			o := opts(e, 6+i%3, func(p *sample.Params) { p.Temp = 0 })
			var err error
			if results[i], err = e.Complete(context.Background(), prompts[i], o, nil); err != nil {
				t.Error(err)
			}
		}()
	}
	wg.Wait()
	if t.Failed() {
		return
	}
	rt := testenv.Runtime(t)
	l, err := llama.Open(rt)
	if err != nil {
		testenv.Missing(t, "llama", "%v", err)
	}
	lm, lc, err := l.OpenContext(rt, path, place.Params{DeviceNames: []string{"none"}, Context: cp}, threads)
	if err != nil {
		t.Fatal(err)
	}
	defer lm.Free()
	defer lc.Free()
	nVocab, err := lm.NVocab()
	if err != nil {
		t.Fatal(err)
	}
	// each run of a sequence: its prompt (what its memory held, then the
	// tokens it decoded before its first output) and the tokens a greedy
	// sampler gives of its outputs' logits, as libllama computes them
	type seqRun struct{ prompt, gen []int32 }
	greedy := e.Defaults().Sampling
	greedy.Temp = 0
	smpl, err := sample.New(e.Vocab(), greedy)
	if err != nil {
		t.Fatal(err)
	}
	held := map[int32][]int32{} // each sequence's tokens in libllama's memory, by position
	runs := map[int32]*seqRun{}
	var order []*seqRun
	mixed, several := false, false
	for _, b := range batches {
		seqs := map[int32]bool{}
		prompt, gen := false, false
		for i, ids := range b.SeqIDs {
			s, p := ids[0], b.Pos[i]
			seqs[s] = true
			r := runs[s]
			if int(p) < len(held[s]) {
				// a new prompt in the slot: the engine removed what
				// follows the prefix it kept, and so does libllama
				if err := lc.SeqRm(s, p, -1); err != nil {
					t.Fatal(err)
				}
				held[s] = held[s][:p]
				r = nil
			}
			if r == nil || len(r.gen) > 0 && int(p) < len(held[s]) {
				r = &seqRun{prompt: slices.Clone(held[s])}
				runs[s] = r
				order = append(order, r)
			}
			held[s] = append(held[s], b.Tokens[i])
			if len(r.gen) == 0 {
				r.prompt = append(r.prompt, b.Tokens[i])
				prompt = true
			} else {
				gen = true
			}
		}
		if err := lc.Decode(b.Tokens, b.Pos, b.SeqIDs, b.Logits); err != nil {
			t.Fatal(err)
		}
		for i, ids := range b.SeqIDs {
			if b.Logits[i] {
				lg, err := lc.Logits(i, nVocab)
				if err != nil {
					t.Fatal(err)
				}
				id, err := smpl.Sample(lg) // (greedy: the sampler keeps no state)
				if err != nil {
					t.Fatal(err)
				}
				runs[ids[0]].gen = append(runs[ids[0]].gen, id)
			}
		}
		several = several || len(seqs) > 1
		mixed = mixed || (prompt && gen)
	}
	for i, p := range prompts {
		k := slices.IndexFunc(order, func(r *seqRun) bool { return slices.Equal(r.prompt, p) })
		if k < 0 {
			t.Fatalf("request %d's prompt was decoded by no batch", i)
		}
		want := order[k].gen[:min(len(order[k].gen), len(results[i].Tokens))]
		if !slices.Equal(results[i].Tokens, want) {
			t.Errorf("request %d: %v, libllama on the same batches %v", i, results[i].Tokens, want)
		}
	}
	if !several || !mixed {
		t.Errorf("the batches held several sequences: %v, a prompt beside a generation: %v (%d batches)", several, mixed, len(batches))
	}
}

// Many requests at once, under the race detector: each ends with its
// tokens, and the slots idle after.
func TestConcurrentRequests(t *testing.T) {
	path := textModel(t, "llama", "llama-spm", 2)
	e := newEngine(t, path, 1024, serve.Params{})
	n := 12
	var wg sync.WaitGroup
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			o := opts(e, 3+i%4, func(p *sample.Params) { p.Seed = uint32(i) })
			o.Stream = i%2 == 0
			events := 0
			r, err := e.Complete(context.Background(), tokens(t, e, fmt.Sprintf("client %d says", i%5)), o, func(serve.Event) error { events++; return nil })
			if err != nil {
				t.Error(err)
				return
			}
			if r.NDecoded == 0 || (o.Stream && events == 0) {
				t.Errorf("request %d: %d tokens, %d events", i, r.NDecoded, events)
			}
		}()
	}
	wg.Wait()
	waitIdle(t, e)
}
