package arch

import (
	_ "embed"

	"github.com/ggload/ggload/internal/replay/cpp"
)

// programsText is the generated programs (see gen).
//
//go:embed programs.sx
var programsText string

// programs is the pin's programs, with the evaluator's builtins.
var programs = cpp.NewLibrary(programsText, staticGlobal, structFields)

// LookupProgram is the pin's program of the name, decoded on first use;
// nil if the pin has none.
func LookupProgram(name string) (*cpp.Program, error) { return programs.Lookup(name) }

// ProgramNames lists every program of the generated text.
func ProgramNames() []string { return programs.Names() }
