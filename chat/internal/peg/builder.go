// Port of llama.cpp common/peg-parser.cpp (v0.5.0): common_peg_parser's
// operators and common_peg_parser_builder.

package peg

import (
	"github.com/ggload/ggload/grammar"
	"github.com/ggload/ggload/internal/ojson"
)

// Builder is common_peg_parser_builder: it adds parsers to an arena.
type Builder struct{ a *Arena }

// NewBuilder is an empty builder.
func NewBuilder() *Builder { return &Builder{a: &Arena{root: Invalid}} }

// Expr is a parser expression not yet built: Do builds it, in the order
// GCC evaluates the C++ expression it stands for. An ID is an Expr that
// is already built.
type Expr interface{ build(b *Builder) ID }

func (id ID) build(*Builder) ID { return id }

type fn func(b *Builder) ID

func (f fn) build(b *Builder) ID { return f(b) }

// S is a string operand of +, << or | (the C++ operators' const char *
// and std::string overloads): its literal is made inside the operator,
// after the other operand.
type S string

func (s S) build(b *Builder) ID { return b.lit(string(s)) }

// Lazy is an expression that f builds, when its turn comes: f's parsers
// are made where the C++ expression's call would make them.
func Lazy(f func() ID) Expr { return fn(func(*Builder) ID { return f() }) }

// Do builds an expression and returns its ID.
func (b *Builder) Do(e Expr) ID { return e.build(b) }

// SetRoot builds e and makes it the root.
func (b *Builder) SetRoot(e Expr) { b.a.root = b.Do(e) }

// Build is build(): every reference to a rule replaced by the rule.
func (b *Builder) Build() *Arena {
	b.a.resolveRefs()
	a := b.a
	b.a = &Arena{root: Invalid}
	return a
}

// BuildParser is build_peg_parser: the arena whose root fn returns. What
// the pin throws while building (a rule not found, a bad JSON schema)
// comes back as the error.
func BuildParser(fn func(b *Builder) Expr) (a *Arena, err error) {
	defer Catch(&err)
	b := NewBuilder()
	b.SetRoot(fn(b))
	return b.Build(), nil
}

func (b *Builder) add(p parser) ID { return b.a.add(p) }

func (b *Builder) lit(s string) ID { return b.add(parser{kind: KindLiteral, literal: s}) }

// seq is sequence(ids): nested sequences flattened.
func (b *Builder) seq(ids ...ID) ID {
	var flat []ID
	for _, id := range ids {
		if p := &b.a.parsers[id]; p.kind == KindSequence {
			flat = append(flat, p.children...)
		} else {
			flat = append(flat, id)
		}
	}
	return b.add(parser{kind: KindSequence, children: flat})
}

// choice is choice(ids): nested choices flattened.
func (b *Builder) choice(ids ...ID) ID {
	var flat []ID
	for _, id := range ids {
		if p := &b.a.parsers[id]; p.kind == KindChoice {
			flat = append(flat, p.children...)
		} else {
			flat = append(flat, id)
		}
	}
	return b.add(parser{kind: KindChoice, children: flat})
}

func (b *Builder) all(es []Expr) []ID {
	ids := make([]ID, len(es))
	for i, e := range es {
		ids[i] = b.Do(e)
	}
	return ids
}

func isS(e Expr) bool {
	_, ok := e.(S)
	return ok
}

// operands builds a and c, a first where aFirst (the order matters: it
// numbers the parsers as the pin's evaluation order does).
func (b *Builder) operands(a, c Expr, aFirst bool) (l, r ID) {
	if aFirst {
		l = b.Do(a)
		return l, b.Do(c)
	}
	r = b.Do(c)
	return b.Do(a), r
}

// Add is a + c: a sequence (c is built before a, as GCC evaluates it).
func Add(a, c Expr) Expr {
	return fn(func(b *Builder) ID {
		return b.seq(b.operands(a, c, isS(c)))
	})
}

// Sum is e0 + e1 + ... + en.
func Sum(es ...Expr) Expr {
	acc := es[0]
	for _, e := range es[1:] {
		acc = Add(acc, e)
	}
	return acc
}

// Shl is a << c: a sequence with spaces allowed between.
func Shl(a, c Expr) Expr {
	return fn(func(b *Builder) ID {
		l, r := b.operands(a, c, !isS(a))
		sp := b.add(parser{kind: KindSpace})
		return b.seq(l, sp, r)
	})
}

// Chain is e0 << e1 << ... << en.
func Chain(es ...Expr) Expr {
	acc := es[0]
	for _, e := range es[1:] {
		acc = Shl(acc, e)
	}
	return acc
}

// Or is a | c: a choice (c is built before a).
func Or(a, c Expr) Expr {
	return fn(func(b *Builder) ID {
		return b.choice(b.operands(a, c, isS(c)))
	})
}

// Eps matches nothing and always succeeds.
func Eps() Expr { return fn(func(b *Builder) ID { return b.add(parser{kind: KindEpsilon}) }) }

// Start matches the start of the input.
func Start() Expr { return fn(func(b *Builder) ID { return b.add(parser{kind: KindStart}) }) }

// End matches the end of the input.
func End() Expr { return fn(func(b *Builder) ID { return b.add(parser{kind: KindEnd}) }) }

// Lit is literal(s).
func Lit(s string) Expr { return fn(func(b *Builder) ID { return b.lit(s) }) }

// Seq is sequence({...}).
func Seq(es ...Expr) Expr { return fn(func(b *Builder) ID { return b.seq(b.all(es)...) }) }

// Choice is choice({...}).
func Choice(es ...Expr) Expr { return fn(func(b *Builder) ID { return b.choice(b.all(es)...) }) }

// Rep is repeat(e, min, max), max -1 for unbounded.
func Rep(e Expr, min, max int) Expr {
	return fn(func(b *Builder) ID {
		c := b.Do(e)
		return b.add(parser{kind: KindRepetition, child: c, min: min, max: max})
	})
}

// OneOrMore is e+.
func OneOrMore(e Expr) Expr { return Rep(e, 1, -1) }

// ZeroOrMore is e*.
func ZeroOrMore(e Expr) Expr { return Rep(e, 0, -1) }

// Opt is e?.
func Opt(e Expr) Expr { return Rep(e, 0, 1) }

func unary(k Kind, e Expr) Expr {
	return fn(func(b *Builder) ID {
		c := b.Do(e)
		return b.add(parser{kind: k, child: c})
	})
}

// Peek is &e.
func Peek(e Expr) Expr { return unary(KindAnd, e) }

// Not is !e.
func Not(e Expr) Expr { return unary(KindNot, e) }

// Atomic is atomic(e): no AST nodes from e when it needs more input.
func Atomic(e Expr) Expr { return unary(KindAtomic, e) }

// Any matches one code point.
func Any() Expr { return fn(func(b *Builder) ID { return b.add(parser{kind: KindAny}) }) }

// Space matches any run of whitespace.
func Space() Expr { return fn(func(b *Builder) ID { return b.add(parser{kind: KindSpace}) }) }

// Chars is chars(classes, min, max).
func Chars(classes string, min, max int) Expr {
	return fn(func(b *Builder) ID {
		ranges, neg := parseCharClasses(classes)
		return b.add(parser{kind: KindChars, pattern: classes, ranges: ranges, negated: neg, min: min, max: max})
	})
}

// Ref is ref(name).
func Ref(name string) Expr {
	return fn(func(b *Builder) ID { return b.add(parser{kind: KindRef, name: name}) })
}

// Until matches up to the delimiter.
func Until(delim string) Expr { return UntilOneOf(delim) }

// UntilOneOf matches up to the first of the delimiters.
func UntilOneOf(delims ...string) Expr {
	return fn(func(b *Builder) ID {
		return b.add(parser{kind: KindUntil, delims: delims, matcher: newTrie(delims)})
	})
}

// Rest matches everything.
func Rest() Expr { return UntilOneOf() }

// StringContent is string_content(delim).
func StringContent(delim byte) Expr {
	return fn(func(b *Builder) ID { return b.add(parser{kind: KindString, delim: delim}) })
}

// Tag is tag(t, e).
func Tag(t string, e Expr) Expr {
	return fn(func(b *Builder) ID {
		c := b.Do(e)
		return b.add(parser{kind: KindTag, child: c, tag: t})
	})
}

// Gbnf is gbnf(e, g): e's parse with g's grammar.
func Gbnf(e Expr, g string) Expr {
	return fn(func(b *Builder) ID {
		c := b.Do(e)
		return b.add(parser{kind: KindGbnf, child: c, gbnf: g})
	})
}

// AC is ac(e, delims): e's parse, with the grammar of everything up to
// and including the first delimiter.
func AC(e Expr, delims ...string) Expr {
	return fn(func(b *Builder) ID {
		c := b.Do(e)
		if len(delims) == 0 {
			throwf("ac parser requires at least one delimiter")
		}
		return b.add(parser{kind: KindAC, child: c, delims: delims})
	})
}

// Schema is schema(e, name, doc, node, raw): e's parse, with the grammar
// of the schema node.
func Schema(e Expr, name string, doc *grammar.Document, node *grammar.Schema, raw bool) Expr {
	return fn(func(b *Builder) ID {
		c := b.Do(e)
		return b.add(parser{kind: KindSchema, child: c, name: name, doc: doc, node: node, raw: raw})
	})
}

// SchemaJSON is schema(e, name, json, raw): the schema parsed into a
// document of its own.
func SchemaJSON(e Expr, name string, schema ojson.Value, raw bool) Expr {
	return fn(func(b *Builder) ID {
		c := b.Do(e)
		doc, err := grammar.ParseSchema(schema)
		if err != nil {
			Throw(err)
		}
		return b.add(parser{kind: KindSchema, child: c, name: name, doc: doc, node: doc.Root, raw: raw})
	})
}

// ruleName is rule_name: every run of characters other than letters,
// digits and '-' made one '-'.
func ruleName(name string) string {
	out := make([]byte, 0, len(name))
	bad := false
	for i := 0; i < len(name); i++ {
		c := name[i]
		if c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '-' {
			out = append(out, c)
			bad = false
		} else if !bad {
			out = append(out, '-')
			bad = true
		}
	}
	return string(out)
}

func rule(name string, e Expr, trigger bool) Expr {
	return fn(func(b *Builder) ID {
		c := b.Do(e)
		clean := ruleName(name)
		id := b.add(parser{kind: KindRule, name: clean, child: c, trigger: trigger})
		b.a.addRule(clean, id)
		return b.add(parser{kind: KindRef, name: clean})
	})
}

// Rule is rule(name, e): a named rule, referred to by the ID returned.
func Rule(name string, e Expr) Expr { return rule(name, e, false) }

// TriggerRule is trigger_rule(name, e): a rule a lazy grammar starts at.
func TriggerRule(name string, e Expr) Expr { return rule(name, e, true) }

func ruleFn(name string, f func() Expr, trigger bool) Expr {
	return fn(func(b *Builder) ID {
		clean := ruleName(name)
		if b.a.hasRule(clean) {
			return b.add(parser{kind: KindRef, name: clean})
		}
		ph := b.add(parser{kind: KindAny})
		b.a.addRule(clean, b.add(parser{kind: KindRule, name: clean, child: ph, trigger: trigger}))
		c := b.Do(f())
		b.a.addRule(clean, b.add(parser{kind: KindRule, name: clean, child: c, trigger: trigger}))
		return b.add(parser{kind: KindRef, name: clean})
	})
}

// RuleFn is rule(name, builder_fn): built once, so that it may refer to
// itself; a later call refers to the first.
func RuleFn(name string, f func() Expr) Expr { return ruleFn(name, f, false) }

// resolveRefs replaces every reference among the parsers' children by
// the rule it names.
func (a *Arena) resolveRefs() {
	res := func(id ID) ID {
		if a.parsers[id].kind == KindRef {
			return a.rule(a.parsers[id].name)
		}
		return id
	}
	for i := range a.parsers {
		p := &a.parsers[i]
		switch p.kind {
		case KindSequence, KindChoice:
			for j, c := range p.children {
				p.children[j] = res(c)
			}
		case KindRepetition, KindAnd, KindNot, KindTag, KindAtomic, KindGbnf, KindAC, KindRule, KindSchema:
			p.child = res(p.child)
		}
	}
	if a.root != Invalid {
		a.root = res(a.root)
	}
}

// Strings and JSON.

// DoubleQuotedString is '"' content '"'.
func DoubleQuotedString() Expr {
	return RuleFn("double-quoted-string", func() Expr { return Seq(Lit(`"`), StringContent('"'), Lit(`"`)) })
}

// SingleQuotedString is "'" content "'".
func SingleQuotedString() Expr {
	return RuleFn("single-quoted-string", func() Expr { return Seq(Lit("'"), StringContent('\''), Lit("'")) })
}

// QuotedString is either.
func QuotedString() Expr {
	return RuleFn("quoted-string", func() Expr { return Choice(DoubleQuotedString(), SingleQuotedString()) })
}

// JSONNumber is a JSON number, committed only where nothing can extend it.
func JSONNumber() Expr {
	return fn(func(b *Builder) ID {
		return b.Do(RuleFn("json-number", func() Expr {
			digit19 := b.Do(Chars("[1-9]", 1, 1))
			digits := b.Do(Chars("[0-9]", 1, -1))
			intPart := b.Do(Choice(Lit("0"), Seq(digit19, Chars("[0-9]", 0, -1))))
			frac := b.Do(Seq(Lit("."), digits))
			exp := b.Do(Seq(Choice(Lit("e"), Lit("E")), Opt(Chars("[+-]", 1, 1)), digits))
			notCont := b.Do(Not(Chars("[0-9.eE+-]", 1, 1)))
			return Seq(Opt(Lit("-")), intPart, Opt(frac), Opt(exp), notCont)
		}))
	})
}

// JSONString is a JSON string.
func JSONString() Expr {
	return RuleFn("json-string", func() Expr { return Seq(Lit(`"`), StringContent('"'), Lit(`"`)) })
}

// JSONBool is true or false.
func JSONBool() Expr {
	return RuleFn("json-bool", func() Expr { return Choice(Lit("true"), Lit("false")) })
}

// JSONNull is null.
func JSONNull() Expr { return RuleFn("json-null", func() Expr { return Lit("null") }) }

// JSONObject is a JSON object.
func JSONObject() Expr {
	return fn(func(b *Builder) ID {
		return b.Do(RuleFn("json-object", func() Expr {
			ws := b.Do(Space())
			member := b.Do(Seq(JSONString(), ws, Lit(":"), ws, JSON()))
			members := b.Do(Seq(member, ZeroOrMore(Seq(ws, Lit(","), ws, member))))
			return Seq(Lit("{"), ws, Choice(Lit("}"), Seq(members, ws, Lit("}"))))
		}))
	})
}

// JSONArray is a JSON array.
func JSONArray() Expr {
	return fn(func(b *Builder) ID {
		return b.Do(RuleFn("json-array", func() Expr {
			ws := b.Do(Space())
			elems := b.Do(Seq(JSON(), ZeroOrMore(Seq(ws, Lit(","), ws, JSON()))))
			return Seq(Lit("["), ws, Choice(Lit("]"), Seq(elems, ws, Lit("]"))))
		}))
	})
}

// JSON is any JSON value.
func JSON() Expr {
	return RuleFn("json-value", func() Expr {
		return Choice(JSONObject(), JSONArray(), JSONString(), JSONNumber(), JSONBool(), JSONNull())
	})
}

// JSONMember is "key": e.
func JSONMember(key string, e Expr) Expr {
	return fn(func(b *Builder) ID {
		v := b.Do(e)
		ws := b.Do(Space())
		return b.Do(Seq(Lit(`"`+key+`"`), ws, Lit(":"), ws, v))
	})
}

// PythonString is a single- or double-quoted string.
func PythonString() Expr {
	return RuleFn("python-string", func() Expr { return Choice(DoubleQuotedString(), SingleQuotedString()) })
}

// PythonNumber is a JSON number.
func PythonNumber() Expr { return JSONNumber() }

// PythonBool is True or False.
func PythonBool() Expr {
	return RuleFn("python-bool", func() Expr { return Choice(Lit("True"), Lit("False")) })
}

// PythonNull is None.
func PythonNull() Expr { return RuleFn("python-none", func() Expr { return Lit("None") }) }

// PythonDict is a Python dict literal.
func PythonDict() Expr {
	return fn(func(b *Builder) ID {
		return b.Do(RuleFn("python-dict", func() Expr {
			ws := b.Do(Space())
			member := b.Do(Seq(PythonString(), ws, Lit(":"), ws, PythonValue()))
			members := b.Do(Seq(member, ZeroOrMore(Seq(ws, Lit(","), ws, member))))
			return Seq(Lit("{"), ws, Choice(Lit("}"), Seq(members, ws, Lit("}"))), ws)
		}))
	})
}

// PythonArray is a Python list literal.
func PythonArray() Expr {
	return fn(func(b *Builder) ID {
		return b.Do(RuleFn("python-array", func() Expr {
			ws := b.Do(Space())
			elems := b.Do(Seq(PythonValue(), ZeroOrMore(Seq(Lit(","), ws, PythonValue()))))
			return Seq(Lit("["), ws, Choice(Lit("]"), Seq(elems, ws, Lit("]"))), ws)
		}))
	})
}

// PythonValue is any Python literal value.
func PythonValue() Expr {
	return RuleFn("python-value", func() Expr {
		return Choice(PythonDict(), PythonArray(), PythonString(), PythonNumber(), PythonBool(), PythonNull())
	})
}

// Marker is text between < and > or [ and ].
func Marker() Expr {
	return fn(func(b *Builder) ID {
		sharp := b.Do(Sum(Lit("<"), Until(">"), Lit(">")))
		square := b.Do(Sum(Lit("["), Until("]"), Lit("]")))
		return b.Do(Choice(sharp, square))
	})
}

// Character classes.

func parseHexEscape(s string, pos, count int) (uint32, int) {
	if pos+count > len(s) {
		return 0, 0
	}
	var v uint32
	for i := 0; i < count; i++ {
		c := s[pos+i]
		switch {
		case c >= 'a' && c <= 'f':
			v = v<<4 + uint32(c-'a'+10)
		case c >= 'A' && c <= 'F':
			v = v<<4 + uint32(c-'A'+10)
		case c >= '0' && c <= '9':
			v = v<<4 + uint32(c-'0')
		default:
			return 0, 0
		}
	}
	return v, count
}

func parseClassChar(s string, pos int) (uint32, int) {
	if s[pos] == '\\' && pos+1 < len(s) {
		esc := func(letter byte, count int) (uint32, int) {
			if v, n := parseHexEscape(s, pos+2, count); n > 0 {
				return v, 2 + n
			}
			return uint32(letter), 2
		}
		switch c := s[pos+1]; c {
		case 'x':
			return esc('x', 2)
		case 'u':
			return esc('u', 4)
		case 'U':
			return esc('U', 8)
		case 'n':
			return '\n', 2
		case 't':
			return '\t', 2
		case 'r':
			return '\r', 2
		default:
			return uint32(int32(int8(c))), 2 // a plain char, sign extended
		}
	}
	return uint32(s[pos]), 1
}

func parseCharClasses(classes string) ([]CharRange, bool) {
	content := classes
	if content != "" && content[0] == '[' {
		content = content[1:]
	}
	if content != "" && content[len(content)-1] == ']' {
		content = content[:len(content)-1]
	}
	neg := false
	if content != "" && content[0] == '^' {
		neg = true
		content = content[1:]
	}
	var ranges []CharRange
	for i := 0; i < len(content); {
		start, n := parseClassChar(content, i)
		i += n
		if i+1 < len(content) && content[i] == '-' {
			end, m := parseClassChar(content, i+1)
			ranges = append(ranges, CharRange{start, end})
			i += 1 + m
		} else {
			ranges = append(ranges, CharRange{start, start})
		}
	}
	return ranges, neg
}
