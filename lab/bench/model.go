package bench

import (
	"fmt"
	"io"
	"os"
	"path/filepath"

	"github.com/ggload/ggload/ggml"
	"github.com/ggload/ggload/gguf"
	"github.com/ggload/ggload/lab/synth"
)

// writeModel returns a generated llama model of about size bytes in the
// user cache directory, writing it once (and saying so to w).
func writeModel(rt *ggml.Runtime, size int64, typ string, w io.Writer) (string, error) {
	t, ok := ggml.TypeByName(typ)
	if !ok {
		return "", fmt.Errorf("--type %q: not a ggml type", typ)
	}
	spec := synth.BenchSpec(size, t)
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
