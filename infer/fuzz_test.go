package infer_test

import (
	"encoding/binary"
	"testing"

	"github.com/ggload/ggload/infer"
)

// fuzzBatch reads a batch from fuzz bytes: a count, then per token its id
// (two bytes, past the vocabulary too), a position (or none), its
// sequences (none to three, any id) and its output flag.
func fuzzBatch(data []byte) (infer.Batch, bool) {
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
	return b, flags&16 != 0
}

// The batch checks (llama_batch_allocr::init's, before any native call)
// take any batch: an error or a batch that decodes, never a panic or a
// native abort. Some of the batches they pass are decoded.
func FuzzBatchChecks(f *testing.F) {
	_, c := open(f)
	f.Cleanup(func() { c.Close() })
	f.Add([]byte{3, 0, 1, 0, 2, 0, 3, 0})
	f.Add([]byte{2, 1 | 2 | 4 | 16, 1, 0, 0, 1, 0, 1, 2, 0, 1, 1, 1, 1})
	f.Add([]byte{4, 2 | 16, 5, 0, 2, 0, 1, 9, 0, 1, 1, 7, 0, 3, 1, 0, 1, 200, 0, 0})
	f.Add([]byte{2, 1 | 8, 1, 0, 5, 2, 0, 6})
	f.Fuzz(func(t *testing.T, data []byte) {
		b, decode := fuzzBatch(data)
		err := c.Prepare(b)
		if err == nil && decode {
			if err := c.Decode(b); err != nil {
				t.Logf("decode of a batch the checks passed: %v", err)
			}
			c.Clear()
		}
	})
}
