package ggml

import "github.com/ggload/ggload/bindings"

// Lib is the raw native table, for this package's tests.
func (rt *Runtime) Lib() *bindings.Lib { return rt.lib }

// C is the native struct, for this package's tests.
func (t *Tensor) C() *bindings.Tensor { return t.c }

// LiveBuffers counts the buffers not freed, for this package's tests.
func LiveBuffers() int64 { return liveBuffers.Load() }
