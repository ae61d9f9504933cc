// Package hooks reaches into package ggml for ggload's own harnesses and
// tests: the raw native table behind a Runtime, the native struct of a
// Tensor, the count of live buffers. Package ggml sets them when it is
// initialised; they are not part of its API.
package hooks

import "github.com/ggload/ggload/bindings"

var (
	// Lib returns the native table of a *ggml.Runtime.
	Lib func(rt any) *bindings.Lib
	// TensorC returns the native struct of a *ggml.Tensor (nil once its
	// context is freed).
	TensorC func(t any) *bindings.Tensor
	// LiveBuffers counts the buffers made through package ggml and not
	// freed, in the whole process: tests prove with it that a failed or
	// cancelled load leaks none.
	LiveBuffers func() int64
)
