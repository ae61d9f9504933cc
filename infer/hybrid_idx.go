// Port of llama.cpp src/llama-memory-hybrid-idx.cpp (v0.5.0): the
// inputs of a graph over llama_memory_hybrid_idx (a KV cache, a recurrent
// state, and an indexer cache of one key per token that takes the
// attention cache's cells), as its set_input_qsa writes them for the
// block-sparse attention (QSA) of Qwen4-Exp, the architecture that uses
// it.

package infer

import (
	"fmt"
	"math"
	"slices"

	"github.com/ggload/ggload/ggml/ops"
	"github.com/ggload/ggload/internal/replay/cpp"
)

// qsaClass is the QSA input's class, nested in the model's.
const qsaClass = "llama_model_qwen4exp::llm_graph_input_qsa"

// setQSA is the QSA input's set_input: the indexer cache's destination
// cells of the ubatch's keys (k_idxs), then
// llama_memory_hybrid_idx::set_input_qsa over the indexer's cells. Per
// stream of the ubatch, the cells are grouped into blocks of ratio
// consecutive positions of one sequence set (by position, or where an
// M-RoPE image repeats positions in a single sequence, by rank in the
// causal mask's order); only full blocks are pooled. cell_blk is each
// cell's block (a spare block for the cells of none), blk_cells each
// block's cells, blk_pos the M-RoPE positions of each block's first
// token, and bias, per token, what it sees: by block (blk_bias; the
// attention mask adds the rest) or by cell, the incomplete tail always
// (1e9), pooled blocks before it by score (0), nothing else (-INF).
func (c *Context) setQSA(in *cpp.Object, u *ubatch, slots []slot) error {
	if c.rep.Memory.Class != "llama_memory_hybrid_idx" || len(c.caches) < 2 {
		return fmt.Errorf("a QSA input without an indexer cache (GGML_ASSERT(get_mem_idx() != nullptr))")
	}
	idx := c.caches[1]
	if t := member(in, "k_idxs"); t != nil {
		if err := c.set(t, typeI64, kIdxs(idx, slots[1]), 8); err != nil {
			return err
		}
	}
	cellBlkT, blkCellsT, blkPosT, biasT := member(in, "cell_blk"), member(in, "blk_cells"), member(in, "blk_pos"), member(in, "bias")
	if cellBlkT == nil || blkCellsT == nil || blkPosT == nil || biasT == nil {
		return fmt.Errorf("a QSA input with a tensor left out of the graph")
	}
	if !c.lib.BufferIsHost(ops.Buffer(cellBlkT.Buffer)) {
		return &cpp.Abort{Msg: "GGML_ASSERT(ggml_backend_buffer_is_host(cell_blk->buffer)) failed", Where: "llama_memory_hybrid_idx::set_input_qsa"}
	}
	r := in.Fields["ratio"].V.I
	blkBias := in.Fields["blk_bias"].V.I != 0
	nKV, nNS := cellBlkT.Ne[0], cellBlkT.Ne[1]
	nTokens := int64(len(u.Tokens))
	if r <= 0 || r > 64 || nNS <= 0 || nTokens%nNS != 0 || blkPosT.Ne[0]%(4*nNS) != 0 {
		return fmt.Errorf("a QSA input of ratio %d over %d streams for %d tokens", r, nNS, nTokens)
	}
	nBlocks := blkPosT.Ne[0] / (4 * nNS)
	nTPS := nTokens / nNS
	width := nKV
	if blkBias {
		width = nBlocks
	}
	if blkCellsT.Ne[0] != r*nBlocks || blkCellsT.Ne[1] != nNS || biasT.Ne[0] != width || biasT.Ne[1]*biasT.Ne[2] != nTokens {
		return fmt.Errorf("a QSA input of shapes %v, %v, %v for %d blocks of %d", blkCellsT.Ne, blkPosT.Ne, biasT.Ne, nBlocks, r)
	}
	full := ^uint64(0)
	if r < 64 {
		full = uint64(1)<<r - 1
	}
	cellBlk := make([]int32, nKV*nNS)
	blkCells := make([]int32, r*nBlocks*nNS)
	blkPos := make([]int32, 4*nBlocks*nNS)
	bias := make([]float32, width*nTokens)
	inf := float32(math.Inf(-1))

	blkOf := make([]int32, nKV)
	cellGrp := make([]int32, nKV)
	grpHead := make([]int32, nBlocks)
	for s := range nNS {
		cells := idx.stream(u.SeqIDs[s*nTPS][0])
		if int64(cells.size()) < nKV {
			return fmt.Errorf("a QSA input over %d cells of a cache of %d", nKV, cells.size())
		}
		curBlkCells := blkCells[s*r*nBlocks : (s+1)*r*nBlocks]
		// whether the stream's cells hold one sequence at most
		var present seqSet
		for j, p := range cells.pos {
			if p != -1 {
				for w := range present {
					present[w] |= cells.seq[j][w]
				}
			}
		}
		oneSeq := present.count() <= 1

		var grpNext, grpFirst, grpSlot0, grpBid []int32
		var grpSlots []uint64
		var order, rank []int32
		ranked, oor, dup := false, false, false
		at := func(j int64) int64 { // a cell's place on the block line
			if ranked {
				return int64(rank[j])
			}
			return int64(cells.pos[j])
		}
		group := func() {
			for j := range nKV {
				blkOf[j], cellGrp[j] = -1, -1
			}
			for b := range grpHead {
				grpHead[b] = -1
			}
			grpNext, grpFirst, grpSlot0, grpSlots, grpBid = grpNext[:0], grpFirst[:0], grpSlot0[:0], grpSlots[:0], grpBid[:0]
			oor, dup = false, false
			for j := range nKV {
				if cells.isEmpty(uint32(j)) {
					continue
				}
				x := at(j)
				pb := x / r
				if pb >= nBlocks {
					oor = true
					continue
				}
				g := int32(-1)
				for k := grpHead[pb]; k >= 0; k = grpNext[k] {
					if oneSeq || cells.seq[grpFirst[k]] == cells.seq[j] {
						g = k
						break
					}
				}
				if g < 0 {
					g = int32(len(grpFirst))
					grpNext = append(grpNext, grpHead[pb])
					grpFirst = append(grpFirst, int32(j))
					grpSlot0 = append(grpSlot0, -1)
					grpSlots = append(grpSlots, 0)
					grpBid = append(grpBid, -1)
					grpHead[pb] = g
				}
				bit := uint64(1) << (x % r)
				dup = dup || grpSlots[g]&bit != 0
				cellGrp[j] = g
				grpSlots[g] |= bit
				if x%r == 0 {
					grpSlot0[g] = int32(j)
				}
			}
		}
		group()
		// an M-RoPE image repeats a position: the cells ranked in the
		// causal mask's order (position, then y, then x) instead
		if dup && idx.pos2d && oneSeq {
			order = order[:0]
			for j := range nKV {
				if !cells.isEmpty(uint32(j)) {
					order = append(order, int32(j))
				}
			}
			slices.SortStableFunc(order, func(a, b int32) int {
				if pa, pb := cells.pos[a], cells.pos[b]; pa != pb {
					if pa < pb {
						return -1
					}
					return 1
				}
				if gt2D(cells, b, cells.extX[a], cells.extY[a]) {
					return -1
				}
				if gt2D(cells, a, cells.extX[b], cells.extY[b]) {
					return 1
				}
				return 0
			})
			rank = make([]int32, nKV)
			for j := range rank {
				rank[j] = -1
			}
			for k, j := range order {
				rank[j] = int32(k)
			}
			ranked = true
			group()
		}
		if blkBias && oor {
			return &cpp.Abort{Msg: "GGML_ASSERT((!blk_bias || !oor) && \"qsa: cell position runs past the cell window\") failed", Where: "llama_memory_hybrid_idx::set_input_qsa"}
		}
		var bidIdx, bidCell, bidSlot0 []int32
		for pb := range nBlocks {
			for g := grpHead[pb]; g >= 0; g = grpNext[g] {
				if grpSlots[g] != full {
					continue
				}
				grpBid[g] = int32(len(bidIdx))
				bidIdx = append(bidIdx, int32(pb*r))
				bidCell = append(bidCell, grpFirst[g])
				bidSlot0 = append(bidSlot0, grpSlot0[g])
			}
		}
		nBid := int64(len(bidIdx))
		for b := range nBid {
			sec := [4]int32{bidIdx[b], bidIdx[b], bidIdx[b], bidIdx[b]}
			if ranked {
				j := bidSlot0[b]
				p := cells.pos[j]
				sec = [4]int32{p, cells.extY[j], cells.extX[j], p}
			}
			for k := range int64(4) {
				blkPos[k*nBlocks*nNS+s*nBlocks+b] = sec[k]
			}
		}
		// the cells of no pooled block share a spare one
		haveDead := nBid < nBlocks
		dead := int32(nBlocks - 1)
		if haveDead {
			dead = int32(nBid)
		}
		for j := range nKV {
			if g := cellGrp[j]; g >= 0 {
				blkOf[j] = grpBid[g]
			}
			if blkOf[j] >= 0 {
				curBlkCells[int64(blkOf[j])*r+at(j)%r] = int32(j)
				cellBlk[s*nKV+j] = blkOf[j]
			} else {
				cellBlk[s*nKV+j] = dead
			}
		}
		for ii := range nTPS {
			i := s*nTPS + ii
			seq := u.SeqIDs[i][0]
			q := int64(u.Pos[i])
			if ranked {
				// the query's place among the ranked cells: the last one
				// it sees (its 2D position is its position's, every
				// section alike)
				qp := u.Pos[i]
				lo, hi := 0, len(order)
				for lo < hi {
					mid := (lo + hi) / 2
					j := order[mid]
					if pc := cells.pos[j]; pc < qp || (pc == qp && !gt2D(cells, j, qp, qp)) {
						lo = mid + 1
					} else {
						hi = mid
					}
				}
				q = int64(lo) - 1
			}
			tail := (q + 1) / r * r
			if blkBias {
				row := bias[i*nBlocks : (i+1)*nBlocks]
				for b := range nBlocks {
					if b >= nBid || !cells.seq[bidCell[b]].has(seq) {
						row[b] = inf
						continue
					}
					row[b] = 0
					if int64(bidIdx[b]) >= tail {
						row[b] = 1e9
					}
				}
				if haveDead {
					row[dead] = 1e9
				}
				continue
			}
			row := bias[i*nKV : (i+1)*nKV]
			for j := range nKV {
				v := inf
				if !cells.isEmpty(uint32(j)) && cells.seq[j].has(seq) {
					if x := at(j); x <= q {
						switch {
						case x >= tail:
							v = 1e9
						case blkOf[j] >= 0:
							v = 0
						}
					}
				}
				row[j] = v
			}
		}
	}
	for _, w := range []struct {
		t *ops.Tensor
		v []int32
	}{{cellBlkT, cellBlk}, {blkCellsT, blkCells}, {blkPosT, blkPos}} {
		if err := c.set(w.t, typeI32, i32s(w.v), 4); err != nil {
			return err
		}
	}
	return c.setFloats(biasT, bias)
}

// gt2D is llama_kv_cell_ext::is_2d_gt: whether cell j's 2D position
// comes after (x, y), row first.
func gt2D(cells *kvCells, j int32, x, y int32) bool {
	return cells.extY[j] > y || (cells.extY[j] == y && cells.extX[j] > x)
}
