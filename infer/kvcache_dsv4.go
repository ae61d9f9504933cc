// Port of llama.cpp src/llama-kv-cache-dsv4.cpp (v0.5.0): DeepSeek-V4's
// memory, llama_kv_cache_dsv4, and its compressor states.

package infer

import (
	"encoding/binary"
	"fmt"
	"math"
	"slices"

	"github.com/ggload/ggload/ggml/ops"
	"github.com/ggload/ggload/internal/replay/arch"
	"github.com/ggload/ggload/internal/replay/cpp"
	"github.com/ggload/ggload/internal/replay/graph"
)

// DeepSeek-V4's memory (the pin's llama_kv_cache_dsv4): a raw iSWA pair
// of KV caches that holds the tokens (its SWA cache is the one the graph
// reads), three compressed caches the graph writes blocks of rows to (CSA,
// HCA and the lightning indexer's: storage alone, their cells never
// hold a token) and three compressor states, the partial blocks carried
// from one ubatch to the next, each with n_rs_seq rollback planes. Every
// one keeps a stream per sequence. Its bookkeeping is init_batch's: the
// ubatches' raw slots, found on the raw pair as the iSWA pair finds
// them, and for each compressor a plan of the rows each ubatch reads and
// writes (comp_plan), which the graph's inputs take.

// The compression ratios of the CSA (and indexer) and HCA layers.
const (
	dsv4CSARatio = 4
	dsv4HCARatio = 128
)

// dsv4Mem is the DSV4 memory beside its KV caches, which are the
// context's caches: the raw base and SWA caches, then the CSA, HCA and
// indexer caches.
type dsv4Mem struct {
	nSeqMax uint32
	nRSSeq  uint32
	// rsIdx is each sequence's pending rollback: the snapshot plane the
	// compressor states of its next ubatch start from, 0 for none
	rsIdx  []uint32
	states [3]*dsv4State // CSA, HCA, indexer

	cur *dsv4Step // the ubatch whose graph is being built and filled
}

// dsv4State is a compressor state (llama_dsv4_comp_state): per layer a
// KV and a score tensor of state_size rows, in planes of n_stream
// streams: the current plane, then each rollback plane.
type dsv4State struct {
	size, nStream, nRSSeq uint32
	tensors               []*ops.Tensor
	copies                [][2]uint32 // streams copied at the next update: source, destination
}

func newDSV4State(mc *arch.Cache, ts []*ops.Tensor) *dsv4State {
	return &dsv4State{size: mc.Cells, nStream: max(mc.Streams, 1), nRSSeq: mc.NRSSeq, tensors: ts}
}

// planes is the number of stream planes of each tensor.
func (st *dsv4State) planes() uint64 { return uint64(st.nStream) * uint64(1+st.nRSSeq) }

// clear is llama_dsv4_comp_state::clear with data: a sequence's planes
// (its stream's, current and rollback) zeroed, or, for a negative one,
// every plane.
func (st *dsv4State) clear(lib *ops.Lib, seq int32) {
	for _, t := range st.tensors {
		if seq < 0 {
			zeroBytes(lib, t, 0, lib.NBytes(t))
			continue
		}
		per := lib.NBytes(t) / st.planes()
		for d := range uint64(1 + st.nRSSeq) {
			zeroBytes(lib, t, (d*uint64(st.nStream)+uint64(seq))*per, per)
		}
	}
}

// applyCopies is apply_copies: each pending copy's current plane of the
// source stream over the destination's.
func (st *dsv4State) applyCopies(lib *ops.Lib) bool {
	if len(st.copies) == 0 {
		return false
	}
	for _, cp := range st.copies {
		for _, t := range st.tensors {
			per := lib.NBytes(t) / st.planes()
			buf := make([]byte, per)
			lib.TensorGet(t, buf, uintptr(uint64(cp[0])*per))
			lib.TensorSet(t, buf, uintptr(uint64(cp[1])*per))
		}
	}
	st.copies = nil
	return true
}

// zeroBytes zeroes n bytes of a tensor from off.
func zeroBytes(lib *ops.Lib, t *ops.Tensor, off, n uint64) {
	const chunk = 1 << 20
	zero := make([]byte, min(n, chunk))
	for n > 0 {
		k := min(n, chunk)
		lib.TensorSet(t, zero[:k], uintptr(off))
		off += k
		n -= k
	}
}

// the DSV4 memory's KV caches, by their place in the context's caches
func (c *Context) dsv4Base() *kvCache { return c.caches[0] }
func (c *Context) dsv4SWA() *kvCache  { return c.caches[1] }

// dsv4Comp is the compressed cache of compressor k (CSA, HCA, indexer).
func (c *Context) dsv4Comp(k int) *kvCache { return c.caches[2+k] }

// dsv4Ratio and dsv4Overlap are compressor k's ratio and whether its
// blocks overlap the previous block (CSA's and the indexer's do).
func dsv4Ratio(k int) uint32 { return [3]uint32{dsv4CSARatio, dsv4HCARatio, dsv4CSARatio}[k] }
func dsv4Overlap(k int) bool { return k != 1 }

// dsv4Batch is what init_batch prepared for a batch: its ubatches, each
// one's raw write ubatch and slots, its compressed caches' slot infos and
// its plans.
type dsv4Batch struct {
	ubs      []*ubatch
	writes   []*ubatch
	base     []slot
	swaWrite []slot
	swaRead  []slot
	comp     [][3]graph.SlotInfo
	plans    [][3]*graph.CompPlan
}

// dsv4Step is one ubatch of a prepared batch, applied: its graph's view
// of the memory and the slot its raw tokens went to.
type dsv4Step struct {
	view     *graph.DSV4View
	swaWrite slot
}

// coupled says whether a token of the ubatch is in several sequences.
func coupled(u *graph.Ubatch) bool {
	for _, ids := range u.SeqIDs {
		if len(ids) > 1 {
			return true
		}
	}
	return false
}

// nSeqTokens is the ubatch's n_seq_tokens: its tokens per sequence set
// for an equal split, 1 for a simple one.
func nSeqTokens(u *ubatch) int {
	if u.NSeqs <= 0 {
		return 1
	}
	return len(u.Tokens) / u.NSeqs
}

// dsv4RawWrite is the ubatch the raw caches take: the ubatch itself, or
// where a token is in several sequences, each token once for each of its
// sequences, sequence after sequence (an equal split of the ubatch's
// sequences, which must have as many tokens each).
func dsv4RawWrite(u *ubatch) (*ubatch, error) {
	if !coupled(u.Ubatch) {
		return u, nil
	}
	if u.Embd != nil {
		return nil, fmt.Errorf("infer: decode: a ubatch of embeddings whose tokens are in several sequences: llama.cpp's DSV4 memory throws (DSV4 coupled embedding ubatches are not supported)")
	}
	seqs := u.seqsUnq()
	w := &ubatch{Ubatch: &graph.Ubatch{NSeqs: len(seqs), Equal: true}}
	count := -1
	for _, s := range seqs {
		k := 0
		for i, ids := range u.SeqIDs {
			if !slices.Contains(ids, s) {
				continue
			}
			w.Tokens = append(w.Tokens, u.Tokens[i])
			w.Pos = append(w.Pos, u.Pos[i])
			w.SeqIDs = append(w.SeqIDs, []int32{s})
			w.Output = append(w.Output, false)
			k++
		}
		if count >= 0 && k != count {
			return nil, fmt.Errorf("infer: decode: the ubatch's sequences have %d and %d tokens: llama.cpp's DSV4 memory throws (DSV4 coupled raw writes require equal sequence lengths)", count, k)
		}
		count = k
	}
	return w, nil
}

// dsv4Prepare is make_context of llama_kv_cache_dsv4::init_batch for
// ubatches: their raw write ubatches and their slots in the raw pair
// (found on copies of its cells, each ubatch placed before the next is
// looked for), then the compressed caches' slot infos and the plans.
// nil where a ubatch finds no slot.
func (c *Context) dsv4Prepare(ubs []*ubatch) (*dsv4Batch, error) {
	d := c.dsv4
	b := &dsv4Batch{ubs: ubs}
	for _, u := range ubs {
		w, err := dsv4RawWrite(u)
		if err != nil {
			return nil, err
		}
		b.writes = append(b.writes, w)
	}
	find := func(kc *kvCache) ([]slot, bool) {
		dry := kc
		if len(b.writes) > 1 {
			dry = kc.clone()
		}
		out := make([]slot, len(b.writes))
		for k, w := range b.writes {
			sl, ok := dry.findSlot(w)
			if !ok {
				return nil, false
			}
			if len(b.writes) > 1 {
				dry.apply(sl, w)
			}
			out[k] = sl
		}
		return out, true
	}
	var ok bool
	if b.base, ok = find(c.dsv4Base()); !ok {
		return nil, nil
	}
	if b.swaWrite, ok = find(c.dsv4SWA()); !ok {
		return nil, nil
	}
	for k, u := range ubs {
		read := b.swaWrite[k]
		if coupled(u.Ubatch) {
			// the raw cache is read in the stream of the first token's
			// first sequence
			seq := u.SeqIDs[0][0]
			i := slices.Index(read.strm, int(seq))
			if i < 0 {
				return nil, fmt.Errorf("infer: decode: llama.cpp's DSV4 memory throws (DSV4 raw write stream not found for coupled read)")
			}
			read = slot{strm: []int{read.strm[i]}, idxs: [][]uint32{read.idxs[i]}}
		}
		b.swaRead = append(b.swaRead, read)
	}
	b.plans = make([][3]*graph.CompPlan, len(ubs))
	for k := range 3 {
		st := d.states[k]
		rs := slices.Clone(d.rsIdx)
		for i, u := range ubs {
			p, err := dsv4Plan(u, dsv4Ratio(k), dsv4Overlap(k), st.size, c.dsv4Comp(k).size(), st.nStream, st.nRSSeq, rs)
			if err != nil {
				return nil, err
			}
			b.plans[i][k] = p
			// a sequence's pending rollback is its first ubatch's
			for _, s := range u.seqsUnq() {
				if int(s) < len(rs) {
					rs[s] = 0
				}
			}
		}
	}
	for _, u := range ubs {
		var sis [3]graph.SlotInfo
		for k := range 3 {
			si, err := dsv4CompSlot(u, uint32(len(c.dsv4Comp(k).streams)))
			if err != nil {
				return nil, err
			}
			sis[k] = si
		}
		b.comp = append(b.comp, sis)
	}
	return b, nil
}

// dsv4StreamOffset is a sequence's first row in a layout of nStream
// streams of size rows each.
func dsv4StreamOffset(nStream uint32, seq int32, size uint32) (int64, error) {
	if nStream <= 1 {
		return 0, nil
	}
	if seq < 0 || uint32(seq) >= nStream {
		return 0, fmt.Errorf("infer: decode: llama.cpp's DSV4 memory throws (DSV4 sequence id out of stream range)")
	}
	return int64(seq) * int64(size), nil
}

// dsv4GraphStreams is the streams a ubatch's attention spans: one per
// sequence where the memory has a stream per sequence and no token is in
// several (whose compressor state is shared), else one.
func dsv4GraphStreams(u *ubatch, nStream uint32) int64 {
	if nStream <= 1 || len(u.seqsUnq()) <= 1 || coupled(u.Ubatch) {
		return 1
	}
	return int64(len(u.seqsUnq()))
}

// dsv4CompSlot is the slot info of a compressed cache of nStream streams
// for a ubatch: the streams of its graph (one per sequence, or the first
// sequence's), whose cells the graph does not index.
func dsv4CompSlot(u *ubatch, nStream uint32) (graph.SlotInfo, error) {
	seqs := u.seqsUnq()
	if nStream <= 1 && len(seqs) > 1 {
		return graph.SlotInfo{}, fmt.Errorf("infer: decode: llama.cpp's DSV4 memory throws (DSV4 single compressed stream cannot serve multiple sequences)")
	}
	ns := int(dsv4GraphStreams(u, nStream))
	si := graph.SlotInfo{S0: 0, S1: 0}
	if nStream > 1 {
		si.S0 = maxSeq
	}
	for s := range ns {
		strm := uint32(0)
		if nStream > 1 {
			strm = uint32(seqs[s])
		}
		si.S0, si.S1 = min(si.S0, strm), max(si.S1, strm)
		si.Strm = append(si.Strm, int32(strm))
		si.Idxs = append(si.Idxs, []uint32{0})
	}
	if nStream > 1 && int(si.S1-si.S0+1) != ns {
		return graph.SlotInfo{}, fmt.Errorf("infer: decode: llama.cpp's DSV4 memory throws (DSV4 compressed streams are not contiguous in ubatch)")
	}
	return si, nil
}

// dsv4Plan is dsv4_build_comp_plan: for a compressor of ratio rows a
// block (its blocks overlapping the previous one's rows, or not), a state
// of stateSize rows per stream and a compressed cache of kvSize rows per
// stream, the ubatch's rows: each token's row of the state (its position
// modulo the ratio, for the positional embedding), the state rows the
// ubatch leaves (the last token of each), the blocks its tokens complete
// (the rows they read, from the state or the ubatch's own tokens, the
// cache row each writes, its position), padded with a masked block where
// the graph needs one to keep its shape, how many compressed rows each
// token sees, and with rollback snapshots, the restore of a pending
// rollback and the snapshot of the state before each of the last tokens.
func dsv4Plan(u *ubatch, ratio uint32, overlap bool, stateSize, kvSize, nStream, nRSSeq uint32, rsIdx []uint32) (*graph.CompPlan, error) {
	n := len(u.Tokens)
	seqs := u.seqsUnq()
	p := &graph.CompPlan{NVisible: make([]int32, n), NStream: dsv4GraphStreams(u, nStream)}
	if nStream <= 1 && len(seqs) > 1 {
		return nil, fmt.Errorf("infer: decode: llama.cpp's DSV4 memory throws (DSV4 single compressed stream cannot serve multiple sequences)")
	}
	stateRows := int64(stateSize) * int64(nStream)
	type persistRow struct{ dst, src, pos int32 }
	var persist []persistRow
	var prevReads, curReads []int32
	type key struct{ seq, pos int32 }
	tokenAt := map[key]int{}
	for i, ids := range u.SeqIDs {
		for _, s := range ids {
			tokenAt[key{s, u.Pos[i]}] = i
		}
	}
	// the row a block reads for position pos of sequence seq: the
	// ubatch's own token's (the graph's rows after the state's), or the
	// state's; before position 0 a zero row the graph appends last
	source := func(seq, pos int32) (int32, error) {
		if pos < 0 {
			return int32(stateRows + int64(n)), nil
		}
		if i, ok := tokenAt[key{seq, pos}]; ok {
			return int32(stateRows + int64(i)), nil
		}
		off, err := dsv4StreamOffset(nStream, seq, stateSize)
		return int32(off + int64(uint32(pos)%stateSize)), err
	}
	writes := map[int32]uint32{}
	for i, pos := range u.Pos {
		if pos < 0 {
			continue
		}
		p.StatePos = append(p.StatePos, int32(uint32(pos)%ratio))
		vis := int64(pos+1) / int64(ratio)
		p.NVisible[i] = int32(vis)
		p.NKV = max(p.NKV, vis)
		for _, seq := range u.SeqIDs[i] {
			off, err := dsv4StreamOffset(nStream, seq, stateSize)
			if err != nil {
				return nil, err
			}
			row := int32(off + int64(uint32(pos)%stateSize))
			if k := slices.IndexFunc(persist, func(r persistRow) bool { return r.dst == row }); k < 0 {
				persist = append(persist, persistRow{row, int32(i), pos})
			} else if pos > persist[k].pos {
				persist[k].src, persist[k].pos = int32(i), pos
			}
			if (uint32(pos)+1)%ratio != 0 {
				continue
			}
			start := pos + 1 - int32(ratio)
			cacheOff, err := dsv4StreamOffset(nStream, seq, kvSize)
			if err != nil {
				return nil, err
			}
			p.WriteIdxs = append(p.WriteIdxs, cacheOff+int64(uint32(pos)/ratio))
			p.WritePos = append(p.WritePos, start)
			writes[seq]++
			reads := func(from int32, to *[]int32) error {
				for j := range int32(ratio) {
					r, err := source(seq, from+j)
					if err != nil {
						return err
					}
					*to = append(*to, r)
				}
				return nil
			}
			if overlap {
				err = reads(start-int32(ratio), &prevReads)
				if err == nil {
					err = reads(start, &curReads)
				}
			} else {
				err = reads(start, &p.ReadIdxs)
			}
			if err != nil {
				return nil, err
			}
		}
	}
	// a masked block written to the cache's last row, reading token i's
	// row ratio times over
	dummy := func(seq int32, i int) error {
		cacheOff, err := dsv4StreamOffset(nStream, seq, kvSize)
		if err != nil {
			return err
		}
		r, err := source(seq, u.Pos[i])
		if err != nil {
			return err
		}
		p.WriteIdxs = append(p.WriteIdxs, cacheOff+int64(kvSize)-1)
		p.WritePos = append(p.WritePos, 0)
		for range ratio {
			if overlap {
				prevReads = append(prevReads, r)
				curReads = append(curReads, r)
			} else {
				p.ReadIdxs = append(p.ReadIdxs, r)
			}
		}
		return nil
	}
	firstToken := func(seq int32) int {
		for i, pos := range u.Pos {
			if pos >= 0 && (seq < 0 || slices.Contains(u.SeqIDs[i], seq)) {
				return i
			}
		}
		return -1
	}
	if ratio == dsv4CSARatio && len(p.StatePos) > 0 {
		// as many blocks per sequence as the reserve's plan has
		if coupled(u.Ubatch) {
			if len(p.WriteIdxs) == 0 {
				i := firstToken(-1)
				if err := dummy(u.SeqIDs[i][0], i); err != nil {
					return nil, err
				}
			}
		} else {
			blocks := (uint32(max(1, nSeqTokens(u))) + ratio - 1) / ratio
			for _, seq := range seqs {
				w := writes[seq]
				if w >= blocks {
					continue
				}
				if w+1 != blocks {
					return nil, fmt.Errorf("infer: decode: llama.cpp's DSV4 memory throws (DSV4 CSA sequence positions are not contiguous)")
				}
				i := firstToken(seq)
				if err := dummy(seq, i); err != nil {
					return nil, err
				}
			}
		}
	}
	if ratio == dsv4HCARatio && len(p.StatePos) > 0 && len(p.WriteIdxs) == 0 {
		// the graph keeps its compression when no block completes
		i := firstToken(-1)
		if err := dummy(u.SeqIDs[i][0], i); err != nil {
			return nil, err
		}
	}
	if overlap {
		p.ReadIdxs = append(append(p.ReadIdxs, prevReads...), curReads...)
	}
	// the mask is there before the first block is, of a width padded so
	// that the graph stays the same from one block to the next
	p.NKV = max((p.NKV+255)/256*256, 256)
	slices.SortFunc(persist, func(a, b persistRow) int { return int(a.dst) - int(b.dst) })
	for _, r := range persist {
		p.PersistSrc = append(p.PersistSrc, r.src)
		p.PersistDst = append(p.PersistDst, r.dst)
	}
	if nRSSeq > 0 {
		// restore and snapshot entries for every stream of the layout, so
		// that the graph's shape does not depend on the ubatch's sequences
		for stream := range nStream {
			seq := int32(-1)
			switch {
			case nStream == 1 && len(seqs) > 0:
				seq = seqs[0]
			case nStream > 1 && slices.Contains(seqs, int32(stream)):
				seq = int32(stream)
			}
			off := int64(stream) * int64(stateSize)
			rollback := uint32(0)
			if seq >= 0 && int(seq) < len(rsIdx) {
				rollback = rsIdx[seq]
			}
			srcPlane := int64(0)
			if rollback > 0 && rollback <= nRSSeq {
				srcPlane = int64(rollback) * stateRows
			}
			for r := range int64(stateSize) {
				p.RestoreSrc = append(p.RestoreSrc, int32(srcPlane+off+r))
				p.RestoreDst = append(p.RestoreDst, int32(off+r))
			}
			var toks []int
			if seq >= 0 {
				for i, ids := range u.SeqIDs {
					if slices.Contains(ids, seq) {
						toks = append(toks, i)
					}
				}
			}
			scratch := stateRows * int64(1+nRSSeq)
			for dp := range int64(nRSSeq) {
				plane := (dp + 1) * stateRows
				prefix := 0
				if int(dp+1) <= len(toks) {
					prefix = len(toks) - int(dp+1)
				}
				for r := range int64(stateSize) {
					src := int32(off + r)
					for _, i := range toks[:prefix] {
						if u.Pos[i] >= 0 && int64(uint32(u.Pos[i])%stateSize) == r {
							src = int32(scratch + int64(i))
						}
					}
					if len(toks) == 0 {
						src = int32(plane + off + r) // (the plane onto itself)
					}
					p.SnapshotSrc = append(p.SnapshotSrc, src)
					p.SnapshotDst = append(p.SnapshotDst, int32(plane+off+r))
				}
			}
		}
	}
	return p, nil
}

// dsv4Slot is a slot as the graph's slot info: its streams and cells.
func dsv4Slot(sl slot) graph.SlotInfo {
	si := graph.SlotInfo{S0: uint32(sl.strm[0]), S1: uint32(sl.strm[0])}
	for k, st := range sl.strm {
		si.S0, si.S1 = min(si.S0, uint32(st)), max(si.S1, uint32(st))
		si.Strm = append(si.Strm, int32(st))
		si.Idxs = append(si.Idxs, slices.Clone(sl.idxs[k]))
	}
	return si
}

// decodeDSV4 is llama_context::decode's loop over the ubatches of
// llama_kv_cache_dsv4::init_batch: with one sequence, the batch split
// simply (as an iSWA pair splits it), else (or where that finds no
// slot) equally, sequence by sequence where each has its stream, by
// sequence set where a token is in several; each sequence's last
// n_rs_seq + 1 tokens kept in one ubatch.
func (c *Context) decodeDSV4(b *graph.Ubatch, nOutAll int) error {
	d := c.dsv4
	n := len(b.Tokens)
	perSeq := d.nSeqMax > 1
	var batch *dsv4Batch
	var err error
	if !perSeq {
		if batch, err = c.dsv4Prepare(splitSimple(b, int(c.nUBatch))); err != nil {
			return err
		}
	}
	if batch == nil {
		var ubs []*ubatch
		if coupled(b) {
			ubs = splitSeq(b, int(c.nUBatch))
		} else {
			keep := 0
			if d.nRSSeq > 0 {
				keep = int(d.nRSSeq) + 1
			}
			if ubs, err = splitEqual(b, int(c.nUBatch), perSeq, keep); err != nil {
				return err
			}
		}
		if batch, err = c.dsv4Prepare(ubs); err != nil {
			return err
		}
	}
	if batch == nil {
		return fmt.Errorf("infer: decode: %w for batch of size %d", ErrNoMemorySlot, n)
	}
	// the context made: each sequence's pending rollback is its plans'
	if d.nRSSeq > 0 {
		for _, u := range batch.ubs {
			for _, ids := range u.SeqIDs {
				for _, s := range ids {
					if s >= 0 && uint32(s) < d.nSeqMax {
						d.rsIdx[s] = 0
					}
				}
			}
		}
	}
	c.startOutputs(n, nOutAll)
	defer func() { d.cur = nil }()
	for k, u := range batch.ubs {
		nOut := u.outputs(nOutAll == n)
		w := batch.writes[k]
		c.dsv4Base().apply(batch.base[k], w)
		swa := c.dsv4SWA()
		swa.apply(batch.swaWrite[k], w)
		view := &graph.DSV4View{Write: w.Ubatch, RawWrite: dsv4Slot(batch.swaWrite[k]), RawRead: dsv4Slot(batch.swaRead[k]),
			RawNKV: swa.view(batch.swaRead[k]).NKV, Comp: batch.comp[k], Plans: batch.plans[k]}
		d.cur = &dsv4Step{view: view, swaWrite: batch.swaWrite[k]}
		if err := c.step(u, nOut, nil, nil, nil); err != nil {
			c.forgetUbatch(u)
			return err
		}
	}
	return nil
}

// key is what the DSV4 input's can_reuse compares of a graph: the
// raw write's tokens and the raw mask's width, the graph's streams, the
// length of each of the plans' inputs and their masks' widths.
func (st *dsv4Step) key() string {
	v := st.view
	k := fmt.Sprint(len(v.Write.Tokens), v.RawNKV)
	for _, p := range v.Plans {
		k += fmt.Sprint(" ", p.NStream, p.NKV, len(p.StatePos), len(p.PersistSrc), len(p.PersistDst), len(p.RestoreSrc), len(p.RestoreDst),
			len(p.SnapshotSrc), len(p.SnapshotDst), len(p.ReadIdxs), len(p.WriteIdxs), len(p.WritePos))
	}
	return k
}

// dsv4SeqRm is llama_kv_cache_dsv4::seq_rm: a sequence's positions from
// p0 on (p1 must be open). Past its last position, nothing but the
// caches' bookkeeping; within its last n_rs_seq positions, a rollback
// (the raw caches' cells removed, the compressor states to be restored
// from the snapshot plane at the next ubatch: one pending at a time);
// from its start (or every sequence's), the raw caches' cells and the
// compressed caches and states wholly. What llama.cpp refuses (returns
// false for) is an error.
func (c *Context) dsv4SeqRm(seq, p0, p1 int32) error {
	d := c.dsv4
	if p1 >= 0 {
		return fmt.Errorf("infer: seq_rm: the DSV4 memory removes a sequence's positions to its end alone (p1 = %d)", p1)
	}
	raw := func(seq, p0 int32) {
		c.dsv4Base().seqRm(seq, p0, -1)
		c.dsv4SWA().seqRm(seq, p0, -1)
	}
	if p0 > 0 {
		if seq < 0 || uint32(seq) >= d.nSeqMax {
			return fmt.Errorf("infer: seq_rm: the DSV4 memory removes one sequence's positions from %d, not sequence %d's", p0, seq)
		}
		last := c.dsv4SWA().stream(seq).seqPosMax(seq)
		if p0 > last {
			raw(seq, p0)
			for k := range 3 {
				c.dsv4Comp(k).seqRm(seq, p0/int32(dsv4Ratio(k)), -1)
			}
			return nil
		}
		if d.nRSSeq == 0 {
			return fmt.Errorf("infer: seq_rm: the DSV4 memory without rollback snapshots (n_rs_seq 0) removes no part of sequence %d (positions %d to %d)", seq, p0, last)
		}
		back := last - (p0 - 1)
		if back < 1 || back > int32(d.nRSSeq) {
			return fmt.Errorf("infer: seq_rm: sequence %d's last %d positions: the DSV4 memory rolls back %d at most (n_rs_seq)", seq, back, d.nRSSeq)
		}
		if d.rsIdx[seq] != 0 {
			return fmt.Errorf("infer: seq_rm: sequence %d has a rollback pending: the DSV4 memory takes one before the next decode", seq)
		}
		raw(seq, p0)
		d.rsIdx[seq] = uint32(back)
		return nil
	}
	if seq < 0 {
		seq = -1
	}
	raw(seq, p0)
	c.dsv4ClearCompressed(seq)
	return nil
}

// dsv4ClearCompressed is clear_compressed with data: a sequence's (or,
// negative, every sequence's) compressed caches' cells and rows, its
// compressor states' planes and its pending rollback.
func (c *Context) dsv4ClearCompressed(seq int32) {
	d := c.dsv4
	for k := range 3 {
		kc := c.dsv4Comp(k)
		if seq < 0 {
			kc.clear()
			for _, t := range kc.tensors {
				if t != nil {
					zeroBytes(c.lib, t, 0, c.lib.NBytes(t))
				}
			}
			continue
		}
		kc.seqRm(seq, -1, -1)
		n := uint64(len(kc.streams))
		for _, t := range kc.tensors {
			if t != nil {
				per := c.lib.NBytes(t) / n
				zeroBytes(c.lib, t, uint64(seq)*per, per)
			}
		}
	}
	for _, st := range d.states {
		st.clear(c.lib, seq)
	}
	if seq < 0 {
		clear(d.rsIdx)
	} else {
		d.rsIdx[seq] = 0
	}
}

// dsv4SeqCp is llama_kv_cache_dsv4::seq_cp: whole sequences alone; the
// raw and compressed caches' streams copied as a KV cache's are, each
// compressor state's destination cleared and its current plane copied at
// the next update.
func (c *Context) dsv4SeqCp(src, dst, p0, p1 int32) error {
	d := c.dsv4
	if p0 > 0 || p1 >= 0 {
		return fmt.Errorf("infer: seq_cp: positions [%d, %d): llama.cpp's DSV4 memory copies whole sequences alone (GGML_ASSERT(p0 <= 0 && p1 < 0 && \"DSV4 only supports full sequence copies\"))", p0, p1)
	}
	for i, kc := range c.caches {
		q0, q1 := p0, p1
		if i >= 2 {
			q0, q1 = -1, -1
		}
		if err := kc.seqCp(src, dst, q0, q1); err != nil {
			return err
		}
	}
	for _, st := range d.states {
		if src == dst {
			continue
		}
		st.clear(c.lib, dst)
		st.copies = append(st.copies, [2]uint32{uint32(src), uint32(dst)})
	}
	if src != dst {
		d.rsIdx[dst] = 0
	}
	return nil
}

// dsv4SeqKeep is llama_kv_cache_dsv4::seq_keep: the raw caches keep the
// sequence alone in its stream; every other sequence leaves them, its
// compressed rows and states cleared.
func (c *Context) dsv4SeqKeep(seq int32) {
	c.dsv4Base().stream(seq).seqKeep(seq)
	c.dsv4SWA().stream(seq).seqKeep(seq)
	for id := range int32(c.dsv4.nSeqMax) {
		if id == seq {
			continue
		}
		c.dsv4Base().seqRm(id, -1, -1)
		c.dsv4SWA().seqRm(id, -1, -1)
		c.dsv4ClearCompressed(id)
	}
}

// dsv4Move is seq_add's and seq_div's on the DSV4 memory, which moves
// its raw pair's cells alone. llama.cpp lets the move be, though the
// memory says it cannot shift, and its next decode's K-shift of the raw
// cache ends its process (SIGFPE): a move that would leave a cell to
// shift is refused, nothing moved; one that moves none (an empty range,
// a move by 0, a division by 1) goes on (the raw caches' heads go back
// as llama.cpp's do).
func (c *Context) dsv4Move(op string, seq int32, kv func(*kvCells)) error {
	for _, kc := range c.caches[:2] {
		dry := kc.stream(seq).clone()
		kv(dry)
		if dry.hasShift {
			return fmt.Errorf("infer: %s: %s: %w; llama.cpp moves the raw cache's cells, and its next decode dies shifting them (SIGFPE)", op, c.rep.Run.Arch, c.canShift())
		}
	}
	for _, kc := range c.caches[:2] {
		kv(kc.stream(seq))
	}
	return nil
}

// dsv4SeqPosMax is the memory's last position of a sequence: its raw
// SWA cache's (-1 for none, or a sequence past n_seq_max). It is the
// memory's first position too (seq_pos_min): the compressed state cannot
// go back within the window.
func (c *Context) dsv4SeqPosMax(seq int32) int32 {
	if seq < 0 || uint32(seq) >= c.dsv4.nSeqMax {
		return -1
	}
	return c.dsv4SWA().stream(seq).seqPosMax(seq)
}

// setDSV4 is llm_graph_input_dsv4::set_input: the raw input's (the rows
// the raw tokens go to, the raw SWA cache's mask, its rotation), then
// each compressor's plan and mask (a token sees its first n_visible
// compressed rows) and rotation.
func (c *Context) setDSV4(inp *cpp.Object, in *ubatch) error {
	cur := c.dsv4.cur
	if cur == nil {
		return fmt.Errorf("a DSV4 input without its ubatch's plan")
	}
	raw := sub(inp, "inp_raw")
	if raw == nil {
		return fmt.Errorf("a DSV4 input without its raw part")
	}
	swa := c.dsv4SWA()
	if t := member(raw, "self_k_idxs"); t != nil {
		size := int64(swa.size())
		var cells []int64
		for k, st := range cur.swaWrite.strm {
			for _, idx := range cur.swaWrite.idxs[k] {
				cells = append(cells, int64(st)*size+int64(idx))
			}
		}
		if err := c.set(t, typeI64, i64s(cells), 8); err != nil {
			return err
		}
	}
	if t := member(raw, "self_kq_mask"); t != nil {
		if err := c.setMask(t, in.Ubatch, swa); err != nil {
			return err
		}
	}
	if t := member(raw, "self_k_rot"); t != nil {
		if err := c.setHadamard(t); err != nil {
			return err
		}
	}
	for k, name := range []string{"inp_csa", "inp_hca", "inp_lid"} {
		ci := sub(inp, name)
		if ci == nil {
			return fmt.Errorf("a DSV4 input without its %s", name)
		}
		p := cur.view.Plans[k]
		for _, x := range []struct {
			name string
			vals []int32
		}{{"state_pos", p.StatePos}, {"state_persist_src_idxs", p.PersistSrc}, {"state_persist_dst_idxs", p.PersistDst},
			{"state_restore_src_idxs", p.RestoreSrc}, {"state_restore_dst_idxs", p.RestoreDst},
			{"state_snapshot_src_idxs", p.SnapshotSrc}, {"state_snapshot_dst_idxs", p.SnapshotDst},
			{"state_read_idxs", p.ReadIdxs}, {"state_write_pos", p.WritePos}} {
			if t := member(ci, x.name); t != nil {
				if err := c.set(t, typeI32, i32s(x.vals), 4); err != nil {
					return err
				}
			}
		}
		if t := member(ci, "state_write_idxs"); t != nil {
			if err := c.set(t, typeI64, i64s(p.WriteIdxs), 8); err != nil {
				return err
			}
		}
		if t := member(ci, "kq_mask"); t != nil {
			n := int64(len(in.Tokens))
			if p.NStream <= 0 || n%p.NStream != 0 || t.Ne[0] != p.NKV || t.Ne[1] != n/p.NStream || t.Ne[2] != 1 || t.Ne[3] != p.NStream {
				return fmt.Errorf("a DSV4 %s mask of %v for %d tokens in %d streams over %d rows", name, t.Ne, n, p.NStream, p.NKV)
			}
			vals := make([]float32, n*t.Ne[0])
			ninf := float32(math.Inf(-1))
			for i := range n {
				for j := range t.Ne[0] {
					if j >= int64(p.NVisible[i]) {
						vals[i*t.Ne[0]+j] = ninf
					}
				}
			}
			if err := c.setFloats(t, vals); err != nil {
				return err
			}
		}
		if t := member(ci, "k_rot"); t != nil {
			if err := c.setHadamard(t); err != nil {
				return err
			}
		}
	}
	return nil
}

func i64s(v []int64) []byte {
	b := make([]byte, 8*len(v))
	for i, x := range v {
		binary.LittleEndian.PutUint64(b[8*i:], uint64(x))
	}
	return b
}
