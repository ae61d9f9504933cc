// Port of llama.cpp src/llama-vocab.cpp (v0.5.0): llm_tokenizer_spm.

package vocab

// symbol is llm_symbol: a run of the text being merged, linked to its
// neighbours by index.
type symbol struct {
	prev, next int32
	off, n     int32
}

// spmBigram is llm_bigram_spm: a candidate merge of two neighbours.
type spmBigram struct {
	left, right int32
	score       float32
	size        int32
}

// spmAbove orders the SPM queue: the higher score first, then the leftmost.
func spmAbove(a, b spmBigram) bool {
	return a.score > b.score || (a.score == b.score && a.left < b.left)
}

// splitChars fills s.syms with one symbol per UTF-8 sequence of text (a
// cut sequence at the end is one short symbol).
func (s *session) splitChars(text string, base int) {
	n := len(text)
	for off := 0; off < n; {
		k := min(lenUTF8(text[off]), n-off)
		idx := int32(len(s.syms))
		next := idx + 1
		if off+k == n {
			next = -1
		}
		s.syms = append(s.syms, symbol{prev: idx - 1, next: next, off: int32(base + off), n: int32(k)})
		off += k
	}
}

// spm is llm_tokenizer_spm_session::tokenize on text (spaces already
// escaped).
func (v *Vocab) spm(s *session, b []byte, out []Token) ([]Token, error) {
	text := string(b) // (one copy, so that map lookups see a string)
	s.syms = s.syms[:0]
	s.splitChars(text, 0)
	q := s.spmQ[:0]
	syms := s.syms
	try := func(l, r int32) {
		if l < 0 || r < 0 {
			return
		}
		size := syms[l].n + syms[r].n
		id, ok := v.toID[text[syms[l].off:syms[l].off+size]]
		if !ok {
			return
		}
		q = heapPush(q, spmBigram{left: l, right: r, score: v.scores[id], size: size}, spmAbove)
	}
	for i := 1; i < len(syms); i++ {
		try(int32(i-1), int32(i))
	}
	for len(q) > 0 {
		var bg spmBigram
		q, bg = heapPop(q, spmAbove)
		ls, rs := &syms[bg.left], &syms[bg.right]
		if ls.n == 0 || rs.n == 0 || ls.n+rs.n != bg.size {
			continue
		}
		ls.n += rs.n
		rs.n = 0
		ls.next = rs.next
		if rs.next >= 0 {
			syms[rs.next].prev = bg.left
		}
		try(ls.prev, bg.left)
		try(bg.left, ls.next)
	}
	s.spmQ = q
	if len(syms) == 0 {
		return out, nil
	}
	for i := int32(0); i != -1; i = syms[i].next {
		sym := syms[i]
		piece := text[sym.off : sym.off+sym.n]
		if id, ok := v.toID[piece]; ok {
			out = append(out, id)
			continue
		}
		for j := 0; j < len(piece); j++ {
			id, ok := v.byteToToken(piece[j])
			if !ok {
				return out, v.errorf("no token for byte 0x%02X (llama.cpp's byte_to_token throws)", piece[j])
			}
			out = append(out, id)
		}
	}
	return out, nil
}

// heapPush adds x to the binary heap h ordered by above.
func heapPush[T any](h []T, x T, above func(a, b T) bool) []T {
	h = append(h, x)
	i := len(h) - 1
	for i > 0 {
		p := (i - 1) / 2
		if !above(h[i], h[p]) {
			break
		}
		h[i], h[p] = h[p], h[i]
		i = p
	}
	return h
}

// heapPop removes the top of h.
func heapPop[T any](h []T, above func(a, b T) bool) ([]T, T) {
	top := h[0]
	n := len(h) - 1
	h[0] = h[n]
	h = h[:n]
	for i := 0; ; {
		l := 2*i + 1
		if l >= n {
			break
		}
		c := l
		if r := l + 1; r < n && above(h[r], h[l]) {
			c = r
		}
		if !above(h[c], h[i]) {
			break
		}
		h[i], h[c] = h[c], h[i]
		i = c
	}
	return h, top
}
