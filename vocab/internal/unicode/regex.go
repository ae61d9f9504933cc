// Port of libstdc++'s std::regex executor, as llama.cpp src/unicode.cpp
// (v0.5.0) matches with it.

package unicode

import (
	"fmt"
	"strconv"
)

// This file is a regex engine with the semantics of libstdc++'s std::regex
// in its ECMAScript grammar as unicode_regex_split_stl builds it
// (optimize | nosubs): the same parse of the pattern, the same automaton
// (alternatives tried left to right, greedy repeats, bounded repeats as
// copies of their operand, lookahead run as a separate search from the
// current position with the caller's flags) and the same depth-first
// executor, including its guard against looping on empty iterations. It
// runs over code units held as int32: the bytes of std::string as the
// signed char of x86-64 Linux (sign-extended), or the code points of
// std::wstring (wchar_t). Character classes are those of the "C" locale,
// which libstdc++'s regex_traits consults for both types: ASCII only.

// regexError is a pattern std::regex rejects (its regex_error).
type regexError struct {
	pattern string
	msg     string
}

func (e *regexError) Error() string {
	return fmt.Sprintf("unicode: regex %q: %s", e.pattern, e.msg)
}

type opcode uint8

const (
	opDummy  opcode = iota
	opAlt           // try alt, then next
	opRepeat        // loop: alt is the operand, next what follows
	opBOL
	opEOL
	opWordBound // neg: \B
	opLookahead // alt: the lookahead's body, ending in opAccept; neg: (?!
	opChar
	opAny
	opClass
	opAccept
)

type state struct {
	op    opcode
	neg   bool
	ch    int32
	next  int32
	alt   int32
	class *bracket
}

// program is a compiled pattern.
type program struct {
	states []state
	start  int32
	wide   bool // wchar_t: '.' also stops at U+2028 and U+2029
}

// ctype classes of the "C" locale.
const (
	clsSpace = 1 << iota
	clsDigit
	clsWord // alnum and '_'
)

func ctypeOf(c int32) uint8 {
	if c < 0 || c > 0x7F {
		return 0
	}
	switch {
	case c == ' ' || c >= 9 && c <= 13:
		return clsSpace
	case c >= '0' && c <= '9':
		return clsDigit | clsWord
	case c >= 'a' && c <= 'z', c >= 'A' && c <= 'Z', c == '_':
		return clsWord
	}
	return 0
}

// bracket is libstdc++'s _BracketMatcher: single characters, ranges,
// classes and negated classes, the whole possibly negated.
type bracket struct {
	negate   bool
	chars    []int32
	ranges   [][2]int32
	classes  uint8
	negClass []uint8
	ascii    [128]bool // the answer for 0..127, computed once
	high     [128]bool // for the char type: the answer for -128..-1
}

func (b *bracket) eval(c int32) bool {
	m := false
	for _, x := range b.chars {
		if x == c {
			m = true
			break
		}
	}
	if !m {
		for _, r := range b.ranges {
			if r[0] <= c && c <= r[1] {
				m = true
				break
			}
		}
	}
	if !m && ctypeOf(c)&b.classes != 0 {
		m = true
	}
	if !m {
		for _, k := range b.negClass {
			if ctypeOf(c)&k == 0 {
				m = true
				break
			}
		}
	}
	return m != b.negate
}

func (b *bracket) ready() {
	for i := range b.ascii {
		b.ascii[i] = b.eval(int32(i))
		b.high[i] = b.eval(int32(i) - 128)
	}
}

func (b *bracket) matches(c int32) bool {
	if uint32(c) < 128 {
		return b.ascii[c]
	}
	if c < 0 && c >= -128 {
		return b.high[c+128]
	}
	return b.eval(c)
}

// The kinds of item an escape or a bracket's scan yields.
type tokKind uint8

const (
	tkChar    tokKind = iota // a character
	tkHex                    // a character written \xHH or \uHHHH
	tkClass                  // \d \D \s \S \w \W; the value is the letter
	tkBackref                // \1 to \9: under nosubs no group exists to refer to
	tkDash                   // '-' in a bracket
	tkClose                  // ']' ending a bracket
)

type parser struct {
	pat    []int32
	src    string
	i      int
	wide   bool
	states []state
}

func (p *parser) fail(msg string) error { return &regexError{p.src, msg} }

func (p *parser) add(s state) int32 {
	s.next = -1
	p.states = append(p.states, s)
	return int32(len(p.states) - 1)
}

// frag is a piece of automaton: its first state and the state whose next
// is still open.
type frag struct{ start, end int32 }

func (p *parser) link(f frag, to int32) { p.states[f.end].next = to }

func (p *parser) cat(a, b frag) frag {
	p.link(a, b.start)
	return frag{a.start, b.end}
}

func (p *parser) dummy() frag {
	s := p.add(state{op: opDummy})
	return frag{s, s}
}

// compile parses pattern (the code units of the regex) and builds its
// automaton; wide selects wchar_t's rules for '.'.
func compile(pattern []int32, src string, wide bool) (*program, error) {
	p := &parser{pat: pattern, src: src, wide: wide}
	body, err := p.disjunction()
	if err != nil {
		return nil, err
	}
	if p.i < len(p.pat) {
		return nil, p.fail("unmatched ')'")
	}
	acc := p.add(state{op: opAccept})
	p.link(body, acc)
	return &program{states: p.states, start: body.start, wide: wide}, nil
}

func (p *parser) peek() (int32, bool) {
	if p.i < len(p.pat) {
		return p.pat[p.i], true
	}
	return 0, false
}

// disjunction parses alternatives separated by '|'. The first alternative
// that leads to a match wins.
func (p *parser) disjunction() (frag, error) {
	first, err := p.alternative()
	if err != nil {
		return frag{}, err
	}
	cur := first
	for {
		c, ok := p.peek()
		if !ok || c != '|' {
			return cur, nil
		}
		p.i++
		second, err := p.alternative()
		if err != nil {
			return frag{}, err
		}
		end := p.add(state{op: opDummy})
		p.link(cur, end)
		p.link(second, end)
		a := p.add(state{op: opAlt, alt: cur.start})
		p.states[a].next = second.start
		cur = frag{a, end}
	}
}

func (p *parser) alternative() (frag, error) {
	f := p.dummy()
	for {
		t, ok, err := p.term()
		if err != nil {
			return frag{}, err
		}
		if !ok {
			return f, nil
		}
		f = p.cat(f, t)
	}
}

// term parses an assertion, or an atom with its quantifiers.
func (p *parser) term() (frag, bool, error) {
	c, ok := p.peek()
	if !ok || c == '|' || c == ')' {
		return frag{}, false, nil
	}
	start := p.i
	switch c {
	case '^':
		p.i++
		s := p.add(state{op: opBOL})
		return frag{s, s}, true, nil
	case '$':
		p.i++
		s := p.add(state{op: opEOL})
		return frag{s, s}, true, nil
	case '\\':
		if p.i+1 < len(p.pat) && (p.pat[p.i+1] == 'b' || p.pat[p.i+1] == 'B') {
			p.i += 2
			s := p.add(state{op: opWordBound, neg: p.pat[p.i-1] == 'B'})
			return frag{s, s}, true, nil
		}
	case '(':
		if p.i+1 < len(p.pat) && p.pat[p.i+1] == '?' {
			if p.i+2 >= len(p.pat) {
				return frag{}, false, p.fail("'(?' at the end")
			}
			switch p.pat[p.i+2] {
			case '=', '!':
				neg := p.pat[p.i+2] == '!'
				p.i += 3
				body, err := p.disjunction()
				if err != nil {
					return frag{}, false, err
				}
				if c, ok := p.peek(); !ok || c != ')' {
					return frag{}, false, p.fail("parenthesis is not closed")
				}
				p.i++
				acc := p.add(state{op: opAccept})
				p.link(body, acc)
				s := p.add(state{op: opLookahead, alt: body.start, neg: neg})
				return frag{s, s}, true, nil
			case ':':
			default:
				return frag{}, false, p.fail("invalid '(?...)' zero-width assertion")
			}
		}
	}
	p.i = start
	base := int32(len(p.states))
	f, ok, err := p.atom()
	if err != nil || !ok {
		return f, ok, err
	}
	for {
		c, ok := p.peek()
		if !ok {
			return f, true, nil
		}
		switch c {
		case '*', '+', '?':
			p.i++
			lazy := p.eat('?')
			r := p.add(state{op: opRepeat, alt: f.start, neg: lazy})
			switch c {
			case '*':
				p.link(f, r)
				f = frag{r, r}
			case '+':
				p.link(f, r)
				f = frag{f.start, r}
			case '?':
				end := p.add(state{op: opDummy})
				p.link(f, end)
				p.states[r].next = end
				f = frag{r, end}
			}
		case '{':
			p.i++
			lo, ok := p.number()
			if !ok {
				return frag{}, false, p.fail("bad brace")
			}
			hi, inf := lo, false
			if p.eat(',') {
				if n, ok := p.number(); ok {
					hi = n
				} else {
					inf = true
				}
			}
			if !p.eat('}') {
				return frag{}, false, p.fail("bad brace")
			}
			lazy := p.eat('?')
			if !inf && hi < lo {
				return frag{}, false, p.fail("bad brace")
			}
			// every copy of the operand is a clone of its states, as in
			// libstdc++'s _StateSeq::_M_clone; the original stays unused.
			top := int32(len(p.states))
			orig := f
			clone := func() (frag, error) {
				off := int32(len(p.states)) - base
				for k := base; k < top; k++ {
					st := p.states[k]
					if st.next >= base && st.next < top {
						st.next += off
					}
					if (st.op == opAlt || st.op == opRepeat || st.op == opLookahead) && st.alt >= base && st.alt < top {
						st.alt += off
					}
					p.states = append(p.states, st)
				}
				return frag{orig.start + off, orig.end + off}, nil
			}
			e := p.dummy()
			for k := 0; k < lo; k++ {
				g, err := clone()
				if err != nil {
					return frag{}, false, err
				}
				e = p.cat(e, g)
			}
			if inf {
				g, err := clone()
				if err != nil {
					return frag{}, false, err
				}
				r := p.add(state{op: opRepeat, alt: g.start, neg: lazy})
				p.link(g, r)
				e = p.cat(e, frag{r, r})
			} else {
				end := p.add(state{op: opDummy})
				for k := 0; k < hi-lo; k++ {
					g, err := clone()
					if err != nil {
						return frag{}, false, err
					}
					r := p.add(state{op: opRepeat, alt: g.start, neg: lazy})
					p.states[r].next = end
					e = p.cat(e, frag{r, g.end})
				}
				e = p.cat(e, frag{end, end})
			}
			f = e
		default:
			return f, true, nil
		}
	}
}

// atom parses and builds one atom: a character, '.', a class, a bracket
// or a group. Its quantifiers are term's.
func (p *parser) atom() (frag, bool, error) {
	c, ok := p.peek()
	if !ok {
		return frag{}, false, nil
	}
	switch c {
	case '.':
		p.i++
		s := p.add(state{op: opAny})
		return frag{s, s}, true, nil
	case '(':
		p.i++
		if c, ok := p.peek(); ok && c == '?' {
			p.i += 2 // "?:"
		}
		d := p.dummy()
		body, err := p.disjunction()
		if err != nil {
			return frag{}, false, err
		}
		if c, ok := p.peek(); !ok || c != ')' {
			return frag{}, false, p.fail("parenthesis is not closed")
		}
		p.i++
		return p.cat(d, body), true, nil
	case '[':
		return p.bracketExpr()
	case '*', '+', '?', '{':
		return frag{}, false, p.fail("nothing to repeat")
	case ']', '}':
		p.i++
		s := p.add(state{op: opChar, ch: c})
		return frag{s, s}, true, nil
	case '\\':
		kind, v, err := p.escape(false)
		if err != nil {
			return frag{}, false, err
		}
		switch kind {
		case tkClass:
			b := &bracket{negate: v >= 'A' && v <= 'Z'}
			b.classes = classBit(v)
			b.ready()
			s := p.add(state{op: opClass, class: b})
			return frag{s, s}, true, nil
		case tkBackref:
			return frag{}, false, p.fail("back-reference to a group that does not exist (nosubs)")
		}
		s := p.add(state{op: opChar, ch: v})
		return frag{s, s}, true, nil
	}
	p.i++
	s := p.add(state{op: opChar, ch: c})
	return frag{s, s}, true, nil
}

func classBit(c int32) uint8 {
	switch c {
	case 'd', 'D':
		return clsDigit
	case 's', 'S':
		return clsSpace
	}
	return clsWord
}

func (p *parser) eat(c int32) bool {
	if p.i < len(p.pat) && p.pat[p.i] == c {
		p.i++
		return true
	}
	return false
}

func (p *parser) number() (int, bool) {
	n, any := 0, false
	for p.i < len(p.pat) && p.pat[p.i] >= '0' && p.pat[p.i] <= '9' {
		n = n*10 + int(p.pat[p.i]-'0')
		if n > 1<<20 {
			n = 1 << 20
		}
		p.i++
		any = true
	}
	return n, any
}

// escape reads the escape at p.i ('\\' and what follows) as libstdc++'s
// ECMAScript scanner does: a character (tkChar, tkHex) or a class (tkClass).
// \b and \B are handled by the callers.
func (p *parser) escape(inBracket bool) (tokKind, int32, error) {
	p.i++
	c, ok := p.peek()
	if !ok {
		return 0, 0, p.fail("trailing backslash")
	}
	p.i++
	switch c {
	case '0':
		return tkChar, 0, nil
	case 'b':
		if inBracket {
			return tkChar, '\b', nil
		}
	case 'f':
		return tkChar, '\f', nil
	case 'n':
		return tkChar, '\n', nil
	case 'r':
		return tkChar, '\r', nil
	case 't':
		return tkChar, '\t', nil
	case 'v':
		return tkChar, '\v', nil
	case 'd', 'D', 's', 'S', 'w', 'W':
		return tkClass, c, nil
	case 'c':
		v, ok := p.peek()
		if !ok {
			return 0, 0, p.fail("bad escape")
		}
		p.i++
		return tkChar, v, nil
	case 'x', 'u':
		n := 2
		if c == 'u' {
			n = 4
		}
		if p.i+n > len(p.pat) {
			return 0, 0, p.fail("bad escape")
		}
		var digits []byte
		for k := 0; k < n; k++ {
			d := p.pat[p.i+k]
			if !(d >= '0' && d <= '9' || d >= 'a' && d <= 'f' || d >= 'A' && d <= 'F') {
				return 0, 0, p.fail("bad escape")
			}
			digits = append(digits, byte(d))
		}
		p.i += n
		v, _ := strconv.ParseUint(string(digits), 16, 32)
		if !p.wideUnits() {
			return tkHex, int32(int8(v)), nil
		}
		return tkHex, int32(v), nil
	}
	if c >= '1' && c <= '9' {
		return tkBackref, c, nil
	}
	return tkChar, c, nil
}

// wideUnits is set while compiling for wchar_t; hex escapes become chars
// of the pattern's type.
func (p *parser) wideUnits() bool { return p.wide }

// bracketExpr parses [...] as libstdc++'s _M_insert_bracket_matcher and
// _M_expression_term: a '-' first or last is literal, "x-y" is a range
// (compared as the code unit type compares), a '-' after a range or a
// class starts nothing.
func (p *parser) bracketExpr() (frag, bool, error) {
	p.i++ // '['
	b := &bracket{}
	if p.eat('^') {
		b.negate = true
	}
	const (
		lastNone = iota
		lastChar
		lastClass
	)
	last, lastVal := lastNone, int32(0)
	// next reads the bracket's next item.
	type item struct {
		kind tokKind
		v    int32
	}
	next := func() (item, error) {
		c, ok := p.peek()
		if !ok {
			return item{}, p.fail("unclosed bracket")
		}
		p.i++
		switch c {
		case '-':
			return item{kind: tkDash, v: '-'}, nil // the dash token
		case ']':
			return item{kind: tkClose}, nil
		case '[':
			if n, ok := p.peek(); ok && (n == '.' || n == ':' || n == '=') {
				return item{}, p.fail("[: :], [. .] and [= =] are not supported")
			} else if !ok {
				return item{}, p.fail("incomplete '[['")
			}
			return item{kind: tkChar, v: c}, nil
		case '\\':
			p.i--
			k, v, err := p.escape(true)
			return item{kind: k, v: v}, err
		}
		return item{kind: tkChar, v: c}, nil
	}
	isChar := func(it item) bool { return it.kind == tkChar || it.kind == tkHex }
	pushChar := func(v int32) {
		if last == lastChar {
			b.chars = append(b.chars, lastVal)
		}
		last, lastVal = lastChar, v
	}
	pushClass := func() {
		if last == lastChar {
			b.chars = append(b.chars, lastVal)
		}
		last = lastClass
	}
	first, err := next()
	if err != nil {
		return frag{}, false, err
	}
	pending := &first
	switch {
	case isChar(first):
		last, lastVal = lastChar, first.v
		pending = nil
	case first.kind == tkDash:
		last, lastVal = lastChar, '-'
		pending = nil
	case first.kind == tkBackref:
		return frag{}, false, p.fail("back-reference in a bracket")
	}
	for {
		var it item
		if pending != nil {
			it, pending = *pending, nil
		} else if it, err = next(); err != nil {
			return frag{}, false, err
		}
		if it.kind == tkClose {
			break
		}
		switch {
		case isChar(it):
			pushChar(it.v)
		case it.kind == tkDash:
			it2, err := next()
			if err != nil {
				return frag{}, false, err
			}
			if it2.kind == tkClose {
				pushChar('-')
				goto done
			}
			switch last {
			case lastClass:
				return frag{}, false, p.fail("invalid start of range in bracket expression")
			case lastChar:
				var hi int32
				switch {
				case isChar(it2):
					hi = it2.v
				case it2.kind == tkDash:
					hi = '-'
				default:
					return frag{}, false, p.fail("invalid end of range in bracket expression")
				}
				if lastVal > hi {
					return frag{}, false, p.fail("invalid range in bracket expression")
				}
				b.ranges = append(b.ranges, [2]int32{lastVal, hi})
				last = lastNone
			default:
				pushChar('-')
				pending = &it2
			}
		case it.kind == tkClass:
			pushClass()
			if it.v >= 'A' && it.v <= 'Z' {
				b.negClass = append(b.negClass, classBit(it.v))
			} else {
				b.classes |= classBit(it.v)
			}
		default:
			return frag{}, false, p.fail("unexpected character in bracket expression")
		}
	}
done:
	if last == lastChar {
		b.chars = append(b.chars, lastVal)
	}
	b.ready()
	s := p.add(state{op: opClass, class: b})
	return frag{s, s}, true, nil
}

// Match flags of the executor, as regex_constants' match_flag_type.
const (
	flagNotNull    = 1 << iota // match_not_null
	flagContinuous             // match_continuous
	flagPrevAvail              // match_prev_avail
)

// executor is libstdc++'s depth-first _Executor over text[begin:end];
// text before begin is read only for \b under flagPrevAvail.
type executor struct {
	prog   *program
	text   []int32
	begin  int
	end    int
	cur    int
	flags  int
	hasSol bool
	solEnd int
	repPos []int32
	repCnt []uint8
}

// newExecutor makes an executor over text[begin:end]. The repeat counters
// start at zero; the executor leaves them at zero when it returns, so a
// lookahead's executor shares its caller's (the states of a lookahead's
// body are entered by no one else) and a search its split's.
func newExecutor(prog *program, text []int32, begin, end, flags int) executor {
	n := len(prog.states)
	return executor{prog: prog, text: text, begin: begin, end: end, flags: flags,
		repPos: make([]int32, n), repCnt: make([]uint8, n)}
}

// searchFromFirst tries a match starting at begin (prefix mode).
func (e *executor) searchFromFirst() bool {
	e.cur = e.begin
	e.hasSol = false
	e.dfs(e.prog.start)
	return e.hasSol
}

// search is _M_search: the first position from begin where a match starts.
func (e *executor) search() bool {
	if e.searchFromFirst() {
		return true
	}
	if e.flags&flagContinuous != 0 {
		return false
	}
	e.flags |= flagPrevAvail
	for e.begin != e.end {
		e.begin++
		if e.searchFromFirst() {
			return true
		}
	}
	return false
}

func (e *executor) isWord(c int32) bool { return ctypeOf(c)&clsWord != 0 }

func (e *executor) dfs(i int32) {
	for {
		st := &e.prog.states[i]
		switch st.op {
		case opDummy:
			i = st.next
			continue
		case opAlt:
			e.dfs(st.alt)
			if e.hasSol {
				return
			}
			i = st.next
			continue
		case opRepeat:
			if !st.neg {
				e.repOnceMore(i)
				if e.hasSol {
					return
				}
				i = st.next
				continue
			}
			e.dfs(st.next)
			if !e.hasSol {
				e.repOnceMore(i)
			}
			return
		case opBOL:
			if e.cur != e.begin || e.flags&flagPrevAvail != 0 {
				return
			}
			i = st.next
			continue
		case opEOL:
			if e.cur != e.end {
				return
			}
			i = st.next
			continue
		case opWordBound:
			left := false
			if e.cur != e.begin || e.flags&flagPrevAvail != 0 {
				left = e.isWord(e.text[e.cur-1])
			}
			right := e.cur != e.end && e.isWord(e.text[e.cur])
			if (left != right) == st.neg {
				return
			}
			i = st.next
			continue
		case opLookahead:
			sub := executor{prog: e.prog, text: e.text, begin: e.cur, end: e.end, flags: e.flags, repPos: e.repPos, repCnt: e.repCnt}
			if sub.lookFrom(st.alt) == st.neg {
				return
			}
			i = st.next
			continue
		case opChar:
			if e.cur == e.end || e.text[e.cur] != st.ch {
				return
			}
		case opAny:
			if e.cur == e.end {
				return
			}
			c := e.text[e.cur]
			if c == '\n' || c == '\r' || e.prog.wide && (c == 0x2028 || c == 0x2029) {
				return
			}
		case opClass:
			if e.cur == e.end || !st.class.matches(e.text[e.cur]) {
				return
			}
		case opAccept:
			e.hasSol = !(e.cur == e.begin && e.flags&flagNotNull != 0)
			if e.hasSol {
				e.solEnd = e.cur
			}
			return
		}
		// a state that consumed one unit
		e.cur++
		e.dfs(st.next)
		e.cur--
		return
	}
}

// lookFrom runs a lookahead's body from begin, as _M_lookahead's
// sub-executor does.
func (e *executor) lookFrom(start int32) bool {
	e.cur = e.begin
	e.hasSol = false
	e.dfs(start)
	return e.hasSol
}

// repOnceMore enters a repeat's operand, at most twice at the same
// position (libstdc++'s _M_rep_once_more).
func (e *executor) repOnceMore(i int32) {
	st := &e.prog.states[i]
	if e.repCnt[i] == 0 || e.repPos[i] != int32(e.cur) {
		bp, bc := e.repPos[i], e.repCnt[i]
		e.repPos[i], e.repCnt[i] = int32(e.cur), 1
		e.dfs(st.alt)
		e.repPos[i], e.repCnt[i] = bp, bc
	} else if e.repCnt[i] < 2 {
		e.repCnt[i]++
		e.dfs(st.alt)
		e.repCnt[i]--
	}
}

// regexSearch is std::regex_search over text[begin:end] with flags: the
// start and end of the first match.
func (e *executor) regexSearch(begin, end, flags int) (int, int, bool) {
	e.begin, e.end, e.flags = begin, end, flags
	if !e.search() {
		return 0, 0, false
	}
	return e.begin, e.solEnd, true
}

// splitSTL is unicode_regex_split_stl: for each chunk of offsets, the
// matches that std::regex_iterator yields, each preceded by the text
// before it, and the chunk's rest. Empty matches give empty pieces.
func (prog *program) splitSTL(text []int32, offsets []int) []int {
	out := make([]int, 0, len(offsets))
	ex := newExecutor(prog, text, 0, 0, 0)
	start := 0
	for _, off := range offsets {
		lo, hi := start, start+off
		startIdx := 0
		// the iterator's first search, then its operator++
		mb, me, ok := ex.regexSearch(lo, hi, 0)
		flags := 0
		for ok {
			pos := mb - lo
			if pos > startIdx {
				out = append(out, pos-startIdx)
			}
			out = append(out, me-mb)
			startIdx = pos + (me - mb)
			// operator++
			from := me
			if mb == me {
				if from == hi {
					break
				}
				if b, e2, ok2 := ex.regexSearch(from, hi, flags|flagNotNull|flagContinuous); ok2 {
					mb, me = b, e2
					continue
				}
				from++
			}
			flags |= flagPrevAvail
			mb, me, ok = ex.regexSearch(from, hi, flags)
		}
		if startIdx < off {
			out = append(out, off-startIdx)
		}
		start += off
	}
	return out
}
