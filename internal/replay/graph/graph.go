package graph

import (
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync"

	"github.com/ggload/ggload/ggml/ops"
	"github.com/ggload/ggload/internal/replay/arch"
	"github.com/ggload/ggload/internal/replay/cpp"
	"github.com/ggload/ggload/internal/replay/cpp/ast"
)

// A context's compute graph: llama_model::build_graph replayed (stage 1:
// the llama architecture) with real ggml ops, called through the
// bindings on a no_alloc context, as llama_context::graph_reserve builds
// the graph it reserves the compute buffers with. The graph programs are
// gen/graph.go's; their objects (llm_graph_context, its inputs, the
// result, the KV cache and its context) are Objects whose members share
// what is assigned to them (share), and their methods are the programs
// of their class and its bases (graphBases), an overload picked by its
// arguments (pickOverload). What is the evaluator's, not the pin's, is
// said where it is: the llm_graph_result, the reserve ubatch, the KV
// cache's context (made here from CreateMemory's cache, as
// llama_kv_cache_context's reserve constructor makes it), and the stubs
// (no graph callback, no LoRA adapters, no samplers); the control vector
// is the context's (cvec.go).
//
// Every ggml call is checked in Go first (package ops): a failed
// GGML_ASSERT in the native library would end the process.
//
// KNative values: P is an *ops.Tensor, an *ops.Context, an *ops.Graph,
// an ops.Sched or an ops.Backend.

// GraphSession is what the graphs of one context share: the weights'
// and the KV cache's tensors, made on a no_alloc context. Where they are
// to be scheduled, each is on a dummy buffer (of size zero) of its buffer
// type, the weights' marked as weights, as llama.cpp's no_alloc load and
// cache leave them: the scheduler then treats them as allocated and
// assigns their ops by their buffers.
type GraphSession struct {
	r       *arch.Run
	lib     *ops.Lib
	wctx    *ops.Context
	weights map[*arch.Tensor]*ops.Tensor
	mctx    cpp.Val
	fa      bool
	at      Placement
	dummies map[dummyKey]ops.Buffer
	sched   *schedState   // nil: the graphs are for counting only
	cross   Cross         // the encoder's output the decoder's graphs attend to (llama_cross)
	cvec    ControlVector // the context's control vector (cvec.go)
	loras   []LoRA        // the context's LoRA adapters (lora.go)
}

// Cross is the shape of an encoder's output (llama_cross's n_embd and
// n_enc); zero: none yet.
type Cross struct{ NEmbd, NEnc int64 }

// Placement says the buffer type of each weight and cache tensor of a
// scheduled session; a nil function (or a zero buffer type) leaves the
// tensor without a buffer.
type Placement struct {
	Weight func(t *arch.Tensor) ops.Buft
	Cache  func(cache, i int) ops.Buft // the i-th tensor of Memory.Caches[cache]

	// A context that computes gives its real tensors: the loaded weights
	// and the allocated cache (then Weight and Cache are not asked).
	WeightTensor func(t *arch.Tensor) *ops.Tensor
	CacheTensor  func(cache, i int) *ops.Tensor
}

type dummyKey struct {
	buft    ops.Buft
	weights bool
}

// NewGraphSession starts the graphs of a context: InitContext and
// CreateMemory must have run (their cparams and cache are the graphs'),
// and CreateTensors (the weights).
func NewGraphSession(r *arch.Run, lib *ops.Lib, mem *arch.Memory, flashAttn bool, at Placement) (*GraphSession, error) {
	if lib == nil {
		return nil, fmt.Errorf("arch: a graph needs the native library")
	}
	if r.CParams() == nil {
		return nil, fmt.Errorf("arch: a graph before InitContext")
	}
	s := &GraphSession{r: r, lib: lib, weights: map[*arch.Tensor]*ops.Tensor{}, fa: flashAttn, at: at, dummies: map[dummyKey]ops.Buffer{}}
	nw := 16
	walkTensors(cpp.Val{K: cpp.KObj, P: r.Model()}, func(*arch.Tensor) { nw++ }, map[*cpp.Object]bool{})
	if mem != nil {
		for _, c := range mem.Caches {
			nw += len(c.Tensors)
		}
	}
	s.wctx = lib.NewContext(lib.TensorOverhead() * uintptr(nw))
	if s.wctx == nil {
		return nil, fmt.Errorf("arch: ggml_init failed")
	}
	var err error
	if s.mctx, err = s.kvContext(mem); err != nil {
		s.Close()
		return nil, err
	}
	return s, nil
}

// Close frees the session's tensors and buffers.
func (s *GraphSession) Close() {
	s.lib.Free(s.wctx)
	for k, b := range s.dummies {
		s.lib.BufferFree(b)
		delete(s.dummies, k)
	}
}

// place puts a weight or cache tensor on the dummy buffer of its buffer
// type.
func (s *GraphSession) place(t *ops.Tensor, buft ops.Buft, weights bool) error {
	if buft == 0 {
		return nil
	}
	k := dummyKey{buft, weights}
	b, ok := s.dummies[k]
	if !ok {
		if b = s.lib.DummyBuffer(buft, weights); b == 0 {
			return fmt.Errorf("arch: a dummy buffer of %s", s.lib.BuftName(buft))
		}
		s.dummies[k] = b
	}
	ops.Place(t, b)
	return nil
}

// Graph is a built graph. Free releases its context.
type Graph struct {
	Nodes int
	G     *ops.Graph
	g     *graphState
	own   *GraphSession // BuildGraph's session, closed with the graph
}

// Free releases the graph's native context.
func (g *Graph) Free() {
	if g != nil && g.g != nil {
		g.g.free()
		g.g = nil
	}
	if g != nil && g.own != nil {
		g.own.Close()
		g.own = nil
	}
}

type graphState struct {
	*GraphSession
	ctx    *ops.Context // the compute context (no_alloc)
	gf     *ops.Graph
	inputs int         // the result's inputs
	fused  []fusedNode // the result's fused nodes
	res    *cpp.Object // the llm_graph_result
}

func (g *graphState) free() {
	g.lib.Free(g.ctx)
	g.ctx = nil
}

// Build replays llama_context::graph_reserve's building of a graph (its
// llama_model::build_graph) for a ubatch of nTokens tokens of nSeqs
// sequences with nOutputs outputs, on a graph of maxNodes nodes.
func (s *GraphSession) Build(nTokens, nSeqs, nOutputs uint32, maxNodes int) (*Graph, error) {
	if maxNodes <= 0 || nSeqs == 0 || nOutputs == 0 {
		return nil, fmt.Errorf("arch: graph of %d nodes, %d sequences, %d outputs", maxNodes, nSeqs, nOutputs)
	}
	if nTokens%nSeqs != 0 {
		nTokens = (nTokens + nSeqs - 1) / nSeqs * nSeqs
	}
	return s.build(reserveUbatch(nTokens, nSeqs, nOutputs), nTokens, nOutputs, maxNodes, false)
}

// build is llama_model::build_graph for the ubatch u of nTokens tokens
// with nOutputs outputs.
// An encoder's graph (llama_context::encode's) has no memory and
// non-causal attention.
func (s *GraphSession) build(u *cpp.Object, nTokens, nOutputs uint32, maxNodes int, encoder bool) (*Graph, error) {
	r := s.r
	g, res, err := s.result(maxNodes)
	if err != nil {
		return nil, err
	}
	r.Session = g
	defer func() { r.Session = nil }()
	cp := r.CParams().Clone()
	cp.Fields["flash_attn"] = &cpp.Cell{T: ast.TBool, V: cpp.Bool(s.fa)}
	gtype, mctx := "LLM_GRAPH_TYPE_DEFAULT", s.mctx
	if encoder {
		gtype, mctx = "LLM_GRAPH_TYPE_ENCODER", cpp.Null
		cp.Fields["causal_attn"] = &cpp.Cell{T: ast.TBool, V: cpp.False}
	}

	params := newShared("llm_graph_params")
	set := func(o *cpp.Object, name string, v cpp.Val) { o.Fields[name] = &cpp.Cell{T: ast.TRef, V: v} }
	set(params, "arch", r.Model().Fields["arch"].V)
	set(params, "hparams", cpp.Val{K: cpp.KObj, P: r.Hparams().Object()})
	set(params, "cparams", cpp.Val{K: cpp.KObj, P: cp})
	set(params, "ubatch", cpp.Val{K: cpp.KObj, P: u})
	set(params, "gtype", cpp.Int(enumConst(gtype), ast.TI32))
	set(params, "sched", cpp.Null)
	set(params, "backend_cpu", cpp.Null)
	set(params, "cb", cpp.Null)
	if sc := s.sched; sc != nil {
		set(params, "sched", cpp.Val{K: cpp.KNative, P: sc.h})
		set(params, "backend_cpu", cpp.Val{K: cpp.KNative, P: sc.cpu})
		set(params, "cb", cpp.Val{K: cpp.KFunc, P: cpp.Builtin(sc.callback(s, nTokens))})
	}
	set(params, "cvec", cpp.Val{K: cpp.KObj, P: s.cvecObject()}) // the context's control vector (cvec.go)
	set(params, "loras", cpp.Val{K: cpp.KMap, P: s.lorasMap()})  // the context's LoRA adapters (lora.go)
	set(params, "mctx", mctx)
	// the context's llama_cross: no encoder output yet
	cross := newShared("llama_cross")
	cross.Fields["n_embd"] = &cpp.Cell{T: ast.TI64, V: cpp.Int(s.cross.NEmbd, ast.TI64)}
	cross.Fields["n_enc"] = &cpp.Cell{T: ast.TI64, V: cpp.Int(s.cross.NEnc, ast.TI64)}
	// the graph reads whether there is an encoder output and its shape;
	// its values are the input's to set (one element stands for them)
	nv := 0
	if s.cross.NEnc > 0 {
		nv = 1
	}
	cross.Fields["v_embd"] = &cpp.Cell{V: cpp.Val{K: cpp.KArr, P: cpp.NewArray(ast.TF32, nv, false)}}
	cross.Fields["seq_ids_enc"] = &cpp.Cell{V: cpp.Val{K: cpp.KArr, P: cpp.NewArray(ast.TAuto, 0, false)}}
	set(params, "cross", cpp.Val{K: cpp.KObj, P: cross})
	set(params, "samplers", cpp.Val{K: cpp.KMap, P: &cpp.Map{Vals: []*cpp.Cell{}, Elem: ast.TPtr}}) // no backend samplers
	set(params, "n_outputs", cpp.Int(int64(nOutputs), ast.TU32))
	set(params, "res", cpp.Val{K: cpp.KObj, P: res})

	prog, err := r.Program("llama_model::build_graph")
	if err != nil {
		g.free()
		return nil, err
	}
	if _, err := r.Call(prog, cpp.Val{K: cpp.KObj, P: r.Model()}, []cpp.Val{{K: cpp.KObj, P: params}}); err != nil {
		g.free()
		return nil, err
	}
	return g.done(res)
}

// result is llm_graph_result's constructor: a context for max_nodes
// tensors and the graph, and the result object over them.
func (s *GraphSession) result(maxNodes int) (*graphState, *cpp.Object, error) {
	r, lib := s.r, s.lib
	g := &graphState{GraphSession: s}
	size := lib.TensorOverhead()*uintptr(maxNodes) + lib.GraphOverheadCustom(uintptr(maxNodes), false)
	if g.ctx = lib.NewContext(size); g.ctx == nil {
		return nil, nil, fmt.Errorf("arch: ggml_init failed")
	}
	g.gf = lib.NewGraph(g.ctx, maxNodes)
	res := newShared("llm_graph_result")
	res.Fields["gf"] = &cpp.Cell{V: cpp.Val{K: cpp.KNative, P: g.gf}}
	res.Fields["ctx"] = &cpp.Cell{V: cpp.Val{K: cpp.KNative, P: g.ctx}}
	nLayer := len(r.Model().Fields["layers"].V.P.(*cpp.Array).Cells)
	res.Fields["t_layer_inp"] = &cpp.Cell{V: cpp.Val{K: cpp.KArr, P: cpp.NewArray(ast.TPtr, nLayer, false)}}
	for _, n := range []string{"inputs", "fused_nodes", "t_sampled", "t_sampled_probs", "t_sampled_logits", "t_candidates"} {
		res.Fields[n] = &cpp.Cell{V: cpp.Val{K: cpp.KArr, P: cpp.NewArray(ast.TAuto, 0, false)}}
	}
	return g, res, nil
}

// done is the graph a result was built into.
func (g *graphState) done(res *cpp.Object) (*Graph, error) {
	g.res = res
	g.inputs = len(res.Fields["inputs"].V.P.(*cpp.Array).Cells)
	for _, c := range res.Fields["fused_nodes"].V.P.(*cpp.Array).Cells {
		// an llm_graph_fused_node {op, tensor, il}, kept as the brace
		// list it was made from
		a, ok := c.V.P.(*cpp.Array)
		if c.V.K != cpp.KArr || !ok || len(a.Cells) != 3 {
			g.free()
			return nil, fmt.Errorf("arch: a fused node of %s", c.V.Describe())
		}
		t, _ := a.Cells[1].V.P.(*ops.Tensor)
		g.fused = append(g.fused, fusedNode{op: a.Cells[0].V.I, t: t, il: int(a.Cells[2].V.I)})
	}
	return &Graph{Nodes: g.lib.NNodes(g.gf), G: g.gf, g: g}, nil
}

// GraphParams are what BuildGraph builds a context's reserve graph with.
type GraphParams struct {
	Lib       *ops.Lib
	NTokens   uint32 // the reserve ubatch: n_ubatch tokens
	NSeqs     uint32 // of n_seq_max sequences
	NOutputs  uint32 // min(n_tokens, n_outputs_max) outputs
	FlashAttn bool   // cparams.flash_attn
	MaxNodes  int    // the graph's size; 0: llama_context::graph_max_nodes, for NTensors
	NTensors  int    // llama_model::n_tensors(): the weights in their contexts
	Memory    *arch.Memory
}

// BuildGraph builds one graph of a session of its own (no buffers: the
// graph is for counting, not scheduling).
func BuildGraph(r *arch.Run, p GraphParams) (*Graph, error) {
	s, err := NewGraphSession(r, p.Lib, p.Memory, p.FlashAttn, Placement{})
	if err != nil {
		return nil, err
	}
	if p.MaxNodes <= 0 {
		if p.MaxNodes, err = graphMaxNodes(r, p.NTokens, p.NTensors, nil); err != nil {
			s.Close()
			return nil, err
		}
	}
	g, err := s.Build(p.NTokens, p.NSeqs, p.NOutputs, p.MaxNodes)
	if err != nil {
		s.Close()
		return nil, err
	}
	g.own = s
	return g, nil
}

// walkTensors calls fn on every tensor the model's members hold.
func walkTensors(v cpp.Val, fn func(*arch.Tensor), seen map[*cpp.Object]bool) {
	switch v.K {
	case cpp.KTensor:
		fn(v.P.(*arch.Tensor))
	case cpp.KObj:
		o := v.P.(*cpp.Object)
		if seen[o] {
			return
		}
		seen[o] = true
		for _, c := range o.Fields {
			walkTensors(c.V, fn, seen)
		}
	case cpp.KArr:
		for _, c := range v.P.(*cpp.Array).Cells {
			walkTensors(c.V, fn, seen)
		}
	}
}

// newShared is an object of the graph's classes: its members hold what
// is assigned to them, as the pin's pointer and reference members do.
func newShared(class string) *cpp.Object {
	o := cpp.NewObject(class)
	o.Shared, o.Methods = true, graphMethods{}
	return o
}

// graphMethods answers the methods of the graph's objects: the few the
// evaluator answers itself (graphMethod), else the programs of their
// class and its bases, an overload picked by the arguments.
type graphMethods struct{}

func (graphMethods) HasMethod(o *cpp.Object, name string) bool {
	if strings.Contains(name, "::") {
		return false
	}
	_, ok := graphMethod(o, name)
	return ok || len(classPrograms(o.Class, name)) > 0
}

func (graphMethods) CallMethod(f *cpp.Frame, m *cpp.Method, args []*ast.Node) (cpp.Val, error) {
	o := m.Recv.P.(*cpp.Object)
	if gm, ok := graphMethod(o, m.Name); ok {
		return gm(f, args)
	}
	p, err := pickOverload(f, classPrograms(o.Class, m.Name), args)
	if err != nil {
		return cpp.Void, err
	}
	return f.I.Invoke(f, p, m.Recv, args)
}

// reserveUbatch is llama_batch_allocr::ubatch_reserve's ubatch with
// ubatch_prepare_reserve's outputs: n_tokens tokens of n_seqs sequences,
// the last n_outputs tokens outputs.
func reserveUbatch(nTokens, nSeqs, nOutputs uint32) *cpp.Object {
	u := newShared("llama_ubatch")
	u32 := func(x uint32) *cpp.Cell { return &cpp.Cell{T: ast.TU32, V: cpp.Int(int64(x), ast.TU32)} }
	u.Fields["n_tokens"] = u32(nTokens)
	u.Fields["n_seq_tokens"] = u32(nTokens / nSeqs)
	u.Fields["n_seqs"] = u32(nSeqs)
	u.Fields["n_seqs_unq"] = u32(nSeqs)
	u.Fields["n_pos"] = u32(1)
	u.Fields["equal_seqs"] = &cpp.Cell{T: ast.TBool, V: cpp.True}
	u.Fields["b_equal_seqs"] = u32(1)
	tok := cpp.NewArray(ast.TI32, int(nTokens), false)
	u.Fields["token"] = &cpp.Cell{V: cpp.Val{K: cpp.KArr, P: tok}}
	u.Fields["embd"] = &cpp.Cell{V: cpp.Null}
	out := cpp.NewArray(ast.TI32, int(nTokens), false)
	for i := range out.Cells {
		if uint32(i) >= nTokens-min(nOutputs, nTokens) {
			out.Cells[i].V = cpp.Int(1, ast.TI32)
		}
	}
	u.Fields["output"] = &cpp.Cell{V: cpp.Val{K: cpp.KArr, P: out}}
	// as ubatch_reserve sizes them: no token is in a sequence yet, the
	// sequences are the first n_seqs
	u.Fields["n_seq_id"] = &cpp.Cell{V: cpp.Val{K: cpp.KArr, P: cpp.NewArray(ast.TI32, int(nTokens), false)}}
	seqID := cpp.NewArray(ast.TPtr, int(nTokens), false)
	for i := range seqID.Cells {
		seqID.Cells[i].V = cpp.Null
	}
	u.Fields["seq_id"] = &cpp.Cell{V: cpp.Val{K: cpp.KArr, P: seqID}}
	unq := cpp.NewArray(ast.TI32, int(nSeqs), false)
	idx := cpp.NewArray(ast.TI32, int(enumConst("LLAMA_MAX_SEQ")), false)
	for i := range idx.Cells {
		v := int64(-1)
		if i < int(nSeqs) {
			v = int64(i)
			unq.Cells[i].V = cpp.Int(v, ast.TI32)
		}
		idx.Cells[i].V = cpp.Int(v, ast.TI32)
	}
	u.Fields["seq_id_unq"] = &cpp.Cell{V: cpp.Val{K: cpp.KArr, P: unq}}
	u.Fields["seq_idx"] = &cpp.Cell{V: cpp.Val{K: cpp.KArr, P: idx}}
	return u
}

// kvContext is llama_kv_cache_context(kv), the reserve constructor, over
// the KV cache CreateMemory sized (its tensors made on the session's
// context): n_kv the cache's size, one slot info over every stream.
func (s *GraphSession) kvContext(mem *arch.Memory) (cpp.Val, error) {
	if mem == nil || len(mem.Caches) == 0 {
		return cpp.Null, nil
	}
	if !memoryViewsReplayed(mem) {
		return cpp.Void, fmt.Errorf("arch: graph: the views of memory %s are not replayed yet", mem.Class)
	}
	// each memory's context as its init_full makes it: the contexts of
	// its caches, each their reserve one, in the members its accessors
	// read (the accessors are the pin's)
	switch mem.Class {
	case "llama_kv_cache":
		return s.kvCacheContext(mem.Caches[0], 0)
	case "llama_memory_recurrent":
		return s.recurrentContext(mem.Caches[0], 0)
	}
	ctx := newShared(mem.Class + "_context")
	ctx.Fields["status"] = &cpp.Cell{T: ast.TI32, V: cpp.Int(enumConst("LLAMA_MEMORY_STATUS_SUCCESS"), ast.TI32)}
	member := func(name string, v cpp.Val, err error) error {
		if err == nil {
			ctx.Fields[name] = &cpp.Cell{T: ast.TRef, V: v}
		}
		return err
	}
	kv := func(name string, ci int) error {
		v, err := s.kvCacheContext(mem.Caches[ci], ci)
		return member(name, v, err)
	}
	var err error
	switch mem.Class {
	case "llama_kv_cache_iswa":
		err = errors.Join(kv("ctx_base", 0), kv("ctx_swa", 1))
	case "llama_kv_cache_dsa":
		err = errors.Join(kv("ctx_mla", 0), kv("ctx_lid", 1))
	case "llama_kv_cache_msa":
		err = errors.Join(kv("ctx_base", 0), kv("ctx_idx", 1))
		if err == nil {
			ctx.Fields["kv"] = &cpp.Cell{T: ast.TPtr, V: cpp.Val{K: cpp.KObj, P: s.msaCache(mem)}}
		}
	case "llama_kv_cache_dsa_iswa":
		// its DSA part is a llama_kv_cache_dsa_context of its own
		dsa, derr := s.pairContext("llama_kv_cache_dsa_context", mem, 0, "ctx_mla", "ctx_lid")
		err = errors.Join(member("ctx_dsa", dsa, derr), kv("ctx_swa", 2))
	case "llama_memory_hybrid", "llama_memory_hybrid_idx":
		recr, rerr := s.recurrentContext(mem.Caches[1], 1)
		err = errors.Join(kv("ctx_attn", 0), member("ctx_recr", recr, rerr))
		if err == nil && mem.Class == "llama_memory_hybrid_idx" {
			// the indexer's context; null without an indexer
			ctx.Fields["ctx_idx"] = &cpp.Cell{T: ast.TRef, V: cpp.Null}
			// the streams of each ubatch's slot (get_n_stream reads the
			// current one's): a reserve's one slot spans every stream
			ns := cpp.NewArray(ast.TU32, 0, false)
			if len(mem.Caches) > 2 {
				err = kv("ctx_idx", 2)
				ns = cpp.NewArray(ast.TU32, 1, false)
				ns.Cells[0] = cpp.Cell{T: ast.TU32, V: cpp.Int(int64(max(mem.Caches[2].Streams, 1)), ast.TU32)}
			}
			ctx.Fields["ns_ubatch"] = &cpp.Cell{V: cpp.Val{K: cpp.KArr, P: ns}}
			ctx.Fields["i_cur"] = &cpp.Cell{T: ast.TU64, V: cpp.Int(0, ast.TU64)}
		}
	case "llama_kv_cache_dsv4":
		return s.dsv4Context(mem)
	case "llama_memory_hybrid_iswa":
		// the attention part is an iSWA context of its own
		ic, ierr := s.pairContext("llama_kv_cache_iswa_context", mem, 0, "ctx_base", "ctx_swa")
		recr, rerr := s.recurrentContext(mem.Caches[2], 2)
		err = errors.Join(member("ctx_attn", ic, ierr), member("ctx_recr", recr, rerr))
	default:
		return cpp.Void, fmt.Errorf("arch: graph: the views of memory %s are not replayed yet", mem.Class)
	}
	if err != nil {
		return cpp.Void, err
	}
	return cpp.Val{K: cpp.KObj, P: ctx}, nil
}

// pairContext is a memory context of class over two KV caches, the
// memory's first and the next: their contexts in members a and b.
func (s *GraphSession) pairContext(class string, mem *arch.Memory, first int, a, b string) (cpp.Val, error) {
	ctx := newShared(class)
	ctx.Fields["status"] = &cpp.Cell{T: ast.TI32, V: cpp.Int(enumConst("LLAMA_MEMORY_STATUS_SUCCESS"), ast.TI32)}
	for i, name := range []string{a, b} {
		v, err := s.kvCacheContext(mem.Caches[first+i], first+i)
		if err != nil {
			return cpp.Void, err
		}
		ctx.Fields[name] = &cpp.Cell{T: ast.TRef, V: v}
	}
	return cpp.Val{K: cpp.KObj, P: ctx}, nil
}

// msaCache is the llama_kv_cache_msa object an MSA context points to,
// with what its accessors read: n_pad, n_seq_max and the base cache.
func (s *GraphSession) msaCache(mem *arch.Memory) *cpp.Object {
	kv := newShared("llama_kv_cache_msa")
	kv.Fields["n_pad"] = &cpp.Cell{T: ast.TU32, V: cpp.Int(int64(mem.NPad), ast.TU32)}
	kv.Fields["n_seq_max"] = &cpp.Cell{T: ast.TU32, V: cpp.Int(int64(mem.Caches[0].NSeqMax), ast.TU32)}
	return kv
}

// memoryViewsReplayed says whether the graph has mem's views: none, a KV
// cache, an iSWA pair of them, a recurrent state, or the hybrid of a KV
// cache and a recurrent state.
func memoryViewsReplayed(mem *arch.Memory) bool {
	if mem == nil || len(mem.Caches) == 0 {
		return true
	}
	n := len(mem.Caches)
	switch mem.Class {
	case "llama_kv_cache", "llama_memory_recurrent":
		return n == 1
	case "llama_kv_cache_iswa", "llama_kv_cache_dsa", "llama_kv_cache_msa":
		return n == 2
	case "llama_kv_cache_dsa_iswa":
		return n == 3
	case "llama_kv_cache_dsv4":
		return n == 8
	case "llama_memory_hybrid":
		return n == 2 && mem.Caches[1].Class == "llama_memory_recurrent"
	case "llama_memory_hybrid_idx":
		return (n == 2 || n == 3) && mem.Caches[1].Class == "llama_memory_recurrent"
	case "llama_memory_hybrid_iswa":
		return n == 3 && mem.Caches[2].Class == "llama_memory_recurrent"
	}
	return false
}

// recurrentContext is llama_memory_recurrent_context(mem), the reserve
// constructor (is_full: every cell), over the recurrent state
// CreateMemory sized, its tensors made on the session's context: r_l,
// s_l (and p_l) by layer, null for the layers it does not keep.
func (s *GraphSession) recurrentContext(c *arch.Cache, ci int) (cpp.Val, error) {
	nLayer, err := s.r.Hparams().Field("n_layer_all")
	if err != nil {
		return cpp.Void, err
	}
	m := newShared("llama_memory_recurrent")
	byRole := map[byte]*cpp.Array{}
	for _, role := range []byte{'r', 's', 'p'} {
		a := cpp.NewArray(ast.TAuto, int(nLayer), false)
		for i := range a.Cells {
			a.Cells[i].V = cpp.Null
		}
		byRole[role] = a
		m.Fields[string(role)+"_l"] = &cpp.Cell{V: cpp.Val{K: cpp.KArr, P: a}}
	}
	for j, mt := range c.Tensors {
		a, ok := byRole[mt.Role]
		if !ok || mt.Layer < 0 || mt.Layer >= len(a.Cells) {
			return cpp.Void, fmt.Errorf("arch: the recurrent state's tensor %s (layer %d of %d)", mt.Name, mt.Layer, len(a.Cells))
		}
		t, err := s.cacheTensor(mt, ci, j)
		if err != nil {
			return cpp.Void, err
		}
		a.Cells[mt.Layer].V = cpp.Val{K: cpp.KNative, P: t}
	}
	m.Fields["size"] = &cpp.Cell{T: ast.TU32, V: cpp.Int(int64(c.Cells), ast.TU32)}
	m.Fields["n"] = &cpp.Cell{T: ast.TU32, V: cpp.Int(0, ast.TU32)}
	m.Fields["head"] = &cpp.Cell{T: ast.TU32, V: cpp.Int(0, ast.TU32)}
	m.Fields["rs_z"] = &cpp.Cell{T: ast.TI32, V: cpp.Int(-1, ast.TI32)}
	m.Fields["n_rs_seq"] = &cpp.Cell{T: ast.TU32, V: cpp.Int(int64(c.NRSSeq), ast.TU32)}
	mc := newShared("llama_memory_recurrent_context")
	mc.Fields["mem"] = &cpp.Cell{T: ast.TPtr, V: cpp.Val{K: cpp.KObj, P: m}}
	mc.Fields["is_full"] = &cpp.Cell{T: ast.TBool, V: cpp.True}
	mc.Fields["status"] = &cpp.Cell{T: ast.TI32, V: cpp.Int(enumConst("LLAMA_MEMORY_STATUS_SUCCESS"), ast.TI32)}
	return cpp.Val{K: cpp.KObj, P: mc}, nil
}

// cacheTensor makes tensor j of cache ci on the session's context and
// places it on the buffer type the plan gives it.
func (s *GraphSession) cacheTensor(mt arch.MemoryTensor, ci, j int) (*ops.Tensor, error) {
	if real := s.at.CacheTensor; real != nil {
		if t := real(ci, j); t != nil {
			return t, nil
		}
		return nil, fmt.Errorf("arch: the cache tensor %s is not allocated", mt.Name)
	}
	ne := mt.Ne
	nd := 4
	for nd > 1 && ne[nd-1] == 1 {
		nd--
	}
	t, err := s.lib.NewTensor(s.wctx, int32(mt.Type), nd, ne)
	if err != nil || t == nil {
		return nil, fmt.Errorf("arch: the cache tensor %s: %v", mt.Name, err)
	}
	s.lib.SetName(t, mt.Name)
	var bt ops.Buft
	if s.at.Cache != nil {
		bt = s.at.Cache(ci, j)
	}
	if err := s.place(t, bt, false); err != nil {
		return nil, err
	}
	return t, nil
}

// kvCacheContext is one KV cache's context (cache ci of the memory).
func (s *GraphSession) kvCacheContext(c *arch.Cache, ci int) (cpp.Val, error) {
	kv, err := s.kvCache(c, ci)
	if err != nil {
		return cpp.Void, err
	}
	kc := newShared("llama_kv_cache_context")
	kc.Fields["kv"] = &cpp.Cell{T: ast.TRef, V: cpp.Val{K: cpp.KObj, P: kv}}
	kc.Fields["n_kv"] = &cpp.Cell{T: ast.TU32, V: cpp.Int(int64(c.Cells), ast.TU32)}
	kc.Fields["i_cur"] = &cpp.Cell{T: ast.TU64, V: cpp.Int(0, ast.TU64)}
	kc.Fields["sinfos"] = &cpp.Cell{V: fullSlotInfo(c)}
	return cpp.Val{K: cpp.KObj, P: kc}, nil
}

// fullSlotInfo is the one slot info of a reserve context: every stream.
func fullSlotInfo(c *arch.Cache) cpp.Val {
	si := newShared("llama_kv_cache::slot_info")
	si.Fields["s0"] = &cpp.Cell{T: ast.TU32, V: cpp.Int(0, ast.TU32)}
	si.Fields["s1"] = &cpp.Cell{T: ast.TU32, V: cpp.Int(int64(max(c.Streams, 1))-1, ast.TU32)}
	sinfos := cpp.NewArray(ast.TAuto, 1, false)
	sinfos.Cells[0].V = cpp.Val{K: cpp.KObj, P: si}
	return cpp.Val{K: cpp.KArr, P: sinfos}
}

// kvCache is the llama_kv_cache object of cache ci, its tensors made on
// the session's context.
func (s *GraphSession) kvCache(c *arch.Cache, ci int) (*cpp.Object, error) {
	r := s.r
	kv := newShared("llama_kv_cache")
	hp := c.Hparams
	if hp == nil {
		hp = r.Hparams().Object()
	}
	kv.Fields["hparams"] = &cpp.Cell{T: ast.TRef, V: cpp.Val{K: cpp.KObj, P: hp}}
	kv.Fields["model"] = &cpp.Cell{T: ast.TRef, V: cpp.Val{K: cpp.KObj, P: r.Model()}}
	kv.Fields["v_trans"] = &cpp.Cell{T: ast.TBool, V: cpp.Bool(c.VTrans)}
	kv.Fields["attn_rot_k"] = &cpp.Cell{T: ast.TBool, V: cpp.Bool(c.RotK != 0)}
	kv.Fields["attn_rot_v"] = &cpp.Cell{T: ast.TBool, V: cpp.Bool(c.RotV != 0)}
	kv.Fields["n_embd_head_k_all"] = &cpp.Cell{T: ast.TI32, V: cpp.Int(int64(c.HeadK), ast.TI32)}
	kv.Fields["n_embd_head_v_all"] = &cpp.Cell{T: ast.TI32, V: cpp.Int(int64(c.HeadV), ast.TI32)}
	kv.Fields["size"] = &cpp.Cell{T: ast.TU32, V: cpp.Int(int64(c.Cells), ast.TU32)}
	kv.Fields["n_stream"] = &cpp.Cell{T: ast.TU32, V: cpp.Int(int64(max(c.Streams, 1)), ast.TU32)}
	layers, ids, err := s.cacheLayers(c, ci, "llama_kv_cache::kv_layer", map[byte]string{'k': "k", 'v': "v"})
	if err != nil {
		return nil, err
	}
	kv.Fields["layers"] = &cpp.Cell{V: layers}
	kv.Fields["map_layer_ids"] = &cpp.Cell{V: ids}
	return kv, nil
}

// cacheLayers makes cache ci's tensors on the session's context, layer by
// layer: an array of objects of class (il, and each tensor in the member
// its role names) and the map from a layer to its index in the array.
func (s *GraphSession) cacheLayers(c *arch.Cache, ci int, class string, members map[byte]string) (cpp.Val, cpp.Val, error) {
	layers := cpp.NewArray(ast.TAuto, 0, false)
	ids := &cpp.Map{Vals: []*cpp.Cell{}, Elem: ast.TI32}
	byLayer := map[int]*cpp.Object{}
	for j, mt := range c.Tensors {
		l, ok := byLayer[mt.Layer]
		if !ok {
			l = newShared(class)
			l.Fields["il"] = &cpp.Cell{V: cpp.Int(int64(mt.Layer), ast.TU32)}
			byLayer[mt.Layer] = l
			ids.Keys = append(ids.Keys, cpp.Int(int64(mt.Layer), ast.TI32))
			ids.Vals = append(ids.Vals, &cpp.Cell{T: ast.TI32, V: cpp.Int(int64(len(layers.Cells)), ast.TI32)})
			layers.Cells = append(layers.Cells, cpp.Cell{V: cpp.Val{K: cpp.KObj, P: l}})
		}
		t, err := s.cacheTensor(mt, ci, j)
		if err != nil {
			return cpp.Void, cpp.Void, err
		}
		m, ok := members[mt.Role]
		if !ok {
			return cpp.Void, cpp.Void, fmt.Errorf("arch: graph: the role %q of %s", mt.Role, mt.Name)
		}
		l.Fields[m] = &cpp.Cell{V: cpp.Val{K: cpp.KNative, P: t}}
	}
	return cpp.Val{K: cpp.KArr, P: layers}, cpp.Val{K: cpp.KMap, P: ids}, nil
}

// dsv4Context is llama_kv_cache_dsv4_context(kv), the reserve
// constructor, over the caches CreateMemory made in its order: the raw
// iSWA pair, the CSA, HCA and indexer caches, and their three compressor
// states. Its plans are the reserve plans its accessors build.
func (s *GraphSession) dsv4Context(mem *arch.Memory) (cpp.Val, error) {
	if len(mem.Caches) != 8 {
		return cpp.Void, fmt.Errorf("arch: graph: a DSV4 memory of %d caches", len(mem.Caches))
	}
	ctx := newShared("llama_kv_cache_dsv4_context")
	status := &cpp.Cell{T: ast.TI32, V: cpp.Int(enumConst("LLAMA_MEMORY_STATUS_SUCCESS"), ast.TI32)}
	ctx.Fields["status"] = status
	u32 := func(x int64) *cpp.Cell { return &cpp.Cell{T: ast.TU32, V: cpp.Int(x, ast.TU32)} }
	empty := func() *cpp.Cell { return &cpp.Cell{V: cpp.Val{K: cpp.KArr, P: cpp.NewArray(ast.TAuto, 0, false)}} }
	// the raw context reads the SWA cache of the raw pair, whole
	swa := mem.Caches[1]
	kvSWA, err := s.kvCache(swa, 1)
	if err != nil {
		return cpp.Void, err
	}
	raw := newShared("llama_kv_cache_dsv4_raw_context")
	raw.Fields["kv_swa"] = &cpp.Cell{T: ast.TPtr, V: cpp.Val{K: cpp.KObj, P: kvSWA}}
	raw.Fields["n_kv"] = u32(int64(swa.Cells))
	raw.Fields["sinfos_read"] = &cpp.Cell{V: fullSlotInfo(swa)}
	raw.Fields["sinfos_write"] = &cpp.Cell{V: fullSlotInfo(swa)}
	raw.Fields["i_next"] = &cpp.Cell{T: ast.TU64, V: cpp.Int(0, ast.TU64)}
	raw.Fields["ubatches"], raw.Fields["ubatches_write"] = empty(), empty()
	raw.Fields["status"] = status
	ctx.Fields["ctx_raw"] = &cpp.Cell{T: ast.TPtr, V: cpp.Val{K: cpp.KObj, P: raw}}
	for i, name := range []string{"csa", "hca", "lid"} {
		c := mem.Caches[2+i]
		full, err := s.kvCacheContext(c, 2+i)
		if err != nil {
			return cpp.Void, err
		}
		ctx.Fields["ctx_"+name+"_mem"] = &cpp.Cell{T: ast.TPtr, V: full}
		comp := newShared("llama_kv_cache_dsv4_comp_context")
		comp.Fields["kv"] = &cpp.Cell{T: ast.TPtr, V: full.P.(*cpp.Object).Fields["kv"].V}
		comp.Fields["sinfos"] = &cpp.Cell{V: fullSlotInfo(c)}
		comp.Fields["i_cur"] = &cpp.Cell{T: ast.TU64, V: cpp.Int(0, ast.TU64)}
		comp.Fields["n_kv"] = u32(int64(c.Cells))
		comp.Fields["ubatches"] = empty()
		ctx.Fields["ctx_"+name] = &cpp.Cell{T: ast.TPtr, V: cpp.Val{K: cpp.KObj, P: comp}}
		st := mem.Caches[5+i]
		state := newShared("llama_dsv4_comp_state")
		state.Fields["ratio"] = u32(int64(st.Ratio))
		state.Fields["state_size"] = u32(int64(st.Cells))
		state.Fields["n_embd_state"] = u32(int64(st.Embd))
		state.Fields["n_stream"] = u32(int64(st.Streams))
		state.Fields["n_rs_seq"] = u32(int64(st.NRSSeq))
		layers, ids, err := s.cacheLayers(st, 5+i, "llama_dsv4_comp_state::layer", map[byte]string{'k': "kv", 'v': "score"})
		if err != nil {
			return cpp.Void, err
		}
		state.Fields["layers"] = &cpp.Cell{V: layers}
		state.Fields["map_layer_ids"] = &cpp.Cell{V: ids}
		ctx.Fields[name+"_state"] = &cpp.Cell{T: ast.TPtr, V: cpp.Val{K: cpp.KObj, P: state}}
		ctx.Fields["plans_"+name] = empty()
		plan, err := s.r.NewStruct("llama_kv_cache_dsv4_context::comp_plan", structs()["llama_kv_cache_dsv4_context::comp_plan"])
		if err != nil {
			return cpp.Void, err
		}
		ctx.Fields["reserve_plan_"+name] = &cpp.Cell{V: cpp.Val{K: cpp.KObj, P: plan}}
	}
	ctx.Fields["reserve_plans"] = &cpp.Cell{T: ast.TBool, V: cpp.True}
	ctx.Fields["i_next"] = &cpp.Cell{T: ast.TU64, V: cpp.Int(0, ast.TU64)}
	ctx.Fields["ubatches"] = empty()
	return cpp.Val{K: cpp.KObj, P: ctx}, nil
}

// graphMethods are the methods of the graph's objects the evaluator
// provides: std::unique_ptr's get (the objects are their own pointers),
// llm_graph_result's get_ctx (its ctx_compute), llama_kv_cache's
// get_size and get_n_stream (of its cells, which are not replayed).
func graphMethod(o *cpp.Object, name string) (func(f *cpp.Frame, args []*ast.Node) (cpp.Val, error), bool) {
	self := cpp.Val{K: cpp.KObj, P: o}
	switch {
	case name == "get":
		return func(*cpp.Frame, []*ast.Node) (cpp.Val, error) { return self, nil }, true
	case o.Class == "llama_context" && name == "get_cparams":
		// (the K-shift's graph reads the context's parameters)
		return func(*cpp.Frame, []*ast.Node) (cpp.Val, error) { return o.Fields["cparams"].V, nil }, true
	case o.Class == "llm_graph_result" && name == "get_ctx":
		return func(*cpp.Frame, []*ast.Node) (cpp.Val, error) { return o.Fields["ctx"].V, nil }, true
	case o.Class == "llama_kv_cache" && name == "get_size":
		return func(*cpp.Frame, []*ast.Node) (cpp.Val, error) { return o.Fields["size"].V, nil }, true
	case o.Class == "llama_kv_cache" && name == "get_n_stream":
		return func(*cpp.Frame, []*ast.Node) (cpp.Val, error) { return o.Fields["n_stream"].V, nil }, true
	case strings.HasPrefix(o.Class, "llama_kv_cache") && name == "seq_pos_max":
		// the reservation's memory is empty: no sequence has a position;
		// a decoding MSA memory's greatest position is its view's (get_n_pos
		// reads it alone, padded: one below the padded axis pads to it)
		return func(*cpp.Frame, []*ast.Node) (cpp.Val, error) {
			if c, ok := o.Fields["n_pos"]; ok && c.V.I > 0 {
				return cpp.Int(c.V.I-1, ast.TI32), nil
			}
			return cpp.Int(-1, ast.TI32), nil
		}, true
	case strings.HasPrefix(o.Class, "llm_graph_input_mem_hybrid") && (name == "get_attn" || name == "get_recr"):
		// the inputs of a hybrid memory: its attention's and its state's
		field := map[string]string{"get_attn": "inp_attn", "get_recr": "inp_rs"}[name]
		return func(*cpp.Frame, []*ast.Node) (cpp.Val, error) { return o.Fields[field].V, nil }, true
	case o.Class == "llama_memory_hybrid_context" && (name == "get_attn" || name == "get_recr"):
		field := map[string]string{"get_attn": "ctx_attn", "get_recr": "ctx_recr"}[name]
		return func(*cpp.Frame, []*ast.Node) (cpp.Val, error) { return o.Fields[field].V, nil }, true
	}
	return nil, false
}

// classProgs memoizes classPrograms (every method call of the graph asks).
var classProgs sync.Map // [2]string{class, name} → []*Program

// classPrograms are the programs of class::name and its overloads, in
// the class or the nearest base that has them.
func classPrograms(class, name string) []*cpp.Program {
	k := [2]string{class, name}
	if v, ok := classProgs.Load(k); ok {
		return v.([]*cpp.Program)
	}
	ps := findClassPrograms(class, name)
	classProgs.Store(k, ps)
	return ps
}

func findClassPrograms(class, name string) []*cpp.Program {
	for _, c := range append([]string{class}, graphBases[class]...) {
		if p, _ := arch.LookupProgram(c + "::" + name); p != nil {
			return []*cpp.Program{p}
		}
		var out []*cpp.Program
		for k := 1; ; k++ {
			p, _ := arch.LookupProgram(fmt.Sprintf("%s::%s#%d", c, name, k))
			if p == nil {
				break
			}
			out = append(out, p)
		}
		if len(out) > 0 {
			return out
		}
		if c != class {
			if ps := findClassPrograms(c, name); len(ps) > 0 {
				return ps
			}
		}
	}
	return nil
}

// pickOverload chooses among a function's overloads as C++ does for
// the calls the pin's graph builders make: by the number of arguments,
// then by the class of the first pointer argument.
func pickOverload(f *cpp.Frame, ps []*cpp.Program, args []*ast.Node) (*cpp.Program, error) {
	if len(ps) == 1 {
		return ps[0], nil
	}
	var fit []*cpp.Program
	for _, p := range ps {
		need := 0
		for _, d := range p.Params.Kids {
			if len(d.Kids) == 0 {
				need++
			}
		}
		if len(args) >= need && len(args) <= len(p.Params.Kids) {
			fit = append(fit, p)
		}
	}
	if len(fit) > 1 {
		// by the kinds of the arguments that evaluate without effects
		// (names, members, literals): a number does not bind to a pointer
		// parameter, nor a tensor to a number
		var byKind []*cpp.Program
		for _, p := range fit {
			if argsBind(f, p, args) {
				byKind = append(byKind, p)
			}
		}
		if len(byKind) > 0 {
			fit = byKind
		}
	}
	if len(fit) == 1 {
		return fit[0], nil
	}
	if len(fit) > 1 {
		// by the classes of the object arguments that evaluate without
		// effects: the overload whose parameters are of the arguments'
		// own classes, else of their nearest bases
		best, bestScore, tie := (*cpp.Program)(nil), -1, false
		for _, p := range fit {
			score, ok := 0, true
			for i, a := range args {
				if i >= len(p.Params.Kids) || !(a.Op == ast.OpIdent || accessorCall(a)) {
					continue
				}
				pc := p.Params.Kids[i].C
				if pc == "" || !graphClass(pc) {
					continue
				}
				v, err := f.Eval(a)
				if err != nil || v.K != cpp.KObj {
					continue
				}
				cls := v.P.(*cpp.Object).Class
				switch d := slices.Index(append([]string{cls}, classAncestors(cls)...), pc); {
				case d < 0:
					ok = false
				default:
					score += 100 - d // nearer is better
				}
			}
			switch {
			case !ok:
			case score > bestScore:
				best, bestScore, tie = p, score, false
			case score == bestScore:
				tie = true
			}
		}
		if best != nil && !tie {
			return best, nil
		}
	}
	return nil, f.Errorf("no one overload of %s fits %d arguments (%d do)", ps[0].Name, len(args), len(fit))
}

// graphClass reports whether class is one of the graph's own classes
// (its inputs, memories and their contexts), which overloads tell apart.
func graphClass(class string) bool {
	for _, p := range []string{"llm_graph_", "llama_kv_cache", "llama_memory_"} {
		if strings.HasPrefix(class, p) {
			return true
		}
	}
	return false
}

// classAncestors are class's bases among the graph's classes, nearest
// first.
func classAncestors(class string) []string {
	var out []string
	for q := graphBases[class]; len(q) > 0; {
		b := q[0]
		q = append(q[1:], graphBases[b]...)
		if !slices.Contains(out, b) {
			out = append(out, b)
		}
	}
	return out
}

// accessorCall reports whether n is obj->get_x(), an accessor without
// arguments (which the graph's inputs have: get_attn, get_recr): it
// evaluates without effects.
func accessorCall(n *ast.Node) bool {
	return n.Op == ast.OpCall && len(n.Kids) == 1 && n.Kids[0].Op == ast.OpMember && strings.HasPrefix(n.Kids[0].S, "get_")
}

// argsBind reports whether the arguments that evaluate without effects
// can bind to p's parameters by their kinds.
func argsBind(f *cpp.Frame, p *cpp.Program, args []*ast.Node) bool {
	for i, a := range args {
		switch a.Op {
		case ast.OpIdent, ast.OpMember, ast.OpInt, ast.OpFloat:
		default:
			continue
		}
		v, err := f.Eval(a)
		if err != nil {
			continue
		}
		number := v.K == cpp.KInt || v.K == cpp.KFloat || v.K == cpp.KEnum
		pointer := v.K == cpp.KNative || v.K == cpp.KTensor
		switch t := p.Params.Kids[i].T; {
		case t == ast.TPtr && number && !(v.K == cpp.KInt && v.I == 0 && a.Op == ast.OpInt):
			return false
		case (t == ast.TI32 || t == ast.TI64 || t == ast.TU32 || t == ast.TU64 || t == ast.TF32 || t == ast.TBool) && pointer:
			return false
		}
	}
	return true
}

// graphInit is a graph struct's member with a literal default member
// initializer (const T name = literal;), a map (std::map<K, V> name;,
// empty), or a graph input's member of a struct nested in its class
// (typ "struct", val the struct, value-initialized).
type graphInit struct{ name, typ, val string }

// value is the member's initial value, of its type.
func (g graphInit) value(r *arch.Run) (cpp.Val, error) {
	switch g.typ {
	case "std::map":
		// the graph structs' maps map to pointers (qwen4exp's qsa_inps,
		// rs_rows)
		return cpp.Val{K: cpp.KMap, P: &cpp.Map{Vals: []*cpp.Cell{}, Elem: ast.TPtr}}, nil
	case "struct":
		o, err := r.NewStruct(g.val, structs()[g.val])
		return cpp.Val{K: cpp.KObj, P: o}, err
	case "bool":
		return cpp.Bool(g.val == "true"), nil
	case "float":
		x, err := strconv.ParseFloat(g.val, 32)
		return cpp.Val{K: cpp.KFloat, T: ast.TF32, F: float64(float32(x))}, err
	}
	n, err := strconv.ParseInt(g.val, 10, 64)
	t := map[string]ast.Type{"int": ast.TI32, "int32_t": ast.TI32, "int64_t": ast.TI64, "uint32_t": ast.TU32}[g.typ]
	return cpp.Int(n, t), err
}

// graphNew is "std::make_unique<C>(args)" of a graph class: the object,
// its constructor's program run on it if the class has one. graph (or
// graph<arg>) is the calling architecture's graph class: its own,
// another's it aliases (using graph = Other::graph<arg>;) or its base
// class's, with the template parameter bound under its own name.
func graphNew(class string) cpp.Builtin {
	return func(f *cpp.Frame, args []*ast.Node) (cpp.Val, error) {
		cls, arg := class, ""
		if class == "graph" || strings.HasPrefix(class, "graph<") {
			if _, a, ok := strings.Cut(class, "<"); ok {
				arg = strings.TrimSuffix(a, ">")
			}
			owner := f.Fn
			if i := strings.LastIndex(owner, "::"); i >= 0 {
				owner = owner[:i]
			}
			cls = owner + "::graph"
			if a, ok := graphAliases[cls]; ok {
				var targ string
				cls, targ, _ = strings.Cut(a, "<")
				if targ = strings.TrimSuffix(targ, ">"); targ == "true" || targ == "false" {
					arg = targ // fixed by the alias; else the caller's
				}
			} else {
				for c := owner; c != "" && len(classPrograms(cls, "graph")) == 0; c = arch.ClassParent(c) {
					cls = c + "::graph"
				}
			}
		}
		o := newShared(cls)
		for _, in := range graphInits[cls] {
			v, err := in.value(arch.Of(f))
			if err != nil {
				return cpp.Void, f.Errorf("%s::%s = %s: %v", cls, in.name, in.val, err)
			}
			o.Fields[in.name] = &cpp.Cell{T: v.T, V: v}
		}
		if param := graphTParams[cls]; param != "" && (arg == "true" || arg == "false") {
			o.Fields[param] = &cpp.Cell{T: ast.TBool, V: cpp.Bool(arg == "true")}
		}
		self := cpp.Val{K: cpp.KObj, P: o}
		short := cls
		if i := strings.LastIndex(cls, "::"); i >= 0 {
			short = cls[i+2:]
		}
		ps := classPrograms(cls, short)
		if arg != "" && slices.ContainsFunc(ps, func(p *cpp.Program) bool { return graphSpecs[p.Name] != "" }) {
			// explicit specializations: the one for the argument
			ps = slices.DeleteFunc(slices.Clone(ps), func(p *cpp.Program) bool { return graphSpecs[p.Name] != arg })
		}
		if len(ps) > 0 {
			p, err := pickOverload(f, ps, args)
			if err != nil {
				return cpp.Void, err
			}
			if _, err := arch.Of(f).Invoke(f, p, self, args); err != nil {
				return cpp.Void, err
			}
		} else if len(args) > 0 {
			return cpp.Void, f.Errorf("new %s: no constructor program for %d arguments", cls, len(args))
		}
		return self, nil
	}
}

// graphBuiltins are the ggml functions and the make_unique of the
// graph's classes: an architecture's graph (graph, or the templated
// graph<embed>) and llama.cpp's graph inputs.
func graphBuiltins() map[string]cpp.Builtin {
	out := map[string]cpp.Builtin{}
	for _, c := range []string{"graph", "graph<false>", "graph<true>"} {
		out["new::"+c] = graphNew(c)
	}
	for c := range graphBases {
		if strings.HasPrefix(c, "llm_graph_input_") {
			out["new::"+c] = graphNew(c)
		}
	}
	// an input class nested in a model's class, made by its graph under
	// its own name (llama_model_qwen4exp::llm_graph_input_qsa)
	for c := range graphBases {
		if i := strings.LastIndex(c, "::"); i >= 0 && strings.HasPrefix(c[i+2:], "llm_graph_input_") {
			if _, taken := out["new::"+c[i+2:]]; !taken {
				out["new::"+c[i+2:]] = graphNew(c)
			}
		}
	}
	// and the inputs of no base (a part of another input), by their
	// constructors
	for _, n := range arch.ProgramNames() {
		c, m, ok := strings.Cut(n, "::")
		if ok && strings.HasPrefix(c, "llm_graph_input_") && (m == c || strings.HasPrefix(m, c+"#")) {
			if _, done := out["new::"+c]; !done {
				out["new::"+c] = graphNew(c)
			}
		}
	}
	for n, b := range ggmlBuiltins() {
		out[n] = b
	}
	// the graph pins a node to a backend (llm_graph_context::build_attn_mha
	// puts the attention output on the CPU when the KV cache stays there)
	out["ggml_backend_sched_set_tensor_backend"] = func(f *cpp.Frame, args []*ast.Node) (cpp.Val, error) {
		vs, err := cpp.EvalArgs(f, args)
		if err != nil {
			return cpp.Void, err
		}
		if len(vs) != 3 {
			return cpp.Void, f.Errorf("ggml_backend_sched_set_tensor_backend of %d arguments", len(vs))
		}
		sc, ok1 := vs[0].P.(ops.Sched)
		t, ok2 := vs[1].P.(*ops.Tensor)
		be, ok3 := vs[2].P.(ops.Backend)
		if vs[0].K == cpp.KNull {
			return cpp.Void, nil // no scheduler: a graph built for its shape alone
		}
		if !ok1 || !ok2 || !ok3 || t == nil || be == 0 {
			return cpp.Void, f.Errorf("ggml_backend_sched_set_tensor_backend(%s, %s, %s)", vs[0].Describe(), vs[1].Describe(), vs[2].Describe())
		}
		if graphOf(f) == nil {
			return cpp.Void, f.Errorf("ggml_backend_sched_set_tensor_backend outside BuildGraph")
		}
		graphOf(f).lib.SchedSetTensorBackend(sc, t, be)
		return cpp.Void, nil
	}
	return out
}

// enumConst is an enum constant of the pin's programs (0 if none).
func enumConst(name string) int64 {
	v, _ := arch.EnumConst(name)
	return v
}

// structs are the structs of the pin's headers.
func structs() map[string][]cpp.FieldDef { return arch.Library().Structs() }

// graphOf is the graph a frame's builtins build (nil outside BuildGraph).
func graphOf(f *cpp.Frame) *graphState {
	g, _ := f.I.Session.(*graphState)
	return g
}

func init() { arch.Library().Register(graphBuiltins()) }
