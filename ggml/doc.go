// Package ggml is the idiomatic Go layer over the native ggml release opened
// by package bindings: a Runtime with its backends and devices, buffer types,
// buffers, backends (streams), events, contexts, tensors and the ops that
// ggload needs, plus pure-Go type traits that need no native library.
//
// Every value that reaches native code is checked here first, because a
// native assert kills the process: shapes, types, names, bounds and
// capabilities are validated and a wrong one is returned as an error.
//
// # Lifetimes
//
// Open returns a Runtime of its own each time, over the process's one
// native set. Every handle made through it (Context, Buffer, Backend,
// Event, Scheduler) is freed once by its Free, or by the Runtime's Close,
// whichever comes first; a second call does nothing. After that, the
// handle and the tensors that depend on it answer ErrClosed: nothing
// touches native memory that was freed. Devices and RPC registrations are
// the process's and outlive every Runtime.
//
// # Concurrency
//
// Runtime, Device, BufferType and Buffer are safe for concurrent use.
// Reading and writing tensor data (Tensor.Get, Set, Bytes, Floats and
// SetFloats) is safe from many goroutines, and concurrently with the Free
// of the tensor's context or buffer, which waits for them. Building
// tensors, ops and graphs in one Context, queueing work on one Backend and
// running one Scheduler are not: keep each to one goroutine at a time, and
// free a graph's weights only once its Compute has returned.
//
// # Errors
//
// Every error of this package is an *Error: the ggml call that failed
// (Op), and the device, buffer type, tensor, bytes or RPC endpoint it
// concerned, for errors.As. The errors callers branch on are sentinels
// it wraps, for errors.Is: ErrClosed, ErrOutOfMemory, ErrWriteOnly,
// ErrRPCUnreachable, ErrRPCFailed, ErrUnknownDevice,
// ErrUnknownBufferType, and errors.ErrUnsupported for what a device or
// the native set cannot do.
//
// # Logging
//
// ggml's own messages go to Options.Logger while the Runtime is open; by
// default only its warnings and errors reach slog.Default().
package ggml
