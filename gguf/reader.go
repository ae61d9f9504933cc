// Port of llama.cpp ggml/src/gguf.cpp (v0.5.0): gguf_init_from_file's
// reading and checks.

package gguf

import (
	"errors"
	"fmt"
	"io"
	"iter"
	"math"
	"math/bits"
	"os"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/ggload/ggload/ggml/gtype"
)

// Limits of the pinned gguf.cpp.
const (
	Magic            = "GGUF"
	Version          = 3       // newest version read and written
	DefaultAlignment = 32      // when general.alignment is absent
	MaxStringLength  = 1 << 30 // GGUF_MAX_STRING_LENGTH
	MaxArrayElements = 1 << 30 // GGUF_MAX_ARRAY_ELEMENTS
	MaxTensorName    = 63      // GGML_MAX_NAME - 1
	MaxDims          = 4

	// KeyAlignment is the key that sets the data alignment.
	KeyAlignment = "general.alignment"
)

// KV is one metadata pair.
type KV struct {
	Key   string
	Value Value
	Off   int64 // byte offset of the pair in the file
}

// TensorInfo describes one tensor of a file.
type TensorInfo struct {
	Name    string
	NDims   int         // dimensions as written (0 to 4; ggml treats 0 as a scalar)
	Shape   gtype.Shape // ne[], padded with 1s
	Type    gtype.Type
	Offset  uint64 // from the start of the data section, as written
	Size    int64  // bytes (ggml_nbytes)
	InfoOff int64  // byte offset of this tensor's info record
}

// File is a parsed GGUF file: header, metadata and tensor infos. Tensor data
// is read on demand through Data. Like Model, it is safe for concurrent
// reads until Close.
type File struct {
	Path       string // set by Open
	Version    uint32
	KV         []KV
	Tensors    []TensorInfo
	Alignment  uint64
	DataOffset int64  // start of the data section
	DataSize   uint64 // bytes of the data section, alignment padding included
	Size       int64  // file size

	r      io.ReaderAt
	size   int64
	src    Source
	osf    *os.File
	closer io.Closer
	closed sync.Once
	shut   atomic.Bool // Close was called
	keys   map[string]int
	names  map[string]int
}

// Open opens and parses the GGUF file at path. Close releases it.
func Open(path string) (*File, error) { return OpenSource(PathSource(path)) }

// Close closes the file if Open opened it; later calls, and a call on a
// nil *File, do nothing. The metadata and tensor infos stay readable;
// reading tensor data or arrays not decoded yet then fails with an error
// wrapping os.ErrClosed.
func (f *File) Close() error {
	if f == nil {
		return nil
	}
	var err error
	f.closed.Do(func() {
		f.shut.Store(true)
		if f.closer != nil {
			err = f.closer.Close()
		}
	})
	return err
}

// Closed reports whether Close was called (true for a nil *File). A
// closed file is refused by what needs its data, with an error wrapping
// ErrClosed.
func (f *File) Closed() bool { return f == nil || f.shut.Load() }

// NewReader parses a GGUF file of size bytes read through r. r must stay
// readable while values and tensor data are used.
func NewReader(r io.ReaderAt, size int64) (*File, error) {
	if size < 0 {
		return nil, fmt.Errorf("gguf: negative size %d", size)
	}
	p := &parser{sc: newScanner(r, size, 0), f: &File{r: r, size: size, Size: size, src: Source{Reader: r, Size: size}}}
	if err := p.parse(); err != nil {
		return nil, err
	}
	return p.f, nil
}

type parser struct {
	sc      *scanner
	f       *File
	nt, nkv uint64 // the counts of the header
}

// fail turns a scanner error at off into a FormatError.
func (p *parser) fail(off int64, err error, what string) error {
	if errors.Is(err, ErrTruncated) {
		return formatErr(off, ErrTruncated, "file ends in %s (%d bytes)", what, p.sc.size)
	}
	return fmt.Errorf("gguf: reading %s at byte %#x: %w", what, off, err)
}

// parse reads the file's directory: the header, the pairs, the tensor
// infos, and where the data section lies.
func (p *parser) parse() error {
	if err := p.header(); err != nil {
		return err
	}
	if err := p.counts(); err != nil {
		return err
	}
	f := p.f
	// the counts bound nothing yet: room grows with the entries read
	f.KV = make([]KV, 0, reserve(p.nkv))
	f.keys = make(map[string]int, reserve(p.nkv))
	for i := uint64(0); i < p.nkv; i++ {
		if err := p.kv(i); err != nil {
			return err
		}
	}
	if err := p.alignment(); err != nil {
		return err
	}
	f.Tensors = make([]TensorInfo, 0, reserve(p.nt))
	f.names = make(map[string]int, reserve(p.nt))
	for i := uint64(0); i < p.nt; i++ {
		if err := p.tensor(i); err != nil {
			return err
		}
	}
	return p.data()
}

// header reads the magic and the version.
func (p *parser) header() error {
	sc := p.sc
	magic, err := sc.next(4)
	if err != nil {
		return p.fail(0, err, "the magic")
	}
	if string(magic) != Magic {
		return formatErr(0, ErrMagic, "invalid magic %s, expected %q", quote(string(magic)), Magic)
	}
	off := sc.off
	v, err := sc.u32()
	if err != nil {
		return p.fail(off, err, "the version")
	}
	switch {
	case v == 0:
		return formatErr(off, ErrVersion, "bad version 0")
	case v&0xffff == 0:
		return formatErr(off, ErrVersion, "version %#x: a byte-swapped (big-endian) file; only little-endian files are read", v)
	case v == 1:
		return formatErr(off, ErrVersion, "version 1 is no longer supported; convert the file to version 3")
	case v > Version:
		return formatErr(off, ErrVersion, "version %d is newer than the supported %d", v, Version)
	}
	p.f.Version = v
	return nil
}

// counts reads the tensor and key-value counts, each bounded by the
// bytes its entries would need at the least.
func (p *parser) counts() error {
	sc := p.sc
	off := sc.off
	nt, err := sc.u64()
	if err != nil {
		return p.fail(off, err, "the tensor count")
	}
	// each tensor info needs a name length, n_dims, a type and an offset
	if nt > math.MaxInt64 || nt > sc.remain()/24 {
		return shortErr(off, ErrTooLarge, "tensor count %s cannot fit in the %d bytes that follow", pow2(nt), sc.remain())
	}
	off = sc.off
	nkv, err := sc.u64()
	if err != nil {
		return p.fail(off, err, "the key-value count")
	}
	// each pair needs a key length and a type
	if nkv > math.MaxInt64 || nkv > sc.remain()/12 {
		return shortErr(off, ErrTooLarge, "key-value count %s cannot fit in the %d bytes that follow", pow2(nkv), sc.remain())
	}
	p.nt, p.nkv = nt, nkv
	return nil
}

// alignment takes the data alignment from general.alignment, if set.
func (p *parser) alignment() error {
	f := p.f
	f.Alignment = DefaultAlignment
	i, ok := f.keys[KeyAlignment]
	if !ok {
		return nil
	}
	kv := f.KV[i]
	if kv.Value.Kind() != TypeUint32 {
		return formatErr(kv.Off, ErrAlignment, "key %s must be u32, is %s", KeyAlignment, kv.Value.TypeName())
	}
	a := kv.Value.bits
	if a == 0 || a&(a-1) != 0 {
		return formatErr(kv.Off, ErrAlignment, "alignment %d is not a power of 2", a)
	}
	f.Alignment = a
	return nil
}

// data places the data section at the next multiple of the alignment and
// checks that the tensors follow each other in it, each padded to the
// alignment, inside the file.
func (p *parser) data() error {
	f, sc := p.f, p.sc
	f.DataOffset = sc.off
	if p.nt > 0 {
		pad := padTo(uint64(sc.off), f.Alignment)
		if pad > uint64(f.size) {
			return formatErr(sc.off, ErrTruncated, "file ends before the data section (aligned to %d at byte %#x)", f.Alignment, pad)
		}
		f.DataOffset = int64(pad)
	}
	var end uint64
	for i := range f.Tensors {
		t := &f.Tensors[i]
		if t.Offset != end {
			return formatErr(t.InfoOff, ErrTensorOffset, "tensor %s has offset %d, expected %d", quote(t.Name), t.Offset, end)
		}
		padded := padTo(uint64(t.Size), f.Alignment)
		if padded < uint64(t.Size) || end+padded < end {
			return formatErr(t.InfoOff, ErrTooLarge, "tensor %s: data section size overflows", quote(t.Name))
		}
		end += padded
		// llama.cpp's check: the tensor's bytes lie inside the file
		abs := uint64(f.DataOffset) + t.Offset
		if abs < t.Offset || abs+uint64(t.Size) < abs || abs+uint64(t.Size) > uint64(f.size) {
			return shortErr(t.InfoOff, ErrOutOfBounds, "tensor %s data [%d, +%d) is not within the file (%d bytes); the model is corrupted or incomplete", quote(t.Name), abs, t.Size, f.size)
		}
	}
	f.DataSize = end
	return nil
}

func padTo(x, align uint64) uint64 {
	r := x + align - 1
	if r < x {
		return math.MaxUint64
	}
	return r &^ (align - 1)
}

// str reads a length-prefixed string, bounded by GGUF's limit and the file.
// what and i describe it in errors ("key", 3 → "key 3").
func (p *parser) str(what string, i uint64) (string, error) {
	off := p.sc.off
	n, err := p.sc.u64()
	if err == nil && n <= MaxStringLength && n <= p.sc.remain() {
		if n <= scanWindow {
			var b []byte
			if b, err = p.sc.next(int(n)); err == nil {
				return string(b), nil
			}
		} else {
			var s string
			if s, err = p.sc.text(n); err == nil {
				return s, nil
			}
		}
	}
	desc := fmt.Sprintf("%s %d", what, i)
	switch {
	case err != nil:
		return "", p.fail(off, err, desc)
	case n > MaxStringLength:
		return "", formatErr(off, ErrTooLarge, "%s length %s exceeds the maximum %s", desc, pow2(n), pow2(MaxStringLength))
	default:
		return "", shortErr(off, ErrTooLarge, "%s length %s exceeds the %d bytes that follow", desc, pow2(n), p.sc.remain())
	}
}

func (p *parser) kv(i uint64) error {
	f, sc := p.f, p.sc
	off := sc.off
	key, err := p.str("key", i)
	if err != nil {
		return err
	}
	if key == "" {
		return formatErr(off, ErrKey, "key %d is empty", i)
	}
	if j, dup := f.keys[key]; dup {
		return formatErr(off, ErrDuplicateKey, "duplicate key %s (pairs %d and %d)", quote(key), j, i)
	}
	toff := sc.off
	t32, err := sc.u32()
	if err != nil {
		return p.fail(toff, err, "the type of key "+quote(key))
	}
	typ := ValueType(t32)
	var val Value
	if typ == TypeArray {
		eoff := sc.off
		et, err := sc.u32()
		if err != nil {
			return p.fail(eoff, err, "the element type of key "+quote(key))
		}
		noff := sc.off
		n, err := sc.u64()
		if err != nil {
			return p.fail(noff, err, "the length of array "+quote(key))
		}
		elem := ValueType(et)
		if elem >= typeCount || elem == TypeArray {
			what := "invalid element type"
			if elem == TypeArray {
				what = "nested arrays are not supported; element type"
			}
			return formatErr(eoff, ErrValueType, "key %s: %s %d", quote(key), what, et)
		}
		if n > MaxArrayElements {
			return formatErr(noff, ErrTooLarge, "array %s has %s elements, more than the maximum %s", quote(key), pow2(n), pow2(MaxArrayElements))
		}
		if val, err = p.array(key, elem, n, noff); err != nil {
			return err
		}
	} else {
		if typ >= typeCount {
			return formatErr(toff, ErrValueType, "key %s has invalid value type %d", quote(key), t32)
		}
		if val, err = p.scalar(key, typ); err != nil {
			return err
		}
	}
	f.keys[key] = len(f.KV)
	f.KV = appendCounted(f.KV, KV{Key: key, Value: val, Off: off}, p.nkv)
	return nil
}

func (p *parser) scalar(key string, typ ValueType) (Value, error) {
	sc := p.sc
	off := sc.off
	var err error
	v := Value{valid: true, typ: typ}
	switch typ.Size() {
	case 1:
		var b uint8
		b, err = sc.u8()
		v.bits = uint64(b)
		if typ == TypeBool && b != 0 {
			v.bits = 1 // ggml reads any non-zero byte as true
		}
	case 2:
		var x uint16
		x, err = sc.u16()
		v.bits = uint64(x)
	case 4:
		var x uint32
		x, err = sc.u32()
		v.bits = uint64(x)
	case 8:
		v.bits, err = sc.u64()
	default: // string
		v.str, err = p.str("the value of "+quote(key)+", string", 0)
		return v, err
	}
	if err != nil {
		return Value{}, p.fail(off, err, "the value of "+quote(key))
	}
	return v, nil
}

// array records where an array's elements are and skips them; elements are
// decoded only when asked for.
func (p *parser) array(key string, elem ValueType, n uint64, noff int64) (Value, error) {
	sc := p.sc
	start := sc.off
	a := &arrayData{n: n, off: start, src: p.f}
	if sz := elem.Size(); sz > 0 {
		hi, total := bits.Mul64(n, uint64(sz))
		if hi != 0 || total > sc.remain() {
			return Value{}, shortErr(noff, ErrTooLarge, "array %s of %s %s elements exceeds the %d bytes that follow", quote(key), pow2(n), elem, sc.remain())
		}
		a.size = total
		if err := sc.skip(total); err != nil {
			return Value{}, p.fail(start, err, "array "+quote(key))
		}
		if elem == TypeBool {
			// normalise to 0/1 as ggml does, so values compare equal
			raw, err := (Value{valid: true, typ: elem, array: true, arr: a}).raw()
			if err != nil {
				return Value{}, p.fail(start, err, "array "+quote(key))
			}
			for i, b := range raw {
				if b != 0 {
					raw[i] = 1
				}
			}
			a.raw, a.src = raw, nil
		}
		return Value{valid: true, typ: elem, array: true, arr: a}, nil
	}
	// strings: each has an 8-byte length, so n is bounded by the bytes left
	if hi, lo := bits.Mul64(n, 8); hi != 0 || lo > sc.remain() {
		return Value{}, shortErr(noff, ErrTooLarge, "string array %s of %s elements exceeds the %d bytes that follow", quote(key), pow2(n), sc.remain())
	}
	for i := uint64(0); i < n; i++ {
		off := sc.off
		l, err := sc.u64()
		if err != nil {
			return Value{}, p.fail(off, err, fmt.Sprintf("element %d of %s", i, quote(key)))
		}
		if l > MaxStringLength || l > sc.remain() {
			return Value{}, shortErr(off, ErrTooLarge, "element %d of %s has length %s, more than the %d bytes that follow", i, quote(key), pow2(l), sc.remain())
		}
		if err := sc.skip(l); err != nil {
			return Value{}, p.fail(off, err, quote(key))
		}
	}
	a.size = uint64(sc.off - start)
	return Value{valid: true, typ: elem, array: true, arr: a}, nil
}

func (p *parser) tensor(i uint64) error {
	f, sc := p.f, p.sc
	off := sc.off
	name, err := p.str("the name of tensor", i)
	if err != nil {
		return err
	}
	if len(name) > MaxTensorName {
		return formatErr(off, ErrTensorName, "tensor %d name is %d bytes, the limit is %d", i, len(name), MaxTensorName)
	}
	if strings.IndexByte(name, 0) >= 0 {
		return formatErr(off, ErrTensorName, "tensor %d name %s holds a NUL byte", i, quote(name))
	}
	if j, dup := f.names[name]; dup {
		return formatErr(off, ErrDuplicateName, "duplicate tensor name %s (tensors %d and %d)", quote(name), j, i)
	}
	doff := sc.off
	nd, err := sc.u32()
	if err != nil {
		return p.fail(doff, err, "the dimensions of "+quote(name))
	}
	if nd > MaxDims {
		return formatErr(doff, ErrShape, "tensor %s has %d dimensions, at most %d", quote(name), nd, MaxDims)
	}
	t := TensorInfo{Name: name, NDims: int(nd), Shape: gtype.Shape{1, 1, 1, 1}, InfoOff: off}
	for d := uint32(0); d < nd; d++ {
		eoff := sc.off
		x, err := sc.u64()
		if err != nil {
			return p.fail(eoff, err, "the shape of "+quote(name))
		}
		if int64(x) < 0 {
			return formatErr(eoff, ErrShape, "tensor %s dimension %d is negative (%d)", quote(name), d, int64(x))
		}
		t.Shape[d] = int64(x)
	}
	ne := t.Shape
	// gguf.cpp's representability check, including its boundary
	if ne[0] > 0 && ne[1] > 0 && ne[2] > 0 && ne[3] > 0 &&
		(math.MaxInt64/ne[1] <= ne[0] || math.MaxInt64/ne[2] <= ne[0]*ne[1] || math.MaxInt64/ne[3] <= ne[0]*ne[1]*ne[2]) {
		return formatErr(doff, ErrShape, "tensor %s shape %v has too many elements", quote(name), ne)
	}
	toff := sc.off
	ty, err := sc.u32()
	if err != nil {
		return p.fail(toff, err, "the type of "+quote(name))
	}
	t.Type = gtype.Type(int32(ty))
	if int32(ty) < 0 || t.Type >= gtype.TypeCount {
		return formatErr(toff, ErrTensorType, "tensor %s has invalid type %d, must be in [0, %d)", quote(name), int32(ty), int32(gtype.TypeCount))
	}
	if !t.Type.Valid() {
		return formatErr(toff, ErrTensorType, "tensor %s has type %d (%s), which this ggml no longer supports", quote(name), int32(ty), t.Type)
	}
	if ne[0]%t.Type.BlockSize() != 0 {
		return formatErr(toff, ErrShape, "tensor %s of type %s has %d elements per row, not a multiple of the block size %d", quote(name), t.Type, ne[0], t.Type.BlockSize())
	}
	size, err := t.Type.Bytes(ne)
	if err != nil {
		return formatErr(toff, ErrTooLarge, "tensor %s: %v", quote(name), err)
	}
	t.Size = size
	ooff := sc.off
	if t.Offset, err = sc.u64(); err != nil {
		return p.fail(ooff, err, "the offset of "+quote(name))
	}
	f.names[name] = len(f.Tensors)
	f.Tensors = appendCounted(f.Tensors, t, p.nt)
	return nil
}

// Pairs walks the metadata in file order.
func (f *File) Pairs() iter.Seq2[string, Value] {
	return func(yield func(string, Value) bool) {
		for _, kv := range f.KV {
			if !yield(kv.Key, kv.Value) {
				return
			}
		}
	}
}

// Lookup returns the value of key.
func (f *File) Lookup(key string) (Value, bool) {
	i, ok := f.keys[key]
	if !ok {
		return Value{}, false
	}
	return f.KV[i].Value, true
}

// Tensor returns the info of the named tensor.
func (f *File) Tensor(name string) (TensorInfo, bool) {
	i, ok := f.names[name]
	if !ok {
		return TensorInfo{}, false
	}
	return f.Tensors[i], true
}

// Data returns a reader of the tensor's bytes (safe for concurrent use).
func (f *File) Data(t TensorInfo) *io.SectionReader {
	return io.NewSectionReader(f.r, f.DataOffset+int64(t.Offset), t.Size)
}

// ReaderAt is the reader the file was parsed from.
func (f *File) ReaderAt() io.ReaderAt { return f.r }
