package synth

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"

	"github.com/ggload/ggload/ggml"
	"github.com/ggload/ggload/ggml/ops"
	"github.com/ggload/ggload/gguf"
	"github.com/ggload/ggload/internal/replay/arch"
)

// An architecture model is written by asking the pinned llama.cpp's own
// loading code what is missing, and adding it, until it loads the model:
// every metadata key it requires, with a small value, and every tensor it
// requires, with the shape it wants, all zeros. The code asked is
// llama.cpp's load_hparams and load_arch_tensors replayed by internal/replay/arch,
// whose errors are libllama's, word for word ("key not found in model",
// "has wrong type", "tensor ... not found", "has wrong shape", a failed
// GGML_ASSERT): asking the replay costs microseconds where a load through
// libllama costs milliseconds and can abort the process. The tokenizer is
// one of the pin's vocab files. libllama itself then loads every model
// (tests/archs_test.go) and is the judge of the result.

// ArchModel is a synthesized model of one architecture.
type ArchModel struct {
	Arch    string
	KV      []gguf.KV    // metadata, tokenizer excluded
	Tensors []ArchTensor // in creation order
	Vocab   *gguf.File   // the tokenizer's source
	Log     []string     // what each step added
	Fixes   map[string]bool
	Types   KeyTypes // how the file writes its metadata's types

	index map[string]int // Tensors by name
	opts  ArchOptions    // with the defaults set
}

// ArchTensor is one tensor of an ArchModel.
type ArchTensor struct {
	Name  string
	Type  ggml.Type
	Shape []int64
}

// ArchOptions shape a synthesized model.
type ArchOptions struct {
	Layers int      // block_count (default 4)
	Embd   int64    // embedding_length (default 64)
	Types  KeyTypes // the metadata's types: the converter's (default) or the loader's
	// Graph, if set, is the native library the model's compute graphs
	// are built with by the replay, and mended until they build (graph.go);
	// nil: the model is only checked by llama.cpp's loading code.
	Graph *ops.Lib
	// Only, if set, picks the architectures ArchFiles writes (the others'
	// files in its directory are left as they are).
	Only func(arch string) bool
	// Keys are set after the architecture's own seeds, and the keys of
	// Drop removed ("%s" stands for the architecture): a variant of the
	// model, as a converter writes it for a checkpoint of that kind.
	Keys []gguf.KV
	Drop []string
}

// maxSteps bounds the additions: a model of the pin needs at most a few
// dozen keys and a few hundred tensors.
const maxSteps = 2000

// NewArchModel synthesizes a model of architecture name with the
// tokenizer of vocab (a GGUF holding tokenizer.* keys).
//
// When the programs refuse every attempt, it returns the model as far as
// it got with the error: llama.cpp can then be asked for its own reason.
func NewArchModel(name string, vocab *gguf.File, o ArchOptions) (*ArchModel, error) {
	if !arch.Known(name) {
		return nil, fmt.Errorf("synth: %s is not an architecture of llama.cpp %s", name, arch.Pin)
	}
	if o.Layers == 0 {
		o.Layers = 4
	}
	if o.Embd == 0 {
		o.Embd = 64
	}
	toks, ok := vocab.Lookup("tokenizer.ggml.tokens")
	if !ok || !toks.IsArray() {
		return nil, fmt.Errorf("synth: the vocab file has no tokenizer.ggml.tokens")
	}
	m := &ArchModel{Arch: name, Vocab: vocab, Fixes: map[string]bool{}, Types: o.Types, opts: o}
	a := name + "."
	m.set("general.architecture", gguf.String(name))
	m.set("general.name", gguf.String("ggload-synthetic-"+name))
	m.set(a+"block_count", gguf.Uint32(uint32(o.Layers)))
	m.set(a+"context_length", gguf.Uint32(256))
	m.set(a+"embedding_length", gguf.Uint32(uint32(o.Embd)))
	m.set(a+"feed_forward_length", gguf.Uint32(uint32(2*o.Embd)))
	m.set(a+"attention.head_count", gguf.Uint32(4))
	m.set(a+"attention.head_count_kv", gguf.Uint32(2))
	m.set(a+"vocab_size", gguf.Uint32(uint32(toks.Len())))
	err := m.solve()
	if err == nil {
		err = m.addArchOptionals()
	}
	if err != nil || o.Graph == nil {
		return m, err
	}
	return m, m.solveGraph(o.Graph)
}

// addArchOptionals adds the architecture's archOptionals.
func (m *ArchModel) addArchOptionals() error {
	for _, k := range archOptionals[m.Arch] {
		if !m.addOptional(k) {
			return fmt.Errorf("synth: %s: the loader asks for no optional %s that the model lacks", m.Arch, k)
		}
		m.Log = append(m.Log, "optional "+k+" (the converter writes it)")
	}
	return nil
}

// archVocab names the vocab file of the pin's models/ directory an
// architecture's model takes its tokenizer from (ggml-vocab-<name>.gguf);
// the others take llama-spm's.
var archVocab = map[string]string{
	"phi3": "phi-3", // its vocabulary loader looks up phi-3's special tokens
}

// VocabName is the vocab file (ggml-vocab-<name>.gguf in the pin's models/
// directory) an architecture's model takes its tokenizer from.
func VocabName(arch string) string {
	if vn := archVocab[arch]; vn != "" {
		return vn
	}
	return "llama-spm"
}

// ArchFile is one architecture's synthesized model file.
type ArchFile struct {
	Arch  string
	Types KeyTypes // the metadata's types
	Name  string   // the architecture, and for a file with the loader's types "/loader-types"
	Path  string
	Err   error // the synthesizer's error: the file is the model as far as it got
}

// ArchFiles writes a model of every architecture of the pin into dir,
// taking tokenizers from the pin's source tree src, and returns them
// sorted by architecture. A file whose content is already in dir is kept
// (the name carries a hash of the content); other files are removed.
func ArchFiles(dir, src string, o ArchOptions) ([]ArchFile, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	vocabs := map[string]*gguf.File{}
	defer func() {
		for _, f := range vocabs {
			f.Close()
		}
	}()
	names := arch.Architectures()
	sort.Strings(names)
	keep := map[string]bool{}
	var out []ArchFile
	for _, name := range names {
		if o.Only != nil && !o.Only(name) {
			keepArch(dir, name, keep)
			continue
		}
		vn := VocabName(name)
		vf := vocabs[vn]
		if vf == nil {
			var err error
			if vf, err = gguf.Open(filepath.Join(src, "models", "ggml-vocab-"+vn+".gguf")); err != nil {
				return nil, fmt.Errorf("synth: %w", err)
			}
			vocabs[vn] = vf
		}
		// the converter's types, and where the loader reads another type
		// (it accepts both), the loader's too
		var hashes []string
		for _, types := range []KeyTypes{ConverterTypes, LoaderTypes} {
			o.Types = types
			m, serr := NewArchModel(name, vf, o)
			if m == nil {
				return nil, serr
			}
			sum, err := m.contentHash(vn)
			if err != nil {
				return nil, err
			}
			if slices.Contains(hashes, sum) {
				continue // the same file
			}
			hashes = append(hashes, sum)
			path := filepath.Join(dir, name+"-"+sum+".gguf")
			keep[filepath.Base(path)] = true
			if _, err := os.Stat(path); err != nil {
				tmp := path + ".tmp"
				if err := m.WriteFile(tmp); err != nil {
					return nil, err
				}
				if err := os.Rename(tmp, path); err != nil {
					return nil, err
				}
			}
			f := ArchFile{Arch: name, Types: types, Name: name, Path: path, Err: serr}
			if types == LoaderTypes {
				f.Name += "/" + types.String()
			}
			out = append(out, f)
		}
	}
	old, _ := filepath.Glob(filepath.Join(dir, "*.gguf"))
	for _, f := range old {
		if !keep[filepath.Base(f)] {
			os.Remove(f)
		}
	}
	return out, nil
}

// keepArch keeps the files of architecture name in dir.
func keepArch(dir, name string, keep map[string]bool) {
	old, _ := filepath.Glob(filepath.Join(dir, name+"-*.gguf"))
	for _, f := range old {
		if strings.HasPrefix(filepath.Base(f), name+"-") && hashedName(filepath.Base(f)[len(name)+1:]) {
			keep[filepath.Base(f)] = true
		}
	}
}

// hashedName reports whether s is a content hash and the extension.
func hashedName(s string) bool {
	h, ok := strings.CutSuffix(s, ".gguf")
	if !ok || len(h) != 12 {
		return false
	}
	_, err := hex.DecodeString(h)
	return err == nil
}

// contentHash identifies the model's content: its metadata and tensor
// infos without the tokenizer, and the tokenizer's file.
func (m *ArchModel) contentHash(vocab string) (string, error) {
	w, err := m.writer(false)
	if err != nil {
		return "", err
	}
	h := sha256.New()
	if _, err := w.WriteMetadata(h); err != nil {
		return "", err
	}
	fmt.Fprintf(h, "vocab %s %d", vocab, m.Vocab.Size)
	return hex.EncodeToString(h.Sum(nil))[:12], nil
}

func (m *ArchModel) set(key string, v gguf.Value) {
	for i := range m.KV {
		if m.KV[i].Key == key {
			m.KV[i].Value = v
			return
		}
	}
	m.KV = append(m.KV, gguf.KV{Key: key, Value: v})
}

func (m *ArchModel) lookup(key string) (gguf.Value, bool) {
	for _, kv := range m.KV {
		if kv.Key == key {
			return kv.Value, true
		}
	}
	return gguf.Value{}, false
}

func (m *ArchModel) uintKey(key string) uint64 {
	v, ok := m.lookup(key)
	if !ok {
		return 0
	}
	u, _ := v.Uint()
	return u
}

// writer builds the model's writer; with tokenizer, the vocab file's
// tokenizer keys, else a tokenizer of type none.
func (m *ArchModel) writer(tokenizer bool) (*gguf.Writer, error) {
	w := gguf.NewWriter()
	for _, kv := range m.KV {
		v := kv.Value
		if m.Types == ConverterTypes {
			v = asConverter(kv.Key, m.Arch, v)
		}
		if err := w.Set(kv.Key, v); err != nil {
			return nil, err
		}
	}
	if tokenizer {
		for _, kv := range m.Vocab.KV {
			if strings.HasPrefix(kv.Key, "tokenizer.") {
				if err := w.Set(kv.Key, kv.Value); err != nil {
					return nil, err
				}
			}
		}
	} else if err := w.Set("tokenizer.ggml.model", gguf.String("none")); err != nil {
		return nil, err
	}
	for _, t := range m.Tensors {
		if err := w.AddTensor(t.Name, t.Type, t.Shape, zeros); err != nil {
			return nil, fmt.Errorf("synth: %s: %w", t.Name, err)
		}
	}
	return w, nil
}

func zeros(io.Writer) error { return errZeroTensor }

var errZeroTensor = errors.New("synth: architecture models are written by WriteFile (zeros as holes)")

// Model opens the model in memory, metadata only (tensor data reads fail).
func (m *ArchModel) Model(tokenizer bool) (*gguf.Model, error) {
	w, err := m.writer(tokenizer)
	if err != nil {
		return nil, err
	}
	var buf bytes.Buffer
	size, err := w.WriteMetadata(&buf)
	if err != nil {
		return nil, err
	}
	f, err := gguf.NewReader(bytes.NewReader(buf.Bytes()), size)
	if err != nil {
		return nil, err
	}
	return gguf.NewModel(f)
}

// WriteFile writes the model with its tokenizer; the tensors are zeros,
// left as holes in a sparse file.
func (m *ArchModel) WriteFile(path string) error {
	w, err := m.writer(true)
	if err != nil {
		return err
	}
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	size, err := w.WriteMetadata(f)
	if err == nil {
		err = f.Truncate(size)
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		os.Remove(path)
	}
	return err
}

type recordPlacer struct{ created map[string]bool }

func (p *recordPlacer) Place(c *arch.Creation) error {
	p.created[c.Name] = true
	return nil
}

// dropUncreated removes tensors added for an earlier set of
// hyperparameters that the programs no longer create.
func (m *ArchModel) dropUncreated(created map[string]bool) bool {
	kept := m.Tensors[:0]
	for _, t := range m.Tensors {
		if created[t.Name] {
			kept = append(kept, t)
		} else {
			m.Log = append(m.Log, "drop "+t.Name)
		}
	}
	dropped := len(kept) < len(m.Tensors)
	m.Tensors = kept
	m.index = map[string]int{}
	for i, t := range m.Tensors {
		m.index[t.Name] = i
	}
	return dropped
}

// solve adds what the programs ask for until they load the model.
func (m *ArchModel) solve() error {
	tried := map[string]bool{}
	if seed := archSeeds[m.Arch]; seed != nil {
		for _, kv := range seed(m.opts) {
			m.set(strings.Replace(kv.Key, "%s", m.Arch, 1), kv.Value)
		}
	}
	for _, kv := range m.opts.Keys {
		m.set(strings.Replace(kv.Key, "%s", m.Arch, 1), kv.Value)
	}
	for _, k := range m.opts.Drop {
		k = strings.Replace(k, "%s", m.Arch, 1)
		m.KV = slices.DeleteFunc(m.KV, func(kv gguf.KV) bool { return kv.Key == k })
	}
	for step := 0; step < maxSteps; step++ {
		gm, err := m.Model(false)
		if err != nil {
			return fmt.Errorf("synth: %s: %w", m.Arch, err)
		}
		var optional []*arch.Need
		supplied := 0
		opts := arch.Options{
			Optional: func(n *arch.Need) { optional = append(optional, n) },
			SupplyKey: func(n *arch.Need) (gguf.Value, bool) {
				if !m.addKey(n) {
					return gguf.Value{}, false
				}
				supplied++
				v, _ := m.lookup(n.Key)
				return v, true
			},
			SupplyTensor: func(n *arch.Need) (ggml.Type, bool) {
				if !m.addTensor(n) {
					return 0, false
				}
				supplied++
				return m.Tensors[len(m.Tensors)-1].Type, true
			},
		}
		r, err := arch.Load(gm, opts)
		rec := &recordPlacer{created: map[string]bool{}}
		if err == nil {
			err = r.CreateTensors(rec)
		}
		if err == nil && supplied == 0 {
			return nil
		}
		if err == nil {
			continue // check the model with what was supplied in it
		}
		if strings.Contains(err.Error(), "wrong number of tensors") && m.dropUncreated(rec.created) {
			continue
		}
		if m.fix(err) {
			continue
		}
		// a check over optional tensors (one of two must exist, say):
		// add the latest optional tensor asked for before the error
		added := false
		for i := len(optional) - 1; i >= 0 && !added; i-- {
			n := optional[i]
			if tried[n.Tensor] || !validShape(n.Shape) {
				continue
			}
			tried[n.Tensor] = true
			added = m.addTensor(n)
			if added {
				m.Log = append(m.Log, "optional "+n.Tensor+" (for "+err.Error()+")")
			}
		}
		if !added {
			return fmt.Errorf("synth: %s: %w (after %d steps: %s)", m.Arch, err, step, strings.Join(m.Log, "; "))
		}
	}
	return fmt.Errorf("synth: %s: no loadable model after %d steps", m.Arch, maxSteps)
}

func validShape(s []int64) bool {
	for _, x := range s {
		if x <= 0 {
			return false
		}
	}
	return true
}

// fix changes the model for one error; false if it does not know how.
func (m *ArchModel) fix(err error) bool {
	var t *arch.Throw
	if errors.As(err, &t) && t.Need != nil {
		n := t.Need
		switch {
		case n.Tensor != "" && !validShape(n.Shape):
			// a dimension of 0 comes from a count the model lacks
			for _, kv := range zeroDimKeys {
				key := strings.Replace(kv.Key, "%s", m.Arch, 1)
				if _, ok := m.lookup(key); !ok {
					m.set(key, kv.Value)
					m.Log = append(m.Log, fmt.Sprintf("%s=%s (for %s %v)", key, kv.Value.Format(8), n.Tensor, n.Shape))
					return true
				}
			}
			m.Log = append(m.Log, fmt.Sprintf("%s wants shape %v", n.Tensor, n.Shape))
			return false
		case n.Tensor != "":
			return m.addTensor(n)
		case n.Key != "":
			return m.addKey(n)
		}
	}
	msg := err.Error()
	if strings.Contains(msg, "integer division by zero") {
		// a count the model lacks divides a size
		for _, kv := range zeroDimKeys {
			key := strings.Replace(kv.Key, "%s", m.Arch, 1)
			if _, ok := m.lookup(key); !ok {
				m.set(key, kv.Value)
				m.Log = append(m.Log, fmt.Sprintf("%s=%s (for %s)", key, kv.Value.Format(8), msg))
				return true
			}
		}
	}
	for _, f := range messageFixes {
		if f.re.MatchString(msg) {
			key := f.key
			if !strings.Contains(key, ".") || strings.HasPrefix(key, "%s.") {
				key = strings.Replace(key, "%s", m.Arch, 1)
			}
			if m.Fixes[msg+" "+key] {
				continue // the same error again: this fix did not help
			}
			m.Fixes[msg+" "+key] = true
			v := f.value
			if p, ok := perLayerPatterns[f.key]; ok {
				v = p(int(m.uintKey(m.Arch + ".block_count")))
			}
			m.set(key, v)
			m.Log = append(m.Log, fmt.Sprintf("%s=%s (for %q)", key, f.value.Format(8), f.re.String()))
			return true
		}
	}
	return false
}

// messageFixes turn llama.cpp's own checks of the hyperparameters into
// the keys that satisfy them.
var messageFixes = []struct {
	re    *regexp.Regexp
	key   string
	value gguf.Value // see perLayer
}{
	{regexp.MustCompile(`needs to define token type count`), "tokenizer.ggml.token_type_count", gguf.Uint32(2)},
	{regexp.MustCompile(`cannot have zero experts|n_expert must be > 0|GGML_ASSERT\(n_expert && n_expert_used\)|n_expert and n_expert_used must be > 0`), "%s.expert_count", gguf.Uint32(4)},
	{regexp.MustCompile(`n_expert_used_max > 0|expert layers but no expert layers are used|GGML_ASSERT\(n_expert && n_expert_used\)|n_expert and n_expert_used must be > 0`), "%s.expert_used_count", gguf.Uint32(2)},
	{regexp.MustCompile(`only supports compression ratios 0, 4, and 128`), "%s.attention.compress_ratios", perLayer("%s.attention.compress_ratios", 0, 4, 128, 0)},
	{regexp.MustCompile(`missing Cohere2 MoE norm epsilon`), "%s.attention.layer_norm_rms_epsilon", gguf.Float32(1e-5)},
	{regexp.MustCompile(`requires MLA`), "%s.attention.key_length_mla", gguf.Uint32(48)},
	{regexp.MustCompile(`requires MLA`), "%s.attention.value_length_mla", gguf.Uint32(32)},
	{regexp.MustCompile(`n_embd_head_qk_nope >= 1`), "%s.attention.key_length_mla", gguf.Uint32(48)},
	{regexp.MustCompile(`n_embd_head_qk_nope >= 1`), "%s.attention.key_length", gguf.Uint32(48)},
	{regexp.MustCompile(`n_embd_head_qk_nope >= 1`), "%s.rope.dimension_count", gguf.Uint32(16)},
	{regexp.MustCompile(`requires embedding_length_out`), "%s.embedding_length_out", gguf.Uint32(128)},
	{regexp.MustCompile(`requires 'target_layers'`), "%s.target_layers", mustArray([]int32{0, 1, 2})},
	{regexp.MustCompile(`requires 'extract_layers'`), "%s.target_layers", mustArray([]int32{0, 1, 2})},
	{regexp.MustCompile(`kda_gate_lower_bound < 0`), "%s.kda.gate_lower_bound", gguf.Float32(-5)},
}

// perLayer is a fix of key whose value has one element per layer,
// repeating the pattern (registered in perLayerPatterns).
func perLayer(key string, pattern ...uint32) gguf.Value {
	perLayerPatterns[key] = func(n int) gguf.Value {
		xs := make([]uint32, n)
		for i := range xs {
			xs[i] = pattern[i%len(pattern)]
		}
		return mustArray(xs)
	}
	return mustArray(pattern)
}

var perLayerPatterns = map[string]func(int) gguf.Value{}

// zeroDimKeys are the counts tried, in order, when a tensor would have a
// dimension of 0.
var zeroDimKeys = []gguf.KV{
	{Key: "%s.expert_count", Value: gguf.Uint32(4)},
	{Key: "%s.expert_used_count", Value: gguf.Uint32(2)},
	{Key: "tokenizer.ggml.token_type_count", Value: gguf.Uint32(2)},
	{Key: "%s.expert_shared_count", Value: gguf.Uint32(1)},
	{Key: "%s.expert_feed_forward_length", Value: gguf.Uint32(32)},
	{Key: "%s.expert_shared_feed_forward_length", Value: gguf.Uint32(32)},
}

// archSeeds are keys an architecture needs before its programs can say
// what else is missing: counts that are optional to read but size
// required tensors, and hyperparameters whose relations are checked, by
// the loader or by the graph (where the converter writes them for real
// models). o has its defaults (Layers, Embd) set.
var archSeeds = map[string]func(o ArchOptions) []gguf.KV{
	// n_layer = layers_per_stack * h_cycles * (l_cycles + 1)
	"hrm_text": func(o ArchOptions) []gguf.KV {
		return []gguf.KV{{Key: "%s.hrm.layers_per_stack", Value: gguf.Uint32(uint32(o.Layers / 4))},
			{Key: "%s.hrm.h_cycles", Value: gguf.Uint32(2)}, {Key: "%s.hrm.l_cycles", Value: gguf.Uint32(1)}}
	},
	"rwkv7": func(ArchOptions) []gguf.KV {
		return []gguf.KV{{Key: "%s.attention.gate_lora_rank", Value: gguf.Uint32(16)}}
	},
	// RWKV has no attention heads: the converter writes head_count 0 and
	// no head_count_kv (conversion/rwkv.py), which then defaults to
	// head_count (src/llama-model.cpp load_hparams; an explicit 0 reads
	// the same). The graph takes its heads from n_embd / wkv.head_size,
	// and with a head_count_kv other than 0 and that count reshapes the
	// key and value projections (n_embd wide for RWKV6) into
	// head_count_kv heads (src/models/rwkv6-base.cpp build_rwkv6_time_mix)
	"rwkv6": func(ArchOptions) []gguf.KV {
		return []gguf.KV{{Key: "%s.attention.head_count", Value: gguf.Uint32(0)},
			{Key: "%s.attention.head_count_kv", Value: gguf.Uint32(0)}}
	},
	// Qwen2-based RWKV6 (QRWKV6) shifts one token, not two: the converter
	// writes token_shift_count 1, and the graph asserts n_embd ==
	// n_embd_r() = token_shift_count * n_embd (src/models/rwkv6qwen2.cpp,
	// src/llama-hparams.cpp n_embd_r); its keys and values are grouped
	// like Qwen2's, head_count_kv of them, dividing n_embd / wkv.head_size
	"rwkv6qwen2": func(ArchOptions) []gguf.KV {
		return []gguf.KV{{Key: "%s.attention.head_count", Value: gguf.Uint32(0)},
			{Key: "%s.attention.head_count_kv", Value: gguf.Uint32(2)},
			{Key: "%s.token_shift_count", Value: gguf.Uint32(1)}}
	},
	// as rwkv6qwen2: token_shift_count 1 (conversion/rwkv.py ARwkv7Model,
	// asserted in src/models/arwkv7.cpp), no attention heads
	"arwkv7": func(ArchOptions) []gguf.KV {
		return []gguf.KV{{Key: "%s.attention.gate_lora_rank", Value: gguf.Uint32(16)},
			{Key: "%s.attention.head_count", Value: gguf.Uint32(0)},
			{Key: "%s.attention.head_count_kv", Value: gguf.Uint32(0)},
			{Key: "%s.token_shift_count", Value: gguf.Uint32(1)}}
	},
	// T5 has no grouped-query attention: the converter writes num_heads
	// and key/value_length d_kv, no head_count_kv (conversion/t5.py), and
	// the graph reshapes q, k and v (n_embd_k_gqa wide) to n_head heads
	// (src/models/t5.cpp, t5encoder.cpp); d_kv * num_heads = d_model
	"t5":        t5Seed,
	"t5encoder": t5Seed,
	// the only scoring its loader takes: sqrt-softplus
	// and the hyper-connections of four streams its ops support (hc_mult 4)
	// and DeepSeek-V4's attention scaled down: one KV head (MQA) of a head
	// larger than n_embd / n_head, output groups that divide the heads,
	// an indexer head of 64 (its keys' Hadamard rotation), one hash-routed
	// layer, four hyper-connection streams
	"deepseek4": func(ArchOptions) []gguf.KV {
		return []gguf.KV{{Key: "%s.expert_gating_func", Value: gguf.Uint32(4)}, {Key: "%s.hyper_connection.count", Value: gguf.Uint32(4)},
			{Key: "%s.attention.head_count_kv", Value: gguf.Uint32(1)}, {Key: "%s.attention.key_length", Value: gguf.Uint32(64)},
			{Key: "%s.attention.value_length", Value: gguf.Uint32(64)}, {Key: "%s.rope.dimension_count", Value: gguf.Uint32(16)},
			{Key: "%s.attention.output_group_count", Value: gguf.Uint32(2)}, {Key: "%s.attention.indexer.key_length", Value: gguf.Uint32(64)},
			{Key: "%s.hash_layer_count", Value: gguf.Uint32(1)}, {Key: "%s.hyper_connection.sinkhorn_iterations", Value: gguf.Uint32(4)}}
	},
	// MLA as the converter writes it (DeepSeek-V3: kv_lora_rank 512,
	// qk_rope 64, qk_nope 128, v_head 128): one KV head, whose key is the
	// compressed KV plus the rope part and whose value the compressed KV
	"deepseek2": mla,
	"mistral4":  mla,
	// DeepSeek-V3.2's lightning indexer (index_head_dim 128): its cache's
	// keys are rotated by a Hadamard matrix of 64 or more, which their
	// size must be a multiple of, and hold the rope part
	"deepseek32": dsa,
	"glm-dsa":    dsa,
	// and the MLA of dots3note's sliding-window layers, whose rope part is
	// the full layers' (conversion/dots3.py: kv_lora_rank_swa, key_length_swa
	// = swa_kv_lora_rank + qk_rope, value_length_swa, key_length_mla_swa =
	// swa_qk_nope + qk_rope, value_length_mla_swa); the defaults' 48 is
	// under n_rot at embedding length 256 (attn_k_b's first dimension,
	// key_length_mla_swa - n_rot, goes negative)
	"dots3note": func(o ArchOptions) []gguf.KV {
		e := uint32(o.Embd)
		return append(dsa(o),
			gguf.KV{Key: "%s.attention.kv_lora_rank_swa", Value: gguf.Uint32(e / 4)},
			gguf.KV{Key: "%s.attention.key_length_swa", Value: gguf.Uint32(e / 2)},
			gguf.KV{Key: "%s.attention.value_length_swa", Value: gguf.Uint32(e / 4)},
			gguf.KV{Key: "%s.attention.key_length_mla_swa", Value: gguf.Uint32(3 * e / 4)},
			gguf.KV{Key: "%s.attention.value_length_mla_swa", Value: gguf.Uint32(e / 2)},
			// three sliding-window layers to a full one, the indexer on the
			// full ones, as booleans per layer (conversion/dots3.py)
			gguf.KV{Key: "%s.attention.sliding_window_pattern", Value: mustArray(everyFourth(o.Layers, false))},
			gguf.KV{Key: "%s.attention.indexer.types", Value: mustArray(everyFourth(o.Layers, true))})
	},
	// MiniMax-M3's sparse attention: one indexer head per KV head group
	"minimax-m3": func(ArchOptions) []gguf.KV {
		return []gguf.KV{{Key: "%s.attention.indexer.head_count", Value: gguf.Uint32(2)}}
	},
	// the converter's key_length is qk_nope + qk_rope, with the head size
	// of n_embd / n_head for the values (MiniCPM3-4B: 64 + 32, 64)
	// and as many KV heads as heads
	"minicpm3": func(o ArchOptions) []gguf.KV {
		e := uint32(o.Embd)
		return []gguf.KV{{Key: "%s.attention.head_count_kv", Value: gguf.Uint32(4)},
			{Key: "%s.attention.key_length", Value: gguf.Uint32(3 * e / 8)}, {Key: "%s.rope.dimension_count", Value: gguf.Uint32(e / 8)}}
	},
	// PLM-1.8B: qk_nope 128 + qk_rope 64, v_head 128, as many KV heads as heads
	"plm": func(o ArchOptions) []gguf.KV {
		e := uint32(o.Embd)
		return []gguf.KV{{Key: "%s.attention.head_count_kv", Value: gguf.Uint32(4)},
			{Key: "%s.attention.key_length", Value: gguf.Uint32(3 * e / 8)}, {Key: "%s.attention.value_length", Value: gguf.Uint32(e / 4)},
			{Key: "%s.rope.dimension_count", Value: gguf.Uint32(e / 8)}}
	},
	// DeepSeek-OCR's decoder has no MLA and as many KV heads as heads
	"deepseek2-ocr": func(ArchOptions) []gguf.KV {
		return []gguf.KV{{Key: "%s.attention.head_count_kv", Value: gguf.Uint32(4)}}
	},
	"qwen3next": func(o ArchOptions) []gguf.KV { return gatedDeltaNetSeeds(o, false) },
	"qwen35":    func(o ArchOptions) []gguf.KV { return gatedDeltaNetSeeds(o, true) },
	"qwen35moe": func(o ArchOptions) []gguf.KV { return gatedDeltaNetSeeds(o, true) },
	"qwen4exp":  qwen4expSeeds,
	// kimi-linear's converter writes no value_length (the MLA cache holds
	// no V); kimi-k3's writes kv_lora_rank (its loader sets it anyway);
	// bailingmoe3's none
	"kimi-linear": func(o ArchOptions) []gguf.KV { return mlaKDASeeds(o, false) },
	"kimi-k3":     func(o ArchOptions) []gguf.KV { return mlaKDASeeds(o, true) },
	"bailingmoe3": func(o ArchOptions) []gguf.KV { return mlaKDASeeds(o, false) },

	// Mamba: d_inner = 2*d_model (the only expansion factor the loader
	// takes), dt_rank = ceil(d_model/16) (conversion/mamba.py)
	"mamba": mambaSeed,
	// Jamba: d_inner = mamba_expand*d_model, expand 2 (asserted by the
	// loader), dt_rank = ceil(d_model/16) (conversion/jamba.py)
	"jamba": func(o ArchOptions) []gguf.KV {
		return append(mambaSeed(o), gguf.KV{Key: "%s.attention.head_count_kv", Value: hybridKV(o, 2)})
	},
	// LFM2: short convolution layers but for some attention ones (the
	// converter writes head_count_kv per layer, 0 for a convolution)
	"lfm2": func(o ArchOptions) []gguf.KV {
		return []gguf.KV{{Key: "%s.attention.head_count_kv", Value: hybridKV(o, 2)}}
	},
	"lfm2moe": func(o ArchOptions) []gguf.KV {
		return []gguf.KV{{Key: "%s.attention.head_count_kv", Value: hybridKV(o, 2)}}
	},
	// Nemotron-H: Mamba-2, attention and MLP layers, told apart by
	// head_count_kv and feed_forward_length per layer (both 0: Mamba-2;
	// conversion of NemotronHForCausalLM's hybrid_override_pattern)
	"nemotron_h":     nemotronHSeed,
	"nemotron_h_moe": nemotronHSeed,
	// Granite 4.0 hybrid: d_inner = mamba_expand*hidden_size, expand 2
	// (asserted by the loader); time_step_rank is the Mamba2 head count
	// (conversion/granite.py)
	"granitehybrid": func(o ArchOptions) []gguf.KV {
		return []gguf.KV{{Key: "%s.ssm.inner_size", Value: gguf.Uint32(uint32(2 * o.Embd))},
			{Key: "%s.attention.head_count_kv", Value: hybridKV(o, 2)}}
	},
	// OLMoE and dots.llm1 have as many KV heads as heads: their loaders
	// size attn_k_norm {n_embd} (olmoe) and attn_k/attn_v
	// {n_embd_head_k*n_head} (dots1), and the graph reshapes K and V to
	// n_head_kv heads. dots.llm1 routes as DeepSeek-V3 does (sigmoid,
	// with exp_probs_b): the converter writes it from scoring_func, and
	// build_moe_ffn aborts without one
	"olmoe": func(ArchOptions) []gguf.KV {
		return []gguf.KV{{Key: "%s.attention.head_count_kv", Value: gguf.Uint32(4)}}
	},
	"dots1": func(ArchOptions) []gguf.KV {
		return []gguf.KV{{Key: "%s.attention.head_count_kv", Value: gguf.Uint32(4)},
			{Key: "%s.expert_gating_func", Value: gguf.Uint32(2)}}
	},
	// the converter always writes a router scoring that build_moe_ffn
	// knows (it aborts on none): sigmoid for MiniMax-M2 (scoring_func),
	// softmax or sigmoid for SmallThinker (moe_primary_router_apply_softmax)
	"minimax-m2":   func(ArchOptions) []gguf.KV { return []gguf.KV{{Key: "%s.expert_gating_func", Value: gguf.Uint32(2)}} },
	"smallthinker": func(ArchOptions) []gguf.KV { return []gguf.KV{{Key: "%s.expert_gating_func", Value: gguf.Uint32(1)}} },
	// AFMoE's graph always takes the interleaved SWA inputs: real models
	// have a sliding window (3 sliding layers, 1 full)
	"afmoe": func(ArchOptions) []gguf.KV {
		return []gguf.KV{{Key: "%s.attention.sliding_window", Value: gguf.Uint32(32)}}
	},
	// MLA (DeepseekV2Model's subclasses), with HY_V4's sigmoid routing
	// (conversion/hy_v4.py) and hyper-connections of DeepSeek-V4's layout
	// (src/models/hy-v4.cpp): 4 streams, not the 16 of a default count
	"hy_v4": func(o ArchOptions) []gguf.KV {
		return append(mla(o), gguf.KV{Key: "%s.expert_gating_func", Value: gguf.Uint32(2)},
			gguf.KV{Key: "%s.hyper_connection.count", Value: gguf.Uint32(4)})
	},
}

// hybridKV is head_count_kv of a hybrid of recurrent and attention layers:
// 0 for a recurrent layer, n for an attention layer, one attention layer in
// four (Jamba: one in 8, conversion/jamba.py; Granite 4.0-H: layer_types)
func hybridKV(o ArchOptions, n uint32) gguf.Value {
	kv := make([]uint32, o.Layers)
	for i := range kv {
		if i%4 == 2 {
			kv[i] = n
		}
	}
	return mustArray(kv)
}

// nemotronHSeed lays Nemotron-H's layers out as Mamba-2, MLP, attention,
// MLP, again and again.
func nemotronHSeed(o ArchOptions) []gguf.KV {
	ff := make([]uint32, o.Layers)
	for i := range ff {
		if i%2 == 1 {
			ff[i] = uint32(2 * o.Embd)
		}
	}
	return []gguf.KV{{Key: "%s.attention.head_count_kv", Value: hybridKV(o, 2)},
		{Key: "%s.feed_forward_length", Value: mustArray(ff)}}
}

// mambaSeed is Mamba's (v1) SSM geometry for the embedding length.
func mambaSeed(o ArchOptions) []gguf.KV {
	return []gguf.KV{
		{Key: "%s.ssm.inner_size", Value: gguf.Uint32(uint32(2 * o.Embd))},
		{Key: "%s.ssm.time_step_rank", Value: gguf.Uint32(uint32((o.Embd + 15) / 16))},
	}
}

func mla(o ArchOptions) []gguf.KV {
	e := uint32(o.Embd)
	return []gguf.KV{{Key: "%s.attention.head_count_kv", Value: gguf.Uint32(1)}, // MQA
		{Key: "%s.attention.kv_lora_rank", Value: gguf.Uint32(e / 4)}, {Key: "%s.rope.dimension_count", Value: gguf.Uint32(e / 4)},
		{Key: "%s.attention.key_length", Value: gguf.Uint32(e / 2)}, {Key: "%s.attention.value_length", Value: gguf.Uint32(e / 4)},
		{Key: "%s.attention.key_length_mla", Value: gguf.Uint32(3 * e / 4)}, {Key: "%s.attention.value_length_mla", Value: gguf.Uint32(e / 2)}}
}

// archOptionals are tensors, by name with the layer number taken out
// (blk.N.), that the loader takes as optional and the converter writes
// with the hyperparameters of archSeeds, where their absence aborts no
// load and no null-weight check but changes the graph, which then
// disagrees with a tensor the loader did require.
var archOptionals = map[string][]string{
	// a gated ARWKV (wkv_has_gate: gate_lora_rank > 0, conversion/rwkv.py)
	// has the gate's LoRA and six fused lerps (r, w, k, v, a, g); the
	// loader tries the six first and takes the gate as optional
	// (src/models/arwkv7.cpp), and without it the graph repeats five
	// lerps (src/models/rwkv7-base.cpp has_gating)
	"arwkv7": {"blk.N.time_mix_g1.weight", "blk.N.time_mix_g2.weight"},
	// T5's relative attention biases (the converter writes layer 0's):
	// without them its graphs take a null bias (src/models/t5.cpp)
	"t5": {"enc.blk.N.attn_rel_b.weight", "dec.blk.N.attn_rel_b.weight"},
}

func t5Seed(o ArchOptions) []gguf.KV {
	const heads = 4
	return []gguf.KV{{Key: "%s.attention.head_count", Value: gguf.Uint32(heads)},
		{Key: "%s.attention.head_count_kv", Value: gguf.Uint32(heads)},
		{Key: "%s.attention.key_length", Value: gguf.Uint32(uint32(o.Embd / heads))},
		{Key: "%s.attention.value_length", Value: gguf.Uint32(uint32(o.Embd / heads))}}
}

// everyFourth is a per-layer flag, full on every fourth layer and the
// last: what full says there, the opposite elsewhere.
func everyFourth(layers int, full bool) []bool {
	out := make([]bool, layers)
	for i := range out {
		out[i] = ((i+1)%4 == 0 || i == layers-1) == full
	}
	return out
}

func dsa(o ArchOptions) []gguf.KV {
	return append(mla(o), gguf.KV{Key: "%s.attention.indexer.key_length", Value: gguf.Uint32(64)})
}

// gatedDeltaNetSeeds are the keys of Qwen3-Next and Qwen3.5's gated delta
// net layers as their converter (conversion/qwen.py Qwen3NextModel)
// writes them from linear_key_head_dim, linear_value_head_dim,
// linear_num_key_heads, linear_num_value_heads: ssm.state_size the key
// head size, ssm.group_count the key heads, ssm.time_step_rank the value
// heads, ssm.inner_size value head size * value heads. The loader sizes
// the value heads with state_size, the graph with inner_size /
// time_step_rank (src/models/qwen3next.cpp, qwen35.cpp; the conv state's
// channels are inner_size + 2 * group_count * state_size, and the
// recurrent state state_size * inner_size, llama-hparams.cpp): the key
// and value heads have one size, as in the released models (128), and
// the value heads are a multiple of the key heads (32 of 16 in
// Qwen3-Next-80B-A3B). Scaled: 4 value heads and 2 key heads of
// embedding/4. The attention layers' rope covers a quarter of their head
// (partial_rotary_factor 0.25; the head is embedding/head_count, 4), and
// Qwen3.5's mrope sections half of the rope, split as the converter's
// default [11, 11, 10, 0].
func gatedDeltaNetSeeds(o ArchOptions, mrope bool) []gguf.KV {
	const kHeads, vHeads = 2, 4
	ssmHead := uint32(o.Embd / 4)
	rope := uint32(o.Embd/4) / 4
	kvs := []gguf.KV{
		{Key: "%s.ssm.conv_kernel", Value: gguf.Uint32(4)},
		{Key: "%s.ssm.state_size", Value: gguf.Uint32(ssmHead)},
		{Key: "%s.ssm.group_count", Value: gguf.Uint32(kHeads)},
		{Key: "%s.ssm.time_step_rank", Value: gguf.Uint32(vHeads)},
		{Key: "%s.ssm.inner_size", Value: gguf.Uint32(ssmHead * vHeads)},
		{Key: "%s.rope.dimension_count", Value: gguf.Uint32(rope)},
	}
	if mrope {
		half := int32(rope / 2)
		a := (half + 2) / 3
		kvs = append(kvs, gguf.KV{Key: "%s.rope.dimension_sections", Value: mustArray([]int32{a, a, half - 2*a, 0})})
	}
	return kvs
}

// qwen4expSeeds are Qwen4-Exp's keys as conversion/qwen4exp.py writes
// them beside the gated delta net's: the indexer's compress ratio on the
// full attention layers (0 on the linear ones), and the n-gram hash
// embeddings (PLE) of one linear layer, the first: 3-grams of two heads
// each, a head as wide as n_embd / 4 (the heads together make n_embd,
// what ple_key multiplies), the hash constants as u64 arrays.
func qwen4expSeeds(o ArchOptions) []gguf.KV {
	ratios := make([]int32, o.Layers)
	for i := range ratios {
		if (i+1)%4 == 0 {
			ratios[i] = 4
		}
	}
	const ngram, perGram = 3, 2
	heads := (ngram - 1) * perGram
	offsets, sizes := make([]uint64, heads), make([]uint64, heads)
	next := uint64(0)
	for h := range heads {
		sizes[h] = []uint64{97, 89, 83, 79}[h%4]
		offsets[h] = next
		next += sizes[h]
	}
	return append(gatedDeltaNetSeeds(o, true),
		gguf.KV{Key: "%s.attention.compress_ratios", Value: mustArray(ratios)},
		gguf.KV{Key: "%s.ple.layers", Value: mustArray([]int32{0})},
		gguf.KV{Key: "%s.ple.ngram_size", Value: gguf.Uint32(ngram)},
		gguf.KV{Key: "%s.ple.heads_per_ngram", Value: gguf.Uint32(perGram)},
		gguf.KV{Key: "%s.ple.conv_kernel", Value: gguf.Uint32(4)},
		gguf.KV{Key: "%s.ple.eos_token_id", Value: gguf.Uint32(2)},
		gguf.KV{Key: "%s.embedding_length_per_layer_input", Value: gguf.Uint32(uint32(o.Embd) / uint32(heads))},
		gguf.KV{Key: "%s.ple.layer_multipliers", Value: mustArray([]uint64{23847823498723, 7239847239, 982374987})},
		gguf.KV{Key: "%s.ple.head_offsets", Value: mustArray(offsets)},
		gguf.KV{Key: "%s.ple.head_vocab_sizes", Value: mustArray(sizes)})
}

// mlaKDASeeds are the keys of the hybrid KDA (linear) + MLA (full)
// attention of Kimi-Linear, Kimi-K3 and Bailing-MoE-V3, as their
// converters (conversion/kimi_linear.py, kimi_k3.py, bailingmoe3.py)
// write them: MLA served as MQA, so head_count_kv is per layer, 1 on a
// full attention layer and 0 on a KDA one (the loaders mark those
// recurrent), key_length kv_lora_rank + qk_rope_head_dim (the cached
// latent and rope part: the graph's K), key_length_mla qk_nope_head_dim +
// qk_rope_head_dim, value_length_mla v_head_dim, rope.dimension_count
// qk_rope_head_dim, which must be under key_length_mla (the graph views
// q_nope of key_length_mla - rope). Kimi-Linear-48B's proportions
// (kda and nope heads 128, rope 64, v 128, kv_lora_rank 512) scaled to a
// head of embedding/4; a full attention layer every fourth and the last.
func mlaKDASeeds(o ArchOptions, valueLength bool) []gguf.KV {
	h := uint32(o.Embd / 4)
	rope, kvLora := h/2, 4*h
	kv := make([]uint32, o.Layers)
	for i := range kv {
		if (i+1)%4 == 0 || i == o.Layers-1 {
			kv[i] = 1
		}
	}
	kvs := []gguf.KV{
		{Key: "%s.attention.head_count_kv", Value: mustArray(kv)},
		{Key: "%s.kda.head_dim", Value: gguf.Uint32(h)},
		{Key: "%s.ssm.conv_kernel", Value: gguf.Uint32(4)},
		{Key: "%s.attention.kv_lora_rank", Value: gguf.Uint32(kvLora)},
		{Key: "%s.rope.dimension_count", Value: gguf.Uint32(rope)},
		{Key: "%s.attention.key_length", Value: gguf.Uint32(kvLora + rope)},
		{Key: "%s.attention.key_length_mla", Value: gguf.Uint32(h + rope)},
		{Key: "%s.attention.value_length_mla", Value: gguf.Uint32(h)},
	}
	if valueLength {
		kvs = append(kvs, gguf.KV{Key: "%s.attention.value_length", Value: gguf.Uint32(kvLora)})
	}
	return kvs
}

func (m *ArchModel) addTensor(n *arch.Need) bool {
	shape := n.Shape
	if len(shape) == 0 {
		shape = []int64{1}
	}
	for _, x := range shape {
		if x <= 0 {
			m.Log = append(m.Log, fmt.Sprintf("%s wants shape %v", n.Tensor, shape))
			return false
		}
	}
	typ := tensorType(n.Op, shape)
	if strings.HasSuffix(n.Tensor, ".ffn_gate_tid2eid.weight") {
		typ = ggml.TypeI32 // a token's experts, as the converter writes them: indices
	}
	t := ArchTensor{Name: n.Tensor, Type: typ, Shape: shape}
	if m.index == nil {
		m.index = map[string]int{}
	}
	if i, ok := m.index[n.Tensor]; ok {
		if fmt.Sprint(m.Tensors[i].Shape) == fmt.Sprint(shape) {
			return false
		}
		m.Tensors[i] = t
		m.Log = append(m.Log, fmt.Sprintf("reshape %s %v", n.Tensor, shape))
		return true
	}
	m.index[n.Tensor] = len(m.Tensors)
	m.Tensors = append(m.Tensors, t)
	return true
}

// tensorType picks a weight type the probe op accepts on every backend:
// quantized matrices (so that the CPU's repacking buffer type takes part),
// f32 elsewhere.
func tensorType(op string, shape []int64) ggml.Type {
	if len(shape) < 2 {
		return ggml.TypeF32
	}
	switch op {
	case "MUL_MAT", "MUL_MAT_ID":
		if shape[0]%32 == 0 {
			return ggml.TypeQ4_0
		}
		return ggml.TypeF16
	case "GET_ROWS":
		if shape[0]%32 == 0 {
			return ggml.TypeQ8_0
		}
		return ggml.TypeF16
	}
	return ggml.TypeF32
}

// keyDefaults are values for keys by the end of their name: small counts
// and sizes that keep shapes consistent with embedding_length 64.
var keyDefaults = []struct {
	suffix string
	v      uint32
}{
	{"expert_count", 4}, {"expert_used_count", 2}, {"expert_shared_count", 1}, {"expert_group_count", 0},
	{"expert_group_used_count", 0}, {"leading_dense_block_count", 1}, {"nextn_predict_layers", 1},
	{"head_count", 4}, {"head_count_kv", 2}, {"key_length", 16}, {"value_length", 16},
	{"key_length_mla", 48}, {"value_length_mla", 32}, {"key_length_mla_swa", 48}, {"value_length_mla_swa", 32}, {"experts_per_group", 2}, {"adapters.count", 4}, {"q_lora_rank", 32}, {"kv_lora_rank", 16},
	{"rope.dimension_count", 16}, {"expert_feed_forward_length", 32}, {"expert_shared_feed_forward_length", 32},
	{"ssm.conv_kernel", 4}, {"ssm.inner_size", 128}, {"ssm.state_size", 16}, {"ssm.time_step_rank", 4},
	{"ssm.group_count", 1}, {"sliding_window", 32}, {"sliding_window_pattern", 2},
	{"decoder_block_count", 4}, {"relative_buckets_count", 32},
	{"wkv.head_size", 16}, {"time_mix_extra_dim", 16}, {"time_decay_extra_dim", 16},
	{"rescale_every_n_layers", 6}, {"token_shift_count", 2}, {"expert_gating_func", 2},
	{"decay_lora_rank", 16}, {"iclr_lora_rank", 16}, {"value_residual_mix_lora_rank", 16}, {"gate_lora_rank", 16},
	{"shortconv.l_cache", 3}, {"full_attention_interval", 2}, {"interleave_moe_layer_step", 2},
	{"context_length", 256}, {"vocab_size", 32000}, {"block_count", 4},
}

func (m *ArchModel) addKey(n *arch.Need) bool {
	key := n.Key
	if _, ok := m.lookup(key); ok && m.Fixes[key] {
		return false // a value it already chose was refused
	}
	m.Fixes[key] = true
	var v gguf.Value
	var err error
	u := uint32(16)
	for _, d := range keyDefaults {
		if strings.HasSuffix(key, "."+d.suffix) {
			u = d.v
			break
		}
	}
	switch n.Type {
	case gguf.TypeUint32:
		v = gguf.Uint32(u)
	case gguf.TypeInt32:
		v = gguf.Int32(int32(u))
	case gguf.TypeFloat32:
		f := float32(1.0)
		if strings.Contains(key, "epsilon") || strings.HasSuffix(key, "eps") {
			f = 1e-5
		}
		v = gguf.Float32(f)
	case gguf.TypeBool:
		v = gguf.Bool(false)
	case gguf.TypeString:
		v = gguf.String(stringDefault(key))
	case gguf.TypeUint64:
		v = gguf.Uint64(uint64(u))
	default:
		m.Log = append(m.Log, fmt.Sprintf("%s wants type %s", key, n.Type))
		return false
	}
	if n.Array {
		count := n.Len
		switch {
		case count > 0:
		case strings.HasPrefix(key, m.Arch+".adapters."):
			count = int(m.uintKey(m.Arch + ".adapters.count")) // one per adapter
		default:
			count = int(m.uintKey(m.Arch + ".block_count")) // one per layer
		}
		switch n.Type {
		case gguf.TypeUint32:
			elems := make([]uint32, count)
			for i := range elems {
				elems[i] = u
			}
			v, err = gguf.Array(elems)
		case gguf.TypeInt32:
			elems := make([]int32, count)
			for i := range elems {
				elems[i] = int32(u)
			}
			v, err = gguf.Array(elems)
		case gguf.TypeFloat32:
			fs := make([]float32, count)
			for i := range fs {
				fs[i] = 1
			}
			v, err = gguf.Array(fs)
		default:
			m.Log = append(m.Log, fmt.Sprintf("%s wants an array of %s", key, n.Type))
			return false
		}
		if err != nil {
			return false
		}
	}
	m.set(key, v)
	m.Log = append(m.Log, key+"="+v.Format(8))
	return true
}

func stringDefault(key string) string {
	switch {
	case strings.HasSuffix(key, "rope.scaling.type"):
		return "linear"
	case strings.HasSuffix(key, "pooling_type"):
		return "mean"
	}
	return ""
}

// ArchSummary lists a model's keys and tensors for messages.
func (m *ArchModel) ArchSummary() string {
	var b strings.Builder
	for _, kv := range m.KV {
		b.WriteString(kv.Key + "=" + kv.Value.Format(8) + " ")
	}
	b.WriteString(strconv.Itoa(len(m.Tensors)) + " tensors")
	return b.String()
}

func mustArray(elems any) gguf.Value {
	v, err := gguf.Array(elems)
	if err != nil {
		panic(err)
	}
	return v
}

// Vocab is a vocab file in memory with n tokens, for models that llama.cpp
// does not load (benchmarks of the planner).
func Vocab(n int) (*gguf.File, error) {
	w := gguf.NewWriter()
	toks := make([]string, n)
	for i := range toks {
		toks[i] = "t" + strconv.Itoa(i)
	}
	v, err := gguf.Array(toks)
	if err != nil {
		return nil, err
	}
	if err := w.Set("tokenizer.ggml.model", gguf.String("llama")); err != nil {
		return nil, err
	}
	if err := w.Set("tokenizer.ggml.tokens", v); err != nil {
		return nil, err
	}
	var buf bytes.Buffer
	size, err := w.WriteMetadata(&buf)
	if err != nil {
		return nil, err
	}
	return gguf.NewReader(bytes.NewReader(buf.Bytes()), size)
}
