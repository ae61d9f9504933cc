package clip

import (
	"fmt"
	"strings"

	"github.com/ggload/ggload/ggml/ops"
	"github.com/ggload/ggload/internal/replay/cpp"
	"github.com/ggload/ggload/internal/replay/cpp/ast"
	"github.com/ggload/ggload/internal/replay/graph"
)

// The warm-up: clip_model_loader::warmup replayed. clip_get_graph_builder
// and every graph class's build (tools/mtmd/clip.cpp's clip_graph, the
// models' builders) are the pin's programs, run over ggml's real ops
// (internal/replay/graph's builtins) on a no_alloc context; the encoder's weights
// are tensors of their types and shapes on a dummy buffer of the device's
// buffer type, as a loaded model's are to the scheduler. The orchestration
// around the builders (the dummy batch, flash attention's automatic
// choice, the scheduler's reserve and its sizes) is the pin's warmup,
// reserve_compute_meta and clip_ctx's scheduler, written here.

// maxNodes is clip_ctx's max_nodes: the graph's size.
const maxNodes = 8192

// Flash attention as clip_context_params gives it (clip_flash_attn_type).
const (
	FlashAttnAuto     = -1
	FlashAttnDisabled = 0
	FlashAttnEnabled  = 1
)

// WarmupParams are what clip's warm-up runs on.
type WarmupParams struct {
	Lib *ops.Lib
	// Device is the device clip runs the encoder on (its backend; the
	// CPU's when it offloads nothing); CPU is the CPU device, whose
	// backend clip's scheduler always has last.
	Device, CPU ops.Dev
	// FlashAttn is the context's flash attention setting
	// (FlashAttnAuto, FlashAttnDisabled or FlashAttnEnabled).
	FlashAttn int
	// Learn, when set, is told every ggml function of the graph that
	// fails its checks, with its arguments (a projector synthesizer
	// learns its tensors' shapes from them); the warm-up fails as it
	// would without it.
	Learn func(op string, args []OpArg)
}

// OpArg is an argument of a ggml function as Learn sees it: a tensor
// (an encoder's weight, named, or another), or a number.
type OpArg struct {
	Null   bool // a null tensor
	Tensor bool
	// Weight is the weight's name, or the absent weight's a null stands
	// for; "" for another tensor
	Weight string
	// Member is clip_model's member that holds the weight, where Learn
	// is told the model's weights (op "")
	Member string
	Ne     [4]int64 // a tensor's shape
	Int    int64    // a number's value
}

// ComputeBuffer is one backend's compute buffer after the warm-up.
type ComputeBuffer struct {
	Dev   ops.Dev
	Buft  ops.Buft
	Bytes uint64
}

// Warmup is what the warm-up found.
type Warmup struct {
	FlashAttn bool
	// Buffers are the scheduler's compute buffers, one per backend in
	// its order (the device's, then the CPU's).
	Buffers       []ComputeBuffer
	Nodes, Splits int
	// Unsupported are the ops the device runs not (clip's warning).
	Unsupported []string
	Log         []string // "LEVEL text", as clip logs them
}

// Warmup replays clip's warm-up of the encoder: the graph of its dummy
// image (or audio) built, with flash attention first where it is
// automatic, and the scheduler's buffers reserved for it. An encoder for
// audio generation has none (clip_init skips it).
func (e *Encoder) Warmup(p WarmupParams) (*Warmup, error) {
	w := &Warmup{}
	if e.Modality == "gen_audio" {
		return w, nil
	}
	if p.Lib == nil || p.CPU == 0 {
		return nil, fmt.Errorf("clip: warm-up without the native library")
	}
	lib := p.Lib
	bes, bufts := []ops.Backend{}, []ops.Buft{}
	free := func() {
		for _, be := range bes {
			lib.BackendFree(be)
		}
	}
	defer free()
	var accel ops.Backend
	if p.Device != 0 && p.Device != p.CPU {
		accel = lib.BackendInit(p.Device)
		if accel == 0 {
			return nil, fmt.Errorf("clip: failed to initialize %s backend", lib.DevName(p.Device))
		}
		bes = append(bes, accel)
		bufts = append(bufts, lib.BackendDefaultBuft(accel))
	}
	cpu := lib.BackendInit(p.CPU)
	if cpu == 0 {
		return nil, fmt.Errorf("clip: failed to initialize CPU backend")
	}
	bes = append(bes, cpu)
	bufts = append(bufts, lib.BackendDefaultBuft(cpu))
	if accel == 0 {
		accel = cpu
	}
	sched := lib.SchedNew(bes, bufts, maxNodes, false, true)
	if sched == 0 {
		return nil, fmt.Errorf("clip: ggml_backend_sched_new failed")
	}
	defer lib.SchedFree(sched)

	s, err := e.newSession(lib, bufts[0])
	if err != nil {
		return nil, err
	}
	s.learn = p.Learn
	defer s.close()
	ctxObj := e.ctx
	ctxObj.Fields["buf_compute_meta"] = &cpp.Cell{V: sized(int64(maxNodes)*int64(lib.TensorOverhead()) + int64(lib.GraphOverheadCustom(maxNodes, false)))}
	ctxObj.Fields["max_nodes"] = &cpp.Cell{V: cpp.Int(maxNodes, ast.TI32), T: ast.TI32}
	batch, err := e.dummyBatch()
	if err != nil {
		return nil, err
	}
	reserve := func() (fattn bool, fattnOp bool, err error) {
		g, err := s.build(batch)
		if err != nil {
			return false, false, err
		}
		defer s.freeGraph()
		if err := graph.Schedulable(lib, g, bes, cpu); err != nil {
			return false, false, err
		}
		lib.SchedReset(sched)
		if !lib.SchedReserve(sched, g) {
			return false, false, fmt.Errorf("clip: ggml_backend_sched_reserve failed")
		}
		w.Buffers = w.Buffers[:0]
		for i, be := range bes {
			size := uint64(lib.SchedBufferSize(sched, be))
			if size > 1 {
				w.Log = append(w.Log, fmt.Sprintf("INFO reserve_compute_meta: %10s compute buffer size = %8.2f MiB", lib.BuftName(bufts[i]), float64(size)/1024/1024))
			}
			w.Buffers = append(w.Buffers, ComputeBuffer{Dev: lib.BackendDevice(be), Buft: bufts[i], Bytes: size})
		}
		w.Nodes, w.Splits = lib.NNodes(g), lib.SchedSplits(sched)
		w.Log = append(w.Log, fmt.Sprintf("INFO reserve_compute_meta: graph splits = %d, nodes = %d", w.Splits, w.Nodes))
		fattn = true
		w.Unsupported = w.Unsupported[:0]
		dev := lib.BackendDevice(accel)
		for i := 0; i < w.Nodes; i++ {
			node := lib.Node(g, i)
			if !lib.DevSupportsOp(dev, node) {
				w.Unsupported = append(w.Unsupported, lib.OpName(node.Op))
				if lib.OpName(node.Op) == "FLASH_ATTN_EXT" {
					fattn, fattnOp = false, true
				}
			}
		}
		return fattn, fattnOp, nil
	}
	fa := p.FlashAttn
	setFA := func(v int) { ctxObj.Fields["flash_attn_type"] = &cpp.Cell{V: cpp.Int(int64(v), ast.TI32), T: ast.TI32} }
	if fa == FlashAttnAuto {
		setFA(FlashAttnEnabled)
		ok, hasOp, err := e.reserveWith(reserve, p.Learn)
		if err != nil {
			return nil, err
		}
		fa = FlashAttnEnabled
		if !ok && hasOp {
			w.Log = append(w.Log, "WARN warmup: flash attention not supported by "+lib.DevName(lib.BackendDevice(accel))+", memory usage will increase")
			fa = FlashAttnDisabled
			setFA(fa)
			if _, _, err := e.reserveWith(reserve, p.Learn); err != nil {
				return nil, err
			}
		}
	} else {
		setFA(fa)
		ok, _, err := e.reserveWith(reserve, p.Learn)
		if err != nil {
			return nil, err
		}
		if !ok && fa == FlashAttnEnabled {
			w.Log = append(w.Log, "WARN warmup: flash attention is not supported by the current backend; falling back to CPU (performance will be degraded)")
		}
	}
	w.FlashAttn = fa == FlashAttnEnabled
	state := "disabled"
	if w.FlashAttn {
		state = "enabled"
	}
	w.Log = append(w.Log, "INFO warmup: flash attention is "+state)
	if accel != cpu && len(w.Unsupported) > 0 {
		w.Log = append(w.Log, "WARN warmup: the CLIP graph uses unsupported operators by the backend: "+strings.Join(w.Unsupported, ", "))
	}
	return w, nil
}

// reserveWith runs one reserve, its failures as clip's errors; Learn,
// if any, told the model's weights when it fails.
func (e *Encoder) reserveWith(reserve func() (bool, bool, error), learn func(string, []OpArg)) (bool, bool, error) {
	ok, op, err := reserve()
	if err != nil {
		if learn != nil {
			learn("", e.members())
		}
		return false, false, e.fail(err, "warm-up")
	}
	return ok, op, nil
}

// members are clip_model's members that hold a weight or stand for an
// absent one, and its first layer's (as "layer.NAME").
func (e *Encoder) members() []OpArg {
	out := objectMembers(e.Model, "")
	if c, ok := e.Model.Fields["layers"]; ok {
		if a, ok := c.V.P.(*cpp.Array); ok && c.V.K == cpp.KArr && len(a.Cells) > 0 {
			if l, ok := a.Cells[0].V.P.(*cpp.Object); ok {
				out = append(out, objectMembers(l, "layer.")...)
			}
		}
	}
	return out
}

func objectMembers(o *cpp.Object, prefix string) []OpArg {
	var out []OpArg
	for name, c := range o.Fields {
		name = prefix + name
		switch v := c.V; v.K {
		case cpp.KTensor:
			if w, ok := v.P.(*tensorVal); ok {
				out = append(out, OpArg{Tensor: true, Weight: w.info.Name, Member: name})
			}
		case cpp.KNull:
			if v.S != "" {
				out = append(out, OpArg{Null: true, Weight: strings.TrimPrefix(v.S, "the absent tensor "), Member: name})
			}
		}
	}
	return out
}

// fail words an error of the replay.
func (e *Encoder) fail(err error, what string) error {
	var th *cpp.Throw
	var ab *cpp.Abort
	switch {
	case asErr(err, &th):
		return &Error{Path: e.path, Modality: e.Modality, Msg: th.Msg}
	case asErr(err, &ab):
		return &Error{Path: e.path, Modality: e.Modality, Msg: ab.Msg}
	}
	return fmt.Errorf("mmproj %s: %s encoder: replaying clip's %s: %w", e.path, e.Modality, what, err)
}

// dummyBatch is get_dummy_batch: one image of the warm-up size, or audio
// of the warm-up length.
func (e *Encoder) dummyBatch() (*cpp.Object, error) {
	nx, ny := int64(0), int64(0)
	if e.Modality == "vision" {
		sz, _ := e.Int("warmup_image_size")
		nx, ny = sz, sz
	} else {
		mel, _ := e.Int("n_mel_bins")
		fft := e.Projector != "gemma4ua"
		if mel <= 0 || fft && mel > 256 {
			return nil, &Error{Path: e.path, Modality: e.Modality, Msg: fmt.Sprintf("get_dummy_batch: invalid n_mel_bins (%d), must be in [1, 256]", mel)}
		}
		n, _ := e.Int("warmup_audio_size")
		nx, ny = n, mel
	}
	img := newImage(nx, ny)
	b := cpp.NewObject("clip_image_f32_batch")
	b.Open = true
	entries := cpp.NewArray(ast.TAuto, 0, false)
	entries.Cells = append(entries.Cells, cpp.Cell{V: cpp.Val{K: cpp.KObj, P: img}})
	b.Fields["entries"] = &cpp.Cell{V: cpp.Val{K: cpp.KArr, P: entries}}
	b.Fields["is_audio"] = &cpp.Cell{V: cpp.Bool(e.Modality != "vision"), T: ast.TBool}
	return b, nil
}

// newImage is a clip_image_f32 of nx × ny.
func newImage(nx, ny int64) *cpp.Object {
	img := cpp.NewObject("clip_image_f32")
	img.Open = true
	img.Fields["nx_"] = &cpp.Cell{V: cpp.Int(nx, ast.TI32), T: ast.TI32}
	img.Fields["ny_"] = &cpp.Cell{V: cpp.Int(ny, ast.TI32), T: ast.TI32}
	img.Fields["add_viewsep"] = &cpp.Cell{V: cpp.False, T: ast.TBool}
	img.Fields["add_newline"] = &cpp.Cell{V: cpp.False, T: ast.TBool}
	img.Fields["lead_pad"] = &cpp.Cell{V: cpp.Int(0, ast.TI32), T: ast.TI32}
	any := cpp.NewObject("anyres_info")
	for _, n := range []string{"grid_x", "grid_y", "orig_nx", "orig_ny"} {
		any.Fields[n] = &cpp.Cell{V: cpp.Int(0, ast.TI32), T: ast.TI32}
	}
	img.Fields["anyres"] = &cpp.Cell{V: cpp.Val{K: cpp.KObj, P: any}}
	return img
}

// sized is a std::vector whose size alone the programs read.
func sized(n int64) cpp.Val {
	o := cpp.NewObject("handle")
	o.Open = true
	o.Fields["what"] = &cpp.Cell{V: cpp.Str("vector")}
	o.Fields["n"] = &cpp.Cell{V: cpp.Int(n, ast.TU64)}
	return cpp.Val{K: cpp.KObj, P: o}
}

// session is the graphs' Session: the op library, the weights made
// native on a dummy buffer of their buffer type, the graph under way.
type session struct {
	e       *Encoder
	lib     *ops.Lib
	buft    ops.Buft
	wctx    *ops.Context
	dummy   ops.Buffer
	weights map[string]*ops.Tensor
	ctx0    []*ops.Context // the graphs' contexts, freed with the graph
	learn   func(op string, args []OpArg)
}

func (e *Encoder) newSession(lib *ops.Lib, buft ops.Buft) (*session, error) {
	s := &session{e: e, lib: lib, buft: buft, weights: map[string]*ops.Tensor{}}
	s.wctx = lib.NewContext(lib.TensorOverhead() * uintptr(len(e.Tensors)+8))
	if s.wctx == nil {
		return nil, fmt.Errorf("clip: ggml_init failed")
	}
	if s.dummy = lib.DummyBuffer(buft, true); s.dummy == 0 {
		lib.Free(s.wctx)
		return nil, fmt.Errorf("clip: a dummy buffer of %s", lib.BuftName(buft))
	}
	return s, nil
}

func (s *session) close() {
	s.freeGraph()
	s.lib.Free(s.wctx)
	s.lib.BufferFree(s.dummy)
}

func (s *session) freeGraph() {
	for _, c := range s.ctx0 {
		s.lib.Free(c)
	}
	s.ctx0 = nil
}

// OpLib is the session's op library.
func (s *session) OpLib() *ops.Lib { return s.lib }

// NativeTensor is a value's native tensor: an encoder's weight made on
// first use.
func (s *session) NativeTensor(f *cpp.Frame, v cpp.Val) (*ops.Tensor, error) {
	if t, ok := graph.Native(v); ok {
		return t, nil
	}
	if w, ok := v.P.(*tensorVal); ok && v.K == cpp.KTensor {
		if t, ok := s.weights[w.info.Name]; ok {
			return t, nil
		}
		t, err := graph.NewWeight(s.lib, s.wctx, w.info.Name, int32(w.info.Type), w.info.Shape)
		if err != nil {
			return nil, f.Errorf("%v", err)
		}
		ops.Place(t, s.dummy)
		s.weights[w.info.Name] = t
		return t, nil
	}
	return nil, f.Errorf("%s is no tensor", v.Describe())
}

// build is reserve_compute_meta's graph: clip_get_graph_builder's
// builder for the batch, built.
func (s *session) build(batch *cpp.Object) (*ops.Graph, error) {
	r := s.e.run
	r.Session = s
	defer func() { r.Session = nil }()
	p, err := programs.Lookup("clip_get_graph_builder")
	if err != nil {
		return nil, err
	}
	builder, err := r.CallCells(p, cpp.Void, []*cpp.Cell{{V: cpp.Val{K: cpp.KObj, P: s.e.ctx}}, {V: cpp.Val{K: cpp.KObj, P: batch}}, {V: cpp.Null}})
	if err != nil {
		return nil, err
	}
	if builder.K != cpp.KObj {
		return nil, fmt.Errorf("clip: clip_get_graph_builder gave %s", builder.Describe())
	}
	o := builder.P.(*cpp.Object)
	bp := classProgram(o.Class, "build", 0)
	if bp == nil {
		return nil, fmt.Errorf("clip: %s has no build", o.Class)
	}
	gv, err := r.Call(bp, builder, nil)
	if err != nil {
		return nil, err
	}
	g, ok := gv.P.(*ops.Graph)
	if gv.K != cpp.KNative || !ok {
		return nil, fmt.Errorf("clip: %s::build gave %s", o.Class, gv.Describe())
	}
	return g, nil
}

// classProgram is a graph class's method program, in the class or its
// nearest base: of n arguments where it is overloaded (any, n < 0).
func classProgram(class, name string, n int) *cpp.Program {
	for _, c := range append([]string{class}, graphBases[class]...) {
		if p, _ := programs.Lookup(c + "::" + name); p != nil {
			return p
		}
		for k := 1; ; k++ {
			p, _ := programs.Lookup(fmt.Sprintf("%s::%s#%d", c, name, k))
			if p == nil {
				break
			}
			if n < 0 || len(p.Params.Kids) == n {
				return p
			}
		}
		if c != class {
			if p := classProgram(c, name, n); p != nil {
				return p
			}
		}
	}
	return nil
}

// graphMethods answers a graph object's methods: its class's programs.
type graphMethods struct{}

func (graphMethods) HasMethod(o *cpp.Object, name string) bool {
	return classProgram(o.Class, name, -1) != nil
}

func (graphMethods) CallMethod(f *cpp.Frame, m *cpp.Method, args []*ast.Node) (cpp.Val, error) {
	o := m.Recv.P.(*cpp.Object)
	p := pickProgram(o.Class, m.Name, len(args))
	if p == nil {
		return cpp.Void, f.Errorf("%s::%s of %d arguments", o.Class, m.Name, len(args))
	}
	return f.I.Invoke(f, p, m.Recv, args)
}

// pickProgram is the program of class::name that takes n arguments (its
// defaults counted).
func pickProgram(class, name string, n int) *cpp.Program {
	if p := classProgram(class, name, n); p != nil {
		return p
	}
	p := classProgram(class, name, -1)
	if p == nil {
		return nil
	}
	need := 0
	for _, d := range p.Params.Kids {
		if len(d.Kids) == 0 {
			need++
		}
	}
	if n >= need && n <= len(p.Params.Kids) {
		return p
	}
	return nil
}

// newGraph is make_unique of a graph class: its object, its members as
// declared, its constructor run.
func newGraph(class string) cpp.Builtin {
	return func(f *cpp.Frame, args []*ast.Node) (cpp.Val, error) {
		o := cpp.NewObject(class)
		o.Shared, o.Methods, o.Open = true, graphMethods{}, true
		for _, fd := range structFields["clip_graph"] {
			if fd.Default == "" {
				continue
			}
			v, err := defaultValue(fd)
			if err != nil {
				return cpp.Void, err
			}
			o.Fields[fd.Name] = &cpp.Cell{V: v, T: fd.Type}
		}
		o.Fields["ctx0_ptr"] = &cpp.Cell{V: uniquePtr()}
		self := cpp.Val{K: cpp.KObj, P: o}
		short := class
		if i := strings.LastIndex(class, "::"); i >= 0 {
			short = class[i+2:]
		}
		p := pickProgram(class, short, len(args))
		if p == nil {
			return cpp.Void, f.Errorf("new %s: no constructor of %d arguments", class, len(args))
		}
		if _, err := f.I.Invoke(f, p, self, args); err != nil {
			return cpp.Void, err
		}
		return self, nil
	}
}

// uniquePtr is a std::unique_ptr: reset stores, get reads.
func uniquePtr() cpp.Val {
	o := cpp.NewObject("unique_ptr")
	o.Fields["p"] = &cpp.Cell{V: cpp.Null}
	return cpp.Val{K: cpp.KObj, P: o}
}

func graphBuiltins() map[string]cpp.Builtin {
	out := graph.OpBuiltins()
	for name, b := range out {
		out[name] = learning(name, b)
	}
	for c := range graphBases {
		out["new::"+c] = newGraph(c)
	}
	// a call of an overloaded function by its name (a base's constructor
	// from a member initializer list): the overload of as many arguments,
	// on the caller's object
	for _, n := range programs.Names() {
		base, _, ok := strings.Cut(n, "#")
		if !ok {
			continue
		}
		if _, done := out[base]; done {
			continue
		}
		class, name, _ := strings.Cut(base, "::")
		out[base] = func(f *cpp.Frame, args []*ast.Node) (cpp.Val, error) {
			p := pickProgram(class, name, len(args))
			if p == nil {
				return cpp.Void, f.Errorf("%s of %d arguments", base, len(args))
			}
			return f.I.Invoke(f, p, f.This, args)
		}
	}
	out["ggml_init"] = func(f *cpp.Frame, args []*ast.Node) (cpp.Val, error) {
		s, ok := f.I.Session.(*session)
		if !ok {
			// the loader's weight context: never allocated here
			return handle("ggml_context"), nil
		}
		vs, err := evalArgs(f, args, 1, "ggml_init")
		if err != nil {
			return cpp.Void, err
		}
		po, ok := vs[0].P.(*cpp.Object)
		if vs[0].K != cpp.KObj || !ok {
			return cpp.Void, f.Errorf("ggml_init of %s", vs[0].Describe())
		}
		size := po.Field("mem_size").V.I
		c := s.lib.NewContext(uintptr(size))
		if c == nil {
			return cpp.Void, f.Errorf("ggml_init of %d bytes failed", size)
		}
		s.ctx0 = append(s.ctx0, c)
		return cpp.Val{K: cpp.KNative, P: c}, nil
	}
	out["ggml_new_graph_custom"] = func(f *cpp.Frame, args []*ast.Node) (cpp.Val, error) {
		s, ok := f.I.Session.(*session)
		if !ok {
			return cpp.Void, f.Errorf("ggml_new_graph_custom outside a build")
		}
		vs, err := evalArgs(f, args, 2, "ggml_new_graph_custom")
		if err != nil {
			return cpp.Void, err
		}
		c, ok := vs[0].P.(*ops.Context)
		if vs[0].K != cpp.KNative || !ok {
			return cpp.Void, f.Errorf("ggml_new_graph_custom of %s", vs[0].Describe())
		}
		g := s.lib.NewGraph(c, int(vs[1].I))
		if g == nil {
			return cpp.Void, &cpp.Abort{Msg: "ggml_new_graph_custom: not enough space in the context's memory pool", Where: f.Fn}
		}
		return cpp.Val{K: cpp.KNative, P: g}, nil
	}
	return out
}

// learning is a ggml function that tells the session's Learn its
// arguments when it fails its checks.
func learning(name string, b cpp.Builtin) cpp.Builtin {
	return func(f *cpp.Frame, args []*ast.Node) (cpp.Val, error) {
		v, err := b(f, args)
		s, ok := f.I.Session.(*session)
		if err == nil || !ok || s.learn == nil {
			return v, err
		}
		var ab *cpp.Abort
		if !asErr(err, &ab) {
			return v, err
		}
		vs, aerr := cpp.EvalArgs(f, args)
		if aerr != nil {
			return v, err
		}
		out := make([]OpArg, len(vs))
		for i, a := range vs {
			switch a.K {
			case cpp.KTensor:
				if w, ok := a.P.(*tensorVal); ok {
					var ne [4]int64
					copy(ne[:], w.info.Shape[:])
					out[i] = OpArg{Tensor: true, Weight: w.info.Name, Ne: ne}
				}
			case cpp.KNative:
				if t, ok := a.P.(*ops.Tensor); ok {
					out[i] = OpArg{Tensor: true, Ne: t.Ne}
				}
			case cpp.KInt:
				out[i] = OpArg{Int: a.I}
			case cpp.KNull:
				out[i] = OpArg{Null: true, Weight: strings.TrimPrefix(a.S, "the absent tensor ")}
			}
		}
		s.learn(name, out)
		return v, err
	}
}
