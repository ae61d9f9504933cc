package main

import (
	"fmt"
	"io"
	"unicode/utf8"
)

// safeWriter is what every command prints through: text from a model file
// or a server (a key, an architecture, a tensor name, an error quoting
// them) may hold bytes a terminal acts on, such as an OSC sequence that
// writes the clipboard. It passes printable UTF-8, newlines and tabs, and
// writes every other control character (C0 but \n and \t, DEL, C1, and the
// bidirectional overrides that reorder what is shown) as \u00XX, and a
// byte that is not UTF-8 as \xNN. In JSON, which Go's encoder writes with
// C0 escaped and valid UTF-8 only, the same escapes are JSON's own, so the
// document decodes to the same values.
type safeWriter struct {
	w     io.Writer
	carry []byte // the start of a rune cut by the end of the last Write
}

// safe wraps w, once.
func safe(w io.Writer) io.Writer {
	if _, ok := w.(*safeWriter); ok {
		return w
	}
	return &safeWriter{w: w}
}

// unwrapped is the writer under a safeWriter (a terminal's *os.File).
func unwrapped(w io.Writer) io.Writer {
	if s, ok := w.(*safeWriter); ok {
		return s.w
	}
	return w
}

func (s *safeWriter) Write(p []byte) (int, error) {
	n := len(p)
	if len(s.carry) > 0 {
		p = append(s.carry, p...)
		s.carry = nil
	}
	out := make([]byte, 0, len(p))
	for i := 0; i < len(p); {
		c := p[i]
		if c >= 0x20 && c < 0x7f || c == '\n' || c == '\t' {
			out = append(out, c)
			i++
			continue
		}
		r, size := utf8.DecodeRune(p[i:])
		switch {
		case r == utf8.RuneError && size <= 1 && !utf8.FullRune(p[i:]):
			// a rune the next Write completes
			s.carry = append([]byte(nil), p[i:]...)
			i = len(p)
		case r == utf8.RuneError && size <= 1:
			out = fmt.Appendf(out, `\x%02x`, c)
			i++
		case unsafeRune(r):
			out = fmt.Appendf(out, `\u%04x`, r)
			i += size
		default:
			out = append(out, p[i:i+size]...)
			i += size
		}
	}
	if _, err := s.w.Write(out); err != nil {
		return 0, err
	}
	return n, nil
}

// unsafeRune reports a rune a terminal acts on or that changes how the
// text around it is shown.
func unsafeRune(r rune) bool {
	switch {
	case r < 0x20 && r != '\n' && r != '\t', r == 0x7f, r >= 0x80 && r <= 0x9f:
		return true
	case r >= 0x202a && r <= 0x202e, r >= 0x2066 && r <= 0x2069:
		return true
	}
	return false
}
