package gguf_test

import (
	"errors"
	"io"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"

	"github.com/ggload/ggload/gguf"
)

// claimBound is the most a parse of a source that claims far more than it
// holds may allocate: its real bytes are a few KiB.
const claimBound = 64 << 20

// allocated is what f allocated on the Go heap.
func allocated(f func()) uint64 {
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	f()
	runtime.ReadMemStats(&after)
	return after.TotalAlloc - before.TotalAlloc
}

// claimingReader holds data and claims more: past data it says EOF, or
// fails.
type claimingReader struct {
	data []byte
	fail bool
}

func (r claimingReader) ReadAt(p []byte, off int64) (int, error) {
	n := 0
	if off >= 0 && off < int64(len(r.data)) {
		n = copy(p, r.data[off:])
	}
	if n == len(p) {
		return n, nil
	}
	if r.fail {
		return n, errors.New("the claimed bytes are not there")
	}
	return n, io.EOF
}

// A sparse file of 2 TiB (4 KiB on disk) whose header counts 2^36 tensors
// or pairs is refused with a FormatError; what the counts claim is never
// reserved.
func TestSparseFileCountsDoNotReserve(t *testing.T) {
	dir := t.TempDir()
	for _, c := range []struct {
		name   string
		header []byte
		want   error
	}{
		{"2^36 tensors", header(1<<36, 0).Bytes(), gguf.ErrDuplicateName},
		{"2^36 pairs", header(0, 1<<36).Bytes(), gguf.ErrKey},
	} {
		t.Run(c.name, func(t *testing.T) {
			path := filepath.Join(dir, strings.ReplaceAll(c.name, " ", "-")+".gguf")
			if err := os.WriteFile(path, c.header, 0o644); err != nil {
				t.Fatal(err)
			}
			if err := os.Truncate(path, 2<<40); err != nil {
				t.Skipf("this filesystem makes no sparse file of 2 TiB: %v", err)
			}
			var err error
			alloc := allocated(func() {
				var f *gguf.File
				if f, err = gguf.Open(path); err == nil {
					f.Close()
				}
			})
			var fe *gguf.FormatError
			if !errors.As(err, &fe) || !errors.Is(err, c.want) || !strings.Contains(err.Error(), path) {
				t.Fatalf("want a FormatError wrapping %v naming %s, got %v", c.want, path, err)
			}
			if alloc > claimBound {
				t.Fatalf("allocated %d MiB for a file of 4 KiB on disk (%v)", alloc>>20, err)
			}
			t.Logf("allocated %d KiB: %v", alloc>>10, err)
		})
	}
}

// claimCases are headers that claim far more than they hold: counts and
// lengths up to what a source of 2^62 bytes could hold.
func claimCases() []struct {
	name string
	data []byte
} {
	return []struct {
		name string
		data []byte
	}{
		{"2^30 tensors", header(1<<30, 0).Bytes()},
		{"2^36 tensors", header(1<<36, 0).Bytes()},
		{"2^40 tensors", header(1<<40, 0).Bytes()},
		{"2^30 pairs", header(0, 1<<30).Bytes()},
		{"2^40 pairs", header(0, 1<<40).Bytes()},
		{"key of 1 GiB", header(0, 1).u64(1 << 30).str("abc").Bytes()},
		{"string of 1 GiB", header(0, 1).str("k").u32(8).u64(1 << 30).str("abc").Bytes()},
		{"tensor name of 1 GiB", header(1, 0).u64(1 << 30).str("abc").Bytes()},
		{"2^30 u64", header(0, 1).str("k").u32(9).u32(10).u64(1 << 30).u64(7).Bytes()},
		{"2^30 bools", header(0, 1).str("k").u32(9).u32(7).u64(1 << 30).u32(1).Bytes()},
		{"2^30 strings", header(0, 1).str("k").u32(9).u32(8).u64(1 << 30).str("a").Bytes()},
		{"last string of 1 GiB", header(0, 1).str("k").u32(9).u32(8).u64(2).str("a").u64(1 << 30).str("xyz").Bytes()},
	}
}

// readAll reads what a File holds: each array decoded as its type asks,
// its first elements printed, and the first bytes of each tensor.
func readAll(f *gguf.File) (errs []error) {
	for _, kv := range f.KV {
		v := kv.Value
		_ = v.Format(16)
		if !v.IsArray() {
			continue
		}
		var err error
		switch v.ElemType() {
		case gguf.TypeString:
			_, err = v.Strings()
			if v.Len() > 0 {
				_, e := v.StringAt(v.Len() - 1)
				errs = append(errs, e)
			}
		case gguf.TypeFloat32, gguf.TypeFloat64:
			_, err = v.Floats()
		case gguf.TypeBool:
			_, err = v.Bools()
		default:
			_, err = v.Ints()
		}
		errs = append(errs, err)
	}
	for _, t := range f.Tensors {
		_, err := f.Data(t).ReadAt(make([]byte, min(t.Size, 64)), 0)
		errs = append(errs, err)
	}
	return errs
}

// A reader source that claims 2^62 bytes and holds a few: every count and
// length it claims ends in ErrTruncated, at the parse or when the value
// is read, with memory bounded by the bytes there.
func TestClaimedSizeBeyondBytes(t *testing.T) {
	for _, c := range claimCases() {
		t.Run(c.name, func(t *testing.T) {
			var errs []error
			alloc := allocated(func() {
				f, err := gguf.OpenSource(gguf.ReaderSource("claims.gguf", claimingReader{data: c.data}, 1<<62))
				errs = append(errs, err)
				if err == nil {
					errs = append(errs, readAll(f)...)
				}
			})
			err := errors.Join(errs...)
			if alloc > claimBound {
				t.Fatalf("allocated %d MiB for %d bytes (%v)", alloc>>20, len(c.data), err)
			}
			if !errors.Is(err, gguf.ErrTruncated) {
				t.Fatalf("want an error wrapping ErrTruncated, got %v", err)
			}
			if fe := (*gguf.FormatError)(nil); errors.As(err, &fe) && fe.Path != "claims.gguf" {
				t.Errorf("the error names %q, not the source: %v", fe.Path, err)
			}
			t.Logf("allocated %d KiB: %v", alloc>>10, err)
		})
	}
}
