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
// This package itself makes what a context runs on (New): a model's
// replay made anew, with its context and memory module, from plain data
// that package place planned and package infer reads off the plan.
// TOUR.md follows one function through the rooms.
package replay

import (
	"errors"
	"fmt"

	"github.com/ggload/ggload/gguf"
	"github.com/ggload/ggload/internal/replay/arch"
)

// Replay is a model replayed anew, for a context: its tensors created,
// the context made with the given parameters, its memory module sized.
type Replay struct {
	Run     *arch.Run
	Context *arch.Context
	Memory  *arch.Memory
	Log     []string // "LEVEL text" lines of the context's making
}

// ErrRefused is wrapped by an error for a model the pinned llama.cpp
// refuses to load (a missing key or tensor, a wrong shape, a failed check
// of its hyperparameters); the error's text is llama.cpp's. It is
// place.ErrRefused too.
var ErrRefused = errors.New("llama.cpp refuses the model")

// Refused wraps an error of the replay of model m with m's file, and with
// ErrRefused where llama.cpp's code threw or aborted.
func Refused(m *gguf.Model, err error) error {
	file := ""
	if len(m.Paths) > 0 && m.Paths[0] != "" {
		file = m.Paths[0] + ": "
	}
	var t *arch.Throw
	var a *arch.Abort
	switch {
	case errors.As(err, &t):
		return fmt.Errorf("%s%w: %s", file, ErrRefused, t.Msg)
	case errors.As(err, &a):
		return fmt.Errorf("%s%w: %s (llama.cpp would abort here)", file, ErrRefused, a.Error())
	}
	return fmt.Errorf("%s%w", file, err)
}

// New makes model m anew as llama_init_from_model makes a context of it:
// the hyperparameters read with the model options o, the tensors created
// (where they go is the plan's business, decided already), the context
// made with the llama_context_params c, and its memory module. Only an
// architecture the pin knows has a context.
func New(m *gguf.Model, o arch.Options, c arch.ContextParams) (*Replay, error) {
	run, err := arch.Load(m, o)
	if errors.Is(err, arch.ErrUnknownArch) {
		return nil, fmt.Errorf("llama.cpp %s does not know architecture '%s': it has no graph to run", arch.Pin, gguf.Printable(m.Architecture(), 64))
	}
	if err != nil {
		return nil, Refused(m, err)
	}
	if err := run.CreateTensors(keep{}); err != nil {
		return nil, Refused(m, err)
	}
	out := &Replay{Run: run}
	ctx, err := run.InitContext(c, func(level, msg string) {
		if level != "DEBUG" {
			out.Log = append(out.Log, level+" "+msg)
		}
	})
	if err != nil {
		return nil, Refused(m, err)
	}
	mem, err := run.CreateMemory(ctx.Memory())
	if err != nil {
		return nil, Refused(m, err)
	}
	out.Context, out.Memory = ctx, mem
	return out, nil
}

// keep takes the replay's tensors as they come: the plan placed them
// already.
type keep struct{}

func (keep) Place(*arch.Creation) error { return nil }
