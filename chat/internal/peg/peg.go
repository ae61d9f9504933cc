// Port of llama.cpp common/peg-parser.h and common/peg-parser.cpp (v0.5.0):
// the arena, the parse results and the AST.

// Package peg is llama.cpp's PEG parser engine (common/peg-parser.cpp,
// common/trie.cpp) and the chat tags built on it
// (common/chat-peg-parser.cpp's builder): parsers held in an Arena and
// built by a Builder, run on a model's reply with the pin's leniency for
// a reply still streaming, giving an AST of tagged nodes; and the GBNF
// grammar that a parser constrains generation with.
//
// A Builder numbers its parsers as the pin's does, and the numbers show
// in the grammar ("until-12"): an Expr is built in the order GCC
// evaluates the pin's C++ expression (the right operand of + and | before
// the left one, << left to right). Package chat maps the AST to messages.
package peg

import (
	"fmt"

	"github.com/ggload/ggload/grammar"
)

// ID names a parser in its arena.
type ID int

// Invalid is COMMON_PEG_INVALID_PARSER_ID.
const Invalid ID = -1

// Kind is which of common_peg_parser_variant's alternatives a parser is.
type Kind uint8

// The parser kinds, in the variant's order.
const (
	KindEpsilon Kind = iota
	KindStart
	KindEnd
	KindLiteral
	KindSequence
	KindChoice
	KindRepetition
	KindAnd
	KindNot
	KindAny
	KindSpace
	KindChars
	KindString
	KindUntil
	KindSchema
	KindRule
	KindRef
	KindAtomic
	KindTag
	KindGbnf
	KindAC
)

// CharRange is one range of a character class, both ends included.
type CharRange struct{ Start, End uint32 }

// parser is one parser of an arena: the fields its Kind uses.
type parser struct {
	kind     Kind
	literal  string // literal
	children []ID   // sequence, choice
	child    ID     // repetition, and, not, schema, rule, atomic, tag, gbnf, ac
	min, max int    // repetition, chars (max -1: unbounded)
	pattern  string // chars
	ranges   []CharRange
	negated  bool
	delim    byte     // string
	delims   []string // until, ac
	name     string   // schema, rule, ref
	trigger  bool     // rule
	raw      bool     // schema
	doc      *grammar.Document
	node     *grammar.Schema // schema: nil when loaded from JSON
	tag      string
	gbnf     string

	matcher *trie // until: its delimiters, built once
}

// Arena is common_peg_arena: parsers by ID, the named rules, the root.
type Arena struct {
	parsers []parser
	rules   map[string]ID
	order   []string // the rules' names, in the order they were first added
	root    ID
}

// Len is the number of parsers.
func (a *Arena) Len() int { return len(a.parsers) }

// Empty says whether the arena holds no parser.
func (a *Arena) Empty() bool { return a == nil || len(a.parsers) == 0 }

// Root is the root parser.
func (a *Arena) Root() ID { return a.root }

func (a *Arena) add(p parser) ID {
	a.parsers = append(a.parsers, p)
	return ID(len(a.parsers) - 1)
}

func (a *Arena) addRule(name string, id ID) {
	if a.rules == nil {
		a.rules = map[string]ID{}
	}
	if _, ok := a.rules[name]; !ok {
		a.order = append(a.order, name)
	}
	a.rules[name] = id
}

func (a *Arena) hasRule(name string) bool {
	_, ok := a.rules[name]
	return ok
}

// Exception is what the pin's PEG code throws (a rule not found, a bad
// serialized arena).
type Exception struct{ Msg string }

func (e *Exception) Error() string { return e.Msg }

func throwf(format string, args ...any) { Throw(&Exception{Msg: fmt.Sprintf(format, args...)}) }

// thrown is an error on its way up, as a C++ exception: Throw raises it,
// Catch turns it back into an error where the pin's callers catch.
type thrown struct{ err error }

// Throw raises err as the pin throws an exception, out of however many
// calls; Catch stops it.
func Throw(err error) { panic(thrown{err}) }

// Catch, deferred, stores an error Throw raised in *errp. Other panics
// go on.
func Catch(errp *error) {
	if x := recover(); x != nil {
		t, ok := x.(thrown)
		if !ok {
			panic(x)
		}
		*errp = t.err
	}
}

func (a *Arena) rule(name string) ID {
	id, ok := a.rules[name]
	if !ok {
		throwf("Rule not found: %s", name)
	}
	return id
}

// ResultType is common_peg_parse_result_type.
type ResultType uint8

// The result types.
const (
	Fail ResultType = iota
	Success
	NeedMoreInput
)

func (t ResultType) String() string {
	switch t {
	case Fail:
		return "fail"
	case Success:
		return "success"
	case NeedMoreInput:
		return "need_more_input"
	}
	return "unknown"
}

// InvalidUTF8 is a run of input bytes that do not decode as UTF-8.
type InvalidUTF8 struct{ Pos, Len int }

// Result is common_peg_parse_result.
type Result struct {
	Type       ResultType
	Start, End int
	Nodes      []int
	Invalid    []InvalidUTF8
}

// Fail, Success and NeedMore say which the result is.
func (r Result) Failed() bool    { return r.Type == Fail }
func (r Result) Succeeded() bool { return r.Type == Success }
func (r Result) NeedMore() bool  { return r.Type == NeedMoreInput }

// Node is common_peg_ast_node: a rule's or a tag's match.
type Node struct {
	ID         int
	Rule, Tag  string
	Start, End int
	Text       string
	Children   []int
	Partial    bool
	Invalid    []InvalidUTF8
}

// SanitizedText is the text with every invalid UTF-8 run replaced by
// U+FFFD.
func (n *Node) SanitizedText() string {
	if len(n.Invalid) == 0 {
		return n.Text
	}
	out := make([]byte, 0, len(n.Text)+2*len(n.Invalid))
	seg := n.Start
	for _, inv := range n.Invalid {
		out = append(out, n.Text[seg-n.Start:inv.Pos-n.Start]...)
		out = append(out, "\xEF\xBF\xBD"...)
		seg = inv.Pos + inv.Len
	}
	out = append(out, n.Text[seg-n.Start:n.End-n.Start]...)
	return string(out)
}

// AST is common_peg_ast_arena.
type AST struct{ Nodes []Node }

// Get is the node of an ID.
func (t *AST) Get(id int) *Node { return &t.Nodes[id] }

func (t *AST) add(n Node) int {
	n.ID = len(t.Nodes)
	t.Nodes = append(t.Nodes, n)
	return n.ID
}

// FindByTag is find_by_tag: the first descendant with the tag, depth
// first, at most maxDepth levels down; -1 if none.
func (t *AST) FindByTag(parent *Node, tag string, maxDepth int) int {
	for _, c := range parent.Children {
		child := &t.Nodes[c]
		if child.Tag == tag {
			return c
		}
		if maxDepth > 1 {
			if r := t.FindByTag(child, tag, maxDepth-1); r >= 0 {
				return r
			}
		}
	}
	return -1
}

// FindByRule is find_by_rule.
func (t *AST) FindByRule(parent *Node, rule string, maxDepth int) int {
	for _, c := range parent.Children {
		child := &t.Nodes[c]
		if child.Rule == rule {
			return c
		}
		if maxDepth > 1 {
			if r := t.FindByRule(child, rule, maxDepth-1); r >= 0 {
				return r
			}
		}
	}
	return -1
}

// Visit calls fn on the node and its descendants, depth first.
func (t *AST) Visit(id int, fn func(n *Node)) {
	if id < 0 {
		return
	}
	n := &t.Nodes[id]
	fn(n)
	for _, c := range n.Children {
		t.Visit(c, fn)
	}
}

// VisitResult visits the nodes of a result.
func (t *AST) VisitResult(r Result, fn func(n *Node)) {
	for _, id := range r.Nodes {
		t.Visit(id, fn)
	}
}

// Dump is common_peg_ast_arena::dump.
func (t *AST) Dump() string {
	var b []byte
	var node func(n *Node, indent int)
	node = func(n *Node, indent int) {
		for i := 0; i < indent; i++ {
			b = append(b, "  "...)
		}
		b = fmt.Appendf(b, "NODE %d", n.ID)
		if n.Rule != "" {
			b = append(b, " (rule "+n.Rule+")"...)
		}
		if n.Tag != "" {
			b = append(b, " (tag "+n.Tag+")"...)
		}
		b = append(b, " ['"+n.Text+"']\n"...)
		for _, c := range n.Children {
			node(&t.Nodes[c], indent+1)
		}
	}
	for i := range t.Nodes {
		node(&t.Nodes[i], 0)
	}
	return string(b)
}

// Flags are common_peg_parse_flags.
type Flags uint8

// The flags. Debug is accepted and ignored (the pin prints a trace).
const (
	Lenient Flags = 1 << iota
	Debug
)

// Context is common_peg_parse_context: the input, the flags and the AST
// a parse builds.
type Context struct {
	Input string
	Flags Flags
	AST   AST

	depth int
}

func (c *Context) lenient() bool { return c.Flags&Lenient != 0 }
