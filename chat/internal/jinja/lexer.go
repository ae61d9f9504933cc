// Port of llama.cpp common/jinja/lexer.h and lexer.cpp (v0.5.0).

package jinja

import "strings"

// tokenType is jinja::token::type; the numbers are the pin's (a parser
// error prints them).
type tokenType uint8

const (
	tEOF tokenType = iota
	tText
	tNumeric
	tString
	tIdent
	tEquals
	tOpenParen
	tCloseParen
	tOpenStatement
	tCloseStatement
	tOpenExpression
	tCloseExpression
	tOpenSquare
	tCloseSquare
	tOpenCurly
	tCloseCurly
	tComma
	tDot
	tColon
	tPipe
	tCallOperator
	tAdditive
	tMultiplicative
	tComparison
	tUnary
	tComment
)

type token struct {
	t     tokenType
	value string
	pos   int
}

var escapeChars = [256]byte{'n': '\n', 't': '\t', 'r': '\r', 'b': '\b', 'f': '\f', 'v': '\v', '\\': '\\', '\'': '\'', '"': '"'}

func isWord(c byte) bool {
	return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '_'
}

func isDigit(c byte) bool { return c >= '0' && c <= '9' }

// mapping is the lexer's ordered_mapping_table: the first sequence that
// matches wins.
var mapping = []struct {
	seq string
	t   tokenType
}{
	{"{%-", tOpenStatement},
	{"-%}", tCloseStatement},
	{"{{-", tOpenExpression},
	{"-}}", tCloseExpression},
	{"{%", tOpenStatement},
	{"%}", tCloseStatement},
	{"{{", tOpenExpression},
	{"}}", tCloseExpression},
	{"(", tOpenParen},
	{")", tCloseParen},
	{"{", tOpenCurly},
	{"}", tCloseCurly},
	{"[", tOpenSquare},
	{"]", tCloseSquare},
	{",", tComma},
	{".", tDot},
	{":", tColon},
	{"|", tPipe},
	{"<=", tComparison},
	{">=", tComparison},
	{"==", tComparison},
	{"!=", tComparison},
	{"<", tComparison},
	{">", tComparison},
	{"+", tAdditive},
	{"-", tAdditive},
	{"~", tAdditive},
	{"*", tMultiplicative},
	{"/", tMultiplicative},
	{"%", tMultiplicative},
	{"=", tEquals},
}

// lexError is a lexer_exception: its message shows the original source
// (as the pin's does), at a position of the normalized one.
type lexError struct {
	msg string
	pos int
}

// normalize is what tokenize does to the source before it reads it: CRLF
// and lone CR become LF, and one trailing newline goes.
func normalize(source string) string {
	if source == "" {
		return source
	}
	src := source
	if strings.IndexByte(src, '\r') >= 0 {
		src = strings.ReplaceAll(src, "\r\n", "\n")
		src = strings.ReplaceAll(src, "\r", "\n")
	}
	if source[len(source)-1] == '\n' {
		src = src[:len(src)-1]
	}
	return src
}

type lexer struct {
	src    string
	pos    int
	tokens []token
}

// at is src[i] as std::string gives it: NUL at the end.
func (l *lexer) at(i int) byte {
	if i < len(l.src) {
		return l.src[i]
	}
	return 0
}

func (l *lexer) nextIs(n int, chars ...byte) bool {
	if l.pos+n >= len(l.src) {
		return false
	}
	c := l.src[l.pos+n]
	for _, x := range chars {
		if c == x {
			return true
		}
	}
	return false
}

func (l *lexer) fail(msg string, pos int) {
	panic(&lexError{msg: msg, pos: pos})
}

// consumeWhile reads bytes while pred holds, turning backslash escapes into
// the bytes they stand for.
func (l *lexer) consumeWhile(pred func(byte) bool) string {
	var b []byte
	for pred(l.at(l.pos)) {
		if l.at(l.pos) == '\\' {
			l.pos++
			if l.pos >= len(l.src) {
				l.fail("unexpected end of input after escape character", l.pos)
			}
			c := l.src[l.pos]
			l.pos++
			if escapeChars[c] == 0 {
				l.fail("unknown escape character \\"+string([]byte{c}), l.pos)
			}
			b = append(b, escapeChars[c])
			continue
		}
		b = append(b, l.at(l.pos))
		l.pos++
		if l.pos > len(l.src) {
			l.fail("unexpected end of input during consume_while", l.pos)
		}
	}
	return string(b)
}

func (l *lexer) consumeNumeric() string {
	num := l.consumeWhile(isDigit)
	if l.pos < len(l.src) && l.src[l.pos] == '.' && l.pos+1 < len(l.src) && isDigit(l.src[l.pos+1]) {
		l.pos++
		num += "." + l.consumeWhile(isDigit)
	}
	return num
}

func (l *lexer) last() tokenType {
	if len(l.tokens) == 0 {
		return tCloseStatement // the initial state
	}
	return l.tokens[len(l.tokens)-1].t
}

func (l *lexer) push(t tokenType, v string, pos int) {
	l.tokens = append(l.tokens, token{t, v, pos})
}

// tokenize is lexer::tokenize on a normalized source; a lexError panics out
// of it.
func tokenize(src string) []token {
	l := &lexer{src: src}
	var depth uint64 // curly_bracket_depth, a size_t that may wrap
	for l.pos < len(src) {
		start := l.pos
		last := l.last()
		if last == tCloseStatement || last == tCloseExpression || last == tComment {
			if text, ok := l.text(); ok {
				l.push(tText, text, start)
				continue
			}
		}
		if l.at(l.pos) == '{' && l.nextIs(1, '#') {
			l.comment()
			continue
		}
		if l.at(l.pos) == '-' && (last == tOpenExpression || last == tOpenStatement) {
			l.pos++
			if l.pos >= len(src) {
				break
			}
		}
		l.consumeWhile(isSpace)
		if l.pos >= len(src) {
			break
		}
		ch := src[l.pos]
		closing := ch == '-' && l.nextIs(1, '%', '}')
		if !closing && (ch == '-' || ch == '+') {
			start = l.pos
			prev := tEOF
			if len(l.tokens) > 0 {
				prev = l.tokens[len(l.tokens)-1].t
			}
			if prev == tText || prev == tEOF {
				l.fail("unexpected character: "+string([]byte{ch}), l.pos)
			}
			switch prev {
			case tIdent, tNumeric, tString, tCloseParen, tCloseSquare:
				// a binary operator: matched below
			default:
				l.pos++
				num := l.consumeNumeric()
				t := tNumeric
				if num == "" {
					t = tUnary
				}
				l.push(t, string([]byte{ch})+num, start)
				continue
			}
		}
		if l.matchTable(&depth) {
			continue
		}
		if ch == '\'' || ch == '"' {
			start = l.pos
			l.pos++
			s := l.consumeWhile(func(c byte) bool { return c != ch })
			l.push(tString, s, start)
			l.pos++
			continue
		}
		if isDigit(ch) {
			start = l.pos
			l.push(tNumeric, l.consumeNumeric(), start)
			continue
		}
		if isWord(ch) {
			start = l.pos
			l.push(tIdent, l.consumeWhile(isWord), start)
			continue
		}
		l.fail("unexpected character: "+string([]byte{ch}), l.pos)
	}
	return l.tokens
}

// text reads the text up to the next block, with the pin's whitespace
// control: trim_blocks and lstrip_blocks on, and the '-' markers.
func (l *lexer) text() (string, bool) {
	src := l.src
	pos := l.pos
	rstripBlock, canRmNewline := false, false
	if pos > 3 {
		c0, c1, c2 := src[pos-3], src[pos-2], src[pos-1]
		rstripBlock = c0 == '-' && (c1 == '%' || c1 == '}' || c1 == '#') && c2 == '}'
		canRmNewline = (c1 == '#' || c1 == '%' || c1 == '-') && c2 == '}'
	}
	start := l.pos
	end := start
	for l.pos < len(src) && !(src[l.pos] == '{' && l.nextIs(1, '%', '{', '#')) {
		l.pos++
		end = l.pos
	}
	if l.at(l.pos) == '{' && l.nextIs(1, '%', '#', '-') {
		for cur := end; cur > start; cur-- {
			c := src[cur-1]
			if cur == 1 {
				end = 0
				break
			}
			if c == '\n' {
				end = cur
				break
			}
			if !isSpace(c) {
				break
			}
		}
	}
	text := ""
	if end > start {
		text = src[start:end]
	}
	if canRmNewline && text != "" && text[0] == '\n' {
		text = text[1:]
	}
	if rstripBlock {
		text = strings.TrimLeft(text, " \t\r\n")
	}
	if l.at(l.pos) == '{' && l.nextIs(1, '{', '%', '#') && l.nextIs(2, '-') {
		text = strings.TrimRight(text, " \t\r\n")
	}
	return text, text != ""
}

func (l *lexer) comment() {
	start := l.pos
	l.pos += 2
	var b []byte
	for !(l.at(l.pos) == '#' && l.nextIs(1, '}')) {
		if l.pos+2 >= len(l.src) {
			l.fail("missing end of comment tag", l.pos)
		}
		b = append(b, l.src[l.pos])
		l.pos++
	}
	l.push(tComment, string(b), start)
	l.pos += 2
}

func (l *lexer) matchTable(depth *uint64) bool {
	rest := l.src[l.pos:]
	for _, m := range mapping {
		if m.seq == "}}" && *depth > 0 {
			continue
		}
		if strings.HasPrefix(rest, m.seq) {
			l.push(m.t, m.seq, l.pos)
			switch m.t {
			case tOpenExpression:
				*depth = 0
			case tOpenCurly:
				*depth++
			case tCloseCurly:
				*depth--
			}
			l.pos += len(m.seq)
			return true
		}
	}
	return false
}
