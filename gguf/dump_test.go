package gguf_test

import (
	"encoding/binary"
	"fmt"
	"math"
	"strings"
	"testing"
	"unsafe"

	"github.com/ggload/ggload/bindings"
	"github.com/ggload/ggload/ggml"
	"github.com/ggload/ggload/gguf"
)

// dump is a reader-independent view of a GGUF file, to compare our reader
// with ggml's.
type dump struct {
	Version    uint32
	Alignment  uint64
	DataOffset int64
	KV         []dumpKV
	Tensors    []dumpTensor
}

type dumpKV struct {
	Key    string
	Type   string   // "u32", "arr[str]"
	Values []string // every element; floats as bits, strings up to their first NUL (ggml's C API ends them there)
}

type dumpTensor struct {
	Name   string
	Type   int32
	Shape  [4]int64
	Offset uint64
	Size   int64
}

func cstr(s string) string {
	if i := strings.IndexByte(s, 0); i >= 0 {
		return s[:i]
	}
	return s
}

// scalarString renders one element given its type and raw little-endian bits.
func scalarString(t gguf.ValueType, bits uint64) string {
	switch t {
	case gguf.TypeInt8:
		return fmt.Sprint(int8(bits))
	case gguf.TypeInt16:
		return fmt.Sprint(int16(bits))
	case gguf.TypeInt32:
		return fmt.Sprint(int32(bits))
	case gguf.TypeInt64:
		return fmt.Sprint(int64(bits))
	case gguf.TypeFloat32:
		return fmt.Sprintf("f32:%08x", uint32(bits))
	case gguf.TypeFloat64:
		return fmt.Sprintf("f64:%016x", bits)
	case gguf.TypeBool:
		return fmt.Sprint(bits != 0)
	}
	return fmt.Sprint(bits)
}

func ourDump(t testing.TB, f *gguf.File) dump {
	t.Helper()
	d := dump{Version: f.Version, Alignment: f.Alignment, DataOffset: f.DataOffset}
	for _, kv := range f.KV {
		v := kv.Value
		k := dumpKV{Key: kv.Key, Type: v.Kind().String()}
		if v.IsArray() {
			k.Type = "arr[" + v.ElemType().String() + "]"
			if v.ElemType() == gguf.TypeString {
				ss, err := v.Strings()
				if err != nil {
					t.Fatalf("%s: %v", kv.Key, err)
				}
				for _, s := range ss {
					k.Values = append(k.Values, cstr(s))
				}
			} else {
				raw, err := v.ArrayBytes()
				if err != nil {
					t.Fatalf("%s: %v", kv.Key, err)
				}
				sz := v.ElemType().Size()
				for i := 0; i < len(raw); i += sz {
					var b [8]byte
					copy(b[:], raw[i:i+sz])
					k.Values = append(k.Values, scalarString(v.ElemType(), binary.LittleEndian.Uint64(b[:])))
				}
			}
		} else if s, ok := v.Str(); ok {
			k.Values = []string{cstr(s)}
		} else {
			bits, _ := v.Bits()
			k.Values = []string{scalarString(v.ElemType(), bits)}
		}
		d.KV = append(d.KV, k)
	}
	for _, ti := range f.Tensors {
		d.Tensors = append(d.Tensors, dumpTensor{ti.Name, int32(ti.Type), ti.Shape, ti.Offset, ti.Size})
	}
	return d
}

// nativeDump reads the file with ggml's gguf_init_from_file(no_alloc).
func nativeDump(t testing.TB, lib *bindings.Lib, path string) dump {
	t.Helper()
	ctx := lib.GGUFInitFromFile(path, bindings.GGUFInitParams{NoAlloc: true})
	if ctx == 0 {
		t.Fatalf("native reader refused %s", path)
	}
	defer lib.GGUFFree(ctx)
	d := dump{Version: lib.GGUFGetVersion(ctx), Alignment: uint64(lib.GGUFGetAlignment(ctx)), DataOffset: int64(lib.GGUFGetDataOffset(ctx))}
	for i := int64(0); i < lib.GGUFGetNKV(ctx); i++ {
		typ := gguf.ValueType(lib.GGUFGetKVType(ctx, i))
		k := dumpKV{Key: lib.GGUFGetKey(ctx, i), Type: typ.String()}
		switch typ {
		case gguf.TypeArray:
			et := gguf.ValueType(lib.GGUFGetArrType(ctx, i))
			k.Type = "arr[" + et.String() + "]"
			n := lib.GGUFGetArrN(ctx, i)
			if et == gguf.TypeString {
				for j := uintptr(0); j < n; j++ {
					k.Values = append(k.Values, bindings.GoString(lib.GGUFGetArrStr(ctx, i, j)))
				}
			} else {
				sz := et.Size()
				raw := unsafe.Slice((*byte)(lib.GGUFGetArrData(ctx, i)), int(n)*sz)
				for j := 0; j < len(raw); j += sz {
					var b [8]byte
					copy(b[:], raw[j:j+sz])
					k.Values = append(k.Values, scalarString(et, binary.LittleEndian.Uint64(b[:])))
				}
			}
		case gguf.TypeString:
			k.Values = []string{bindings.GoString(lib.GGUFGetValStr(ctx, i))}
		default:
			var bits uint64
			switch typ {
			case gguf.TypeUint8:
				bits = uint64(lib.GGUFGetValU8(ctx, i))
			case gguf.TypeInt8:
				bits = uint64(uint8(lib.GGUFGetValI8(ctx, i)))
			case gguf.TypeUint16:
				bits = uint64(lib.GGUFGetValU16(ctx, i))
			case gguf.TypeInt16:
				bits = uint64(uint16(lib.GGUFGetValI16(ctx, i)))
			case gguf.TypeUint32:
				bits = uint64(lib.GGUFGetValU32(ctx, i))
			case gguf.TypeInt32:
				bits = uint64(uint32(lib.GGUFGetValI32(ctx, i)))
			case gguf.TypeFloat32:
				bits = uint64(math.Float32bits(lib.GGUFGetValF32(ctx, i)))
			case gguf.TypeBool:
				if lib.GGUFGetValBool(ctx, i) {
					bits = 1
				}
			case gguf.TypeUint64:
				bits = lib.GGUFGetValU64(ctx, i)
			case gguf.TypeInt64:
				bits = uint64(lib.GGUFGetValI64(ctx, i))
			case gguf.TypeFloat64:
				bits = math.Float64bits(lib.GGUFGetValF64(ctx, i))
			}
			k.Values = []string{scalarString(typ, bits)}
		}
		d.KV = append(d.KV, k)
	}
	for i := int64(0); i < lib.GGUFGetNTensors(ctx); i++ {
		ne := unsafe.Slice(lib.GGUFGetTensorNe(ctx, i), 4)
		d.Tensors = append(d.Tensors, dumpTensor{
			Name:   lib.GGUFGetTensorName(ctx, i),
			Type:   lib.GGUFGetTensorType(ctx, i),
			Shape:  [4]int64(ne),
			Offset: uint64(lib.GGUFGetTensorOffset(ctx, i)),
			Size:   int64(lib.GGUFGetTensorSize(ctx, i)),
		})
	}
	return d
}

func compareDumps(t *testing.T, what string, ours, theirs dump) {
	t.Helper()
	if ours.Version != theirs.Version || ours.Alignment != theirs.Alignment || ours.DataOffset != theirs.DataOffset {
		t.Errorf("%s: header ours v%d align %d data@%d, ggml v%d align %d data@%d", what,
			ours.Version, ours.Alignment, ours.DataOffset, theirs.Version, theirs.Alignment, theirs.DataOffset)
	}
	if len(ours.KV) != len(theirs.KV) {
		t.Fatalf("%s: %d pairs, ggml %d", what, len(ours.KV), len(theirs.KV))
	}
	for i := range ours.KV {
		a, b := ours.KV[i], theirs.KV[i]
		if a.Key != b.Key || a.Type != b.Type || len(a.Values) != len(b.Values) {
			t.Errorf("%s: pair %d: ours %s %s[%d], ggml %s %s[%d]", what, i, a.Key, a.Type, len(a.Values), b.Key, b.Type, len(b.Values))
			continue
		}
		for j := range a.Values {
			if a.Values[j] != b.Values[j] {
				t.Errorf("%s: %s[%d]: ours %q, ggml %q", what, a.Key, j, a.Values[j], b.Values[j])
				break
			}
		}
	}
	if len(ours.Tensors) != len(theirs.Tensors) {
		t.Fatalf("%s: %d tensors, ggml %d", what, len(ours.Tensors), len(theirs.Tensors))
	}
	for i := range ours.Tensors {
		if ours.Tensors[i] != theirs.Tensors[i] {
			t.Errorf("%s: tensor %d: ours %+v, ggml %+v", what, i, ours.Tensors[i], theirs.Tensors[i])
		}
	}
}

var _ = ggml.TypeF32
