// Package replay is ggload's replay engine: llama.cpp's own code, kept as
// data and evaluated, so that the pin's loading, graph-building and
// projector code runs in Go unchanged. Its rooms:
//
//	cpp    the evaluator of the C++ subset the pin's code is written in
//	gen    the generator: reads the pinned source into programs and tables
//	arch   the loading replay: hyperparameters, tensors, context, memory
//	graph  the graph builders over ggml's real ops, the compute reserve
//	clip   libmtmd's projector loader and its warm-up graphs
//
// This package itself holds what a plan hands to the package that runs
// the model (Replay): place makes it, infer runs it.
package replay

import "github.com/ggload/ggload/internal/replay/arch"

// Replay is a plan's model replayed anew, for a context: its tensors
// created, the context made with the plan's parameters, its memory
// module sized.
type Replay struct {
	Run     *arch.Run
	Context *arch.Context
	Memory  *arch.Memory
	Log     []string // "LEVEL text" lines of the context's making

	NGPULayers int // llama_model::n_gpu_layers()
	NTensors   int // llama_model::n_tensors(): the weights in their contexts
}
