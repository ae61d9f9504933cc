package infer_test

import (
	"encoding/binary"
	"testing"

	"github.com/ggload/ggload/infer"
)

// fuzzBatch reads a batch from fuzz bytes: a count, then per token its id
// (two bytes, past the vocabulary too), a position (or none), its
// sequences (none to three, any id) and its output flag; or in place of
// the ids (or beside them), input embeddings of about width values.
func fuzzBatch(data []byte, width int) (infer.Batch, bool) {
	if len(data) < 2 {
		return infer.Batch{}, false
	}
	n, flags := int(data[0]%12), data[1]
	data = data[2:]
	var b infer.Batch
	next := func() byte {
		if len(data) == 0 {
			return 0
		}
		c := data[0]
		data = data[1:]
		return c
	}
	for range n {
		b.Tokens = append(b.Tokens, int32(binary.LittleEndian.Uint16([]byte{next(), next()}))-8)
		if flags&1 != 0 {
			b.Pos = append(b.Pos, int32(int8(next())))
		}
		if flags&2 != 0 {
			k := int(next() % 4)
			ids := []int32{}
			for range k {
				ids = append(ids, int32(int8(next())))
			}
			b.SeqIDs = append(b.SeqIDs, ids)
		}
		if flags&4 != 0 {
			b.Logits = append(b.Logits, next()&1 != 0)
		}
	}
	if flags&8 != 0 && len(b.Pos) > 0 {
		b.Pos = b.Pos[1:] // lengths that disagree
	}
	if flags&32 != 0 {
		for range n {
			b.Embd = append(b.Embd, make([]float32, width-1+int(next()%3)))
		}
		if flags&64 == 0 {
			b.Tokens = nil
		}
	}
	return b, flags&16 != 0
}

// The batch checks (llama_batch_allocr::init's, before any native call)
// take any batch: an error or a batch, never a panic.
func FuzzBatchChecks(f *testing.F) { fuzzBatches(f, false) }

// A batch the checks pass decodes: no panic, no native abort (an error
// is said, not failed: the memory can be full).
func FuzzBatchDecode(f *testing.F) { fuzzBatches(f, true) }

func fuzzBatches(f *testing.F, decodes bool) {
	lm, c := open(f)
	f.Cleanup(func() { c.Close() })
	width := 0 // n_embd: the token embedding's rows are as wide
	for _, t := range lm.Plan.Tensors {
		if t.Name == "token_embd.weight" {
			width = int(t.Shape[0])
		}
	}
	f.Add([]byte{3, 0, 1, 0, 2, 0, 3, 0})
	f.Add([]byte{2, 1 | 2 | 4 | 16, 1, 0, 0, 1, 0, 1, 2, 0, 1, 1, 1, 1})
	f.Add([]byte{4, 2 | 16, 5, 0, 2, 0, 1, 9, 0, 1, 1, 7, 0, 3, 1, 0, 1, 200, 0, 0})
	f.Add([]byte{2, 1 | 8, 1, 0, 5, 2, 0, 6})
	f.Add([]byte{2, 32 | 16, 1, 0, 1, 2, 0, 1})
	f.Add([]byte{1, 32 | 64, 1, 0, 0})
	f.Fuzz(func(t *testing.T, data []byte) {
		b, decode := fuzzBatch(data, width)
		err := c.Prepare(b)
		if err == nil && decode && decodes {
			if err := c.Decode(b); err != nil {
				t.Logf("decode of a batch the checks passed: %v", err)
			}
			c.Clear()
		}
	})
}
