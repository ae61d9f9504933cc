package infer_test

import (
	"context"
	"errors"
	"math"
	"sync"
	"testing"

	"github.com/ggload/ggload/ggml"
	"github.com/ggload/ggload/gguf"
	"github.com/ggload/ggload/infer"
	"github.com/ggload/ggload/lab/testenv"
	"github.com/ggload/ggload/loader"
	"github.com/ggload/ggload/place"
)

func TestMain(m *testing.M) { testenv.Main(m) }

// open loads the loader's tiny model on the CPU and makes a context.
func open(t testing.TB) (*loader.Model, *infer.Context) {
	t.Helper()
	rt := testenv.Runtime(t)
	m, err := gguf.OpenModel("../loader/testdata/tiny-llama.gguf")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { m.Close() })
	plan, err := place.New(context.Background(), rt, m, place.Params{DeviceNames: []string{"none"}, Context: place.ContextParams{NCtx: 256, NParallel: 2}})
	if err != nil {
		t.Fatal(err)
	}
	lm, err := loader.Load(context.Background(), plan, loader.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { lm.Close() })
	c, err := infer.New(lm, infer.Params{Threads: 2})
	if err != nil {
		t.Fatal(err)
	}
	return lm, c
}

// A context is used from several goroutines at once and closed while
// they run: every call ends with its answer or ErrClosed, nothing else.
func TestConcurrentUseAndClose(t *testing.T) {
	_, c := open(t)
	var wg sync.WaitGroup
	errs := make(chan error, 64)
	for g := range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			seq := int32(g % 2)
			for i := range 6 {
				err := c.Decode(infer.Batch{Tokens: []int32{int32(1 + i + g)}, SeqIDs: [][]int32{{seq}}})
				if err == nil {
					_, err = c.Logits(-1)
				}
				if err != nil && !errors.Is(err, infer.ErrClosed) {
					errs <- err
				}
			}
		}()
	}
	wg.Add(1)
	go func() {
		defer wg.Done()
		if err := c.Close(); err != nil {
			errs <- err
		}
	}()
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	if err := c.Decode(infer.Batch{Tokens: []int32{1}}); !errors.Is(err, infer.ErrClosed) {
		t.Errorf("decode after Close: %v", err)
	}
	if _, err := c.Logits(-1); !errors.Is(err, infer.ErrClosed) {
		t.Errorf("logits after Close: %v", err)
	}
	if err := c.Close(); err != nil {
		t.Errorf("a second Close: %v", err)
	}
}

// What a context refuses, before any native call, naming the reason.
func TestRefusals(t *testing.T) {
	_, c := open(t)
	defer c.Close()
	for _, b := range []infer.Batch{
		{},
		{Tokens: []int32{1, 1 << 20}},
		{Tokens: []int32{1}, SeqIDs: [][]int32{{5}}},
		{Tokens: []int32{1, 2}, Pos: []int32{0}},
		{Tokens: []int32{1}, SeqIDs: [][]int32{{}}},
	} {
		if err := c.Decode(b); err == nil {
			t.Errorf("decode of %+v: no error", b)
		}
	}
	if err := c.Decode(infer.Batch{Tokens: []int32{1, 2, 3}}); err != nil {
		t.Fatal(err)
	}
	// positions go on from the cache's: 3, not 7
	if err := c.Decode(infer.Batch{Tokens: []int32{4}, Pos: []int32{7}}); err == nil {
		t.Error("a gap in sequence 0's positions was taken")
	}
	if _, err := c.Logits(1); err == nil {
		t.Error("logits of a token that did not output")
	}
	if _, err := c.Embeddings(0); err == nil {
		t.Error("embeddings without --embeddings")
	}
	if err := c.SeqRm(9, -1, -1); err == nil {
		t.Error("seq_rm of a sequence past n_seq_max")
	}
}

// decodeAt loads the tiny model on the CPU with a context of cp and
// decodes prompt then one token with `threads` CPU threads; the step's
// logits.
func decodeAt(t *testing.T, cp place.ContextParams, threads int, prompt []int32) []float32 {
	t.Helper()
	rt := testenv.Runtime(t)
	m, err := gguf.OpenModel("../loader/testdata/tiny-llama.gguf")
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	plan, err := place.New(context.Background(), rt, m, place.Params{DeviceNames: []string{"none"}, Context: cp})
	if err != nil {
		t.Fatal(err)
	}
	lm, err := loader.Load(context.Background(), plan, loader.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer lm.Close()
	c, err := infer.New(lm, infer.Params{Threads: threads})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if err := c.Decode(infer.Batch{Tokens: prompt}); err != nil {
		t.Fatal(err)
	}
	if err := c.Decode(infer.Batch{Tokens: []int32{7}}); err != nil {
		t.Fatal(err)
	}
	lg, err := c.Logits(-1)
	if err != nil {
		t.Fatal(err)
	}
	return lg
}

// The pin's CPU kernels give the same bits whatever the thread count,
// which lets a default context take fewer threads on a busy machine, but
// for flash attention of one token over 512 keys and more, whose chunks
// of keys are one per thread: there the counts differ (the graphs a
// default context keeps at the full count, ops.Lib.ThreadsChangeResults).
func TestThreadCountAndResults(t *testing.T) {
	prompt := make([]int32, 600)
	for i := range prompt {
		prompt[i] = int32(1 + i*37%250)
	}
	same := func(a, b []float32) bool {
		for i := range a {
			if math.Float32bits(a[i]) != math.Float32bits(b[i]) {
				return false
			}
		}
		return len(a) == len(b)
	}
	off := place.ContextParams{NCtx: 1024, FlashAttn: place.FlashAttnOff}
	one := decodeAt(t, off, 1, prompt)
	for _, n := range []int{2, 3} {
		if got := decodeAt(t, off, n, prompt); !same(one, got) {
			t.Errorf("without flash attention, %d threads give other logits than 1", n)
		}
	}
	on := place.ContextParams{NCtx: 1024, FlashAttn: place.FlashAttnOn}
	if a, b := decodeAt(t, on, 1, prompt), decodeAt(t, on, 2, prompt); same(a, b) {
		t.Errorf("flash attention of one token over %d keys: 1 and 2 threads give the same logits; the count changes no result and the full count need not be kept", len(prompt))
	}
	// the default's count gives the full count's bits
	if a, b := decodeAt(t, on, 0, prompt), decodeAt(t, on, ggml.MathThreads(), prompt); !same(a, b) {
		t.Errorf("the default thread count gives other logits than the %d physical cores", ggml.MathThreads())
	}
}

// Params out of range are refused, naming the field; NoPoll (threads
// that sleep between graphs) decodes as the default does.
func TestParamsRanges(t *testing.T) {
	lm, c := open(t)
	defer c.Close()
	for _, p := range []infer.Params{{Threads: -1}, {Threads: 1025}, {Poll: 101}, {Poll: -2}} {
		if ctx, err := infer.New(lm, p); err == nil {
			ctx.Close()
			t.Errorf("%+v: accepted", p)
		}
	}
	ctx, err := infer.New(lm, infer.Params{Poll: infer.NoPoll, Threads: 2})
	if err != nil {
		t.Fatal(err)
	}
	defer ctx.Close()
	for _, x := range []*infer.Context{c, ctx} {
		if err := x.Decode(infer.Batch{Tokens: []int32{1, 2, 3}}); err != nil {
			t.Fatal(err)
		}
	}
	a, _ := c.Logits(-1)
	b, _ := ctx.Logits(-1)
	for i := range a {
		if math.Float32bits(a[i]) != math.Float32bits(b[i]) {
			t.Fatalf("logit %d: %g polling, %g not", i, a[i], b[i])
		}
	}
}
