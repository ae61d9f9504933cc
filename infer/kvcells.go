// Port of llama.cpp src/llama-kv-cells.h (v0.5.0): llama_kv_cells.

package infer

import "slices"

// maxSeq is llama.cpp's LLAMA_MAX_SEQ.
const maxSeq = 256

// seqSet is a cell's sequences (llama_kv_cells' std::bitset<LLAMA_MAX_SEQ>).
type seqSet [maxSeq / 64]uint64

func (s *seqSet) has(id int32) bool { return s[id/64]&(1<<(id%64)) != 0 }
func (s *seqSet) add(id int32)      { s[id/64] |= 1 << (id % 64) }
func (s *seqSet) del(id int32)      { s[id/64] &^= 1 << (id % 64) }
func (s *seqSet) empty() bool       { return *s == seqSet{} }
func (s *seqSet) count() int {
	n := 0
	for _, w := range s {
		for ; w != 0; w &= w - 1 {
			n++
		}
	}
	return n
}

// first is the lowest sequence of a cell with one.
func (s *seqSet) first() int32 {
	for i := range int32(maxSeq) {
		if s.has(i) {
			return i
		}
	}
	return -1
}

// kvCells is one stream of a KV cache's cells (llama_kv_cells) and its
// head: each cell's position (-1: empty) and sequences.
type kvCells struct {
	pos  []int32
	seq  []seqSet
	used int
	head uint32

	// each cell's shift since the last K-shift (seq_add, seq_div), and
	// whether some cell has one
	shift    []int32
	hasShift bool

	nSWA    uint32 // the cache's sliding window
	swaType int    // llama_swa_type: 0 none, 1 standard, 2 chunked, 3 symmetric

	// each cell's llama_kv_cell_ext: the token it holds (-1,
	// LLAMA_TOKEN_NULL, where none was stored) and its 2D position (an
	// M-RoPE ubatch's second and third sections), reset when it empties
	tok        []int32
	extX, extY []int32
}

func newKVCells(n, nSWA uint32, swaType int) *kvCells {
	c := &kvCells{pos: make([]int32, n), seq: make([]seqSet, n), shift: make([]int32, n), nSWA: nSWA, swaType: swaType,
		tok: make([]int32, n), extX: make([]int32, n), extY: make([]int32, n)}
	for i := range c.pos {
		c.pos[i], c.tok[i] = -1, -1
	}
	return c
}

func (c *kvCells) clone() *kvCells {
	d := *c
	d.pos, d.seq, d.shift = slices.Clone(c.pos), slices.Clone(c.seq), slices.Clone(c.shift)
	d.tok, d.extX, d.extY = slices.Clone(c.tok), slices.Clone(c.extX), slices.Clone(c.extY)
	return &d
}

func (c *kvCells) size() uint32          { return uint32(len(c.pos)) }
func (c *kvCells) isEmpty(i uint32) bool { return c.pos[i] == -1 }

// usedMaxP1 is one past the last cell in use.
func (c *kvCells) usedMaxP1() uint32 {
	for i := len(c.pos) - 1; i >= 0; i-- {
		if c.pos[i] != -1 {
			return uint32(i) + 1
		}
	}
	return 0
}

// seqPosMin and seqPosMax are a sequence's least and greatest positions,
// -1 where it has none.
func (c *kvCells) seqPosMin(id int32) int32 {
	m := int32(-1)
	for i, p := range c.pos {
		if p != -1 && c.seq[i].has(id) && (m == -1 || p < m) {
			m = p
		}
	}
	return m
}

func (c *kvCells) seqPosMax(id int32) int32 {
	m := int32(-1)
	for i, p := range c.pos {
		if p != -1 && c.seq[i].has(id) && p > m {
			m = p
		}
	}
	return m
}

// rm empties a cell.
func (c *kvCells) rm(i uint32) {
	if c.pos[i] != -1 {
		c.used--
	}
	c.pos[i], c.seq[i], c.shift[i] = -1, seqSet{}, 0
	c.resetExt(i)
}

// resetExt forgets an emptied cell's token and 2D position.
func (c *kvCells) resetExt(i uint32) { c.tok[i], c.extX[i], c.extY[i] = -1, 0, 0 }

// seqRm removes the sequence's cells in [p0, p1) (a negative seq: every
// sequence's), as llama_kv_cache::seq_rm does; a cell left with no
// sequence is emptied.
func (c *kvCells) seqRm(id, p0, p1 int32) {
	p0, p1 = openRange(p0, p1)
	newHead := int64(-1)
	for i := range c.pos {
		p := c.pos[i]
		if p == -1 || p < p0 || p >= p1 {
			continue
		}
		if id < 0 {
			c.rm(uint32(i))
		} else if c.seq[i].has(id) {
			c.seq[i].del(id)
			if c.seq[i].empty() {
				c.rm(uint32(i))
			}
		}
		if c.pos[i] == -1 && newHead == -1 {
			newHead = int64(i)
		}
	}
	// a slot freed before the head: the next search starts there
	if newHead != -1 && uint32(newHead) < c.head {
		c.head = uint32(newHead)
	}
}

// seqCp adds dst to the cells of src in [p0, p1).
func (c *kvCells) seqCp(src, dst, p0, p1 int32) {
	p0, p1 = openRange(p0, p1)
	for i, p := range c.pos {
		if p != -1 && p >= p0 && p < p1 && c.seq[i].has(src) {
			c.seq[i].add(dst)
		}
	}
}

// reset empties every cell.
func (c *kvCells) reset() {
	for i := range c.pos {
		c.pos[i], c.seq[i], c.shift[i] = -1, seqSet{}, 0
		c.resetExt(uint32(i))
	}
	c.used, c.hasShift = 0, false
}

// copyFrom is the cells of a stream's copy of sequence src, as dst, from
// the cells o of another stream: the same cells at the same positions
// (llama_kv_cache::seq_cp across streams).
func (c *kvCells) copyFrom(o *kvCells, src, dst int32) {
	c.reset()
	for i, p := range o.pos {
		if p != -1 && o.seq[i].has(src) {
			c.pos[i], c.shift[i] = p, o.shift[i]
			c.tok[i], c.extX[i], c.extY[i] = o.tok[i], o.extX[i], o.extY[i]
			c.used++
			c.seq[i].add(dst)
			if o.shift[i] != 0 {
				c.hasShift = true
			}
		}
	}
	c.head = o.head
}

// seqKeep keeps only the sequence's cells, and only it in them.
func (c *kvCells) seqKeep(id int32) {
	newHead := int64(-1)
	for i, p := range c.pos {
		if p == -1 {
			continue
		}
		if !c.seq[i].has(id) {
			c.rm(uint32(i))
			if newHead == -1 {
				newHead = int64(i)
			}
			continue
		}
		c.seq[i] = seqSet{}
		c.seq[i].add(id)
	}
	if newHead != -1 && uint32(newHead) < c.head {
		c.head = uint32(newHead)
	}
}

// maskedSWA is llama_hparams::is_masked_swa: whether the cache's window
// hides position p0 from position p1.
func (c *kvCells) maskedSWA(p0, p1 int32) bool {
	n := int32(c.nSWA)
	switch c.swaType {
	case 1:
		return p1-p0 >= n
	case 2:
		return p0 < (p1/n)*n
	case 3:
		d := p1 - p0
		return d < -n/2 || d > n/2
	}
	return false
}

// findSlot is llama_kv_cache::find_slot for one stream, cells not
// necessarily contiguous: the cells the ubatch's tokens go to, nil where
// there are not enough. A cell is free when it is empty, or holds one
// sequence at a position its window no longer shows.
func (c *kvCells) findSlot(nTokens uint32) []uint32 {
	head := c.head
	if head > uint32(c.used)+2*nTokens {
		head = 0
	}
	if nTokens > c.size() {
		return nil
	}
	idxs := make([]uint32, 0, nTokens)
	tested := uint32(0)
	for {
		if head+1 > c.size() {
			tested += c.size() - head
			head = 0
			continue
		}
		idx := head
		head++
		tested++
		free := c.isEmpty(idx)
		if !free && c.seq[idx].count() == 1 {
			s := c.seq[idx].first()
			free = c.maskedSWA(c.pos[idx], c.seqPosMax(s)+1)
		}
		if free {
			idxs = append(idxs, idx)
		}
		if uint32(len(idxs)) == nTokens {
			return idxs
		}
		if tested >= c.size() {
			return nil
		}
	}
}

// apply is llama_kv_cache::apply_ubatch on the cells a slot found: each
// token's position and sequences stored (a cell in use is taken from the
// sequence it held, whose positions up to it then go too, so that every
// sequence stays whole from its least position to its greatest), the
// head after the slot.
// Each cell keeps its token (toks nil: none) and, with pos2d, its 2D
// position (the ubatch's positions are one per token, every section
// alike: ext.x = ext.y = pos).
func (c *kvCells) apply(idxs []uint32, pos []int32, seqs [][]int32, toks []int32, pos2d bool) {
	var maxRm [maxSeq]int32
	for i := range maxRm {
		maxRm[i] = -1
	}
	for i, idx := range idxs {
		if c.pos[idx] != -1 {
			s := c.seq[idx].first()
			maxRm[s] = max(maxRm[s], c.pos[idx])
			c.rm(idx)
		}
		c.used++
		c.pos[idx] = pos[i]
		if toks != nil {
			c.tok[idx] = toks[i]
		}
		if pos2d {
			c.extX[idx], c.extY[idx] = pos[i], pos[i]
		}
		for _, s := range seqs[i] {
			c.seq[idx].add(s)
		}
	}
	for s, p := range maxRm {
		if p == -1 {
			continue
		}
		if lo := c.seqPosMin(int32(s)); lo != -1 && lo <= p {
			c.seqRm(int32(s), lo, p+1)
		}
	}
	c.head = idxs[len(idxs)-1] + 1
}

// seqAdd is llama_kv_cache::seq_add for one stream: the cells of the
// sequence in [p0, p1) move by d (every sequence of such a cell with
// them), a cell moved before position 0 is emptied; the head goes to the
// first cell emptied, or to the start.
func (c *kvCells) seqAdd(id, p0, p1, d int32) {
	if d == 0 {
		return
	}
	p0, p1 = openRange(p0, p1)
	if p0 == p1 {
		return
	}
	newHead := -1
	for i, p := range c.pos {
		if p == -1 || p < p0 || p >= p1 || !c.seq[i].has(id) {
			continue
		}
		c.pos[i] += d
		c.shift[i] += d
		c.hasShift = true
		if c.pos[i] < 0 {
			c.pos[i], c.seq[i], c.shift[i] = -1, seqSet{}, 0
			c.resetExt(uint32(i))
			c.used--
			if newHead == -1 {
				newHead = i
			}
		}
	}
	c.head = 0
	if newHead != -1 {
		c.head = uint32(newHead)
	}
}

// seqDiv is llama_kv_cache::seq_div for one stream: the positions of the
// sequence's cells in [p0, p1) divided by d.
func (c *kvCells) seqDiv(id, p0, p1, d int32) {
	if d == 1 {
		return
	}
	p0, p1 = openRange(p0, p1)
	if p0 == p1 {
		return
	}
	for i, p := range c.pos {
		if p == -1 || p < p0 || p >= p1 || !c.seq[i].has(id) {
			continue
		}
		c.pos[i] = p / d
		c.shift[i] += p - c.pos[i]
		c.hasShift = true
	}
}

// resetShift forgets the shifts, once the K-shift applied them.
func (c *kvCells) resetShift() {
	clear(c.shift)
	c.hasShift = false
}

// openRange is a range's negative bounds made open: [0, max int32).
func openRange(p0, p1 int32) (int32, int32) {
	if p0 < 0 {
		p0 = 0
	}
	if p1 < 0 {
		p1 = 1<<31 - 1
	}
	return p0, p1
}

// seqPosTokLE is llama_kv_cells::seq_pos_tok_le: the token of the
// sequence's cell at the greatest position not after p (of several at
// that position, the last cell's), -1 where it has none.
func (c *kvCells) seqPosTokLE(id, p int32) int32 {
	best := -1
	for i, q := range c.pos {
		if q != -1 && q <= p && c.seq[i].has(id) && (best < 0 || q >= c.pos[best]) {
			best = i
		}
	}
	if best < 0 {
		return -1
	}
	return c.tok[best]
}
