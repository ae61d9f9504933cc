package gguf

import (
	"cmp"
	"errors"
	"fmt"
	"iter"
	"math"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"

	"github.com/ggload/ggload/ggml/gtype"
)

// Split keys (written by gguf-split and by Writer.WriteSplits).
const (
	KeySplitNo           = "split.no"
	KeySplitCount        = "split.count"
	KeySplitTensorsCount = "split.tensors.count"
	KeyArchitecture      = "general.architecture"
	KeyFileType          = "general.file_type"
)

// Weight is one tensor of a model in the merged index.
type Weight struct {
	Name   string
	Type   gtype.Type
	Shape  gtype.Shape
	NDims  int
	File   int   // index into Model.Files
	Offset int64 // absolute offset of the data in that file
	Size   int64 // bytes
}

// Layer is the layer number in a "blk.N." name as llama.cpp reads it, or -1.
func (w *Weight) Layer() int { return layerOf(w.Name) }

// Model is a model opened from one file or merged from its splits: the
// metadata of the first split and one index of every weight. A Model is
// not changed after it is opened: its methods, and reads of its files'
// data, are safe for concurrent use until Close.
type Model struct {
	Files   []*File  // split files in order; Files[0] holds the metadata
	Paths   []string // their paths
	Weights []Weight // ordered by layer number, then name
	byName  map[string]int

	NElements uint64 // sum of the weights' elements
	NBytes    uint64 // sum of the weights' sizes
}

// OpenModel opens a model from its file, or from the first of its splits:
// the others are found beside it by llama.cpp's naming
// (<prefix>-00001-of-00003.gguf).
func OpenModel(path string) (*Model, error) { return openModel([]Source{PathSource(path)}, true) }

// OpenSplits opens a model from explicit paths, first split first.
func OpenSplits(paths ...string) (*Model, error) {
	if len(paths) == 0 {
		return nil, fmt.Errorf("gguf: no paths")
	}
	srcs := make([]Source, len(paths))
	for i, p := range paths {
		srcs[i] = PathSource(p)
	}
	return openModel(srcs, false)
}

// OpenModelSources opens a model from the sources of its files, first
// split first (one source for a model that is not split).
func OpenModelSources(srcs ...Source) (*Model, error) {
	if len(srcs) == 0 {
		return nil, fmt.Errorf("gguf: no sources")
	}
	return openModel(srcs, false)
}

// NewModel indexes the weights of one parsed file that is not a split
// (from Open, or from NewReader over any io.ReaderAt).
func NewModel(f *File) (*Model, error) {
	n, err := splitCount(f)
	if err != nil {
		return nil, err
	}
	if n > 1 {
		return nil, fmt.Errorf("%w: the file is split %d ways; open it with OpenModel or OpenSplits", ErrSplit, n)
	}
	m := &Model{Files: []*File{f}, Paths: []string{""}}
	if err := m.index(); err != nil {
		return nil, err
	}
	return m, nil
}

var splitName = regexp.MustCompile(`^(.*)-(\d{5})-of-(\d{5})\.gguf$`)

// SplitPath is llama_split_path: prefix-%05d-of-%05d.gguf for split no
// (counted from 0) of count.
func SplitPath(prefix string, no, count int) string {
	return fmt.Sprintf("%s-%05d-of-%05d.gguf", prefix, no+1, count)
}

// openModel opens the files of srcs; with discover, a single path names
// the first split and the others are found beside it.
func openModel(srcs []Source, discover bool) (*Model, error) {
	m := &Model{}
	ok := false
	defer func() {
		if !ok {
			m.Close()
		}
	}()
	f0, err := OpenSource(srcs[0])
	if err != nil {
		return nil, err
	}
	first := f0.Path
	m.Files, m.Paths = []*File{f0}, []string{first}
	n, err := splitCount(f0)
	if err != nil {
		return nil, err
	}
	if n <= 1 && len(srcs) > 1 {
		var rest []string
		for _, s := range srcs[1:] {
			rest = append(rest, s.name())
		}
		return nil, fmt.Errorf("%w: %s is not split, but %d files were given (%s)", ErrSplit, first, len(srcs), strings.Join(rest, ", "))
	}
	if n > 1 {
		no, err := f0.u16Key(KeySplitNo)
		if err != nil {
			return nil, err
		}
		if no != 0 {
			return nil, &FormatError{Path: first, Msg: fmt.Sprintf("this is split %d of %d; load the first split", no+1, n), Err: ErrNotFirstSplit, Off: f0.KV[f0.keys[KeySplitNo]].Off}
		}
		if discover {
			src := srcs[0]
			if src.Path == "" || src.Offset != 0 {
				return nil, fmt.Errorf("%w: %s declares %d splits; give the source of each", ErrSplit, first, n)
			}
			sm := splitName.FindStringSubmatch(filepath.Base(src.Path))
			if sm == nil {
				return nil, fmt.Errorf("%w: %s declares %d splits but its name is not <prefix>-00001-of-%05d.gguf; pass the split paths explicitly", ErrSplit, first, n, n)
			}
			prefix := filepath.Join(filepath.Dir(src.Path), sm[1])
			srcs = []Source{src}
			for i := 1; i < int(n); i++ {
				srcs = append(srcs, PathSource(SplitPath(prefix, i, int(n))))
			}
		}
		if len(srcs) != int(n) {
			return nil, fmt.Errorf("%w: %d split paths given, %s declares %d", ErrSplit, len(srcs), first, n)
		}
		for i := 1; i < int(n); i++ {
			p := srcs[i].name()
			f, err := OpenSource(srcs[i])
			if err != nil {
				if errors.Is(err, os.ErrNotExist) {
					return nil, fmt.Errorf("%w: split %d of %d (%s) does not exist", ErrMissingSplit, i+1, n, p)
				}
				return nil, fmt.Errorf("gguf: split %d of %d: %w", i+1, n, err)
			}
			m.Files, m.Paths = append(m.Files, f), append(m.Paths, f.Path)
			got, err := f.u16Key(KeySplitNo)
			if err != nil {
				return nil, err
			}
			if int(got) != i {
				return nil, fmt.Errorf("%w: %s is split %d, expected split %d of %d", ErrSplit, p, got+1, i+1, n)
			}
		}
	}
	if err := m.index(); err != nil {
		return nil, err
	}
	if n > 1 {
		v, ok := f0.Lookup(KeySplitTensorsCount)
		want, isInt := v.Int()
		if !ok || !isInt {
			return nil, fmt.Errorf("%w: %s lacks an integer %s", ErrSplit, first, KeySplitTensorsCount)
		}
		if want != int64(len(m.Weights)) {
			return nil, fmt.Errorf("%w: corrupted model: %d tensors expected but %d found in %d splits%s", ErrTensorMismatch, want, len(m.Weights), n, m.missingHint(int(want)))
		}
	}
	ok = true
	return m, nil
}

// missingHint points at the splits that look short of tensors.
func (m *Model) missingHint(want int) string {
	var empty []string
	for i, f := range m.Files {
		if len(f.Tensors) == 0 {
			empty = append(empty, fmt.Sprintf("%s (split %d)", m.Paths[i], i+1))
		}
	}
	if len(empty) > 0 {
		return "; no tensors in " + strings.Join(empty, ", ")
	}
	if len(m.Weights) < want {
		return "; is a split from another model or an incomplete download?"
	}
	return ""
}

func splitCount(f *File) (uint16, error) {
	if _, ok := f.Lookup(KeySplitCount); !ok {
		return 0, nil
	}
	return f.u16Key(KeySplitCount)
}

// u16Key reads a key that llama.cpp reads as uint16_t.
func (f *File) u16Key(key string) (uint16, error) {
	i, ok := f.keys[key]
	if !ok {
		return 0, fmt.Errorf("%w: %s: missing key %s", ErrSplit, f.Path, key)
	}
	v := f.KV[i].Value
	if v.Kind() != TypeUint16 {
		return 0, &FormatError{Path: f.Path, Off: f.KV[i].Off, Msg: fmt.Sprintf("key %s is %s, expected u16", key, v.TypeName()), Err: ErrTypeMismatch}
	}
	return uint16(v.bits), nil
}

// index merges the files' tensors into the weights index.
func (m *Model) index() error {
	total := 0
	for _, f := range m.Files {
		total += len(f.Tensors)
	}
	m.Weights = make([]Weight, 0, total)
	m.byName = make(map[string]int, total)
	for fi, f := range m.Files {
		for _, t := range f.Tensors {
			if _, dup := m.byName[t.Name]; dup {
				prev := m.Weights[m.byName[t.Name]]
				return &FormatError{Path: m.Paths[fi], Off: t.InfoOff, Err: ErrDuplicateName,
					Msg: fmt.Sprintf("invalid model: tensor %s is in %s and %s", quote(t.Name), m.Paths[prev.File], m.Paths[fi])}
			}
			m.byName[t.Name] = len(m.Weights)
			m.Weights = append(m.Weights, Weight{
				Name: t.Name, Type: t.Type, Shape: t.Shape, NDims: t.NDims, File: fi,
				Offset: f.DataOffset + int64(t.Offset), Size: t.Size,
			})
			n, _ := t.Shape.Elements()
			m.NElements += uint64(n)
			m.NBytes += uint64(t.Size)
		}
	}
	// llama.cpp's weight_name_comparer: layer number, then name
	keyed := make([]keyedWeight, len(m.Weights))
	for i := range m.Weights {
		keyed[i] = keyedWeight{layerOf(m.Weights[i].Name), i}
	}
	slices.SortFunc(keyed, func(a, b keyedWeight) int {
		if a.layer != b.layer {
			return cmp.Compare(a.layer, b.layer)
		}
		return strings.Compare(m.Weights[a.i].Name, m.Weights[b.i].Name)
	})
	sorted := make([]Weight, len(m.Weights))
	for i, k := range keyed {
		sorted[i] = m.Weights[k.i]
		m.byName[sorted[i].Name] = i
	}
	m.Weights = sorted
	return nil
}

type keyedWeight struct{ layer, i int }

// layerOf reads the layer number as sscanf(name, "blk.%d.") does: -1 when
// the name does not start with "blk." and a number.
func layerOf(name string) int {
	rest, ok := strings.CutPrefix(name, "blk.")
	if !ok {
		return -1
	}
	i := 0
	for i < len(rest) && (rest[i] == ' ' || rest[i] >= '\t' && rest[i] <= '\r') {
		i++
	}
	j := i
	if j < len(rest) && (rest[j] == '+' || rest[j] == '-') {
		j++
	}
	k := j
	for k < len(rest) && rest[k] >= '0' && rest[k] <= '9' {
		k++
	}
	if k == j {
		return -1
	}
	// sscanf's %d has no defined result past int's range; llama.cpp names
	// never get there, and such names sort as layer -1 here
	n := 0
	for _, c := range rest[j:k] {
		n = n*10 + int(c-'0')
		if n > math.MaxInt32 {
			return -1
		}
	}
	if rest[i] == '-' {
		n = -n
	}
	return n
}

// Close closes every file of the model; later calls, and a call on a nil
// *Model, do nothing.
func (m *Model) Close() error {
	if m == nil {
		return nil
	}
	var first error
	for _, f := range m.Files {
		if err := f.Close(); err != nil && first == nil {
			first = err
		}
	}
	return first
}

// Closed reports whether the model, or one of its files, was closed
// (true for a nil *Model): a load refuses it, with an error wrapping
// ErrClosed. Its metadata and weights index stay readable.
func (m *Model) Closed() bool {
	if m == nil {
		return true
	}
	for _, f := range m.Files {
		if f.Closed() {
			return true
		}
	}
	return false
}

// All walks the model's weights in index order (by layer, then name).
func (m *Model) All() iter.Seq[*Weight] {
	return func(yield func(*Weight) bool) {
		for i := range m.Weights {
			if !yield(&m.Weights[i]) {
				return
			}
		}
	}
}

// Weight returns the named weight.
func (m *Model) Weight(name string) (*Weight, bool) {
	i, ok := m.byName[name]
	if !ok {
		return nil, false
	}
	return &m.Weights[i], true
}

// Lookup returns a metadata value of the first split.
func (m *Model) Lookup(key string) (Value, bool) { return m.Files[0].Lookup(key) }

// String returns a string value, with an error naming the key when it is
// missing or has another type.
func (m *Model) String(key string) (string, error) { return typed(m, key, "str", Value.Str) }

// Uint returns a non-negative integer value.
func (m *Model) Uint(key string) (uint64, error) {
	return typed(m, key, "a non-negative integer", Value.Uint)
}

// Float returns a float value.
func (m *Model) Float(key string) (float64, error) { return typed(m, key, "a float", Value.Float) }

// typed is the value of key as get reads it, with an error naming the key
// when it is missing or get refuses its type (want says what get takes).
func typed[T any](m *Model, key, want string, get func(Value) (T, bool)) (T, error) {
	var zero T
	v, ok := m.Lookup(key)
	if !ok {
		return zero, fmt.Errorf("%w: key %s", ErrNotFound, key)
	}
	x, ok := get(v)
	if !ok {
		return zero, fmt.Errorf("key %s: %w", key, v.mismatch(want))
	}
	return x, nil
}

// Architecture is general.architecture ("" when absent).
func (m *Model) Architecture() string {
	s, _ := m.String(KeyArchitecture)
	return s
}

// BPW is bits per weight as llama.cpp prints it: n_bytes·8 / n_elements.
func (m *Model) BPW() float64 {
	if m.NElements == 0 {
		return 0
	}
	return float64(m.NBytes) * 8 / float64(m.NElements)
}

// FileType is llama.cpp's file type: general.file_type when present, else
// guessed from the most common tensor type (Guessed is then true).
func (m *Model) FileType() (ftype uint32, guessed bool) {
	if v, ok := m.Lookup(KeyFileType); ok && v.Kind() == TypeUint32 {
		return uint32(v.bits), false
	}
	counts := map[gtype.Type]int{}
	maxN, maxT := 0, gtype.TypeF32
	for _, w := range m.Weights {
		counts[w.Type]++
		if counts[w.Type] > maxN {
			maxN, maxT = counts[w.Type], w.Type
		}
	}
	if ft, ok := ftypeOfType[maxT]; ok {
		return ft, true
	}
	return 0, true
}

// FileTypeName is the file type as llama.cpp prints it ("Q4_K - Medium",
// "(guessed) Q8_0").
func (m *Model) FileTypeName() string {
	ft, guessed := m.FileType()
	name, ok := ftypeNames[ft]
	if !ok {
		name = "unknown, may not work"
	}
	if guessed {
		return "(guessed) " + name
	}
	return name
}

// SizeString is llama.cpp's "file size = X MiB (Y BPW)" value.
func (m *Model) SizeString() string {
	if m.NBytes < 1<<30 {
		return fmt.Sprintf("%.2f MiB (%.2f BPW)", float64(m.NBytes)/(1<<20), m.BPW())
	}
	return fmt.Sprintf("%.2f GiB (%.2f BPW)", float64(m.NBytes)/(1<<30), m.BPW())
}

// llama_ftype values of the pinned llama.h and their names.
var ftypeNames = map[uint32]string{
	0: "all F32", 1: "F16", 2: "Q4_0", 3: "Q4_1", 7: "Q8_0", 8: "Q5_0", 9: "Q5_1",
	10: "Q2_K - Medium", 11: "Q3_K - Small", 12: "Q3_K - Medium", 13: "Q3_K - Large",
	14: "Q4_K - Small", 15: "Q4_K - Medium", 16: "Q5_K - Small", 17: "Q5_K - Medium", 18: "Q6_K",
	19: "IQ2_XXS - 2.0625 bpw", 20: "IQ2_XS - 2.3125 bpw", 21: "Q2_K - Small", 22: "IQ3_XS - 3.3 bpw",
	23: "IQ3_XXS - 3.0625 bpw", 24: "IQ1_S - 1.5625 bpw", 25: "IQ4_NL - 4.5 bpw", 26: "IQ3_S - 3.4375 bpw",
	27: "IQ3_S mix - 3.66 bpw", 28: "IQ2_S - 2.5 bpw", 29: "IQ2_M - 2.7 bpw", 30: "IQ4_XS - 4.25 bpw",
	31: "IQ1_M - 1.75 bpw", 32: "BF16", 36: "TQ1_0 - 1.69 bpw ternary", 37: "TQ2_0 - 2.06 bpw ternary",
	38: "MXFP4 MoE", 39: "NVFP4", 40: "Q1_0", 41: "Q2_0",
}

var ftypeOfType = map[gtype.Type]uint32{
	gtype.TypeF32: 0, gtype.TypeF16: 1, gtype.TypeBF16: 32, gtype.TypeQ4_0: 2, gtype.TypeQ4_1: 3,
	gtype.TypeQ5_0: 8, gtype.TypeQ5_1: 9, gtype.TypeQ8_0: 7, gtype.TypeQ2_K: 10, gtype.TypeQ3_K: 12,
	gtype.TypeQ4_K: 15, gtype.TypeQ5_K: 17, gtype.TypeQ6_K: 18, gtype.TypeTQ1_0: 36, gtype.TypeTQ2_0: 37,
	gtype.TypeIQ2_XXS: 19, gtype.TypeIQ2_XS: 20, gtype.TypeIQ2_S: 28, gtype.TypeIQ3_XXS: 23,
	gtype.TypeIQ1_S: 24, gtype.TypeIQ1_M: 31, gtype.TypeIQ4_NL: 25, gtype.TypeIQ4_XS: 30, gtype.TypeIQ3_S: 26,
	gtype.TypeNVFP4: 39, gtype.TypeQ1_0: 40, gtype.TypeQ2_0: 41,
}
