// Package planrun is what a plan hands to the package that runs the
// model: place.Plan.ContextReplay makes it (place owns the
// hyperparameters, the tensor creation and the context's parameters);
// package infer runs it.
package planrun

import "github.com/ggload/ggload/internal/arch"

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
