package gguf_test

import (
	"math"
	"math/rand/v2"
	"path/filepath"
	"testing"

	"github.com/ggload/ggload/ggml"
	"github.com/ggload/ggload/gguf"
)

func must(t testing.TB, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

func arr(t testing.TB, x any) gguf.Value {
	t.Helper()
	v, err := gguf.Array(x)
	must(t, err)
	return v
}

// sampleWriter builds a file with every value type, every array element
// type, awkward strings and tensors of several types and ranks.
func sampleWriter(t testing.TB, align uint64) *gguf.Writer {
	t.Helper()
	w := gguf.NewWriter()
	if align != 0 && align != gguf.DefaultAlignment {
		w.Alignment = align
		must(t, w.Set(gguf.KeyAlignment, gguf.Uint32(uint32(align))))
	}
	must(t, w.Set("general.architecture", gguf.String("llama")))
	must(t, w.Set("t.u8", gguf.Uint8(200)))
	must(t, w.Set("t.i8", gguf.Int8(-100)))
	must(t, w.Set("t.u16", gguf.Uint16(65000)))
	must(t, w.Set("t.i16", gguf.Int16(-32000)))
	must(t, w.Set("t.u32", gguf.Uint32(4000000000)))
	must(t, w.Set("t.i32", gguf.Int32(-2000000000)))
	must(t, w.Set("t.f32", gguf.Float32(float32(math.Pi))))
	must(t, w.Set("t.bool", gguf.Bool(true)))
	must(t, w.Set("t.str", gguf.String("  leading and trailing spaces \n\t")))
	must(t, w.Set("t.u64", gguf.Uint64(math.MaxUint64)))
	must(t, w.Set("t.i64", gguf.Int64(math.MinInt64)))
	must(t, w.Set("t.f64", gguf.Float64(-math.SmallestNonzeroFloat64)))
	must(t, w.Set("t.nan", gguf.Float32(float32(math.NaN()))))
	must(t, w.Set("a.u8", arr(t, []uint8{0, 1, 255})))
	must(t, w.Set("a.i8", arr(t, []int8{-128, 0, 127})))
	must(t, w.Set("a.u16", arr(t, []uint16{1, 65535})))
	must(t, w.Set("a.i16", arr(t, []int16{-1, 2})))
	must(t, w.Set("a.u32", arr(t, []uint32{7})))
	must(t, w.Set("a.i32", arr(t, []int32{-7, 0, 7})))
	must(t, w.Set("a.f32", arr(t, []float32{0.5, -1e-30, float32(math.Inf(1))})))
	must(t, w.Set("a.bool", arr(t, []bool{true, false, true})))
	must(t, w.Set("a.str", arr(t, []string{"", " ", "▁the", "<0x0A>", "日本語", "\t"})))
	must(t, w.Set("a.u64", arr(t, []uint64{1 << 63})))
	must(t, w.Set("a.i64", arr(t, []int64{-1 << 62})))
	must(t, w.Set("a.f64", arr(t, []float64{1e300})))
	must(t, w.Set("a.empty", arr(t, []int32{})))
	r := rand.New(rand.NewPCG(1, 2))
	for _, spec := range []struct {
		name  string
		typ   ggml.Type
		shape []int64
	}{
		{"token_embd.weight", ggml.TypeQ8_0, []int64{64, 10}},
		{"blk.0.attn_norm.weight", ggml.TypeF32, []int64{64}},
		{"blk.0.attn_q.weight", ggml.TypeQ4_K, []int64{256, 3}},
		{"blk.0.ffn_gate_exps.weight", ggml.TypeQ4_0, []int64{32, 4, 2}},
		{"blk.1.x.weight", ggml.TypeF16, []int64{3, 1, 2, 2}},
		{"output.weight", ggml.TypeBF16, []int64{5, 7}},
	} {
		var s ggml.Shape = ggml.Shape{1, 1, 1, 1}
		copy(s[:], spec.shape)
		n, err := spec.typ.Bytes(s)
		must(t, err)
		data := make([]byte, n)
		for i := range data {
			data[i] = byte(r.Uint32())
		}
		must(t, w.AddTensorBytes(spec.name, spec.typ, spec.shape, data))
	}
	return w
}

func writeSample(t testing.TB, align uint64) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "sample.gguf")
	must(t, sampleWriter(t, align).WriteFile(path))
	return path
}
