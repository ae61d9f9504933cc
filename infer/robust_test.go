package infer_test

import (
	"errors"
	"math"
	"slices"
	"sync"
	"testing"

	"github.com/ggload/ggload/infer"
	"github.com/ggload/ggload/loader"
)

// A context whose model was closed answers the model's ErrClosed, as
// infer.New of a closed model does, not what its freed weights would give.
func TestClosedModel(t *testing.T) {
	lm, c := open(t)
	defer c.Close()
	if err := c.Decode(infer.Batch{Tokens: []int32{1, 2}}); err != nil {
		t.Fatal(err)
	}
	if err := lm.Close(); err != nil {
		t.Fatal(err)
	}
	if err := c.Decode(infer.Batch{Tokens: []int32{3}}); !errors.Is(err, loader.ErrClosed) {
		t.Errorf("decode on a closed model: %v", err)
	}
	if err := c.Encode(infer.Batch{Tokens: []int32{3}}); !errors.Is(err, loader.ErrClosed) {
		t.Errorf("encode on a closed model: %v", err)
	}
	if _, err := infer.New(lm, infer.Params{}); !errors.Is(err, loader.ErrClosed) {
		t.Errorf("New on a closed model: %v", err)
	}
	if err := c.SetLoRAs([]*loader.LoRA{nil}, []float32{1}); !errors.Is(err, loader.ErrClosed) {
		t.Errorf("SetLoRAs on a closed model: %v", err)
	}
	// the outputs of the last decode stay
	if _, err := c.Logits(-1); err != nil {
		t.Errorf("logits of the last decode: %v", err)
	}
}

func TestArgmax(t *testing.T) {
	nan := float32(math.NaN())
	for _, c := range []struct {
		in   []float32
		want int
	}{{nil, -1}, {[]float32{}, -1}, {[]float32{nan, 1, 3, 3}, 2}, {[]float32{nan, nan}, 0}, {[]float32{-1}, 0}} {
		if got := infer.Argmax(c.in); got != c.want {
			t.Errorf("Argmax(%v) = %d, want %d", c.in, got, c.want)
		}
	}
}

// AppendLogits gives Logits' rows, appended to the caller's memory.
func TestAppendLogits(t *testing.T) {
	_, c := open(t)
	defer c.Close()
	if err := c.Decode(infer.Batch{Tokens: []int32{1, 2, 3}, Logits: []bool{true, false, true}}); err != nil {
		t.Fatal(err)
	}
	var row []float32
	for _, i := range []int{0, 2, -1, -2} {
		want, err := c.Logits(i)
		if err != nil {
			t.Fatal(err)
		}
		row, err = c.AppendLogits(row[:0], i)
		if err != nil || !slices.Equal(row, want) || len(row) != c.NVocab() {
			t.Errorf("token %d: AppendLogits %v, %d values, Logits %d", i, err, len(row), len(want))
		}
	}
	prefix := []float32{7}
	got, err := c.AppendLogits(prefix, 0)
	if err != nil || len(got) != 1+c.NVocab() || got[0] != 7 {
		t.Errorf("appended after a prefix: %v, %d values", err, len(got))
	}
	if _, err := c.AppendLogits(nil, 1); err == nil {
		t.Error("token 1 did not output, and has logits")
	}
}

// Every method of a Context from many goroutines at once, closed while
// they run (go test -race): each call ends with its answer or an error.
func TestConcurrentEveryMethod(t *testing.T) {
	_, c := open(t)
	var wg sync.WaitGroup
	calls := []func(g, i int){
		func(g, i int) {
			c.Decode(infer.Batch{Tokens: []int32{int32(1 + i)}, SeqIDs: [][]int32{{int32(g % 2)}}})
		},
		func(g, i int) { c.Encode(infer.Batch{Tokens: []int32{1}}) },
		func(g, i int) { c.Logits(-1) },
		func(g, i int) { c.AppendLogits(nil, 0) },
		func(g, i int) { _ = c.NVocab() },
		func(g, i int) { _ = c.Timings() },
		func(g, i int) { _ = c.Allocations() },
		func(g, i int) { c.Embeddings(0) },
		func(g, i int) { c.EmbeddingsIth(0) },
		func(g, i int) { c.SeqRm(int32(g%2), 3, -1) },
		func(g, i int) { c.SeqCp(0, 1, -1, -1) },
		func(g, i int) { c.SeqAdd(1, 0, -1, 1) },
		func(g, i int) { c.SeqDiv(1, 0, -1, 2) },
		func(g, i int) { _ = c.CanShift() },
		func(g, i int) { c.SeqKeep(int32(g % 2)) },
		func(g, i int) { _ = c.SeqPosMax(int32(g % 2)) },
		func(g, i int) { c.LoRAs() },
		func(g, i int) { c.SetLoRAs(nil, nil) },
		func(g, i int) { c.SetControlVector(nil, -1, -1) },
		func(g, i int) {
			if i == 5 {
				c.Clear()
			}
		},
	}
	for g := range 6 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range 12 {
				calls[(g*7+i)%len(calls)](g, i)
				calls[i%len(calls)](g, i)
			}
		}()
	}
	wg.Add(1)
	go func() {
		defer wg.Done()
		for range 20 {
			c.Decode(infer.Batch{Tokens: []int32{2}})
		}
		c.Close()
	}()
	wg.Wait()
	if err := c.Decode(infer.Batch{Tokens: []int32{1}}); !errors.Is(err, infer.ErrClosed) {
		t.Errorf("decode after Close: %v", err)
	}
	if c.NVocab() != 0 || c.Allocations() != nil {
		t.Error("a closed context still answers")
	}
}
