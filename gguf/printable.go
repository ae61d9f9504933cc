package gguf

import (
	"strconv"
	"strings"
	"unicode"
	"unicode/utf8"
)

// Printable returns text read from a file (a key, a tensor name, a string
// value, a token) in a form that is safe to write to a terminal, at most
// maxLen bytes long (maxLen < 0: any length).
//
// A file may hold any bytes, and some would act on the terminal instead of
// being shown: ESC starts the escape sequences that move the cursor, clear
// the screen, set colours, the window title (OSC) or a hyperlink; a
// carriage return or a backspace overwrites what was printed; a terminal
// that reads 8-bit controls takes the byte 0x9b for CSI. Printable escapes
// every character that is not graphic:
//   - the C0 controls (U+0000–U+001F: ESC, BEL, CR, LF, TAB, ...) and DEL;
//   - the C1 controls (U+0080–U+009F, CSI and OSC among them);
//   - format characters (bidirectional overrides such as U+202E, zero-width
//     spaces and joiners, the byte order mark), the line and paragraph
//     separators, private-use and unassigned code points;
//   - every byte that is not part of valid UTF-8.
//
// Escapes are Go's: \n, \r, \t, \a, \b, \f and \v, \xNN for the other
// bytes below 0x80 and for invalid bytes, \uNNNN or \UNNNNNNNN for the
// rest. Everything else, printable UTF-8 of any script and the ASCII
// space, is kept as it is, the backslash included: the result is for
// people to read, and text that already holds a backslash escape reads the
// same as one Printable made. Use strconv.Quote where the exact bytes must
// be recovered from what is printed, and print the stored value itself
// where a format must be exact (JSON).
//
// When the escaped text is longer than maxLen bytes it is cut before the
// first character or escape that would pass maxLen, and "…(N bytes)"
// follows, N being len(s): a key of a gigabyte prints as its first maxLen
// bytes and its length.
func Printable(s string, maxLen int) string {
	if maxLen < 0 || len(s) <= maxLen {
		if safe(s) {
			return s
		}
	}
	var b strings.Builder
	if maxLen >= 0 {
		b.Grow(min(len(s), maxLen) + 24)
	} else {
		b.Grow(len(s) + 16)
	}
	for i := 0; i < len(s); {
		r, n := utf8.DecodeRuneInString(s[i:])
		piece := s[i : i+n]
		switch {
		case r == utf8.RuneError && n == 1:
			piece = `\x` + hex2(s[i])
		case !unicode.IsGraphic(r):
			piece = escapeRune(r)
		}
		if maxLen >= 0 && b.Len()+len(piece) > maxLen {
			b.WriteString(cutMark(len(s)))
			break
		}
		b.WriteString(piece)
		i += n
	}
	return b.String()
}

// safe reports whether s is valid UTF-8 of graphic characters only.
func safe(s string) bool {
	for i := 0; i < len(s); i++ {
		if c := s[i]; c < 0x20 || c == 0x7f {
			return false
		} else if c >= utf8.RuneSelf {
			for _, r := range s[i:] {
				if r == utf8.RuneError || !unicode.IsGraphic(r) {
					return false // (a U+FFFD of the text too: the loop keeps it)
				}
			}
			return true
		}
	}
	return true
}

// escapeRune is r written as a Go escape.
func escapeRune(r rune) string {
	if i := strings.IndexRune("\a\b\f\n\r\t\v", r); i >= 0 {
		return `\` + "abfnrtv"[i:i+1]
	}
	switch {
	case r < utf8.RuneSelf:
		return `\x` + hex2(byte(r))
	case r <= 0xffff:
		return `\u` + pad(strconv.FormatUint(uint64(r), 16), 4)
	}
	return `\U` + pad(strconv.FormatUint(uint64(r), 16), 8)
}

func hex2(c byte) string {
	const digits = "0123456789abcdef"
	return string([]byte{digits[c>>4], digits[c&15]})
}

func pad(h string, n int) string {
	return strings.Repeat("0", max(n-len(h), 0)) + h
}
