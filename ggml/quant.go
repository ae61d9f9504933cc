package ggml

import (
	"fmt"
	"unsafe"
)

// ValidateRowData checks the rows of a tensor's data the way ggml does
// (ggml_validate_row_data): NaN/Inf in float data and in block scales of
// quantized data. data must hold whole blocks of t.
func (rt *Runtime) ValidateRowData(t Type, data []byte) (bool, error) {
	return rt.ValidateRowDataPtr(t, unsafe.Pointer(unsafe.SliceData(data)), uint64(len(data)))
}

// ValidateRowDataPtr is ValidateRowData over native or mapped memory.
func (rt *Runtime) ValidateRowDataPtr(t Type, p unsafe.Pointer, n uint64) (_ bool, err error) {
	defer placed(&err, "validate_row_data", at{})
	if !t.Valid() {
		return false, fmt.Errorf("ggml: validate: invalid type %d", int32(t))
	}
	if n%uint64(t.TypeSize()) != 0 {
		return false, fmt.Errorf("ggml: validate: %d bytes is not a whole number of %s blocks", n, t)
	}
	if n == 0 {
		return true, nil
	}
	return rt.lib.ValidateRow(int32(t), p, uintptr(n)), nil
}

// QuantizeNeedsImportance reports whether t can only be made with an
// importance matrix (ggml_quantize_requires_imatrix).
func (rt *Runtime) QuantizeNeedsImportance(t Type) bool {
	return t.Valid() && rt.lib.QuantizeNeedsImatrix(int32(t))
}

// Quantize converts rows of float32 values into t with ggml's reference
// quantizer (ggml_quantize_chunk). src holds nrows·nPerRow values; the
// result is nrows rows of t. Plain types (f32, f16, bf16) are converted too.
func (rt *Runtime) Quantize(t Type, src []float32, nPerRow int64, importance []float32) (_ []byte, err error) {
	defer placed(&err, "quantize_chunk", at{})
	if !t.Valid() {
		return nil, fmt.Errorf("ggml: quantize: invalid type %d", int32(t))
	}
	switch t {
	case TypeI8, TypeI16, TypeI32, TypeI64, TypeF64, TypeQ8_K, TypeQ8_1:
		return nil, fmt.Errorf("ggml: quantize: %s has no quantizer", t)
	}
	if nPerRow <= 0 || int64(len(src))%nPerRow != 0 {
		return nil, fmt.Errorf("ggml: quantize: %d values are not whole rows of %d", len(src), nPerRow)
	}
	row, err := t.RowSize(nPerRow)
	if err != nil {
		return nil, fmt.Errorf("ggml: quantize: %w", err)
	}
	if importance != nil && int64(len(importance)) != nPerRow {
		return nil, fmt.Errorf("ggml: quantize: importance has %d values, rows have %d", len(importance), nPerRow)
	}
	if importance == nil && rt.QuantizeNeedsImportance(t) {
		return nil, fmt.Errorf("ggml: quantize: %s needs an importance matrix", t)
	}
	nrows := int64(len(src)) / nPerRow
	dst := make([]byte, nrows*row)
	if nrows == 0 {
		return dst, nil
	}
	var im *float32
	if importance != nil {
		im = &importance[0]
	}
	rt.lib.QuantizeInit(int32(t))
	n := rt.lib.QuantizeChunk(int32(t), &src[0], unsafe.Pointer(&dst[0]), 0, nrows, nPerRow, im)
	if int64(n) != int64(len(dst)) {
		return nil, fmt.Errorf("ggml: quantize: %s wrote %d bytes, expected %d", t, n, len(dst))
	}
	return dst, nil
}
