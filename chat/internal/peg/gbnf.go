// Port of llama.cpp common/peg-parser.cpp (v0.5.0):
// common_peg_arena::build_grammar and the Aho-Corasick grammars.

package peg

import (
	"sort"
	"strconv"
	"strings"

	"github.com/ggload/ggload/grammar"
)

func gbnfEscapeClassChar(c rune) string {
	switch c {
	case '-', ']', '[', '\\':
		return `\` + string(c)
	case '\n':
		return `\n`
	case '\t':
		return `\t`
	case '\r':
		return `\r`
	}
	if c >= 0x20 && c <= 0x7e {
		return string(c)
	}
	const hex = "0123456789ABCDEF"
	u := uint32(c)
	var b []byte
	switch {
	case u <= 0xff:
		b = []byte{'\\', 'x', hex[u>>4&0xf], hex[u&0xf]}
	case u <= 0xffff:
		b = []byte{'\\', 'u', hex[u>>12&0xf], hex[u>>8&0xf], hex[u>>4&0xf], hex[u&0xf]}
	default:
		b = []byte{'\\', 'U'}
		for i := 0; i < 8; i++ {
			b = append(b, hex[u>>((7-i)*4)&0xf])
		}
	}
	return string(b)
}

func gbnfCharClass(chars []rune, negate bool) string {
	var s strings.Builder
	if negate {
		s.WriteString("[^")
	} else {
		s.WriteString("[")
	}
	for _, c := range chars {
		s.WriteString(gbnfEscapeClassChar(c))
	}
	s.WriteString("]")
	return s.String()
}

type acRuleFunc func(completing []rune, buckets []acBucket, specific []rune, stateName func(int) string) string

// acBucket is the characters that lead to one state (the pin's std::map
// entry, in state order).
type acBucket struct {
	state int
	chars []rune
}

func gbnfACGrammar(b *grammar.Builder, prefix string, words []string, build acRuleFunc) string {
	ac := newAhoCorasick(words)
	stateName := func(s int) string {
		if s == 0 {
			return prefix
		}
		num := strconv.Itoa(s)
		if len(num) == 1 {
			num = "0" + num
		}
		return prefix + "-" + num
	}
	for q := 0; q < ac.numStates(); q++ {
		if ac.isTerminal(q) {
			continue
		}
		byState := map[int][]rune{}
		var completing, specific []rune
		for _, c := range ac.alphabet {
			d := ac.next(q, c)
			if ac.isTerminal(d) {
				completing = append(completing, c)
				specific = append(specific, c)
			} else if d != 0 {
				byState[d] = append(byState[d], c)
				specific = append(specific, c)
			}
		}
		buckets := make([]acBucket, 0, len(byState))
		for d, cs := range byState {
			buckets = append(buckets, acBucket{d, cs})
		}
		sort.Slice(buckets, func(i, j int) bool { return buckets[i].state < buckets[j].state })
		b.AddRule(stateName(q), build(completing, buckets, specific, stateName))
	}
	if ac.isTerminal(0) {
		b.AddRule(prefix, "|")
	}
	return stateName(0)
}

// gbnfExcluding matches strings that hold none of words.
func gbnfExcluding(b *grammar.Builder, prefix string, words []string) string {
	return gbnfACGrammar(b, prefix, words, func(_ []rune, buckets []acBucket, specific []rune, name func(int) string) string {
		rhs := "|"
		for _, bk := range buckets {
			rhs += " " + gbnfCharClass(bk.chars, false) + " " + name(bk.state) + " |"
		}
		return rhs + " " + gbnfCharClass(specific, true) + " " + name(0)
	})
}

// gbnfIncluding matches everything up to and including the first of words.
func gbnfIncluding(b *grammar.Builder, prefix string, words []string) string {
	return gbnfACGrammar(b, prefix, words, func(completing []rune, buckets []acBucket, specific []rune, name func(int) string) string {
		var alts []string
		if len(completing) > 0 {
			alts = append(alts, gbnfCharClass(completing, false))
		}
		for _, bk := range buckets {
			alts = append(alts, gbnfCharClass(bk.chars, false)+" "+name(bk.state))
		}
		alts = append(alts, gbnfCharClass(specific, true)+" "+name(0))
		return strings.Join(alts, " | ")
	})
}

// reachableRules is collect_reachable_rules.
func (a *Arena) reachableRules(from ID) map[string]bool {
	reachable := map[string]bool{}
	var visit func(id ID)
	visit = func(id ID) {
		p := &a.parsers[id]
		switch p.kind {
		case KindSequence, KindChoice:
			for _, c := range p.children {
				visit(c)
			}
		case KindRepetition, KindAnd, KindNot, KindTag, KindAtomic, KindGbnf, KindAC, KindSchema:
			visit(p.child)
		case KindRule:
			if !reachable[p.name] {
				reachable[p.name] = true
				visit(p.child)
			}
		case KindRef:
			visit(a.rule(p.name))
		}
	}
	visit(from)
	return reachable
}

// schemaDelegates: a raw string value is parsed by the child rather than
// constrained by the schema.
func schemaDelegates(p *parser) bool {
	return p.node == nil || p.raw && p.node.MayBeString()
}

// effective unwraps tags, atomics and delegating schemas.
func (a *Arena) effective(id ID) *parser {
	for {
		p := &a.parsers[id]
		switch {
		case p.kind == KindTag || p.kind == KindAtomic:
			id = p.child
		case p.kind == KindSchema && schemaDelegates(p):
			id = p.child
		default:
			return p
		}
	}
}

func repeatSuffix(s string, min, max int) string {
	switch {
	case min == 0 && max == 1:
		return s + "?"
	case min == 0 && max == -1:
		return s + "*"
	case min == 1 && max == -1:
		return s + "+"
	case max == -1:
		return s + "{" + strconv.Itoa(min) + ",}"
	case min == max:
		if min == 1 {
			return s
		}
		return s + "{" + strconv.Itoa(min) + "}"
	}
	return s + "{" + strconv.Itoa(min) + "," + strconv.Itoa(max) + "}"
}

func (a *Arena) toGBNF(b *grammar.Builder, id ID) string {
	p := &a.parsers[id]
	switch p.kind {
	case KindEpsilon, KindStart, KindEnd, KindAnd, KindNot:
		return ""
	case KindLiteral:
		return grammar.FormatLiteral(p.literal)
	case KindSequence:
		var s strings.Builder
		for _, c := range p.children {
			g := a.toGBNF(b, c)
			if g == "" {
				continue
			}
			if s.Len() > 0 {
				s.WriteByte(' ')
			}
			if k := a.effective(c).kind; k == KindChoice || k == KindSequence {
				s.WriteString("(" + g + ")")
			} else {
				s.WriteString(g)
			}
		}
		return s.String()
	case KindChoice:
		var s strings.Builder
		for i, c := range p.children {
			if i > 0 {
				s.WriteString(" | ")
			}
			g := a.toGBNF(b, c)
			if a.effective(c).kind == KindChoice {
				s.WriteString("(" + g + ")")
			} else {
				s.WriteString(g)
			}
		}
		return s.String()
	case KindRepetition:
		g := a.toGBNF(b, p.child)
		if k := a.effective(p.child).kind; k == KindChoice || k == KindSequence {
			g = "(" + g + ")"
		}
		return repeatSuffix(g, p.min, p.max)
	case KindAny:
		return "."
	case KindSpace:
		return "space"
	case KindChars:
		return repeatSuffix(p.pattern, p.min, p.max)
	case KindString:
		d := string(p.delim)
		return `( [^` + d + `\\] | "\\" ( [` + d + `\\/ bfnrt] | "u" [0-9a-fA-F]{4} ) )*`
	case KindUntil:
		if len(p.delims) == 0 {
			return ".*"
		}
		return gbnfExcluding(b, "until-"+strconv.Itoa(int(id)), p.delims)
	case KindSchema:
		if schemaDelegates(p) {
			return a.toGBNF(b, p.child)
		}
		return b.AddSchema(p.name, p.node)
	case KindRule, KindRef:
		return p.name
	case KindTag, KindAtomic:
		return a.toGBNF(b, p.child)
	case KindGbnf:
		return p.gbnf
	case KindAC:
		return gbnfIncluding(b, "ac-"+strconv.Itoa(int(id)), p.delims)
	}
	return ""
}

// BuildGrammar is common_peg_arena::build_grammar: the rules reachable
// from the root, or, lazy, from the trigger rules, with a root rule that
// is the trigger rules' choice.
func (a *Arena) BuildGrammar(b *grammar.Builder, lazy bool) {
	reachable := map[string]bool{}
	if lazy {
		for _, name := range a.order {
			if p := &a.parsers[a.rules[name]]; p.kind == KindRule && p.trigger {
				reachable[name] = true
				for r := range a.reachableRules(a.rules[name]) {
					reachable[r] = true
				}
			}
		}
	} else if a.root != Invalid {
		reachable = a.reachableRules(a.root)
	}
	for _, name := range a.order {
		if !reachable[name] {
			continue
		}
		if p := &a.parsers[a.rules[name]]; p.kind == KindRule {
			b.AddRule(p.name, a.toGBNF(b, p.child))
		}
	}
	if lazy {
		var triggers []string
		for _, name := range a.order {
			if p := &a.parsers[a.rules[name]]; p.kind == KindRule && p.trigger {
				triggers = append(triggers, p.name)
			}
		}
		sort.Strings(triggers)
		b.AddRule("root", strings.Join(triggers, " | "))
	} else if a.root != Invalid {
		b.AddRule("root", a.toGBNF(b, a.root))
	}
}
