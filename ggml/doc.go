// Package ggml is the idiomatic Go layer over the native ggml release opened
// by package bindings: a Runtime with its backends and devices, buffer types,
// buffers, backends (streams), events, contexts, tensors and the ops that
// ggload needs, plus pure-Go type traits that need no native library.
//
// Every value that reaches native code is checked here first, because a
// native assert kills the process: shapes, types, names, bounds and
// capabilities are validated and a wrong one is returned as an error.
//
// Handles are distinct types with one owner each: Free or Close releases a
// Buffer, Backend, Event or Context once, and a second call does nothing.
package ggml
