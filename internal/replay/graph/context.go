package graph

import (
	"errors"
	"fmt"

	"github.com/ggload/ggload/ggml/ops"
	"github.com/ggload/ggload/internal/replay/arch"
	"github.com/ggload/ggload/internal/replay/cpp"
	"github.com/ggload/ggload/internal/replay/cpp/ast"
)

// A context that computes: llama_context's constructor on a loaded model
// (its backends, its scheduler, the fused ops' resolution and the compute
// buffers allocated by ggml_backend_sched_reserve, as sched_reserve does
// for a model that is not no_alloc), then, per ubatch, process_ubatch:
// the graph built over the real weights and cache, allocated, its inputs
// set, computed. The memory's bookkeeping (the cells, the slots) is
// kvcells.go's; the inputs' set_input is inputs.go's.

var errAllocCompute = errors.New("failed to allocate compute buffers")

// Context is a context's scheduler and graph session over real tensors.
type Context struct {
	rs       *reserver
	Res      *Reservation
	NThreads int // cparams.n_threads and n_threads_batch: the next graph's
	// Pool, when its Threads is set, is the CPU backend's thread pool,
	// made at the first graph and attached before each (llama.cpp's tools
	// attach theirs, common_threadpools), and made again when Pool
	// changes: a pool of more threads than a graph takes would have the
	// others poll for work beside it. Unset: the backend starts threads
	// for each graph.
	Pool   ops.ThreadpoolParams
	pool   ops.Threadpool
	poolOf ops.ThreadpoolParams // the pool's
	poolBe ops.Backend
	noPool bool // the backend makes none
}

// NewContext makes a context's scheduler and allocates its compute
// buffers. p.At must give the real tensors (WeightTensor, CacheTensor).
// InitContext, CreateMemory and CreateTensors must have run.
func NewContext(r *arch.Run, p ReserveParams) (*Context, error) {
	if p.Lib == nil || r.CParams() == nil || r.Context().K != cpp.KObj {
		return nil, fmt.Errorf("arch: a context needs the native library and InitContext")
	}
	if p.LayerDevice == nil || p.At.WeightTensor == nil || (p.Memory != nil && len(p.Memory.Caches) > 0 && p.At.CacheTensor == nil) {
		return nil, fmt.Errorf("arch: a context needs each layer's device and its real weights and cache")
	}
	rs := &reserver{r: r, p: p, lib: p.Lib, cp: r.CParams(), out: &Reservation{}, own: true}
	c := &Context{rs: rs, NThreads: 4}
	err := rs.backends()
	if err == nil {
		rs.pipelineParallel()
		err = rs.scheduler()
	}
	if err == nil {
		err = rs.session()
	}
	if err == nil {
		err = rs.resolveFusedOps()
	}
	if err == nil {
		err = rs.allocate()
	}
	if err != nil {
		c.Close()
		return nil, err
	}
	c.Res = rs.out
	return c, nil
}

// Close frees the scheduler, the session and the backends.
func (c *Context) Close() {
	rs := c.rs
	if rs == nil {
		return
	}
	c.rs = nil
	if rs.s != nil {
		rs.s.Close()
	}
	if rs.sched != 0 {
		rs.lib.SchedFree(rs.sched)
	}
	if rs.metaProbe != 0 {
		rs.lib.SchedFree(rs.metaProbe)
	}
	if rs.set != nil {
		rs.set.free(rs.lib)
	}
	if c.pool != 0 {
		// after the backends: none computes on it any more
		rs.lib.FreeThreadpool(c.poolBe, c.pool)
		c.pool = 0
	}
}

// allocate is sched_reserve for a model with its buffers: the prompt
// graph reserved (allocated), the generation graph, then the prompt graph
// again (with one sequence for the architectures whose inputs grow with
// the tokens per sequence), each backend's buffer then its size. Where the
// first allocation fails with pipeline parallelism, it is tried once more
// without.
func (rs *reserver) allocate() error {
	nSeqs := rs.u("n_seq_max")
	nTokens := min(rs.u("n_ctx"), rs.u("n_ubatch"))
	nOut := min(nTokens, rs.u("n_outputs_max"))
	ppg, err := rs.reserve(nTokens, nSeqs, nOut, nil, nil)
	if errors.Is(err, errAllocCompute) && rs.out.PipelineParallel {
		rs.logf("WARN", "sched_reserve: compute buffer allocation failed, retrying without pipeline parallelism")
		rs.out.PipelineParallel = false
		rs.setb("pipeline_parallel", false)
		rs.lib.SchedFree(rs.sched)
		rs.sched = 0
		if err = rs.scheduler(); err != nil {
			return err
		}
		rs.s.sched.h = rs.sched
		ppg, err = rs.reserve(nTokens, nSeqs, nOut, nil, nil)
	}
	if err != nil {
		return fmt.Errorf("failed to allocate compute pp buffers: %w", err)
	}
	tgg, err := rs.reserve(nSeqs, nSeqs, nSeqs, nil, nil)
	if err != nil {
		return fmt.Errorf("failed to allocate compute tg buffers: %w", err)
	}
	again := nSeqs
	if a := rs.r.Arch; a == "kimi-linear" || a == "minimax-01" {
		again = 1 // their inp_diag_decay grows with the tokens per sequence
	}
	if _, err := rs.reserve(nTokens, again, nOut, nil, nil); err != nil {
		return fmt.Errorf("failed to allocate compute pp buffers: %w", err)
	}
	out := rs.out
	out.NodesPP, out.SplitsPP, out.InputsPP, out.InputTensorsPP = ppg.nodes, ppg.splits, ppg.inputs, ppg.inputTensors
	out.NodesTG, out.SplitsTG, out.InputsTG, out.InputTensorsTG = tgg.nodes, tgg.splits, tgg.inputs, tgg.inputTensors
	for i, be := range rs.bes {
		n := rs.lib.SchedBufferSize(rs.sched, be)
		out.Buffers = append(out.Buffers, ComputeBuffer{Buft: rs.bufts[i], Dev: rs.lib.BackendDevice(be), Bytes: uint64(n)})
		if n > 1 {
			rs.logf("INFO", "sched_reserve: %10s compute buffer size = %8.2f MiB", rs.lib.BuftName(rs.bufts[i]), float64(n)/1024/1024)
		}
	}
	rs.logGraphs(ppg, tgg, nTokens, nSeqs)
	return nil
}

// Ubatch is a ubatch as llama_batch_allocr's split_simple makes it: its
// tokens in batch order, each its own sequence set.
type Ubatch struct {
	Tokens []int32
	Pos    []int32
	SeqIDs [][]int32 // each token's sequences
	Output []bool
	// NSeqs is n_seqs: the sequence sets of an equal split (split_equal),
	// whose tokens come set by set; 0 for a simple split (a set per token)
	NSeqs int
	Equal bool
	// Embd, when not nil, are the tokens' input embeddings (one row of
	// n_embd_inp floats each; llama_batch.embd) in place of Tokens, whose
	// values are then not read.
	Embd [][]float32
}

// object is the ubatch as the graph's programs read it.
func (u *Ubatch) object() *cpp.Object {
	o := newShared("llama_ubatch")
	n := len(u.Tokens)
	u32 := func(x int) *cpp.Cell { return &cpp.Cell{T: ast.TU32, V: cpp.Int(int64(x), ast.TU32)} }
	arr := func(t ast.Type, vals []int64) *cpp.Cell {
		a := cpp.NewArray(t, len(vals), false)
		for i, v := range vals {
			a.Cells[i].V = cpp.Int(v, t)
		}
		return &cpp.Cell{V: cpp.Val{K: cpp.KArr, P: a}}
	}
	toks, pos, nsid, outs := make([]int64, n), make([]int64, n), make([]int64, n), make([]int64, n)
	seqs := cpp.NewArray(ast.TPtr, n, false)
	var present [256]bool
	for i := range n {
		toks[i], pos[i], nsid[i] = int64(u.Tokens[i]), int64(u.Pos[i]), int64(len(u.SeqIDs[i]))
		if u.Output[i] {
			outs[i] = 1
		}
		ids := make([]int64, len(u.SeqIDs[i]))
		for k, s := range u.SeqIDs[i] {
			ids[k] = int64(s)
			present[s] = true
		}
		seqs.Cells[i].V = arr(ast.TI32, ids).V
	}
	var unq []int64
	idx := make([]int64, len(present))
	for s := range present {
		idx[s] = -1
		if present[s] {
			idx[s] = int64(len(unq))
			unq = append(unq, int64(s))
		}
	}
	nSeqs := u.NSeqs
	if nSeqs <= 0 {
		nSeqs = n
	}
	o.Fields["n_tokens"] = u32(n)
	o.Fields["n_seq_tokens"] = u32(n / nSeqs)
	o.Fields["n_seqs"] = u32(nSeqs)
	o.Fields["n_seqs_unq"] = u32(len(unq))
	o.Fields["n_pos"] = u32(1)
	o.Fields["equal_seqs"] = &cpp.Cell{T: ast.TBool, V: cpp.Bool(u.Equal)}
	o.Fields["b_equal_seqs"] = u32(map[bool]int{false: 0, true: 1}[u.Equal])
	o.Fields["token"] = arr(ast.TI32, toks)
	o.Fields["embd"] = &cpp.Cell{V: cpp.Null}
	if u.Embd != nil {
		// the graph reads whether the ubatch has tokens or embeddings (the
		// values are the input's to set: one element stands for them)
		o.Fields["token"] = &cpp.Cell{V: cpp.Null}
		o.Fields["embd"] = &cpp.Cell{V: cpp.Val{K: cpp.KArr, P: cpp.NewArray(ast.TF32, 1, false)}}
	}
	o.Fields["pos"] = arr(ast.TI32, pos)
	o.Fields["output"] = arr(ast.TI32, outs)
	o.Fields["n_seq_id"] = arr(ast.TI32, nsid)
	o.Fields["seq_id"] = &cpp.Cell{V: cpp.Val{K: cpp.KArr, P: seqs}}
	o.Fields["seq_id_unq"] = arr(ast.TI32, unq)
	o.Fields["seq_idx"] = arr(ast.TI32, idx)
	return o
}

// Step is one ubatch's graph, built and allocated: set its inputs, then
// Compute.
type Step struct {
	c        *Context
	g        *Graph
	u        *Ubatch
	nOutputs int
	shape    ops.GraphShape // the graph as built, before the scheduler split it
	threads  int8           // ThreadsChangeResults: 0 not asked yet, 1 no, 2 yes
}

// KVView is what a ubatch's graph sees of a KV cache: the cells it
// attends over (llama_kv_cache_context::apply's n_kv) and the streams its
// slot spans (the slot info's s0 and s1).
type KVView struct {
	NKV, S0, S1 uint32
	// NPos is an MSA memory's position axis (its base cache's view:
	// llama_kv_cache_msa_context::get_n_pos, every position in the cache
	// padded); zero for other memories.
	NPos uint32
}

// RSView is what a ubatch's graph sees of a recurrent state: the range
// of cells it uses and the cell it zeroes (llama_memory_recurrent's head,
// n and rs_z after find_slot).
type RSView struct {
	Head, N uint32
	RSZ     int32
}

// Build builds and allocates the graph of a ubatch with nOutputs outputs
// over the views of the memory's KV caches, in its order of caches, as
// process_ubatch does without graph reuse.
func (c *Context) Build(u *Ubatch, nOutputs int, views []KVView, rs *RSView) (*Step, error) {
	return c.build(u, nOutputs, views, rs, false, false)
}

// BuildEncoder builds and allocates llama_context::encode's graph of the
// ubatch: every token an output, no memory, attention not causal.
func (c *Context) BuildEncoder(u *Ubatch) (*Step, error) {
	return c.build(u, len(u.Tokens), nil, nil, true, false)
}

// build builds and allocates a ubatch's graph; viewsSet: the memory's
// views are set already (BuildDSV4).
func (c *Context) build(u *Ubatch, nOutputs int, views []KVView, rsv *RSView, encoder, viewsSet bool) (*Step, error) {
	rs := c.rs
	if rs == nil {
		return nil, fmt.Errorf("arch: the context is closed")
	}
	n := len(u.Tokens)
	if n == 0 || len(u.Pos) != n || len(u.SeqIDs) != n || len(u.Output) != n || nOutputs < 0 || nOutputs > n {
		return nil, fmt.Errorf("arch: a ubatch of %d tokens, %d positions, %d outputs", n, len(u.Pos), nOutputs)
	}
	if !encoder && !viewsSet {
		if err := rs.s.setViews(views, rsv); err != nil {
			return nil, err
		}
	}
	rs.lib.SchedReset(rs.sched)
	rs.s.fa = rs.b("flash_attn")
	g, err := rs.s.build(u.object(), uint32(n), uint32(nOutputs), rs.out.MaxNodes, encoder)
	if err != nil {
		return nil, err
	}
	shape, err := rs.alloc(g, fmt.Sprintf("the compute graph of %d tokens", n))
	if err != nil {
		return nil, err
	}
	return &Step{c: c, g: g, u: u, nOutputs: nOutputs, shape: shape}, nil
}

// alloc allocates a built graph on the context's scheduler, checked
// first for what the scheduler and the CPU backend would abort on, and
// returns the graph as it was before the scheduler split it; on an error
// the graph is freed.
func (rs *reserver) alloc(g *Graph, what string) (ops.GraphShape, error) {
	if err := Schedulable(rs.lib, g.G, rs.bes, rs.cpu); err != nil {
		g.Free()
		return ops.GraphShape{}, err
	}
	if err := rs.metaSplits(g.G); err != nil {
		g.Free()
		return ops.GraphShape{}, err
	}
	shape := rs.lib.Shape(g.G)
	if !rs.lib.SchedAllocGraph(rs.sched, g.G) {
		g.Free()
		return ops.GraphShape{}, fmt.Errorf("arch: failed to allocate %s", what)
	}
	if err := rs.computable(g.G); err != nil {
		g.Free()
		return ops.GraphShape{}, err
	}
	return shape, nil
}

// BuildShift builds the K-shift's graph of the memory's KV cache ci
// (llama_kv_cache::build_graph_shift: the keys of each cell rotated by
// its position's shift) and allocates it, as llama_kv_cache::update does.
// Its input, llm_graph_input_k_shift, is the caller's to set.
func (c *Context) BuildShift(ci int) (*Step, error) {
	rs := c.rs
	if rs == nil {
		return nil, fmt.Errorf("arch: the context is closed")
	}
	s := rs.s
	mc, ok := s.mctx.P.(*cpp.Object)
	if !ok || s.mctx.K != cpp.KObj {
		return nil, fmt.Errorf("arch: a K-shift without a KV cache")
	}
	kcs, _, err := memoryContexts(mc)
	if err != nil {
		return nil, err
	}
	if ci < 0 || ci >= len(kcs) {
		return nil, fmt.Errorf("arch: a K-shift of cache %d of %d", ci, len(kcs))
	}
	kv, ok := kcs[ci].Fields["kv"].V.P.(*cpp.Object)
	if !ok {
		return nil, fmt.Errorf("arch: the KV cache %d has no cache object", ci)
	}
	rs.lib.SchedReset(rs.sched)
	g, res, err := s.result(rs.out.MaxNodes)
	if err != nil {
		return nil, err
	}
	r := s.r
	r.Session = g
	defer func() { r.Session = nil }()
	prog, err := r.Program("llama_kv_cache::build_graph_shift")
	if err == nil {
		// the context it reads its parameters from (get_cparams)
		lctx := newShared("llama_context")
		lctx.Fields["cparams"] = &cpp.Cell{V: cpp.Val{K: cpp.KObj, P: r.CParams()}}
		_, err = r.Call(prog, cpp.Val{K: cpp.KObj, P: kv}, []cpp.Val{{K: cpp.KObj, P: res}, {K: cpp.KObj, P: lctx}})
	}
	if err != nil {
		g.free()
		return nil, err
	}
	gr, err := g.done(res)
	if err != nil {
		return nil, err
	}
	shape, err := rs.alloc(gr, "compute graph for K-shift")
	if err != nil {
		return nil, err
	}
	return &Step{c: c, g: gr, shape: shape}, nil
}

// Free releases the step's graph.
func (st *Step) Free() { st.g.Free() }

// Realloc allocates a kept step's graph on the context's scheduler again,
// after the scheduler allocated other graphs in its compute buffers: the
// graph is put back as it was built (its nodes' order and sources, which
// the scheduler's split changed), its tensors placed anew.
func (st *Step) Realloc() error {
	rs := st.c.rs
	if rs == nil || st.g.g == nil {
		return fmt.Errorf("arch: the graph is freed")
	}
	if err := rs.lib.Restore(st.g.G, st.shape); err != nil {
		return err
	}
	rs.lib.Unallocate(st.g.g.ctx)
	rs.lib.SchedReset(rs.sched)
	if !rs.lib.SchedAllocGraph(rs.sched, st.g.G) {
		return fmt.Errorf("arch: failed to allocate the compute graph again")
	}
	return nil
}

// Inputs are the graph's inputs: each llm_graph_input_* object's class and
// its members.
func (st *Step) Inputs() []*cpp.Object {
	var out []*cpp.Object
	for _, c := range st.g.g.res.Fields["inputs"].V.P.(*cpp.Array).Cells {
		if o, ok := c.V.P.(*cpp.Object); ok && c.V.K == cpp.KObj {
			out = append(out, o)
		}
	}
	return out
}

// Compute runs the graph with the context's threads (the CPU backend's,
// as graph_compute sets them, on the context's pool), synchronously.
func (st *Step) Compute() error {
	rs := st.c.rs
	for _, be := range rs.bes {
		if rs.lib.BackendSetNThreads(be, st.c.NThreads) {
			st.c.attachPool(be)
		}
	}
	if status := rs.lib.SchedGraphCompute(rs.sched, st.g.G); status != 0 {
		return fmt.Errorf("arch: graph compute failed: ggml status %d", status)
	}
	return nil
}

// attachPool sets the context's pool on the CPU backend be, made at the
// first graph (no pool asked for, or a backend without pools: none).
func (c *Context) attachPool(be ops.Backend) {
	rs := c.rs
	if c.Pool.Threads <= 0 || c.noPool || c.pool != 0 && c.poolBe != be {
		return
	}
	if c.pool != 0 && c.poolOf != c.Pool {
		rs.lib.BackendSetThreadpool(be, 0)
		rs.lib.FreeThreadpool(be, c.pool)
		c.pool = 0
	}
	if c.pool == 0 {
		tp, ok := rs.lib.NewThreadpool(be, c.Pool)
		if !ok {
			c.noPool = true // not again
			return
		}
		c.pool, c.poolOf, c.poolBe = tp, c.Pool, be
	}
	rs.lib.BackendSetThreadpool(be, c.pool)
}

// ThreadsChangeResults reports whether another thread count could give
// other results for the graph (ops.Lib.ThreadsChangeResults), asked once
// for the graph's life (a reused graph has its shapes).
func (st *Step) ThreadsChangeResults() bool {
	if st.threads == 0 {
		st.threads = 1
		if st.c.rs.lib.ThreadsChangeResults(st.g.G) {
			st.threads = 2
		}
	}
	return st.threads == 2
}

// Result is one of the result's tensors ("t_logits", "t_embd",
// "t_embd_pooled"); nil where the graph has none.
func (st *Step) Result(name string) *ops.Tensor {
	c, ok := st.g.g.res.Fields[name]
	if !ok {
		return nil
	}
	t, _ := c.V.P.(*ops.Tensor)
	return t
}

// SetCross sets the encoder output the decoder's graphs are built for.
func (c *Context) SetCross(x Cross) { c.rs.s.cross = x }

// CParam is a member of the context's llama_cparams, as an integer.
func (c *Context) CParam(name string) int64 {
	if cell, ok := c.rs.cp.Fields[name]; ok {
		return cell.V.I
	}
	return 0
}

// setViews sets each KV cache context's n_kv and slot info, in the
// memory's order of caches, and the recurrent state's range.
func (s *GraphSession) setViews(views []KVView, rsv *RSView) error {
	mc, ok := s.mctx.P.(*cpp.Object)
	if !ok || s.mctx.K != cpp.KObj {
		return nil
	}
	kcs, rc, err := memoryContexts(mc)
	if err != nil {
		return err
	}
	obj := func(o *cpp.Object, name string) *cpp.Object {
		v, _ := o.Fields[name].V.P.(*cpp.Object)
		return v
	}
	if mc.Class == "llama_kv_cache_msa_context" && len(views) > 0 {
		obj(mc, "kv").Fields["n_pos"] = &cpp.Cell{T: ast.TU32, V: cpp.Int(int64(views[0].NPos), ast.TU32)}
	}
	if len(kcs) != len(views) || (rc == nil) != (rsv == nil) {
		return fmt.Errorf("arch: %d views of the %d caches of %s", len(views), len(kcs), mc.Class)
	}
	for i, kc := range kcs {
		v := views[i]
		kc.Fields["n_kv"].V = cpp.Int(int64(v.NKV), ast.TU32)
		si := kc.Fields["sinfos"].V.P.(*cpp.Array).Cells[0].V.P.(*cpp.Object)
		si.Fields["s0"].V = cpp.Int(int64(v.S0), ast.TU32)
		si.Fields["s1"].V = cpp.Int(int64(v.S1), ast.TU32)
	}
	if mc.Class == "llama_memory_hybrid_idx_context" && len(kcs) > 1 {
		// the streams of the indexer's slot (the attention cache's)
		ns := mc.Fields["ns_ubatch"].V.P.(*cpp.Array)
		ns.Cells[0].V = cpp.Int(int64(views[1].S1-views[1].S0+1), ast.TU32)
	}
	if rc != nil {
		rc.Fields["is_full"].V = cpp.False
		m := obj(rc, "mem")
		m.Fields["head"].V = cpp.Int(int64(rsv.Head), ast.TU32)
		m.Fields["n"].V = cpp.Int(int64(rsv.N), ast.TU32)
		m.Fields["rs_z"].V = cpp.Int(int64(rsv.RSZ), ast.TI32)
	}
	return nil
}

// memoryContexts are a memory context's KV cache contexts, in the
// memory's order of caches, and its recurrent state's context (nil where
// it has none).
func memoryContexts(mc *cpp.Object) ([]*cpp.Object, *cpp.Object, error) {
	obj := func(o *cpp.Object, name string) *cpp.Object {
		v, _ := o.Fields[name].V.P.(*cpp.Object)
		return v
	}
	var kcs []*cpp.Object
	var rc *cpp.Object
	switch mc.Class {
	case "llama_kv_cache_context":
		kcs = []*cpp.Object{mc}
	case "llama_kv_cache_iswa_context":
		kcs = []*cpp.Object{obj(mc, "ctx_base"), obj(mc, "ctx_swa")}
	case "llama_kv_cache_dsa_context":
		kcs = []*cpp.Object{obj(mc, "ctx_mla"), obj(mc, "ctx_lid")}
	case "llama_kv_cache_msa_context":
		kcs = []*cpp.Object{obj(mc, "ctx_base"), obj(mc, "ctx_idx")}
	case "llama_kv_cache_dsa_iswa_context":
		dsa := obj(mc, "ctx_dsa")
		kcs = []*cpp.Object{obj(dsa, "ctx_mla"), obj(dsa, "ctx_lid"), obj(mc, "ctx_swa")}
	case "llama_memory_recurrent_context":
		rc = mc
	case "llama_memory_hybrid_context":
		kcs, rc = []*cpp.Object{obj(mc, "ctx_attn")}, obj(mc, "ctx_recr")
	case "llama_memory_hybrid_idx_context":
		// the attention cache, then the indexer's where the model has one
		kcs, rc = []*cpp.Object{obj(mc, "ctx_attn")}, obj(mc, "ctx_recr")
		if idx := obj(mc, "ctx_idx"); idx != nil {
			kcs = append(kcs, idx)
		}
	case "llama_memory_hybrid_iswa_context":
		attn := obj(mc, "ctx_attn")
		kcs, rc = []*cpp.Object{obj(attn, "ctx_base"), obj(attn, "ctx_swa")}, obj(mc, "ctx_recr")
	default:
		return nil, nil, fmt.Errorf("arch: decoding with memory %s is not replayed yet", mc.Class)
	}
	return kcs, rc, nil
}

// ggml's rope modes (GGML_ROPE_TYPE_*).
const (
	ropeMRoPE  = 8
	ropeVision = 24
)

// computable checks what the CPU backend asserts as it computes (a native
// assert would end the process), for the nodes the scheduler gave the
// CPU or an RPC server (which may compute on its CPU): the sections of a
// multi-section rope.
func (rs *reserver) computable(g *ops.Graph) error {
	lib := rs.lib
	n := lib.NNodes(g)
	onCPU := func(node *ops.Tensor) (ops.Dev, bool) {
		be := lib.SchedTensorBackend(rs.sched, node)
		if be == 0 {
			return 0, false
		}
		dev := lib.BackendDevice(be)
		return dev, lib.DevType(dev) == ops.DevTypeCPU || lib.DevRegName(dev) == "RPC"
	}
	for i := 0; i < n; i++ {
		node := lib.Node(g, i)
		switch lib.OpName(node.Op) {
		case "ADD", "SUB", "MUL", "DIV":
			if dev, ok := onCPU(node); ok {
				if err := binaryTypes(lib, node, dev); err != nil {
					return err
				}
			}
			continue
		case "ROPE":
		default:
			continue
		}
		mode := node.OpParams[2]
		if mode&ropeMRoPE == 0 {
			continue
		}
		dev, ok := onCPU(node)
		if !ok {
			continue
		}
		sec := node.OpParams[11:15]
		where := fmt.Sprintf("rope %s on %s", ops.NameOf(node), lib.DevName(dev))
		abort := func(msg string) error { return &cpp.Abort{Msg: msg, Where: "ggml-cpu's rope, at compute"} }
		if sec[0] <= 0 && sec[1] <= 0 && sec[2] <= 0 {
			return abort(fmt.Sprintf("GGML_ASSERT(sections[0] > 0 || sections[1] > 0 || sections[2] > 0) failed (%s: sections %v)", where, sec))
		}
		if dims := sec[0] + sec[1] + sec[2] + sec[3]; int64(dims) > node.Ne[0] {
			return abort(fmt.Sprintf("GGML_ASSERT(sect_dims <= ne0) failed (%s: sections %v over %d)", where, sec, node.Ne[0]))
		}
		if mode == ropeVision && int64(node.OpParams[1]) != node.Ne[0]/2 {
			return abort(fmt.Sprintf("GGML_ASSERT(n_dims == ne0/2) failed (%s)", where))
		}
	}
	return nil
}

// ggml's type ids of the binary ops' operands.
const (
	typeF32  = 0
	typeF16  = 1
	typeBF16 = 30
)

// binaryTypes is ggml-cpu's binary_op: a float operand (f32, f16, bf16)
// computes only in the type combinations it has (a quantized first
// operand takes another path, ADD's alone).
func binaryTypes(lib *ops.Lib, node *ops.Tensor, dev ops.Dev) error {
	a, b := node.Src[0], node.Src[1]
	if a == nil || b == nil {
		return nil
	}
	t0, t1, td := a.Type, b.Type, node.Type
	if t0 != typeF32 && t0 != typeF16 && t0 != typeBF16 {
		return nil
	}
	ok := t0 == t1 && t1 == td ||
		t1 == typeF32 && (t0 == typeBF16 || t0 == typeF16) && (td == t0 || td == typeF32)
	if ok {
		return nil
	}
	return &cpp.Abort{Msg: fmt.Sprintf("binary_op: unsupported types: dst: %s, src0: %s, src1: %s (%s %s on %s)",
		lib.TypeName(td), lib.TypeName(t0), lib.TypeName(t1), lib.OpName(node.Op), ops.NameOf(node), lib.DevName(dev)),
		Where: "ggml-cpu's binary ops, at compute"}
}
