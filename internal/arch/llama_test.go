package arch

import (
	"bytes"
	"fmt"
	"testing"

	"github.com/ggload/ggload/ggml"
	"github.com/ggload/ggload/loader/gguf"
)

type recorder struct{ got []Creation }

func (r *recorder) Place(c *Creation) error { r.got = append(r.got, *c); return nil }

func memModel(t *testing.T, w *gguf.Writer) *gguf.Model {
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

func TestLlamaSequence(t *testing.T) {
	w := gguf.NewWriter()
	set := func(k string, v gguf.Value) { w.Set(k, v) }
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
	m := memModel(t, w)
	r, err := Load(m, Options{})
	if err != nil {
		t.Fatal(err)
	}
	rec := &recorder{}
	if err := r.CreateTensors(rec); err != nil {
		t.Fatal(err)
	}
	for _, c := range rec.got {
		t.Logf("%s %s %v bid=%d dup=%v op=%s", c.Name, c.Kind, c.Class, c.Bid, c.Dup, c.Op)
	}
	t.Logf("steps %d", r.steps)
}
