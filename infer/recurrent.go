// Port of llama.cpp src/llama-memory-recurrent.cpp (v0.5.0):
// llama_memory_recurrent.

package infer

import (
	"fmt"
	"slices"

	"github.com/ggload/ggload/ggml/ops"
	"github.com/ggload/ggload/internal/replay/graph"
)

// recCell is one cell of a recurrent state (llama_memory_recurrent's
// mem_cell): the last position it holds, the cell its state comes from,
// its sequences, and, for the cell indexed by a sequence id, that
// sequence's tail (the cell holding its state).
type recCell struct {
	pos, src, src0, tail int32
	seqs                 []int32 // sorted (a std::set)
}

func (c *recCell) empty() bool { return len(c.seqs) == 0 }
func (c *recCell) has(s int32) bool {
	_, ok := slices.BinarySearch(c.seqs, s)
	return ok
}
func (c *recCell) add(s int32) {
	if i, ok := slices.BinarySearch(c.seqs, s); !ok {
		c.seqs = slices.Insert(c.seqs, i, s)
	}
}
func (c *recCell) del(s int32) {
	if i, ok := slices.BinarySearch(c.seqs, s); ok {
		c.seqs = slices.Delete(c.seqs, i, i+1)
	}
}

// recCache is a recurrent state (llama_memory_recurrent): one cell per
// sequence, the range of cells a ubatch uses (head, n) and the cell whose
// state is zeroed (rs_z). With rollback snapshots (n_rs_seq), each state
// has n_rs_seq more planes, the states before each of a ubatch's last
// tokens, and each sequence a pending rollback (rs_idx): the plane its
// next ubatch starts from, 0 for the current state.
type recCache struct {
	cells   []recCell
	tensors []*ops.Tensor
	head, n uint32
	used    int
	rsZ     int32
	nRSSeq  uint32
	rsIdx   []uint32 // per sequence

	// for the state's reads and writes (state.go): each layer's r, s and
	// PLE conv states (nil where the layer has none), of hparams'
	// n_layer layers
	r, s, p []*ops.Tensor
}

func newRecCache(size, nRSSeq uint32, ts []*ops.Tensor) *recCache {
	r := &recCache{cells: make([]recCell, size), tensors: ts, rsZ: -1, nRSSeq: nRSSeq, rsIdx: make([]uint32, size)}
	for i := range r.cells {
		r.cells[i] = recCell{pos: -1, src: -1, src0: -1, tail: -1}
	}
	return r
}

func (r *recCache) clone() *recCache {
	d := *r
	d.cells = make([]recCell, len(r.cells))
	for i, c := range r.cells {
		c.seqs = slices.Clone(c.seqs)
		d.cells[i] = c
	}
	d.rsIdx = slices.Clone(r.rsIdx)
	return &d
}

// findSlot is llama_memory_recurrent::find_slot: each sequence set of the
// ubatch gets a cell of its own (its tail, or the next empty one, its
// state copied there), the cells gathered into one range from head; the
// range's first cell no state comes from is rs_z. false where a sequence
// is past the cells.
func (r *recCache) findSlot(u *ubatch) error {
	size := uint32(len(r.cells))
	nSeqs := uint32(max(u.NSeqs, 1))
	per := uint32(len(u.Tokens)) / nSeqs
	if r.head > uint32(r.used)+2*nSeqs {
		r.head = 0
	}
	lo, hi := int32(size)-1, int32(0)
	for s := range nSeqs {
		i := s * per
		for j, id := range u.SeqIDs[i] {
			if id < 0 || uint32(id) >= size {
				return fmt.Errorf("infer: decode: seq_id=%d >= n_seq_max=%d: try a bigger -np", id, size)
			}
			if j > 0 {
				seq := &r.cells[id]
				if seq.tail >= 0 {
					cell := &r.cells[seq.tail]
					cell.del(id)
					seq.tail = -1
					if cell.empty() {
						cell.pos, cell.src = -1, -1
						r.used--
					}
				}
			}
		}
	}
	next := r.head
	for range size {
		if next >= size {
			next -= size
		}
		if r.cells[next].empty() {
			break
		}
		next++
	}
	for s := range nSeqs {
		id := u.SeqIDs[s*per][0]
		meta := &r.cells[id]
		own := meta.tail >= 0 && len(r.cells[meta.tail].seqs) == 1
		if !own {
			e := &r.cells[next]
			if !e.empty() {
				return fmt.Errorf("infer: decode: %w: no empty recurrent state for sequence %d", ErrNoMemorySlot, id)
			}
			if meta.tail >= 0 {
				orig := &r.cells[meta.tail]
				e.pos, e.src = orig.pos, orig.src
				orig.del(id)
				e.add(id)
			}
			meta.tail = int32(next)
			if s+1 < nSeqs {
				for range size {
					next++
					if next >= size {
						next -= size
					}
					if r.cells[next].empty() {
						break
					}
				}
			}
		}
		lo, hi = min(lo, meta.tail), max(hi, meta.tail)
	}
	// gather and reorder
	for s := range nSeqs {
		dst := int32(s) + lo
		src := r.cells[u.SeqIDs[s*per][0]].tail
		if dst == src {
			continue
		}
		d, c := &r.cells[dst], &r.cells[src]
		d.pos, c.pos = c.pos, d.pos
		d.src, c.src = c.src, d.src
		d.seqs, c.seqs = c.seqs, d.seqs
		for j := range r.cells {
			switch r.cells[j].tail {
			case src:
				r.cells[j].tail = dst
			case dst:
				r.cells[j].tail = src
			}
		}
	}
	for s := range nSeqs {
		i := s * per
		cell := &r.cells[int32(s)+lo]
		cell.pos = u.Pos[i+per-1]
		cell.seqs = cell.seqs[:0]
		for _, id := range u.SeqIDs[i] {
			cell.add(id)
			r.cells[id].tail = int32(s) + lo
		}
	}
	// the first cell of the range no state is taken from: the zeroed one
	refs := make([]int, size)
	for _, c := range r.cells {
		if c.src >= 0 {
			refs[c.src]++
		}
	}
	r.rsZ = -1
	for i := lo; i <= hi; i++ {
		if refs[i] == 0 {
			r.rsZ = i
			break
		}
	}
	for i := lo; i <= hi; i++ {
		c := &r.cells[i]
		if c.src < 0 {
			if r.rsZ < 0 {
				return fmt.Errorf("infer: decode: no recurrent state to zero")
			}
			c.src0 = r.rsZ
		} else {
			c.src0 = c.src
		}
		c.src = i
	}
	r.head, r.n = uint32(lo), uint32(hi-lo+1)
	r.used = 0
	for _, c := range r.cells {
		if !c.empty() {
			r.used++
		}
	}
	if r.n < nSeqs {
		return fmt.Errorf("infer: decode: %d recurrent states for %d sequences", r.n, nSeqs)
	}
	return nil
}

// view is what the ubatch's graph sees of the state.
func (r *recCache) view() graph.RSView { return graph.RSView{Head: r.head, N: r.n, RSZ: r.rsZ} }

// sCopy is each used cell's source: s_copy(i), i from head. With
// rollback snapshots, the source is the plane of the pending rollback of
// the cell's first sequence, and that rollback is done: as the pin's
// s_copy, it is consumed by the ubatch's inputs.
func (r *recCache) sCopy() []int32 {
	out := make([]int32, r.n)
	size := int32(len(r.cells))
	for i := range out {
		c := &r.cells[r.head+uint32(i)]
		out[i] = c.src0
		if r.nRSSeq == 0 || c.empty() {
			continue
		}
		if seq := c.seqs[0]; int(seq) < len(r.rsIdx) {
			out[i] += int32(r.rsIdx[seq]) * size
			r.rsIdx[seq] = 0
		}
	}
	return out
}

// seqPosMin is the sequence's first position, -1 where it has none.
func (r *recCache) seqPosMin(seq int32) int32 {
	m := int32(-1)
	for _, c := range r.cells {
		if c.has(seq) && (m < 0 || c.pos < m) {
			m = c.pos
		}
	}
	return m
}

// seqPosMax is the sequence's last position, -1 where it has none.
func (r *recCache) seqPosMax(seq int32) int32 {
	m := int32(-1)
	for _, c := range r.cells {
		if c.has(seq) {
			m = max(m, c.pos)
		}
	}
	return m
}

// seqRm is llama_memory_recurrent::seq_rm: a state goes whole or not at
// all, but for its last positions when they are no more than the
// snapshots it keeps (n_rs_seq): those are rolled back, once before the
// next ubatch.
func (r *recCache) seqRm(seq, p0, p1 int32) error {
	size := uint32(len(r.cells))
	p0, p1 = openRange(p0, p1)
	if seq < 0 || seq >= int32(size) {
		// (as the pin's llama_memory_recurrent::seq_rm: a negative
		// sequence is refused too, the memory left as it is)
		return fmt.Errorf("infer: seq_rm: invalid seq_id (%d) of a recurrent state of %d sequences: it removes one sequence at a time (Clear empties the memory)", seq, size)
	}
	if p0 == 0 && p1 == 1<<31-1 {
		r.rsIdx[seq] = 0
	}
	if t := r.cells[seq].tail; t >= 0 {
		cell := &r.cells[t]
		if 0 < p0 && p0 <= cell.pos && p1 > cell.pos {
			back := cell.pos - (p0 - 1)
			switch {
			case r.nRSSeq == 0:
				return fmt.Errorf("infer: seq_rm: a recurrent state cannot lose its last positions (%d to %d of sequence %d) without rollback snapshots (n_rs_seq)", p0, cell.pos, seq)
			case r.rsIdx[seq] != 0:
				return fmt.Errorf("infer: seq_rm: sequence %d has a rollback pending (%d positions): a state rolls back once before its next decode", seq, r.rsIdx[seq])
			case back > int32(r.nRSSeq):
				return fmt.Errorf("infer: seq_rm: rolling sequence %d back %d positions (%d to %d), past its %d snapshots (n_rs_seq)", seq, back, p0, cell.pos, r.nRSSeq)
			}
			r.rsIdx[seq] = uint32(back)
			cell.pos = p0 - 1
			return nil
		}
		if p0 <= cell.pos && cell.pos < p1 {
			r.cells[seq].tail = -1
		}
	}
	newHead := size
	for i := range r.cells {
		c := &r.cells[i]
		if c.pos < p0 || c.pos >= p1 || !c.has(seq) {
			continue
		}
		c.del(seq)
		if c.empty() {
			if c.pos >= 0 {
				r.used--
			}
			c.pos, c.src = -1, -1
			if newHead == size {
				newHead = uint32(i)
			}
		}
	}
	if newHead != size && newHead < r.head {
		r.head = newHead
	}
	return nil
}

// seqCp is llama_memory_recurrent::seq_cp: dst's state is src's (the cell
// of src's tail holds dst too); what dst held is let go.
func (r *recCache) seqCp(src, dst int32) {
	size := int32(len(r.cells))
	if src == dst || src < 0 || dst < 0 || src >= size || dst >= size {
		return
	}
	if t := r.cells[dst].tail; t >= 0 {
		cell := &r.cells[t]
		cell.del(dst)
		r.cells[dst].tail = -1
		if cell.empty() {
			cell.pos, cell.src = -1, -1
			r.used--
		}
	}
	if t := r.cells[src].tail; t >= 0 {
		r.cells[t].add(dst)
		r.cells[dst].tail = t
	}
}

// seqKeep is llama_memory_recurrent::seq_keep: every cell without the
// sequence emptied, the others its alone; no other sequence has a tail.
func (r *recCache) seqKeep(seq int32) {
	size := uint32(len(r.cells))
	newHead := size
	for i := range r.cells {
		c := &r.cells[i]
		if int32(i) != seq {
			c.tail = -1
		}
		if !c.has(seq) {
			if c.pos >= 0 {
				r.used--
			}
			c.pos, c.src, c.seqs = -1, -1, c.seqs[:0]
			if newHead == size {
				newHead = uint32(i)
			}
			continue
		}
		c.seqs = append(c.seqs[:0], seq)
	}
	if newHead != size && newHead < r.head {
		r.head = newHead
	}
}

// clear is llama_memory_recurrent::clear's cells: every cell empty, no
// sequence with a state.
func (r *recCache) clear() {
	for i := range r.cells {
		r.cells[i] = recCell{pos: -1, src: -1, src0: -1, tail: -1}
	}
	clear(r.rsIdx)
	r.head, r.used = 0, 0
}

// seqAdd and seqDiv are llama_memory_recurrent's: the position of the
// sequence's state moves, when it is in [p0, p1).
func (r *recCache) seqAdd(seq, p0, p1, d int32) {
	if d == 0 {
		return
	}
	if c := r.tailIn(seq, p0, p1); c != nil {
		c.pos += d
	}
}

func (r *recCache) seqDiv(seq, p0, p1, d int32) {
	if d == 1 {
		return
	}
	if c := r.tailIn(seq, p0, p1); c != nil {
		c.pos /= d
	}
}

// tailIn is the cell of the sequence's state when its position is in
// [p0, p1) (negative bounds open), nil otherwise.
func (r *recCache) tailIn(seq, p0, p1 int32) *recCell {
	p0, p1 = openRange(p0, p1)
	if p0 == p1 || seq < 0 || int(seq) >= len(r.cells) {
		return nil
	}
	t := r.cells[seq].tail
	if t < 0 {
		return nil
	}
	c := &r.cells[t]
	if !c.has(seq) || c.pos < p0 || c.pos >= p1 {
		return nil
	}
	return c
}
