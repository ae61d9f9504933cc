package ops

// The ops on a tensor's attributes (precision, hints) and the questions
// on sizes.

// PrecSetAcc is ggml_prec_set_acc(t, prec).
func (l *Lib) PrecSetAcc(t *Tensor, prec int32) bool { return l.b.PrecSetAcc(t.c(), prec) }

// PrecSetSrc is ggml_prec_set_src(t, prec, idx).
func (l *Lib) PrecSetSrc(t *Tensor, prec int32, idx int64) (bool, error) {
	if err := assert("ggml_prec_set_src", idx >= 0 && idx < MaxSrc, "idx >= 0 && idx < GGML_MAX_SRC"); err != nil {
		return false, err
	}
	return l.b.PrecSetSrc(t.c(), prec, int32(idx)), nil
}

// MulMatSetHint is ggml_mul_mat_set_hint(t, hint).
func (l *Lib) MulMatSetHint(t *Tensor, hint int32) { l.b.MulMatSetHint(t.c(), hint) }

// FlashAttnKVMax is ggml_flash_attn_ext_set_n_kv_max(t, n).
func (l *Lib) FlashAttnKVMax(t *Tensor, n int32) { l.b.FlashAttnKVMax(t.c(), n) }

// RowSize is ggml_row_size(type, ne).
func (l *Lib) RowSize(typ int32, ne int64) (uint64, error) {
	const op = "ggml_row_size"
	if err := assert(op, typ >= 0 && typ < TypeCount && l.BlckSize(typ) > 0, "type < GGML_TYPE_COUNT"); err != nil {
		return 0, err
	}
	if err := assert(op, ne%l.BlckSize(typ) == 0, "ne % ggml_blck_size(type) == 0"); err != nil {
		return 0, err
	}
	return uint64(l.b.RowSize(typ, ne)), nil
}
