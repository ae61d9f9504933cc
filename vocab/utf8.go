// Port of llama.cpp src/unicode.cpp (v0.5.0): unicode_cpt_from_utf8 as the
// vocabulary decodes with it.

package vocab

// decodeCpt is unicode_cpt_from_utf8 as unicode_cpts_from_utf8 uses it:
// the code point at s[off:] and the offset after it, or U+FFFD and off+1
// for an invalid sequence. Overlong forms and surrogates decode as the pin
// decodes them.
func decodeCpt(s string, off int) (uint32, int) {
	c := s[off]
	switch {
	case c&0x80 == 0:
		return uint32(c), off + 1
	case c&0x40 == 0:
	case c&0x20 == 0:
		if off+1 < len(s) && s[off+1]&0xc0 == 0x80 {
			return uint32(c&0x1f)<<6 | uint32(s[off+1]&0x3f), off + 2
		}
	case c&0x10 == 0:
		if off+2 < len(s) && s[off+1]&0xc0 == 0x80 && s[off+2]&0xc0 == 0x80 {
			return uint32(c&0x0f)<<12 | uint32(s[off+1]&0x3f)<<6 | uint32(s[off+2]&0x3f), off + 3
		}
	case c&0x08 == 0:
		if off+3 < len(s) && s[off+1]&0xc0 == 0x80 && s[off+2]&0xc0 == 0x80 && s[off+3]&0xc0 == 0x80 {
			return uint32(c&0x07)<<18 | uint32(s[off+1]&0x3f)<<12 | uint32(s[off+2]&0x3f)<<6 | uint32(s[off+3]&0x3f), off + 4
		}
	}
	return 0xFFFD, off + 1
}

// validCpt reports whether decodeCpt finds a valid sequence at s[off:]
// (where unicode_cpt_from_utf8 does not throw), and the offset after it.
func validCpt(s string, off int) (int, bool) {
	cpt, next := decodeCpt(s, off)
	return next, !(cpt == 0xFFFD && next == off+1)
}

// appendCpt is unicode_cpt_to_utf8; false for a code point past U+10FFFF,
// where the pin throws.
func appendCpt(dst []byte, cpt uint32) ([]byte, bool) {
	switch {
	case cpt <= 0x7f:
		return append(dst, byte(cpt)), true
	case cpt <= 0x7ff:
		return append(dst, 0xc0|byte(cpt>>6&0x1f), 0x80|byte(cpt&0x3f)), true
	case cpt <= 0xffff:
		return append(dst, 0xe0|byte(cpt>>12&0x0f), 0x80|byte(cpt>>6&0x3f), 0x80|byte(cpt&0x3f)), true
	case cpt <= 0x10ffff:
		return append(dst, 0xf0|byte(cpt>>18&0x07), 0x80|byte(cpt>>12&0x3f), 0x80|byte(cpt>>6&0x3f), 0x80|byte(cpt&0x3f)), true
	}
	return dst, false
}

// lenUTF8 is unicode_len_utf8: the length a sequence's first byte claims.
func lenUTF8(b byte) int {
	return int([16]byte{1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 2, 2, 3, 4}[b>>4])
}
