package synth

import (
	"github.com/ggload/ggload/gguf"
	"github.com/ggload/ggload/internal/replay/arch"
)

// KeyTypes is the convention a synthesized file writes its metadata with.
type KeyTypes int

const (
	// ConverterTypes (the zero value) writes each key as the pinned
	// converter does (gguf-py's GGUFWriter.add_ methods): the types real
	// model files have. A list of ints is an INT32 array, for one.
	ConverterTypes KeyTypes = iota
	// LoaderTypes writes each key with the type llama.cpp's loader reads
	// it into (a uint32_t array as UINT32 elements): where the two
	// differ, both must load.
	LoaderTypes
)

func (t KeyTypes) String() string {
	if t == LoaderTypes {
		return "loader-types"
	}
	return "converter-types"
}

// asConverter retypes a value chosen with the loader's types (what the
// replay asked for) to what the converter writes for key: the scalar
// converted to the converter's scalar type, an array's elements to its
// element type. A form the converter never writes is kept.
func asConverter(key, archName string, v gguf.Value) gguf.Value {
	ck, ok := arch.Converter(key, archName)
	if !ok {
		return v
	}
	if !v.IsArray() {
		if t, ok := ck.ScalarType(); ok {
			if nv, ok := retypeScalar(v, t); ok {
				return nv
			}
		}
		return v
	}
	t, ok := ck.ElemType()
	if !ok || t == v.ElemType() {
		return v
	}
	if nv, ok := retypeArray(v, t); ok {
		return nv
	}
	return v
}

// retypeScalar converts an integer or bool scalar to integer type t.
func retypeScalar(v gguf.Value, t gguf.ValueType) (gguf.Value, bool) {
	if v.Kind() == t {
		return v, true
	}
	i, ok := v.Int()
	if !ok {
		b, isBool := v.Bool()
		if !isBool {
			return v, false
		}
		i = 0
		if b {
			i = 1
		}
	}
	switch t {
	case gguf.TypeUint32:
		return gguf.Uint32(uint32(i)), true
	case gguf.TypeInt32:
		return gguf.Int32(int32(i)), true
	case gguf.TypeUint64:
		return gguf.Uint64(uint64(i)), true
	case gguf.TypeBool:
		return gguf.Bool(i != 0), true
	}
	return v, false
}

// retypeArray converts an integer or bool array's elements to type t.
func retypeArray(v gguf.Value, t gguf.ValueType) (gguf.Value, bool) {
	var is []int64
	switch v.ElemType() {
	case gguf.TypeBool:
		bs, err := v.Bools()
		if err != nil {
			return v, false
		}
		for _, b := range bs {
			x := int64(0)
			if b {
				x = 1
			}
			is = append(is, x)
		}
	case gguf.TypeString, gguf.TypeFloat32, gguf.TypeFloat64:
		return v, false
	default:
		var err error
		if is, err = v.Ints(); err != nil {
			return v, false
		}
	}
	var elems any
	switch t {
	case gguf.TypeInt32:
		elems = convertInts[int32](is)
	case gguf.TypeUint32:
		elems = convertInts[uint32](is)
	case gguf.TypeUint64:
		elems = convertInts[uint64](is)
	case gguf.TypeBool:
		xs := make([]bool, len(is))
		for i, x := range is {
			xs[i] = x != 0
		}
		elems = xs
	default:
		return v, false
	}
	nv, err := gguf.Array(elems)
	return nv, err == nil
}

// convertInts converts integers to T as C converts them (bit for bit).
func convertInts[T int32 | uint32 | uint64](is []int64) []T {
	xs := make([]T, len(is))
	for i, x := range is {
		xs[i] = T(x)
	}
	return xs
}
