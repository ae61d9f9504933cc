// Package arch is the pinned llama.cpp's loading code, replayed: every
// architecture's hyperparameters and tensor creation (Load,
// Run.CreateTensors), the memory a context gets (Run.CreateMemory), the
// context's parameters and checks up to its first allocation
// (Run.InitContext), and split mode tensor's split states
// (Run.SplitState). The functions are programs that the generator
// (internal/replay/gen, run by scripts/gen-archs.sh or go generate) extracts from
// the pinned source, with the tables they use (tables_gen.go) and the
// types the pin's converter writes each metadata key with
// (converter_gen.go); package cpp runs them, a Run being their Host.
//
// The architectures' code is not ported by hand: a later pin is
// "regenerate, then run the tests", and TestGeneratedFromThePin
// (internal/replay/gen) fails when the committed files are not the
// generator's. What the evaluator provides that code with (the loader's
// metadata reads in keys.go, the memory classes' constructors in
// memory.go, the converter's key types in converter.go) is, and its
// headers name the pin's files it follows (PIN.md). Errors that are llama.cpp's own (a missing key, a
// wrong shape, a failed GGML_ASSERT) are Throw and Abort, worded as
// llama.cpp words them.
package arch

//go:generate bash ../../../scripts/gen-archs.sh
