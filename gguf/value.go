package gguf

import (
	"encoding/binary"
	"fmt"
	"math"
	"strconv"
	"strings"
	"sync"
)

// ValueType is a GGUF metadata value type (enum gguf_type).
type ValueType uint32

// The 13 GGUF value types.
const (
	TypeUint8   ValueType = 0
	TypeInt8    ValueType = 1
	TypeUint16  ValueType = 2
	TypeInt16   ValueType = 3
	TypeUint32  ValueType = 4
	TypeInt32   ValueType = 5
	TypeFloat32 ValueType = 6
	TypeBool    ValueType = 7
	TypeString  ValueType = 8
	TypeArray   ValueType = 9
	TypeUint64  ValueType = 10
	TypeInt64   ValueType = 11
	TypeFloat64 ValueType = 12
	typeCount   ValueType = 13

	// TypeInvalid is the kind of the zero Value, which holds nothing: no
	// accessor takes it and a Writer refuses it.
	TypeInvalid ValueType = math.MaxUint32
)

var typeNames = [typeCount]string{"u8", "i8", "u16", "i16", "u32", "i32", "f32", "bool", "str", "arr", "u64", "i64", "f64"}

// String is gguf_type_name.
func (t ValueType) String() string {
	if t < typeCount {
		return typeNames[t]
	}
	if t == TypeInvalid {
		return "invalid"
	}
	return fmt.Sprintf("type(%d)", uint32(t))
}

// Size is the encoded size of one element (0 for strings and arrays).
func (t ValueType) Size() int {
	switch t {
	case TypeUint8, TypeInt8, TypeBool:
		return 1
	case TypeUint16, TypeInt16:
		return 2
	case TypeUint32, TypeInt32, TypeFloat32:
		return 4
	case TypeUint64, TypeInt64, TypeFloat64:
		return 8
	}
	return 0
}

// Value is a metadata value: a scalar, or an array of one element type.
// Arrays are decoded from the file only when asked for; a Value read from a
// file stays usable while the file is open.
type Value struct {
	valid bool      // made by a constructor or read from a file: the zero Value is not
	typ   ValueType // the scalar type, or the element type of an array
	array bool
	bits  uint64 // numeric scalars, little-endian bits
	str   string // string scalars
	arr   *arrayData
}

// arrayData is an array's elements: either in memory (raw fixed-size
// elements, or strings) or still in the file at off.
type arrayData struct {
	n    uint64
	raw  []byte   // fixed-size elements, when in memory
	strs []string // string elements, when in memory
	off  int64    // file offset of the first element (when src != nil)
	size uint64   // encoded size in bytes
	src  *File

	once   sync.Once
	offs   []int64 // string element offsets, built on first use
	offErr error
}

// Kind is the value's type: TypeArray for arrays (see ElemType).
func (v Value) Kind() ValueType {
	if !v.valid {
		return TypeInvalid
	}
	if v.array {
		return TypeArray
	}
	return v.typ
}

// ElemType is the element type of an array, or the type of a scalar.
func (v Value) ElemType() ValueType {
	if !v.valid {
		return TypeInvalid
	}
	return v.typ
}

// IsArray reports whether the value is an array.
func (v Value) IsArray() bool { return v.array }

// Len is the number of array elements (1 for scalars).
func (v Value) Len() uint64 {
	switch {
	case !v.valid:
		return 0
	case v.array:
		return v.arr.n
	}
	return 1
}

// Scalar constructors, used by the writer and by tests.

// Uint8 makes a u8 value.
func Uint8(x uint8) Value { return Value{valid: true, typ: TypeUint8, bits: uint64(x)} }

// Int8 makes an i8 value.
func Int8(x int8) Value { return Value{valid: true, typ: TypeInt8, bits: uint64(uint8(x))} }

// Uint16 makes a u16 value.
func Uint16(x uint16) Value { return Value{valid: true, typ: TypeUint16, bits: uint64(x)} }

// Int16 makes an i16 value.
func Int16(x int16) Value { return Value{valid: true, typ: TypeInt16, bits: uint64(uint16(x))} }

// Uint32 makes a u32 value.
func Uint32(x uint32) Value { return Value{valid: true, typ: TypeUint32, bits: uint64(x)} }

// Int32 makes an i32 value.
func Int32(x int32) Value { return Value{valid: true, typ: TypeInt32, bits: uint64(uint32(x))} }

// Float32 makes an f32 value.
func Float32(x float32) Value {
	return Value{valid: true, typ: TypeFloat32, bits: uint64(math.Float32bits(x))}
}

// Bool makes a bool value.
func Bool(x bool) Value {
	if x {
		return Value{valid: true, typ: TypeBool, bits: 1}
	}
	return Value{valid: true, typ: TypeBool}
}

// String makes a str value (any bytes, kept exactly).
func String(s string) Value { return Value{valid: true, typ: TypeString, str: s} }

// Uint64 makes a u64 value.
func Uint64(x uint64) Value { return Value{valid: true, typ: TypeUint64, bits: x} }

// Int64 makes an i64 value.
func Int64(x int64) Value { return Value{valid: true, typ: TypeInt64, bits: uint64(x)} }

// Float64 makes an f64 value.
func Float64(x float64) Value { return Value{valid: true, typ: TypeFloat64, bits: math.Float64bits(x)} }

// Array makes an array value from a slice of uint8, int8, uint16, int16,
// uint32, int32, float32, bool, string, uint64, int64 or float64.
func Array(elems any) (Value, error) {
	var typ ValueType
	var raw []byte
	put := func(t ValueType, n int, f func(b []byte, i int)) {
		typ = t
		raw = make([]byte, n*t.Size())
		for i := 0; i < n; i++ {
			f(raw[i*t.Size():], i)
		}
	}
	le := binary.LittleEndian
	switch s := elems.(type) {
	case []uint8:
		put(TypeUint8, len(s), func(b []byte, i int) { b[0] = s[i] })
	case []int8:
		put(TypeInt8, len(s), func(b []byte, i int) { b[0] = byte(s[i]) })
	case []uint16:
		put(TypeUint16, len(s), func(b []byte, i int) { le.PutUint16(b, s[i]) })
	case []int16:
		put(TypeInt16, len(s), func(b []byte, i int) { le.PutUint16(b, uint16(s[i])) })
	case []uint32:
		put(TypeUint32, len(s), func(b []byte, i int) { le.PutUint32(b, s[i]) })
	case []int32:
		put(TypeInt32, len(s), func(b []byte, i int) { le.PutUint32(b, uint32(s[i])) })
	case []float32:
		put(TypeFloat32, len(s), func(b []byte, i int) { le.PutUint32(b, math.Float32bits(s[i])) })
	case []bool:
		put(TypeBool, len(s), func(b []byte, i int) {
			if s[i] {
				b[0] = 1
			}
		})
	case []uint64:
		put(TypeUint64, len(s), func(b []byte, i int) { le.PutUint64(b, s[i]) })
	case []int64:
		put(TypeInt64, len(s), func(b []byte, i int) { le.PutUint64(b, uint64(s[i])) })
	case []float64:
		put(TypeFloat64, len(s), func(b []byte, i int) { le.PutUint64(b, math.Float64bits(s[i])) })
	case []string:
		cp := append([]string(nil), s...)
		var size uint64
		for _, x := range cp {
			size += 8 + uint64(len(x))
		}
		return Value{valid: true, typ: TypeString, array: true, arr: &arrayData{n: uint64(len(cp)), strs: cp, size: size}}, nil
	default:
		return Value{}, fmt.Errorf("gguf: no GGUF array type for %T", elems)
	}
	return Value{valid: true, typ: typ, array: true, arr: &arrayData{n: uint64(len(raw) / typ.Size()), raw: raw, size: uint64(len(raw))}}, nil
}

func (v Value) mismatch(want string) error {
	return fmt.Errorf("%w: %s is not %s", ErrTypeMismatch, v.TypeName(), want)
}

// TypeName is "u32", "str", or "arr[str,262144]".
func (v Value) TypeName() string {
	if !v.valid {
		return "invalid (the zero Value)"
	}
	if v.array {
		return fmt.Sprintf("arr[%s,%d]", v.typ, v.arr.n)
	}
	return v.typ.String()
}

// Uint returns an unsigned scalar (u8, u16, u32, u64) or a non-negative
// signed one, widened; ok is false for any other value.
func (v Value) Uint() (uint64, bool) {
	if v.array || !v.valid {
		return 0, false
	}
	switch v.typ {
	case TypeUint8, TypeUint16, TypeUint32, TypeUint64:
		return v.bits, true
	case TypeInt8, TypeInt16, TypeInt32, TypeInt64:
		if i, _ := v.Int(); i >= 0 {
			return uint64(i), true
		}
	}
	return 0, false
}

// Int returns an integer scalar, sign-extended; ok is false for non-integers
// and for u64 values above the int64 range.
func (v Value) Int() (int64, bool) {
	if v.array || !v.valid {
		return 0, false
	}
	switch v.typ {
	case TypeInt8:
		return int64(int8(v.bits)), true
	case TypeInt16:
		return int64(int16(v.bits)), true
	case TypeInt32:
		return int64(int32(v.bits)), true
	case TypeInt64:
		return int64(v.bits), true
	case TypeUint8, TypeUint16, TypeUint32:
		return int64(v.bits), true
	case TypeUint64:
		if v.bits <= math.MaxInt64 {
			return int64(v.bits), true
		}
	}
	return 0, false
}

// Float returns an f32 or f64 scalar.
func (v Value) Float() (float64, bool) {
	if v.array || !v.valid {
		return 0, false
	}
	switch v.typ {
	case TypeFloat32:
		return float64(math.Float32frombits(uint32(v.bits))), true
	case TypeFloat64:
		return math.Float64frombits(v.bits), true
	}
	return 0, false
}

// Bool returns a bool scalar.
func (v Value) Bool() (bool, bool) {
	if v.array || !v.valid || v.typ != TypeBool {
		return false, false
	}
	return v.bits != 0, true
}

// Str returns a string scalar (byte-exact).
func (v Value) Str() (string, bool) {
	if v.array || !v.valid || v.typ != TypeString {
		return "", false
	}
	return v.str, true
}

// Bits returns a numeric scalar's raw little-endian bits.
func (v Value) Bits() (uint64, bool) {
	if v.array || !v.valid || v.typ == TypeString {
		return 0, false
	}
	return v.bits, true
}

// raw returns a fixed-size array's encoded elements, reading them from the
// file the first time.
func (v Value) raw() ([]byte, error) {
	a := v.arr
	if a.raw != nil || a.src == nil {
		return a.raw, nil
	}
	return a.read()
}

// read reads the array's encoded bytes from its file.
func (a *arrayData) read() ([]byte, error) {
	ps, err := a.pieces()
	if err != nil {
		return nil, err
	}
	return joinBytes(ps, a.size), nil
}

// pieces reads the array's encoded bytes from its file, as they arrive
// (readClaimed). An empty array reads nothing: it may start where the
// file ends, and a reader asked for no bytes there may say EOF.
func (a *arrayData) pieces() ([][]byte, error) {
	if a.size == 0 {
		return [][]byte{{}}, nil
	}
	ps, err := readClaimed(a.src.r, a.off, a.size)
	if err != nil {
		return nil, a.src.readErr("array", a.off, err)
	}
	return ps, nil
}

// readErr is an error reading what at off after the parse: it names the
// file.
func (f *File) readErr(what string, off int64, err error) error {
	if f.Path != "" {
		return fmt.Errorf("gguf: %s: read %s at byte %#x: %w", f.Path, what, off, err)
	}
	return fmt.Errorf("gguf: read %s at byte %#x: %w", what, off, err)
}

// ArrayBytes returns the encoded elements of a fixed-size array.
func (v Value) ArrayBytes() ([]byte, error) {
	if !v.array || v.typ.Size() == 0 {
		return nil, v.mismatch("an array of fixed-size elements")
	}
	return v.raw()
}

// Ints returns an integer array's elements, sign- or zero-extended (u64
// above the int64 range is an error).
func (v Value) Ints() ([]int64, error) {
	if !v.array {
		return nil, v.mismatch("an array")
	}
	b, err := v.ArrayBytes()
	if err != nil {
		return nil, err
	}
	out := make([]int64, v.arr.n)
	le := binary.LittleEndian
	for i := range out {
		switch v.typ {
		case TypeUint8:
			out[i] = int64(b[i])
		case TypeInt8:
			out[i] = int64(int8(b[i]))
		case TypeUint16:
			out[i] = int64(le.Uint16(b[2*i:]))
		case TypeInt16:
			out[i] = int64(int16(le.Uint16(b[2*i:])))
		case TypeUint32:
			out[i] = int64(le.Uint32(b[4*i:]))
		case TypeInt32:
			out[i] = int64(int32(le.Uint32(b[4*i:])))
		case TypeInt64:
			out[i] = int64(le.Uint64(b[8*i:]))
		case TypeUint64:
			u := le.Uint64(b[8*i:])
			if u > math.MaxInt64 {
				return nil, fmt.Errorf("gguf: element %d (%d) exceeds int64", i, u)
			}
			out[i] = int64(u)
		default:
			return nil, v.mismatch("an integer array")
		}
	}
	return out, nil
}

// Floats returns an f32 or f64 array's elements.
func (v Value) Floats() ([]float64, error) {
	if !v.array || (v.typ != TypeFloat32 && v.typ != TypeFloat64) {
		return nil, v.mismatch("a float array")
	}
	b, err := v.raw()
	if err != nil {
		return nil, err
	}
	out := make([]float64, v.arr.n)
	for i := range out {
		if v.typ == TypeFloat32 {
			out[i] = float64(math.Float32frombits(binary.LittleEndian.Uint32(b[4*i:])))
		} else {
			out[i] = math.Float64frombits(binary.LittleEndian.Uint64(b[8*i:]))
		}
	}
	return out, nil
}

// Bools returns a bool array's elements.
func (v Value) Bools() ([]bool, error) {
	if !v.array || v.typ != TypeBool {
		return nil, v.mismatch("a bool array")
	}
	b, err := v.raw()
	if err != nil {
		return nil, err
	}
	out := make([]bool, len(b))
	for i, x := range b {
		out[i] = x != 0
	}
	return out, nil
}

// Strings returns a string array's elements (byte-exact).
func (v Value) Strings() ([]string, error) {
	if !v.array || v.typ != TypeString {
		return nil, v.mismatch("a string array")
	}
	a := v.arr
	if a.src == nil {
		return append([]string(nil), a.strs...), nil
	}
	if err := a.index(); err != nil {
		return nil, err
	}
	ps, err := a.pieces()
	if err != nil {
		return nil, err
	}
	// one allocation for all the string bytes
	all := joinString(ps, a.size)
	out := make([]string, a.n)
	for i := range out {
		start := a.offs[i] - a.off + 8
		end := int64(a.size)
		if i+1 < len(a.offs) {
			end = a.offs[i+1] - a.off
		}
		out[i] = all[start:end]
	}
	return out, nil
}

// StringAt returns element i of a string array without decoding the rest.
func (v Value) StringAt(i uint64) (string, error) {
	if !v.array || v.typ != TypeString {
		return "", v.mismatch("a string array")
	}
	a := v.arr
	if i >= a.n {
		return "", fmt.Errorf("gguf: index %d out of range [0, %d)", i, a.n)
	}
	if a.src == nil {
		return a.strs[i], nil
	}
	if err := a.index(); err != nil {
		return "", err
	}
	start := a.offs[i] + 8
	end := a.off + int64(a.size)
	if i+1 < a.n {
		end = a.offs[i+1]
	}
	if end == start {
		return "", nil // (an empty last string may end the file: nothing to read)
	}
	ps, err := readClaimed(a.src.r, start, uint64(end-start))
	if err != nil {
		return "", a.src.readErr(fmt.Sprintf("string %d of an array", i), start, err)
	}
	return joinString(ps, uint64(end-start)), nil
}

// index records the offset of every string of a file-backed string array.
func (a *arrayData) index() error {
	a.once.Do(func() {
		sc := newScanner(a.src.r, a.src.size, a.off)
		// (n bounds nothing yet: the offsets grow with the lengths read)
		offs := make([]int64, 0, reserve(a.n))
		for range a.n {
			at := sc.off
			n, err := sc.u64()
			if err == nil {
				err = sc.skip(n)
			}
			if err != nil {
				a.offErr = a.src.readErr("a string array", at, err)
				return
			}
			offs = appendCounted(offs, at, a.n)
		}
		a.offs = offs
	})
	return a.offErr
}

// String renders the value for people, as Format does with arrays cut
// after 16 elements.
func (v Value) String() string { return v.Format(16) }

// Format renders a value for people: scalars in full, arrays as
// "[a, b, c, ...]" with at most max elements (all when max < 0), strings
// quoted.
func (v Value) Format(max int) string {
	if !v.valid {
		return "<invalid>"
	}
	if !v.array {
		switch v.typ {
		case TypeString:
			return strconv.Quote(v.str)
		case TypeBool:
			b, _ := v.Bool()
			return strconv.FormatBool(b)
		case TypeFloat32:
			f, _ := v.Float()
			return strconv.FormatFloat(f, 'g', -1, 32)
		case TypeFloat64:
			f, _ := v.Float()
			return strconv.FormatFloat(f, 'g', -1, 64)
		case TypeUint8, TypeUint16, TypeUint32, TypeUint64:
			return strconv.FormatUint(v.bits, 10)
		default:
			i, _ := v.Int()
			return strconv.FormatInt(i, 10)
		}
	}
	n := v.arr.n
	show := n
	if max >= 0 && uint64(max) < n {
		show = uint64(max)
	}
	var parts []string
	switch {
	case v.typ == TypeString:
		for i := uint64(0); i < show; i++ {
			s, err := v.StringAt(i)
			if err != nil {
				return "<" + err.Error() + ">"
			}
			parts = append(parts, strconv.Quote(s))
		}
	default:
		b, err := v.raw()
		if err != nil {
			return "<" + err.Error() + ">"
		}
		sz := v.typ.Size()
		for i := uint64(0); i < show; i++ {
			var bits uint64
			for k := sz - 1; k >= 0; k-- {
				bits = bits<<8 | uint64(b[int(i)*sz+k])
			}
			parts = append(parts, Value{valid: true, typ: v.typ, bits: bits}.Format(0))
		}
	}
	if show < n {
		parts = append(parts, "...")
	}
	return "[" + strings.Join(parts, ", ") + "]"
}
