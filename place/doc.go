// Package place decides where every weight of a model goes, the way the
// pinned llama.cpp does, without allocating anything: the device list, the
// split ratios, each layer's device, each tensor's buffer type and the
// reason for it, the moved-tensor summary, and the size of every buffer the
// loader will create.
//
// A Plan is data: it can be printed (with llama.cpp's wording where
// llama.cpp has one), compared, encoded as JSON and tested. Package loader
// carries it out.
//
// # Architectures
//
// Which tensors a model has, in which order llama.cpp creates them, in
// which layer, with which op, duplicated (a tied output, a rope tensor
// every layer uses), skipped (multi-token-prediction blocks) or read on
// demand, and under which hyperparameter branches (dense or MoE layers,
// leading dense blocks, shared experts, sliding-window and recurrent
// layers, encoder and decoder parts) is decided by each architecture's
// own code in llama.cpp: its load_arch_hparams and load_arch_tensors, and
// the functions they share. ggload replays that code. internal/replay/arch holds
// it as generated data (programs.sx: the functions, as a small C++ subset;
// tables_gen.go: architecture names and classes, metadata keys, tensor
// names and infos, enum constants, llama_hparams's members), and
// internal/replay/cpp evaluates it on the model's metadata; Plan.Exact says the model was placed this
// way. Every architecture the pin loads is covered, and the
// TestArchitectures conformance test compares each with llama.cpp itself.
//
// A later llama.cpp's architecture is added by a mechanical step:
//
//  1. Pin the new release (native/pin.env).
//  2. Run scripts/gen-archs.sh (or go generate ./internal/replay/arch): it unpacks
//     the pinned source and regenerates internal/replay/arch's programs and
//     tables and internal/replay/graph's tables from it.
//  3. If the generator stops on a construct its C++ parser or the
//     evaluator does not know (it names the function and line), teach
//     internal/replay/gen or internal/replay/cpp that construct (internal/replay/cpp's
//     EVALUATOR.md says how); never edit the generated files.
//  4. Run the tests: TestGeneratedFromThePin checks the committed files
//     are the generator's, and TestArchitectures synthesizes a model of
//     every architecture and compares ggload's placement with llama.cpp's.
//
// A model whose architecture the pin does not know (a file from a later
// llama.cpp) takes the generic path: its shared hyperparameters are read as
// llama.cpp reads every model's, and each file tensor is placed by its
// name alone (its kind from llama.cpp's tensor table, its layer from the
// name), with the token embedding used again as the output when the model
// has none, and a rope tensor without a layer number used by every layer.
// The plan says so, and a tensor name the table does not know is an error.
package place
