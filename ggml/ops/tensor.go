package ops

// The shape predicates of ggml.c, in Go: what its asserts ask of tensors.

// NElements is ggml_nelements.
func NElements(t *Tensor) int64 { return t.Ne[0] * t.Ne[1] * t.Ne[2] * t.Ne[3] }

// CanRepeat is ggml_can_repeat(t0, t1): t1's shape is a multiple of t0's.
func CanRepeat(t0, t1 *Tensor) bool {
	if NElements(t0) == 0 {
		return NElements(t1) == 0
	}
	for i := 0; i < 4; i++ {
		if t1.Ne[i]%t0.Ne[i] != 0 {
			return false
		}
	}
	return true
}

// canMulMat is ggml_can_mul_mat.
func canMulMat(t0, t1 *Tensor) bool {
	return t0.Ne[0] == t1.Ne[0] && t1.Ne[2]%t0.Ne[2] == 0 && t1.Ne[3]%t0.Ne[3] == 0
}

// SameShape is ggml_are_same_shape.
func SameShape(a, b *Tensor) bool { return a.Ne == b.Ne }

// ContiguousN is ggml_is_contiguous_n: contiguous but for dimensions up to
// n, whose rows may lie anywhere.
func (l *Lib) ContiguousN(t *Tensor, n int) bool {
	next := l.TypeSize(t.Type)
	blck := l.BlckSize(t.Type)
	if t.Ne[0] != blck && t.Nb[0] != next {
		return false
	}
	next *= uintptr(t.Ne[0] / blck)
	for i := 1; i < 4; i++ {
		if t.Ne[i] != 1 {
			if i > n {
				if t.Nb[i] != next {
					return false
				}
				next *= uintptr(t.Ne[i])
			} else {
				next = uintptr(t.Ne[i]) * t.Nb[i]
			}
		}
	}
	return true
}

// Contiguous is ggml_is_contiguous.
func (l *Lib) Contiguous(t *Tensor) bool { return l.ContiguousN(t, 0) }

// ContiguousRows is ggml_is_contiguous_rows: the elements of a row are
// adjacent (the rows themselves may lie anywhere).
func (l *Lib) ContiguousRows(t *Tensor) bool {
	return t.Ne[0] == l.BlckSize(t.Type) || t.Nb[0] == l.TypeSize(t.Type)
}

// NBytes is ggml_nbytes.
func (l *Lib) NBytes(t *Tensor) uint64 {
	for i := 0; i < 4; i++ {
		if t.Ne[i] <= 0 {
			return 0
		}
	}
	blck := l.BlckSize(t.Type)
	var n uint64
	if blck == 1 {
		n = uint64(l.TypeSize(t.Type))
		for i := 0; i < 4; i++ {
			n += uint64(t.Ne[i]-1) * uint64(t.Nb[i])
		}
		return n
	}
	n = uint64(t.Ne[0]) * uint64(t.Nb[0]) / uint64(blck)
	for i := 1; i < 4; i++ {
		n += uint64(t.Ne[i]-1) * uint64(t.Nb[i])
	}
	return n
}

// viewFits is ggml_new_tensor_impl's check of a view of nd dimensions:
// the data of a contiguous tensor of its shape, at its offset from the
// base tensor (a view of a view is checked against the view's source),
// within the base's bytes. The size is computed in size_t as ggml does: a
// negative length wraps around to a size that fails the check.
func (l *Lib) viewFits(op string, a *Tensor, nd int, ne [4]int64, offset uint64) error {
	if a.ViewSrc != nil {
		offset += uint64(a.ViewOffs)
		a = wrap(a.ViewSrc)
	}
	size := uint64(l.TypeSize(a.Type)) * uint64(ne[0]) / uint64(l.BlckSize(a.Type))
	for i := 1; i < nd; i++ {
		size *= uint64(ne[i])
	}
	return assert(op, size == 0 || size+offset <= l.NBytes(a) && size+offset >= size, "view_src == NULL || data_size == 0 || data_size + view_offs <= ggml_nbytes(view_src)")
}
