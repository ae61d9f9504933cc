package synthmodel

import (
	"fmt"
	"os"
	"path/filepath"

	"github.com/ggload/ggload/ggml"
	"github.com/ggload/ggload/gguf"
)

// Demo is the embedded demo's model: a small llama (8 layers, grouped-query
// attention, q4_K matrices, q8_0 embeddings, 17 MiB) made with ggml's
// quantizers, with a SentencePiece vocabulary of English words
// (DemoVocab) that its random output layer leans to.
var Demo = Spec{
	Name:       "ggload-demo",
	Layers:     8,
	Embd:       512,
	FF:         1536,
	Heads:      8,
	HeadsKV:    4,
	Vocab:      4096,
	Weights:    ggml.TypeQ4_K,
	Embeddings: ggml.TypeQ8_0,
	Seed:       2026,
	Tokenizer:  &demoVocab,
}

var demoVocab = DemoVocab(4096)

// demoFile names the demo model's file; the suffix changes with Demo.
const demoFile = "demo-llama-8x512-q4_K-v2.gguf"

// DemoModel returns the path of the demo model in the user's cache
// directory (os.UserCacheDir()/ggload), writing it first if it is missing
// or unreadable.
func DemoModel(rt *ggml.Runtime) (string, error) {
	dir, err := os.UserCacheDir()
	if err != nil {
		return "", fmt.Errorf("demo model: no cache directory: %w", err)
	}
	dir = filepath.Join(dir, "ggload")
	path := filepath.Join(dir, demoFile)
	if f, err := gguf.Open(path); err == nil {
		f.Close()
		return path, nil
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", fmt.Errorf("demo model: %w", err)
	}
	tmp, err := os.CreateTemp(dir, demoFile+".*")
	if err != nil {
		return "", fmt.Errorf("demo model: %w", err)
	}
	tmp.Close()
	defer os.Remove(tmp.Name())
	if _, err := Demo.Write(rt, tmp.Name()); err != nil {
		return "", fmt.Errorf("demo model: write %s: %w", tmp.Name(), err)
	}
	if err := os.Rename(tmp.Name(), path); err != nil {
		return "", fmt.Errorf("demo model: %w", err)
	}
	return path, nil
}
