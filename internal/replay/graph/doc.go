// Package graph is the pinned llama.cpp's graph code, replayed on ggml's
// real ops: llama_model::build_graph and every builder it reaches, for
// every architecture, over the views of every memory module (BuildGraph,
// through a GraphSession that holds the weights' and the cache's
// tensors), and llama_context's reservation of its compute buffers on a
// plan's backends (Reserve: the fused ops' resolution, the graphs' nodes
// and splits, each backend's buffer).
//
// Its programs are package arch's, run by package cpp; the ops are
// package ops', each checked as ggml.c asserts before the native call.
// What is the replay's own, not the pin's (the reserve ubatch, a memory's
// reserve context, the graph callback, the stubs for adapters and
// samplers) is said where it is.
package graph
