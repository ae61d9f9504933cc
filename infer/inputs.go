// Port of llama.cpp src/llama-graph.cpp and src/llama-kv-cache.cpp
// (v0.5.0): the graph inputs' set_input.

package infer

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"slices"
	"strings"

	"github.com/ggload/ggload/ggml/ops"
	"github.com/ggload/ggload/internal/replay/cpp"
	"github.com/ggload/ggload/internal/replay/graph"
)

// The graph inputs' set_input, as llama-graph.cpp and llama-kv-cache.cpp
// write them: the tokens, the positions, the cache's row indices and the
// KQ mask, the output ids. An input this package does not set yet is
// refused before the graph is computed.

// ggml's type ids of the inputs.
const (
	typeF32 = 0
	typeF16 = 1
	typeI32 = 26
	typeI64 = 27
)

func (c *Context) setInputs(st *graph.Step, u *ubatch, nOutputs int, slots []slot) error {
	for _, in := range st.Inputs() {
		if in.Class == "llm_graph_input_embd" && u.Embd != nil {
			// (set_input writes the embeddings then, not the tokens)
			if err := unallocatedOf(in, "embd"); err != nil {
				return fmt.Errorf("infer: decode: %s: %w", c.rep.Run.Arch, err)
			}
			if err := c.setTokens(in, u.Ubatch); err != nil {
				return fmt.Errorf("infer: decode: %s: %w", c.rep.Run.Arch, err)
			}
			continue
		}
		if err := unallocated(in); err != nil {
			return fmt.Errorf("infer: decode: %s: %w", c.rep.Run.Arch, err)
		}
		var err error
		switch in.Class {
		case "llm_graph_input_embd":
			err = c.setTokens(in, u.Ubatch)
		case "llm_graph_input_pos":
			err = c.setPos(in, u.Ubatch)
		case "llm_graph_input_attn_kv", "llm_graph_input_attn_k":
			err = c.setAttn(in, u, slots, 0, "")
		case "llm_graph_input_attn_kv_iswa", "llm_graph_input_attn_k_iswa":
			err = c.setAttn(in, u, slots, 0, "")
			if err == nil {
				err = c.setAttn(in, u, slots, 1, "_swa")
			}
		case "llm_graph_input_attn_k_dsa":
			err = c.setDSA(in, u, slots)
		case "llm_graph_input_attn_kv_msa":
			// the base cache's, then the indexer cache's destinations
			if err = c.setAttn(in, u, slots, 0, ""); err == nil {
				err = c.setAttn(in, u, slots, 1, "_idx")
			}
		case "llm_graph_input_msa":
			err = c.setMSA(in, u)
		case "llm_graph_input_attn_k_dsa_iswa":
			// its DSA part, then the sliding-window layers' cache (the third)
			dsa, swa := sub(in, "inp_dsa"), sub(in, "inp_swa")
			if dsa == nil || swa == nil {
				err = fmt.Errorf("a DSA iSWA input without its parts")
				break
			}
			if err = c.setDSA(dsa, u, slots); err == nil {
				err = c.setAttn(swa, u, slots, 2, "")
			}
		case "llm_graph_input_dsv4":
			err = c.setDSV4(in, u)
		case "llm_graph_input_out_ids":
			err = c.setOutIDs(in, u.Ubatch, nOutputs)
		case "llm_graph_input_rs":
			err = c.setSCopy(in)
		case "llm_graph_input_cross_embd":
			err = c.setCrossEmbd(in)
		case "llm_graph_input_attn_cross":
			err = c.setCrossMask(in, u)
		case "llm_graph_input_pos_bucket":
			err = c.setPosBucket(in, u, false)
		case "llm_graph_input_pos_bucket_kv":
			err = c.setPosBucket(in, u, true)
		case "llm_graph_input_mem_hybrid", "llm_graph_input_mem_hybrid_k":
			// its attention's input over the KV cache, its state's copies
			attn, rs := sub(in, "inp_attn"), sub(in, "inp_rs")
			if attn == nil || rs == nil {
				err = fmt.Errorf("a hybrid memory's input without its parts")
				break
			}
			if err = c.setAttn(attn, u, slots, 0, ""); err == nil {
				err = c.setSCopy(rs)
			}
		case "llm_graph_input_mem_hybrid_iswa":
			// its attention's input over the iSWA pair, its state's copies
			attn, rs := sub(in, "inp_attn"), sub(in, "inp_rs")
			if attn == nil || rs == nil {
				err = fmt.Errorf("a hybrid memory's input without its parts")
				break
			}
			if err = c.setAttn(attn, u, slots, 0, ""); err == nil {
				if err = c.setAttn(attn, u, slots, 1, "_swa"); err == nil {
					err = c.setSCopy(rs)
				}
			}
		case qsaClass:
			err = c.setQSA(in, u, slots)
		case "llm_graph_input_ple":
			err = c.setPLE(in, u)
		case "llm_graph_input_attn_temp":
			err = c.setAttnTemp(in, u.Ubatch)
		case "llm_graph_input_switch":
			err = c.setSwitch(in, u.Ubatch)
		case "llm_graph_input_attn_no_cache":
			err = c.setAttnNoCache(in, u)
		case "llm_graph_input_mean":
			err = c.setMean(in, u)
		case "llm_graph_input_cls":
			err = c.setCLS(in, u)
		default:
			err = fmt.Errorf("its input %s is not set by ggload yet", in.Class)
		}
		if err != nil {
			return fmt.Errorf("infer: decode: %s: %w", c.rep.Run.Arch, err)
		}
	}
	return nil
}

// unguarded are the members each input's set_input writes whenever they
// are not null, allocated or not ("inp_attn.x": its attention part's):
// llama.cpp aborts (GGML_ASSERT(buffer)) where the graph left one
// unallocated.
var unguarded = map[string][]string{
	"llm_graph_input_embd":        {"tokens"},
	"llm_graph_input_pos":         {"pos"},
	"llm_graph_input_attn_kv":     {"self_k_idxs", "self_v_idxs"},
	"llm_graph_input_attn_kv_msa": {"self_k_idxs", "self_v_idxs", "self_k_idxs_idx"},
	"llm_graph_input_msa":         {"pos_slot_i", "pos_slot_f", "cell_blk", "pos_mask"},
	"llm_graph_input_attn_k":      {"self_k_idxs", "self_kq_mask"},
	"llm_graph_input_dsv4":        {"inp_raw.self_k_rot"},
	"llm_graph_input_attn_k_dsa":  {"self_k_idxs_mla", "self_kq_mask_mla", "self_k_idxs_lid", "self_kq_mask_lid"},
	"llm_graph_input_attn_k_dsa_iswa": {"inp_dsa.self_k_idxs_mla", "inp_dsa.self_kq_mask_mla", "inp_dsa.self_k_idxs_lid", "inp_dsa.self_kq_mask_lid",
		"inp_swa.self_k_idxs", "inp_swa.self_kq_mask"},
	"llm_graph_input_mem_hybrid":   {"inp_attn.self_k_idxs", "inp_attn.self_v_idxs", "inp_attn.self_kq_mask", "inp_attn.self_k_rot", "inp_attn.self_v_rot", "inp_rs.s_copy"},
	"llm_graph_input_mem_hybrid_k": {"inp_attn.self_k_idxs", "inp_attn.self_kq_mask", "inp_rs.s_copy"},
	// (its attention's indices and masks are written where allocated: a
	// model may have no layer of one of the caches)
	"llm_graph_input_mem_hybrid_iswa": {"inp_attn.self_k_rot", "inp_attn.self_v_rot", "inp_attn.self_k_rot_swa", "inp_attn.self_v_rot_swa", "inp_rs.s_copy"},
	qsaClass:                          {"k_idxs", "cell_blk", "blk_cells", "blk_pos", "bias"},
	"llm_graph_input_ple":             {"rows"},
	"llm_graph_input_rs":              {"s_copy"},
	"llm_graph_input_out_ids":         {"out_ids"},
	"llm_graph_input_attn_no_cache":   {"self_kq_mask"},
	"llm_graph_input_cross_embd":      {"cross_embd"},
	"llm_graph_input_attn_cross":      {"cross_kq_mask"},
	"llm_graph_input_pos_bucket":      {"pos_bucket"},
	"llm_graph_input_pos_bucket_kv":   {"pos_bucket"},
	"llm_graph_input_attn_temp":       {"attn_scale"},
	"llm_graph_input_switch":          {"sub_tokens", "router_ksig", "router_vval", "router_q"},
}

// unallocated refuses an input whose set_input would write a tensor the
// graph left without a buffer.
func unallocated(in *cpp.Object) error { return unallocatedOf(in, unguarded[in.Class]...) }

// unallocatedOf refuses an input whose set_input would write one of the
// named members the graph left without a buffer.
func unallocatedOf(in *cpp.Object, names ...string) error {
	for _, name := range names {
		o, field := in, name
		if part, rest, ok := strings.Cut(name, "."); ok {
			if o = sub(in, part); o == nil {
				continue
			}
			field = rest
		}
		cell, ok := o.Fields[field]
		if !ok || cell.V.K != cpp.KNative {
			continue
		}
		if t, _ := cell.V.P.(*ops.Tensor); t != nil && t.Buffer == 0 {
			return &cpp.Abort{Msg: fmt.Sprintf("GGML_ASSERT(buffer) failed: %s::set_input writes %s, which the graph does not use and left unallocated", in.Class, name),
				Where: "ggml_backend_buffer_is_host, in llama.cpp's set_input"}
		}
	}
	return nil
}

// sub is an input's member that is an input of its own.
func sub(in *cpp.Object, name string) *cpp.Object {
	cell, ok := in.Fields[name]
	if !ok || cell.V.K != cpp.KObj {
		return nil
	}
	o, _ := cell.V.P.(*cpp.Object)
	return o
}

// setSCopy is llm_graph_input_rs::set_input: for each state of the range
// the ubatch uses, the cell its state comes from.
func (c *Context) setSCopy(in *cpp.Object) error {
	t := member(in, "s_copy")
	if t == nil {
		return nil
	}
	if c.recr == nil {
		return fmt.Errorf("recurrent states' copies without a recurrent state")
	}
	return c.set(t, typeI32, i32s(c.recr.sCopy()), 4)
}

// member is an input's tensor member; nil where it is null or has no
// buffer (left out of the graph).
func member(in *cpp.Object, name string) *ops.Tensor {
	cell, ok := in.Fields[name]
	if !ok || cell.V.K != cpp.KNative {
		return nil
	}
	t, _ := cell.V.P.(*ops.Tensor)
	if t == nil || t.Buffer == 0 {
		return nil
	}
	return t
}

// set writes the tensor whole, checking its type and element count.
func (c *Context) set(t *ops.Tensor, typ int32, data []byte, elem int) error {
	n := int64(1)
	for _, d := range t.Ne {
		n *= d
	}
	if t.Type != typ || int64(len(data)) != n*int64(elem) {
		return fmt.Errorf("input %s: type %d of %d elements, ggload has %d bytes of type %d", ops.NameOf(t), t.Type, n, len(data), typ)
	}
	c.lib.TensorSet(t, data, 0)
	return nil
}

func i32s(v []int32) []byte {
	b := make([]byte, 4*len(v))
	for i, x := range v {
		binary.LittleEndian.PutUint32(b[4*i:], uint32(x))
	}
	return b
}

func (c *Context) setTokens(in *cpp.Object, u *graph.Ubatch) error {
	if u.Embd != nil {
		// the embeddings' input: one row of n_embd_inp per token
		t := member(in, "embd")
		if t == nil {
			return nil
		}
		if t.Ne[0] != c.nEmbdInp || t.Ne[1] != int64(len(u.Embd)) {
			return fmt.Errorf("input %s of %v for %d embeddings of %d", ops.NameOf(t), t.Ne, len(u.Embd), c.nEmbdInp)
		}
		vals := make([]float32, 0, int64(len(u.Embd))*c.nEmbdInp)
		for _, row := range u.Embd {
			vals = append(vals, row...)
		}
		return c.setFloats(t, vals)
	}
	if t := member(in, "tokens"); t != nil {
		return c.set(t, typeI32, i32s(u.Tokens), 4)
	}
	return nil
}

func (c *Context) setPos(in *cpp.Object, u *graph.Ubatch) error {
	t := member(in, "pos")
	if t == nil {
		return nil
	}
	n := len(u.Tokens)
	switch t.Ne[0] {
	case int64(n):
		return c.set(t, typeI32, i32s(u.Pos), 4)
	case 4 * int64(n):
		// M-RoPE with text tokens: the position in each of the first
		// three sections, 0 in the fourth
		pos := make([]int32, 4*n)
		copy(pos, u.Pos)
		copy(pos[n:], u.Pos)
		copy(pos[2*n:], u.Pos)
		return c.set(t, typeI32, i32s(pos), 4)
	}
	return fmt.Errorf("%d positions per token are not set by ggload yet", t.Ne[0]/int64(n))
}

func (c *Context) setOutIDs(in *cpp.Object, u *graph.Ubatch, nOutputs int) error {
	t := member(in, "out_ids")
	if t == nil {
		return nil
	}
	ids := make([]int32, 0, nOutputs)
	for i := range u.Tokens {
		if nOutputs == len(u.Tokens) || u.Output[i] {
			ids = append(ids, int32(i))
		}
	}
	return c.set(t, typeI32, i32s(ids), 4)
}

// setAttn is the set_input of an attention input over KV cache ci (its
// members named with suffix): the cells each token is stored in (K's
// rows; V's, element by element where V is transposed), counted over
// every stream, the KQ mask over the first n_kv cells of each token's
// stream, and the rotations of a quantized cache.
func (c *Context) setAttn(in *cpp.Object, u *ubatch, slots []slot, ci int, suffix string) error {
	if ci >= len(c.caches) || ci >= len(slots) {
		return fmt.Errorf("attention over a KV cache without one")
	}
	kc, sl := c.caches[ci], slots[ci]
	for _, name := range []string{"self_k_rot", "self_v_rot"} {
		if t := member(in, name+suffix); t != nil {
			if err := c.setHadamard(t); err != nil {
				return err
			}
		}
	}
	n := len(u.Tokens)
	size := int64(kc.size())
	// each token's cell, counted over the streams
	cells := make([]int64, 0, n)
	for k, st := range sl.strm {
		for _, idx := range sl.idxs[k] {
			cells = append(cells, int64(st)*size+int64(idx))
		}
	}
	if len(cells) != n {
		return fmt.Errorf("a slot of %d cells for %d tokens", len(cells), n)
	}
	if t := member(in, "self_k_idxs"+suffix); t != nil {
		if err := c.set(t, typeI64, kIdxs(kc, sl), 8); err != nil {
			return err
		}
	}
	if t := member(in, "self_v_idxs"+suffix); t != nil {
		per := int64(1)
		if kc.vTrans {
			per = t.Ne[0] / int64(n)
		}
		b := make([]byte, 8*int64(n)*per)
		for i, cell := range cells {
			for j := range per {
				v := cell
				if kc.vTrans {
					// the stream's block of n_embd_v_gqa rows of kv_size
					st, idx := cell/size, cell%size
					v = st*size*per + j*size + idx
				}
				binary.LittleEndian.PutUint64(b[8*(int64(i)*per+j):], uint64(v))
			}
		}
		if err := c.set(t, typeI64, b, 8); err != nil {
			return err
		}
	}
	if t := member(in, "self_kq_mask"+suffix); t != nil {
		return c.setMask(t, u.Ubatch, kc)
	}
	return nil
}

// kIdxs is set_input_k_idxs: each token's cell of the slot, counted
// over every stream, as int64.
func kIdxs(kc *kvCache, sl slot) []byte {
	size := uint64(kc.size())
	var b []byte
	for k, st := range sl.strm {
		for _, idx := range sl.idxs[k] {
			b = binary.LittleEndian.AppendUint64(b, uint64(st)*size+uint64(idx))
		}
	}
	return b
}

// setDSA is llm_graph_input_attn_k_dsa::set_input: the MLA cache's (the
// memory's first) indices and mask, then the indexer's (its second).
func (c *Context) setDSA(in *cpp.Object, u *ubatch, slots []slot) error {
	if err := c.setAttn(in, u, slots, 0, "_mla"); err != nil {
		return err
	}
	return c.setAttn(in, u, slots, 1, "_lid")
}

// setMask is llama_kv_cache::set_input_kq_mask for one stream: 0 where
// token i sees cell j (the cell holds the token's sequence at a position
// not after it, for causal attention), -INF where not; with ALiBi, the
// negative distance instead of 0.
func (c *Context) setMask(t *ops.Tensor, u *graph.Ubatch, kc *kvCache) error {
	nKV, rows := t.Ne[0], t.Ne[1]*t.Ne[3] // [n_kv, tokens per stream, 1, streams]
	if rows != int64(len(u.Tokens)) || t.Ne[2] != 1 {
		return fmt.Errorf("a KQ mask of %v for %d tokens", t.Ne, len(u.Tokens))
	}
	alibi, _ := c.rep.Run.Hparams().Field("use_alibi")
	causal := c.causalAttn()
	// which layers a non-causal model keeps causal, and where its window
	// does not apply (llama_non_causal_type)
	nonCausal, _ := c.rep.Run.Hparams().Field("non_causal_type")
	if !causal && nonCausal == 1 {
		causal = kc.streams[0].swaType == 0
	}
	minPos := map[int32]int32{} // each sequence's least position in the ubatch
	for i, ids := range u.SeqIDs {
		if p, ok := minPos[ids[0]]; !ok || u.Pos[i] < p {
			minPos[ids[0]] = u.Pos[i]
		}
	}
	elem := 4
	if t.Type == typeF16 {
		elem = 2
	} else if t.Type != typeF32 {
		return fmt.Errorf("a KQ mask of type %d", t.Type)
	}
	b := make([]byte, int64(elem)*nKV*rows)
	// the two values almost every entry takes, as the tensor stores them
	keep, drop := uint32(0), math.Float32bits(float32(math.Inf(-1)))
	if elem == 2 {
		keep, drop = uint32(fp16(0)), uint32(fp16(float32(math.Inf(-1))))
	}
	put := func(k int64, bits uint32) {
		if elem == 2 {
			binary.LittleEndian.PutUint16(b[2*k:], uint16(bits))
		} else {
			binary.LittleEndian.PutUint32(b[4*k:], bits)
		}
	}
	window := kc.streams[0].swaType != 0
	for i := range rows {
		seq, p1 := u.SeqIDs[i][0], u.Pos[i]
		cells := kc.stream(seq)
		inSpan := !causal && nonCausal == 2
		for j := range nKV {
			v := drop
			p0 := cells.pos[j]
			switch {
			case p0 == -1 || !cells.seq[j].has(seq):
			case causal && p0 > p1:
			case window && !(inSpan && p0 >= minPos[seq]) && cells.maskedSWA(p0, p1):
			case alibi != 0:
				d := p0 - p1
				if d < 0 {
					d = -d
				}
				v = math.Float32bits(-float32(d))
				if elem == 2 {
					v = uint32(fp16(-float32(d)))
				}
			default:
				v = keep
			}
			put(i*nKV+j, v)
		}
	}
	c.lib.TensorSet(t, b, 0)
	return nil
}

// fp16 is ggml's round-to-nearest-even conversion of a float32 to IEEE
// half precision.
func fp16(f float32) uint16 {
	x := math.Float32bits(f)
	sign := uint16(x>>16) & 0x8000
	exp := int32(x>>23&0xff) - 127 + 15
	mant := x & 0x7fffff
	switch {
	case x&0x7fffffff == 0:
		return sign
	case x>>23&0xff == 0xff: // inf, nan
		if mant != 0 {
			return sign | 0x7e00
		}
		return sign | 0x7c00
	case exp >= 0x1f:
		return sign | 0x7c00
	case exp <= 0:
		if exp < -10 {
			return sign
		}
		mant |= 0x800000
		shift := uint32(14 - exp)
		h := mant >> shift
		rem := mant & (1<<shift - 1)
		half := uint32(1) << (shift - 1)
		if rem > half || (rem == half && h&1 == 1) {
			h++
		}
		return sign | uint16(h)
	}
	h := uint32(exp)<<10 | mant>>13
	rem := mant & 0x1fff
	if rem > 0x1000 || (rem == 0x1000 && h&1 == 1) {
		h++
	}
	return sign | uint16(h)
}

// setHadamard is set_input_k_rot and set_input_v_rot: the orthonormal
// Walsh-Hadamard matrix of the tensor's size (a power of two, from 64),
// which rotates the heads of a quantized cache.
func (c *Context) setHadamard(t *ops.Tensor) error {
	n := t.Ne[0]
	if n < 64 || n&(n-1) != 0 || t.Ne[1] != n {
		return fmt.Errorf("a rotation of %v", t.Ne)
	}
	data := make([]float32, n*n)
	data[0] = float32(1.0 / float64(float32(math.Sqrt(float64(n)))))
	for s := int64(1); s < n; s *= 2 {
		for i := range s {
			for j := range s {
				v := data[i*n+j]
				data[(i+s)*n+j] = v
				data[i*n+j+s] = v
				data[(i+s)*n+j+s] = -v
			}
		}
	}
	b := make([]byte, 4*len(data))
	for i, v := range data {
		binary.LittleEndian.PutUint32(b[4*i:], math.Float32bits(v))
	}
	return c.set(t, typeF32, b, 4)
}

// setAttnTemp is llm_graph_input_attn_temp::set_input: each token's
// attention temperature, log(floor((pos + offset) / floor_scale) + 1) *
// scale + 1, in C++'s float and double steps.
func (c *Context) setAttnTemp(in *cpp.Object, u *graph.Ubatch) error {
	t := member(in, "attn_scale")
	if t == nil {
		return nil
	}
	num := func(name string) (cpp.Val, error) {
		cell, ok := in.Fields[name]
		if !ok {
			return cpp.Val{}, fmt.Errorf("the attention temperature's %s", name)
		}
		return cell.V, nil
	}
	fs, err1 := num("n_attn_temp_floor_scale")
	sc, err2 := num("f_attn_temp_scale")
	off, err3 := num("f_attn_temp_offset")
	if err := errors.Join(err1, err2, err3); err != nil {
		return err
	}
	floorScale, scale, offset := float32(fs.I), float32(sc.F), float32(off.F)
	if floorScale == 0 || scale == 0 {
		return fmt.Errorf("an attention temperature of scale %v, floor scale %v (llama.cpp asserts both non-zero)", scale, floorScale)
	}
	b := make([]byte, 4*len(u.Pos))
	for i, p := range u.Pos {
		q := (float32(p) + offset) / floorScale
		v := float32(math.Log(math.Floor(float64(q))+1.0)*float64(scale) + 1.0)
		binary.LittleEndian.PutUint32(b[4*i:], math.Float32bits(v))
	}
	return c.set(t, typeF32, b, 4)
}

// setAttnNoCache is llm_graph_input_attn_no_cache::set_input: the KQ mask
// among the ubatch's own tokens (same sequence; not after for causal
// attention; the model's window on the SWA mask).
func (c *Context) setAttnNoCache(in *cpp.Object, u *ubatch) error {
	causal := c.causalAttn()
	alibi := c.hparam("use_alibi") != 0
	fill := func(t *ops.Tensor, nSWA uint32, swaType int) error {
		n := int64(len(u.Tokens))
		if t.Ne[0] != n || t.Ne[1]*t.Ne[2]*t.Ne[3] != n {
			return fmt.Errorf("a KQ mask of %v for %d tokens", t.Ne, n)
		}
		win := &kvCells{nSWA: nSWA, swaType: swaType}
		vals := make([]float32, n*n)
		for i1 := range n {
			s1, p1 := u.SeqIDs[i1][0], u.Pos[i1]
			for i0 := range n {
				s0, p0 := u.SeqIDs[i0][0], u.Pos[i0]
				v := float32(math.Inf(-1))
				switch {
				case s0 != s1, causal && p0 > p1, swaType != 0 && win.maskedSWA(p0, p1):
				case alibi:
					d := p0 - p1
					if d < 0 {
						d = -d
					}
					v = -float32(d)
				default:
					v = 0
				}
				vals[i1*n+i0] = v
			}
		}
		return c.setFloats(t, vals)
	}
	t := member(in, "self_kq_mask")
	if t == nil {
		return fmt.Errorf("attention without a cache has no mask")
	}
	if err := fill(t, 0, 0); err != nil {
		return err
	}
	if st := c.hparam("swa_type"); st != 0 {
		t := member(in, "self_kq_mask_swa")
		if t == nil {
			return fmt.Errorf("attention with a window has no window's mask")
		}
		return fill(t, uint32(c.hparam("n_swa")), int(st))
	}
	return nil
}

// setFloats writes float values to an F32 or F16 tensor.
func (c *Context) setFloats(t *ops.Tensor, vals []float32) error {
	switch t.Type {
	case typeF32:
		b := make([]byte, 4*len(vals))
		for i, v := range vals {
			binary.LittleEndian.PutUint32(b[4*i:], math.Float32bits(v))
		}
		return c.set(t, typeF32, b, 4)
	case typeF16:
		b := make([]byte, 2*len(vals))
		for i, v := range vals {
			binary.LittleEndian.PutUint16(b[2*i:], fp16(v))
		}
		return c.set(t, typeF16, b, 2)
	}
	return fmt.Errorf("input %s of type %d", ops.NameOf(t), t.Type)
}

// poolingAsks says whether the context pools as one of kinds.
func (c *Context) poolingAsks(kinds ...int64) bool {
	if !c.embeddings() {
		return false
	}
	p := c.gc.CParam("pooling_type")
	for _, k := range kinds {
		if p == k {
			return true
		}
	}
	return false
}

// setMean is llm_graph_input_mean::set_input: for mean (and rank)
// pooling, each sequence's row weights its tokens 1/count.
func (c *Context) setMean(in *cpp.Object, u *ubatch) error {
	if !c.poolingAsks(1, poolingRank) {
		return nil
	}
	t := member(in, "mean")
	if t == nil {
		return fmt.Errorf("mean pooling without its matrix")
	}
	n := len(u.Tokens)
	seqs := u.seqsUnq()
	idx := map[int32]int{}
	for k, s := range seqs {
		idx[s] = k
	}
	per := n / max(u.NSeqs, 1)
	if u.NSeqs == 0 {
		per = 1
	}
	sums := make([]uint64, len(seqs))
	for i := 0; i < n; i += per {
		for _, s := range u.SeqIDs[i] {
			sums[idx[s]] += uint64(per)
		}
	}
	vals := make([]float32, int64(t.Ne[0])*t.Ne[1])
	for i := 0; i < n; i += per {
		for _, s := range u.SeqIDs[i] {
			k := idx[s]
			d := float32(0)
			if sums[k] > 0 {
				d = 1 / float32(sums[k])
			}
			for j := range per {
				vals[k*n+i+j] = d
			}
		}
	}
	return c.setFloats(t, vals)
}

// setCLS is llm_graph_input_cls::set_input: for CLS, rank and last
// pooling, each sequence's row: its first token (last pooling, and rank
// pooling of qwen3 and qwen3vl: its last).
func (c *Context) setCLS(in *cpp.Object, u *ubatch) error {
	if !c.poolingAsks(2, 3, poolingRank) {
		return nil
	}
	t := member(in, "cls")
	if t == nil {
		return fmt.Errorf("cls pooling without its rows")
	}
	p := c.gc.CParam("pooling_type")
	last := p == 3 || p == poolingRank && (c.rep.Run.Arch == "qwen3" || c.rep.Run.Arch == "qwen3vl")
	seqs := u.seqsUnq()
	idx := map[int32]int{}
	for k, s := range seqs {
		idx[s] = k
	}
	pos, row := make([]int32, len(seqs)), make([]int32, len(seqs))
	for k := range pos {
		pos[k], row[k] = -1, -1
	}
	for i, ids := range u.SeqIDs {
		for _, s := range ids {
			k := idx[s]
			if pos[k] == -1 || last && u.Pos[i] >= pos[k] || !last && u.Pos[i] < pos[k] {
				pos[k], row[k] = u.Pos[i], int32(i)
			}
		}
	}
	vals := make([]int32, t.Ne[0])
	for k, r := range row {
		if r >= 0 && k < len(vals) {
			vals[k] = r
		}
	}
	return c.set(t, t.Type, i32s(vals), 4)
}

// causalAttn is cparams.causal_attn as the graph being filled has it:
// off while encoding (llama_context::encode turns it off).
func (c *Context) causalAttn() bool { return !c.encoding && c.gc.CParam("causal_attn") != 0 }

// setCrossEmbd is llm_graph_input_cross_embd::set_input: the encoder's
// output.
func (c *Context) setCrossEmbd(in *cpp.Object) error {
	t := member(in, "cross_embd")
	if t == nil || c.cross == nil {
		return nil
	}
	return c.setFloats(t, c.cross.embd)
}

// setCrossMask is llm_graph_input_attn_cross::set_input: a decoder token
// sees the encoder's tokens of its sequences.
func (c *Context) setCrossMask(in *cpp.Object, u *ubatch) error {
	t := member(in, "cross_kq_mask")
	if t == nil {
		return fmt.Errorf("cross attention without its mask")
	}
	if c.cross == nil {
		return fmt.Errorf("llama_encode must be called first: the decoder attends to the encoder's output")
	}
	if u.Equal {
		return fmt.Errorf("cross attention over an equal split (GGML_ASSERT(!ubatch->equal_seqs()))")
	}
	nEnc, n := t.Ne[0], int64(len(u.Tokens))
	if nEnc != int64(len(c.cross.seqs)) || t.Ne[1]*t.Ne[2]*t.Ne[3] != n {
		return fmt.Errorf("a cross mask of %v for %d encoder tokens", t.Ne, len(c.cross.seqs))
	}
	vals := make([]float32, nEnc*n)
	for i := range n {
		for j := range nEnc {
			f := float32(math.Inf(-1))
			for _, s := range u.SeqIDs[i] {
				if slices.Contains(c.cross.seqs[j], s) {
					f = 0
				}
			}
			vals[i*nEnc+j] = f
		}
	}
	return c.setFloats(t, vals)
}

// setPosBucket is llm_graph_input_pos_bucket::set_input (T5's encoder:
// the relative position buckets among the ubatch's tokens, both ways) and,
// with kv, llm_graph_input_pos_bucket_kv's (its decoder: from each token
// to each cell of the cache, backwards only).
func (c *Context) setPosBucket(in *cpp.Object, u *ubatch, kv bool) error {
	t := member(in, "pos_bucket")
	if t == nil {
		return nil
	}
	if u.Equal {
		return fmt.Errorf("position buckets over an equal split (GGML_ASSERT(!ubatch->equal_seqs()))")
	}
	nb := uint64(c.hparam("n_rel_attn_bkts"))
	n := int64(len(u.Tokens))
	cols := t.Ne[0]
	if t.Ne[1] != n {
		return fmt.Errorf("position buckets of %v for %d tokens", t.Ne, n)
	}
	vals := make([]int32, cols*n)
	for i := range n {
		for j := range cols {
			if kv {
				if len(c.caches) != 1 || len(c.caches[0].streams) != 1 {
					return fmt.Errorf("position buckets over a cache of several streams")
				}
				p0 := int32(-1)
				if cells := c.caches[0].streams[0]; j < int64(cells.size()) {
					p0 = cells.pos[j]
				}
				vals[i*cols+j] = relativeBucket(p0, u.Pos[i], nb, false)
			} else {
				vals[i*cols+j] = relativeBucket(u.Pos[j], u.Pos[i], nb, true)
			}
		}
	}
	return c.set(t, typeI32, i32s(vals), 4)
}

// relativeBucket is llama_relative_position_bucket, in C++'s float and
// double steps.
func relativeBucket(x, y int32, nBuckets uint64, bidirectional bool) int32 {
	const maxDistance = 128
	if bidirectional {
		nBuckets >>= 1
	}
	maxExact := int64(nBuckets >> 1)
	rel := x - y
	bucket := int32(0)
	if bidirectional {
		if rel > 0 {
			bucket += int32(nBuckets)
		}
		if rel < 0 {
			rel = -rel
		}
	} else {
		rel = -min(rel, 0)
	}
	l := float32(math.Log(float64(float32(1.0 * float64(rel) / float64(maxExact)))))
	t := float64(l*float32(nBuckets-uint64(maxExact))) / math.Log(1.0*maxDistance/float64(maxExact))
	large := int32(math.Floor(float64(float32(float64(maxExact) + t))))
	large = min(large, int32(nBuckets)-1)
	if int64(rel) < maxExact {
		bucket += rel
	} else {
		bucket += large
	}
	return bucket
}

// setSwitch is granite-switch's llm_graph_input_switch::set_input: for
// each token, its substitute, the router's K signal (+gain for an adapter
// token, -gain otherwise), V value (the adapter's slot, else 0) and Q (1).
func (c *Context) setSwitch(in *cpp.Object, u *graph.Ubatch) error {
	model := sub(in, "smodel")
	if model == nil {
		return fmt.Errorf("granite-switch's input without its model")
	}
	lookup := func(name string, tok int32) (cpp.Val, bool) {
		cell, ok := model.Fields[name]
		if !ok || cell.V.K != cpp.KMap {
			return cpp.Val{}, false
		}
		m := cell.V.P.(*cpp.Map)
		for i, k := range m.Keys {
			if k.I == int64(tok) && i < len(m.Vals) && m.Vals[i] != nil {
				return m.Vals[i].V, true
			}
		}
		return cpp.Val{}, false
	}
	gain := float32(0)
	if cell, ok := model.Fields["router_gain"]; ok {
		gain = float32(cell.V.F)
	}
	n := len(u.Tokens)
	subs := make([]int32, n)
	ksig, vval, q := make([]float32, n), make([]float32, n), make([]float32, n)
	for i, tok := range u.Tokens {
		ksig[i], q[i], subs[i] = -gain, 1, tok
		if v, ok := lookup("adapter_token_to_slot", tok); ok {
			ksig[i], vval[i] = gain, float32(int32(v.I))
		}
		if v, ok := lookup("adapter_token_to_substitute", tok); ok {
			subs[i] = int32(v.I)
		}
	}
	for _, x := range []struct {
		name string
		f    []float32
	}{{"router_ksig", ksig}, {"router_vval", vval}, {"router_q", q}} {
		if t := member(in, x.name); t != nil {
			if err := c.setFloats(t, x.f); err != nil {
				return err
			}
		}
	}
	if t := member(in, "sub_tokens"); t != nil {
		return c.set(t, typeI32, i32s(subs), 4)
	}
	return nil
}

// setMSA is minimax-m3's llm_graph_input_msa::set_input over the MSA
// memory's base cache (the first): for each stream of the ubatch, each
// position's cell (pos_slot, as integers and as floats) and each cell's
// position block (cell_blk); each token's mask by position (pos_mask:
// the positions of its sequence it sees); and the local blocks' bias.
func (c *Context) setMSA(in *cpp.Object, u *ubatch) error {
	if len(c.caches) == 0 {
		return fmt.Errorf("an MSA input without a KV cache")
	}
	kc := c.caches[0]
	blk, local := in.Fields["blk"].V.I, in.Fields["local"].V.I
	n := int64(len(u.Tokens))
	if blk <= 0 {
		return fmt.Errorf("an MSA input of blocks of %d positions", blk)
	}
	// per stream of the ubatch: its first token's sequence's cells
	streamCells := func(t *ops.Tensor) (func(s int64) (*kvCells, int32), error) {
		ns := t.Ne[1]
		if ns <= 0 || n%ns != 0 {
			return nil, fmt.Errorf("input %s: %d streams for %d tokens", ops.NameOf(t), ns, n)
		}
		per := n / ns
		return func(s int64) (*kvCells, int32) {
			seq := u.SeqIDs[s*per][0]
			return kc.stream(seq), seq
		}, nil
	}
	for _, name := range []string{"pos_slot_i", "pos_slot_f"} {
		t := member(in, name)
		if t == nil {
			continue
		}
		cellsOf, err := streamCells(t)
		if err != nil {
			return err
		}
		nPos := t.Ne[0]
		slots := make([]int32, nPos*t.Ne[1])
		for s := range t.Ne[1] {
			cells, seq := cellsOf(s)
			for j, p := range cells.pos {
				if p >= 0 && int64(p) < nPos && cells.seq[j].has(seq) {
					slots[s*nPos+int64(p)] = int32(j)
				}
			}
		}
		if t.Type == typeI32 {
			err = c.set(t, typeI32, i32s(slots), 4)
		} else {
			vals := make([]float32, len(slots))
			for i, v := range slots {
				vals[i] = float32(v)
			}
			err = c.setFloats(t, vals)
		}
		if err != nil {
			return err
		}
	}
	if t := member(in, "cell_blk"); t != nil {
		cellsOf, err := streamCells(t)
		if err != nil {
			return err
		}
		nKV := t.Ne[0]
		out := make([]int32, nKV*t.Ne[1])
		for s := range t.Ne[1] {
			cells, seq := cellsOf(s)
			for j := range min(nKV, int64(cells.size())) {
				if p := cells.pos[j]; p >= 0 && cells.seq[j].has(seq) {
					out[s*nKV+j] = int32(int64(p) / blk)
				}
			}
		}
		if err := c.set(t, typeI32, i32s(out), 4); err != nil {
			return err
		}
	}
	if t := member(in, "pos_mask"); t != nil {
		nPos := t.Ne[0]
		if t.Ne[1] != n {
			return fmt.Errorf("input %s: %d rows for %d tokens", ops.NameOf(t), t.Ne[1], n)
		}
		mask := make([]float32, nPos*n)
		for i := range mask {
			mask[i] = float32(math.Inf(-1))
		}
		for i := range n {
			seq, p1 := u.SeqIDs[i][0], u.Pos[i]
			cells := kc.stream(seq)
			for j, p0 := range cells.pos {
				if p0 < 0 || int64(p0) >= nPos || !cells.seq[j].has(seq) || p0 > p1 || cells.maskedSWA(p0, p1) {
					continue
				}
				mask[i*nPos+int64(p0)] = 0
			}
		}
		if err := c.setFloats(t, mask); err != nil {
			return err
		}
	}
	if t := member(in, "bias"); t != nil {
		nBlk := t.Ne[0]
		bias := make([]float32, nBlk*n)
		for i := range n {
			L := int64(u.Pos[i]) / blk
			for l := int64(0); l < local && L-l >= 0; l++ {
				if L-l < nBlk {
					bias[i*nBlk+L-l] = 1e30
				}
			}
		}
		if err := c.setFloats(t, bias); err != nil {
			return err
		}
	}
	return nil
}
