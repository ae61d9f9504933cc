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
// What llama.cpp decides inside each architecture's tensor creation is
// reproduced from a table (archSpecs) for the architectures it lists;
// tensor kinds (input, output or repeating layer, and the op a weight is
// used with) come from llama.cpp's tensor info table (tensorKinds).
package place
