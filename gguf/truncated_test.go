package gguf_test

import (
	"errors"
	"os"
	"path/filepath"
	"testing"

	"github.com/ggload/ggload/gguf"
)

// A file cut anywhere before the end of its last tensor's data is refused
// with an error wrapping ErrTruncated, whichever check finds it first: a
// field that runs past the end, a count, length or array that the bytes
// left cannot hold (ErrTooLarge too), the data section, a tensor's data
// (ErrOutOfBounds too).
func TestTruncatedIsErrTruncated(t *testing.T) {
	good := sampleBytes(t, 0)
	f, err := parse(good)
	must(t, err)
	last := f.Tensors[len(f.Tensors)-1]
	end := int(f.DataOffset + int64(last.Offset) + last.Size)
	step := 1
	if testing.Short() {
		step = 5
	}
	found := map[error]int{}
	for n := 0; n < end; n += step {
		_, err := parse(good[:n])
		if !errors.Is(err, gguf.ErrTruncated) {
			t.Fatalf("cut at %d of %d (data at %d): want ErrTruncated, got %v", n, len(good), f.DataOffset, err)
		}
		for _, s := range []error{gguf.ErrTooLarge, gguf.ErrOutOfBounds} {
			if errors.Is(err, s) {
				found[s]++
			}
		}
	}
	// the cuts reach both of the specific sentinels
	if found[gguf.ErrTooLarge] == 0 || found[gguf.ErrOutOfBounds] == 0 {
		t.Fatalf("cuts wrapping ErrTooLarge: %d, ErrOutOfBounds: %d; want some of each", found[gguf.ErrTooLarge], found[gguf.ErrOutOfBounds])
	}
}

// Open, OpenModel and OpenSplits say ErrTruncated of a file cut short at
// each part of it, a split's included.
func TestOpenTruncated(t *testing.T) {
	good := sampleBytes(t, 0)
	f, err := parse(good)
	must(t, err)
	last := f.Tensors[len(f.Tensors)-1]
	cuts := []struct {
		name string
		at   int64
	}{
		{"empty", 0},
		{"in the magic", 2},
		{"in the counts", 12},
		{"in the first pair", 30},
		{"in the tensor infos", f.Tensors[0].InfoOff + 3},
		{"before the data", f.DataOffset - 1},
		{"in the first tensor", f.DataOffset + f.Tensors[0].Size/2},
		{"in the last tensor", f.DataOffset + int64(last.Offset) + last.Size/2},
		{"the last byte", f.DataOffset + int64(last.Offset) + last.Size - 1},
	}
	dir := t.TempDir()
	for _, c := range cuts {
		path := filepath.Join(dir, "cut.gguf")
		must(t, os.WriteFile(path, good[:c.at], 0o644))
		if _, err := gguf.Open(path); !errors.Is(err, gguf.ErrTruncated) {
			t.Errorf("%s (%d bytes): Open: %v", c.name, c.at, err)
		}
		if _, err := gguf.OpenModel(path); !errors.Is(err, gguf.ErrTruncated) {
			t.Errorf("%s (%d bytes): OpenModel: %v", c.name, c.at, err)
		}
	}

	// the last split of three, cut in its data
	paths, err := modelWriter(t, 4).WriteSplits(filepath.Join(dir, "m"), 3)
	must(t, err)
	sf, err := gguf.Open(paths[2])
	must(t, err)
	sf.Close()
	must(t, os.Truncate(paths[2], sf.DataOffset+1))
	if _, err := gguf.OpenModel(paths[0]); !errors.Is(err, gguf.ErrTruncated) {
		t.Errorf("a split cut short: OpenModel: %v", err)
	}
	if _, err := gguf.OpenSplits(paths...); !errors.Is(err, gguf.ErrTruncated) {
		t.Errorf("a split cut short: OpenSplits: %v", err)
	}
}
