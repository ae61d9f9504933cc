package gguf_test

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"

	"github.com/ggload/ggload/ggml"
	"github.com/ggload/ggload/gguf"
)

func sampleBytes(t testing.TB, align uint64) []byte {
	t.Helper()
	var buf bytes.Buffer
	_, err := sampleWriter(t, align).WriteTo(&buf)
	must(t, err)
	return buf.Bytes()
}

func parse(b []byte) (*gguf.File, error) { return gguf.NewReader(bytes.NewReader(b), int64(len(b))) }

func TestRoundTripValues(t *testing.T) {
	f, err := parse(sampleBytes(t, 0))
	must(t, err)
	get := func(k string) gguf.Value {
		v, ok := f.Lookup(k)
		if !ok {
			t.Fatalf("missing %s", k)
		}
		return v
	}
	if u, ok := get("t.u8").Uint(); !ok || u != 200 {
		t.Error("u8")
	}
	if i, ok := get("t.i8").Int(); !ok || i != -100 {
		t.Error("i8")
	}
	if u, ok := get("t.u64").Uint(); !ok || u != math.MaxUint64 {
		t.Error("u64")
	}
	if _, ok := get("t.u64").Int(); ok {
		t.Error("u64 max fits int64?")
	}
	if i, ok := get("t.i64").Int(); !ok || i != math.MinInt64 {
		t.Error("i64")
	}
	if _, ok := get("t.i64").Uint(); ok {
		t.Error("negative as uint")
	}
	if x, ok := get("t.f32").Float(); !ok || float32(x) != float32(math.Pi) {
		t.Error("f32")
	}
	if x, ok := get("t.nan").Float(); !ok || !math.IsNaN(x) {
		t.Error("nan")
	}
	if b, ok := get("t.bool").Bool(); !ok || !b {
		t.Error("bool")
	}
	// whitespace is kept byte for byte
	if s, ok := get("t.str").Str(); !ok || s != "  leading and trailing spaces \n\t" {
		t.Errorf("str %q", s)
	}
	// wrong-type accessors answer false instead of panicking
	if _, ok := get("t.str").Uint(); ok {
		t.Error("str as uint")
	}
	if _, ok := get("a.u8").Str(); ok {
		t.Error("array as string")
	}
	if _, err := get("t.u8").Strings(); !errors.Is(err, gguf.ErrTypeMismatch) {
		t.Error("scalar as array")
	}
	ss, err := get("a.str").Strings()
	must(t, err)
	want := []string{"", " ", "▁the", "<0x0A>", "日本語", "\t"}
	if strings.Join(ss, "|") != strings.Join(want, "|") {
		t.Errorf("strings %q", ss)
	}
	for i, w := range want {
		if s, err := get("a.str").StringAt(uint64(i)); err != nil || s != w {
			t.Errorf("StringAt(%d) = %q, %v", i, s, err)
		}
	}
	if _, err := get("a.str").StringAt(6); err == nil {
		t.Error("StringAt past the end")
	}
	ints, err := get("a.i8").Ints()
	must(t, err)
	if len(ints) != 3 || ints[0] != -128 || ints[2] != 127 {
		t.Errorf("i8 array %v", ints)
	}
	if _, err := get("a.u64").Ints(); err == nil {
		t.Error("u64 array element above int64 accepted")
	}
	bs, err := get("a.bool").Bools()
	must(t, err)
	if len(bs) != 3 || !bs[0] || bs[1] {
		t.Errorf("bools %v", bs)
	}
	fs, err := get("a.f32").Floats()
	must(t, err)
	if fs[0] != 0.5 || !math.IsInf(fs[2], 1) {
		t.Errorf("floats %v", fs)
	}
	if v := get("a.empty"); v.Len() != 0 || v.TypeName() != "arr[i32,0]" {
		t.Errorf("empty %s", v.TypeName())
	}
	if got := get("a.str").Format(2); got != `["", " ", ...]` {
		t.Errorf("format %s", got)
	}
	if len(f.Tensors) != 6 || f.Tensors[2].Type != ggml.TypeQ4_K || f.Tensors[4].NDims != 4 {
		t.Errorf("tensors %+v", f.Tensors)
	}
	if f.DataOffset%32 != 0 {
		t.Errorf("data offset %d", f.DataOffset)
	}
}

// hostile builds a file from parts so that tests can place faults exactly.
type hostile struct{ bytes.Buffer }

func (h *hostile) u32(x uint32) *hostile { binary.Write(&h.Buffer, binary.LittleEndian, x); return h }
func (h *hostile) u64(x uint64) *hostile { binary.Write(&h.Buffer, binary.LittleEndian, x); return h }
func (h *hostile) str(s string) *hostile { h.u64(uint64(len(s))); h.WriteString(s); return h }
func header(nt, nkv uint64) *hostile {
	h := &hostile{}
	h.WriteString("GGUF")
	return h.u32(3).u64(nt).u64(nkv)
}

func TestHostileInputs(t *testing.T) {
	good := sampleBytes(t, 0)
	cases := []struct {
		name string
		data []byte
		want error
		msg  string
	}{
		{"empty", nil, gguf.ErrTruncated, "the magic"},
		{"magic", []byte("GGML\x03\x00\x00\x00"), gguf.ErrMagic, "invalid magic"},
		{"version 1", append([]byte("GGUF"), 1, 0, 0, 0), gguf.ErrVersion, "version 1"},
		{"version 0", append([]byte("GGUF"), 0, 0, 0, 0), gguf.ErrVersion, "bad version 0"},
		{"byte-swapped", append([]byte("GGUF"), 0, 0, 0, 3), gguf.ErrVersion, "byte-swapped"},
		{"too new", append([]byte("GGUF"), 4, 0, 0, 0), gguf.ErrVersion, "newer"},
		{"tensor count 2^60", header(1<<60, 0).Bytes(), gguf.ErrTooLarge, "tensor count 2^60"},
		{"kv count 2^60", header(0, 1<<60).Bytes(), gguf.ErrTooLarge, "key-value count 2^60"},
		{"key length 2^60", header(0, 1).u64(1 << 60).u64(0).Bytes(), gguf.ErrTooLarge, "length 2^60"},
		{"empty key", header(0, 1).str("").u32(4).u32(1).Bytes(), gguf.ErrKey, "empty"},
		{"bad value type", header(0, 1).str("k").u32(13).u32(1).Bytes(), gguf.ErrValueType, "invalid value type 13"},
		{"nested array", header(0, 1).str("k").u32(9).u32(9).u64(1).Bytes(), gguf.ErrValueType, "nested arrays"},
		{"array 2^60 elements", header(0, 1).str("k").u32(9).u32(4).u64(1 << 60).Bytes(), gguf.ErrTooLarge, "2^60"},
		{"array longer than file", header(0, 1).str("k").u32(9).u32(4).u64(1000).u32(1).Bytes(), gguf.ErrTooLarge, "exceeds"},
		{"string array 2^40", header(0, 1).str("k").u32(9).u32(8).u64(1 << 40).Bytes(), gguf.ErrTooLarge, "2^40"},
		{"string element 2^50", header(0, 1).str("k").u32(9).u32(8).u64(2).u64(1 << 50).u64(0).Bytes(), gguf.ErrTooLarge, "element 0"},
		{"duplicate key", header(0, 2).str("k").u32(4).u32(1).str("k").u32(4).u32(2).Bytes(), gguf.ErrDuplicateKey, `"k"`},
		{"alignment type", header(0, 1).str("general.alignment").u32(5).u32(64).Bytes(), gguf.ErrAlignment, "must be u32"},
		{"alignment 0", header(0, 1).str("general.alignment").u32(4).u32(0).Bytes(), gguf.ErrAlignment, "not a power of 2"},
		{"alignment 48", header(0, 1).str("general.alignment").u32(4).u32(48).Bytes(), gguf.ErrAlignment, "not a power of 2"},
		{"tensor name 64 bytes", header(1, 0).str(strings.Repeat("x", 64)).u32(1).u64(1).u32(0).u64(0).Bytes(), gguf.ErrTensorName, "64 bytes"},
		{"5 dims", header(1, 0).str("t").u32(5).u64(0).u64(0).Bytes(), gguf.ErrShape, "5 dimensions"},
		{"negative dim", header(1, 0).str("t").u32(2).u64(4).u64(1 << 63).u32(0).u64(0).Bytes(), gguf.ErrShape, "negative"},
		{"element overflow", header(1, 0).str("t").u32(2).u64(1 << 32).u64(1 << 31).u32(0).u64(0).Bytes(), gguf.ErrShape, "too many elements"},
		{"byte overflow", header(1, 0).str("t").u32(2).u64(1 << 40).u64(1 << 20).u32(28).u64(0).Bytes(), gguf.ErrTooLarge, "overflows"},
		{"type 43", header(1, 0).str("t").u32(1).u64(4).u32(43).u64(0).Bytes(), gguf.ErrTensorType, "invalid type 43"},
		{"removed type", header(1, 0).str("t").u32(1).u64(32).u32(4).u64(0).Bytes(), gguf.ErrTensorType, "no longer supports"},
		{"row not a block multiple", header(1, 0).str("t").u32(1).u64(30).u32(2).u64(0).Bytes(), gguf.ErrShape, "multiple of the block size 32"},
		{"duplicate tensor", header(2, 0).str("t").u32(1).u64(4).u32(0).u64(0).str("t").u32(1).u64(4).u32(0).u64(32).Bytes(), gguf.ErrDuplicateName, `"t"`},
		{"misaligned offset", withPad(header(2, 0).str("a").u32(1).u64(4).u32(0).u64(0).str("b").u32(1).u64(4).u32(0).u64(16), 64), gguf.ErrTensorOffset, `"b" has offset 16, expected 32`},
		{"overlapping tensors", withPad(header(2, 0).str("a").u32(1).u64(16).u32(0).u64(0).str("b").u32(1).u64(4).u32(0).u64(0), 128), gguf.ErrTensorOffset, `"b" has offset 0`},
		{"tensor past end", withPad(header(1, 0).str("a").u32(1).u64(1024).u32(0).u64(0), 16), gguf.ErrOutOfBounds, `"a"`},
		{"data section past end", header(1, 0).str("a").u32(1).u64(1).u32(0).u64(0).Bytes(), gguf.ErrTruncated, "data section"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, err := parse(c.data)
			var fe *gguf.FormatError
			if !errors.As(err, &fe) {
				t.Fatalf("want a *FormatError, got %v", err)
			}
			if !errors.Is(err, c.want) || !strings.Contains(err.Error(), c.msg) || !strings.Contains(err.Error(), "at byte 0x") {
				t.Fatalf("want %v mentioning %q, got %v", c.want, c.msg, err)
			}
		})
	}
	// the offset points at the faulty field
	_, err := parse(header(1, 0).str("t").u32(5).u64(0).u64(0).Bytes())
	var fe *gguf.FormatError
	if !errors.As(err, &fe) || fe.Off != 24+8+1 {
		t.Fatalf("offset of the n_dims field: %v", err)
	}
	if _, err := parse(good); err != nil {
		t.Fatal(err)
	}
}

func withPad(h *hostile, n int) []byte {
	for h.Len()%32 != 0 {
		h.WriteByte(0)
	}
	h.Write(make([]byte, n))
	return h.Bytes()
}

// Truncating a valid file anywhere gives an error, never a panic, and never
// allocates much more than the bytes that are there.
func TestTruncationEverywhere(t *testing.T) {
	good := sampleBytes(t, 0)
	f, err := parse(good)
	must(t, err)
	dataStart := int(f.DataOffset)
	step := 1
	if testing.Short() {
		step = 7
	}
	for n := 0; n < len(good); n += step {
		var before, after runtime.MemStats
		runtime.ReadMemStats(&before)
		_, err := parse(good[:n])
		runtime.ReadMemStats(&after)
		if n < len(good)-int(f.Tensors[len(f.Tensors)-1].Size) && err == nil {
			t.Fatalf("truncated at %d of %d (data at %d): no error", n, len(good), dataStart)
		}
		if err != nil {
			var fe *gguf.FormatError
			if !errors.As(err, &fe) {
				t.Fatalf("truncated at %d: %T %v", n, err, err)
			}
		}
		if alloc := after.TotalAlloc - before.TotalAlloc; alloc > uint64(64*n+64<<10) {
			t.Fatalf("truncated at %d bytes: allocated %d bytes", n, alloc)
		}
	}
}

// Inflated counts and lengths in a real file are refused without
// allocating what they claim.
func TestInflatedFieldsDoNotAllocate(t *testing.T) {
	good := sampleBytes(t, 0)
	// the tensor count, the pair count, the first key's length and the
	// first string value's length, each set to 2^60
	for _, off := range []int{8, 16, 24, 56} {
		b := append([]byte(nil), good...)
		binary.LittleEndian.PutUint64(b[off:], 1<<60)
		var before, after runtime.MemStats
		runtime.ReadMemStats(&before)
		_, err := parse(b)
		runtime.ReadMemStats(&after)
		if err == nil {
			t.Errorf("2^60 at %d accepted", off)
		}
		if alloc := after.TotalAlloc - before.TotalAlloc; alloc > uint64(64*len(b)+64<<10) {
			t.Errorf("2^60 at %d: allocated %d bytes", off, alloc)
		}
	}
}

func TestOpenNamesFile(t *testing.T) {
	path := t.TempDir() + "/bad.gguf"
	must(t, os.WriteFile(path, []byte("GGUF\x01\x00\x00\x00"), 0o644))
	_, err := gguf.Open(path)
	if err == nil || !strings.Contains(err.Error(), path) {
		t.Fatalf("got %v", err)
	}
}

// A Value prints as its value (fmt.Stringer), as slog.Value does.
func TestValuePrints(t *testing.T) {
	arr, err := gguf.Array([]uint32{1, 2, 3})
	if err != nil {
		t.Fatal(err)
	}
	long := make([]int32, 40)
	longArr, err := gguf.Array(long)
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		v    gguf.Value
		want string
		kind gguf.ValueType
	}{
		{gguf.Uint32(7), "7", gguf.TypeUint32},
		{gguf.String("llama"), `"llama"`, gguf.TypeString},
		{gguf.Bool(true), "true", gguf.TypeBool},
		{arr, "[1, 2, 3]", gguf.TypeArray},
		{longArr, "[0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, ...]", gguf.TypeArray},
	} {
		if got := fmt.Sprint(c.v); got != c.want || c.v.Kind() != c.kind {
			t.Errorf("%v (%s): printed %q, want %q (%s)", c.v, c.v.Kind(), got, c.want, c.kind)
		}
	}
	if s, ok := gguf.String("x").Str(); !ok || s != "x" {
		t.Errorf("Str() = %q, %v", s, ok)
	}
	if _, ok := gguf.Uint32(1).Str(); ok {
		t.Error("Str() of a number")
	}
}

// The iterators walk what the slices hold, and stop when asked.
func TestIterators(t *testing.T) {
	w := gguf.NewWriter()
	for _, k := range []string{"a.x", "b.y", "c.z"} {
		if err := w.Set(k, gguf.Uint32(1)); err != nil {
			t.Fatal(err)
		}
	}
	for _, n := range []string{"blk.10.a.weight", "blk.2.a.weight", "token_embd.weight"} {
		if err := w.AddTensorBytes(n, ggml.TypeF32, []int64{1}, make([]byte, 4)); err != nil {
			t.Fatal(err)
		}
	}
	path := filepath.Join(t.TempDir(), "it.gguf")
	if err := w.WriteFile(path); err != nil {
		t.Fatal(err)
	}
	m, err := gguf.OpenModel(path)
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	var keys []string
	for k := range m.Files[0].Pairs() {
		keys = append(keys, k)
		if k == "b.y" {
			break
		}
	}
	if strings.Join(keys, " ") != "a.x b.y" {
		t.Errorf("pairs %v", keys)
	}
	var names []string
	for w := range m.All() {
		names = append(names, w.Name)
	}
	if strings.Join(names, " ") != "token_embd.weight blk.2.a.weight blk.10.a.weight" {
		t.Errorf("weights %v", names)
	}
}

// An array whose elements end the file reads back, however few bytes they
// are: none for an empty array (a reader asked for no bytes at the file's
// end may say EOF), and none for an empty last string; the writer copies
// each.
func TestArrayEndsFile(t *testing.T) {
	cases := []struct {
		name string
		file []byte
		want string
	}{
		{"empty u8 array", header(0, 1).str("k").u32(9).u32(0).u64(0).Bytes(), "[]"},
		{"empty string array", header(0, 1).str("k").u32(9).u32(8).u64(0).Bytes(), "[]"},
		{"empty last string", header(0, 1).str("k").u32(9).u32(8).u64(2).str("a").str("").Bytes(), `["a", ""]`},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			f, err := parse(c.file)
			if err != nil {
				t.Fatal(err)
			}
			v, ok := f.Lookup("k")
			if !ok {
				t.Fatal("no key k")
			}
			if got := v.Format(-1); got != c.want {
				t.Errorf("k reads %s, want %s", got, c.want)
			}
			if v.ElemType() == gguf.TypeString {
				ss, err := v.Strings()
				if err != nil || uint64(len(ss)) != v.Len() {
					t.Fatalf("strings %q, %v", ss, err)
				}
				for i := range v.Len() {
					if s, err := v.StringAt(i); err != nil || s != ss[i] {
						t.Errorf("string %d: %q, %v; want %q", i, s, err, ss[i])
					}
				}
			} else if b, err := v.ArrayBytes(); err != nil || len(b) != 0 {
				t.Errorf("bytes %v, %v", b, err)
			}
			w := gguf.NewWriter()
			if err := w.Set("k", v); err != nil {
				t.Fatalf("writer: %v", err)
			}
		})
	}
}
