// Package cpp evaluates the subset of C++ that llama.cpp's replayed
// functions are written in: values (scalars with C++'s conversions,
// structs, std::vector, std::array, std::map and std::set, strings,
// lambdas), statements, exceptions (Throw) and asserts (Abort).
//
// A Library holds the programs (the generator's text, decoded and compiled
// on first use) and what they reach at compile time: builtins, the
// structs of the headers, the constants of the tables. An Interp runs
// them for one replay; what the programs reach beyond the C++ it knows it
// asks its Host. A construct it does not know is an *EvalError, a defect
// of ggload, never of the file. EVALUATOR.md says how it works and how to
// teach it a construct of a later pin.
package cpp
