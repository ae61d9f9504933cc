package arch

import "github.com/ggload/ggload/internal/replay/cpp"

// What the graph replay (package graph) reads of a replay: the objects
// the programs built, the context InitContext made, and the pin's tables.

// Model is the llama_model object the programs filled.
func (r *Run) Model() *cpp.Object { return r.model }

// Object is llama_hparams as the programs see it.
func (h *Hparams) Object() *cpp.Object { return h.obj }

// CParams is the llama_cparams InitContext resolved (nil before it).
func (r *Run) CParams() *cpp.Object { return r.cparams }

// Context is the llama_context object InitContext made.
func (r *Run) Context() cpp.Val { return r.ctx }

// Class is the architecture's model class (llm_build_* of the pin).
func (r *Run) Class() string { return r.entry.Class }

// SplitMode is llama_model::split_mode() as InitContext was told.
func (r *Run) SplitMode() int { return r.splitMode }

// SetTensorCount sets llama_model::n_tensors(): the weights in their
// contexts, which the graph's size counts.
func (r *Run) SetTensorCount(n int) { r.nTensors = n }

// Program is the pin's program of the name.
func (r *Run) Program(name string) (*cpp.Program, error) { return r.program(name) }

// ModelProgram is the program of a method of the model's class or its
// bases, nil if none.
func (r *Run) ModelProgram(name string) *cpp.Program { return r.modelProgram(name) }

// Wrap prefixes a thrown error's text as llama.cpp does; evaluator
// defects and aborts keep their own.
func (r *Run) Wrap(prefix string, err error) error { return r.wrap(prefix, err) }

// Of is the replay a frame of its programs runs in.
func Of(f *cpp.Frame) *Run { return f.I.Host.(*Run) }

// EnumConst is an enum constant or #define of the pin's programs.
func EnumConst(name string) (int64, bool) {
	v, ok := enumConsts[name]
	return v, ok
}

// ClassParent is a model class's base class ("" for none).
func ClassParent(class string) string { return classParents[class] }

// Library is the pin's programs, for a replay that adds builtins of its
// own before its first program runs.
func Library() *cpp.Library { return programs }
