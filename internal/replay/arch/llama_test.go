package arch

import (
	"bytes"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/ggload/ggload/ggml"
	"github.com/ggload/ggload/gguf"
	"github.com/ggload/ggload/internal/replay/cpp"
)

type recorder struct{ got []Creation }

func (r *recorder) Place(c *Creation) error { r.got = append(r.got, *c); return nil }

func memModel(t *testing.T, w *gguf.Writer) *gguf.Model {
	t.Helper()
	var buf bytes.Buffer
	size, err := w.WriteMetadata(&buf)
	if err != nil {
		t.Fatal(err)
	}
	f, err := gguf.NewReader(bytes.NewReader(buf.Bytes()), size)
	if err != nil {
		t.Fatal(err)
	}
	m, err := gguf.NewModel(f)
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// llamaWriter is a two-layer llama model; tied leaves out output.weight.
func llamaWriter(t *testing.T, tied bool) *gguf.Writer {
	t.Helper()
	w := gguf.NewWriter()
	set := func(k string, v gguf.Value) {
		if err := w.Set(k, v); err != nil {
			t.Fatal(err)
		}
	}
	set("general.architecture", gguf.String("llama"))
	set("llama.block_count", gguf.Uint32(2))
	set("llama.context_length", gguf.Uint32(128))
	set("llama.embedding_length", gguf.Uint32(64))
	set("llama.feed_forward_length", gguf.Uint32(128))
	set("llama.attention.head_count", gguf.Uint32(4))
	set("llama.attention.layer_norm_rms_epsilon", gguf.Float32(1e-5))
	set("tokenizer.ggml.model", gguf.String("none"))
	set("llama.vocab_size", gguf.Uint32(100))
	add := func(name string, ne ...int64) {
		if err := w.AddTensor(name, ggml.TypeF32, ne, nil); err != nil {
			t.Fatal(err)
		}
	}
	add("token_embd.weight", 64, 100)
	add("output_norm.weight", 64)
	if !tied {
		add("output.weight", 64, 100)
	}
	for i := 0; i < 2; i++ {
		p := fmt.Sprintf("blk.%d.", i)
		add(p+"attn_norm.weight", 64)
		add(p+"attn_q.weight", 64, 64)
		add(p+"attn_k.weight", 64, 64)
		add(p+"attn_v.weight", 64, 64)
		add(p+"attn_output.weight", 64, 64)
		add(p+"ffn_norm.weight", 64)
		add(p+"ffn_gate.weight", 64, 128)
		add(p+"ffn_down.weight", 128, 64)
		add(p+"ffn_up.weight", 64, 128)
	}
	return w
}

// llama's tensor creation, replayed: the order, the kinds, the blocks,
// and the tied output (token_embd again, as OUTPUT, duplicated).
func TestLlamaSequence(t *testing.T) {
	for _, tied := range []bool{false, true} {
		m := memModel(t, llamaWriter(t, tied))
		r, err := Load(m, Options{})
		if err != nil {
			t.Fatal(err)
		}
		if !r.Exact() || r.Arch != "llama" {
			t.Fatalf("exact %v arch %q", r.Exact(), r.Arch)
		}
		rec := &recorder{}
		if err := r.CreateTensors(rec); err != nil {
			t.Fatal(err)
		}
		var got []string
		for _, c := range rec.got {
			got = append(got, fmt.Sprintf("%s %s %d %s dup=%v", c.Name, c.Kind, c.Bid, c.Op, c.Dup))
		}
		want := []string{
			"token_embd.weight TOKEN_EMBD -1 GET_ROWS dup=false",
			"output_norm.weight OUTPUT_NORM -1 MUL dup=false",
		}
		if tied {
			want = append(want, "token_embd.weight OUTPUT -1 MUL_MAT dup=true")
		} else {
			want = append(want, "output.weight OUTPUT -1 MUL_MAT dup=false")
		}
		for i := 0; i < 2; i++ {
			for _, k := range []string{"attn_norm ATTN_NORM %d MUL", "attn_q ATTN_Q %d MUL_MAT", "attn_k ATTN_K %d MUL_MAT",
				"attn_v ATTN_V %d MUL_MAT", "attn_output ATTN_OUT %d MUL_MAT", "ffn_norm FFN_NORM %d MUL",
				"ffn_gate FFN_GATE %d MUL_MAT", "ffn_down FFN_DOWN %d MUL_MAT", "ffn_up FFN_UP %d MUL_MAT"} {
				name, rest, _ := strings.Cut(k, " ")
				want = append(want, fmt.Sprintf("blk.%d.%s.weight "+rest+" dup=false", i, name, i))
			}
		}
		if strings.Join(got, "\n") != strings.Join(want, "\n") {
			t.Errorf("tied=%v:\n got:\n%s\nwant:\n%s", tied, strings.Join(got, "\n"), strings.Join(want, "\n"))
		}
		if h, err := r.Hparams().Call("n_embd_k_gqa"); err != nil || h != 64 {
			t.Errorf("n_embd_k_gqa() = %d, %v; want 64", h, err)
		}
	}
}

// llama.cpp's own errors, worded as llama.cpp words them.
func TestLlamaRefusals(t *testing.T) {
	cases := []struct {
		name   string
		change func(w *gguf.Writer)
		want   string
	}{
		{"missing key", func(w *gguf.Writer) { w.Delete("llama.context_length") },
			"error loading model hyperparameters: key not found in model: llama.context_length"},
		{"key of the wrong type", func(w *gguf.Writer) { w.Set("llama.embedding_length", gguf.Int32(64)) },
			"error loading model hyperparameters: key llama.embedding_length has wrong type i32 but expected type u32"},
		{"assertion", func(w *gguf.Writer) { w.Set("llama.block_count", gguf.Uint32(0)) },
			"GGML_ASSERT(hparams.n_layer_all > 0 && hparams.n_layer_all <= LLAMA_MAX_LAYERS) failed"},
		{"experts used beyond experts", func(w *gguf.Writer) {
			w.Set("llama.expert_count", gguf.Uint32(2))
			w.Set("llama.expert_used_count", gguf.Uint32(3))
		}, "GGML_ASSERT(n_expert_used_max <= hparams.n_expert) failed"},
		{"wrong shape", func(w *gguf.Writer) { w.Set("llama.feed_forward_length", gguf.Uint32(96)) },
			"check_tensor_dims: tensor 'blk.0.ffn_gate.weight' has wrong shape; expected     64,     96, got     64,    128,      1,      1"},
		{"unknown architecture", func(w *gguf.Writer) { w.Set("general.architecture", gguf.String("novel")) },
			"unknown model architecture: 'novel'"},
	}
	for _, c := range cases {
		w := llamaWriter(t, false)
		c.change(w)
		m := memModel(t, w)
		r, err := Load(m, Options{})
		if err == nil {
			err = r.CreateTensors(&recorder{})
		}
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: error %v, want %q", c.name, err, c.want)
		}
	}
	// a missing required tensor
	w := gguf.NewWriter()
	for _, kv := range llamaWriter(t, false).KV() {
		w.Set(kv.Key, kv.Value)
	}
	for _, ti := range llamaWriter(t, false).Tensors() {
		if ti.Name != "blk.1.attn_q.weight" {
			w.AddTensor(ti.Name, ti.Type, ti.Shape[:max(ti.NDims, 1)], nil)
		}
	}
	r, err := Load(memModel(t, w), Options{})
	if err != nil {
		t.Fatal(err)
	}
	err = r.CreateTensors(&recorder{})
	var th *cpp.Throw
	if !errors.As(err, &th) || th.Msg != "check_tensor_dims: tensor 'blk.1.attn_q.weight' not found" {
		t.Errorf("missing tensor: %v", err)
	}
	// a tensor the architecture never creates
	w = llamaWriter(t, false)
	w.AddTensor("blk.0.frobnicator.weight", ggml.TypeF32, []int64{64}, nil)
	r, err = Load(memModel(t, w), Options{})
	if err != nil {
		t.Fatal(err)
	}
	if err := r.CreateTensors(&recorder{}); err == nil || !strings.Contains(err.Error(), "wrong number of tensors; expected 22, got 21 (the llama architecture does not use blk.0.frobnicator.weight)") {
		t.Errorf("extra tensor: %v", err)
	}
}

// Every program decodes, every architecture's two programs exist, and
// every tensor kind of the table has a name.
func TestProgramsDecode(t *testing.T) {
	names := ProgramNames()
	if len(names) < 300 {
		t.Fatalf("%d programs", len(names))
	}
	for _, n := range names {
		p, err := LookupProgram(n)
		if err != nil || p == nil {
			t.Errorf("%s: %v", n, err)
		}
	}
	for a, e := range archTable {
		for _, p := range []string{e.Hparams, e.Tensors} {
			if prog, _ := LookupProgram(p); prog == nil {
				t.Errorf("%s: no program %s", a, p)
			}
		}
	}
	for kind := range tensorInfos {
		if _, ok := tensorNames[kind]; !ok {
			t.Errorf("%s has an info and no name", kind)
		}
	}
	if len(Architectures()) != 151 {
		t.Errorf("%d architectures; llama.cpp %s creates 151", len(Architectures()), Pin)
	}
}
