// Port of llama.cpp common/jinja/string.h and string.cpp (v0.5.0).

package jinja

import "strings"

// Part is one piece of a rendered string: text from the template, or
// text that came from the input (a string of the context marked as
// input). The pin keeps the two apart so that a caller may treat special
// tokens in the input differently.
type Part struct {
	Text  string
	Input bool
}

// jstr is jinja::string: a string held as parts, each knowing whether it
// came from the input. One-to-one transformations keep the marks; a string
// made from several is input only where all of them were.
type jstr struct {
	parts []Part
}

func plain(s string) jstr { return jstr{parts: []Part{{Text: s}}} }

func (s jstr) str() string {
	switch len(s.parts) {
	case 0:
		return ""
	case 1:
		return s.parts[0].Text
	}
	n := 0
	for _, p := range s.parts {
		n += len(p.Text)
	}
	var b strings.Builder
	b.Grow(n)
	for _, p := range s.parts {
		b.WriteString(p.Text)
	}
	return b.String()
}

func (s jstr) length() int {
	n := 0
	for _, p := range s.parts {
		n += len(p.Text)
	}
	return n
}

func (s jstr) allInput() bool {
	for _, p := range s.parts {
		if !p.Input {
			return false
		}
	}
	return true
}

// markInputFrom marks every part as input when all of other's parts are
// (mark_input_based_on).
func (s jstr) markInputFrom(other jstr) jstr {
	if other.allInput() {
		for i := range s.parts {
			s.parts[i].Input = true
		}
	}
	return s
}

// concat is a fresh string of a's parts then b's (string::append on a
// copy).
func concat(a, b jstr) jstr {
	parts := make([]Part, 0, len(a.parts)+len(b.parts))
	parts = append(parts, a.parts...)
	parts = append(parts, b.parts...)
	return jstr{parts: parts}
}

func isLowerASCII(c byte) bool { return c >= 'a' && c <= 'z' }
func isUpperASCII(c byte) bool { return c >= 'A' && c <= 'Z' }

// isSpace is the C locale's isspace.
func isSpace(c byte) bool {
	return c == ' ' || c == '\t' || c == '\n' || c == '\v' || c == '\f' || c == '\r'
}

func toUpper(c byte) byte {
	if isLowerASCII(c) {
		return c - 'a' + 'A'
	}
	return c
}

func toLower(c byte) byte {
	if isUpperASCII(c) {
		return c - 'A' + 'a'
	}
	return c
}

func (s jstr) isUpper() bool {
	for _, p := range s.parts {
		for i := 0; i < len(p.Text); i++ {
			if isLowerASCII(p.Text[i]) {
				return false
			}
		}
	}
	return true
}

func (s jstr) isLower() bool {
	for _, p := range s.parts {
		for i := 0; i < len(p.Text); i++ {
			if isUpperASCII(p.Text[i]) {
				return false
			}
		}
	}
	return true
}

// transform applies fn to every part, keeping the marks.
func (s jstr) transform(fn func(string) string) jstr {
	out := make([]Part, len(s.parts))
	for i, p := range s.parts {
		out[i] = Part{Text: fn(p.Text), Input: p.Input}
	}
	return jstr{parts: out}
}

func mapBytes(s string, fn func(i int, c byte) byte) string {
	b := []byte(s)
	for i, c := range b {
		b[i] = fn(i, c)
	}
	return string(b)
}

func (s jstr) upper() jstr {
	return s.transform(func(t string) string { return mapBytes(t, func(_ int, c byte) byte { return toUpper(c) }) })
}

func (s jstr) lower() jstr {
	return s.transform(func(t string) string { return mapBytes(t, func(_ int, c byte) byte { return toLower(c) }) })
}

// capitalize upper-cases each part's first byte and lower-cases the rest,
// part by part, as the pin does.
func (s jstr) capitalize() jstr {
	return s.transform(func(t string) string {
		return mapBytes(t, func(i int, c byte) byte {
			if i == 0 {
				return toUpper(c)
			}
			return toLower(c)
		})
	})
}

func (s jstr) title() jstr {
	return s.transform(func(t string) string {
		next := true
		return mapBytes(t, func(_ int, c byte) byte {
			switch {
			case isSpace(c):
				next = true
				return c
			case next:
				next = false
				return toUpper(c)
			}
			return toLower(c)
		})
	})
}

// strip removes leading (left) and trailing (right) bytes that are in
// chars, or spaces when chars is nil, across parts: a part left empty is
// dropped and the next one stripped too.
func (s jstr) strip(left, right bool, chars *string) jstr {
	match := func(c byte) bool {
		if chars != nil {
			return strings.IndexByte(*chars, c) >= 0
		}
		return isSpace(c)
	}
	parts := append([]Part(nil), s.parts...)
	if len(parts) == 0 {
		return jstr{parts: parts}
	}
	if left {
		for len(parts) > 0 {
			t := parts[0].Text
			i := 0
			for i < len(t) && match(t[i]) {
				i++
			}
			parts[0].Text = t[i:]
			if parts[0].Text != "" {
				break
			}
			parts = parts[1:]
		}
	}
	if right {
		for len(parts) > 0 {
			last := len(parts) - 1
			t := parts[last].Text
			j := len(t)
			for j > 0 && match(t[j-1]) {
				j--
			}
			parts[last].Text = t[:j]
			if parts[last].Text != "" {
				break
			}
			parts = parts[:last]
		}
	}
	return jstr{parts: parts}
}
