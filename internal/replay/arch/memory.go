// Port of llama.cpp src/llama-kv-cache.cpp,
// src/llama-memory-recurrent.cpp, src/llama-memory-hybrid.cpp,
// src/llama-memory-hybrid-iswa.cpp, src/llama-memory-hybrid-idx.cpp,
// src/llama-kv-cache-iswa.cpp and src/llama-kv-cache-dsv4.cpp (v0.5.0):
// the memory classes' constructors, which size and place their tensors.

package arch

import (
	"fmt"
	"strings"

	"github.com/ggload/ggload/ggml"
	"github.com/ggload/ggload/internal/replay/cpp"
	"github.com/ggload/ggload/internal/replay/cpp/ast"
)

// A context's memory module: llama_model::create_memory, replayed, picks
// it for the architecture (which class, which layer filters); the
// constructors of the memory classes are the evaluator's (this file),
// as llama-kv-cache*.cpp and llama-memory-*.cpp size them: every tensor
// they allocate, with its layer (the device that layer is on holds it
// when the cache is offloaded) and its element type and shape. Views
// and host-side tables take no buffer memory and are left out.

// MemoryParams are what create_memory reads of llama_memory_params and
// llama_cparams.
type MemoryParams struct {
	TypeK, TypeV ggml.Type
	SWAFull      bool
	FlashAttn    bool // cparams.flash_attn: off gives a transposed V cache
	OffloadKQV   bool
	KVUnified    bool
	NCtxSeq      uint32
	NSeqMax      uint32
	NUBatch      uint32
	NRSSeq       uint32
}

// Memory is the memory module of a context: nil caches for the
// architectures that keep none (encoders).
type Memory struct {
	Class  string // "llama_kv_cache", "llama_kv_cache_iswa", "llama_memory_recurrent", ...
	Caches []*Cache

	NPad uint32 // the n_pad an MSA cache keeps
}

// Cache is one cache of a memory module, with the lines llama.cpp prints
// before it.
type Cache struct {
	Class   string // llama_kv_cache, llama_memory_recurrent, llama_dsv4_comp_state
	Pre     []string
	Cells   uint32 // kv_size, mem_size (states: state_size)
	Streams uint32
	NSeqMax uint32
	NRSSeq  uint32
	TypeK   ggml.Type
	TypeV   ggml.Type
	Layers  int    // the layers it counts in its size line
	Name    string // a DSV4 state's name ("csa")
	Ratio   uint32 // a DSV4 state's compression ratio
	Embd    uint32 // a DSV4 state's width
	RotK    int    // attn_rot_k, n_embd_head_k_all, attn_rot_v, n_embd_head_v_all of a KV cache
	HeadK   int32
	RotV    int
	HeadV   int32
	VTrans  bool // a KV cache's V is stored transposed (the context had no flash attention when it made the cache)
	NPad    uint32
	NSWA    uint32 // a KV cache's sliding window and its llama_swa_type (0: none)
	SWAType int
	Tensors []MemoryTensor

	Hparams *cpp.Object // the llama_hparams a KV cache keeps a reference to (an indexer cache's own copy); nil: the model's
}

// MemoryTensor is one tensor a cache allocates.
type MemoryTensor struct {
	Name  string
	Layer int
	Type  ggml.Type
	Ne    [4]int64
	Role  byte // 'k', 'v', 'r', 's', 'p' (its share of the size line)
}

// CreateMemory replays llama_model::create_memory for a context with
// parameters p.
func (r *Run) CreateMemory(p MemoryParams) (*Memory, error) {
	if !r.Exact() {
		return nil, fmt.Errorf("arch: %s: no create_memory for a model llama.cpp %s does not know", r.Arch, Pin)
	}
	prog, err := r.program("llama_model::create_memory")
	if err != nil {
		return nil, err
	}
	mp := cpp.NewObject("llama_memory_params")
	mp.Fields["type_k"] = &cpp.Cell{V: cpp.Int(int64(p.TypeK), ast.TI32)}
	mp.Fields["type_v"] = &cpp.Cell{V: cpp.Int(int64(p.TypeV), ast.TI32)}
	mp.Fields["swa_full"] = &cpp.Cell{V: cpp.Bool(p.SWAFull)}
	mp.Fields["ctx_type"] = &cpp.Cell{V: cpp.Int(enumConsts["LLAMA_CONTEXT_TYPE_DEFAULT"], ast.TI32)}
	mp.Fields["mem_other"] = &cpp.Cell{V: cpp.Null}
	cp := cpp.NewObject("llama_cparams")
	u32 := func(x uint32) *cpp.Cell { return &cpp.Cell{V: cpp.Int(int64(x), ast.TU32)} }
	cp.Fields["flash_attn"] = &cpp.Cell{V: cpp.Bool(p.FlashAttn)}
	cp.Fields["offload_kqv"] = &cpp.Cell{V: cpp.Bool(p.OffloadKQV)}
	cp.Fields["kv_unified"] = &cpp.Cell{V: cpp.Bool(p.KVUnified)}
	cp.Fields["n_ctx_seq"] = u32(p.NCtxSeq)
	cp.Fields["n_seq_max"] = u32(p.NSeqMax)
	cp.Fields["n_ubatch"] = u32(p.NUBatch)
	cp.Fields["n_rs_seq"] = u32(p.NRSSeq)
	cp.Fields["ctx_other"] = &cpp.Cell{V: cpp.Null}
	r.memory = nil
	v, err := r.Call(prog, cpp.Val{K: cpp.KObj, P: r.model}, []cpp.Val{{K: cpp.KObj, P: mp}, {K: cpp.KObj, P: cp}})
	if err != nil {
		return nil, r.wrap("llama_init_from_model: failed to initialize the context: ", err)
	}
	if v.K == cpp.KNull || r.memory == nil {
		return &Memory{}, nil
	}
	return r.memory, nil
}

// memArgs reads a constructor's arguments, evaluated.
type memArgs struct {
	f    *cpp.Frame
	vals []cpp.Val
	fn   string
}

func (a *memArgs) n() int { return len(a.vals) }
func (a *memArgs) u32(i int) uint32 {
	if i < len(a.vals) && a.vals[i].K == cpp.KInt {
		return uint32(a.vals[i].I)
	}
	return 0
}
func (a *memArgs) bool(i int) bool { return i < len(a.vals) && a.vals[i].Truthy() }
func (a *memArgs) typ(i int) ggml.Type {
	return ggml.Type(a.u32(i))
}
func (a *memArgs) obj(i int) *cpp.Object {
	if i < len(a.vals) && a.vals[i].K == cpp.KObj {
		return a.vals[i].P.(*cpp.Object)
	}
	return nil
}

// callback is a layer callback argument: nil when null.
func (a *memArgs) callback(i int) *cpp.Val {
	if i < len(a.vals) && a.vals[i].K == cpp.KFunc {
		return &a.vals[i]
	}
	return nil
}

// layerFn calls a layer callback (filter, reuse, share) with il.
func (r *Run) layerFn(f *cpp.Frame, cb *cpp.Val, il int) (cpp.Val, error) {
	c, ok := cb.P.(*cpp.Closure)
	if !ok {
		return cpp.Void, f.Errorf("a layer callback of %s", cb.Describe())
	}
	return r.Apply(c, []cpp.Val{cpp.Int(int64(il), ast.TI32)})
}

// hp is an llama_hparams object (the model's, or a constructor's copy)
// whose methods the constructors ask.
type hp struct {
	r   *Run
	obj *cpp.Object
	err error
}

func (h *hp) call(method string, args ...int64) int64 {
	if h.err != nil {
		return 0
	}
	p, err := h.r.program("llama_hparams::" + method)
	if err != nil {
		h.err = err
		return 0
	}
	vs := make([]cpp.Val, len(args))
	for i, a := range args {
		vs[i] = cpp.Int(a, ast.TI64)
	}
	v, err := h.r.Call(p, cpp.Val{K: cpp.KObj, P: h.obj}, vs)
	if err != nil {
		h.err = err
		return 0
	}
	if v.K == cpp.KFloat {
		return int64(v.F)
	}
	return v.I
}

func (h *hp) field(name string) int64 {
	c, ok := h.obj.Fields[name]
	if !ok {
		if h.err == nil {
			h.err = fmt.Errorf("arch: llama_hparams has no member %s", name)
		}
		return 0
	}
	if c.V.K == cpp.KFloat {
		return int64(c.V.F)
	}
	return c.V.I
}

func (h *hp) set(name string, v int64) {
	if c, ok := h.obj.Fields[name]; ok {
		c.V = cpp.Int(v, c.T)
	}
}

// fillArr sets every element of an array member.
func (h *hp) fillArr(name string, v int64) {
	if c, ok := h.obj.Fields[name]; ok && c.V.K == cpp.KArr {
		for i := range c.V.P.(*cpp.Array).Cells {
			cell := &c.V.P.(*cpp.Array).Cells[i]
			cell.V = cpp.Int(v, cell.T)
		}
	}
}

func (r *Run) modelHP() *hp { return &hp{r: r, obj: r.hparams.obj} }

func (h *hp) copy() *hp { return &hp{r: h.r, obj: h.obj.Clone()} }

// kvCache is a llama_kv_cache constructor's arguments.
type kvCache struct {
	h                *hp
	typeK, typeV     ggml.Type
	vTrans, unified  bool
	kvSize, nSeqMax  uint32
	filter           *cpp.Val
	reuse, share     *cpp.Val
	nameTag          string
	pre              []string
	filterFn         func(il int) (bool, error) // a filter of the constructor's own (chained)
	forceRotK        bool                       // the DeepSeek indexer override (computed below)
	nRSSeq           uint32
	recurrent, state bool
	nPad, nSWA       uint32
	swaType          int
}

// newKVCache is llama_kv_cache's constructor: the layers that keep a K
// (and, unless the model is MLA, a V) tensor.
func (r *Run) newKVCache(f *cpp.Frame, c kvCache) (*Cache, error) {
	h := c.h
	nStream := c.nSeqMax
	if c.unified {
		nStream = 1
	}
	nLayer := int(h.field("n_layer_all"))
	out := &Cache{Class: "llama_kv_cache", Pre: append([]string(nil), c.pre...), Cells: c.kvSize, Streams: nStream, NSeqMax: c.nSeqMax, TypeK: c.typeK, TypeV: c.typeV, VTrans: c.vTrans,
		NPad: c.nPad, NSWA: c.nSWA, SWAType: c.swaType, Hparams: h.obj}
	if c.vTrans && h.call("is_n_embd_v_gqa_variable") != 0 {
		out.Pre = append(out.Pre, fmt.Sprintf("WARN llama_kv_cache: the V embeddings have different sizes across layers and FA is not enabled - padding V cache to %d", h.call("n_embd_v_gqa_max")))
	}
	isMLA := h.call("is_mla") != 0
	headK, headV := int32(0), int32(0)
	nLayers := 0
	for il := 0; il < nLayer; il++ {
		if h.call("has_kv", int64(il)) == 0 {
			continue
		}
		if ok, err := r.passes(f, c.filter, c.filterFn, il); err != nil {
			return nil, err
		} else if !ok {
			continue
		}
		// sharing needs another context's cache: there is none here
		hk := int32(h.call("n_embd_head_k", int64(il)))
		if headK == 0 {
			headK = hk
		} else if headK > 0 && headK != hk {
			headK = -1
		}
		if !isMLA {
			hv := int32(h.call("n_embd_head_v", int64(il)))
			if headV == 0 {
				headV = hv
			} else if headV > 0 && headV != hv {
				headV = -1
			}
		}
		nk := h.call("n_embd_k_gqa", int64(il))
		nv := h.call("n_embd_v_gqa", int64(il))
		if c.vTrans {
			nv = h.call("n_embd_v_gqa_max")
		}
		out.Tensors = append(out.Tensors, MemoryTensor{Name: fmt.Sprintf("cache_%sk_l%d", c.nameTag, il), Layer: il, Type: c.typeK,
			Ne: [4]int64{nk, int64(c.kvSize), int64(nStream), 1}, Role: 'k'})
		if !isMLA {
			out.Tensors = append(out.Tensors, MemoryTensor{Name: fmt.Sprintf("cache_%sv_l%d", c.nameTag, il), Layer: il, Type: c.typeV,
				Ne: [4]int64{nv, int64(c.kvSize), int64(nStream), 1}, Role: 'v'})
		}
		nLayers++
	}
	if h.err != nil {
		return nil, h.err
	}
	out.Layers = nLayers
	out.HeadK, out.HeadV = headK, headV
	arch := r.entry.Enum
	rotK := headK > 0 && c.typeK.Quantized() && h.call("n_embd_head_k")%64 == 0
	switch arch {
	case "LLM_ARCH_DEEPSEEK32", "LLM_ARCH_DEEPSEEK4", "LLM_ARCH_GLM_DSA", "LLM_ARCH_DOTS3NOTE":
		if h.field("n_embd_head_k_full") == h.field("indexer_head_size") {
			rotK = true
		}
	}
	rotV := headV > 0 && c.typeV.Quantized() && h.call("n_embd_head_v")%64 == 0
	out.RotK, out.RotV = b2int(rotK), b2int(rotV)
	return out, h.err
}

// passes is a layer filter's answer: the callback's, then the
// constructor's own.
func (r *Run) passes(f *cpp.Frame, cb *cpp.Val, own func(int) (bool, error), il int) (bool, error) {
	if own != nil {
		return own(il)
	}
	if cb == nil {
		return true, nil
	}
	v, err := r.layerFn(f, cb, il)
	if err != nil {
		return false, err
	}
	return v.Truthy(), nil
}

// chained is a filter of the constructor's own: the caller's filter (if
// any) and then cond.
func (r *Run) chained(f *cpp.Frame, cb *cpp.Val, cond func(il int) bool) func(int) (bool, error) {
	return func(il int) (bool, error) {
		if cb != nil {
			v, err := r.layerFn(f, cb, il)
			if err != nil || !v.Truthy() {
				return false, err
			}
		}
		return cond(il), nil
	}
}

// newRecurrent is llama_memory_recurrent's constructor: r and s states
// (and PLE conv states) of mem_size × (1 + n_rs_seq) rows per layer.
func (r *Run) newRecurrent(f *cpp.Frame, typeR, typeS ggml.Type, memSize, nSeqMax, nRSSeq uint32, filter *cpp.Val, own func(int) (bool, error)) (*Cache, error) {
	h := r.modelHP()
	nLayer := int(h.call("n_layer"))
	out := &Cache{Class: "llama_memory_recurrent", Cells: memSize, NSeqMax: nSeqMax, NRSSeq: nRSSeq, TypeK: typeR, TypeV: typeS, Layers: nLayer}
	rows := int64(memSize) * int64(1+nRSSeq)
	embR, embS, ple := h.call("n_embd_r"), h.call("n_embd_s"), h.call("ple_conv_state")
	for il := 0; il < nLayer; il++ {
		if ok, err := r.passes(f, filter, own, il); err != nil {
			return nil, err
		} else if !ok {
			continue
		}
		out.Tensors = append(out.Tensors,
			MemoryTensor{Name: fmt.Sprintf("cache_r_l%d", il), Layer: il, Type: typeR, Ne: [4]int64{embR, rows, 1, 1}, Role: 'r'},
			MemoryTensor{Name: fmt.Sprintf("cache_s_l%d", il), Layer: il, Type: typeS, Ne: [4]int64{embS, rows, 1, 1}, Role: 's'})
		if ple > 0 && h.call("is_ple", int64(il)) != 0 {
			out.Tensors = append(out.Tensors, MemoryTensor{Name: fmt.Sprintf("cache_ple_r_l%d", il), Layer: il, Type: typeR, Ne: [4]int64{ple, rows, 1, 1}, Role: 'p'})
		}
	}
	return out, h.err
}

// swaSize is the SWA cache's size of an iSWA cache.
func swaSize(h *hp, base uint32, unified bool, nSeqMax, nUBatch uint32, full bool) uint32 {
	if full {
		return base
	}
	mult := uint32(1)
	if unified {
		mult = nSeqMax
	}
	return pad256(min(base, uint32(h.field("n_swa"))*mult+nUBatch))
}

func pad256(x uint32) uint32 { return (x + 255) / 256 * 256 }

const swaFullURL = "https://github.com/ggml-org/llama.cpp/pull/13194#issuecomment-2868343055"

// iswa is llama_kv_cache_iswa's constructor: a non-SWA and a SWA cache.
func (r *Run) iswa(f *cpp.Frame, h *hp, typeK, typeV ggml.Type, vTrans, swaFull, unified bool, kvSize, nSeqMax, nUBatch uint32,
	filter *cpp.Val, own func(int) (bool, error), reuse *cpp.Val, pre []string) ([]*Cache, error) {
	model := r.modelHP()
	isSWA := func(il int) bool { return model.call("is_swa", int64(il)) != 0 }
	base := func(il int) (bool, error) {
		if ok, err := r.passes(f, filter, own, il); err != nil || !ok {
			return false, err
		}
		return !isSWA(il), nil
	}
	swa := func(il int) (bool, error) {
		if ok, err := r.passes(f, filter, own, il); err != nil || !ok {
			return false, err
		}
		return isSWA(il), nil
	}
	sizeSWA := swaSize(h, kvSize, unified, nSeqMax, nUBatch, swaFull)
	if swaFull {
		pre = append(pre, fmt.Sprintf("WARN llama_kv_cache_iswa: using full-size SWA cache (ref: %s)", swaFullURL))
	}
	b, err := r.newKVCache(f, kvCache{h: h, typeK: typeK, typeV: typeV, vTrans: vTrans, unified: unified, kvSize: kvSize, nSeqMax: nSeqMax,
		filterFn: base, reuse: reuse, pre: append(pre, fmt.Sprintf("INFO llama_kv_cache_iswa: creating non-SWA KV cache, size = %d cells", kvSize))})
	if err != nil {
		return nil, err
	}
	s, err := r.newKVCache(f, kvCache{h: h, typeK: typeK, typeV: typeV, vTrans: vTrans, unified: unified, kvSize: sizeSWA, nSeqMax: nSeqMax,
		nSWA: uint32(model.field("n_swa")), swaType: int(model.field("swa_type")), filterFn: swa, reuse: reuse, pre: []string{fmt.Sprintf("INFO llama_kv_cache_iswa: creating     SWA KV cache, size = %d cells", sizeSWA)}})
	if err != nil {
		return nil, err
	}
	return []*Cache{b, s}, model.err
}

// indexerHP is the hparams copy an indexer cache is sized with: one KV
// head of indexer_head_size.
func (r *Run) indexerHP() *hp {
	h := r.modelHP().copy()
	h.fillArr("n_head_kv_arr", 1)
	h.set("n_embd_head_k_full", r.modelHP().field("indexer_head_size"))
	return h
}

// bNewMemory is "new C(args)" of a memory class C (the call of "new::C").
func bNewMemory(class string) cpp.Builtin {
	return func(f *cpp.Frame, args []*ast.Node) (cpp.Val, error) {
		vs, err := cpp.EvalArgs(f, args)
		if err != nil {
			return cpp.Void, err
		}
		vals := append([]cpp.Val(nil), vs...)
		a := &memArgs{f: f, vals: vals, fn: class}
		r := runOf(f)
		m := &Memory{Class: class}
		model := r.modelHP()
		switch class {
		case "llama_kv_cache":
			// (model, hparams, type_k, type_v, v_trans, offload, unified, kv_size, n_seq_max, n_pad, n_swa, swa_type, mem_other, filter, reuse, share)
			h := &hp{r: r, obj: a.obj(1)}
			if h.obj == nil {
				h = model
			}
			c, err := r.newKVCache(f, kvCache{h: h, typeK: a.typ(2), typeV: a.typ(3), vTrans: a.bool(4), unified: a.bool(6),
				kvSize: a.u32(7), nSeqMax: a.u32(8), nPad: a.u32(9), nSWA: a.u32(10), swaType: int(int32(a.u32(11))),
				filter: a.callback(13), reuse: a.callback(14), share: a.callback(15)})
			if err != nil {
				return cpp.Void, err
			}
			m.Caches = []*Cache{c}
		case "llama_kv_cache_iswa":
			// (model, type_k, type_v, v_trans, offload, swa_full, unified, kv_size, n_seq_max, n_ubatch, n_pad, mem_other, filter, reuse, share)
			cs, err := r.iswa(f, model, a.typ(1), a.typ(2), a.bool(3), a.bool(5), a.bool(6), a.u32(7), a.u32(8), a.u32(9), a.callback(12), nil, a.callback(13), nil)
			if err != nil {
				return cpp.Void, err
			}
			cs[0].NPad, cs[1].NPad = a.u32(10), a.u32(10)
			m.Caches = cs
		case "llama_memory_recurrent":
			// (model, type_r, type_s, offload, mem_size, n_seq_max, n_rs_seq, filter)
			c, err := r.newRecurrent(f, a.typ(1), a.typ(2), a.u32(4), a.u32(5), a.u32(6), a.callback(7), nil)
			if err != nil {
				return cpp.Void, err
			}
			m.Caches = []*Cache{c}
		case "llama_memory_hybrid", "llama_memory_hybrid_idx":
			cs, err := r.newHybrid(f, a, class, model)
			if err != nil {
				return cpp.Void, err
			}
			m.Caches = cs
		case "llama_memory_hybrid_iswa":
			cs, err := r.newHybridISWA(f, a, class, model)
			if err != nil {
				return cpp.Void, err
			}
			m.Caches = cs
		case "llama_kv_cache_dsa", "llama_kv_cache_msa":
			cs, err := r.newDSA(f, a, class, model)
			if err != nil {
				return cpp.Void, err
			}
			m.Caches, m.NPad = cs, a.u32(8)
		case "llama_kv_cache_dsa_iswa":
			cs, err := r.newDSAISWA(f, a, class, model)
			if err != nil {
				return cpp.Void, err
			}
			m.Caches = cs
		case "llama_kv_cache_dsv4":
			cs, err := r.dsv4(f, a)
			if err != nil {
				return cpp.Void, err
			}
			m.Caches = cs
		default:
			return cpp.Void, f.Errorf("no constructor for %s", class)
		}
		if model.err != nil {
			return cpp.Void, model.err
		}
		r.memory = m
		return cpp.Val{K: cpp.KObj, P: cpp.NewObject(class)}, nil
	}
}

// newHybrid is llama_memory_hybrid (and _idx): a KV cache of the
// attention layers, a recurrent state of the others (and an indexer
// cache).
func (r *Run) newHybrid(f *cpp.Frame, a *memArgs, class string, model *hp) ([]*Cache, error) {
	// (model, type_k, type_v, v_trans, kv_size, n_pad, n_swa, swa_type, type_r, type_s, rs_size, n_seq_max, n_rs_seq, offload, unified, filter_attn, filter_recr[, filter_idx])
	isRecr := func(il int) bool { return model.call("is_recr", int64(il)) != 0 }
	attnOwn, recrOwn := func(il int) (bool, error) { return !isRecr(il), nil }, func(il int) (bool, error) { return isRecr(il), nil }
	if cb := a.callback(15); cb != nil {
		attnOwn = nil
	}
	if cb := a.callback(16); cb != nil {
		recrOwn = nil
	}
	attn, err := r.newKVCache(f, kvCache{h: model, typeK: a.typ(1), typeV: a.typ(2), vTrans: a.bool(3), unified: a.bool(14),
		kvSize: a.u32(4), nSeqMax: a.u32(11), filter: a.callback(15), filterFn: attnOwn})
	if err != nil {
		return nil, err
	}
	recr, err := r.newRecurrent(f, a.typ(8), a.typ(9), a.u32(10), a.u32(11), a.u32(12), a.callback(16), recrOwn)
	if err != nil {
		return nil, err
	}
	caches := []*Cache{attn, recr}
	if cb := a.callback(17); class == "llama_memory_hybrid_idx" && cb != nil {
		h := r.indexerHP()
		h.set("rope_type", enumConsts["LLAMA_ROPE_TYPE_NONE"])
		size := model.field("indexer_head_size")
		h.set("n_embd_head_k_mla_impl", size)
		h.set("n_embd_head_v_mla_impl", size)
		idx, err := r.newKVCache(f, kvCache{h: h, typeK: a.typ(1), typeV: a.typ(2), vTrans: a.bool(3), unified: a.bool(14),
			kvSize: a.u32(4), nSeqMax: a.u32(11), filter: cb, nameTag: "idx_",
			pre: []string{fmt.Sprintf("INFO operator(): creating indexer KV cache, size = %d cells", a.u32(4))}})
		if err != nil {
			return nil, err
		}
		caches = append(caches, idx)
	}
	return caches, nil
}

// newHybridISWA is llama_memory_hybrid_iswa: the attention layers' iSWA
// caches and the recurrent state of the others.
func (r *Run) newHybridISWA(f *cpp.Frame, a *memArgs, class string, model *hp) ([]*Cache, error) {
	// (model, type_k, type_v, v_trans, swa_full, kv_size, n_ubatch, n_pad, type_r, type_s, rs_size, n_seq_max, n_rs_seq, offload, unified, filter_attn, filter_recr)
	isRecr := func(il int) bool { return model.call("is_recr", int64(il)) != 0 }
	var attnOwn, recrOwn func(int) (bool, error)
	if a.callback(15) == nil {
		attnOwn = func(il int) (bool, error) { return !isRecr(il), nil }
	}
	if a.callback(16) == nil {
		recrOwn = func(il int) (bool, error) { return isRecr(il), nil }
	}
	cs, err := r.iswa(f, model, a.typ(1), a.typ(2), a.bool(3), a.bool(4), a.bool(14), a.u32(5), a.u32(11), a.u32(6), a.callback(15), attnOwn, nil, nil)
	if err != nil {
		return nil, err
	}
	recr, err := r.newRecurrent(f, a.typ(8), a.typ(9), a.u32(10), a.u32(11), a.u32(12), a.callback(16), recrOwn)
	if err != nil {
		return nil, err
	}
	return append(cs, recr), nil
}

// newDSA is llama_kv_cache_dsa and _msa: a main KV cache and an
// indexer cache.
func (r *Run) newDSA(f *cpp.Frame, a *memArgs, class string, model *hp) ([]*Cache, error) {
	// (model, type_k, type_v, v_trans, offload, unified, kv_size, n_seq_max, n_pad, n_swa, swa_type, filter_main, filter_idx, reuse)
	kind := "main"
	main, err := r.newKVCache(f, kvCache{h: model, typeK: a.typ(1), typeV: a.typ(2), vTrans: a.bool(3), unified: a.bool(5),
		kvSize: a.u32(6), nSeqMax: a.u32(7), filter: a.callback(11), reuse: a.callback(13),
		pre: []string{fmt.Sprintf("INFO %s: creating %s KV cache, size = %d cells", class, kind, a.u32(6))}})
	if err != nil {
		return nil, err
	}
	h := r.indexerHP()
	if class == "llama_kv_cache_dsa" {
		h.set("rope_type", enumConsts["LLAMA_ROPE_TYPE_NEOX"])
	}
	idx, err := r.newKVCache(f, kvCache{h: h, typeK: a.typ(1), typeV: a.typ(2), vTrans: a.bool(3), unified: a.bool(5),
		kvSize: a.u32(6), nSeqMax: a.u32(7), filter: a.callback(12), reuse: a.callback(13),
		pre: []string{fmt.Sprintf("INFO %s: creating indexer KV cache, size = %d cells", class, a.u32(6))}})
	if err != nil {
		return nil, err
	}
	return []*Cache{main, idx}, nil
}

// newDSAISWA is llama_kv_cache_dsa_iswa: main, indexer and SWA caches.
func (r *Run) newDSAISWA(f *cpp.Frame, a *memArgs, class string, model *hp) ([]*Cache, error) {
	// (model, type_k, type_v, v_trans, offload, swa_full, unified, kv_size, n_seq_max, n_ubatch, n_pad, filter_mla, filter_lid, reuse)
	isSWA := func(il int) bool { return model.call("is_swa", int64(il)) != 0 }
	mla, lid, reuse := a.callback(11), a.callback(12), a.callback(13)
	kvSize, nSeqMax, unified := a.u32(7), a.u32(8), a.bool(6)
	var pre []string
	if a.bool(5) {
		pre = append(pre, fmt.Sprintf("WARN llama_kv_cache_dsa_iswa: using full-size SWA cache (ref: %s)", swaFullURL))
	}
	sizeSWA := swaSize(model, kvSize, unified, nSeqMax, a.u32(9), a.bool(5))
	pre = append(pre, fmt.Sprintf("INFO llama_kv_cache_dsa_iswa: creating DSA KV cache, size = %d cells", kvSize),
		fmt.Sprintf("INFO llama_kv_cache_dsa: creating main KV cache, size = %d cells", kvSize))
	main, err := r.newKVCache(f, kvCache{h: model, typeK: a.typ(1), typeV: a.typ(2), vTrans: a.bool(3), unified: unified,
		kvSize: kvSize, nSeqMax: nSeqMax, filterFn: r.chained(f, mla, func(il int) bool { return !isSWA(il) }), reuse: reuse, pre: pre})
	if err != nil {
		return nil, err
	}
	h := r.indexerHP()
	h.set("rope_type", enumConsts["LLAMA_ROPE_TYPE_NEOX"])
	idx, err := r.newKVCache(f, kvCache{h: h, typeK: a.typ(1), typeV: a.typ(2), vTrans: a.bool(3), unified: unified,
		kvSize: kvSize, nSeqMax: nSeqMax, filter: lid, reuse: reuse,
		pre: []string{fmt.Sprintf("INFO llama_kv_cache_dsa: creating indexer KV cache, size = %d cells", kvSize)}})
	if err != nil {
		return nil, err
	}
	swa, err := r.newKVCache(f, kvCache{h: model, typeK: a.typ(1), typeV: a.typ(2), vTrans: a.bool(3), unified: unified,
		kvSize: sizeSWA, nSeqMax: nSeqMax, filterFn: r.chained(f, mla, isSWA), reuse: reuse,
		pre: []string{fmt.Sprintf("INFO llama_kv_cache_dsa_iswa: creating SWA KV cache, size = %d cells", sizeSWA)}})
	if err != nil {
		return nil, err
	}
	return []*Cache{main, idx, swa}, nil
}

// dsv4 is llama_kv_cache_dsv4's constructor (model, type_k, type_v,
// v_trans, offload, swa_full, unified, kv_size, n_seq_max, n_ubatch,
// n_pad, n_rs_seq, filter, reuse): a raw iSWA cache, three compressed
// caches and three compressor states, one stream per sequence always.
func (r *Run) dsv4(f *cpp.Frame, a *memArgs) ([]*Cache, error) {
	model := r.modelHP()
	typeK, typeV, vTrans, swaFull := a.typ(1), a.typ(2), a.bool(3), a.bool(5)
	kvSize, nSeqMax, nUBatch, nRSSeq := a.u32(7), a.u32(8), a.u32(9), a.u32(11)
	filter, reuse := a.callback(12), a.callback(13)
	kOnly := func(h *hp) {
		k := h.call("n_embd_head_k")
		h.set("n_embd_head_k_mla_impl", k)
		h.set("n_embd_head_v_mla_impl", k)
	}
	copyOf := func() *hp {
		h := model.copy()
		h.set("n_layer_nextn", 0)
		return h
	}
	raw := copyOf()
	kOnly(raw)
	cs, err := r.iswa(f, raw, typeK, typeV, vTrans, swaFull, false, kvSize, nSeqMax, nUBatch, filter, nil, reuse,
		[]string{"INFO llama_kv_cache_dsv4: creating DSV4 raw KV cache"})
	if err != nil {
		return nil, err
	}
	csa, hca := copyOf(), copyOf()
	kOnly(csa)
	kOnly(hca)
	lid := copyOf()
	lid.fillArr("n_head_kv_arr", 1)
	size := model.field("indexer_head_size")
	for _, n := range []string{"n_embd_head_k_full", "n_embd_head_v_full", "n_embd_head_k_swa", "n_embd_head_v_swa"} {
		lid.set(n, size)
	}
	lid.set("rope_type", enumConsts["LLAMA_ROPE_TYPE_NEOX"])
	kOnly(lid)
	ratios, ok := model.obj.Fields["dsv4_compress_ratios"]
	ratioOf := func(il int) int64 {
		if !ok || ratios.V.K != cpp.KArr {
			return 0
		}
		c, err := ratios.V.P.(*cpp.Array).At(int64(il))
		if err != nil {
			return 0
		}
		return c.V.I
	}
	byRatio := func(want int64) func(int) (bool, error) {
		return r.chained(f, filter, func(il int) bool { return ratioOf(il) == want })
	}
	comp := func(n uint32, ratio uint32) uint32 { return max(1, (n+ratio-1)/ratio) }
	for _, k := range []struct {
		h     *hp
		ratio uint32
		what  string
	}{{csa, 4, "CSA compressed"}, {hca, 128, "HCA compressed"}, {lid, 4, "lightning-indexer"}} {
		n := comp(kvSize, k.ratio)
		c, err := r.newKVCache(f, kvCache{h: k.h, typeK: typeK, typeV: typeV, vTrans: vTrans, unified: false, kvSize: pad256(n), nSeqMax: nSeqMax,
			filterFn: byRatio(int64(k.ratio)), pre: []string{fmt.Sprintf("INFO llama_kv_cache_dsv4: creating DSV4 %s KV cache, size = %d cells", k.what, n)}})
		if err != nil {
			return nil, err
		}
		cs = append(cs, c)
	}
	headK := model.call("n_embd_head_k")
	for _, s := range []struct {
		name        string
		ratio, size uint32
		embd        int64
		what        string
		filterRatio int64
	}{{"csa", 4, 8, 2 * headK, "CSA", 4}, {"hca", 128, 128, headK, "HCA", 128}, {"lid", 4, 8, 2 * size, "lightning-indexer", 4}} {
		c := &Cache{Class: "llama_dsv4_comp_state", Pre: []string{fmt.Sprintf("INFO llama_kv_cache_dsv4: creating DSV4 %s compressor state", s.what)},
			Cells: s.size, Streams: nSeqMax, NSeqMax: nSeqMax, NRSSeq: nRSSeq, Name: s.name, Ratio: s.ratio, Embd: uint32(s.embd)}
		planes := int64(nSeqMax) * int64(1+nRSSeq)
		own := byRatio(s.filterRatio)
		nLayer := int(model.call("n_layer"))
		for il := 0; il < nLayer; il++ {
			if ok, err := own(il); err != nil {
				return nil, err
			} else if !ok {
				continue
			}
			c.Tensors = append(c.Tensors,
				MemoryTensor{Name: fmt.Sprintf("dsv4_%s_state_kv_l%d", s.name, il), Layer: il, Type: ggml.TypeF32, Ne: [4]int64{s.embd, int64(s.size), planes, 1}, Role: 'k'},
				MemoryTensor{Name: fmt.Sprintf("dsv4_%s_state_score_l%d", s.name, il), Layer: il, Type: ggml.TypeF32, Ne: [4]int64{s.embd, int64(s.size), planes, 1}, Role: 'v'})
			c.Layers++
		}
		cs = append(cs, c)
	}
	return cs, model.err
}

// memoryBuiltins are the memory classes' constructors.
func memoryBuiltins() map[string]cpp.Builtin {
	out := map[string]cpp.Builtin{}
	for n := range astBuiltinsWithPrefix("new::") {
		out[n] = bNewMemory(strings.TrimPrefix(n, "new::"))
	}
	return out
}

func astBuiltinsWithPrefix(prefix string) map[string]bool {
	out := map[string]bool{}
	for n := range ast.Builtins {
		if strings.HasPrefix(n, prefix) {
			out[n] = true
		}
	}
	return out
}

func b2int(b bool) int {
	if b {
		return 1
	}
	return 0
}
