// Port of llama.cpp src/llama-grammar.cpp (v0.5.0): the GBNF parser
// (llama_grammar_parser).

package grammar

import (
	"fmt"
	"math"
	"sort"
	"strconv"
	"strings"

	"github.com/ggload/ggload/vocab"
)

// ElementType is llama_gretype: what a grammar element is.
type ElementType uint32

// The element types, with llama_gretype's values.
const (
	End          ElementType = 0 // end of a rule
	Alt          ElementType = 1 // start of another alternative
	RuleRef      ElementType = 2 // a reference to a rule (Value: its id)
	Char         ElementType = 3 // a character (Value: the code point)
	CharNot      ElementType = 4 // an inverse character class ([^a])
	CharRngUpper ElementType = 5 // the upper end of a range ([a-z]) of the element before
	CharAlt      ElementType = 6 // another character of a class ([ab])
	CharAny      ElementType = 7 // any character (.)
	Token        ElementType = 8 // a token (<[id]>, <token>; Value: its id)
	TokenNot     ElementType = 9 // any token but one (!<[id]>)
)

var elementNames = [...]string{"END", "ALT", "RULE_REF", "CHAR", "CHAR_NOT", "CHAR_RNG_UPPER", "CHAR_ALT", "CHAR_ANY", "TOKEN", "TOKEN_NOT"}

func (t ElementType) String() string {
	if int(t) < len(elementNames) {
		return elementNames[t]
	}
	return "?"
}

// Element is llama_grammar_element.
type Element struct {
	Type  ElementType
	Value uint32 // a code point, a rule id or a token id
}

// maxRepetition is MAX_REPETITION_THRESHOLD: the most repetitions {m,n}
// may ask for, and the most rules a repetition may multiply.
const maxRepetition = 2000

// Rules is a parsed grammar (llama_grammar_parser's result): each rule
// by its id, and the ids of the names, those a repetition or a group
// made included ("root_1").
type Rules struct {
	SymbolIDs map[string]uint32
	Rules     [][]Element
}

// ParseError is a grammar that does not parse, as llama_grammar_parser
// refuses it. Msg is the pin's message, which names the place by the
// rest of the grammar from it ("expecting ')' at ..."); Offset, Line and
// Column name it too (for an undefined rule, where the pin names no
// place, its first reference).
type ParseError struct {
	Msg          string
	Offset       int
	Line, Column int
}

func (e *ParseError) Error() string {
	if e.Line == 0 {
		return "grammar: " + e.Msg
	}
	msg := e.Msg
	if i := strings.Index(msg, " at "); i >= 0 && len(msg) > i+44 {
		msg = msg[:i+44] + "..."
	}
	if i := strings.IndexAny(msg, "\r\n"); i >= 0 {
		msg = msg[:i] + "..."
	}
	return fmt.Sprintf("grammar: line %d, column %d: %s", e.Line, e.Column, msg)
}

// gbnfParser is llama_grammar_parser over a C string: src holds the text
// up to its first NUL, and at gives 0 past it.
type gbnfParser struct {
	v    *vocab.Vocab
	src  string
	ids  map[string]uint32
	rule [][]Element
	// refAt is where each rule is first referred to, for the place of an
	// undefined rule's error (the pin names none)
	refAt map[uint32]int
}

func (p *gbnfParser) at(i int) byte {
	if i < len(p.src) {
		return p.src[i]
	}
	return 0
}

// fail throws the pin's runtime_error, at offset pos.
func (p *gbnfParser) fail(pos int, msg string) {
	panic(&ParseError{Msg: msg, Offset: pos})
}

// rest is the C string from pos, as the pin's messages print it.
func (p *gbnfParser) rest(pos int) string {
	if pos >= len(p.src) {
		return ""
	}
	return p.src[pos:]
}

// ParseGBNF is llama_grammar_parser::parse: the rules of a GBNF text. A
// <token> is tokenized with v (as llama.cpp tokenizes it: special tokens
// parsed, one token expected); v may be nil where the grammar names no
// token by its text.
func ParseGBNF(text string, v *vocab.Vocab) (rules *Rules, err error) {
	if i := strings.IndexByte(text, 0); i >= 0 {
		text = text[:i]
	}
	p := &gbnfParser{v: v, src: text, ids: map[string]uint32{}, refAt: map[uint32]int{}}
	defer func() {
		if r := recover(); r != nil {
			pe, ok := r.(*ParseError)
			if !ok {
				panic(r)
			}
			if pe.Offset >= 0 {
				pe.Line = 1 + strings.Count(text[:min(pe.Offset, len(text))], "\n")
				pe.Column = 1 + pe.Offset - (strings.LastIndexByte(text[:min(pe.Offset, len(text))], '\n') + 1)
			}
			rules, err = nil, pe
		}
	}()
	pos := p.space(0, true)
	for p.at(pos) != 0 {
		pos = p.parseRule(pos)
	}
	p.validate()
	return &Rules{SymbolIDs: p.ids, Rules: p.rule}, nil
}

// validate checks that every rule is defined, as parse does after the
// text.
func (p *gbnfParser) validate() {
	for id, r := range p.rule {
		if len(r) == 0 {
			panic(&ParseError{Msg: "Undefined rule", Offset: p.where(uint32(id))})
		}
		for _, e := range r {
			if e.Type != RuleRef || int(e.Value) < len(p.rule) && len(p.rule[e.Value]) > 0 {
				continue
			}
			// the name of the missing rule, as the pin finds it: the
			// first in name order with that id
			names := make([]string, 0, len(p.ids))
			for n := range p.ids {
				names = append(names, n)
			}
			sort.Strings(names)
			for _, n := range names {
				if p.ids[n] == e.Value {
					panic(&ParseError{Msg: "Undefined rule identifier '" + n + "'", Offset: p.where(e.Value)})
				}
			}
		}
	}
}

// where is the first reference to rule id, or -1.
func (p *gbnfParser) where(id uint32) int {
	if at, ok := p.refAt[id]; ok {
		return at
	}
	return -1
}

func isDigit(c byte) bool { return c >= '0' && c <= '9' }
func isWordChar(c byte) bool {
	return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c == '-' || isDigit(c)
}

func (p *gbnfParser) space(pos int, newlineOK bool) int {
	for {
		c := p.at(pos)
		switch {
		case c == '#':
			for c := p.at(pos); c != 0 && c != '\r' && c != '\n'; c = p.at(pos) {
				pos++
			}
		case c == ' ' || c == '\t' || newlineOK && (c == '\r' || c == '\n'):
			pos++
		default:
			return pos
		}
	}
}

// run is the end of the run of bytes from pos that ok takes, which
// must not be empty (parse_name, parse_int).
func (p *gbnfParser) run(pos int, ok func(byte) bool, what string) int {
	start := pos
	for ok(p.at(pos)) {
		pos++
	}
	if pos == start {
		p.fail(start, "expecting "+what+" at "+p.rest(start))
	}
	return pos
}

func (p *gbnfParser) name(pos int) int    { return p.run(pos, isWordChar, "name") }
func (p *gbnfParser) integer(pos int) int { return p.run(pos, isDigit, "integer") }

// hex is parse_hex: size hex digits (stopping at the end of the text).
func (p *gbnfParser) hex(pos, size int) (uint32, int) {
	start, end := pos, pos+size
	var v uint32
	for ; pos < end && p.at(pos) != 0; pos++ {
		v <<= 4
		c := p.at(pos)
		switch {
		case c >= 'a' && c <= 'f':
			v += uint32(c-'a') + 10
		case c >= 'A' && c <= 'F':
			v += uint32(c-'A') + 10
		case isDigit(c):
			v += uint32(c - '0')
		default:
			p.fail(start, "expecting "+strconv.Itoa(size)+" hex chars at "+p.rest(start))
		}
	}
	if pos != end {
		p.fail(start, "expecting "+strconv.Itoa(size)+" hex chars at "+p.rest(start))
	}
	return v, pos
}

// decodeChar is the parser's decode_utf8: one UTF-8 sequence, its length
// taken from the first byte, stopping at the end of the text; no check.
func (p *gbnfParser) decodeChar(pos int) (uint32, int) {
	lookup := [16]int{1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 2, 2, 3, 4}
	first := p.at(pos)
	n := lookup[first>>4]
	v := uint32(first & (1<<(8-n) - 1))
	end := pos + n
	pos++
	for ; pos < end && p.at(pos) != 0; pos++ {
		v = v<<6 + uint32(p.at(pos)&0x3f)
	}
	return v, pos
}

func (p *gbnfParser) char(pos int) (uint32, int) {
	if p.at(pos) == '\\' {
		switch c := p.at(pos + 1); c {
		case 'x':
			return p.hex(pos+2, 2)
		case 'u':
			return p.hex(pos+2, 4)
		case 'U':
			return p.hex(pos+2, 8)
		case 't':
			return '\t', pos + 2
		case 'r':
			return '\r', pos + 2
		case 'n':
			return '\n', pos + 2
		case '\\', '"', '[', ']', '-':
			return uint32(c), pos + 2
		}
		p.fail(pos, "unknown escape at "+p.rest(pos))
	}
	if p.at(pos) != 0 {
		return p.decodeChar(pos)
	}
	p.fail(pos, "unexpected end of input")
	return 0, 0
}

// stoul is std::stoul of a run of digits: false where it overflows
// (throwing "stoul"); the value is an unsigned long.
func stoul(s string) (uint64, bool) {
	v, err := strconv.ParseUint(s, 10, 64)
	return v, err == nil
}

func (p *gbnfParser) token(pos int) (uint32, int) {
	start := pos
	if p.at(pos) != '<' {
		p.fail(pos, "expecting '<' at "+p.rest(pos))
	}
	pos++
	if p.at(pos) == '[' {
		pos++
		end := p.integer(pos)
		id, ok := stoul(p.src[pos:end])
		if !ok {
			p.fail(pos, "stoul")
		}
		pos = end
		if p.at(pos) != ']' {
			p.fail(pos, "expecting ']' at "+p.rest(pos))
		}
		pos++
		if p.at(pos) != '>' {
			p.fail(pos, "expecting '>' at "+p.rest(pos))
		}
		return uint32(id), pos + 1
	}
	if p.v == nil {
		p.fail(start, "no vocab to parse token at "+p.rest(start))
	}
	for p.at(pos) != 0 && p.at(pos) != '>' {
		pos++
	}
	if p.at(pos) != '>' {
		p.fail(pos, "expecting '>' at "+p.rest(pos))
	}
	pos++
	toks, err := p.v.Tokenize(p.src[start:pos], false, true)
	if err != nil || len(toks) != 1 {
		// must tokenize to exactly 1 token
		p.fail(start, "invalid token '"+p.src[start:pos]+"'")
	}
	return uint32(toks[0]), pos
}

func (p *gbnfParser) symbolID(name string) uint32 {
	if id, ok := p.ids[name]; ok {
		return id
	}
	id := uint32(len(p.ids))
	p.ids[name] = id
	return id
}

func (p *gbnfParser) generateSymbolID(base string) uint32 {
	id := uint32(len(p.ids))
	p.ids[base+"_"+strconv.FormatUint(uint64(id), 10)] = id
	return id
}

func (p *gbnfParser) addRule(id uint32, r []Element) {
	for uint32(len(p.rule)) <= id {
		p.rule = append(p.rule, nil)
	}
	p.rule[id] = r
}

func (p *gbnfParser) alternates(pos int, ruleName string, ruleID uint32, nested bool) int {
	var r []Element
	pos = p.sequence(pos, ruleName, &r, nested)
	for p.at(pos) == '|' {
		r = append(r, Element{Alt, 0})
		pos = p.space(pos+1, true)
		pos = p.sequence(pos, ruleName, &r, nested)
	}
	r = append(r, Element{End, 0})
	p.addRule(ruleID, r)
	return pos
}

// repetition is parse_sequence's handle_repetitions: the last symbol
// (rule[last:]) repeated from min to max times (max math.MaxUint64 for
// no bound), as rules the parser generates:
//
//	S{m,n} --> S S S (m times) S'(n-m)
//	           S'(x)   ::= S S'(x-1) |
//	           ...
//	           S'(1)   ::= S |
//	S{m,}  --> S S S (m times) S'
//	           S'     ::= S S' |
func (p *gbnfParser) repetition(pos int, ruleName string, r *[]Element, last int, nPrev *uint64, minTimes, maxTimes uint64) {
	noMax := maxTimes == math.MaxUint64
	if last == len(*r) {
		p.fail(pos, "expecting preceding item to */+/?/{ at "+p.rest(pos))
	}
	if !noMax && maxTimes < minTimes {
		// the pin loops until memory runs out generating the rules of a
		// negative count of optional repetitions
		p.fail(pos, fmt.Sprintf("the maximum of a repetition (%d) is below its minimum (%d) at %s", maxTimes, minTimes, p.rest(pos)))
	}
	prev := append([]Element(nil), (*r)[last:]...)
	total := uint64(1)
	if !noMax && maxTimes > 0 {
		total = maxTimes
	} else if minTimes > 0 {
		total = minTimes
	}
	if *nPrev*total > maxRepetition {
		p.fail(pos, "number of rules that are going to be repeated multiplied by the new repetition exceeds sane defaults, please reduce the number of repetitions or rule complexity")
	}
	if minTimes == 0 {
		*r = (*r)[:last]
	} else {
		for i := uint64(1); i < minTimes; i++ {
			*r = append(*r, prev...)
		}
	}
	var lastRec uint32
	nOpt := uint64(1)
	if !noMax {
		nOpt = maxTimes - minTimes
	}
	rec := append([]Element(nil), prev...)
	for i := uint64(0); i < nOpt; i++ {
		rec = rec[:len(prev)]
		id := p.generateSymbolID(ruleName)
		if i > 0 || noMax {
			ref := lastRec
			if noMax {
				ref = id
			}
			rec = append(rec, Element{RuleRef, ref})
		}
		rec = append(rec, Element{Alt, 0}, Element{End, 0})
		p.addRule(id, append([]Element(nil), rec...))
		lastRec = id
	}
	if nOpt > 0 {
		*r = append(*r, Element{RuleRef, lastRec})
	}
	*nPrev *= total
}

// chars reads the characters of a literal (up to '"') or a class (up to
// ']', with ranges) into r, each of the type typ gives for r's length;
// it returns the position of the closing byte.
func (p *gbnfParser) chars(pos int, closing byte, r *[]Element, typ func(n int) ElementType) int {
	for p.at(pos) != closing {
		if p.at(pos) == 0 {
			p.fail(pos, "unexpected end of input")
		}
		var ch uint32
		ch, pos = p.char(pos)
		*r = append(*r, Element{typ(len(*r)), ch})
		if closing == ']' && p.at(pos) == '-' && p.at(pos+1) != ']' {
			if p.at(pos+1) == 0 {
				p.fail(pos+1, "unexpected end of input")
			}
			var end uint32
			end, pos = p.char(pos + 1)
			*r = append(*r, Element{CharRngUpper, end})
		}
	}
	return pos + 1
}

func (p *gbnfParser) sequence(pos int, ruleName string, r *[]Element, nested bool) int {
	last := len(*r)
	nPrev := uint64(1)
	for p.at(pos) != 0 {
		switch c := p.at(pos); {
		case c == '"': // a literal string
			last, nPrev = len(*r), 1
			pos = p.space(p.chars(pos+1, '"', r, func(int) ElementType { return Char }), nested)
		case c == '[': // a character class
			pos++
			start := Char
			if p.at(pos) == '^' {
				pos++
				start = CharNot
			}
			last, nPrev = len(*r), 1
			first := len(*r)
			pos = p.space(p.chars(pos, ']', r, func(n int) ElementType {
				if n > first {
					return CharAlt
				}
				return start
			}), nested)
		case c == '<' || c == '!': // a token
			typ := Token
			if c == '!' {
				typ = TokenNot
				pos++
			}
			id, end := p.token(pos)
			last, nPrev = len(*r), 1
			*r = append(*r, Element{typ, id})
			pos = p.space(end, nested)
		case isWordChar(c): // a rule reference
			end := p.name(pos)
			id := p.symbolID(p.src[pos:end])
			if _, ok := p.refAt[id]; !ok {
				p.refAt[id] = pos
			}
			pos = p.space(end, nested)
			last, nPrev = len(*r), 1
			*r = append(*r, Element{RuleRef, id})
		case c == '(': // a group, as a rule of its own
			pos = p.space(pos+1, true)
			before := uint32(len(p.ids))
			sub := p.generateSymbolID(ruleName)
			pos = p.alternates(pos, ruleName, sub, true)
			nPrev = uint64(max(1, uint32(len(p.ids))-before))
			last = len(*r)
			*r = append(*r, Element{RuleRef, sub})
			if p.at(pos) != ')' {
				p.fail(pos, "expecting ')' at "+p.rest(pos))
			}
			pos = p.space(pos+1, nested)
		case c == '.': // any character
			last, nPrev = len(*r), 1
			*r = append(*r, Element{CharAny, 0})
			pos = p.space(pos+1, nested)
		case c == '*':
			pos = p.space(pos+1, nested)
			p.repetition(pos, ruleName, r, last, &nPrev, 0, math.MaxUint64)
		case c == '+':
			pos = p.space(pos+1, nested)
			p.repetition(pos, ruleName, r, last, &nPrev, 1, math.MaxUint64)
		case c == '?':
			pos = p.space(pos+1, nested)
			p.repetition(pos, ruleName, r, last, &nPrev, 0, 1)
		case c == '{':
			pos = p.braces(pos, ruleName, r, last, &nPrev, nested)
		default:
			return pos
		}
	}
	return pos
}

// braces reads {m}, {m,} or {m,n} and repeats the last symbol so.
func (p *gbnfParser) braces(pos int, ruleName string, r *[]Element, last int, nPrev *uint64, nested bool) int {
	pos = p.space(pos+1, nested)
	if !isDigit(p.at(pos)) {
		p.fail(pos, "expecting an int at "+p.rest(pos))
	}
	end := p.integer(pos)
	minTimes, ok := stoul(p.src[pos:end])
	if !ok {
		p.fail(pos, "stoull")
	}
	pos = p.space(end, nested)
	maxTimes := uint64(math.MaxUint64)
	switch p.at(pos) {
	case '}':
		maxTimes = minTimes
		pos = p.space(pos+1, nested)
	case ',':
		pos = p.space(pos+1, nested)
		if isDigit(p.at(pos)) {
			end := p.integer(pos)
			if maxTimes, ok = stoul(p.src[pos:end]); !ok {
				p.fail(pos, "stoull")
			}
			pos = p.space(end, nested)
		}
		if p.at(pos) != '}' {
			p.fail(pos, "expecting '}' at "+p.rest(pos))
		}
		pos = p.space(pos+1, nested)
	default:
		p.fail(pos, "expecting ',' at "+p.rest(pos))
	}
	if minTimes > maxRepetition {
		p.fail(pos, "number of repetitions exceeds sane defaults, please reduce the number of repetitions")
	}
	if maxTimes != math.MaxUint64 && maxTimes > maxRepetition {
		maxTimes = math.MaxUint64
	}
	p.repetition(pos, ruleName, r, last, nPrev, minTimes, maxTimes)
	return pos
}

func (p *gbnfParser) parseRule(pos int) int {
	end := p.name(pos)
	name := p.src[pos:end]
	after := p.space(end, false)
	id := p.symbolID(name)
	if !(p.at(after) == ':' && p.at(after+1) == ':' && p.at(after+2) == '=') {
		p.fail(after, "expecting ::= at "+p.rest(after))
	}
	pos = p.space(after+3, true)
	pos = p.alternates(pos, name, id, false)
	switch p.at(pos) {
	case '\r':
		if p.at(pos+1) == '\n' {
			pos += 2
		} else {
			pos++
		}
	case '\n':
		pos++
	case 0:
	default:
		p.fail(pos, "expecting newline or end at "+p.rest(pos))
	}
	return p.space(pos, true)
}
