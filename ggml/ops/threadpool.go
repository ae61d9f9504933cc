package ops

import "github.com/ggload/ggload/bindings"

// Threadpool is a ggml_threadpool of the CPU backend: its workers stay
// between graphs (polling, then waiting), as llama.cpp's tools attach
// one to their context (common_threadpools); 0 is none.
type Threadpool uintptr

// ThreadpoolNew is ggml_threadpool_new of n threads with
// ggml_threadpool_params_init's defaults (hybrid polling at 50, the
// inherited affinity and priority), from the CPU device's registry; 0
// where it has none.
func (l *Lib) ThreadpoolNew(cpu Dev, n int) Threadpool {
	if n <= 0 || n > len(bindings.ThreadpoolParams{}.CPUMask) || l.DevType(cpu) != bindings.DevTypeCPU {
		return 0
	}
	reg := l.b.DevBackendReg(bindings.Dev(cpu))
	fn, ok := bindings.Proc[func(*bindings.ThreadpoolParams) uintptr](l.b, reg, "ggml_threadpool_new")
	if !ok {
		return 0
	}
	p := &bindings.ThreadpoolParams{NThreads: int32(n), Poll: 50}
	return Threadpool(fn(p))
}

// ThreadpoolFree is ggml_threadpool_free; the backends it was set on
// must no longer compute with it.
func (l *Lib) ThreadpoolFree(cpu Dev, tp Threadpool) {
	if tp == 0 {
		return
	}
	reg := l.b.DevBackendReg(bindings.Dev(cpu))
	if fn, ok := bindings.Proc[func(uintptr)](l.b, reg, "ggml_threadpool_free"); ok {
		fn(uintptr(tp))
	}
}

// BackendSetThreadpool is ggml_backend_cpu_set_threadpool for a backend
// of a CPU device (llama_context::graph_compute sets the context's pool
// before each graph); false for another backend, which has none.
func (l *Lib) BackendSetThreadpool(be Backend, tp Threadpool) bool {
	dev := l.b.BackendGetDevice(bindings.Backend(be))
	if l.b.DevType(dev) != bindings.DevTypeCPU {
		return false
	}
	fn, ok := bindings.Proc[func(bindings.Backend, uintptr)](l.b, l.b.DevBackendReg(dev), "ggml_backend_cpu_set_threadpool")
	if !ok {
		return false
	}
	fn(bindings.Backend(be), uintptr(tp))
	return true
}
