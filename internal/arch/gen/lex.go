package main

import (
	"fmt"
	"regexp"
	"strings"
)

var priMacro = regexp.MustCompile(`^PRI([diouxX])(8|16|32|64)$`)

type tokKind uint8

const (
	tEOF tokKind = iota
	tIdent
	tNum
	tStr
	tChar
	tPunct
)

type token struct {
	k    tokKind
	s    string // text; for tStr the unescaped value
	line int
}

func (t token) String() string {
	switch t.k {
	case tEOF:
		return "end of input"
	case tStr:
		return fmt.Sprintf("%q", t.s)
	}
	return "'" + t.s + "'"
}

// puncts, longest first.
var puncts = []string{
	"<<=", ">>=", "...", "->", "::", "++", "--", "==", "!=", "<=", ">=", "&&", "||", "<<", ">>",
	"+=", "-=", "*=", "/=", "%=", "&=", "|=", "^=",
	"{", "}", "(", ")", "[", "]", ";", ",", ".", "?", ":", "+", "-", "*", "/", "%", "<", ">",
	"=", "!", "&", "|", "^", "~", "#",
}

// lex splits C++ source into tokens: comments and preprocessor lines are
// dropped, adjacent string literals are joined.
func lex(src string, firstLine int) ([]token, error) {
	var out []token
	line := firstLine
	i := 0
	bol := true // at the beginning of a line (only blanks so far)
	for i < len(src) {
		c := src[i]
		switch {
		case c == '\n':
			line++
			i++
			bol = true
			continue
		case c == ' ' || c == '\t' || c == '\r':
			i++
			continue
		case c == '/' && i+1 < len(src) && src[i+1] == '/':
			for i < len(src) && src[i] != '\n' {
				i++
			}
			continue
		case c == '/' && i+1 < len(src) && src[i+1] == '*':
			j := strings.Index(src[i+2:], "*/")
			if j < 0 {
				return nil, fmt.Errorf("line %d: unterminated comment", line)
			}
			line += strings.Count(src[i:i+2+j+2], "\n")
			i += 2 + j + 2
			continue
		case c == '#' && bol:
			// a preprocessor line (with continuations)
			for i < len(src) && src[i] != '\n' {
				if src[i] == '\\' && i+1 < len(src) && src[i+1] == '\n' {
					line++
					i++
				}
				i++
			}
			continue
		}
		bol = false
		switch {
		case isIdentStart(c):
			j := i
			for j < len(src) && isIdentChar(src[j]) {
				j++
			}
			word := src[i:j]
			i = j
			if m := priMacro.FindStringSubmatch(word); m != nil {
				// <inttypes.h> format macros: a string literal
				spec := m[1]
				if m[2] == "64" {
					spec = "ll" + spec
				}
				if k := len(out) - 1; k >= 0 && out[k].k == tStr {
					out[k].s += spec
				} else {
					out = append(out, token{tStr, spec, line})
				}
				continue
			}
			out = append(out, token{tIdent, word, line})
		case c >= '0' && c <= '9' || c == '.' && i+1 < len(src) && src[i+1] >= '0' && src[i+1] <= '9':
			j := i
			for j < len(src) && (isIdentChar(src[j]) || src[j] == '.' ||
				(src[j] == '-' || src[j] == '+') && (src[j-1] == 'e' || src[j-1] == 'E') && !strings.HasPrefix(src[i:j], "0x")) {
				j++
			}
			out = append(out, token{tNum, src[i:j], line})
			i = j
		case c == '"':
			s, n, err := unquote(src[i:], '"')
			if err != nil {
				return nil, fmt.Errorf("line %d: %w", line, err)
			}
			if k := len(out) - 1; k >= 0 && out[k].k == tStr {
				out[k].s += s
			} else {
				out = append(out, token{tStr, s, line})
			}
			i += n
		case c == '\'':
			s, n, err := unquote(src[i:], '\'')
			if err != nil {
				return nil, fmt.Errorf("line %d: %w", line, err)
			}
			out = append(out, token{tChar, s, line})
			i += n
		default:
			matched := false
			for _, p := range puncts {
				if strings.HasPrefix(src[i:], p) {
					out = append(out, token{tPunct, p, line})
					i += len(p)
					matched = true
					break
				}
			}
			if !matched {
				return nil, fmt.Errorf("line %d: unexpected character %q", line, c)
			}
		}
	}
	out = append(out, token{tEOF, "", line})
	return out, nil
}

func isIdentStart(c byte) bool { return c == '_' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' }
func isIdentChar(c byte) bool  { return isIdentStart(c) || c >= '0' && c <= '9' }

// unquote reads a C string or character literal at the start of s and
// returns its value and the length of the literal.
func unquote(s string, q byte) (string, int, error) {
	var b strings.Builder
	i := 1
	for i < len(s) {
		c := s[i]
		switch c {
		case q:
			return b.String(), i + 1, nil
		case '\n':
			return "", 0, fmt.Errorf("newline in literal")
		case '\\':
			if i+1 >= len(s) {
				return "", 0, fmt.Errorf("unterminated literal")
			}
			i++
			switch e := s[i]; e {
			case 'n':
				b.WriteByte('\n')
			case 't':
				b.WriteByte('\t')
			case 'r':
				b.WriteByte('\r')
			case '0':
				b.WriteByte(0)
			case '\\', '"', '\'':
				b.WriteByte(e)
			default:
				return "", 0, fmt.Errorf("unsupported escape \\%c", e)
			}
			i++
		default:
			b.WriteByte(c)
			i++
		}
	}
	return "", 0, fmt.Errorf("unterminated literal")
}
