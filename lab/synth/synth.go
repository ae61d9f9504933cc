// Package synth writes synthetic GGUF models for tests and benchmarks:
// the llama-family models of internal/synthmodel (Spec), and models of
// every architecture the pin loads, filled in with libllama as the oracle.
package synth

import (
	"fmt"

	"github.com/ggload/ggload/ggml"
	"github.com/ggload/ggload/gguf"
	"github.com/ggload/ggload/internal/synthmodel"
)

// Spec describes a llama-family model: internal/synthmodel's, which the
// demo writes too.
type Spec = synthmodel.Spec

// BenchSpec is a llama model of about size bytes (at least one layer) with
// matrices of type t: 2048 wide with a 32k vocabulary (512 wide with 4k
// below 256 MiB), layers added to reach the size. Its tensors are Distinct:
// a load onto RPC servers with file caches finds in them only what an
// earlier load sent, as with a real model.
func BenchSpec(size int64, t ggml.Type) Spec {
	s := Spec{Name: "ggload-bench", Layers: 1, Embd: 2048, FF: 5632, Heads: 16, HeadsKV: 16, Vocab: 32000, Weights: t, Embeddings: t, Seed: 7, Distinct: true}
	if size < 256<<20 {
		s.Embd, s.FF, s.Heads, s.HeadsKV, s.Vocab = 512, 1536, 8, 8, 4096
	}
	one := s.Bytes()
	s.Layers = 2
	perLayer := s.Bytes() - one
	s.Layers = max(1, int((size-one+perLayer-1)/perLayer)+1)
	return s
}

// FillFile writes a copy of the model at src to dst with pseudo-random
// weights of its types (each tensor's first row its own) in place of its
// data: a synthesized architecture's model, to run.
func FillFile(rt *ggml.Runtime, src, dst string, seed uint64) error {
	f, err := gguf.Open(src)
	if err != nil {
		return err
	}
	defer f.Close()
	w := gguf.NewWriter()
	for _, kv := range f.KV {
		if err := w.Set(kv.Key, kv.Value); err != nil {
			return err
		}
	}
	fl := synthmodel.NewFiller(rt, seed)
	for i, t := range f.Tensors {
		shape := t.Shape[:max(t.NDims, 1)]
		data, err := fl.Data(t.Type, shape, i, true)
		if err != nil {
			return fmt.Errorf("synth: %s: %w", t.Name, err)
		}
		if err := w.AddTensor(t.Name, t.Type, shape, data); err != nil {
			return err
		}
	}
	return w.WriteFile(dst)
}
