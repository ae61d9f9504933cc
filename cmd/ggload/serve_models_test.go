package main

import (
	"os"
	"path/filepath"
	"sync"
	"testing"

	"github.com/ggload/ggload/bindings"
	"github.com/ggload/ggload/gguf"
	"github.com/ggload/ggload/lab/synth"
	"github.com/ggload/ggload/lab/testenv"
)

// serveModel is a synthesized model for the server tests (cached across
// runs: the file's name carries a hash of what it holds): arch with the
// pin's ggml-vocab-<voc>.gguf, random weights from seed.
func serveModel(t testing.TB, arch, voc string, layers int, seed uint64) string {
	t.Helper()
	rt := testenv.Runtime(t)
	cache, err := bindings.CacheDir()
	if err != nil {
		t.Fatal(err)
	}
	o := synth.ArchOptions{Layers: layers, Keys: []gguf.KV{{Key: arch + ".context_length", Value: gguf.Uint32(4096)}}}
	p, err := synth.TextModel(rt, filepath.Join(cache, "models", "text"), testenv.SourceTree(t), arch, voc, o, seed)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// presetModels are the local files that stand for the pin's test presets'
// Hugging Face models (tools/server/tests/utils.py, ServerPreset): a text
// model with a SentencePiece vocabulary for the stories models, one with
// fill-in-the-middle tokens (StarCoder's vocabulary) for the infill
// model, BERT with the BGE vocabulary for the embedding and rerank
// models.
func presetModels(t testing.TB) map[string]string {
	t.Helper()
	presetOnce.Do(func() {
		text := serveModel(t, "llama", "llama-spm", 2, 7)
		bert := serveModel(t, "bert", "bert-bge", 2, 7)
		presetPaths = map[string]string{
			"tinyllama2":             text,
			"bert_bge_small":         bert,
			"bert_bge_small_with_fa": bert,
			"tinyllama_infill":       serveModel(t, "llama", "starcoder", 2, 7),
			"stories15m_moe":         serveModel(t, "llama", "llama-spm", 2, 11),
			"jina_reranker_tiny":     bert,
			"tinygemma3":             text,
		}
	})
	if presetPaths == nil {
		t.Fatal("the preset models could not be made")
	}
	for name, p := range presetPaths {
		if _, err := os.Stat(p); err != nil {
			t.Fatalf("preset %s: %v", name, err)
		}
	}
	return presetPaths
}

var (
	presetOnce  sync.Once
	presetPaths map[string]string
)
