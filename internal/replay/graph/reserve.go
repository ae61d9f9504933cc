// Port of llama.cpp src/llama-context.cpp (v0.5.0): llama_context's
// backends, scheduler and compute reserve (sched_reserve, graph_reserve).

package graph

import (
	"fmt"
	"slices"
	"strings"
	"sync"

	"github.com/ggload/ggload/ggml/ops"
	"github.com/ggload/ggload/internal/replay/arch"
	"github.com/ggload/ggload/internal/replay/cpp"
	"github.com/ggload/ggload/internal/replay/cpp/ast"
)

// A context's compute buffers, as llama_context's constructor reserves
// them on a model loaded with no_alloc (what llama.cpp's -fit measures):
// its backends (the model's devices, the ACCEL devices, the CPU) and
// their buffer types, pipeline parallelism, then sched_reserve: the
// graph size (llama_context::graph_max_nodes, replayed), the scheduler,
// the fused ops' resolution (flash attention auto among them), the
// prompt graph measured with ggml_backend_sched_reserve_size and the
// generation graph split. The graphs are the pin's (graph.go), built
// with llama_context's graph callback, which names the tensors and pins
// a layer's norm and l_last to the layer's device.

// ReserveParams are the model's side of a context's reservation.
type ReserveParams struct {
	Lib     *ops.Lib
	Memory  *arch.Memory // CreateMemory's
	At      Placement    // each weight's and cache tensor's buffer type
	Devices []ops.Dev    // llama_model::devices, in order
	// LayerDevice is llama_model::dev_layer(il): the device of layer il
	// (the CPU's for a layer on the CPU).
	LayerDevice     func(il int) ops.Dev
	NGPULayers      int  // llama_model::n_gpu_layers()
	NTensors        int  // llama_model::n_tensors(): the weights in their contexts
	TensorOverrides bool // llama_model::has_tensor_overrides()
}

// ComputeBuffer is one backend's compute buffer.
type ComputeBuffer struct {
	Buft  ops.Buft // the scheduler's buffer type for the backend
	Dev   ops.Dev
	Bytes uint64
}

// Reservation is what sched_reserve finds.
type Reservation struct {
	MaxNodes                             int
	PipelineParallel                     bool
	FlashAttn                            bool // cparams.flash_attn once resolved
	NodesPP, SplitsPP, NodesTG, SplitsTG int
	InputsPP, InputsTG                   int // the graph inputs' objects
	InputTensorsPP, InputTensorsTG       int
	Buffers                              []ComputeBuffer // one per backend, in the scheduler's order
	Log                                  []string        // "LEVEL text", as llama.cpp logs them
}

// fusedProbe is one of llama_context.cpp's llm_fused_op_probe constants:
// the fused op, its name, the tokens per sequence of its probe graph, and
// the cparams flag it resolves.
type fusedProbe struct {
	op, name string
	perSeq   uint32
	flag     string
}

// fusedGroup is one of resolve_fused_ops' resolutions (fusedGroups, in
// tables_gen.go): the cparams flag that asks for it, the line it logs
// first, its probes.
type fusedGroup struct {
	auto, header string
	probes       []fusedProbe
}

// llama.cpp's LLAMA_SPLIT_MODE_LAYER
const splitModeLayer = 1

// schedState is a session's scheduler: what the graph callback and
// -nkvo's pinning need.
type schedState struct {
	lib         *ops.Lib
	h           ops.Sched
	backends    []ops.Backend
	cpu         ops.Backend
	layerDev    func(il int) ops.Dev
	fullOffload bool
	names       bool // name the tensors as llama.cpp's callback does
}

// callback is llama_context::graph_get_cb's callback for a graph of
// nTokens tokens: for small batches or a full offload, a layer's norm and
// l_last on the layer's device.
func (sc *schedState) callback(s *GraphSession, nTokens uint32) func(f *cpp.Frame, args []*ast.Node) (cpp.Val, error) {
	return func(f *cpp.Frame, args []*ast.Node) (cpp.Val, error) {
		if len(args) != 4 {
			return cpp.Void, f.Errorf("the graph callback: %d arguments", len(args))
		}
		vs, err := cpp.EvalArgs(f, args)
		if err != nil {
			return cpp.Void, err
		}
		cur, ok := vs[1].P.(*ops.Tensor)
		if vs[1].K != cpp.KNative || !ok || cur == nil {
			return cpp.Void, f.Errorf("the graph callback of %s", vs[1].Describe())
		}
		// (the callback names the tensor too: a context that computes
		// does, as backends may read the names; nothing a reservation
		// measures reads them)
		name, il := vs[2].S, int(vs[3].I)
		if sc.names {
			if il >= 0 {
				sc.lib.SetName(cur, fmt.Sprintf("%s-%d", name, il))
			} else {
				sc.lib.SetName(cur, name)
			}
		}
		if (nTokens < 32 || sc.fullOffload) && il != -1 && (name == "norm" || name == "l_last") {
			dev := sc.layerDev(il)
			for _, be := range sc.backends {
				if sc.lib.BackendDevice(be) == dev && sc.lib.DevSupportsOp(dev, cur) {
					sc.lib.SchedSetTensorBackend(sc.h, cur, be)
				}
			}
		}
		return cpp.Void, nil
	}
}

// Reservations keep their backends and schedulers, per device list and
// scheduler settings, for the next reservation alike (a program that
// plans, then fits, then loads makes many): a scheduler is large (its
// split inputs' context alone is about 20 MiB for a 1024-node graph), and
// freeing an allocation that large raises glibc's mmap threshold for the
// rest of the process, after which the loads' buffers stay resident. An
// RPC server's devices may go away: their sets are made and freed each
// time.
var (
	reserveMu   sync.Mutex // held by a reservation: the sets are shared
	reserveSets []*backendSet
)

const maxBackendSets = 4

type backendSet struct {
	lib       *ops.Lib
	devs      []ops.Dev
	bes       []ops.Backend
	scheds    map[schedKey]ops.Sched
	transient bool
}

type schedKey struct {
	maxNodes      int
	pp, opOffload bool
	bufts         string
}

// backendSetFor is the backends of devs (reserveMu held).
func backendSetFor(lib *ops.Lib, devs []ops.Dev) (*backendSet, error) {
	for i, s := range reserveSets {
		if s.lib == lib && slices.Equal(s.devs, devs) {
			// most recently used last
			reserveSets = append(append(reserveSets[:i:i], reserveSets[i+1:]...), s)
			return s, nil
		}
	}
	s, err := newBackendSet(lib, devs)
	if err != nil {
		return nil, err
	}
	if !s.transient {
		if len(reserveSets) == maxBackendSets {
			reserveSets[0].free(lib)
			reserveSets = reserveSets[1:]
		}
		reserveSets = append(reserveSets, s)
	}
	return s, nil
}

// newBackendSet initializes a backend on each device.
func newBackendSet(lib *ops.Lib, devs []ops.Dev) (*backendSet, error) {
	s := &backendSet{lib: lib, devs: devs, scheds: map[schedKey]ops.Sched{}}
	for _, d := range devs {
		// an RPC server serves one client at a time, and a meta device
		// asks its plan's splitter (which goes with the plan): their sets
		// are made and freed each time
		if lib.DevRegName(d) == "RPC" || lib.DevType(d) == ops.DevTypeMeta {
			s.transient = true
		}
		be := lib.BackendInit(d)
		if be == 0 {
			s.free(lib)
			return nil, &cpp.Throw{Msg: fmt.Sprintf("failed to initialize %s backend", lib.DevName(d))}
		}
		s.bes = append(s.bes, be)
	}
	return s, nil
}

// sched is the set's scheduler for these settings, made once.
func (s *backendSet) sched(lib *ops.Lib, bufts []ops.Buft, maxNodes int, pp, opOffload bool) ops.Sched {
	k := schedKey{maxNodes, pp, opOffload, fmt.Sprint(bufts)}
	if h, ok := s.scheds[k]; ok {
		return h
	}
	h := lib.SchedNew(s.bes, bufts, maxNodes, pp, opOffload)
	if h != 0 {
		s.scheds[k] = h
	}
	return h
}

func (s *backendSet) free(lib *ops.Lib) {
	for k, h := range s.scheds {
		lib.SchedFree(h)
		delete(s.scheds, k)
	}
	for _, be := range s.bes {
		lib.BackendFree(be)
	}
	s.bes = nil
}

// Reserve replays the reservation of a context's compute buffers on the
// model's devices. InitContext, CreateMemory and CreateTensors must have
// run; the weights' and the cache's buffer types are p.At's.
func Reserve(r *arch.Run, p ReserveParams) (*Reservation, error) {
	if p.Lib == nil || r.CParams() == nil || r.Context().K != cpp.KObj {
		return nil, fmt.Errorf("arch: Reserve needs the native library and InitContext")
	}
	if p.LayerDevice == nil {
		return nil, fmt.Errorf("arch: Reserve needs each layer's device")
	}
	rs := &reserver{r: r, p: p, lib: p.Lib, cp: r.CParams(), out: &Reservation{}}
	reserveMu.Lock()
	defer reserveMu.Unlock()
	if err := rs.backends(); err != nil {
		return nil, err
	}
	if rs.set.transient {
		defer rs.set.free(rs.lib)
	}
	rs.pipelineParallel()
	if err := rs.scheduler(); err != nil {
		return nil, err
	}
	if err := rs.session(); err != nil {
		return nil, err
	}
	defer rs.s.Close()
	if err := rs.resolveFusedOps(); err != nil {
		return nil, err
	}
	if err := rs.measure(); err != nil {
		return nil, err
	}
	return rs.out, nil
}

// reserver is a reservation under way: llama_context's constructor from
// its backends to sched_reserve.
type reserver struct {
	r   *arch.Run
	p   ReserveParams
	lib *ops.Lib
	cp  *cpp.Object // the context's llama_cparams
	out *Reservation

	set      *backendSet
	bes      []ops.Backend
	cpu      ops.Backend
	bufts    []ops.Buft
	sched    ops.Sched
	s        *GraphSession
	placeErr error // a weight on a buffer type no backend uses
	own      bool  // a context's: its backends and scheduler its own, its buffers allocated
	nLayer   int   // hparams.n_layer_all

	metaProbe ops.Sched // the scheduler MetaSplits splits graphs on (meta backends only)
	metaKnown int8      // 0 not yet asked, 1 a meta backend among bes, -1 none

	// the last probe graph resolve_fused_ops built: its key, its fused
	// nodes' devices, and what it was
	last struct {
		key   string
		nodes []probeNode
		built built
	}
}

// built is what a reserve graph was: its nodes, the scheduler's splits of
// it, its input objects and input tensors.
type built struct{ nodes, splits, inputs, inputTensors int }

// probeNode is a fused node of a probe graph: its op, layer and device.
type probeNode struct {
	op  int64
	il  int
	dev ops.Dev
}

func (rs *reserver) u(name string) uint32 { return uint32(rs.cp.Fields[name].V.I) }
func (rs *reserver) b(name string) bool   { return rs.cp.Fields[name].V.Truthy() }
func (rs *reserver) setb(name string, v bool) {
	rs.cp.Fields[name].V = cpp.Bool(v)
}

func (rs *reserver) logf(level, format string, a ...any) {
	rs.out.Log = append(rs.out.Log, level+" "+fmt.Sprintf(format, a...))
}

// backends are the context's: the model's devices, the ACCEL devices, the
// CPU; each with the buffer type the scheduler gives it (the CPU: the
// first device's host buffer type, for faster transfers).
func (rs *reserver) backends() error {
	lib, p := rs.lib, rs.p
	devs := append([]ops.Dev(nil), p.Devices...)
	for i := 0; i < lib.DevCount(); i++ {
		if d := lib.DevGet(i); lib.DevType(d) == ops.DevTypeAccel {
			devs = append(devs, d)
		}
	}
	cpuDev := lib.DevByType(ops.DevTypeCPU)
	if cpuDev == 0 {
		return &cpp.Throw{Msg: "failed to initialize CPU backend"}
	}
	devs = append(devs, cpuDev)
	var set *backendSet
	var err error
	if rs.own {
		set, err = newBackendSet(lib, devs)
	} else {
		set, err = backendSetFor(lib, devs)
	}
	if err != nil {
		return err
	}
	rs.set, rs.bes = set, set.bes
	rs.cpu = rs.bes[len(rs.bes)-1]
	rs.bufts = make([]ops.Buft, len(rs.bes))
	for i, be := range rs.bes {
		rs.bufts[i] = lib.BackendDefaultBuft(be)
		if lib.DevType(lib.BackendDevice(be)) == ops.DevTypeCPU && len(p.Devices) > 0 {
			if h := lib.DevHostBufferType(p.Devices[0]); h != 0 {
				rs.bufts[i] = h
			}
		}
	}
	return nil
}

// pipelineParallel decides pipeline parallelism: several devices, every
// layer offloaded, split by layer, the KV cache offloaded, no overrides,
// and every device but the CPU with async compute and events.
func (rs *reserver) pipelineParallel() {
	lib, p := rs.lib, rs.p
	rs.nLayer = int(rs.r.Hparams().Object().Fields["n_layer_all"].V.I)
	pp := len(p.Devices) > 1 && p.NGPULayers > rs.nLayer && rs.r.SplitMode() == splitModeLayer &&
		rs.b("offload_kqv") && !p.TensorOverrides
	if pp {
		for _, be := range rs.bes {
			d := lib.BackendDevice(be)
			if lib.DevType(d) != ops.DevTypeCPU && !lib.DevAsyncEvents(d) {
				pp = false
				break
			}
		}
	}
	rs.setb("pipeline_parallel", pp)
	rs.out.PipelineParallel = pp
	if pp {
		rs.logf("INFO", "llama_context: pipeline parallelism enabled")
	}
}

// scheduler is sched_reserve's scheduler, for graphs of graph_max_nodes.
func (rs *reserver) scheduler() error {
	var err error
	nTokens := min(rs.u("n_ctx"), rs.u("n_ubatch"))
	var loras []LoRA
	if rs.s != nil {
		loras = rs.s.loras
	}
	if rs.out.MaxNodes, err = graphMaxNodes(rs.r, nTokens, rs.p.NTensors, loras); err != nil {
		return err
	}
	if rs.own {
		rs.sched = rs.lib.SchedNew(rs.bes, rs.bufts, rs.out.MaxNodes, rs.out.PipelineParallel, rs.b("op_offload"))
	} else {
		rs.sched = rs.set.sched(rs.lib, rs.bufts, rs.out.MaxNodes, rs.out.PipelineParallel, rs.b("op_offload"))
	}
	if rs.sched == 0 {
		return fmt.Errorf("arch: ggml_backend_sched_new failed")
	}
	return nil
}

// usable checks that a backend can use the buffer type a tensor is on:
// the scheduler aborts on a tensor it cannot place.
func (rs *reserver) usable(bt ops.Buft, what string) error {
	if bt == 0 {
		return nil
	}
	for _, be := range rs.bes {
		if rs.lib.DevSupportsBuft(rs.lib.BackendDevice(be), bt) {
			return nil
		}
	}
	return fmt.Errorf("arch: %s is on %s, which none of the context's backends can use", what, rs.lib.BuftName(bt))
}

// session is the graphs' session over the scheduler, its weights and
// cache tensors on buffer types the backends use.
func (rs *reserver) session() error {
	p, at := rs.p, rs.p.At
	if w := at.Weight; w != nil {
		at.Weight = func(t *arch.Tensor) ops.Buft {
			bt := w(t)
			if err := rs.usable(bt, "weight "+t.Name); err != nil && rs.placeErr == nil {
				rs.placeErr = err
			}
			return bt
		}
	}
	if p.Memory != nil && at.Cache != nil {
		for ci, c := range p.Memory.Caches {
			for j, t := range c.Tensors {
				if err := rs.usable(at.Cache(ci, j), "cache tensor "+t.Name); err != nil {
					return err
				}
			}
		}
	}
	s, err := NewGraphSession(rs.r, rs.lib, p.Memory, rs.b("flash_attn"), at)
	if err != nil {
		return err
	}
	s.sched = &schedState{lib: rs.lib, h: rs.sched, backends: rs.bes, cpu: rs.cpu, layerDev: p.LayerDevice, fullOffload: p.NGPULayers > rs.nLayer, names: rs.own}
	rs.s = s
	return nil
}

// reserve is graph_reserve: a graph for a ubatch of nt tokens of ns
// sequences with no outputs, then the scheduler's split (and with sizes,
// its buffers measured); split, if not nil, reads the split graph before
// it is freed.
func (rs *reserver) reserve(nt, ns, no uint32, sizes *[]uintptr, split func(*Graph)) (built, error) {
	lib := rs.lib
	lib.SchedReset(rs.sched)
	rs.s.fa = rs.b("flash_attn")
	g, err := rs.s.Build(nt, ns, no, rs.out.MaxNodes)
	if err != nil {
		return built{}, err
	}
	defer g.Free()
	if rs.placeErr != nil {
		return built{}, rs.placeErr
	}
	if n := g.G.Leafs() + g.Nodes; n > rs.out.MaxNodes {
		// the scheduler's hash set holds at least max_nodes tensors
		return built{}, &cpp.Abort{Msg: fmt.Sprintf("GGML_ASSERT((int)sched->hash_set.size >= measure_graph->n_nodes + measure_graph->n_leafs) failed (%d tensors)", n)}
	}
	if err := Schedulable(lib, g.G, rs.bes, rs.cpu); err != nil {
		return built{}, err
	}
	out := built{nodes: g.Nodes, inputs: g.g.inputs, inputTensors: lib.InputTensors(g.G)} // before the split rewires the inputs
	switch {
	case sizes != nil:
		*sizes = lib.SchedReserveSize(rs.sched, g.G, len(rs.bes))
	case rs.own && split == nil:
		if !lib.SchedReserve(rs.sched, g.G) {
			return built{}, errAllocCompute
		}
	default:
		lib.SchedSplitGraph(rs.sched, g.G)
	}
	out.splits = lib.SchedSplits(rs.sched)
	if split != nil {
		split(g)
	}
	return out, nil
}

// graphKey names a probe graph of n tokens with the fused ops' flags as
// they are now.
func (rs *reserver) graphKey(n uint32) string {
	var key strings.Builder
	fmt.Fprint(&key, n)
	for _, grp := range fusedGroups {
		for _, pr := range grp.probes {
			fmt.Fprint(&key, rs.b(pr.flag))
		}
	}
	return key.String()
}

// probe builds the probe graph of n tokens and returns its fused nodes'
// devices. A probe graph built with the same tokens and flags as the one
// before is that graph: its fused nodes are reused, not built again.
func (rs *reserver) probe(n uint32) ([]probeNode, error) {
	key := rs.graphKey(n)
	if rs.last.nodes != nil && rs.last.key == key {
		return rs.last.nodes, nil
	}
	nodes := []probeNode{}
	bt, err := rs.reserve(n, rs.u("n_seq_max"), n, nil, func(g *Graph) {
		for _, fn := range g.g.fused {
			pn := probeNode{op: fn.op, il: fn.il}
			if be := rs.lib.SchedTensorBackend(rs.sched, fn.t); be != 0 {
				pn.dev = rs.lib.BackendDevice(be)
			}
			nodes = append(nodes, pn)
		}
	})
	if err != nil {
		return nil, err
	}
	rs.last.key, rs.last.nodes, rs.last.built = key, nodes, bt
	return nodes, nil
}

// resolveFusedOps is resolve_fused_ops: each fused op asked for
// automatically stays on where every layer's fused node runs on the
// layer's device.
func (rs *reserver) resolveFusedOps() error {
	for _, grp := range fusedGroups {
		if !rs.b(grp.auto) {
			continue
		}
		if grp.header != "" {
			rs.logf("INFO", "resolve_fused_ops: %s", grp.header)
		}
		for _, pr := range grp.probes {
			if !rs.b(pr.flag) {
				continue
			}
			nodes, err := rs.probe(pr.perSeq * rs.u("n_seq_max"))
			if err != nil {
				return fmt.Errorf("failed to reserve graph for %s check: %w", pr.name, err)
			}
			ok := rs.fusedOnLayers(pr, nodes)
			rs.setb(pr.flag, ok)
			if ok {
				rs.logf("INFO", "resolve_fused_ops: %s enabled", pr.name)
			} else {
				rs.logf("WARN", "resolve_fused_ops: %s not supported, set to disabled", pr.name)
			}
		}
		rs.setb(grp.auto, false)
	}
	rs.out.FlashAttn = rs.b("flash_attn")
	return nil
}

// fusedOnLayers reports whether every fused node of the probe's op runs
// on its layer's device, and logs the first that does not.
func (rs *reserver) fusedOnLayers(pr fusedProbe, nodes []probeNode) bool {
	name := func(d ops.Dev) string {
		if d == 0 {
			return "none"
		}
		return rs.lib.DevName(d)
	}
	for _, fn := range nodes {
		if fn.op != enumConst(pr.op) {
			continue
		}
		if devLayer := rs.p.LayerDevice(fn.il); fn.dev != devLayer {
			rs.logf("WARN", "resolve_fused_ops: layer %d is assigned to device %s but %s is assigned to device %s (usually due to missing support)",
				fn.il, name(devLayer), pr.name, name(fn.dev))
			return false
		}
	}
	return true
}

// measure reserves the prompt graph, measured, then the generation graph
// (llama.cpp then splits the prompt graph once more, which changes
// nothing it reports), and logs what sched_reserve logs.
func (rs *reserver) measure() error {
	nSeqs := rs.u("n_seq_max")
	nTokens := min(rs.u("n_ctx"), rs.u("n_ubatch"))
	var sizes []uintptr
	ppg, err := rs.reserve(nTokens, nSeqs, min(nTokens, rs.u("n_outputs_max")), &sizes, nil)
	if err != nil {
		return err
	}
	// the generation graph: n_seq_max tokens, as the last probe graph had
	// (with the flags as they are now, that graph was this one)
	tgg := rs.last.built
	if rs.last.nodes == nil || rs.last.key != rs.graphKey(nSeqs) {
		if tgg, err = rs.reserve(nSeqs, nSeqs, nSeqs, nil, nil); err != nil {
			return err
		}
	}
	out := rs.out
	out.NodesPP, out.SplitsPP, out.InputsPP, out.InputTensorsPP = ppg.nodes, ppg.splits, ppg.inputs, ppg.inputTensors
	out.NodesTG, out.SplitsTG, out.InputsTG, out.InputTensorsTG = tgg.nodes, tgg.splits, tgg.inputs, tgg.inputTensors
	for i, be := range rs.bes {
		out.Buffers = append(out.Buffers, ComputeBuffer{Buft: rs.bufts[i], Dev: rs.lib.BackendDevice(be), Bytes: uint64(sizes[i])})
		if sizes[i] > 1 {
			rs.logf("INFO", "sched_reserve: %10s compute buffer size = %8.2f MiB", rs.lib.BuftName(rs.bufts[i]), float64(sizes[i])/1024/1024)
		}
	}
	rs.logGraphs(ppg, tgg, nTokens, nSeqs)
	return nil
}

// logGraphs is sched_reserve's line on the prompt and generation graphs.
func (rs *reserver) logGraphs(ppg, tgg built, nTokens, nSeqs uint32) {
	diff := ppg != tgg
	val := func(a, b int) string {
		if diff {
			return fmt.Sprintf("%d / %d", a, b)
		}
		return fmt.Sprint(a)
	}
	bs := ""
	if diff {
		bs = fmt.Sprintf(" (pp bs=%d, tg bs=%d)", nTokens, nSeqs)
	}
	rs.logf("INFO", "sched_reserve: graph%s: nodes = %s, splits = %s, input objects = %s, input tensors = %s", bs,
		val(ppg.nodes, tgg.nodes), val(ppg.splits, tgg.splits), val(ppg.inputs, tgg.inputs), val(ppg.inputTensors, tgg.inputTensors))
}

// fusedNode is one of llm_graph_result's fused nodes.
type fusedNode struct {
	op int64
	t  *ops.Tensor
	il int
}

// graphMaxNodes is llama_context::graph_max_nodes for a graph of nTokens
// tokens of a model of nTensors weights (llama_model::n_tensors), on the
// context InitContext made.
func graphMaxNodes(r *arch.Run, nTokens uint32, nTensors int, loras []LoRA) (int, error) {
	r.SetTensorCount(nTensors)
	r.Model().Fields["loras"] = &cpp.Cell{V: cpp.Val{K: cpp.KArr, P: modelLoRAs(loras)}} // the LoRA adapters (lora.go)
	gmn, err := r.Program("llama_context::graph_max_nodes")
	if err != nil {
		return 0, err
	}
	mv, err := r.Call(gmn, r.Context(), []cpp.Val{cpp.Int(int64(nTokens), ast.TU32)})
	if err != nil {
		return 0, r.Wrap("graph_max_nodes: ", err)
	}
	if mv.I <= 0 {
		return 0, fmt.Errorf("arch: graph_max_nodes is %d", mv.I)
	}
	return int(mv.I), nil
}

// GraphReplayed says whether Reserve can size this model's compute
// buffers with memory mem: the architecture's graph builder is among the
// graph programs, and the memory module's views are replayed. If not,
// why not.
func Replayed(r *arch.Run, mem *arch.Memory) (bool, string) {
	if !r.Exact() {
		return false, "the generic path has no graph"
	}
	if r.ModelProgram("build_arch_graph") == nil {
		return false, fmt.Sprintf("the %s graph builder (%s) is not replayed yet", r.Arch, r.Class())
	}
	if !memoryViewsReplayed(mem) {
		return false, fmt.Sprintf("the views of memory %s are not replayed yet", mem.Class)
	}
	return true, ""
}

// viewOps are the ops of nodes that only view their source: the
// scheduler gives them their source's backend, unasked.
var viewOps = map[string]bool{"NONE": true, "VIEW": true, "RESHAPE": true, "PERMUTE": true, "TRANSPOSE": true}

// Schedulable refuses a graph with a node no backend can run: the
// scheduler, left with it unassigned, aborts the process
// (GGML_ASSERT(*cur_backend_id != -1) in ggml_backend_sched_split_graph).
// The CPU, last in the list, runs almost everything and is asked first.
func Schedulable(lib *ops.Lib, g *ops.Graph, bes []ops.Backend, cpu ops.Backend) error {
	cpuDev := lib.BackendDevice(cpu)
	views := map[int32]bool{}
	n := lib.NNodes(g)
	for i := 0; i < n; i++ {
		node := lib.Node(g, i)
		view, ok := views[node.Op]
		if !ok {
			view = viewOps[lib.OpName(node.Op)]
			views[node.Op] = view
		}
		if view || node.ViewSrc != nil || lib.DevSupportsOp(cpuDev, node) {
			continue
		}
		supported := false
		for _, be := range bes {
			if be != cpu && lib.DevSupportsOp(lib.BackendDevice(be), node) {
				supported = true
				break
			}
		}
		if !supported {
			var srcs []string
			for _, src := range node.Src {
				if src != nil {
					where := "no buffer"
					if bt := lib.BufferType((*ops.Tensor)(src)); bt != 0 {
						where = lib.BuftName(bt)
					}
					srcs = append(srcs, fmt.Sprintf("%s %s (%s)", lib.TypeName(src.Type), ops.NameOf((*ops.Tensor)(src)), where))
				}
			}
			return &cpp.Abort{Msg: fmt.Sprintf("GGML_ASSERT(*cur_backend_id != -1) failed: no backend runs node %s (%s of %s)", ops.NameOf(node), lib.OpName(node.Op), strings.Join(srcs, ", "))}
		}
	}
	return nil
}
