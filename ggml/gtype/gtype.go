// Package gtype is ggml's tensor element types and their fixed traits (block
// size, bytes per block, row and tensor sizes), in pure Go: what a GGUF
// reader needs without the native libraries. Package ggml re-exports it.
package gtype

import (
	"fmt"
	"math/bits"
)

// Type is a ggml tensor element type (enum ggml_type of the pinned release).
type Type int32

// The element types of the pinned release. Ids that ggml has removed (4, 5,
// 31–33, 36–38) have no constant; Type.Valid reports false for them.
const (
	TypeF32     Type = 0
	TypeF16     Type = 1
	TypeQ4_0    Type = 2
	TypeQ4_1    Type = 3
	TypeQ5_0    Type = 6
	TypeQ5_1    Type = 7
	TypeQ8_0    Type = 8
	TypeQ8_1    Type = 9
	TypeQ2_K    Type = 10
	TypeQ3_K    Type = 11
	TypeQ4_K    Type = 12
	TypeQ5_K    Type = 13
	TypeQ6_K    Type = 14
	TypeQ8_K    Type = 15
	TypeIQ2_XXS Type = 16
	TypeIQ2_XS  Type = 17
	TypeIQ3_XXS Type = 18
	TypeIQ1_S   Type = 19
	TypeIQ4_NL  Type = 20
	TypeIQ3_S   Type = 21
	TypeIQ2_S   Type = 22
	TypeIQ4_XS  Type = 23
	TypeI8      Type = 24
	TypeI16     Type = 25
	TypeI32     Type = 26
	TypeI64     Type = 27
	TypeF64     Type = 28
	TypeIQ1_M   Type = 29
	TypeBF16    Type = 30
	TypeTQ1_0   Type = 34
	TypeTQ2_0   Type = 35
	TypeMXFP4   Type = 39
	TypeNVFP4   Type = 40
	TypeQ1_0    Type = 41
	TypeQ2_0    Type = 42

	// TypeCount is GGML_TYPE_COUNT: every id below it has a traits entry,
	// removed ones included.
	TypeCount Type = 43
)

// TypeTraits are the fixed properties of a type, as ggml's type_traits table
// gives them.
type TypeTraits struct {
	Name      string // ggml_type_name, e.g. "q4_K"
	BlockSize int64  // elements per block (1 for plain types, 0 if removed)
	TypeSize  int64  // bytes per block (0 if removed)
	Quantized bool
}

var typeTraits = [TypeCount]TypeTraits{
	TypeF32:     {"f32", 1, 4, false},
	TypeF16:     {"f16", 1, 2, false},
	TypeQ4_0:    {"q4_0", 32, 18, true},
	TypeQ4_1:    {"q4_1", 32, 20, true},
	4:           {"DEPRECATED", 0, 0, false},
	5:           {"DEPRECATED", 0, 0, false},
	TypeQ5_0:    {"q5_0", 32, 22, true},
	TypeQ5_1:    {"q5_1", 32, 24, true},
	TypeQ8_0:    {"q8_0", 32, 34, true},
	TypeQ8_1:    {"q8_1", 32, 36, true},
	TypeQ2_K:    {"q2_K", 256, 84, true},
	TypeQ3_K:    {"q3_K", 256, 110, true},
	TypeQ4_K:    {"q4_K", 256, 144, true},
	TypeQ5_K:    {"q5_K", 256, 176, true},
	TypeQ6_K:    {"q6_K", 256, 210, true},
	TypeQ8_K:    {"q8_K", 256, 292, true},
	TypeIQ2_XXS: {"iq2_xxs", 256, 66, true},
	TypeIQ2_XS:  {"iq2_xs", 256, 74, true},
	TypeIQ3_XXS: {"iq3_xxs", 256, 98, true},
	TypeIQ1_S:   {"iq1_s", 256, 50, true},
	TypeIQ4_NL:  {"iq4_nl", 32, 18, true},
	TypeIQ3_S:   {"iq3_s", 256, 110, true},
	TypeIQ2_S:   {"iq2_s", 256, 82, true},
	TypeIQ4_XS:  {"iq4_xs", 256, 136, true},
	TypeI8:      {"i8", 1, 1, false},
	TypeI16:     {"i16", 1, 2, false},
	TypeI32:     {"i32", 1, 4, false},
	TypeI64:     {"i64", 1, 8, false},
	TypeF64:     {"f64", 1, 8, false},
	TypeIQ1_M:   {"iq1_m", 256, 56, true},
	TypeBF16:    {"bf16", 1, 2, false},
	31:          {"TYPE_Q4_0_4_4 REMOVED, use Q4_0 with runtime repacking", 0, 0, false},
	32:          {"TYPE_Q4_0_4_8 REMOVED, use Q4_0 with runtime repacking", 0, 0, false},
	33:          {"TYPE_Q4_0_8_8 REMOVED, use Q4_0 with runtime repacking", 0, 0, false},
	TypeTQ1_0:   {"tq1_0", 256, 54, true},
	TypeTQ2_0:   {"tq2_0", 256, 66, true},
	36:          {"TYPE_IQ4_NL_4_4 REMOVED, use IQ4_NL with runtime repacking", 0, 0, false},
	37:          {"TYPE_IQ4_NL_4_8 REMOVED, use IQ4_NL with runtime repacking", 0, 0, false},
	38:          {"TYPE_IQ4_NL_8_8 REMOVED, use IQ4_NL with runtime repacking", 0, 0, false},
	TypeMXFP4:   {"mxfp4", 32, 17, true},
	TypeNVFP4:   {"nvfp4", 64, 36, true},
	TypeQ1_0:    {"q1_0", 128, 18, true},
	TypeQ2_0:    {"q2_0", 64, 18, true},
}

// Traits returns the traits of t and false when t is outside the table.
func (t Type) Traits() (TypeTraits, bool) {
	if t < 0 || t >= TypeCount {
		return TypeTraits{}, false
	}
	return typeTraits[t], true
}

// Valid reports whether t is a type a tensor of the pinned release may have:
// inside the table and not removed.
func (t Type) Valid() bool {
	tr, ok := t.Traits()
	return ok && tr.BlockSize > 0
}

// String returns ggml's name for t, or "type(N)" for an id outside the table.
func (t Type) String() string {
	if tr, ok := t.Traits(); ok {
		return tr.Name
	}
	return fmt.Sprintf("type(%d)", int32(t))
}

// BlockSize is the number of elements per block (0 for invalid types).
func (t Type) BlockSize() int64 { tr, _ := t.Traits(); return tr.BlockSize }

// TypeSize is the number of bytes per block (0 for invalid types).
func (t Type) TypeSize() int64 { tr, _ := t.Traits(); return tr.TypeSize }

// Quantized reports whether t is a block-quantized type.
func (t Type) Quantized() bool { tr, _ := t.Traits(); return tr.Quantized }

// TypeByName returns the type whose ggml name is name ("q4_K", "f16"; the
// comparison ignores case).
func TypeByName(name string) (Type, bool) {
	for i := range TypeCount {
		t := Type(i)
		if t.Valid() && equalFold(typeTraits[i].Name, name) {
			return t, true
		}
	}
	return 0, false
}

func equalFold(a, b string) bool {
	if len(a) != len(b) {
		return false
	}
	for i := 0; i < len(a); i++ {
		x, y := a[i], b[i]
		if 'A' <= x && x <= 'Z' {
			x += 'a' - 'A'
		}
		if 'A' <= y && y <= 'Z' {
			y += 'a' - 'A'
		}
		if x != y {
			return false
		}
	}
	return true
}

// RowSize returns the bytes of a row of ne elements, as ggml_row_size, with
// the checks ggml only asserts: t valid, ne ≥ 0, ne a multiple of the block
// size, no overflow.
func (t Type) RowSize(ne int64) (int64, error) {
	if !t.Valid() {
		return 0, fmt.Errorf("ggml: invalid type %d", int32(t))
	}
	if ne < 0 {
		return 0, fmt.Errorf("ggml: negative row length %d", ne)
	}
	bs := t.BlockSize()
	if ne%bs != 0 {
		return 0, fmt.Errorf("ggml: row length %d is not a multiple of the %s block size %d", ne, t, bs)
	}
	hi, lo := bits.Mul64(uint64(ne/bs), uint64(t.TypeSize()))
	if hi != 0 || lo > 1<<62 {
		return 0, fmt.Errorf("ggml: row of %d %s elements overflows", ne, t)
	}
	return int64(lo), nil
}

// Shape is a tensor's element counts, ne[0] first (the row length).
type Shape [4]int64

// Elements returns the number of elements, or an error on overflow or a
// negative dimension.
func (s Shape) Elements() (int64, error) {
	n := uint64(1)
	for i, d := range s {
		if d < 0 {
			return 0, fmt.Errorf("ggml: dimension %d is negative (%d)", i, d)
		}
		hi, lo := bits.Mul64(n, uint64(d))
		if hi != 0 || lo > 1<<62 {
			return 0, fmt.Errorf("ggml: element count of %v overflows", s)
		}
		n = lo
	}
	return int64(n), nil
}

// Bytes returns the size of a contiguous tensor of type t and shape s, as
// ggml_nbytes computes it for such a tensor (0 when any dimension is 0),
// with every check ggml leaves to asserts.
func (t Type) Bytes(s Shape) (int64, error) {
	n, err := s.Elements()
	if err != nil {
		return 0, err
	}
	row, err := t.RowSize(s[0])
	if err != nil {
		return 0, err
	}
	if n == 0 {
		return 0, nil
	}
	rows := uint64(n / s[0])
	hi, lo := bits.Mul64(rows, uint64(row))
	if hi != 0 || lo > 1<<62 {
		return 0, fmt.Errorf("ggml: %s tensor %v overflows", t, s)
	}
	return int64(lo), nil
}

// Strides returns nb[] of a contiguous tensor of type t and shape s.
func (t Type) Strides(s Shape) [4]int64 {
	var nb [4]int64
	nb[0] = t.TypeSize()
	if bs := t.BlockSize(); bs > 0 {
		nb[1] = nb[0] * (s[0] / bs)
	}
	nb[2] = nb[1] * s[1]
	nb[3] = nb[2] * s[2]
	return nb
}
