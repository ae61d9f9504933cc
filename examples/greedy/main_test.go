package main

import (
	"bytes"
	"fmt"
	"strings"
	"testing"

	"github.com/ggload/ggload/infer"
	"github.com/ggload/ggload/lab/llama"
	"github.com/ggload/ggload/lab/testenv"
	"github.com/ggload/ggload/place"
)

const tiny = "../../loader/testdata/tiny-llama.gguf"

// The example's greedy tokens are libllama's for the same model, options
// and prompt (the tiny model of the loader's tests, on the CPU).
func TestGreedy(t *testing.T) {
	rt := testenv.Runtime(t)
	params := place.Params{DeviceNames: []string{"none"}}
	var ours bytes.Buffer
	if err := greedy(&ours, tiny, []int32{1, 5, 9}, 6, params); err != nil {
		t.Fatal(err)
	}

	l, err := llama.Open(rt)
	if err != nil {
		testenv.Missing(t, "libllama", "%v (scripts/fetch-native.sh)", err)
	}
	lm, ctx, err := l.OpenContext(rt, tiny, params, 4)
	if err != nil {
		t.Fatal(err)
	}
	defer lm.Free()
	defer ctx.Free()
	nVocab, err := lm.NVocab()
	if err != nil {
		t.Fatal(err)
	}
	var theirs strings.Builder
	batch := []int32{1, 5, 9}
	for range 6 {
		if err := ctx.Decode(batch, nil, nil, nil); err != nil {
			t.Fatal(err)
		}
		lg, err := ctx.Logits(-1, nVocab)
		if err != nil {
			t.Fatal(err)
		}
		next := int32(infer.Argmax(lg))
		fmt.Fprintln(&theirs, next)
		batch = []int32{next}
	}
	if ours.String() != theirs.String() {
		t.Errorf("greedy tokens: ggload\n%s\nllama.cpp\n%s", ours.String(), theirs.String())
	}

	if err := greedy(&ours, "no-such.gguf", []int32{1}, 1, params); err == nil {
		t.Error("a missing file gave no error")
	}
	if err := greedy(&ours, tiny, []int32{1 << 30}, 1, params); err == nil || !strings.Contains(err.Error(), "invalid token") {
		t.Errorf("a token outside the vocabulary: %v", err)
	}
}
