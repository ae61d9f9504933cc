package gguf_test

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"

	"github.com/ggload/ggload/gguf"
)

// FuzzReader feeds arbitrary bytes to the reader: it must return a file or
// an error, never panic, and what it returns must hold its invariants.
// Seeds: files from our writer, hostile headers, and the first 64 KiB of the
// pinned source's model files when present.
func FuzzReader(f *testing.F) {
	f.Add(sampleBytes(f, 0))
	f.Add(sampleBytes(f, 64))
	f.Add(header(1, 0).str("t").u32(2).u64(32).u64(2).u32(8).u64(0).Bytes())
	f.Add(header(0, 1).str("k").u32(9).u32(8).u64(2).str("a").str("b").Bytes())
	if dir := os.Getenv("GGLOAD_LLAMA_SRC"); dir != "" {
		paths, _ := filepath.Glob(filepath.Join(dir, "models", "*.gguf"))
		for _, p := range paths {
			b, err := os.ReadFile(p)
			if err == nil && len(b) > 64<<10 {
				b = b[:64<<10]
			}
			if err == nil {
				f.Add(b)
			}
		}
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		g, err := gguf.NewReader(bytes.NewReader(data), int64(len(data)))
		if err != nil {
			return
		}
		for _, kv := range g.KV {
			_ = kv.Value.Format(16)
			if kv.Value.IsArray() {
				switch kv.Value.ElemType() {
				case gguf.TypeString:
					ss, err := kv.Value.Strings()
					if err == nil && uint64(len(ss)) != kv.Value.Len() {
						t.Fatalf("%s: %d strings, Len %d", kv.Key, len(ss), kv.Value.Len())
					}
				default:
					raw, err := kv.Value.ArrayBytes()
					if err == nil && uint64(len(raw)) != kv.Value.Len()*uint64(kv.Value.ElemType().Size()) {
						t.Fatalf("%s: %d bytes", kv.Key, len(raw))
					}
				}
			}
		}
		var end uint64
		for _, ti := range g.Tensors {
			if ti.Offset != end || g.DataOffset+int64(ti.Offset)+ti.Size > int64(len(data)) {
				t.Fatalf("tensor %q at %d+%d outside %d bytes", ti.Name, ti.Offset, ti.Size, len(data))
			}
			end += (uint64(ti.Size) + g.Alignment - 1) &^ (g.Alignment - 1)
			if _, err := g.Data(ti).ReadAt(make([]byte, ti.Size), 0); err != nil && ti.Size > 0 {
				t.Fatalf("tensor %q unreadable: %v", ti.Name, err)
			}
		}
		// a file we read is a file we can write back identically
		w := gguf.NewWriter()
		w.Alignment = g.Alignment
		for _, kv := range g.KV {
			if err := w.Set(kv.Key, kv.Value); err != nil {
				t.Fatalf("set %s: %v", kv.Key, err)
			}
		}
		for _, ti := range g.Tensors {
			if err := w.AddTensorReader(ti.Name, ti.Type, ti.Shape[:max(ti.NDims, 1)], g.Data(ti)); err != nil {
				return // names or shapes our writer refuses (0 dims, empty name)
			}
		}
		var out bytes.Buffer
		if _, err := w.WriteTo(&out); err != nil {
			t.Fatalf("write back: %v", err)
		}
		g2, err := gguf.NewReader(bytes.NewReader(out.Bytes()), int64(out.Len()))
		if err != nil {
			t.Fatalf("re-read: %v", err)
		}
		if len(g2.KV) != len(g.KV) || len(g2.Tensors) != len(g.Tensors) {
			t.Fatalf("re-read: %d/%d pairs, %d/%d tensors", len(g2.KV), len(g.KV), len(g2.Tensors), len(g.Tensors))
		}
		for i := range g.KV {
			if g.KV[i].Key != g2.KV[i].Key || g.KV[i].Value.Format(-1) != g2.KV[i].Value.Format(-1) {
				t.Fatalf("pair %d differs after write back", i)
			}
		}
	})
}

// FuzzClaimedSize reads sources that claim 2^62 bytes and hold the fuzz
// data: past it they say EOF, or fail. Whatever the header counts and
// lengths, the reader returns a file or an error, never panics, and
// allocates no more than a bound of the bytes that are there, reading
// the arrays and tensors of a file it returns included.
func FuzzClaimedSize(f *testing.F) {
	for _, c := range claimCases() {
		f.Add(c.data, false)
		f.Add(c.data, true)
	}
	good := sampleBytes(f, 0)
	f.Add(good, false)
	f.Add(good[:len(good)/2], true)
	f.Fuzz(func(t *testing.T, data []byte, fail bool) {
		var err error
		alloc := allocated(func() {
			var g *gguf.File
			if g, err = gguf.NewReader(claimingReader{data: data, fail: fail}, 1<<62); err == nil {
				readAll(g)
			}
		})
		if bound := uint64(16<<20 + 64*len(data)); alloc > bound {
			t.Fatalf("allocated %d bytes for %d bytes of data, more than %d (%v)", alloc, len(data), bound, err)
		}
	})
}
