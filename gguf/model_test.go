package gguf_test

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/ggload/ggload/ggml"
	"github.com/ggload/ggload/gguf"
)

// modelWriter makes a small llama-like model with layers 0..nLayer-1.
func modelWriter(t testing.TB, nLayer int) *gguf.Writer {
	t.Helper()
	w := gguf.NewWriter()
	must(t, w.Set(gguf.KeyArchitecture, gguf.String("llama")))
	add := func(name string, typ ggml.Type, shape ...int64) {
		var s ggml.Shape = ggml.Shape{1, 1, 1, 1}
		copy(s[:], shape)
		n, err := typ.Bytes(s)
		must(t, err)
		data := make([]byte, n)
		for i := range data {
			data[i] = byte(len(name) + i)
		}
		must(t, w.AddTensorBytes(name, typ, shape, data))
	}
	add("token_embd.weight", ggml.TypeQ8_0, 64, 16)
	for i := nLayer - 1; i >= 0; i-- { // written in reverse to prove the index sorts
		p := "blk." + itoa(i) + "."
		add(p+"attn_q.weight", ggml.TypeQ8_0, 64, 64)
		add(p+"attn_norm.weight", ggml.TypeF32, 64)
	}
	add("output_norm.weight", ggml.TypeF32, 64)
	add("output.weight", ggml.TypeQ6_K, 256, 16)
	return w
}

func itoa(i int) string {
	if i < 10 {
		return string(rune('0' + i))
	}
	return itoa(i/10) + string(rune('0'+i%10))
}

func TestWeightsIndexOrder(t *testing.T) {
	path := filepath.Join(t.TempDir(), "m.gguf")
	must(t, modelWriter(t, 12).WriteFile(path))
	m, err := gguf.OpenModel(path)
	must(t, err)
	defer m.Close()
	var names []string
	for _, w := range m.Weights {
		names = append(names, w.Name)
	}
	// non-layer tensors (layer -1) first, then blk.0 ... blk.11 numerically
	want := []string{"output.weight", "output_norm.weight", "token_embd.weight", "blk.0.attn_norm.weight", "blk.0.attn_q.weight", "blk.1.attn_norm.weight"}
	if strings.Join(names[:6], ",") != strings.Join(want, ",") {
		t.Fatalf("order %v", names[:6])
	}
	i2, i10 := -1, -1
	for i, n := range names {
		if n == "blk.2.attn_q.weight" {
			i2 = i
		}
		if n == "blk.10.attn_q.weight" {
			i10 = i
		}
	}
	if i2 < 0 || i10 < i2 {
		t.Fatalf("blk.2 at %d, blk.10 at %d", i2, i10)
	}
	w, ok := m.Weight("blk.10.attn_q.weight")
	if !ok || w.Layer() != 10 || w.Size != 64*64/32*34 {
		t.Fatalf("weight %+v", w)
	}
	// the absolute offset points at the tensor's bytes
	f := m.Files[w.File]
	ti, _ := f.Tensor(w.Name)
	if w.Offset != f.DataOffset+int64(ti.Offset) {
		t.Fatal("offset")
	}
}

func TestTotalsBPWAndFileType(t *testing.T) {
	path := filepath.Join(t.TempDir(), "m.gguf")
	must(t, modelWriter(t, 2).WriteFile(path))
	m, err := gguf.OpenModel(path)
	must(t, err)
	defer m.Close()
	var el, by uint64
	for _, w := range m.Weights {
		n, _ := w.Shape.Elements()
		el += uint64(n)
		by += uint64(w.Size)
	}
	if m.NElements != el || m.NBytes != by {
		t.Fatalf("totals %d %d", m.NElements, m.NBytes)
	}
	if bpw := m.BPW(); bpw < 6 || bpw > 9 {
		t.Fatalf("bpw %f", bpw)
	}
	// no general.file_type: guessed from the most common type, counted in
	// index order, the first to reach the top count winning a tie (f32 and
	// q8_0 both have 3 tensors here; f32 gets there first, as in llama.cpp)
	if got := m.FileTypeName(); got != "(guessed) all F32" {
		t.Fatalf("file type %q", got)
	}
	if !strings.HasSuffix(m.SizeString(), "BPW)") {
		t.Fatal(m.SizeString())
	}
	w := modelWriter(t, 2)
	must(t, w.Set(gguf.KeyFileType, gguf.Uint32(15)))
	must(t, w.WriteFile(path))
	m2, err := gguf.OpenModel(path)
	must(t, err)
	defer m2.Close()
	if got := m2.FileTypeName(); got != "Q4_K - Medium" {
		t.Fatalf("file type %q", got)
	}
}

func TestSplitsLoadAsOneIndex(t *testing.T) {
	dir := t.TempDir()
	w := modelWriter(t, 4)
	paths, err := w.WriteSplits(filepath.Join(dir, "m"), 3)
	must(t, err)
	if len(paths) != 3 || filepath.Base(paths[1]) != "m-00002-of-00003.gguf" {
		t.Fatalf("paths %v", paths)
	}
	m, err := gguf.OpenModel(paths[0])
	must(t, err)
	defer m.Close()
	if len(m.Files) != 3 || len(m.Weights) != len(w.Tensors()) {
		t.Fatalf("%d files, %d weights", len(m.Files), len(m.Weights))
	}
	// the merged index points into each split with its own data offset
	files := map[int]bool{}
	for _, wt := range m.Weights {
		files[wt.File] = true
		f := m.Files[wt.File]
		ti, ok := f.Tensor(wt.Name)
		if !ok || wt.Offset != f.DataOffset+int64(ti.Offset) {
			t.Fatalf("%s: index entry %+v", wt.Name, wt)
		}
		got := make([]byte, 8)
		_, err := f.ReaderAt().ReadAt(got, wt.Offset)
		must(t, err)
		if got[0] != byte(len(wt.Name)) {
			t.Fatalf("%s: data does not start at the indexed offset", wt.Name)
		}
	}
	if len(files) != 3 {
		t.Fatalf("weights in %d files", len(files))
	}
	// metadata comes from the first split
	if m.Architecture() != "llama" {
		t.Fatal("metadata")
	}
	// explicit paths work too
	m2, err := gguf.OpenSplits(paths...)
	must(t, err)
	m2.Close()
}

func TestSplitErrors(t *testing.T) {
	dir := t.TempDir()
	w := modelWriter(t, 4)
	paths, err := w.WriteSplits(filepath.Join(dir, "m"), 3)
	must(t, err)

	// not the first split
	_, err = gguf.OpenModel(paths[1])
	if !errors.Is(err, gguf.ErrNotFirstSplit) || !strings.Contains(err.Error(), "load the first split") {
		t.Fatalf("wrong first file: %v", err)
	}

	// missing middle split
	must(t, os.Rename(paths[1], paths[1]+".gone"))
	_, err = gguf.OpenModel(paths[0])
	if !errors.Is(err, gguf.ErrMissingSplit) || !strings.Contains(err.Error(), "split 2 of 3") || !strings.Contains(err.Error(), paths[1]) {
		t.Fatalf("missing split: %v", err)
	}
	must(t, os.Rename(paths[1]+".gone", paths[1]))

	// splits given in the wrong order
	_, err = gguf.OpenSplits(paths[0], paths[2], paths[1])
	if !errors.Is(err, gguf.ErrSplit) || !strings.Contains(err.Error(), "expected split 2") {
		t.Fatalf("order: %v", err)
	}

	// a file that is not split, given with others
	single := filepath.Join(dir, "single.gguf")
	must(t, modelWriter(t, 2).WriteFile(single))
	_, err = gguf.OpenSplits(single, filepath.Join(dir, "nonexistent.gguf"))
	if !errors.Is(err, gguf.ErrSplit) || !strings.Contains(err.Error(), "is not split, but 2 files were given") {
		t.Fatalf("extra files: %v", err)
	}

	// split.tensors.count that does not match
	w2 := modelWriter(t, 4)
	p2, err := w2.WriteSplits(filepath.Join(dir, "c"), 2)
	must(t, err)
	other := modelWriter(t, 1) // a second split from a smaller model
	p3, err := other.WriteSplits(filepath.Join(dir, "o"), 2)
	must(t, err)
	must(t, os.Rename(p3[1], p2[1]))
	_, err = gguf.OpenModel(p2[0])
	if !errors.Is(err, gguf.ErrTensorMismatch) || !strings.Contains(err.Error(), "tensors expected but") {
		t.Fatalf("count mismatch: %v", err)
	}

	// a tensor in two splits
	d1 := gguf.NewWriter()
	must(t, d1.Set(gguf.KeyArchitecture, gguf.String("llama")))
	must(t, d1.AddTensorBytes("a", ggml.TypeF32, []int64{1}, make([]byte, 4)))
	must(t, d1.AddTensorBytes("b", ggml.TypeF32, []int64{1}, make([]byte, 4)))
	dp, err := d1.WriteSplits(filepath.Join(dir, "d"), 2)
	must(t, err)
	d2 := gguf.NewWriter()
	must(t, d2.AddTensorBytes("a", ggml.TypeF32, []int64{1}, make([]byte, 4)))
	must(t, d2.AddTensorBytes("x", ggml.TypeF32, []int64{1}, make([]byte, 4)))
	dp2, err := d2.WriteSplits(filepath.Join(dir, "e"), 2)
	must(t, err)
	must(t, os.Rename(dp2[0], dp[1]))
	// e's first split claims split.no = 0; rewrite as split 1 of 2
	ew := gguf.NewWriter()
	must(t, ew.AddTensorBytes("a", ggml.TypeF32, []int64{1}, make([]byte, 4)))
	must(t, ew.Set(gguf.KeySplitNo, gguf.Uint16(1)))
	must(t, ew.Set(gguf.KeySplitCount, gguf.Uint16(2)))
	must(t, ew.Set(gguf.KeySplitTensorsCount, gguf.Int32(2)))
	must(t, ew.WriteFile(dp[1]))
	_, err = gguf.OpenModel(dp[0])
	if !errors.Is(err, gguf.ErrDuplicateName) || !strings.Contains(err.Error(), `"a"`) {
		t.Fatalf("duplicate across splits: %v", err)
	}

	// a split-declaring file whose name does not follow the pattern
	odd := filepath.Join(dir, "renamed.gguf")
	must(t, os.Rename(paths[0], odd))
	if _, err := gguf.OpenModel(odd); !errors.Is(err, gguf.ErrSplit) || !strings.Contains(err.Error(), "pass the split paths") {
		t.Fatalf("odd name: %v", err)
	}
}

func TestLayerNumbersAsSscanf(t *testing.T) {
	for name, want := range map[string]int{
		"blk.0.attn_q.weight": 0, "blk.17.ffn_down.weight": 17, "blk.5x": 5, "blk. 7.a": 7,
		"blk.-1.a": -1, "blk.+3.a": 3, "blk..a": -1, "token_embd.weight": -1, "blk": -1,
		"xblk.3.a": -1, "blk.99999999999.a": -1,
	} {
		w := gguf.Weight{Name: name}
		if got := w.Layer(); got != want {
			t.Errorf("%q: layer %d, want %d", name, got, want)
		}
	}
}
