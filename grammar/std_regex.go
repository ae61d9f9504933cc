// The regular expressions of llama.cpp's lazy-grammar triggers: std::regex
// in its ECMAScript grammar over bytes, as libstdc++ builds and runs it
// (bits/regex_scanner.tcc, regex_compiler.tcc, regex_executor.tcc): the
// same NFA, searched depth first in the same order, so that a trigger
// matches where the pin's matches and names the same groups.

package grammar

import (
	"errors"
	"fmt"
	"slices"
	"strconv"
)

// regex opcodes, as libstdc++'s _Opcode
const (
	opAlternative = iota
	opRepeat
	opBackref
	opLineBegin
	opLineEnd
	opWordBoundary
	opLookahead
	opSubexprBegin
	opSubexprEnd
	opDummy
	opMatch
	opAccept
)

const noState = -1

// reStateLimit is _GLIBCXX_REGEX_STATE_LIMIT: past it libstdc++ refuses
// the expression (a {n} repeats its atom's states n times).
const reStateLimit = 100000

// reStepLimit bounds one search's steps, where the pin's has no bound but
// its stack: a pattern that backtracks without end fails with
// errRegexSteps instead (a variable for the tests).
var reStepLimit = 1 << 24

var errRegexSteps = errors.New("grammar: a trigger pattern took too many steps (it backtracks without end)")

type reState struct {
	op        int
	next, alt int
	neg       bool
	subexpr   int
	backref   int
	match     *[256]bool
}

func (s *reState) hasAlt() bool {
	return s.op == opAlternative || s.op == opRepeat || s.op == opLookahead
}

// ecmaRegex is a compiled expression.
type ecmaRegex struct {
	states   []reState
	start    int
	nSubexpr int
}

// regexError is std::regex_error: an expression libstdc++ refuses.
type regexError struct{ msg string }

func (e *regexError) Error() string { return e.msg }

func reFail(msg string) { panic(&regexError{msg}) }

// errParen is what the pin's libllama throws for an unclosed group or a
// stray token after the expression: regex_constants::error_paren with no
// text of its own (libstdc++ 11's headers), which the C++ runtime
// describes so.
const errParen = "Mismatched '(' and ')' in regular expression"

// tokens of the scanner
const (
	tkOrdChar = iota
	tkHexNum
	tkBackref
	tkQuotedClass
	tkWordBound
	tkLineBegin
	tkLineEnd
	tkAnyChar
	tkClosure0
	tkClosure1
	tkOpt
	tkOr
	tkSubexprBegin
	tkSubexprNoGroupBegin
	tkLookaheadBegin
	tkSubexprEnd
	tkBracketBegin
	tkBracketNegBegin
	tkBracketEnd
	tkBracketDash
	tkCharClassName
	tkCollSymbol
	tkEquivClassName
	tkIntervalBegin
	tkIntervalEnd
	tkDupCount
	tkComma
	tkEOF
)

const (
	stNormal = iota
	stBracket
	stBrace
)

// reScanner is libstdc++'s _Scanner for ECMAScript.
type reScanner struct {
	p         string
	i         int
	state     int
	atBracket bool
	tok       int
	val       string
}

func (s *reScanner) advance() {
	if s.i >= len(s.p) {
		s.tok = tkEOF
		return
	}
	switch s.state {
	case stNormal:
		s.scanNormal()
	case stBracket:
		s.scanBracket()
	default:
		s.scanBrace()
	}
}

func (s *reScanner) scanNormal() {
	c := s.p[s.i]
	s.i++
	switch c {
	case '^', '$', '\\', '.', '*', '+', '?', '(', ')', '[', ']', '{', '}', '|', 0:
	default:
		s.tok, s.val = tkOrdChar, string([]byte{c})
		return
	}
	switch c {
	case '\\':
		if s.i >= len(s.p) {
			reFail("Invalid escape at end of regular expression")
		}
		s.eatEscape()
	case '(':
		if s.i < len(s.p) && s.p[s.i] == '?' {
			s.i++
			if s.i >= len(s.p) {
				reFail("mismatched ( and )")
			}
			switch s.p[s.i] {
			case ':':
				s.i++
				s.tok = tkSubexprNoGroupBegin
			case '=':
				s.i++
				s.tok, s.val = tkLookaheadBegin, "p"
			case '!':
				s.i++
				s.tok, s.val = tkLookaheadBegin, "n"
			default:
				reFail("Invalid '(?...)' zero-width assertion in regular expression")
			}
		} else {
			s.tok = tkSubexprBegin
		}
	case ')':
		s.tok = tkSubexprEnd
	case '[':
		s.state, s.atBracket = stBracket, true
		if s.i < len(s.p) && s.p[s.i] == '^' {
			s.tok = tkBracketNegBegin
			s.i++
		} else {
			s.tok = tkBracketBegin
		}
	case '{':
		s.state, s.tok = stBrace, tkIntervalBegin
	case 0, ']', '}':
		s.tok, s.val = tkOrdChar, string([]byte{c})
	default:
		s.tok = reTokens[c]
	}
}

// reTokens is libstdc++'s _M_token_tbl for ECMAScript.
var reTokens = map[byte]int{'^': tkLineBegin, '$': tkLineEnd, '.': tkAnyChar, '*': tkClosure0, '+': tkClosure1, '?': tkOpt, '|': tkOr}

func (s *reScanner) scanBracket() {
	c := s.p[s.i]
	s.i++
	switch {
	case c == '-':
		s.tok = tkBracketDash
	case c == '[':
		if s.i >= len(s.p) {
			reFail("Incomplete '[[' character class in regular expression")
		}
		switch s.p[s.i] {
		case '.':
			s.tok = tkCollSymbol
			s.eatClass('.')
		case ':':
			s.tok = tkCharClassName
			s.eatClass(':')
		case '=':
			s.tok = tkEquivClassName
			s.eatClass('=')
		default:
			s.tok, s.val = tkOrdChar, string([]byte{c})
		}
	case c == ']':
		s.tok, s.state = tkBracketEnd, stNormal
	case c == '\\':
		s.eatEscape()
	default:
		s.tok, s.val = tkOrdChar, string([]byte{c})
	}
	s.atBracket = false
}

// eatClass reads the name of [:name:], [.name.] or [=name=].
func (s *reScanner) eatClass(ch byte) {
	s.i++ // the ':', '.' or '='
	start := s.i
	for s.i < len(s.p) && s.p[s.i] != ch {
		s.i++
	}
	s.val = s.p[start:s.i]
	if s.i >= len(s.p) || s.i+1 >= len(s.p) || s.p[s.i+1] != ']' {
		reFail("Unexpected end of character class")
	}
	s.i += 2
}

func (s *reScanner) scanBrace() {
	c := s.p[s.i]
	s.i++
	switch {
	case c >= '0' && c <= '9':
		start := s.i - 1
		for s.i < len(s.p) && s.p[s.i] >= '0' && s.p[s.i] <= '9' {
			s.i++
		}
		s.tok, s.val = tkDupCount, s.p[start:s.i]
	case c == ',':
		s.tok = tkComma
	case c == '}':
		s.tok, s.state = tkIntervalEnd, stNormal
	default:
		reFail("Unexpected character in brace expression")
	}
}

func isHex(c byte) bool { return c >= '0' && c <= '9' || c >= 'a' && c <= 'f' || c >= 'A' && c <= 'F' }

// eatEscape is _M_eat_escape_ecma.
func (s *reScanner) eatEscape() {
	if s.i >= len(s.p) {
		reFail("Unexpected end of regex when escaping")
	}
	c := s.p[s.i]
	s.i++
	esc := map[byte]byte{'0': 0, 'b': '\b', 'f': '\f', 'n': '\n', 'r': '\r', 't': '\t', 'v': '\v'}
	if e, ok := esc[c]; ok && (c != 'b' || s.state == stBracket) {
		s.tok, s.val = tkOrdChar, string([]byte{e})
		return
	}
	switch {
	case c == 'b':
		s.tok, s.val = tkWordBound, "p"
	case c == 'B':
		s.tok, s.val = tkWordBound, "n"
	case c == 'd' || c == 'D' || c == 's' || c == 'S' || c == 'w' || c == 'W':
		s.tok, s.val = tkQuotedClass, string([]byte{c})
	case c == 'c':
		if s.i >= len(s.p) {
			reFail("invalid '\\cX' control character in regular expression")
		}
		// libstdc++ takes the letter itself
		s.tok, s.val = tkOrdChar, string([]byte{s.p[s.i]})
		s.i++
	case c == 'x' || c == 'u':
		n := 2
		if c == 'u' {
			n = 4
		}
		start := s.i
		for range n {
			if s.i >= len(s.p) || !isHex(s.p[s.i]) {
				reFail("Invalid '\\xNN' control character in regular expression")
			}
			s.i++
		}
		s.tok, s.val = tkHexNum, s.p[start:s.i]
	case c >= '0' && c <= '9':
		start := s.i - 1
		for s.i < len(s.p) && s.p[s.i] >= '0' && s.p[s.i] <= '9' {
			s.i++
		}
		s.tok, s.val = tkBackref, s.p[start:s.i]
	default:
		s.tok, s.val = tkOrdChar, string([]byte{c})
	}
}

// reSeq is a _StateSeq: a piece of the NFA from start to end.
type reSeq struct{ start, end int }

// reCompiler is libstdc++'s _Compiler for ECMAScript, char, no icase.
type reCompiler struct {
	sc     reScanner
	states []reState
	stack  []reSeq
	parens []int
	nSub   int
}

// compileECMA is std::regex(pattern): its NFA, or the regex_error.
func compileECMA(pattern string) (re *ecmaRegex, err error) {
	defer func() {
		if r := recover(); r != nil {
			e, ok := r.(*regexError)
			if !ok {
				panic(r)
			}
			re, err = nil, e
		}
	}()
	c := &reCompiler{sc: reScanner{p: pattern}}
	c.sc.advance()
	r := reSeq{c.subexprBegin(), 0}
	r.end = r.start
	c.disjunction()
	if !c.matchTok(tkEOF) {
		reFail(errParen)
	}
	c.appendSeq(&r, c.pop())
	c.appendState(&r, c.subexprEnd())
	c.appendState(&r, c.insert(reState{op: opAccept, next: noState, alt: noState}))
	return &ecmaRegex{states: c.states, start: r.start, nSubexpr: c.nSub}, nil
}

func (c *reCompiler) insert(s reState) int {
	c.states = append(c.states, s)
	if len(c.states) > reStateLimit {
		reFail("Number of NFA states exceeds limit. Please use shorter regex string, or use smaller brace expression, or make _GLIBCXX_REGEX_STATE_LIMIT larger.")
	}
	return len(c.states) - 1
}

func (c *reCompiler) dummy() int { return c.insert(reState{op: opDummy, next: noState, alt: noState}) }

func (c *reCompiler) subexprBegin() int {
	id := c.nSub
	c.nSub++
	c.parens = append(c.parens, id)
	return c.insert(reState{op: opSubexprBegin, next: noState, alt: noState, subexpr: id})
}

func (c *reCompiler) subexprEnd() int {
	id := c.parens[len(c.parens)-1]
	c.parens = c.parens[:len(c.parens)-1]
	return c.insert(reState{op: opSubexprEnd, next: noState, alt: noState, subexpr: id})
}

// appendState is _StateSeq::_M_append(state): the sequence's end leads
// to id, which becomes its end.
func (c *reCompiler) appendState(s *reSeq, id int) {
	c.states[s.end].next = id
	s.end = id
}

func (c *reCompiler) appendSeq(s *reSeq, t reSeq) {
	c.states[s.end].next = t.start
	s.end = t.end
}

func (c *reCompiler) single(id int) reSeq { return reSeq{id, id} }

func (c *reCompiler) pop() reSeq {
	s := c.stack[len(c.stack)-1]
	c.stack = c.stack[:len(c.stack)-1]
	return s
}

func (c *reCompiler) push(s reSeq) { c.stack = append(c.stack, s) }

func (c *reCompiler) matchTok(tok int) bool {
	if c.sc.tok == tok {
		c.sc.advance()
		return true
	}
	return false
}

// matchTokVal is _M_match_token keeping the token's value.
func (c *reCompiler) matchTokVal(tok int) (string, bool) {
	if c.sc.tok == tok {
		v := c.sc.val
		c.sc.advance()
		return v, true
	}
	return "", false
}

func (c *reCompiler) disjunction() {
	c.alternative()
	for c.matchTok(tkOr) {
		alt1 := c.pop()
		c.alternative()
		alt2 := c.pop()
		end := c.dummy()
		c.appendState(&alt1, end)
		c.appendState(&alt2, end)
		// the executor tries alt (the left one) before next
		id := c.insert(reState{op: opAlternative, next: alt2.start, alt: alt1.start})
		c.push(reSeq{id, end})
	}
}

func (c *reCompiler) alternative() {
	if c.term() {
		re := c.pop()
		c.alternative()
		c.appendSeq(&re, c.pop())
		c.push(re)
		return
	}
	c.push(c.single(c.dummy()))
}

func (c *reCompiler) term() bool {
	if c.assertion() {
		return true
	}
	if c.atom() {
		for c.quantifier() {
		}
		return true
	}
	return false
}

func (c *reCompiler) assertion() bool {
	switch {
	case c.matchTok(tkLineBegin):
		c.push(c.single(c.insert(reState{op: opLineBegin, next: noState, alt: noState})))
	case c.matchTok(tkLineEnd):
		c.push(c.single(c.insert(reState{op: opLineEnd, next: noState, alt: noState})))
	default:
		if v, ok := c.matchTokVal(tkWordBound); ok {
			c.push(c.single(c.insert(reState{op: opWordBoundary, next: noState, alt: noState, neg: v == "n"})))
			return true
		}
		v, ok := c.matchTokVal(tkLookaheadBegin)
		if !ok {
			return false
		}
		c.disjunction()
		if !c.matchTok(tkSubexprEnd) {
			reFail("lookahead assertion not closed")
		}
		t := c.pop()
		c.appendState(&t, c.insert(reState{op: opAccept, next: noState, alt: noState}))
		c.push(c.single(c.insert(reState{op: opLookahead, next: noState, alt: t.start, neg: v == "n"})))
	}
	return true
}

func (c *reCompiler) repeat(next, alt int, neg bool) int {
	return c.insert(reState{op: opRepeat, next: next, alt: alt, neg: neg})
}

func (c *reCompiler) quantifier() bool {
	neg := true // ECMAScript
	initq := func() {
		if len(c.stack) == 0 {
			reFail("Nothing to repeat before a quantifier.")
		}
		neg = neg && c.matchTok(tkOpt)
	}
	switch {
	case c.matchTok(tkClosure0):
		initq()
		e := c.pop()
		r := c.single(c.repeat(noState, e.start, neg))
		c.appendSeq(&e, r)
		c.push(r)
	case c.matchTok(tkClosure1):
		initq()
		e := c.pop()
		c.appendState(&e, c.repeat(noState, e.start, neg))
		c.push(e)
	case c.matchTok(tkOpt):
		initq()
		e := c.pop()
		end := c.dummy()
		r := c.single(c.repeat(noState, e.start, neg))
		c.appendState(&e, end)
		c.appendState(&r, end)
		c.push(r)
	case c.matchTok(tkIntervalBegin):
		if len(c.stack) == 0 {
			reFail("Nothing to repeat before a quantifier.")
		}
		v, ok := c.matchTokVal(tkDupCount)
		if !ok {
			reFail("Unexpected token in brace expression.")
		}
		r := c.pop()
		e := c.single(c.dummy())
		minRep := curInt(v)
		infi := false
		var n int64
		if c.matchTok(tkComma) {
			if v2, ok := c.matchTokVal(tkDupCount); ok {
				n = curInt(v2) - minRep
			} else {
				infi = true
			}
		}
		if !c.matchTok(tkIntervalEnd) {
			reFail("Unexpected end of brace expression.")
		}
		neg = neg && c.matchTok(tkOpt)
		for range minRep {
			c.appendSeq(&e, c.clone(r))
		}
		if infi {
			tmp := c.clone(r)
			s := c.single(c.repeat(noState, tmp.start, neg))
			c.appendSeq(&tmp, s)
			c.appendSeq(&e, s)
		} else {
			if n < 0 {
				reFail("Invalid range in brace expression.")
			}
			end := c.dummy()
			// alt is "match more", next "match less": swapped below
			var made []int
			for range n {
				tmp := c.clone(r)
				alt := c.repeat(tmp.start, end, neg)
				made = append(made, alt)
				c.appendSeq(&e, reSeq{alt, tmp.end})
			}
			c.appendState(&e, end)
			for i := len(made) - 1; i >= 0; i-- {
				st := &c.states[made[i]]
				st.next, st.alt = st.alt, st.next
			}
		}
		c.push(e)
	default:
		return false
	}
	return true
}

// curInt is _M_cur_int_value(10): the digits as a long (saturated, where
// libstdc++ 12 throws; a count that large is past the state limit).
func curInt(v string) int64 {
	n, err := strconv.ParseInt(v, 10, 64)
	if err != nil || n > reStateLimit {
		reFail("Number of NFA states exceeds limit.")
	}
	return n
}

// clone is _StateSeq::_M_clone: a copy of the sequence's states.
func (c *reCompiler) clone(s reSeq) reSeq {
	m := map[int]int{}
	stack := []int{s.start}
	var order []int
	for len(stack) > 0 {
		u := stack[len(stack)-1]
		stack = stack[:len(stack)-1]
		dup := c.states[u]
		id := c.insert(dup)
		m[u] = id
		order = append(order, u)
		if dup.hasAlt() && dup.alt != noState {
			if _, ok := m[dup.alt]; !ok {
				stack = append(stack, dup.alt)
			}
		}
		if u == s.end {
			continue
		}
		if dup.next != noState {
			if _, ok := m[dup.next]; !ok {
				stack = append(stack, dup.next)
			}
		}
	}
	for _, u := range order {
		v := m[u]
		st := &c.states[v]
		if st.next != noState {
			if w, ok := m[st.next]; ok {
				st.next = w
			}
		}
		if st.hasAlt() && st.alt != noState {
			if w, ok := m[st.alt]; ok {
				st.alt = w
			}
		}
	}
	return reSeq{m[s.start], m[s.end]}
}

func (c *reCompiler) matcher(m *[256]bool) {
	c.push(c.single(c.insert(reState{op: opMatch, next: noState, alt: noState, match: m})))
}

// tryChar is _M_try_char: an ordinary character or a \x/\u escape
// (truncated to a byte, as libstdc++ keeps it in a char).
func (c *reCompiler) tryChar() (byte, bool) {
	if v, ok := c.matchTokVal(tkHexNum); ok {
		n, _ := strconv.ParseUint(v, 16, 32)
		return byte(n), true
	}
	if v, ok := c.matchTokVal(tkOrdChar); ok {
		return v[0], true
	}
	return 0, false
}

func (c *reCompiler) atom() bool {
	switch {
	case c.matchTok(tkAnyChar):
		var m [256]bool
		for i := range m {
			m[i] = i != '\n' && i != '\r'
		}
		c.matcher(&m)
	default:
		if ch, ok := c.tryChar(); ok {
			var m [256]bool
			m[ch] = true
			c.matcher(&m)
			return true
		}
		if v, ok := c.matchTokVal(tkBackref); ok {
			idx, err := strconv.Atoi(v)
			if err != nil || idx >= c.nSub || slices.Contains(c.parens, idx) {
				reFail("Back-reference index exceeds current sub-expression count.")
			}
			c.push(c.single(c.insert(reState{op: opBackref, next: noState, alt: noState, backref: idx})))
			return true
		}
		if v, ok := c.matchTokVal(tkQuotedClass); ok {
			b := newBracket(v[0] >= 'A' && v[0] <= 'Z')
			b.addClass(v, false)
			c.matcher(b.ready())
			return true
		}
		switch {
		case c.matchTok(tkSubexprNoGroupBegin):
			r := c.single(c.dummy())
			c.disjunction()
			if !c.matchTok(tkSubexprEnd) {
				reFail(errParen)
			}
			c.appendSeq(&r, c.pop())
			c.push(r)
		case c.matchTok(tkSubexprBegin):
			r := c.single(c.subexprBegin())
			c.disjunction()
			if !c.matchTok(tkSubexprEnd) {
				reFail(errParen)
			}
			c.appendSeq(&r, c.pop())
			c.appendState(&r, c.subexprEnd())
			c.push(r)
		default:
			return c.bracketExpression()
		}
	}
	return true
}

// bracket is libstdc++'s _BracketMatcher for char.
type bracket struct {
	neg      bool
	chars    []byte
	ranges   [][2]int8 // compared as signed chars, as libstdc++ compares them
	class    uint16
	negClass []uint16
}

// character classes, as the C locale's ctype has them
const (
	ccDigit = 1 << iota
	ccAlpha
	ccSpace
	ccUpper
	ccLower
	ccPunct
	ccXdigit
	ccCntrl
	ccGraph
	ccPrint
	ccBlank
	ccUnder // [[:w:]]'s underscore
)

var classNames = map[string]uint16{
	"d": ccDigit, "w": ccDigit | ccAlpha | ccUnder, "s": ccSpace, "alnum": ccDigit | ccAlpha, "alpha": ccAlpha,
	"blank": ccBlank, "cntrl": ccCntrl, "digit": ccDigit, "graph": ccGraph, "lower": ccLower, "print": ccPrint,
	"punct": ccPunct, "space": ccSpace, "upper": ccUpper, "xdigit": ccXdigit,
}

func isCtype(ch byte, mask uint16) bool {
	var m uint16
	switch {
	case ch >= '0' && ch <= '9':
		m |= ccDigit | ccXdigit
	case ch >= 'a' && ch <= 'z':
		m |= ccAlpha | ccLower
		if ch <= 'f' {
			m |= ccXdigit
		}
	case ch >= 'A' && ch <= 'Z':
		m |= ccAlpha | ccUpper
		if ch <= 'F' {
			m |= ccXdigit
		}
	case ch == ' ' || ch >= '\t' && ch <= '\r':
		m |= ccSpace
	}
	if ch < 32 || ch == 127 {
		m |= ccCntrl
	}
	if ch > 32 && ch < 127 {
		m |= ccGraph
		if m&(ccDigit|ccAlpha) == 0 {
			m |= ccPunct
		}
	}
	if ch >= 32 && ch < 127 {
		m |= ccPrint
	}
	if ch == ' ' || ch == '\t' {
		m |= ccBlank
	}
	return m&mask != 0 || mask&ccUnder != 0 && ch == '_'
}

func newBracket(neg bool) *bracket { return &bracket{neg: neg} }

func (b *bracket) addClass(name string, neg bool) {
	var lower []byte
	for i := 0; i < len(name); i++ {
		c := name[i]
		if c >= 'A' && c <= 'Z' {
			c += 'a' - 'A'
		}
		lower = append(lower, c)
	}
	mask, ok := classNames[string(lower)]
	if !ok {
		reFail("Invalid character class.")
	}
	if neg {
		b.negClass = append(b.negClass, mask)
	} else {
		b.class |= mask
	}
}

func (b *bracket) makeRange(l, r byte) {
	if int8(l) > int8(r) {
		reFail("Invalid range in bracket expression.")
	}
	b.ranges = append(b.ranges, [2]int8{int8(l), int8(r)})
}

func (b *bracket) ready() *[256]bool {
	var m [256]bool
	for i := range m {
		ch := byte(i)
		in := slices.Contains(b.chars, ch)
		for _, r := range b.ranges {
			if r[0] <= int8(ch) && int8(ch) <= r[1] {
				in = true
			}
		}
		if isCtype(ch, b.class) {
			in = true
		}
		for _, nc := range b.negClass {
			if !isCtype(ch, nc) {
				in = true
			}
		}
		m[i] = in != b.neg
	}
	return &m
}

// bracketState is _BracketState: what the last term of a bracket was.
type bracketState struct {
	kind int // 0 none, 1 a char, 2 a class
	ch   byte
}

func (c *reCompiler) bracketExpression() bool {
	neg := c.matchTok(tkBracketNegBegin)
	if !neg && !c.matchTok(tkBracketBegin) {
		return false
	}
	b := newBracket(neg)
	var last bracketState
	if ch, ok := c.tryChar(); ok {
		last = bracketState{1, ch}
	} else if c.matchTok(tkBracketDash) {
		last = bracketState{1, '-'}
	}
	for c.expressionTerm(&last, b) {
	}
	if last.kind == 1 {
		b.chars = append(b.chars, last.ch)
	}
	c.matcher(b.ready())
	return true
}

func (c *reCompiler) expressionTerm(last *bracketState, b *bracket) bool {
	if c.matchTok(tkBracketEnd) {
		return false
	}
	pushChar := func(ch byte) {
		if last.kind == 1 {
			b.chars = append(b.chars, last.ch)
		}
		*last = bracketState{1, ch}
	}
	pushClass := func() {
		if last.kind == 1 {
			b.chars = append(b.chars, last.ch)
		}
		*last = bracketState{kind: 2}
	}
	if v, ok := c.matchTokVal(tkCollSymbol); ok {
		if len(v) != 1 {
			reFail(fmt.Sprintf("a collating element [.%s.] (only single characters are supported)", v))
		}
		pushChar(v[0])
		return true
	}
	if v, ok := c.matchTokVal(tkEquivClassName); ok {
		reFail(fmt.Sprintf("an equivalence class [=%s=] is not supported", v))
	}
	if v, ok := c.matchTokVal(tkCharClassName); ok {
		pushClass()
		b.addClass(v, false)
		return true
	}
	if ch, ok := c.tryChar(); ok {
		pushChar(ch)
		return true
	}
	if c.matchTok(tkBracketDash) {
		switch {
		case c.matchTok(tkBracketEnd):
			// for "-]" the dash is a literal character
			pushChar('-')
			return false
		case last.kind == 2:
			reFail("Invalid start of '[x-x]' range in regular expression")
		case last.kind == 1:
			if ch, ok := c.tryChar(); ok {
				b.makeRange(last.ch, ch)
				*last = bracketState{}
			} else if c.matchTok(tkBracketDash) {
				b.makeRange(last.ch, '-')
				*last = bracketState{}
			} else {
				reFail("Invalid end of '[x-x]' range in regular expression")
			}
		default:
			pushChar('-')
		}
		return true
	}
	if v, ok := c.matchTokVal(tkQuotedClass); ok {
		pushClass()
		b.addClass(v, v[0] >= 'A' && v[0] <= 'Z')
		return true
	}
	reFail("Unexpected character within '[...]' in regular expression")
	return false
}

// reExec is libstdc++'s depth-first _Executor.
type reExec struct {
	re        *ecmaRegex
	in        []byte
	begin     int
	cur       int
	exact     bool
	prevAvail bool
	hasSol    bool
	results   []reSub
	cur0      []reSub
	repCount  []repCount
	steps     *int
}

type reSub struct {
	first, second int
	matched       bool
}

type repCount struct {
	pos   int
	count int
}

func (re *ecmaRegex) newExec(in []byte, begin int, exact, prevAvail bool, results []reSub, steps *int) *reExec {
	x := &reExec{re: re, in: in, begin: begin, cur: begin, exact: exact, prevAvail: prevAvail, steps: steps}
	x.results = results
	x.cur0 = slices.Clone(results)
	x.repCount = make([]repCount, len(re.states))
	return x
}

// run is _M_main_dispatch for the depth-first executor from state start.
func (x *reExec) run(start int) bool {
	x.hasSol = false
	copy(x.cur0, x.results)
	x.dfs(start)
	return x.hasSol
}

func (x *reExec) isWord(ch byte) bool { return isCtype(ch, ccDigit|ccAlpha|ccUnder) }

func (x *reExec) dfs(i int) {
	if i < 0 {
		return
	}
	*x.steps++
	if *x.steps > reStepLimit {
		panic(errRegexSteps)
	}
	st := &x.re.states[i]
	switch st.op {
	case opRepeat:
		if !st.neg {
			x.repOnceMore(i)
			if !x.hasSol {
				x.dfs(st.next)
			}
		} else {
			x.dfs(st.next)
			if !x.hasSol {
				x.repOnceMore(i)
			}
		}
	case opSubexprBegin:
		r := &x.cur0[st.subexpr]
		back := r.first
		r.first = x.cur
		x.dfs(st.next)
		x.cur0[st.subexpr].first = back
	case opSubexprEnd:
		back := x.cur0[st.subexpr]
		x.cur0[st.subexpr].second, x.cur0[st.subexpr].matched = x.cur, true
		x.dfs(st.next)
		x.cur0[st.subexpr] = back
	case opLineBegin:
		if x.cur == x.begin && !x.prevAvail {
			x.dfs(st.next)
		}
	case opLineEnd:
		if x.cur == len(x.in) {
			x.dfs(st.next)
		}
	case opWordBoundary:
		left := (x.cur != x.begin || x.prevAvail) && x.cur > 0 && x.isWord(x.in[x.cur-1])
		right := x.cur != len(x.in) && x.isWord(x.in[x.cur])
		if (left != right) == !st.neg {
			x.dfs(st.next)
		}
	case opLookahead:
		if x.lookahead(st.alt) == !st.neg {
			x.dfs(st.next)
		}
	case opMatch:
		if x.cur == len(x.in) {
			return
		}
		if st.match[x.in[x.cur]] {
			x.cur++
			x.dfs(st.next)
			x.cur--
		}
	case opBackref:
		sub := x.cur0[st.backref]
		if !sub.matched {
			return
		}
		n := sub.second - sub.first
		last := min(x.cur+n, len(x.in))
		if string(x.in[sub.first:sub.second]) == string(x.in[x.cur:last]) {
			back := x.cur
			x.cur = last
			x.dfs(st.next)
			x.cur = back
		}
	case opAccept:
		if x.exact {
			x.hasSol = x.cur == len(x.in)
		} else {
			x.hasSol = true
		}
		if x.hasSol {
			copy(x.results, x.cur0)
		}
	case opAlternative:
		x.dfs(st.alt)
		if !x.hasSol {
			x.dfs(st.next)
		}
	case opDummy:
		x.dfs(st.next)
	}
}

func (x *reExec) repOnceMore(i int) {
	rc := &x.repCount[i]
	if rc.count == 0 || rc.pos != x.cur {
		back := *rc
		*rc = repCount{x.cur, 1}
		x.dfs(x.re.states[i].alt)
		x.repCount[i] = back
	} else if rc.count < 2 {
		rc.count++
		x.dfs(x.re.states[i].alt)
		x.repCount[i].count--
	}
}

// lookahead is _M_lookahead: the sub-expression matched from here by a
// search of its own, whose groups carry over where they matched.
func (x *reExec) lookahead(start int) bool {
	what := slices.Clone(x.cur0)
	sub := x.re.newExec(x.in, x.cur, false, x.prevAvail, what, x.steps)
	if sub.run(start) {
		for i := range what {
			if what[i].matched {
				x.cur0[i] = what[i]
			}
		}
		return true
	}
	return false
}

// match is std::regex_match (exact) or std::regex_search: the groups of
// the first match, by their byte offsets in in.
func (re *ecmaRegex) match(in []byte, exact bool) (subs []reSub, ok bool, err error) {
	defer func() {
		if r := recover(); r != nil {
			if r != errRegexSteps {
				panic(r)
			}
			subs, ok, err = nil, false, errRegexSteps
		}
	}()
	steps := 0
	results := make([]reSub, re.nSubexpr)
	x := re.newExec(in, 0, exact, false, results, &steps)
	if x.run(re.start) {
		return results, true, nil
	}
	if exact {
		return nil, false, nil
	}
	for begin := 1; begin <= len(in); begin++ {
		clear(results)
		x := re.newExec(in, begin, false, true, results, &steps)
		if x.run(re.start) {
			return results, true, nil
		}
	}
	return nil, false, nil
}
