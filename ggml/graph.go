package ggml

import (
	"encoding/binary"
	"fmt"
	"math"
	"unsafe"

	"github.com/ggload/ggload/bindings"
)

// Computing with loaded weights: build ops in a NoAlloc context, collect
// them in a Graph, and run it either on one backend (every tensor already
// in a buffer that backend can use) or through a Scheduler, which allocates
// the intermediate tensors, splits the graph between backends by where the
// weights live and what each device supports, and copies between them.
// Everything ggml would assert on is checked here first.

// DefaultGraphSize is ggml's default node capacity of a graph.
const DefaultGraphSize = 2048

// Tensor flags (enum ggml_tensor_flag).
const (
	flagInput  = 1
	flagOutput = 2
)

// Graph is a computation graph (struct ggml_cgraph) in a context.
type Graph struct {
	ctx   *Context
	h     bindings.Graph
	size  int
	nodes map[*bindings.Tensor]bool // ops in the graph
	leafs map[*bindings.Tensor]bool // inputs and weights

	// the scheduler that last accepted the graph as it is: the checks are
	// not repeated for every Compute
	checked *Scheduler
}

// NewGraph makes a graph of at most size nodes (0: DefaultGraphSize) in c.
func (c *Context) NewGraph(size int) (_ *Graph, err error) {
	defer placed(&err, "new_graph_custom", at{})
	if size < 0 {
		return nil, fmt.Errorf("ggml: graph size %d", size)
	}
	if size == 0 {
		size = DefaultGraphSize
	}
	if err := c.hold(); err != nil {
		return nil, fmt.Errorf("ggml: new graph: %w", err)
	}
	defer c.release()
	need := uint64(c.rt.lib.UsedMem(c.h)) + uint64(c.rt.lib.GraphOverheadCustom(uintptr(size), false))
	if need > c.size {
		return nil, fmt.Errorf("ggml: context of %d bytes has no room for a graph of %d nodes (%d needed; ContextParams.Graphs/GraphSize)", c.size, size, need)
	}
	h := c.rt.lib.NewGraphCustom(c.h, uintptr(size), false)
	if h == 0 {
		return nil, fmt.Errorf("ggml: new graph failed")
	}
	return &Graph{ctx: c, h: h, size: size, nodes: map[*bindings.Tensor]bool{}, leafs: map[*bindings.Tensor]bool{}}, nil
}

// Expand adds t and everything it depends on (ggml_build_forward_expand).
func (g *Graph) Expand(t *Tensor) (err error) {
	defer placed(&err, "build_forward_expand", at{t: t})
	if t == nil {
		return fmt.Errorf("ggml: graph: nil tensor")
	}
	if t.ctx.dead.Load() {
		return fmt.Errorf("ggml: graph: tensor %s: %w: its context was freed", t.name, ErrClosed)
	}
	if err := g.ctx.hold(); err != nil {
		return fmt.Errorf("ggml: graph: %w", err)
	}
	defer g.ctx.release()
	// count what the native walk will add, which it asserts fits
	newNodes, newLeafs := map[*bindings.Tensor]bool{}, map[*bindings.Tensor]bool{}
	var visit func(p *bindings.Tensor)
	visit = func(p *bindings.Tensor) {
		if p == nil || g.nodes[p] || g.leafs[p] || newNodes[p] || newLeafs[p] {
			return
		}
		for _, s := range p.Src {
			visit(s)
		}
		if p.Op == 0 && p.Flags&4 == 0 { // GGML_OP_NONE and not a parameter: a leaf
			newLeafs[p] = true
		} else {
			newNodes[p] = true
		}
	}
	visit(t.c)
	if len(g.nodes)+len(newNodes) > g.size || len(g.leafs)+len(newLeafs) > g.size {
		return fmt.Errorf("ggml: graph of %d nodes is full (%d nodes and %d leafs needed)", g.size, len(g.nodes)+len(newNodes), len(g.leafs)+len(newLeafs))
	}
	g.ctx.rt.lib.BuildForwardExpand(g.h, t.c)
	if len(newNodes)+len(newLeafs) > 0 {
		g.checked = nil
	}
	for p := range newNodes {
		g.nodes[p] = true
	}
	for p := range newLeafs {
		g.leafs[p] = true
	}
	return nil
}

// Nodes is the number of ops in the graph (0 once its context is freed).
func (g *Graph) Nodes() int {
	if g.ctx.hold() != nil {
		return 0
	}
	defer g.ctx.release()
	return int(g.ctx.rt.lib.GraphNNodes(g.h))
}

// tensors lists the graph's ops and leafs, with its context held.
func (g *Graph) tensors() (nodes, leafs []*Tensor) {
	for p := range g.nodes {
		nodes = append(nodes, g.ctx.wrap(p))
	}
	for p := range g.leafs {
		leafs = append(leafs, g.ctx.wrap(p))
	}
	return nodes, leafs
}

// checkMemory refuses, with the graph's context held, a graph that holds a
// tensor whose buffer was freed: computing it would touch freed memory.
// It cannot see a buffer freed while the computation runs; do not free
// what a graph uses before its Compute returns.
func (g *Graph) checkMemory() error {
	for _, set := range []map[*bindings.Tensor]bool{g.leafs, g.nodes} {
		for p := range set {
			h := p.Buffer
			if p.ViewSrc != nil {
				h = p.ViewSrc.Buffer
			}
			if h != 0 && !handles.live(h) {
				name := bindings.GoString(&p.Name[0])
				return &Error{Tensor: name, Err: fmt.Errorf("ggml: graph: tensor %s: %w: its buffer was freed", name, ErrClosed)}
			}
		}
	}
	return nil
}

// SetInput marks t as a graph input: a scheduler gives it its own memory,
// which Set fills after Alloc.
func (t *Tensor) SetInput() error { return t.setFlag(flagInput) }

// SetOutput marks t as a graph output: its memory is not reused for other
// results, so it can be read after Compute.
func (t *Tensor) SetOutput() error { return t.setFlag(flagOutput) }

func (t *Tensor) setFlag(f int) (err error) {
	op := "set_input"
	if f == flagOutput {
		op = "set_output"
	}
	defer placed(&err, op, at{t: t})
	if err := t.ctx.hold(); err != nil {
		return fmt.Errorf("ggml: flagging tensor %s: %w", t.name, err)
	}
	defer t.ctx.release()
	if f == flagInput {
		t.rt.lib.SetInput(t.c)
	} else {
		t.rt.lib.SetOutput(t.c)
	}
	return nil
}

// Compute runs g on this backend alone. Every tensor of the graph must
// already have memory in a buffer the backend's device can use, and the
// device must support every op.
func (b *Backend) Compute(g *Graph) (err error) {
	defer placed(&err, "graph_compute", at{dev: b.dev})
	if err := b.hold(); err != nil {
		return err
	}
	defer b.release()
	name := b.rt.RPCName(b.rt.lib.BackendName(b.h))
	if err := g.ctx.hold(); err != nil {
		return fmt.Errorf("ggml: compute on %s: %w", name, err)
	}
	defer g.ctx.release()
	if err := g.checkMemory(); err != nil {
		return err
	}
	nodes, leafs := g.tensors()
	dev := b.dev
	for _, t := range append(leafs, nodes...) {
		if t.c.Data == nil && t.c.ViewSrc == nil {
			return &Error{Tensor: t.name, Err: fmt.Errorf("ggml: compute on %s: tensor %q has no memory (use a Scheduler, or allocate it)", name, t.name)}
		}
		if t.c.Buffer != 0 && dev != nil {
			bt := BufferType{b.rt, b.rt.lib.BufferGetType(t.c.Buffer)}
			if !dev.SupportsBufferType(bt) {
				return &Error{Tensor: t.name, BufferType: bt.Name(), Err: fmt.Errorf("ggml: compute on %s: tensor %q lives in a %s buffer, which %s cannot use", name, t.name, bt.Name(), dev.Name())}
			}
		}
	}
	if dev != nil {
		for _, t := range nodes {
			if !dev.supportsOp(t) {
				return &Error{Tensor: t.name, Err: fmt.Errorf("ggml: compute on %s: %s does not support %s of %q", name, dev.Name(), b.rt.OpName(t.Op()), t.name)}
			}
		}
	}
	if st := b.rt.lib.BackendGraphCompute(b.h, g.h); st != 0 {
		return fmt.Errorf("ggml: compute on %s: %s", name, statusName(st))
	}
	return nil
}

func statusName(st int32) string {
	switch st {
	case -1:
		return "allocation failed"
	case 1:
		return "failed"
	case 2:
		return "aborted"
	}
	return fmt.Sprintf("status %d", st)
}

// SchedulerOptions tune a Scheduler.
type SchedulerOptions struct {
	// GraphSize is the largest graph it will run (0: DefaultGraphSize).
	GraphSize int
	// OpOffload lets ops whose weights are in host memory run on the
	// first backend when it supports them (llama.cpp's default).
	OpOffload bool
}

// Scheduler runs graphs across several backends (ggml_backend_sched). It
// is not safe for concurrent use; Free (or the Runtime's Close) makes it,
// and the results it allocated, answer ErrClosed.
type Scheduler struct {
	rt       *Runtime
	h        bindings.Sched
	backends []*Backend
	size     int
	hs       []bindings.Backend
	mem      *Buffer // stands for the memory it gives results: freed with it
	handles  map[bindings.Buffer]bool
}

// NewScheduler makes a scheduler over backends in priority order; the last
// one must be a CPU backend (it runs what no other can).
func (rt *Runtime) NewScheduler(backends []*Backend, o SchedulerOptions) (_ *Scheduler, err error) {
	defer placed(&err, "sched_new", at{})
	if len(backends) == 0 {
		return nil, fmt.Errorf("ggml: scheduler: no backends")
	}
	for i, b := range backends {
		if b == nil {
			return nil, fmt.Errorf("ggml: scheduler: backend %d is nil", i)
		}
		if b.freed.Load() {
			return nil, fmt.Errorf("ggml: scheduler: backend %s: %w: freed", b.dev.Name(), ErrClosed)
		}
	}
	last := backends[len(backends)-1]
	if last.dev == nil || last.dev.Type() != DeviceCPU {
		return nil, fmt.Errorf("ggml: scheduler: the last backend must be the CPU's, not %s", last.Name())
	}
	if o.GraphSize < 0 {
		return nil, fmt.Errorf("ggml: scheduler: graph size %d", o.GraphSize)
	}
	if o.GraphSize == 0 {
		o.GraphSize = DefaultGraphSize
	}
	if err := rt.begin(); err != nil {
		return nil, err
	}
	defer rt.end()
	s := &Scheduler{rt: rt, backends: backends, size: o.GraphSize, mem: &Buffer{rt: rt}, handles: map[bindings.Buffer]bool{}}
	for _, b := range backends {
		s.hs = append(s.hs, b.h)
	}
	s.h = rt.lib.SchedNew(&s.hs[0], nil, int32(len(s.hs)), uintptr(o.GraphSize), false, o.OpOffload)
	if s.h == 0 {
		return nil, fmt.Errorf("ggml: scheduler: creation failed")
	}
	rt.keep(s)
	return s, nil
}

// begin holds the scheduler, its backends and the graph's context (for
// writing: the results get memory) until the returned function runs, and
// checks the graph (check).
func (s *Scheduler) begin(g *Graph) (func(), error) {
	if s.mem.hold() != nil {
		return nil, fmt.Errorf("ggml: scheduler: %w: freed", ErrClosed)
	}
	for i, b := range s.backends {
		if err := b.hold(); err != nil {
			for _, h := range s.backends[:i] {
				h.release()
			}
			s.mem.release()
			return nil, fmt.Errorf("ggml: scheduler: %w", err)
		}
	}
	c := g.ctx
	c.mu.Lock()
	done := func() {
		c.mu.Unlock()
		for _, b := range s.backends {
			b.release()
		}
		s.mem.release()
	}
	if c.freed {
		done()
		return nil, fmt.Errorf("ggml: scheduler: graph: %w: its context was freed", ErrClosed)
	}
	if err := s.check(g); err != nil {
		done()
		return nil, err
	}
	return done, nil
}

// check refuses, with everything held, graphs the native scheduler would
// assert on: too big, with an op no backend supports, or using freed
// memory.
func (s *Scheduler) check(g *Graph) error {
	if err := g.checkMemory(); err != nil {
		return err
	}
	if g.checked == s {
		return nil
	}
	nodes, leafs := g.tensors()
	if len(nodes)+len(leafs) > s.size {
		return fmt.Errorf("ggml: scheduler for %d tensors given a graph of %d", s.size, len(nodes)+len(leafs))
	}
	for _, t := range nodes {
		ok := false
		for _, b := range s.backends {
			if b.dev != nil && b.dev.supportsOp(t) {
				ok = true
				break
			}
		}
		if !ok {
			return &Error{Tensor: t.name, Err: fmt.Errorf("ggml: scheduler: no backend supports %s of %q", s.rt.OpName(t.Op()), t.name)}
		}
	}
	g.checked = s
	return nil
}

// adopt records, with the graph's context held for writing, that the
// tensors living in the scheduler's memory are the scheduler's.
func (s *Scheduler) adopt(g *Graph) {
	for _, set := range []map[*bindings.Tensor]bool{g.nodes, g.leafs} {
		for p := range set {
			if h := p.Buffer; h != 0 && p.ViewSrc == nil && !handles.buffer(h) {
				g.ctx.owners[p] = s.mem
				if !s.handles[h] {
					s.handles[h] = true
					handles.add(h, false)
				}
			}
		}
	}
}

// Alloc assigns every tensor of g to a backend and gives the results and
// inputs memory; inputs can be Set afterwards.
func (s *Scheduler) Alloc(g *Graph) (err error) {
	defer placed(&err, "sched_alloc_graph", at{})
	done, err := s.begin(g)
	if err != nil {
		return err
	}
	defer done()
	if !s.rt.lib.SchedAllocGraph(s.h, g.h) {
		return fmt.Errorf("ggml: scheduler: allocating the graph failed: %w", ErrOutOfMemory)
	}
	s.adopt(g)
	return nil
}

// Compute runs g (allocating it first if Alloc was not called) and waits
// for the result.
func (s *Scheduler) Compute(g *Graph) (err error) {
	defer placed(&err, "sched_graph_compute", at{})
	done, err := s.begin(g)
	if err != nil {
		return err
	}
	defer done()
	st := s.rt.lib.SchedGraphCompute(s.h, g.h)
	s.adopt(g)
	if st != 0 {
		return fmt.Errorf("ggml: scheduler: compute: %s", statusName(st))
	}
	for _, b := range s.backends {
		if b.dev != nil {
			if err := b.dev.Err(); err != nil {
				return &Error{Device: b.dev.Name(), Endpoint: b.dev.Endpoint(), Err: fmt.Errorf("ggml: scheduler: %s: %w", b.dev.Name(), err)}
			}
		}
	}
	return nil
}

// Splits is how many pieces the last graph was cut into (0 once freed).
func (s *Scheduler) Splits() int {
	if s.mem.hold() != nil {
		return 0
	}
	defer s.mem.release()
	return int(s.rt.lib.SchedGetNSplits(s.h))
}

// Backend is the backend a tensor of the last allocated graph runs on (nil
// if none, and once freed).
func (s *Scheduler) Backend(t *Tensor) *Backend {
	if s.mem.hold() != nil {
		return nil
	}
	defer s.mem.release()
	if t.ctx.hold() != nil {
		return nil
	}
	defer t.ctx.release()
	h := s.rt.lib.SchedGetTensorBackend(s.h, t.c)
	for _, b := range s.backends {
		if b.h == h {
			return b
		}
	}
	return nil
}

// Reset drops the last graph's allocation.
func (s *Scheduler) Reset() (err error) {
	defer placed(&err, "sched_reset", at{})
	if err := s.mem.hold(); err != nil {
		return fmt.Errorf("ggml: scheduler: %w", err)
	}
	defer s.mem.release()
	s.rt.lib.SchedReset(s.h)
	return nil
}

// Free releases the scheduler and its memory once no result is being read;
// later calls do nothing.
func (s *Scheduler) Free() {
	if s == nil {
		return
	}
	s.mem.mu.Lock()
	defer s.mem.mu.Unlock()
	if s.mem.freed {
		return
	}
	s.mem.freed = true
	s.rt.lib.SchedFree(s.h)
	for h := range s.handles {
		handles.remove(h, false)
	}
	s.rt.drop(s)
}

// Floats reads an F32 tensor.
func (t *Tensor) Floats() (_ []float32, err error) {
	defer placed(&err, "tensor_get", at{t: t})
	if t.Type() != TypeF32 {
		return nil, fmt.Errorf("ggml: %q is %s, not f32", t.Name(), t.Type())
	}
	b, err := t.Bytes()
	if err != nil {
		return nil, err
	}
	out := make([]float32, len(b)/4)
	for i := range out {
		out[i] = math.Float32frombits(binary.LittleEndian.Uint32(b[4*i:]))
	}
	return out, nil
}

// SetFloats writes an F32 tensor whole.
func (t *Tensor) SetFloats(v []float32) (err error) {
	defer placed(&err, "tensor_set", at{t: t})
	if t.Type() != TypeF32 || uint64(len(v))*4 != t.NBytes() {
		return fmt.Errorf("ggml: %q (%s, %d bytes) cannot take %d floats", t.Name(), t.Type(), t.NBytes(), len(v))
	}
	if len(v) == 0 {
		return nil
	}
	return t.Set(unsafe.Slice((*byte)(unsafe.Pointer(&v[0])), 4*len(v)), 0)
}

// SetInts writes an I32 tensor whole.
func (t *Tensor) SetInts(v []int32) (err error) {
	defer placed(&err, "tensor_set", at{t: t})
	if t.Type() != TypeI32 || uint64(len(v))*4 != t.NBytes() {
		return fmt.Errorf("ggml: %q (%s, %d bytes) cannot take %d ints", t.Name(), t.Type(), t.NBytes(), len(v))
	}
	if len(v) == 0 {
		return nil
	}
	return t.Set(unsafe.Slice((*byte)(unsafe.Pointer(&v[0])), 4*len(v)), 0)
}
