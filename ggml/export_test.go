package ggml

import "github.com/ggload/ggload/bindings"

// Lib is the raw native table, for this package's tests.
func (rt *Runtime) Lib() *bindings.Lib { return rt.lib }

// C is the native struct, for this package's tests.
func (t *Tensor) C() *bindings.Tensor { return t.c }

// LiveBuffers counts the buffers not freed, for this package's tests.
func LiveBuffers() int64 { return liveBuffers.Load() }

// MetaSplitterIDs lists the user-data words of meta devices whose
// splitter is still registered.
func MetaSplitterIDs() map[uintptr]bool {
	ids := map[uintptr]bool{}
	metaSplitters.Range(func(k, _ any) bool {
		ids[k.(uintptr)] = true
		return true
	})
	return ids
}
