// Package ops is ggml's graph API as code that replays llama.cpp calls it:
// contexts without allocation, tensors, every op llama.cpp's graph
// builders use, graphs, devices, buffer types, backends and the
// scheduler, over handles the caller owns.
//
// It sits under package ggml for code that builds graphs by the thousand
// (every -fit trial builds several): its handles carry no lock and no
// ownership of their own, unlike ggml's Context, Tensor and Scheduler.
// What it keeps from ggml is the rule that nothing invalid reaches native
// code: every op checks its arguments first as ggml.c asserts them, and a
// check that would fail is an *AssertError naming ggml's condition; the
// native call is never made (a failed GGML_ASSERT ends the process).
//
// A Lib comes from a ggml.Runtime (Runtime.Ops). Its contexts live in Go
// memory and are freed by Context.Free; backends, schedulers and buffers
// by their Free methods. Nothing here is safe for concurrent use: a graph
// is built, scheduled and freed by one goroutine.
package ops
