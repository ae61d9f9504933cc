package infer

import (
	"encoding/binary"
	"fmt"
	"math"

	"github.com/ggload/ggload/ggml/ops"
	"github.com/ggload/ggload/internal/cpp"
	"github.com/ggload/ggload/internal/graph"
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

func (c *Context) setInputs(st *graph.Step, u *graph.Ubatch, nOutputs int, idxs []uint32) error {
	for _, in := range st.Inputs() {
		var err error
		switch in.Class {
		case "llm_graph_input_embd":
			err = c.setTokens(in, u)
		case "llm_graph_input_pos":
			err = c.setPos(in, u)
		case "llm_graph_input_attn_kv":
			err = c.setAttnKV(in, u, idxs)
		case "llm_graph_input_out_ids":
			err = c.setOutIDs(in, u, nOutputs)
		default:
			err = fmt.Errorf("its input %s is not set by ggload yet", in.Class)
		}
		if err != nil {
			return fmt.Errorf("infer: decode: %s: %w", c.rep.Run.Arch, err)
		}
	}
	return nil
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
	if t.Ne[0] != int64(len(u.Tokens)) {
		return fmt.Errorf("%d positions per token (M-RoPE) are not set by ggload yet", t.Ne[0]/int64(len(u.Tokens)))
	}
	return c.set(t, typeI32, i32s(u.Pos), 4)
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

// setAttnKV is llm_graph_input_attn_kv::set_input: the cells each token
// is stored in (K's rows; V's, element by element where V is
// transposed), and the KQ mask over the first n_kv cells.
func (c *Context) setAttnKV(in *cpp.Object, u *graph.Ubatch, idxs []uint32) error {
	if c.cells == nil || len(idxs) != len(u.Tokens) {
		return fmt.Errorf("attention over a KV cache without one")
	}
	for _, name := range []string{"self_k_rot", "self_v_rot"} {
		if t := member(in, name); t != nil {
			if err := c.setHadamard(t); err != nil {
				return err
			}
		}
	}
	n := len(u.Tokens)
	if t := member(in, "self_k_idxs"); t != nil {
		b := make([]byte, 8*n)
		for i, idx := range idxs {
			binary.LittleEndian.PutUint64(b[8*i:], uint64(idx))
		}
		if err := c.set(t, typeI64, b, 8); err != nil {
			return err
		}
	}
	if t := member(in, "self_v_idxs"); t != nil {
		per := int64(1)
		if c.vTrans {
			per = t.Ne[0] / int64(n)
		}
		size := int64(c.cells.size())
		b := make([]byte, 8*int64(n)*per)
		for i, idx := range idxs {
			for j := range per {
				v := int64(idx)
				if c.vTrans {
					v = j*size + int64(idx)
				}
				binary.LittleEndian.PutUint64(b[8*(int64(i)*per+j):], uint64(v))
			}
		}
		if err := c.set(t, typeI64, b, 8); err != nil {
			return err
		}
	}
	if t := member(in, "self_kq_mask"); t != nil {
		return c.setMask(t, u)
	}
	return nil
}

// setMask is llama_kv_cache::set_input_kq_mask for one stream: 0 where
// token i sees cell j (the cell holds the token's sequence at a position
// not after it, for causal attention), -INF where not; with ALiBi, the
// negative distance instead of 0.
func (c *Context) setMask(t *ops.Tensor, u *graph.Ubatch) error {
	nKV, rows := t.Ne[0], t.Ne[1]
	if rows != int64(len(u.Tokens)) || t.Ne[2] != 1 || t.Ne[3] != 1 {
		return fmt.Errorf("a KQ mask of %v for %d tokens", t.Ne, len(u.Tokens))
	}
	alibi, _ := c.rep.Run.Hparams().Field("use_alibi")
	causal := c.gc.CParam("causal_attn") != 0
	elem := 4
	if t.Type == typeF16 {
		elem = 2
	} else if t.Type != typeF32 {
		return fmt.Errorf("a KQ mask of type %d", t.Type)
	}
	b := make([]byte, int64(elem)*nKV*rows)
	put := func(k int64, v float32) {
		if elem == 2 {
			binary.LittleEndian.PutUint16(b[2*k:], fp16(v))
		} else {
			binary.LittleEndian.PutUint32(b[4*k:], math.Float32bits(v))
		}
	}
	drop := float32(math.Inf(-1))
	for i := range rows {
		seq, p1 := u.SeqIDs[i][0], u.Pos[i]
		for j := range nKV {
			v := drop
			p0 := c.cells.pos[j]
			switch {
			case p0 == -1 || !c.cells.seq[j].has(seq):
			case causal && p0 > p1:
			case alibi != 0:
				d := p0 - p1
				if d < 0 {
					d = -d
				}
				v = -float32(d)
			default:
				v = 0
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
