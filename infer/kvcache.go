// Port of llama.cpp src/llama-kv-cache.cpp and src/llama-kv-cache-msa.cpp
// (v0.5.0): llama_kv_cache (find_slot, apply_ubatch, the seq_* operations,
// update).

package infer

import (
	"cmp"
	"fmt"

	"github.com/ggload/ggload/ggml/ops"
	"github.com/ggload/ggload/internal/replay/arch"
	"github.com/ggload/ggload/internal/replay/graph"
)

// kvCache is one KV cache of the memory (llama_kv_cache): its streams'
// cells (one stream, or one per sequence for -np N without -kvu) and its
// tensors.
type kvCache struct {
	streams []*kvCells
	tensors []*ops.Tensor
	vTrans  bool   // V stored transposed
	nPad    uint32 // get_n_kv's padding
	rope    bool   // its keys are roped (its hparams' rope_type is not none): a K-shift rotates them

	copies [][2]int // streams whose buffers are copied at the next update: source, destination

	// what apply_ubatch keeps of a token beside its position: its 2D
	// position where the ubatches have several sections (M-RoPE), and
	// for a batch of embeddings, the token its cells stand for (the
	// n-gram embeddings' image or end-of-sequence token; -1: none)
	pos2d   bool
	embdTok int32

	// for the state's reads and writes (state.go): the layers in the
	// cache's order, each one's K and V (nil for MLA) and its V width
	// (n_embd_v_gqa of the layer); whether a cell's ext is saved
	// (has_cell_ext); n_seq_max
	layers  []kvLayer
	cellExt bool
	nSeqMax uint32
}

// kvLayer is one layer of a KV cache (llama_kv_cache's layers).
type kvLayer struct {
	il    int
	k, v  *ops.Tensor
	nEmbV int64
}

// ropeType is the rope_type of the hparams the cache keeps (an indexer
// cache's own, or the model's).
func ropeType(mc *arch.Cache, model *arch.Hparams) int64 {
	if mc.Hparams != nil {
		if c, ok := mc.Hparams.Fields["rope_type"]; ok {
			return c.V.I
		}
	}
	rt, _ := model.Field("rope_type")
	return rt
}

func newKVCache(mc *arch.Cache, ts []*ops.Tensor, model *arch.Hparams) *kvCache {
	kc := &kvCache{tensors: ts, vTrans: mc.VTrans, nPad: max(mc.NPad, 256), rope: ropeType(mc, model) != ropeTypeNone, embdTok: -1}
	if rt, _ := model.Field("rope_type"); rt == ropeTypeMRoPE || rt == ropeTypeIMRoPE {
		kc.pos2d = true
	}
	if heads, _ := model.Field("ple_n_heads"); heads > 0 {
		img, _ := model.Field("ple_image_token_id")
		eos, _ := model.Field("ple_eos_token_id")
		kc.embdTok = int32(cmp.Or(img, eos))
	}
	for range max(mc.Streams, 1) {
		kc.streams = append(kc.streams, newKVCells(mc.Cells, mc.NSWA, mc.SWAType))
	}
	kc.nSeqMax = mc.NSeqMax
	kc.cellExt = kc.pos2d || kc.embdTok >= 0
	for j, mt := range mc.Tensors {
		switch mt.Role {
		case 'k':
			kc.layers = append(kc.layers, kvLayer{il: mt.Layer, k: ts[j]})
		case 'v':
			if n := len(kc.layers); n > 0 && kc.layers[n-1].il == mt.Layer {
				l := &kc.layers[n-1]
				l.v, l.nEmbV = ts[j], mt.Ne[0]
				if kc.vTrans {
					l.nEmbV, _ = model.Call("n_embd_v_gqa", int64(mt.Layer))
				}
			}
		}
	}
	return kc
}

func (kc *kvCache) clone() *kvCache {
	d := *kc
	d.streams = make([]*kvCells, len(kc.streams))
	for i, s := range kc.streams {
		d.streams[i] = s.clone()
	}
	return &d
}

// streamOf is seq_to_stream: a sequence's stream.
func (kc *kvCache) streamOf(seq int32) int {
	if len(kc.streams) == 1 {
		return 0
	}
	return int(seq)
}

func (kc *kvCache) stream(seq int32) *kvCells { return kc.streams[kc.streamOf(seq)] }

// size is the cells of a stream.
func (kc *kvCache) size() uint32 { return kc.streams[0].size() }

// slot is a slot_info: for each stream a ubatch's sequence goes to, the
// cells its tokens take.
type slot struct {
	strm []int
	idxs [][]uint32
}

// findSlot is llama_kv_cache::find_slot: one stream takes every token;
// several take the tokens of their sequence (the ubatch holds as many of
// each, sequence after sequence).
func (kc *kvCache) findSlot(u *ubatch) (slot, bool) {
	if len(kc.streams) == 1 {
		idxs := kc.streams[0].findSlot(uint32(len(u.Tokens)))
		return slot{strm: []int{0}, idxs: [][]uint32{idxs}}, idxs != nil
	}
	seqs := u.seqsUnq()
	per := len(u.Tokens) / len(seqs)
	var sl slot
	for _, s := range seqs {
		idxs := kc.stream(s).findSlot(uint32(per))
		if idxs == nil {
			return slot{}, false
		}
		sl.strm = append(sl.strm, kc.streamOf(s))
		sl.idxs = append(sl.idxs, idxs)
	}
	return sl, true
}

// apply is apply_ubatch: the ubatch's tokens into the slot's cells, the
// tokens of the slot's k-th stream the ubatch's k-th run.
func (kc *kvCache) apply(sl slot, u *ubatch) {
	per := len(u.Tokens) / len(sl.strm)
	for k, st := range sl.strm {
		lo, hi := k*per, (k+1)*per
		var toks []int32
		switch {
		case u.Embd == nil:
			toks = u.Tokens[lo:hi]
		case kc.embdTok >= 0:
			toks = make([]int32, hi-lo)
			for i := range toks {
				toks[i] = kc.embdTok
			}
		}
		kc.streams[st].apply(sl.idxs[k], u.Pos[lo:hi], u.SeqIDs[lo:hi], toks, kc.pos2d)
	}
}

// view is what the graph of the ubatch sees of the cache: get_n_kv (the
// cells it attends over, padded so that the graphs of consecutive steps
// are alike) and the streams it spans.
func (kc *kvCache) view(sl slot) graph.KVView {
	v := graph.KVView{S0: uint32(sl.strm[0]), S1: uint32(sl.strm[0])}
	for _, st := range sl.strm {
		c := kc.streams[st]
		v.NKV = max(v.NKV, min(c.size(), max(kc.nPad, (c.usedMaxP1()+kc.nPad-1)/kc.nPad*kc.nPad)))
		v.S0, v.S1 = min(v.S0, uint32(st)), max(v.S1, uint32(st))
	}
	return v
}

// nPos is llama_kv_cache_msa_context::get_n_pos of its base cache: one
// past the greatest position of any sequence, padded as get_n_kv pads
// (at least one padding).
func (kc *kvCache) nPos() uint32 {
	m := int32(-1)
	for _, c := range kc.streams {
		for _, p := range c.pos {
			m = max(m, p)
		}
	}
	return max(kc.nPad, (uint32(m+1)+kc.nPad-1)/kc.nPad*kc.nPad)
}

// seqCp is llama_kv_cache::seq_cp: within a stream, the cells of src in
// [p0, p1) are dst's too; across streams, dst's stream becomes a copy of
// src's cells of src (all of them: llama.cpp asserts that the range is
// whole), its buffers copied at the next update.
func (kc *kvCache) seqCp(src, dst, p0, p1 int32) error {
	s0, s1 := kc.streamOf(src), kc.streamOf(dst)
	if s0 == s1 {
		if src != dst {
			kc.streams[s0].seqCp(src, dst, p0, p1)
		}
		return nil
	}
	size := int32(kc.size())
	if (p0 > 0 && p0+1 < size) || (p1 > 0 && p1+1 < size) {
		return fmt.Errorf("infer: seq_cp: positions [%d, %d) between streams: llama.cpp copies whole streams alone (GGML_ASSERT(is_full && \"seq_cp() is only supported for full KV buffers\"))", p0, p1)
	}
	kc.streams[s1].copyFrom(kc.streams[s0], src, dst)
	kc.copies = append(kc.copies, [2]int{s0, s1})
	return nil
}

// update is llama_kv_cache::update's stream copies: each copied stream's
// slice of every tensor of the cache (the streams are a tensor's last
// dimension) over the destination's. It reports whether it copied.
func (kc *kvCache) update(lib *ops.Lib) bool {
	if len(kc.copies) == 0 {
		return false
	}
	n := uint64(len(kc.streams))
	for _, cp := range kc.copies {
		for _, t := range kc.tensors {
			if t == nil {
				continue
			}
			per := lib.NBytes(t) / n
			buf := make([]byte, per)
			lib.TensorGet(t, buf, uintptr(uint64(cp[0])*per))
			lib.TensorSet(t, buf, uintptr(uint64(cp[1])*per))
		}
	}
	kc.copies = nil
	return true
}

// seqRm is llama_kv_cache::seq_rm: a sequence's stream, or every stream
// for a negative sequence.
func (kc *kvCache) seqRm(seq, p0, p1 int32) {
	if seq >= 0 {
		kc.stream(seq).seqRm(seq, p0, p1)
		return
	}
	for _, c := range kc.streams {
		c.seqRm(seq, p0, p1)
	}
}

// clear is llama_kv_cache::clear's cells: every stream's empty, its head
// at the start.
func (kc *kvCache) clear() {
	for _, c := range kc.streams {
		c.reset()
		c.head = 0
	}
}

// hasShift is llama_kv_cache::get_has_shift: some stream's cells moved.
func (kc *kvCache) hasShift() bool {
	for _, c := range kc.streams {
		if c.hasShift {
			return true
		}
	}
	return false
}

// shifts is set_input_k_shift's input: each cell's shift, stream after
// stream (0 for an empty cell).
func (kc *kvCache) shifts() []int32 {
	out := make([]int32, 0, len(kc.streams)*int(kc.size()))
	for _, c := range kc.streams {
		for i, p := range c.pos {
			v := int32(0)
			if p != -1 {
				v = c.shift[i]
			}
			out = append(out, v)
		}
	}
	return out
}
