// Package synthmodel writes synthetic GGUF models: real llama-family
// tensor layouts and metadata (enough for llama.cpp to load them),
// weights made by ggml's own quantizers. Large tensors repeat a few
// quantized rows, so that gigabytes cost no quantization time. The demo's
// model is one (DemoModel); lab/synth builds the test models of every
// architecture on it.
package synthmodel

import (
	"encoding/binary"
	"fmt"
	"io"
	"math"
	"math/rand/v2"

	"github.com/ggload/ggload/ggml"
	"github.com/ggload/ggload/gguf"
)

// Spec describes a model.
type Spec struct {
	Arch        string // "llama" (default) or "gemma4"
	Name        string
	Layers      int
	Embd        int64
	FF          int64
	Heads       int64
	HeadsKV     int64
	Vocab       int64
	Experts     int64 // MoE when > 0
	ExpertsUsed int64
	Tied        bool      // no output.weight: the token embedding is reused
	Weights     ggml.Type // matrices (default q8_0)
	Embeddings  ggml.Type // token_embd / output (default: Weights)
	RopeFreqs   bool      // add rope_freqs.weight (one tensor used by every layer)
	PerLayer    int64     // gemma4: per-layer embedding width (lazy-capable per_layer_token_embd)
	Seed        uint64
	Splits      int // write as this many split files (0/1: one file)
	// Tokenizer, if set, is the model's vocabulary (its Size is Vocab's),
	// and its output layer favours the vocabulary's words (wordRows);
	// nil: no vocabulary (tokenizer.ggml.model none).
	Tokenizer *Tokenizer
	// Distinct gives every tensor bytes of its own: its first row is
	// made from its index, the rest repeats a few rows as usual. Without
	// it, tensors of one shape and type may be byte for byte alike, as
	// no real model's are: an RPC server's file cache would then hold a
	// weight before any load had sent it.
	Distinct bool
}

func (s *Spec) defaults() {
	if s.Arch == "" {
		s.Arch = "llama"
	}
	if s.Name == "" {
		s.Name = "ggload-synthetic"
	}
	if s.Weights == 0 { // the zero value (f32) means the default, q8_0
		s.Weights = ggml.TypeQ8_0
	}
	if s.Embeddings == 0 {
		s.Embeddings = s.Weights
	}
	if s.HeadsKV == 0 {
		s.HeadsKV = s.Heads
	}
	if s.Seed == 0 {
		s.Seed = 1
	}
}

type tensor struct {
	name  string
	typ   ggml.Type
	shape []int64
}

// Tensors lists the model's tensors in file order.
func (s Spec) Tensors() []tensor {
	s.defaults()
	var ts []tensor
	add := func(name string, typ ggml.Type, shape ...int64) { ts = append(ts, tensor{name, typ, shape}) }
	headDim := s.Embd / s.Heads
	add("token_embd.weight", s.Embeddings, s.Embd, s.Vocab)
	if s.Arch == "gemma4" && s.PerLayer > 0 {
		add("per_layer_token_embd.weight", s.Embeddings, s.PerLayer*int64(s.Layers), s.Vocab)
		add("per_layer_model_proj.weight", s.Weights, s.Embd, s.PerLayer*int64(s.Layers))
		add("per_layer_proj_norm.weight", ggml.TypeF32, s.PerLayer)
	}
	add("output_norm.weight", ggml.TypeF32, s.Embd)
	if !s.Tied {
		add("output.weight", s.Embeddings, s.Embd, s.Vocab)
	}
	if s.RopeFreqs || s.Arch == "gemma4" { // gemma4's full-attention layers require it
		add("rope_freqs.weight", ggml.TypeF32, headDim/2)
	}
	for i := 0; i < s.Layers; i++ {
		p := fmt.Sprintf("blk.%d.", i)
		add(p+"attn_norm.weight", ggml.TypeF32, s.Embd)
		add(p+"attn_q.weight", s.Weights, s.Embd, s.Embd)
		add(p+"attn_k.weight", s.Weights, s.Embd, headDim*s.HeadsKV)
		add(p+"attn_v.weight", s.Weights, s.Embd, headDim*s.HeadsKV)
		add(p+"attn_output.weight", s.Weights, s.Embd, s.Embd)
		if s.Arch == "gemma4" {
			add(p+"attn_q_norm.weight", ggml.TypeF32, headDim)
			add(p+"attn_k_norm.weight", ggml.TypeF32, headDim)
			add(p+"post_attention_norm.weight", ggml.TypeF32, s.Embd)
			add(p+"post_ffw_norm.weight", ggml.TypeF32, s.Embd)
		}
		add(p+"ffn_norm.weight", ggml.TypeF32, s.Embd)
		if s.Experts > 0 {
			add(p+"ffn_gate_inp.weight", ggml.TypeF32, s.Embd, s.Experts)
			add(p+"ffn_gate_exps.weight", s.Weights, s.Embd, s.FF, s.Experts)
			add(p+"ffn_down_exps.weight", s.Weights, s.FF, s.Embd, s.Experts)
			add(p+"ffn_up_exps.weight", s.Weights, s.Embd, s.FF, s.Experts)
		} else {
			add(p+"ffn_gate.weight", s.Weights, s.Embd, s.FF)
			add(p+"ffn_down.weight", s.Weights, s.FF, s.Embd)
			add(p+"ffn_up.weight", s.Weights, s.Embd, s.FF)
		}
		if s.Arch == "gemma4" && s.PerLayer > 0 {
			add(p+"inp_gate.weight", s.Weights, s.Embd, s.PerLayer)
			add(p+"proj.weight", ggml.TypeF32, s.PerLayer, s.Embd)
			add(p+"post_norm.weight", ggml.TypeF32, s.Embd)
		}
	}
	return ts
}

// Bytes is the total size of the model's tensors.
func (s Spec) Bytes() int64 {
	var n int64
	for _, t := range s.Tensors() {
		var sh ggml.Shape = ggml.Shape{1, 1, 1, 1}
		copy(sh[:], t.shape)
		b, _ := t.typ.Bytes(sh)
		n += b
	}
	return n
}

// Writer builds the model's GGUF writer. rt provides ggml's quantizers.
func (s Spec) Writer(rt *ggml.Runtime) (*gguf.Writer, error) {
	s.defaults()
	if s.Layers <= 0 || s.Embd <= 0 || s.Heads <= 0 || s.Embd%s.Heads != 0 || s.Vocab <= 0 || s.FF <= 0 {
		return nil, fmt.Errorf("synthmodel: incomplete spec %+v", s)
	}
	w := gguf.NewWriter()
	a := s.Arch
	set := func(k string, v gguf.Value) {
		if err := w.Set(k, v); err != nil {
			panic(err) // keys are well-formed constants
		}
	}
	set("general.architecture", gguf.String(a))
	set("general.name", gguf.String(s.Name))
	set(a+".block_count", gguf.Uint32(uint32(s.Layers)))
	set(a+".context_length", gguf.Uint32(4096))
	set(a+".embedding_length", gguf.Uint32(uint32(s.Embd)))
	set(a+".feed_forward_length", gguf.Uint32(uint32(s.FF)))
	set(a+".attention.head_count", gguf.Uint32(uint32(s.Heads)))
	set(a+".attention.head_count_kv", gguf.Uint32(uint32(s.HeadsKV)))
	set(a+".rope.dimension_count", gguf.Uint32(uint32(s.Embd/s.Heads)))
	set(a+".attention.layer_norm_rms_epsilon", gguf.Float32(1e-5))
	set(a+".vocab_size", gguf.Uint32(uint32(s.Vocab)))
	if s.Experts > 0 {
		set(a+".expert_count", gguf.Uint32(uint32(s.Experts)))
		set(a+".expert_used_count", gguf.Uint32(uint32(s.ExpertsUsed)))
	}
	if s.Arch == "gemma4" {
		// every other layer slides over a window, with heads as wide as the
		// full-attention layers'
		swa := make([]bool, s.Layers)
		for i := range swa {
			swa[i] = i%2 == 0
		}
		pattern, err := gguf.Array(swa)
		if err != nil {
			return nil, err
		}
		set(a+".attention.sliding_window_pattern", pattern)
		set(a+".attention.sliding_window", gguf.Uint32(512))
		set(a+".attention.key_length_swa", gguf.Uint32(uint32(s.Embd/s.Heads)))
		set(a+".attention.value_length_swa", gguf.Uint32(uint32(s.Embd/s.Heads)))
	}
	if s.Arch == "gemma4" && s.PerLayer > 0 {
		set(a+".embedding_length_per_layer_input", gguf.Uint32(uint32(s.PerLayer)))
	}
	if s.Tokenizer == nil {
		set("tokenizer.ggml.model", gguf.String("none"))
	} else if s.Tokenizer.Size != int(s.Vocab) {
		return nil, fmt.Errorf("synthmodel: a vocabulary of %d tokens for a model of %d", s.Tokenizer.Size, s.Vocab)
	} else {
		for _, kv := range s.Tokenizer.KV {
			set(kv.Key, kv.Value)
		}
	}
	f := NewFiller(rt, s.Seed)
	for i, t := range s.Tensors() {
		data, err := f.Data(t.typ, t.shape, i, s.Distinct)
		if t.name == "output.weight" && s.Tokenizer != nil {
			var rows []byte
			if rows, err = wordRows(rt, t.typ, s.Embd, *s.Tokenizer, s.Seed); err == nil {
				data = tiled(nil, rows, int64(len(rows)), int64(len(rows)))
			}
		}
		if err != nil {
			return nil, fmt.Errorf("synthmodel: %s: %w", t.name, err)
		}
		if err := w.AddTensor(t.name, t.typ, t.shape, data); err != nil {
			return nil, err
		}
	}
	return w, nil
}

// Filler makes tensors' data: a few pseudo-random quantized rows per
// type and width, repeated (real data, cheap to make).
type Filler struct {
	rt    *ggml.Runtime
	r     *rand.Rand
	cache map[string][]byte
}

// NewFiller makes tensors' data with ggml's quantizers of rt, from seed.
func NewFiller(rt *ggml.Runtime, seed uint64) *Filler {
	return &Filler{rt: rt, r: rand.New(rand.NewPCG(seed, 0x5eed)), cache: map[string][]byte{}}
}

// Data writes the i-th tensor, of type typ and shape: with distinct, its
// first row its own.
func (f *Filler) Data(typ ggml.Type, shape []int64, i int, distinct bool) (func(io.Writer) error, error) {
	var sh ggml.Shape = ggml.Shape{1, 1, 1, 1}
	copy(sh[:], shape)
	size, err := typ.Bytes(sh)
	if err != nil {
		return nil, err
	}
	row, err := typ.RowSize(sh[0])
	if err != nil {
		return nil, err
	}
	key := fmt.Sprintf("%s/%d/%d", typ, sh[0], f.r.IntN(4))
	rows := f.cache[key]
	if rows == nil {
		n := 8
		src := make([]float32, int64(n)*sh[0])
		for i := range src {
			src[i] = float32(math.Sin(float64(i)*0.37+float64(f.r.IntN(1000)))) * 0.5
		}
		if rows, err = encodeRows(f.rt, typ, src, sh[0]); err != nil {
			return nil, err
		}
		f.cache[key] = rows
	}
	var first []byte
	if distinct {
		if first, err = ownRow(f.rt, typ, sh[0], i); err != nil {
			return nil, err
		}
	}
	return tiled(first, rows, row, size), nil
}

// encodeRows stores src, rows of width values, as type typ: F32 as it is,
// zero blocks for the activation formats ggml has no quantizer for
// (Q8_K, Q8_1: zeros are valid data), quantized otherwise.
func encodeRows(rt *ggml.Runtime, typ ggml.Type, src []float32, width int64) ([]byte, error) {
	switch typ {
	case ggml.TypeF32:
		b := make([]byte, 4*len(src))
		for j, x := range src {
			binary.LittleEndian.PutUint32(b[4*j:], math.Float32bits(x))
		}
		return b, nil
	case ggml.TypeQ8_K, ggml.TypeQ8_1, ggml.TypeI8, ggml.TypeI16, ggml.TypeI32, ggml.TypeI64:
		// (integer tensors are indices, such as a token's expert: zero is one)
		row, err := typ.RowSize(width)
		if err != nil {
			return nil, err
		}
		return make([]byte, int64(len(src))/width*row), nil
	}
	return rt.Quantize(typ, src, width, nil)
}

// ownRow is one row of n values of type typ made from i alone: the first
// row of the i-th tensor of a Distinct model.
func ownRow(rt *ggml.Runtime, typ ggml.Type, n int64, i int) ([]byte, error) {
	src := make([]float32, n)
	for j := range src {
		src[j] = float32(math.Cos(float64(j)*0.11+float64(i)*1.618)) * 0.25
	}
	b, err := encodeRows(rt, typ, src, n)
	if err == nil && (typ == ggml.TypeQ8_K || typ == ggml.TypeQ8_1) {
		// zero blocks all alike: the first quants (int8, after the
		// block's 4-byte scale in both formats) say i
		binary.LittleEndian.PutUint16(b[4:], uint16(i))
	}
	return b, err
}

// tiled writes size bytes: first (a whole row, or nothing), then rows
// repeated (whole rows of rowSize).
func tiled(first, rows []byte, rowSize, total int64) func(io.Writer) error {
	return func(out io.Writer) error {
		size := total
		if n := min(int64(len(first)), size); n > 0 {
			if _, err := out.Write(first[:n]); err != nil {
				return err
			}
			size -= n
		}
		// write in chunks of whole rows of about 1 MiB
		chunkRows := max(int64(1<<20)/rowSize, 1)
		chunk := make([]byte, 0, chunkRows*rowSize)
		nRows := int64(len(rows)) / rowSize
		for i := int64(0); i < chunkRows; i++ {
			k := i % nRows
			chunk = append(chunk, rows[k*rowSize:(k+1)*rowSize]...)
		}
		for size > 0 {
			n := min(size, int64(len(chunk)))
			if _, err := out.Write(chunk[:n]); err != nil {
				return err
			}
			size -= n
		}
		return nil
	}
}

// Write writes the model to path (or prefix-0000i-of-0000n.gguf splits, of
// which it returns the first) and returns the path to open.
func (s Spec) Write(rt *ggml.Runtime, path string) (string, error) {
	w, err := s.Writer(rt)
	if err != nil {
		return "", err
	}
	if s.Splits > 1 {
		prefix := path
		if len(prefix) > 5 && prefix[len(prefix)-5:] == ".gguf" {
			prefix = prefix[:len(prefix)-5]
		}
		paths, err := w.WriteSplits(prefix, s.Splits)
		if err != nil {
			return "", err
		}
		return paths[0], nil
	}
	return path, w.WriteFile(path)
}
