package ggml

import (
	"bytes"

	"github.com/ggload/ggload/bindings"
)

// Lib is the raw native table, for this package's tests.
func (rt *Runtime) Lib() *bindings.Lib { return rt.lib }

// C is the native struct, for this package's tests.
func (t *Tensor) C() *bindings.Tensor { return t.c }

// MetaSplitterIDs lists the user-data words of meta devices whose
// splitter is still registered.
func MetaSplitterIDs() map[uintptr]bool {
	ids := map[uintptr]bool{}
	metaSplitters.Range(func(k, _ any) bool {
		ids[k.(uintptr)] = true
		return true
	})
	return ids
}

// SplitSlices is each device's slice of a tensor of type typ and shape ne
// split as s over n devices, gathered out of the whole src as SetSplit
// sends them; false where SetSplit would not.
func SplitSlices(s SplitState, typ Type, ne Shape, n int, src []byte) ([][]byte, bool) {
	l := s.layout(ne, n, typ.TypeSize(), typ.BlockSize())
	cs, ok := s.copies(l, ne, typ.BlockSize())
	if !ok {
		return nil, false
	}
	out := make([][]byte, n)
	for j := range out {
		data, kept := sliceOf(src, cs[j], l.slices[j].bytes)
		out[j] = bytes.Clone(data)
		if kept {
			splitScratch.put(data)
		}
	}
	return out, true
}
