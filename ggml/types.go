package ggml

import "github.com/ggload/ggload/ggml/gtype"

// The element types and their traits live in package gtype (pure Go, so
// that GGUF reading needs no native library); these are the same.

// Type is a ggml tensor element type (enum ggml_type of the pinned release).
type Type = gtype.Type

// TypeTraits are the fixed properties of a type.
type TypeTraits = gtype.TypeTraits

// Shape is a tensor's ne[], four dimensions.
type Shape = gtype.Shape

// The element types of the pinned release.
const (
	TypeF32     = gtype.TypeF32
	TypeF16     = gtype.TypeF16
	TypeQ4_0    = gtype.TypeQ4_0
	TypeQ4_1    = gtype.TypeQ4_1
	TypeQ5_0    = gtype.TypeQ5_0
	TypeQ5_1    = gtype.TypeQ5_1
	TypeQ8_0    = gtype.TypeQ8_0
	TypeQ8_1    = gtype.TypeQ8_1
	TypeQ2_K    = gtype.TypeQ2_K
	TypeQ3_K    = gtype.TypeQ3_K
	TypeQ4_K    = gtype.TypeQ4_K
	TypeQ5_K    = gtype.TypeQ5_K
	TypeQ6_K    = gtype.TypeQ6_K
	TypeQ8_K    = gtype.TypeQ8_K
	TypeIQ2_XXS = gtype.TypeIQ2_XXS
	TypeIQ2_XS  = gtype.TypeIQ2_XS
	TypeIQ3_XXS = gtype.TypeIQ3_XXS
	TypeIQ1_S   = gtype.TypeIQ1_S
	TypeIQ4_NL  = gtype.TypeIQ4_NL
	TypeIQ3_S   = gtype.TypeIQ3_S
	TypeIQ2_S   = gtype.TypeIQ2_S
	TypeIQ4_XS  = gtype.TypeIQ4_XS
	TypeI8      = gtype.TypeI8
	TypeI16     = gtype.TypeI16
	TypeI32     = gtype.TypeI32
	TypeI64     = gtype.TypeI64
	TypeF64     = gtype.TypeF64
	TypeIQ1_M   = gtype.TypeIQ1_M
	TypeBF16    = gtype.TypeBF16
	TypeTQ1_0   = gtype.TypeTQ1_0
	TypeTQ2_0   = gtype.TypeTQ2_0
	TypeMXFP4   = gtype.TypeMXFP4
	TypeNVFP4   = gtype.TypeNVFP4
	TypeQ1_0    = gtype.TypeQ1_0
	TypeQ2_0    = gtype.TypeQ2_0
	TypeCount   = gtype.TypeCount
)

// TypeByName finds a type by its ggml name (case-insensitive).
func TypeByName(name string) (Type, bool) { return gtype.TypeByName(name) }
