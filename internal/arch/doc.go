// Package arch is the pinned llama.cpp's per-architecture loading code,
// replayed: the hyperparameter and tensor-creation functions of every
// architecture (load_arch_hparams, load_arch_tensors and the functions
// they share), as programs over a small C++ subset that the generator
// (internal/arch/gen, run by scripts/gen-archs.sh) extracts from the
// pinned source, with the tables they use (tables_gen.go) and the types
// the pin's converter writes each metadata key with (converter_gen.go).
// Nothing here is ported by hand: a later pin is "regenerate, then run the
// tests", and TestGeneratedFromThePin fails when the committed files are
// not the generator's.
//
// Load replays llama_model_load's hyperparameters on a model's metadata,
// with llama_model_loader's type rules and messages (keys.go);
// Run.CreateTensors replays load_tensors' creation of every tensor and
// hands each to a Placer. Run.CreateMemory replays create_memory (the KV
// cache or recurrent state a context gets, memory.go); Run.InitContext
// replays llama_context_default_params, llama_init_from_model's checks,
// llama_context's constructor and output_reserve up to their first
// backend or allocation (context.go); Run.SupportsTensorSplit and
// Run.SplitState replay split mode tensor's llm_arch_supports_sm_tensor
// and llama_meta_device_get_split_state (splitstate.go). Run.BuildGraph
// (graph.go) replays llama_model::build_graph and every function it
// reaches for every architecture (gen/graph.go finds them), with real
// ggml ops called through the bindings on a no_alloc context, each
// checked first as ggml.c asserts (graphops*.go), over the views of every
// memory module (KV cache, iSWA, recurrent state, their hybrids, the DSA,
// MSA and DeepSeek V4 caches); Run.Reserve (reserve.go) replays
// llama_context::sched_reserve on the plan's backends: the fused ops'
// resolution, the graphs' nodes and splits, and each backend's compute
// buffer. The generator reads the sources as the release build's
// preprocessor leaves them (its conditionals evaluated). A function
// replayed up to a statement is extracted as its prefix, cut before an
// anchor the generator names (extractPrefix): when a later pin moves the
// anchor, the generator fails instead of cutting elsewhere. Errors that are llama.cpp's own (a missing key,
// a wrong shape, a failed GGML_ASSERT) are Throw and Abort, worded as
// llama.cpp words them; an evalError is a construct the evaluator does not
// know, a defect of ggload, never of the file.
//
// # The evaluator
//
// One engine runs the programs. A program is compiled once, when it is
// first used: every node becomes a closure that calls its children's
// closures directly (compile.go: a statement's stmtFn, an expression's
// exprFn, and for the nodes that can be assigned to a refFn), and running
// a program is calling its body's closure on a frame; nothing walks the
// tree again. Builtins (builtins.go, methods.go, create.go), which take
// their arguments unevaluated because some take references, run them
// through frame.eval and frame.ref, which call the same closures.
// Compiled programs are shared by every Run, so compilation happens only
// at decoding, under the programs' lock; a Run itself is used by one
// goroutine.
//
// Teaching the evaluator a construct of a later pin:
//
//  1. The generator's parser (gen/parse.go) reads it into an ast.Node: a
//     new ast.Op, or an existing one with new attributes; ast's encoding
//     carries every attribute already.
//  2. compileStmt or compileExpr (and compileRef, for an lvalue) gets a
//     case for it: compile the children once, and return a closure that
//     does what C++ does, with frame's helpers (eval.go) for what several
//     constructs share. A node kind with no case compiles to a closure that
//     fails with an evalError naming the program and the kind: an unknown
//     construct is an error, never a silent guess.
//  3. resolveLocals (programs.go) learns the scopes it opens, if it
//     declares variables; resolveGlobals, whether it opens one.
//  4. A table case in eval_test.go shows its C++ semantics, and a golden
//     case in gen's tests the source it comes from.
package arch
