package graph

import (
	"fmt"
	"slices"
	"strings"
	"sync"

	"github.com/ggload/ggload/ggml/ops"
	"github.com/ggload/ggload/internal/arch"
	"github.com/ggload/ggload/internal/cpp"
	"github.com/ggload/ggload/internal/cpp/ast"
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
		// (the callback names the tensor too; nothing the reservation
		// measures reads a graph tensor's name, so that is left out)
		name, il := vs[2].S, int(vs[3].I)
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
	if !s.transient {
		if len(reserveSets) == maxBackendSets {
			reserveSets[0].free(lib)
			reserveSets = reserveSets[1:]
		}
		reserveSets = append(reserveSets, s)
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
	lib := p.Lib
	if lib == nil || r.CParams() == nil || r.Context().K != cpp.KObj {
		return nil, fmt.Errorf("arch: Reserve needs the native library and InitContext")
	}
	if p.LayerDevice == nil {
		return nil, fmt.Errorf("arch: Reserve needs each layer's device")
	}
	cp := r.CParams()
	out := &Reservation{}
	logf := func(level, format string, a ...any) { out.Log = append(out.Log, level+" "+fmt.Sprintf(format, a...)) }
	u := func(name string) uint32 { return uint32(cp.Fields[name].V.I) }
	b := func(name string) bool { return cp.Fields[name].V.Truthy() }
	setb := func(name string, v bool) { cp.Fields[name].V = cpp.Bool(v) }

	// the backends: the model's devices, the ACCEL devices, the CPU
	devs := append([]ops.Dev(nil), p.Devices...)
	for i := 0; i < lib.DevCount(); i++ {
		if d := lib.DevGet(i); lib.DevType(d) == ops.DevTypeAccel {
			devs = append(devs, d)
		}
	}
	cpuDev := lib.DevByType(ops.DevTypeCPU)
	if cpuDev == 0 {
		return nil, &cpp.Throw{Msg: "failed to initialize CPU backend"}
	}
	devs = append(devs, cpuDev)
	reserveMu.Lock()
	defer reserveMu.Unlock()
	set, err := backendSetFor(lib, devs)
	if err != nil {
		return nil, err
	}
	if set.transient {
		defer set.free(lib)
	}
	bes := set.bes
	cpu := bes[len(bes)-1]
	bufts := make([]ops.Buft, len(bes))
	for i, be := range bes {
		bufts[i] = lib.BackendDefaultBuft(be)
		if lib.DevType(lib.BackendDevice(be)) == ops.DevTypeCPU && len(p.Devices) > 0 {
			// the host buffer of the first device, for faster transfers
			if h := lib.DevHostBufferType(p.Devices[0]); h != 0 {
				bufts[i] = h
			}
		}
	}

	// pipeline parallelism: several devices, every layer offloaded, split
	// by layer, the KV cache offloaded, no overrides, and every device
	// but the CPU with async compute and events
	nLayerAll := int(r.Hparams().Object().Fields["n_layer_all"].V.I)
	pp := len(p.Devices) > 1 && p.NGPULayers > nLayerAll && r.SplitMode() == splitModeLayer &&
		b("offload_kqv") && !p.TensorOverrides
	if pp {
		for _, be := range bes {
			d := lib.BackendDevice(be)
			if lib.DevType(d) == ops.DevTypeCPU {
				continue
			}
			if !lib.DevAsyncEvents(d) {
				pp = false
				break
			}
		}
	}
	setb("pipeline_parallel", pp)
	out.PipelineParallel = pp
	if pp {
		logf("INFO", "llama_context: pipeline parallelism enabled")
	}

	// sched_reserve
	nSeqs := u("n_seq_max")
	nTokens := min(u("n_ctx"), u("n_ubatch"))
	if out.MaxNodes, err = graphMaxNodes(r, nTokens, p.NTensors); err != nil {
		return nil, err
	}
	sched := set.sched(lib, bufts, out.MaxNodes, pp, b("op_offload"))
	if sched == 0 {
		return nil, fmt.Errorf("arch: ggml_backend_sched_new failed")
	}

	// every buffer type the tensors are on must be one a backend can use:
	// the scheduler aborts on a tensor it cannot place
	at := p.At
	check := func(bt ops.Buft, what string) error {
		if bt == 0 {
			return nil
		}
		for _, be := range bes {
			if lib.DevSupportsBuft(lib.BackendDevice(be), bt) {
				return nil
			}
		}
		return fmt.Errorf("arch: %s is on %s, which none of the context's backends can use", what, lib.BuftName(bt))
	}
	var placeErr error
	if w := at.Weight; w != nil {
		at.Weight = func(t *arch.Tensor) ops.Buft {
			bt := w(t)
			if err := check(bt, "weight "+t.Name); err != nil && placeErr == nil {
				placeErr = err
			}
			return bt
		}
	}
	s, err := NewGraphSession(r, lib, p.Memory, b("flash_attn"), at)
	if err != nil {
		return nil, err
	}
	defer s.Close()
	if p.Memory != nil {
		for ci, c := range p.Memory.Caches {
			for j, t := range c.Tensors {
				if at.Cache != nil {
					if err := check(at.Cache(ci, j), "cache tensor "+t.Name); err != nil {
						return nil, err
					}
				}
			}
		}
	}
	s.sched = &schedState{lib: lib, h: sched, backends: bes, cpu: cpu, layerDev: p.LayerDevice, fullOffload: p.NGPULayers > nLayerAll}

	type built struct{ nodes, splits, inputs, inputTensors int }
	// graph_reserve: a graph for the ubatch, then the scheduler's split
	// (and with sizes, its buffers measured); then split, if not nil,
	// reads the split graph before it is freed
	reserve := func(nt, ns, no uint32, sizes *[]uintptr, split func(*Graph)) (built, error) {
		lib.SchedReset(sched)
		s.fa = b("flash_attn")
		g, err := s.Build(nt, ns, no, out.MaxNodes)
		if err != nil {
			return built{}, err
		}
		defer g.Free()
		if placeErr != nil {
			return built{}, placeErr
		}
		if n := g.G.Leafs() + g.Nodes; n > out.MaxNodes {
			// the scheduler's hash set holds at least max_nodes tensors
			return built{}, &cpp.Abort{Msg: fmt.Sprintf("GGML_ASSERT((int)sched->hash_set.size >= measure_graph->n_nodes + measure_graph->n_leafs) failed (%d tensors)", n)}
		}
		if err := schedulable(lib, g.G, bes, cpu); err != nil {
			return built{}, err
		}
		out := built{nodes: g.Nodes, inputs: g.g.inputs, inputTensors: lib.InputTensors(g.G)} // before the split rewires the inputs
		if sizes != nil {
			*sizes = lib.SchedReserveSize(sched, g.G, len(bes))
		} else {
			lib.SchedSplitGraph(sched, g.G)
		}
		out.splits = lib.SchedSplits(sched)
		if split != nil {
			split(g)
		}
		return out, nil
	}

	// resolve_fused_ops: each fused op asked for automatically stays on
	// where every layer's fused node runs on the layer's device. A probe
	// graph built with the same tokens and flags as the one before is that
	// graph: its fused nodes' devices are reused, not built again.
	type probeNode struct {
		op  int64
		il  int
		dev ops.Dev
	}
	var last struct {
		key   string
		nodes []probeNode
		built built
	}
	graphKey := func(n uint32) string {
		var key strings.Builder
		fmt.Fprint(&key, n)
		for _, grp := range fusedGroups {
			for _, pr := range grp.probes {
				fmt.Fprint(&key, b(pr.flag))
			}
		}
		return key.String()
	}
	probe := func(n uint32) ([]probeNode, error) {
		key := graphKey(n)
		if last.nodes != nil && last.key == key {
			return last.nodes, nil
		}
		nodes := []probeNode{}
		bt, err := reserve(n, nSeqs, n, nil, func(g *Graph) {
			for _, fn := range g.g.fused {
				pn := probeNode{op: fn.op, il: fn.il}
				if be := lib.SchedTensorBackend(sched, fn.t); be != 0 {
					pn.dev = lib.BackendDevice(be)
				}
				nodes = append(nodes, pn)
			}
		})
		if err != nil {
			return nil, err
		}
		last.key, last.nodes, last.built = key, nodes, bt
		return nodes, nil
	}
	for _, grp := range fusedGroups {
		if !b(grp.auto) {
			continue
		}
		if grp.header != "" {
			logf("INFO", "resolve_fused_ops: %s", grp.header)
		}
		for _, pr := range grp.probes {
			if !b(pr.flag) {
				continue
			}
			nodes, err := probe(pr.perSeq * nSeqs)
			if err != nil {
				return nil, fmt.Errorf("failed to reserve graph for %s check: %w", pr.name, err)
			}
			mismatch := false
			for _, fn := range nodes {
				if fn.op != enumConst(pr.op) {
					continue
				}
				devFused := fn.dev
				if devLayer := p.LayerDevice(fn.il); devFused != devLayer {
					name := func(d ops.Dev) string {
						if d == 0 {
							return "none"
						}
						return lib.DevName(d)
					}
					logf("WARN", "resolve_fused_ops: layer %d is assigned to device %s but %s is assigned to device %s (usually due to missing support)",
						fn.il, name(devLayer), pr.name, name(devFused))
					mismatch = true
					break
				}
			}
			setb(pr.flag, !mismatch)
			if mismatch {
				logf("WARN", "resolve_fused_ops: %s not supported, set to disabled", pr.name)
			} else {
				logf("INFO", "resolve_fused_ops: %s enabled", pr.name)
			}
		}
		setb(grp.auto, false)
	}
	out.FlashAttn = b("flash_attn")

	// the prompt graph first, measured; then the generation graph
	// (llama.cpp then splits the prompt graph once more, which changes
	// nothing it reports)
	var sizes []uintptr
	ppg, err := reserve(nTokens, nSeqs, min(nTokens, u("n_outputs_max")), &sizes, nil)
	if err != nil {
		return nil, err
	}
	// the generation graph: n_seq_max tokens, as the last probe graph had
	// (with the flags as they are now, that graph was this one)
	tgg := last.built
	if last.nodes == nil || last.key != graphKey(nSeqs) {
		if tgg, err = reserve(nSeqs, nSeqs, nSeqs, nil, nil); err != nil {
			return nil, err
		}
	}
	out.NodesPP, out.SplitsPP, out.InputsPP, out.InputTensorsPP = ppg.nodes, ppg.splits, ppg.inputs, ppg.inputTensors
	out.NodesTG, out.SplitsTG, out.InputsTG, out.InputTensorsTG = tgg.nodes, tgg.splits, tgg.inputs, tgg.inputTensors
	for i, be := range bes {
		out.Buffers = append(out.Buffers, ComputeBuffer{Buft: bufts[i], Dev: lib.BackendDevice(be), Bytes: uint64(sizes[i])})
		if sizes[i] > 1 {
			logf("INFO", "sched_reserve: %10s compute buffer size = %8.2f MiB", lib.BuftName(bufts[i]), float64(sizes[i])/1024/1024)
		}
	}
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
	logf("INFO", "sched_reserve: graph%s: nodes = %s, splits = %s, input objects = %s, input tensors = %s", bs,
		val(ppg.nodes, tgg.nodes), val(ppg.splits, tgg.splits), val(ppg.inputs, tgg.inputs), val(ppg.inputTensors, tgg.inputTensors))
	return out, nil
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
func graphMaxNodes(r *arch.Run, nTokens uint32, nTensors int) (int, error) {
	r.SetTensorCount(nTensors)
	r.Model().Fields["loras"] = &cpp.Cell{V: cpp.Val{K: cpp.KArr, P: cpp.NewArray(ast.TPtr, 0, false)}} // no LoRA adapters
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

// schedulable refuses a graph with a node no backend can run: the
// scheduler, left with it unassigned, aborts the process
// (GGML_ASSERT(*cur_backend_id != -1) in ggml_backend_sched_split_graph).
// The CPU, last in the list, runs almost everything and is asked first.
func schedulable(lib *ops.Lib, g *ops.Graph, bes []ops.Backend, cpu ops.Backend) error {
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
