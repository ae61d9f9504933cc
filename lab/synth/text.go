package synth

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"os"
	"path/filepath"

	"github.com/ggload/ggload/ggml"
	"github.com/ggload/ggload/gguf"
)

// TextModel writes (once: the file's name carries a hash of its content)
// a model of architecture arch whose tokenizer is the pin's
// models/ggml-vocab-<vocab>.gguf of the source tree src, its weights
// pseudo-random from seed, into dir; its path. A model to generate text
// with, on ggload and on llama.cpp's tools alike.
func TextModel(rt *ggml.Runtime, dir, src, arch, vocab string, o ArchOptions, seed uint64) (string, error) {
	vf, err := gguf.Open(filepath.Join(src, "models", "ggml-vocab-"+vocab+".gguf"))
	if err != nil {
		return "", err
	}
	defer vf.Close()
	m, err := NewArchModel(arch, vf, o)
	if err != nil {
		return "", fmt.Errorf("synth: %s: %w", arch, err)
	}
	sum, err := m.contentHash(vocab)
	if err != nil {
		return "", err
	}
	h := sha256.Sum256([]byte(fmt.Sprint(sum, seed)))
	path := filepath.Join(dir, fmt.Sprintf("%s-%s-%s.gguf", arch, vocab, hex.EncodeToString(h[:6])))
	if _, err := os.Stat(path); err == nil {
		return path, nil
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", err
	}
	tmp := fmt.Sprintf("%s.tmp%d", path, os.Getpid())
	zero := tmp + ".zero"
	defer os.Remove(zero)
	if err := m.WriteFile(zero); err != nil {
		return "", err
	}
	if err := FillFile(rt, zero, tmp, seed); err != nil {
		os.Remove(tmp)
		return "", err
	}
	if err := os.Rename(tmp, path); err != nil {
		return "", err
	}
	return path, nil
}
