// Port of the regular-expression translation of llama.cpp
// common/json-schema-to-grammar.cpp (v0.5.0): a string schema's
// "pattern" as GBNF.

package grammar

import (
	"math"
	"strconv"
	"strings"
)

// maxPatternDepth is MAX_PATTERN_DEPTH: the groups a pattern may nest.
const maxPatternDepth = 100

// patternError is a pattern the translation stops at: unsupported (a
// valid regex with no grammar equivalent: the string becomes any string,
// with a warning) or invalid (an error).
type patternError struct {
	msg         string
	unsupported bool
}

func unsupportedPattern(msg string) { panic(&patternError{msg, true}) }
func invalidPattern(msg string)     { panic(&patternError{msg, false}) }

// gbnfEscapeLength is gbnf_escape_length: the length of the escape at pos
// that GBNF reads as the regex does (\t \r \n \\ \" \[ \] \- and \x, \u,
// \U with their hex digits), or 0.
func gbnfEscapeLength(p string, pos int) int {
	if pos+1 >= len(p) || p[pos] != '\\' {
		return 0
	}
	nHex := 0
	switch p[pos+1] {
	case 'x':
		nHex = 2
	case 'u':
		nHex = 4
	case 'U':
		nHex = 8
	case 't', 'r', 'n', '\\', '"', '[', ']', '-':
		return 2
	default:
		return 0
	}
	if pos+2+nHex > len(p) {
		return 0
	}
	for _, h := range []byte(p[pos+2 : pos+2+nHex]) {
		if !(h >= '0' && h <= '9' || h >= 'a' && h <= 'f' || h >= 'A' && h <= 'F') {
			return 0
		}
	}
	return 2 + nHex
}

// visitPattern is _visit_pattern: the rule of a string schema's pattern;
// where the pattern has no grammar equivalent, any string (the rules the
// translation added taken back) and a warning; where it is no regex, an
// error.
func (c *converter) visitPattern(pattern, name string) (rule string) {
	snapshot := make(map[string]string, len(c.rules))
	for k, v := range c.rules {
		snapshot[k] = v
	}
	defer func() {
		r := recover()
		if r == nil {
			return
		}
		pe, ok := r.(*patternError)
		if !ok {
			panic(r)
		}
		c.rules = snapshot
		if pe.unsupported {
			c.warnings = append(c.warnings, "pattern "+pattern+" is not supported ("+pe.msg+"), accepting any string")
			rule = c.addRule(name, c.addPrimitive("string", primitiveRules["string"]))
			return
		}
		c.errs = append(c.errs, "Invalid pattern "+pattern+": "+pe.msg)
		rule = ""
	}()
	return c.patternToRule(pattern, name)
}

var nonLiteral = [256]bool{'|': true, '.': true, '(': true, ')': true, '[': true, ']': true, '{': true, '}': true, '*': true, '+': true, '?': true, '^': true, '$': true}

var escapedInRegexpsOnly = [256]bool{'^': true, '$': true, '.': true, '[': true, ']': true, '(': true, ')': true, '|': true, '{': true, '}': true, '*': true, '+': true, '?': true}

// seqItem is a literal (to be quoted) or a rule expression.
type seqItem struct {
	s       string
	literal bool
}

func (it seqItem) rule() string {
	if it.literal {
		return `"` + it.s + `"`
	}
	return it.s
}

// patternTranslator is _pattern_to_rule's state.
type patternTranslator struct {
	c       *converter
	name    string
	p       string
	i       int
	depth   int
	subRule map[string]string
	nSub    int
}

func (c *converter) patternToRule(pattern, name string) string {
	if len(pattern) < 2 || pattern[0] != '^' || pattern[len(pattern)-1] != '$' {
		unsupportedPattern("not anchored with '^' and '$'")
	}
	t := &patternTranslator{c: c, name: name, p: pattern[1 : len(pattern)-1], subRule: map[string]string{}}
	rule := t.transform().rule()
	if t.depth != 0 {
		invalidPattern("unbalanced parentheses")
	}
	return c.addRule(name, `"\"" (`+rule+`) "\""`)
}

func (t *patternTranslator) dot() string {
	rule := `[^\x0A\x0D]`
	if t.c.dotAll {
		rule = `[\U00000000-\U0010FFFF]`
	}
	return t.c.addRule("dot", rule)
}

// joinSeq joins the sequence, merging consecutive literals together.
func joinSeq(seq []seqItem) seqItem {
	var parts []string
	var lit strings.Builder
	flush := func() {
		if lit.Len() > 0 {
			parts = append(parts, `"`+lit.String()+`"`)
			lit.Reset()
		}
	}
	for _, it := range seq {
		if it.literal {
			lit.WriteString(it.s)
		} else {
			flush()
			parts = append(parts, it.s)
		}
	}
	flush()
	return seqItem{strings.Join(parts, " "), false}
}

func (t *patternTranslator) transform() seqItem {
	var seq []seqItem
	p, n := t.p, len(t.p)
	for t.i < n {
		c := p[t.i]
		switch {
		case c == '.':
			seq = append(seq, seqItem{t.dot(), false})
			t.i++
		case c == '(':
			t.i++
			if t.i < n && p[t.i] == '?' {
				if t.i+1 < n && p[t.i+1] == ':' {
					t.i += 2 // a non-capturing group, as a group
				} else {
					unsupportedPattern("unsupported group syntax")
				}
			}
			t.depth++
			if t.depth > maxPatternDepth {
				unsupportedPattern("pattern nesting too deep")
			}
			seq = append(seq, seqItem{"(" + t.transform().rule() + ")", false})
		case c == ')':
			t.i++
			if t.depth == 0 {
				invalidPattern("unbalanced parentheses")
			}
			t.depth--
			return joinSeq(seq)
		case c == '^' || c == '$':
			unsupportedPattern("anchor inside the pattern")
		case c == '[':
			seq = append(seq, seqItem{t.class(), false})
		case c == '|':
			seq = append(seq, seqItem{"|", false})
			t.i++
		case c == '*' || c == '+' || c == '?':
			if len(seq) == 0 {
				invalidPattern("nothing to repeat")
			}
			seq[len(seq)-1] = seqItem{seq[len(seq)-1].rule() + string(c), false}
			t.i++
		case c == '{':
			seq = t.repeat(seq)
		default:
			seq = append(seq, seqItem{t.literal(c), true})
		}
	}
	return joinSeq(seq)
}

func (t *patternTranslator) class() string {
	p, n := t.p, len(t.p)
	var b strings.Builder
	b.WriteByte('[')
	t.i++
	for t.i < n && p[t.i] != ']' {
		if p[t.i] == '\\' {
			l := gbnfEscapeLength(p, t.i)
			if l == 0 {
				unsupportedPattern("unsupported escape in character class: " + p[t.i:min(t.i+2, n)])
			}
			b.WriteString(p[t.i : t.i+l])
			t.i += l
		} else {
			b.WriteByte(p[t.i])
			t.i++
		}
	}
	if t.i >= n {
		invalidPattern("unterminated character class")
	}
	b.WriteByte(']')
	t.i++
	return b.String()
}

func (t *patternTranslator) repeat(seq []seqItem) []seqItem {
	p, n := t.p, len(t.p)
	start := t.i
	t.i++
	for t.i < n && p[t.i] != '}' {
		t.i++
	}
	if t.i >= n {
		unsupportedPattern("unterminated curly brackets")
	}
	inner := p[start+1 : t.i]
	t.i++
	nums := strings.Split(inner, ",")
	minTimes, maxTimes := 0, math.MaxInt32
	if len(nums) != 1 && len(nums) != 2 {
		unsupportedPattern("wrong number of values in curly brackets")
	}
	num := func(s string) int {
		v, ok := stoi(s)
		if !ok {
			unsupportedPattern("invalid number in curly brackets")
		}
		return v
	}
	if len(nums) == 1 {
		minTimes = num(nums[0])
		maxTimes = minTimes
	} else {
		if nums[0] != "" {
			minTimes = num(nums[0])
		}
		if nums[1] != "" {
			maxTimes = num(nums[1])
		}
	}
	if len(seq) == 0 {
		invalidPattern("nothing to repeat")
	}
	last := &seq[len(seq)-1]
	sub := last.s
	if last.literal {
		sub = `"` + sub + `"`
	} else {
		id, ok := t.subRule[sub]
		if !ok {
			t.subRule[sub] = ""
		}
		if id == "" {
			id = t.c.addRule(t.name+"-"+strconv.Itoa(len(t.subRule)), sub)
			t.subRule[sub] = id
		}
		sub = id
	}
	*last = seqItem{buildRepetition(sub, minTimes, maxTimes, ""), false}
	return seq
}

// literal reads a run of literal characters, escapes included, which
// stops before a character that a following quantifier would take.
func (t *patternTranslator) literal(c byte) string {
	p, n := t.p, len(t.p)
	var lit strings.Builder
	for t.i < n {
		switch {
		case p[t.i] == '\\':
			if t.i == n-1 {
				invalidPattern("trailing backslash")
			}
			if next := p[t.i+1]; escapedInRegexpsOnly[next] {
				lit.WriteByte(next)
				t.i += 2
				continue
			}
			l := gbnfEscapeLength(p, t.i)
			if l == 0 {
				unsupportedPattern("unsupported escape: " + p[t.i:t.i+2])
			}
			lit.WriteString(p[t.i : t.i+l])
			t.i += l
		case p[t.i] == '"':
			lit.WriteString(`\"`)
			t.i++
		case !nonLiteral[p[t.i]] && (t.i == n-1 || lit.Len() == 0 || p[t.i+1] == '.' || !nonLiteral[p[t.i+1]]):
			lit.WriteByte(p[t.i])
			t.i++
		default:
			if lit.Len() == 0 { // nothing was consumed, e.g. a stray ']' or '}'
				unsupportedPattern("unsupported character: " + string([]byte{c}))
			}
			return lit.String()
		}
	}
	if lit.Len() == 0 {
		unsupportedPattern("unsupported character: " + string([]byte{c}))
	}
	return lit.String()
}
