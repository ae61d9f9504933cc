package main

import (
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/ggload/ggload/ggml"
	"github.com/ggload/ggload/gguf"
	"github.com/ggload/ggload/lab/synth"
)

// benchModel returns a generated llama model of about size bytes in the
// user cache directory, writing it once.
func benchModel(rt *ggml.Runtime, size, typ string, w io.Writer) (string, error) {
	want, err := parseSize(size)
	if err != nil {
		return "", fmt.Errorf("--size: %w", err)
	}
	t, ok := ggml.TypeByName(typ)
	if !ok {
		return "", fmt.Errorf("--type %q: not a ggml type", typ)
	}
	spec := synth.BenchSpec(want, t)
	dir, err := os.UserCacheDir()
	if err != nil {
		return "", err
	}
	dir = filepath.Join(dir, "ggload")
	// v2: every tensor's bytes its own (synth.Spec.Distinct); a file of
	// the first version, whose layers repeated each other, is not used
	path := filepath.Join(dir, fmt.Sprintf("bench-llama-%dx%d-%s-v2.gguf", spec.Layers, spec.Embd, t))
	if f, err := gguf.Open(path); err == nil {
		f.Close()
		return path, nil
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", err
	}
	fmt.Fprintf(w, "writing %s (%.2f GiB, once)...\n", path, float64(spec.Bytes())/(1<<30))
	tmp := path + ".tmp"
	defer os.Remove(tmp)
	if _, err := spec.Write(rt, tmp); err != nil {
		return "", err
	}
	return path, os.Rename(tmp, path)
}

// parseSize reads 512MiB, 1GiB, 4G, 100M or plain bytes.
func parseSize(s string) (int64, error) {
	u := strings.ToUpper(strings.TrimSpace(s))
	mult := int64(1)
	for _, suf := range []struct {
		s string
		m int64
	}{{"GIB", 1 << 30}, {"MIB", 1 << 20}, {"KIB", 1 << 10}, {"GB", 1e9}, {"MB", 1e6}, {"G", 1 << 30}, {"M", 1 << 20}, {"K", 1 << 10}} {
		if strings.HasSuffix(u, suf.s) {
			u, mult = strings.TrimSuffix(u, suf.s), suf.m
			break
		}
	}
	f, err := strconv.ParseFloat(strings.TrimSpace(u), 64)
	if err != nil || f <= 0 {
		return 0, fmt.Errorf("%q: want a size such as 1GiB or 512MiB", s)
	}
	return int64(f * float64(mult)), nil
}

// warmPageCache reads the model's files so that every process starts from
// the same state: the file in the page cache (as after a first load).
func warmPageCache(m *gguf.Model) {
	buf := make([]byte, 8<<20)
	for _, p := range m.Paths {
		f, err := os.Open(p)
		if err != nil {
			continue
		}
		for {
			if _, err := f.Read(buf); err != nil {
				break
			}
		}
		f.Close()
	}
}
