// Port of llama.cpp convert_hf_to_gguf.py and gguf-py/gguf/gguf_writer.py
// (v0.5.0): the metadata types the converter writes.

package arch

import (
	"strings"

	"github.com/ggload/ggload/gguf"
)

// ConverterKey is how the pinned llama.cpp's converter (convert_hf_to_gguf.py,
// through gguf-py's GGUFWriter) writes a metadata key. Real model files
// carry these types, which are not always the ones llama.cpp's loader
// reads into (a list of Python ints is an INT32 array, where the loader
// reads a uint32_t array and accepts both).
type ConverterKey struct {
	Scalar string // the GGUF type name of the scalar form ("u32"), "" if never written so
	Elem   string // the element type name of the array form ("i32"), "" if never written so
}

// ScalarType and ElemType are the forms' GGUF types; ok is false for a
// form the converter never writes.
func (k ConverterKey) ScalarType() (gguf.ValueType, bool) { return typeNamed(k.Scalar) }

// ElemType: see ScalarType.
func (k ConverterKey) ElemType() (gguf.ValueType, bool) { return typeNamed(k.Elem) }

func typeNamed(name string) (gguf.ValueType, bool) {
	if name == "" {
		return 0, false
	}
	for t, n := range ggufTypeNames {
		if n == name {
			return t, true
		}
	}
	return 0, false
}

// Converter reports how the pin's converter writes key (a concrete key,
// "qwen35.rope.dimension_sections", of a model of architecture arch);
// false for a key no GGUFWriter.add_ method writes.
func Converter(key, arch string) (ConverterKey, bool) {
	if k, ok := converterKeys[key]; ok {
		return k, true
	}
	if rest, ok := strings.CutPrefix(key, arch+"."); ok && arch != "" {
		k, ok := converterKeys["%s."+rest]
		return k, ok
	}
	return ConverterKey{}, false
}
