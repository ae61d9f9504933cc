package infer

import (
	"slices"
	"testing"

	"github.com/ggload/ggload/internal/replay/graph"
)

// seqUbatch is a simple split's ubatch of positions from..to-1 of one
// sequence.
func seqUbatch(seq int32, from, to int32) *ubatch {
	u := &ubatch{Ubatch: &graph.Ubatch{}}
	for p := from; p < to; p++ {
		u.Tokens = append(u.Tokens, p)
		u.Pos = append(u.Pos, p)
		u.SeqIDs = append(u.SeqIDs, []int32{seq})
		u.Output = append(u.Output, false)
	}
	u.NSeqs = len(u.Tokens)
	return u
}

// The compressors' plans of a prompt's first six positions, worked out by
// hand from llama.cpp's dsv4_build_comp_plan.
func TestDSV4Plan(t *testing.T) {
	u := seqUbatch(0, 0, 6)
	csa, err := dsv4Plan(u, dsv4CSARatio, true, 8, 256, 1, 0, []uint32{0})
	if err != nil {
		t.Fatal(err)
	}
	want := &graph.CompPlan{
		StatePos:   []int32{0, 1, 2, 3, 0, 1},
		PersistSrc: []int32{0, 1, 2, 3, 4, 5}, PersistDst: []int32{0, 1, 2, 3, 4, 5},
		// the block of positions 0..3: its previous half before position
		// 0 (the zero row after the state's 8 rows and the ubatch's 6),
		// its current half the ubatch's first four tokens
		ReadIdxs:  []int32{14, 14, 14, 14, 8, 9, 10, 11},
		WriteIdxs: []int64{0}, WritePos: []int32{0},
		NVisible: []int32{0, 0, 0, 1, 1, 1},
		NStream:  1, NKV: 256,
	}
	if !samePlan(csa, want) {
		t.Errorf("CSA plan %+v, want %+v", csa, want)
	}
	// HCA: no block completes; a masked one in the cache's last row
	hca, err := dsv4Plan(u, dsv4HCARatio, false, 128, 256, 1, 0, []uint32{0})
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(hca.WriteIdxs, []int64{255}) || len(hca.ReadIdxs) != 128 || hca.ReadIdxs[0] != 128 || hca.NKV != 256 {
		t.Errorf("HCA plan: writes %v, %d reads from %v, n_kv %d", hca.WriteIdxs, len(hca.ReadIdxs), hca.ReadIdxs[:1], hca.NKV)
	}
	// with two rollback planes and a rollback of one pending: the state
	// restored from plane 1, the snapshots of the state before the last
	// token and before the last two (the ubatch's rows after the three
	// planes of 8)
	rb, err := dsv4Plan(u, dsv4CSARatio, true, 8, 256, 1, 2, []uint32{1})
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(rb.RestoreSrc, []int32{8, 9, 10, 11, 12, 13, 14, 15}) || !slices.Equal(rb.RestoreDst, []int32{0, 1, 2, 3, 4, 5, 6, 7}) {
		t.Errorf("restore %v -> %v", rb.RestoreSrc, rb.RestoreDst)
	}
	wantSrc := []int32{24, 25, 26, 27, 28, 5, 6, 7, 24, 25, 26, 27, 4, 5, 6, 7}
	wantDst := []int32{8, 9, 10, 11, 12, 13, 14, 15, 16, 17, 18, 19, 20, 21, 22, 23}
	if !slices.Equal(rb.SnapshotSrc, wantSrc) || !slices.Equal(rb.SnapshotDst, wantDst) {
		t.Errorf("snapshots %v -> %v, want %v -> %v", rb.SnapshotSrc, rb.SnapshotDst, wantSrc, wantDst)
	}
}

func samePlan(a, b *graph.CompPlan) bool {
	return slices.Equal(a.StatePos, b.StatePos) && slices.Equal(a.PersistSrc, b.PersistSrc) && slices.Equal(a.PersistDst, b.PersistDst) &&
		slices.Equal(a.RestoreSrc, b.RestoreSrc) && slices.Equal(a.RestoreDst, b.RestoreDst) &&
		slices.Equal(a.SnapshotSrc, b.SnapshotSrc) && slices.Equal(a.SnapshotDst, b.SnapshotDst) &&
		slices.Equal(a.ReadIdxs, b.ReadIdxs) && slices.Equal(a.WriteIdxs, b.WriteIdxs) && slices.Equal(a.WritePos, b.WritePos) &&
		slices.Equal(a.NVisible, b.NVisible) && a.NStream == b.NStream && a.NKV == b.NKV
}

// A ubatch whose tokens are in two sequences is written to the raw caches
// once per sequence; sequences of unequal lengths are refused, as
// llama.cpp throws.
func TestDSV4RawWrite(t *testing.T) {
	u := &ubatch{Ubatch: &graph.Ubatch{Tokens: []int32{7, 8}, Pos: []int32{3, 4}, SeqIDs: [][]int32{{1, 0}, {0, 1}}, Output: []bool{false, true}, NSeqs: 1, Equal: true}}
	w, err := dsv4RawWrite(u)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(w.Tokens, []int32{7, 8, 7, 8}) || !slices.Equal(w.Pos, []int32{3, 4, 3, 4}) || w.NSeqs != 2 || !w.Equal ||
		w.SeqIDs[0][0] != 0 || w.SeqIDs[2][0] != 1 || slices.Contains(w.Output, true) {
		t.Errorf("the raw write %+v", w.Ubatch)
	}
	u.SeqIDs[1] = []int32{0}
	if _, err := dsv4RawWrite(u); err == nil {
		t.Error("sequences of 2 and 1 tokens written")
	}
	plain := seqUbatch(0, 0, 3)
	if w, _ := dsv4RawWrite(plain); w != plain {
		t.Error("a ubatch of one sequence per token rewritten")
	}
}
