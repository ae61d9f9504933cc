// Package planrun hands a plan's replay of llama.cpp to the package that
// runs the model: package place makes it (it owns the hyperparameters,
// the tensor creation and the context's parameters) and registers New;
// package infer calls it. Neither exports the replay.
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

// New replays the plan (a *place.Plan); package place sets it.
var New func(plan any) (*Replay, error)
