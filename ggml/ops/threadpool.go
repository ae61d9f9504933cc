package ops

import (
	"github.com/ggload/ggload/bindings"
)

// maxPoolThreads bounds a pool's threads: ggml packs the count of a
// graph's threads in GGML_THREADPOOL_N_THREADS_BITS (16) bits.
const maxPoolThreads = 1 << 16

// OpFlashAttnExt is GGML_OP_FLASH_ATTN_EXT in the pin's enum ggml_op.
const OpFlashAttnExt = 74

// Threadpool is a ggml_threadpool of the CPU backend: worker threads
// that live from one graph to the next, as llama.cpp's tools keep them
// (common_threadpools), instead of the threads the backend starts and
// joins for each graph when it has none.
type Threadpool bindings.Threadpool

// ThreadpoolParams are the ggml_threadpool_params a pool is made with:
// the thread count and the busy-wait level for new work between graphs
// (0 to 100), over ggml_threadpool_params_init's defaults. The priority
// stays the normal one: ggml gives another to the calling thread too,
// which is the Go runtime's.
type ThreadpoolParams struct {
	Threads int
	Poll    int
}

// NewThreadpool is ggml_threadpool_new with p over
// ggml_threadpool_params_init's defaults, from the registry of the CPU
// backend be; false where the backend has none (another backend, or a
// set without it).
func (l *Lib) NewThreadpool(be Backend, p ThreadpoolParams) (Threadpool, bool) {
	reg := l.b.DevBackendReg(l.b.BackendGetDevice(bindings.Backend(be)))
	newFn, ok := bindings.Proc[func(*bindings.ThreadpoolParams) bindings.Threadpool](l.b, reg, "ggml_threadpool_new")
	if !ok || p.Threads <= 0 || p.Threads >= maxPoolThreads || p.Poll < 0 || p.Poll > 100 {
		return 0, false
	}
	if _, ok := bindings.Proc[func(bindings.Backend, bindings.Threadpool)](l.b, reg, "ggml_backend_cpu_set_threadpool"); !ok {
		return 0, false
	}
	var tp bindings.ThreadpoolParams
	l.b.ThreadpoolParamsInit(&tp, int32(p.Threads))
	tp.Poll = uint32(p.Poll)
	h := newFn(&tp)
	return Threadpool(h), h != 0
}

// FreeThreadpool is ggml_threadpool_free (from the CPU backend be's
// registry): its threads stopped and joined. No backend may use it
// afterwards.
func (l *Lib) FreeThreadpool(be Backend, tp Threadpool) {
	reg := l.b.DevBackendReg(l.b.BackendGetDevice(bindings.Backend(be)))
	if fn, ok := bindings.Proc[func(bindings.Threadpool)](l.b, reg, "ggml_threadpool_free"); ok && tp != 0 {
		fn(bindings.Threadpool(tp))
	}
}

// BackendSetThreadpool is ggml_backend_cpu_set_threadpool: the CPU
// backend computes its graphs on tp (0: on threads of its own per
// graph), as llama_context::graph_compute sets it before each graph.
// False where be is no CPU backend.
func (l *Lib) BackendSetThreadpool(be Backend, tp Threadpool) bool {
	reg := l.b.DevBackendReg(l.b.BackendGetDevice(bindings.Backend(be)))
	fn, ok := bindings.Proc[func(bindings.Backend, bindings.Threadpool)](l.b, reg, "ggml_backend_cpu_set_threadpool")
	if ok {
		fn(bindings.Backend(be), bindings.Threadpool(tp))
	}
	return ok
}

// ThreadsChangeResults reports whether the CPU backend's results for g
// may depend on the thread count it computes g with: the pin's CPU
// kernels give every other node the same bits whatever the count, but
// FLASH_ATTN_EXT on one query row over at least 512 keys of F32 or F16
// (ops.cpp's split-KV path) cuts the keys into one chunk per thread and
// sums the chunks' partial results, so that another count sums them in
// another order.
func (l *Lib) ThreadsChangeResults(g *Graph) bool {
	for i := range l.NNodes(g) {
		t := l.Node(g, i)
		if t.Op != OpFlashAttnExt {
			continue
		}
		q, k, v := t.Src[0], t.Src[1], t.Src[2]
		if q == nil || k == nil || v == nil {
			continue
		}
		if q.Ne[1] == 1 && q.Ne[3] == 1 && (k.Type == TypeF32 || k.Type == TypeF16) && k.Type == v.Type && q.Type == TypeF32 && k.Ne[1] >= 512 {
			return true
		}
	}
	return false
}
