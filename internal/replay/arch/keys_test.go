package arch_test

import (
	"strings"
	"testing"

	"github.com/ggload/ggload/gguf"
	"github.com/ggload/ggload/internal/replay/arch"
	"github.com/ggload/ggload/lab/synth"
)

// archModel synthesizes a model of architecture a (converter types).
func archModel(t *testing.T, a string, types synth.KeyTypes) *synth.ArchModel {
	t.Helper()
	vocab, err := synth.Vocab(64)
	if err != nil {
		t.Fatal(err)
	}
	m, err := synth.NewArchModel(a, vocab, synth.ArchOptions{Types: types})
	if err != nil {
		t.Fatal(err)
	}
	return m
}

func setKV(m *synth.ArchModel, key string, v gguf.Value) {
	for i := range m.KV {
		if m.KV[i].Key == key {
			m.KV[i].Value = v
			return
		}
	}
	m.KV = append(m.KV, gguf.KV{Key: key, Value: v})
}

func mustArr(t *testing.T, elems any) gguf.Value {
	t.Helper()
	v, err := gguf.Array(elems)
	if err != nil {
		t.Fatal(err)
	}
	return v
}

// The pin's type rules for each form of metadata read, with its words:
// get_key<T> takes T's one type; get_arr takes INT32 and UINT32 elements
// alike for 32-bit integers (and BOOL into a std::array); get_key_or_arr
// takes an array of n, or a scalar of the element's own type.
func TestKeyTypeRules(t *testing.T) {
	cases := []struct {
		arch, key string
		v         func(t *testing.T) gguf.Value
		want      string // "" loads
		check     func(t *testing.T, r *arch.Run)
	}{
		// get_key_or_arr into std::array<int, 4> (rope sections)
		{"qwen2vl", "qwen2vl.rope.dimension_sections", func(t *testing.T) gguf.Value { return mustArr(t, []int32{8, 4, 4, 0}) }, "", nil},
		{"qwen2vl", "qwen2vl.rope.dimension_sections", func(t *testing.T) gguf.Value { return mustArr(t, []uint32{8, 4, 4, 0}) }, "", nil},
		{"qwen2vl", "qwen2vl.rope.dimension_sections", func(t *testing.T) gguf.Value { return mustArr(t, []bool{true, false, true, false}) }, "", nil},
		{"qwen2vl", "qwen2vl.rope.dimension_sections", func(*testing.T) gguf.Value { return gguf.Int32(4) }, "", nil},
		{"qwen2vl", "qwen2vl.rope.dimension_sections", func(*testing.T) gguf.Value { return gguf.Uint32(4) },
			"key qwen2vl.rope.dimension_sections has wrong type u32 but expected type i32", nil},
		{"qwen2vl", "qwen2vl.rope.dimension_sections", func(t *testing.T) gguf.Value { return mustArr(t, []int32{8, 4, 4}) },
			"key qwen2vl.rope.dimension_sections has wrong array length; expected 4, got 3", nil},
		{"qwen2vl", "qwen2vl.rope.dimension_sections", func(t *testing.T) gguf.Value { return mustArr(t, []float32{8, 4, 4, 0}) },
			"qwen2vl.rope.dimension_sections has wrong array element type f32", nil},
		{"qwen2vl", "qwen2vl.rope.dimension_sections", func(t *testing.T) gguf.Value { return mustArr(t, []int16{8, 4, 4, 0}) },
			"qwen2vl.rope.dimension_sections is not a string/float32/uint32/int32/uint64 array", nil},
		// get_key_or_arr into std::array<uint32_t, 512>, per layer
		{"llama", "llama.attention.head_count", func(t *testing.T) gguf.Value { return mustArr(t, []int32{4, 4, 4, 4}) }, "", nil},
		{"llama", "llama.attention.head_count", func(t *testing.T) gguf.Value { return mustArr(t, []uint32{4, 4, 2, 4}) }, "",
			func(t *testing.T, r *arch.Run) {
				if n, err := r.Hparams().Call("n_head", 2); err != nil || n != 2 {
					t.Errorf("n_head(2) = %d, %v; want 2", n, err)
				}
			}},
		{"llama", "llama.attention.head_count", func(*testing.T) gguf.Value { return gguf.Int32(4) },
			"key llama.attention.head_count has wrong type i32 but expected type u32", nil},
		// get_key<uint32_t>, get_key<float>, get_key<bool>
		{"llama", "llama.context_length", func(*testing.T) gguf.Value { return gguf.Uint64(256) },
			"key llama.context_length has wrong type u64 but expected type u32", nil},
		{"llama", "llama.context_length", func(t *testing.T) gguf.Value { return mustArr(t, []uint32{256}) },
			"key llama.context_length has wrong type arr but expected type u32", nil},
		{"llama", "llama.attention.layer_norm_rms_epsilon", func(*testing.T) gguf.Value { return gguf.Float64(1e-5) },
			"key llama.attention.layer_norm_rms_epsilon has wrong type f64 but expected type f32", nil},
		// get_arr into a std::array<uint32_t, 512>: a BOOL pattern, as the converter writes it
		{"gemma4", "gemma4.attention.sliding_window_pattern", func(t *testing.T) gguf.Value {
			return mustArr(t, []bool{true, false, true, false})
		}, "", func(t *testing.T, r *arch.Run) {
			for il, want := range []int64{1, 0, 1, 0} {
				if got, _ := r.Hparams().Call("is_swa", int64(il)); got != want {
					t.Errorf("is_swa(%d) = %d, want %d", il, got, want)
				}
			}
		}},
	}
	for _, c := range cases {
		m := archModel(t, c.arch, synth.ConverterTypes)
		v := c.v(t)
		setKV(m, c.key, v)
		// the loader's types leave the value as the case wrote it
		m.Types = synth.LoaderTypes
		gm, err := m.Model(false)
		if err != nil {
			t.Fatal(err)
		}
		r, err := arch.Load(gm, arch.Options{})
		name := c.key + "=" + v.TypeName() + " " + v.String()
		switch {
		case c.want == "" && err != nil:
			t.Errorf("%s: %v", name, err)
		case c.want != "" && (err == nil || !strings.HasSuffix(err.Error(), c.want)):
			t.Errorf("%s: error %v, want %q", name, err, c.want)
		case err == nil && c.check != nil:
			c.check(t, r)
		}
	}
}

// Metadata overrides (--override-kv) as llama.cpp's loader applies them:
// one of the key's kind is used instead of the file's value and said so;
// one of another kind is warned about and ignored.
func TestKVOverrides(t *testing.T) {
	m := archModel(t, "llama", synth.ConverterTypes)
	gm, err := m.Model(false)
	if err != nil {
		t.Fatal(err)
	}
	parse := func(s string) arch.KVOverride {
		o, err := arch.ParseKVOverride(s)
		if err != nil {
			t.Fatal(err)
		}
		return o
	}
	var log []string
	r, err := arch.Load(gm, arch.Options{
		Overrides: []arch.KVOverride{parse("llama.context_length=int:1024"), parse("llama.context_length=int:7"),
			parse("llama.block_count=float:2"), parse("llama.attention.layer_norm_rms_epsilon=float:0.5")},
		Log: func(level, text string) { log = append(log, level+" "+text) },
	})
	if err != nil {
		t.Fatal(err)
	}
	if v, _ := r.Hparams().Field("n_ctx_train"); v != 1024 {
		t.Errorf("n_ctx_train %d, want the first override's 1024", v)
	}
	if v, _ := r.Hparams().Field("n_layer_all"); v != 4 {
		t.Errorf("n_layer_all %d, want the file's 4 (a float override of an integer is ignored)", v)
	}
	want := []string{
		"INFO validate_override: Using metadata override (  int) 'llama.context_length' = 1024",
		"WARN validate_override: Warning: Bad metadata override type for key 'llama.block_count', expected int but got float",
		"INFO validate_override: Using metadata override (float) 'llama.attention.layer_norm_rms_epsilon' = 0.500000",
	}
	for _, w := range want {
		found := false
		for _, l := range log {
			found = found || l == w
		}
		if !found {
			t.Errorf("no log line %q in %q", w, log)
		}
	}

	// common's parser, with its refusals
	for _, c := range []struct{ in, err string }{
		{"a=int:12x", ""}, {"a=float:1.5e3", ""}, {"a=bool:true", ""}, {"a=str:x=y", ""},
		{"a", "malformed KV override 'a'"},
		{"a=bool:yes", "invalid boolean value for KV override 'a=bool:yes'"},
		{"a=i32:1", "invalid type for KV override 'a=i32:1'"},
		{"a=str:" + strings.Repeat("x", 128), "value cannot exceed 127 chars"},
		{strings.Repeat("k", 128) + "=int:1", "malformed KV override"},
	} {
		o, err := arch.ParseKVOverride(c.in)
		if (err == nil) != (c.err == "") || err != nil && !strings.Contains(err.Error(), c.err) {
			t.Errorf("%q: %+v %v, want error %q", c.in, o, err, c.err)
		}
	}
	if o := parse("a=int: -12x"); o.Int != -12 {
		t.Errorf("atol: %d", o.Int)
	}
	if o := parse("a=float:2.5x"); o.Float != 2.5 {
		t.Errorf("atof: %g", o.Float)
	}
}
