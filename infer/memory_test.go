package infer

import (
	"math"
	"slices"
	"strings"
	"testing"

	"github.com/ggload/ggload/internal/replay/graph"
)

// The cells' bookkeeping, as llama_kv_cells and llama_kv_cache keep it:
// slots from the head, sequences removed and copied, a window's cells
// reused, the head moved back to a freed cell.
func TestKVCells(t *testing.T) {
	c := newKVCells(8, 0, 0)
	idxs := c.findSlot(3)
	if !slices.Equal(idxs, []uint32{0, 1, 2}) {
		t.Fatalf("first slot %v", idxs)
	}
	c.apply(idxs, []int32{0, 1, 2}, [][]int32{{0}, {0}, {0}}, nil, false)
	if c.head != 3 || c.used != 3 || c.usedMaxP1() != 3 || c.seqPosMax(0) != 2 || c.seqPosMin(0) != 0 {
		t.Fatalf("after 3 tokens: head %d used %d max %d", c.head, c.used, c.seqPosMax(0))
	}
	c.apply(c.findSlot(2), []int32{0, 1}, [][]int32{{1}, {1}}, nil, false)
	c.seqCp(1, 2, -1, -1)
	if !c.seq[3].has(2) || !c.seq[4].has(2) || c.seq[0].has(2) {
		t.Fatal("seq_cp: 1's cells are not 2's too")
	}
	c.seqRm(0, 1, -1) // sequence 0 from position 1 on
	if c.pos[1] != -1 || c.pos[2] != -1 || c.pos[0] != 0 || c.head != 1 || c.used != 3 {
		t.Fatalf("seq_rm: pos %v head %d used %d", c.pos, c.head, c.used)
	}
	c.seqKeep(2)
	if c.pos[0] != -1 || c.pos[3] != 0 || c.seq[3].has(1) || !c.seq[3].has(2) || c.used != 2 {
		t.Fatalf("seq_keep: pos %v used %d", c.pos, c.used)
	}
	if s := c.findSlot(9); s != nil {
		t.Fatalf("9 tokens in 8 cells: %v", s)
	}

	// a window of 2: a cell its sequence no longer sees is free again,
	// and the positions it held go, so that the sequence stays whole
	w := newKVCells(3, 2, 1)
	w.apply(w.findSlot(3), []int32{0, 1, 2}, [][]int32{{0}, {0}, {0}}, nil, false)
	idxs = w.findSlot(1)
	if !slices.Equal(idxs, []uint32{0}) {
		t.Fatalf("window slot %v", idxs)
	}
	w.apply(idxs, []int32{3}, [][]int32{{0}}, nil, false)
	if w.pos[0] != 3 || w.seqPosMin(0) != 1 || !w.maskedSWA(0, 2) || w.maskedSWA(1, 2) {
		t.Fatalf("window: pos %v", w.pos)
	}
}

// Batches split as llama_batch_allocr splits them.
func TestSplits(t *testing.T) {
	b := &graph.Ubatch{Tokens: []int32{10, 11, 12, 20, 21, 30}, Pos: []int32{0, 1, 2, 0, 1, 0},
		SeqIDs: [][]int32{{0}, {0}, {0}, {1}, {1}, {2}}, Output: make([]bool, 6)}
	if s := splitSimple(b, 4); len(s) != 2 || len(s[0].Tokens) != 4 || s[0].Equal || s[1].index[0] != 4 {
		t.Fatalf("split_simple: %d ubatches", len(s))
	}
	eq, err := splitEqual(b, 6, true, 0)
	if err != nil {
		t.Fatal(err)
	}
	// first one token of each of 0, 1, 2; then two of 0 and 1; then 0's last
	var shapes [][]int32
	for _, u := range eq {
		if !u.Equal {
			t.Fatal("an equal split's ubatch is not equal")
		}
		shapes = append(shapes, u.Tokens)
	}
	if want := [][]int32{{10, 20, 30}, {11, 21}, {12}}; !slices.EqualFunc(shapes, want, slices.Equal) {
		t.Fatalf("split_equal: %v, want %v", shapes, want)
	}
	seq := splitSeq(b, 2)
	if len(seq) != 4 || !slices.Equal(seq[0].Tokens, []int32{10, 11}) || !slices.Equal(seq[1].Tokens, []int32{12}) || seq[0].NSeqs != 1 {
		t.Fatalf("split_seq: %d ubatches", len(seq))
	}
	b.SeqIDs[1] = []int32{0, 1}
	if _, err := splitEqual(b, 6, true, 0); err == nil {
		t.Error("a sequential split took coupled sequences")
	}
}

// With rollback snapshots, each sequence's last tokens stay in one
// ubatch: a sequence that would leave fewer behind waits, or, alone,
// takes them all where they fit and gives some back where not.
func TestSplitsKeepTail(t *testing.T) {
	batch := func(counts ...int) *graph.Ubatch {
		b := &graph.Ubatch{}
		for s, n := range counts {
			for i := range n {
				b.Tokens = append(b.Tokens, int32(100*s+i))
				b.Pos = append(b.Pos, int32(i))
				b.SeqIDs = append(b.SeqIDs, []int32{int32(s)})
				b.Output = append(b.Output, false)
			}
		}
		return b
	}
	sizes := func(us []*ubatch) [][2]int {
		var out [][2]int
		for _, u := range us {
			out = append(out, [2]int{len(u.Tokens), u.NSeqs})
		}
		return out
	}
	for _, c := range []struct {
		counts   []int
		n, keep  int
		want     [][2]int // tokens, sequences
		firstTok []int32  // each ubatch's first token
	}{
		// 4 of each; then sequence 0 would leave 3 < 4: alone, it takes
		// its 7 (they fit in 8); then sequence 1's last 5
		{[]int{11, 9}, 8, 4, [][2]int{{8, 2}, {7, 1}, {5, 1}}, []int32{0, 4, 104}},
		// without the rule: 4 and 4, 4 and 4, 1 and 1 (sequence 1 is
		// done), then sequence 0's last 2
		{[]int{11, 9}, 8, 0, [][2]int{{8, 2}, {8, 2}, {2, 2}, {2, 1}}, []int32{0, 4, 8, 9}},
		// one sequence of 12 in ubatches of 8: 8 would leave 4, fine
		{[]int{12}, 8, 4, [][2]int{{8, 1}, {4, 1}}, []int32{0, 8}},
		// one of 10: 8 would leave 2 < 4, and 10 do not fit: it gives 2
		// back, leaving 4
		{[]int{10}, 8, 4, [][2]int{{6, 1}, {4, 1}}, []int32{0, 6}},
	} {
		us, err := splitEqual(batch(c.counts...), c.n, true, c.keep)
		if err != nil {
			t.Fatal(err)
		}
		if got := sizes(us); !slices.Equal(got, c.want) {
			t.Errorf("%v in %d keeping %d: %v, want %v", c.counts, c.n, c.keep, got, c.want)
			continue
		}
		for k, u := range us {
			if u.Tokens[0] != c.firstTok[k] {
				t.Errorf("%v in %d keeping %d: ubatch %d starts with %d, want %d", c.counts, c.n, c.keep, k, u.Tokens[0], c.firstTok[k])
			}
		}
	}
	if _, err := splitEqual(batch(3), 4, true, 4); err == nil || !strings.Contains(err.Error(), "n_ubatch > n_keep_tail") {
		t.Errorf("a ubatch no bigger than the tail: %v", err)
	}
}

// A recurrent state: a cell per sequence, gathered from head, the zeroed
// state the first cell none comes from.
func TestRecurrentCells(t *testing.T) {
	r := newRecCache(2, 0, nil)
	u := pick(&graph.Ubatch{Tokens: []int32{1, 2, 3, 4}, Pos: []int32{0, 1, 0, 1}, SeqIDs: [][]int32{{0}, {0}, {1}, {1}},
		Output: make([]bool, 4)}, []int{0, 1, 2, 3}, 2, true)
	if err := r.findSlot(u); err != nil {
		t.Fatal(err)
	}
	if r.head != 0 || r.n != 2 || r.rsZ != 0 || r.cells[0].pos != 1 || r.cells[1].pos != 1 || !slices.Equal(r.sCopy(), []int32{0, 0}) {
		t.Fatalf("state: head %d n %d rs_z %d copies %v", r.head, r.n, r.rsZ, r.sCopy())
	}
	next := pick(&graph.Ubatch{Tokens: []int32{5}, Pos: []int32{2}, SeqIDs: [][]int32{{1}}, Output: []bool{true}}, []int{0}, 1, true)
	if err := r.findSlot(next); err != nil {
		t.Fatal(err)
	}
	if r.head != 1 || r.n != 1 || r.seqPosMax(1) != 2 || !slices.Equal(r.sCopy(), []int32{1}) {
		t.Fatalf("second step: head %d n %d copies %v", r.head, r.n, r.sCopy())
	}
	if err := r.seqRm(1, 1, -1); err == nil {
		t.Error("a recurrent state lost its last positions")
	}
	if err := r.seqRm(1, -1, -1); err != nil || r.seqPosMax(1) != -1 {
		t.Errorf("seq_rm of a whole sequence: %v", err)
	}
}

// ggml's float16 conversion, rounding to nearest even, and T5's buckets.
func TestFP16AndBuckets(t *testing.T) {
	for _, c := range []struct {
		f float32
		h uint16
	}{{0, 0}, {1, 0x3c00}, {-2, 0xc000}, {65504, 0x7bff}, {1e6, 0x7c00}, {float32(math.Inf(-1)), 0xfc00},
		{5.960464477539063e-08, 0x0001}, {1.0009765625, 0x3c01}, {1.00048828125, 0x3c00}, {1.00146484375, 0x3c02}} {
		if got := fp16(c.f); got != c.h {
			t.Errorf("fp16(%v) = %#04x, want %#04x", c.f, got, c.h)
		}
	}
	// llama_relative_position_bucket with 32 buckets: exact below 8 (4
	// each way), logarithmic to 127, then the last
	for _, c := range []struct {
		x, y int32
		bi   bool
		want int32
	}{{0, 0, true, 0}, {3, 0, true, 19}, {0, 3, true, 3}, {0, 200, true, 15}, {0, 5, false, 5}, {0, 500, false, 31}, {5, 0, false, 0}} {
		if got := relativeBucket(c.x, c.y, 32, c.bi); got != c.want {
			t.Errorf("bucket(%d, %d, bidirectional %v) = %d, want %d", c.x, c.y, c.bi, got, c.want)
		}
	}
}
