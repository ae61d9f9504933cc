package main

import (
	"fmt"
	"regexp"
	"strconv"
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
// dropped, and so are the branches of conditionals that llama.cpp's
// release build leaves out (conditionals); adjacent string literals are
// joined.
func lex(src string, firstLine int) ([]token, error) {
	lx := &lexer{src: src, line: firstLine, bol: true}
	for lx.i < len(src) {
		skipped, err := lx.layout()
		if err != nil {
			return nil, err
		}
		if skipped {
			continue
		}
		if !lx.cond.active() {
			lx.skipInactive()
			continue
		}
		lx.bol = false
		if err := lx.scan(); err != nil {
			return nil, err
		}
	}
	lx.out = append(lx.out, token{tEOF, "", lx.line})
	return lx.out, nil
}

// lexer is lex's state: the source, the position and line it has
// reached, and the tokens so far.
type lexer struct {
	src  string
	i    int
	line int
	bol  bool // at the beginning of a line (only blanks so far)
	cond conditionals
	out  []token
}

// layout skips what is no token at the position: a line break, blanks, a
// comment, a preprocessor line (which conditionals reads). It reports
// whether it skipped anything.
func (lx *lexer) layout() (bool, error) {
	src, i := lx.src, lx.i
	switch c := src[i]; {
	case c == '\n':
		lx.line++
		lx.i++
		lx.bol = true
	case c == ' ' || c == '\t' || c == '\r':
		lx.i++
	case c == '/' && i+1 < len(src) && src[i+1] == '/':
		for lx.i < len(src) && src[lx.i] != '\n' {
			lx.i++
		}
	case c == '/' && i+1 < len(src) && src[i+1] == '*':
		j := strings.Index(src[i+2:], "*/")
		if j < 0 {
			return false, fmt.Errorf("line %d: unterminated comment", lx.line)
		}
		lx.line += strings.Count(src[i:i+2+j+2], "\n")
		lx.i += 2 + j + 2
	case c == '#' && lx.bol:
		return true, lx.directive()
	default:
		return false, nil
	}
	return true, nil
}

// directive reads a preprocessor line (with its continuations) into the
// conditionals.
func (lx *lexer) directive() error {
	start, at := lx.i, lx.line
	for lx.i < len(lx.src) && lx.src[lx.i] != '\n' {
		if lx.src[lx.i] == '\\' && lx.i+1 < len(lx.src) && lx.src[lx.i+1] == '\n' {
			lx.line++
			lx.i++
		}
		lx.i++
	}
	return lx.cond.directive(lx.src[start:lx.i], at)
}

// skipInactive skips a token in a branch the release build leaves out: a
// character, or a whole literal.
func (lx *lexer) skipInactive() {
	lx.bol = false
	j := lx.i + 1
	if c := lx.src[lx.i]; c == '"' || c == '\'' {
		if _, n, err := unquote(lx.src[lx.i:], c); err == nil {
			j = lx.i + n
		}
	}
	lx.i = j
}

// scan reads the token at the position.
func (lx *lexer) scan() error {
	src, i := lx.src, lx.i
	switch c := src[i]; {
	case isIdentStart(c):
		lx.word()
	case c >= '0' && c <= '9' || c == '.' && i+1 < len(src) && src[i+1] >= '0' && src[i+1] <= '9':
		lx.number()
	case c == '"':
		s, n, err := unquote(src[i:], '"')
		if err != nil {
			return fmt.Errorf("line %d: %w", lx.line, err)
		}
		lx.str(s)
		lx.i += n
	case c == '\'':
		s, n, err := unquote(src[i:], '\'')
		if err != nil {
			return fmt.Errorf("line %d: %w", lx.line, err)
		}
		lx.out = append(lx.out, token{tChar, s, lx.line})
		lx.i += n
	default:
		return lx.punct()
	}
	return nil
}

// word reads an identifier or keyword; <inttypes.h>'s format macros
// (PRId64) are the string literals they expand to.
func (lx *lexer) word() {
	j := lx.i
	for j < len(lx.src) && isIdentChar(lx.src[j]) {
		j++
	}
	word := lx.src[lx.i:j]
	lx.i = j
	if m := priMacro.FindStringSubmatch(word); m != nil {
		spec := m[1]
		if m[2] == "64" {
			spec = "ll" + spec
		}
		lx.str(spec)
		return
	}
	lx.out = append(lx.out, token{tIdent, word, lx.line})
}

// number reads a numeric literal, with its suffixes and a decimal
// exponent's sign.
func (lx *lexer) number() {
	src, i := lx.src, lx.i
	j := i
	for j < len(src) && (isIdentChar(src[j]) || src[j] == '.' ||
		(src[j] == '-' || src[j] == '+') && (src[j-1] == 'e' || src[j-1] == 'E') && !strings.HasPrefix(src[i:j], "0x")) {
		j++
	}
	lx.out = append(lx.out, token{tNum, src[i:j], lx.line})
	lx.i = j
}

// str adds a string literal's value, joined to a string literal just
// before it.
func (lx *lexer) str(s string) {
	if k := len(lx.out) - 1; k >= 0 && lx.out[k].k == tStr {
		lx.out[k].s += s
		return
	}
	lx.out = append(lx.out, token{tStr, s, lx.line})
}

// punct reads an operator or punctuator, the longest that matches.
func (lx *lexer) punct() error {
	for _, p := range puncts {
		if strings.HasPrefix(lx.src[lx.i:], p) {
			lx.out = append(lx.out, token{tPunct, p, lx.line})
			lx.i += len(p)
			return nil
		}
	}
	return fmt.Errorf("line %d: unexpected character %q", lx.line, lx.src[lx.i])
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

// releaseMacros are the macros that llama.cpp's release build on Linux
// with GCC defines, as far as the conditionals of the files the generator
// reads test them. As in the C preprocessor, any other identifier in a
// condition is undefined and evaluates to 0.
var releaseMacros = map[string]int64{"NDEBUG": 1, "__GNUC__": 12, "__linux__": 1, "__unix__": 1, "__cplusplus": 201703}

// conditionals keeps the state of #if/#ifdef/#ifndef/#elif/#else/#endif,
// each condition evaluated over releaseMacros.
type conditionals struct {
	stack []condFrame
}

type condFrame struct {
	outer bool // the enclosing branch is kept
	on    bool // this branch is kept
	taken bool // a branch of this conditional was kept
}

func (c *conditionals) active() bool { return len(c.stack) == 0 || c.stack[len(c.stack)-1].on }

func (c *conditionals) directive(text string, line int) error {
	body := strings.TrimSpace(strings.TrimPrefix(strings.TrimSpace(text), "#"))
	if i := strings.Index(body, "//"); i >= 0 {
		body = body[:i]
	}
	body = strings.ReplaceAll(body, "\\\n", " ")
	name, arg, _ := strings.Cut(body, " ")
	name = strings.TrimSpace(name)
	if j := strings.IndexAny(name, "(!"); j > 0 { // #if(...), #if!...
		name, arg = name[:j], name[j:]+" "+arg
	}
	eval := func(expr string) (bool, error) {
		v, err := ppEval(expr)
		if err != nil {
			return false, fmt.Errorf("line %d: %q: %v", line, strings.TrimSpace(text), err)
		}
		return v != 0, nil
	}
	switch name {
	case "if", "ifdef", "ifndef":
		var on bool
		var err error
		switch name {
		case "if":
			on, err = eval(arg)
		case "ifdef":
			on, err = eval("defined(" + arg + ")")
		default:
			on, err = eval("!defined(" + arg + ")")
		}
		if err != nil {
			return err
		}
		outer := c.active()
		c.stack = append(c.stack, condFrame{outer: outer, on: outer && on, taken: on})
	case "elif", "else":
		if len(c.stack) == 0 {
			return fmt.Errorf("line %d: #%s without #if", line, name)
		}
		top := &c.stack[len(c.stack)-1]
		on := !top.taken
		if name == "elif" && on {
			v, err := eval(arg)
			if err != nil {
				return err
			}
			on = v
		}
		top.on = top.outer && on
		top.taken = top.taken || on
	case "endif":
		if len(c.stack) == 0 {
			return fmt.Errorf("line %d: #endif without #if", line)
		}
		c.stack = c.stack[:len(c.stack)-1]
	}
	return nil
}

// ppEval evaluates a preprocessor condition: integers, identifiers,
// defined(X) and defined X, !, unary -, the arithmetic, comparison and
// logical operators, and parentheses.
func ppEval(expr string) (int64, error) {
	toks, err := lex(expr, 1)
	if err != nil {
		return 0, err
	}
	for len(toks) > 0 && toks[len(toks)-1].k == tEOF {
		toks = toks[:len(toks)-1]
	}
	p := &ppParser{toks: toks}
	v, err := p.binary(0)
	if err == nil && p.i < len(p.toks) {
		err = fmt.Errorf("unexpected %s", p.toks[p.i])
	}
	return v, err
}

type ppParser struct {
	toks []token
	i    int
}

var ppPrec = map[string]int{"||": 1, "&&": 2, "|": 3, "^": 4, "&": 5, "==": 6, "!=": 6,
	"<": 7, ">": 7, "<=": 7, ">=": 7, "<<": 8, ">>": 8, "+": 9, "-": 9, "*": 10, "/": 10, "%": 10}

func (p *ppParser) peek() (token, bool) {
	if p.i < len(p.toks) {
		return p.toks[p.i], true
	}
	return token{}, false
}

func (p *ppParser) binary(min int) (int64, error) {
	x, err := p.unary()
	if err != nil {
		return 0, err
	}
	for {
		t, ok := p.peek()
		prec := ppPrec[t.s]
		if !ok || t.k != tPunct || prec == 0 || prec <= min {
			return x, nil
		}
		p.i++
		y, err := p.binary(prec)
		if err != nil {
			return 0, err
		}
		b := func(c bool) int64 {
			if c {
				return 1
			}
			return 0
		}
		switch t.s {
		case "||":
			x = b(x != 0 || y != 0)
		case "&&":
			x = b(x != 0 && y != 0)
		case "|":
			x |= y
		case "^":
			x ^= y
		case "&":
			x &= y
		case "==":
			x = b(x == y)
		case "!=":
			x = b(x != y)
		case "<":
			x = b(x < y)
		case ">":
			x = b(x > y)
		case "<=":
			x = b(x <= y)
		case ">=":
			x = b(x >= y)
		case "<<":
			x <<= uint(y)
		case ">>":
			x >>= uint(y)
		case "+":
			x += y
		case "-":
			x -= y
		case "*":
			x *= y
		case "/", "%":
			if y == 0 {
				return 0, fmt.Errorf("division by zero")
			}
			if t.s == "/" {
				x /= y
			} else {
				x %= y
			}
		}
	}
}

func (p *ppParser) unary() (int64, error) {
	t, ok := p.peek()
	if !ok {
		return 0, fmt.Errorf("a condition ends early")
	}
	p.i++
	switch {
	case t.k == tPunct && t.s == "!":
		v, err := p.unary()
		if v == 0 {
			return 1, err
		}
		return 0, err
	case t.k == tPunct && t.s == "-":
		v, err := p.unary()
		return -v, err
	case t.k == tPunct && t.s == "(":
		v, err := p.binary(0)
		if err != nil {
			return 0, err
		}
		if t, ok := p.peek(); !ok || t.s != ")" {
			return 0, fmt.Errorf("a parenthesis is not closed")
		}
		p.i++
		return v, nil
	case t.k == tIdent && t.s == "defined":
		paren := false
		if t, ok := p.peek(); ok && t.s == "(" {
			paren = true
			p.i++
		}
		n, ok := p.peek()
		if !ok || n.k != tIdent {
			return 0, fmt.Errorf("defined without a name")
		}
		p.i++
		if paren {
			if t, ok := p.peek(); !ok || t.s != ")" {
				return 0, fmt.Errorf("defined( is not closed")
			}
			p.i++
		}
		if _, ok := releaseMacros[n.s]; ok {
			return 1, nil
		}
		return 0, nil
	case t.k == tIdent:
		if p.i < len(p.toks) && p.toks[p.i].s == "(" {
			return 0, fmt.Errorf("the function-like macro %s", t.s)
		}
		return releaseMacros[t.s], nil // an undefined identifier is 0
	case t.k == tNum:
		n := strings.TrimRight(strings.ToLower(t.s), "ul")
		v, err := strconv.ParseInt(n, 0, 64)
		if err != nil {
			return 0, fmt.Errorf("the number %s", t.s)
		}
		return v, nil
	}
	return 0, fmt.Errorf("unexpected %s", t)
}
