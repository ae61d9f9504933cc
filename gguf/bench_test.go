package gguf_test

import (
	"fmt"
	"path/filepath"
	"sync"
	"testing"

	"github.com/ggload/ggload/bindings"
	"github.com/ggload/ggload/ggml"
	"github.com/ggload/ggload/gguf"
	"github.com/ggload/ggload/lab/testenv"
)

// Metadata parse of the largest vocabulary file of the pinned source
// (gemma-4, 262k tokens), ours against ggml's gguf_init_from_file(no_alloc).
//
//	go test -run XXX -bench Parse ./gguf
func BenchmarkParseVocabOurs(b *testing.B) {
	path := filepath.Join(testenv.SourceTree(b), "models", "ggml-vocab-gemma-4.gguf")
	for b.Loop() {
		f, err := gguf.Open(path)
		if err != nil {
			b.Fatal(err)
		}
		f.Close()
	}
}

func BenchmarkParseVocabNative(b *testing.B) {
	path := filepath.Join(testenv.SourceTree(b), "models", "ggml-vocab-gemma-4.gguf")
	benchNative(b, path)
}

var (
	manyOnce sync.Once
	manyPath string
)

// a synthetic file with 100k tensors (1000 layers × 100)
func manyTensors(b *testing.B) string {
	manyOnce.Do(func() {
		w := gguf.NewWriter()
		must(b, w.Set(gguf.KeyArchitecture, gguf.String("llama")))
		data := make([]byte, 64)
		for l := 0; l < 1000; l++ {
			for k := 0; k < 100; k++ {
				must(b, w.AddTensorBytes(fmt.Sprintf("blk.%d.t%d.weight", l, k), ggml.TypeF32, []int64{16}, data))
			}
		}
		dir, err := mkdirTemp()
		must(b, err)
		manyPath = filepath.Join(dir, "many.gguf")
		must(b, w.WriteFile(manyPath))
	})
	return manyPath
}

func BenchmarkParse100kTensorsOurs(b *testing.B) {
	path := manyTensors(b)
	for b.Loop() {
		m, err := gguf.OpenModel(path)
		if err != nil {
			b.Fatal(err)
		}
		m.Close()
	}
}

func BenchmarkParse100kTensorsNative(b *testing.B) {
	benchNative(b, manyTensors(b))
}

func benchNative(b *testing.B, path string) {
	lib := testenv.Lib(testenv.Runtime(b))
	for b.Loop() {
		c := lib.GGUFInitFromFile(path, bindings.GGUFInitParams{NoAlloc: true})
		if c == 0 {
			b.Fatal("native reader failed")
		}
		lib.GGUFFree(c)
	}
}
