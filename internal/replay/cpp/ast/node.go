// Package ast is the form of the programs that ggload replays from the
// pinned llama.cpp: nodes of the C++ subset of its per-architecture loading
// functions, and their text encoding (one S-expression per node). The
// generator writes it; the evaluator in package arch reads it.
package ast

import (
	"fmt"
	"strconv"
	"strings"
)

// Op is the kind of a program node.
type Op uint8

// Statements.
const (
	OpBlock    Op = iota + 1 // Kids: statements
	OpDecl                   // S: name, T: declared type; Kids: [init] or none
	OpExpr                   // Kids: [expression]
	OpIf                     // Kids: [init-or-nil, cond, then, else-or-nil]
	OpFor                    // Kids: [init-or-nil, cond-or-nil, post-or-nil, body]
	OpRange                  // S: name, T: type; Kids: [collection, body]
	OpSwitch                 // Kids: [value, case...]
	OpCase                   // Kids: [label-or-nil (default), body statements...]
	OpBreak                  //
	OpContinue               //
	OpReturn                 // Kids: [value] or none
	OpThrow                  // Kids: [value]
	OpTry                    // Kids: [body, handler]: the handler runs when the body throws

	// expressions
	OpInt    // I
	OpFloat  // F
	OpStr    // S
	OpIdent  // S
	OpMember // S: field; Kids: [object]
	OpIndex  // Kids: [array, index]
	OpCall   // Kids: [callee, args...]
	OpUnary  // S: operator (! - ~ + pre++ pre-- post++ post-- & *)
	OpBinary // S: operator; Kids: [lhs, rhs]
	OpAssign // S: operator (= += ...); Kids: [lhs, rhs]
	OpCond   // Kids: [cond, then, else]
	OpCast   // T: type; Kids: [value]
	OpList   // brace initializer; Kids: items
	OpLambda // Kids: [params (OpBlock of OpDecl), body]
	OpNil    // an absent optional child
	opCount
)

var opNames = [...]string{
	OpBlock: "block", OpDecl: "decl", OpExpr: "expr", OpIf: "if", OpFor: "for", OpRange: "range",
	OpSwitch: "switch", OpCase: "case", OpBreak: "break", OpContinue: "continue", OpReturn: "return",
	OpThrow: "throw", OpTry: "try", OpInt: "int", OpFloat: "float", OpStr: "str", OpIdent: "id", OpMember: "mem",
	OpIndex: "idx", OpCall: "call", OpUnary: "un", OpBinary: "bin", OpAssign: "set", OpCond: "cond",
	OpCast: "cast", OpList: "list", OpLambda: "lambda", OpNil: "nil",
}

func (o Op) String() string {
	if int(o) < len(opNames) && opNames[o] != "" {
		return opNames[o]
	}
	return "Op(" + strconv.Itoa(int(o)) + ")"
}

// Node is one node of a program: a statement or an expression of the
// subset of C++ that llama.cpp's per-architecture loading functions use.
type Node struct {
	Op   Op
	S    string // name, operator, field or string literal
	T    Type   // declared or cast-to type
	C    string // a container's C++ type (declarations of type TObj)
	I    int64
	F    float64
	Kids []*Node

	// Res is the evaluator's resolution of an identifier, and Code its
	// compiled form of the node (both set once, when a program is decoded).
	Res  any
	Code any
}

// Type is a C++ type, reduced to what evaluation needs.
type Type uint8

// Types.
const (
	TAuto Type = iota // auto, or a type evaluation need not know
	TBool
	TI32
	TU32
	TI64
	TU64
	TF32
	TF64
	TStr
	TRef // a reference (auto &, T &): binds to the value's storage
	TPtr // a pointer to a tensor or another object
	TObj // a container or struct by value (vector, array, set, stringstream)
	typeCount
)

var typeNames = [...]string{TAuto: "auto", TBool: "bool", TI32: "i32", TU32: "u32", TI64: "i64", TU64: "u64",
	TF32: "f32", TF64: "f64", TStr: "str", TRef: "ref", TPtr: "ptr", TObj: "obj"}

func (t Type) String() string {
	if int(t) < len(typeNames) {
		return typeNames[t]
	}
	return "Type(" + strconv.Itoa(int(t)) + ")"
}

// Encode writes n in the programs' text form: one S-expression per node,
// (op [attributes] kids...), attributes as name=value.
func Encode(b *strings.Builder, n *Node) {
	if n == nil {
		b.WriteString("(nil)")
		return
	}
	// atoms: identifiers, strings, integers and finite floats with no type
	if n.T == TAuto && len(n.Kids) == 0 {
		switch n.Op {
		case OpIdent:
			b.WriteString(n.S)
			return
		case OpStr:
			b.WriteString(strconv.Quote(n.S))
			return
		case OpInt:
			b.WriteString(strconv.FormatInt(n.I, 10))
			return
		case OpFloat:
			if f := strconv.FormatFloat(n.F, 'g', -1, 64); strings.ContainsAny(f, ".e") && !strings.ContainsAny(f, "IN") {
				b.WriteString(f)
				return
			}
		}
	}
	b.WriteByte('(')
	b.WriteString(n.Op.String())
	switch n.Op {
	case OpInt:
		b.WriteByte(' ')
		b.WriteString(strconv.FormatInt(n.I, 10))
	case OpFloat:
		b.WriteByte(' ')
		b.WriteString(strconv.FormatFloat(n.F, 'g', -1, 64))
	case OpStr, OpIdent, OpMember, OpUnary, OpBinary, OpAssign, OpDecl, OpRange:
		b.WriteByte(' ')
		b.WriteString(strconv.Quote(n.S))
	}
	if n.T != TAuto {
		b.WriteString(" :")
		b.WriteString(n.T.String())
	}
	if n.C != "" {
		b.WriteString(" @")
		b.WriteString(strconv.Quote(n.C))
	}
	for _, k := range n.Kids {
		b.WriteByte(' ')
		Encode(b, k)
	}
	b.WriteByte(')')
}

// Decode reads the nodes of a programs text one after another.
type Decoder struct {
	s   string
	pos int
}

// NewDecoder reads s.
func NewDecoder(s string) *Decoder { return &Decoder{s: s} }

func (d *Decoder) skip() {
	for d.pos < len(d.s) {
		switch d.s[d.pos] {
		case ' ', '\n', '\t', '\r':
			d.pos++
		case ';': // comment to the end of the line
			for d.pos < len(d.s) && d.s[d.pos] != '\n' {
				d.pos++
			}
		default:
			return
		}
	}
}

// More reports whether another node follows.
func (d *Decoder) More() bool {
	d.skip()
	return d.pos < len(d.s) && d.s[d.pos] == '('
}

// Word reads a bare word (a program's header: kind and name).
func (d *Decoder) Word() (string, error) {
	d.skip()
	start := d.pos
	for d.pos < len(d.s) && !strings.ContainsRune(" \n\t\r()", rune(d.s[d.pos])) {
		d.pos++
	}
	if start == d.pos {
		return "", d.errorf("expected a word")
	}
	return d.s[start:d.pos], nil
}

func (d *Decoder) errorf(format string, args ...any) error {
	line := 1 + strings.Count(d.s[:d.pos], "\n")
	return fmt.Errorf("ast: programs text line %d: %s", line, fmt.Sprintf(format, args...))
}

var opByName = func() map[string]Op {
	m := map[string]Op{}
	for o, n := range opNames {
		if n != "" {
			m[n] = Op(o)
		}
	}
	return m
}()

var typeByName = func() map[string]Type {
	m := map[string]Type{}
	for t, n := range typeNames {
		m[n] = Type(t)
	}
	return m
}()

// Node reads one node.
func (d *Decoder) Node() (*Node, error) {
	d.skip()
	if d.pos >= len(d.s) {
		return nil, d.errorf("unexpected end")
	}
	if d.s[d.pos] != '(' {
		return d.atom()
	}
	d.pos++
	w, err := d.Word()
	if err != nil {
		return nil, err
	}
	op, ok := opByName[w]
	if !ok {
		return nil, d.errorf("unknown node %q", w)
	}
	if op == OpNil {
		return nil, d.closeNil()
	}
	n := &Node{Op: op}
	if err := d.attributes(n); err != nil {
		return nil, err
	}
	if err := d.kids(n); err != nil {
		return nil, err
	}
	return n, nil
}

// atom reads a node written without parentheses: a string, a number or
// an identifier.
func (d *Decoder) atom() (*Node, error) {
	switch c := d.s[d.pos]; {
	case c == '"':
		s, err := d.quoted("bad string literal")
		if err != nil {
			return nil, err
		}
		return &Node{Op: OpStr, S: s}, nil
	case c == '-' || c >= '0' && c <= '9':
		w, err := d.Word()
		if err != nil {
			return nil, err
		}
		if strings.ContainsAny(w, ".e") {
			f, err := strconv.ParseFloat(w, 64)
			if err != nil {
				return nil, d.errorf("bad number %q", w)
			}
			return &Node{Op: OpFloat, F: f}, nil
		}
		i, err := strconv.ParseInt(w, 10, 64)
		if err != nil {
			return nil, d.errorf("bad number %q", w)
		}
		return &Node{Op: OpInt, I: i}, nil
	}
	w, err := d.Word()
	if err != nil {
		return nil, err
	}
	return &Node{Op: OpIdent, S: w}, nil
}

// attributes reads a node's attributes after its op: its value (I, F or
// S, by the op), its type (:T) and its container type (@"C").
func (d *Decoder) attributes(n *Node) error {
	var err error
	switch n.Op {
	case OpInt:
		err = d.intValue(n)
	case OpFloat:
		err = d.floatValue(n)
	case OpStr, OpIdent, OpMember, OpUnary, OpBinary, OpAssign, OpDecl, OpRange:
		d.skip()
		n.S, err = d.quoted("expected a quoted string")
	}
	if err != nil {
		return err
	}
	d.skip()
	if d.pos < len(d.s) && d.s[d.pos] == ':' {
		d.pos++
		w, err := d.Word()
		if err != nil {
			return err
		}
		t, ok := typeByName[w]
		if !ok {
			return d.errorf("unknown type %q", w)
		}
		n.T = t
	}
	d.skip()
	if d.pos < len(d.s) && d.s[d.pos] == '@' {
		d.pos++
		if n.C, err = d.quoted("expected a quoted type"); err != nil {
			return err
		}
	}
	return nil
}

// intValue reads an integer node's value.
func (d *Decoder) intValue(n *Node) error {
	w, err := d.Word()
	if err != nil {
		return err
	}
	if n.I, err = strconv.ParseInt(w, 10, 64); err != nil {
		return d.errorf("bad integer %q", w)
	}
	return nil
}

// floatValue reads a float node's value.
func (d *Decoder) floatValue(n *Node) error {
	w, err := d.Word()
	if err != nil {
		return err
	}
	if n.F, err = strconv.ParseFloat(w, 64); err != nil {
		return d.errorf("bad float %q", w)
	}
	return nil
}

// quoted reads a Go-quoted string at the position; bad says what is
// wrong when there is none.
func (d *Decoder) quoted(bad string) (string, error) {
	q, err := strconv.QuotedPrefix(d.s[d.pos:])
	if err != nil {
		return "", d.errorf("%s", bad)
	}
	d.pos += len(q)
	s, _ := strconv.Unquote(q)
	return s, nil
}

// kids reads a node's children up to its closing parenthesis.
func (d *Decoder) kids(n *Node) error {
	for {
		d.skip()
		if d.pos >= len(d.s) {
			return d.errorf("unexpected end in %s", n.Op)
		}
		if d.s[d.pos] == ')' {
			d.pos++
			return nil
		}
		k, err := d.Node()
		if err != nil {
			return err
		}
		n.Kids = append(n.Kids, k)
	}
}

// closeNil reads the closing parenthesis of (nil).
func (d *Decoder) closeNil() error {
	d.skip()
	if d.pos >= len(d.s) || d.s[d.pos] != ')' {
		return d.errorf("expected ')' after nil")
	}
	d.pos++
	return nil
}
