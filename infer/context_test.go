package infer_test

import (
	"context"
	"errors"
	"sync"
	"testing"

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
