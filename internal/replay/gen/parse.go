package main

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/ggload/ggload/internal/replay/cpp/ast"
)

// parser reads the C++ subset of llama.cpp's per-architecture loading
// functions (statements, declarations, expressions, lambdas) into
// ast.Nodes.
type parser struct {
	toks []token
	pos  int
	file string

	structs map[string][]*ast.Node // local structs: their members, as declarations
	aliases map[string]bool        // local type aliases (using X = T;)
	nbind   int                    // structured bindings so far (their hidden variables)
	ret     string                 // the local struct the lambda being parsed returns
}

type parseError struct {
	file string
	line int
	msg  string
}

func (e *parseError) Error() string { return fmt.Sprintf("%s:%d: %s", e.file, e.line, e.msg) }

func (p *parser) peek() token        { return p.toks[p.pos] }
func (p *parser) peekAt(k int) token { return p.toks[min(p.pos+k, len(p.toks)-1)] }
func (p *parser) next() token {
	t := p.toks[p.pos]
	if p.pos < len(p.toks)-1 {
		p.pos++
	}
	return t
}
func (p *parser) is(s string) bool {
	t := p.peek()
	return (t.k == tPunct || t.k == tIdent) && t.s == s
}
func (p *parser) accept(s string) bool {
	if p.is(s) {
		p.next()
		return true
	}
	return false
}

func (p *parser) fail(format string, args ...any) {
	panic(&parseError{p.file, p.peek().line, fmt.Sprintf(format, args...)})
}

func (p *parser) expect(s string) token {
	if !p.is(s) {
		p.fail("expected '%s', found %s", s, p.peek())
	}
	return p.next()
}

// skipPast skips the tokens up to the next end and the end itself; the
// end of input there is an unterminated what.
func (p *parser) skipPast(end, what string) {
	for !p.is(end) {
		if p.peek().k == tEOF {
			p.fail("unterminated %s", what)
		}
		p.next()
	}
	p.next()
}

func (p *parser) ident() string {
	t := p.peek()
	if t.k != tIdent {
		p.fail("expected an identifier, found %s", t)
	}
	p.next()
	return t.s
}

// parseBody parses the tokens of a function body (without its braces).
func parseBody(file string, toks []token) (n *ast.Node, err error) {
	return parseBodyReturning(file, toks, "", nil)
}

// parseBodyReturning parses a function's body that returns struct ret of
// members (none: any other type): a brace list it returns is the struct.
func parseBodyReturning(file string, toks []token, ret string, members []*ast.Node) (n *ast.Node, err error) {
	defer recoverParse(&err)
	p := &parser{toks: toks, file: file}
	if members != nil {
		p.structs = map[string][]*ast.Node{ret: members}
		p.ret = ret
	}
	var kids []*ast.Node
	for p.peek().k != tEOF {
		kids = append(kids, p.statement()...)
	}
	return &ast.Node{Op: ast.OpBlock, Kids: kids}, nil
}

// parseExpr parses one expression.
func parseExpr(file string, toks []token) (n *ast.Node, err error) {
	defer recoverParse(&err)
	p := &parser{toks: toks, file: file}
	return p.expr(), nil
}

// parseParams parses a parameter list "(T a, U & b = 1)" (without the
// parentheses) into declarations.
func parseParams(file string, toks []token) (n *ast.Node, err error) {
	defer recoverParse(&err)
	p := &parser{toks: toks, file: file}
	return p.params(tEOF), nil
}

// recoverParse turns the parser's panic with a parseError (p.fail) into
// the error; any other panic is a defect and goes on.
func recoverParse(err *error) {
	if r := recover(); r != nil {
		pe, ok := r.(*parseError)
		if !ok {
			panic(r)
		}
		*err = pe
	}
}

func (p *parser) params(end tokKind) *ast.Node {
	ps := &ast.Node{Op: ast.OpBlock}
	for p.peek().k != end && !p.is(")") {
		start := p.pos
		typ, ok := p.tryType()
		if !ok {
			p.fail("expected a parameter type, found %s", p.peek())
		}
		name, text := "", ""
		if p.peek().k == tIdent {
			name = p.ident()
			text = p.typeText(start)
		}
		d := &ast.Node{Op: ast.OpDecl, S: name, T: typ}
		if p.accept("=") {
			d.Kids = []*ast.Node{p.assignExpr()}
			if k := d.Kids[0]; k.Op == ast.OpList && len(k.Kids) == 0 && typ == ast.TRef {
				// const T & x = {}: a value-initialized T
				d.C = strings.TrimSpace(strings.TrimSuffix(strings.TrimPrefix(text, "const "), "&"))
			}
		}
		ps.Kids = append(ps.Kids, d)
		if !p.accept(",") {
			break
		}
	}
	return ps
}

// statement parses one statement; a declaration of several names gives
// several nodes.
func (p *parser) statement() []*ast.Node {
	t := p.peek()
	if t.k == tPunct && t.s == "[" && p.peekAt(1).s == "[" {
		// an attribute ([[fallthrough]];): no effect on what runs
		for !(p.is("]") && p.peekAt(1).s == "]") {
			if p.peek().k == tEOF {
				p.fail("unterminated attribute")
			}
			p.next()
		}
		p.next()
		p.next()
		p.accept(";")
		return nil
	}
	if t.k == tPunct {
		switch t.s {
		case "{":
			return []*ast.Node{p.block()}
		case ";":
			p.next()
			return nil
		}
	}
	if t.k == tIdent && t.s == "struct" && p.peekAt(1).k == tIdent && p.peekAt(2).s == "{" {
		p.localStruct()
		return nil
	}
	if t.k == tIdent {
		switch t.s {
		case "if":
			return []*ast.Node{p.ifStmt()}
		case "for":
			return []*ast.Node{p.forStmt()}
		case "while":
			p.next()
			p.expect("(")
			cond := p.expr()
			p.expect(")")
			body := p.single()
			return []*ast.Node{{Op: ast.OpFor, Kids: []*ast.Node{nil, cond, nil, body}}}
		case "switch":
			return []*ast.Node{p.switchStmt()}
		case "return":
			p.next()
			n := &ast.Node{Op: ast.OpReturn}
			if !p.is(";") {
				n.Kids = []*ast.Node{p.structList(p.expr())}
			}
			p.expect(";")
			return []*ast.Node{n}
		case "break":
			p.next()
			p.expect(";")
			return []*ast.Node{{Op: ast.OpBreak}}
		case "continue":
			p.next()
			p.expect(";")
			return []*ast.Node{{Op: ast.OpContinue}}
		case "throw":
			p.next()
			n := &ast.Node{Op: ast.OpThrow, Kids: []*ast.Node{p.expr()}}
			p.expect(";")
			return []*ast.Node{n}
		case "try":
			p.next()
			body := p.block()
			p.expect("catch")
			p.expect("(")
			p.skipPast(")", "catch")
			handler := p.block()
			return []*ast.Node{{Op: ast.OpTry, Kids: []*ast.Node{body, handler}}}
		case "using":
			p.localAlias()
			return nil
		case "do":
			return p.doWhile()
		case "goto", "catch", "case", "default":
			p.fail("unsupported statement '%s'", t.s)
		}
	}
	if t.k == tIdent && t.s == "auto" && (p.peekAt(1).s == "[" || (p.peekAt(1).s == "&" || p.peekAt(1).s == "&&") && p.peekAt(2).s == "[") {
		return p.structuredBinding()
	}
	if ds := p.tryDecl(); ds != nil {
		p.expect(";")
		return ds
	}
	e := p.expr()
	p.expect(";")
	return []*ast.Node{{Op: ast.OpExpr, Kids: []*ast.Node{e}}}
}

// single parses the statement of an if/for/while branch as one node.
func (p *parser) single() *ast.Node {
	ss := p.statement()
	if len(ss) == 1 {
		return ss[0]
	}
	return &ast.Node{Op: ast.OpBlock, Kids: ss}
}

// localAlias reads a local type alias (using X = std::conditional_t<...>;):
// a type name for the declarations that follow; types are not replayed.
func (p *parser) localAlias() {
	p.expect("using")
	name := p.ident()
	p.expect("=")
	p.skipPast(";", "using")
	if p.aliases == nil {
		p.aliases = map[string]bool{}
	}
	p.aliases[name] = true
}

// doWhile reads do B while (C); which runs B, then loops as while (C) B.
func (p *parser) doWhile() []*ast.Node {
	p.expect("do")
	body := p.single()
	p.expect("while")
	p.expect("(")
	cond := p.expr()
	p.expect(")")
	p.expect(";")
	return []*ast.Node{body, {Op: ast.OpFor, Kids: []*ast.Node{nil, cond, nil, body}}}
}

// structuredBinding reads auto [a, b] = e;: e in a hidden variable, then
// each name bound to its element.
func (p *parser) structuredBinding() []*ast.Node {
	p.expect("auto")
	ref := p.accept("&") || p.accept("&&")
	names := p.bindingNames()
	p.expect("=")
	e := p.expr()
	p.expect(";")
	tmp := p.hidden()
	out := []*ast.Node{{Op: ast.OpDecl, S: tmp, T: ast.TAuto, Kids: []*ast.Node{e}}}
	return append(out, bindings(tmp, names, ref)...)
}

// bindingNames reads a structured binding's "[a, b, c]".
func (p *parser) bindingNames() []string {
	p.expect("[")
	var names []string
	for !p.is("]") {
		names = append(names, p.ident())
		if !p.accept(",") {
			break
		}
	}
	p.expect("]")
	return names
}

// hidden names a structured binding's variable.
func (p *parser) hidden() string {
	p.nbind++
	return fmt.Sprintf("__bind%d", p.nbind)
}

// bindings declares each name as the element of tmp at its position
// (by reference for auto &).
func bindings(tmp string, names []string, ref bool) []*ast.Node {
	t := ast.TAuto
	if ref {
		t = ast.TRef
	}
	var out []*ast.Node
	for i, n := range names {
		out = append(out, &ast.Node{Op: ast.OpDecl, S: n, T: t,
			Kids: []*ast.Node{{Op: ast.OpIndex, Kids: []*ast.Node{{Op: ast.OpIdent, S: tmp}, {Op: ast.OpInt, I: int64(i)}}}}})
	}
	return out
}

// localStruct reads a struct defined inside a function ("struct T { U a;
// V b; };"): its members, so that a brace list returned as one can name
// them.
func (p *parser) localStruct() {
	p.expect("struct")
	name := p.ident()
	p.expect("{")
	var members []*ast.Node
	for !p.is("}") {
		ds := p.tryDecl()
		if ds == nil {
			p.fail("struct %s: expected a data member, found %s", name, p.peek())
		}
		p.expect(";")
		members = append(members, ds...)
	}
	p.next()
	p.expect(";")
	if p.structs == nil {
		p.structs = map[string][]*ast.Node{}
	}
	p.structs[name] = members
}

// structList makes a brace list returned from a lambda declared to
// return a local struct an aggregate initialization of it: the list's C is
// "struct:member,member,..." (the members in order), and each item is
// converted to its member's type.
func (p *parser) structList(e *ast.Node) *ast.Node {
	members, ok := p.structs[p.ret]
	if !ok || e.Op != ast.OpList {
		return e
	}
	if len(e.Kids) > len(members) {
		p.fail("%d initializers for struct %s of %d members", len(e.Kids), p.ret, len(members))
	}
	names := make([]string, len(members))
	for i, m := range members {
		names[i] = m.S
		if i < len(e.Kids) && m.T != ast.TAuto {
			e.Kids[i] = &ast.Node{Op: ast.OpCast, T: m.T, Kids: []*ast.Node{e.Kids[i]}}
		}
	}
	e.C = p.ret + ":" + strings.Join(names, ",")
	return e
}

func (p *parser) block() *ast.Node {
	p.expect("{")
	b := &ast.Node{Op: ast.OpBlock}
	for !p.is("}") {
		if p.peek().k == tEOF {
			p.fail("unterminated block")
		}
		b.Kids = append(b.Kids, p.statement()...)
	}
	p.next()
	return b
}

func (p *parser) ifStmt() *ast.Node {
	p.expect("if")
	p.accept("constexpr")
	p.expect("(")
	var init, cond *ast.Node
	if ds := p.tryDecl(); ds != nil {
		if len(ds) != 1 {
			p.fail("several declarations in an if condition")
		}
		if p.accept(";") {
			init, cond = ds[0], p.expr()
		} else {
			// if (T x = e): the condition is x
			init, cond = ds[0], &ast.Node{Op: ast.OpIdent, S: ds[0].S}
		}
	} else {
		cond = p.expr()
		if p.accept(";") {
			init = &ast.Node{Op: ast.OpExpr, Kids: []*ast.Node{cond}}
			cond = p.expr()
		}
	}
	p.expect(")")
	then := p.single()
	var els *ast.Node
	if p.accept("else") {
		els = p.single()
	}
	return &ast.Node{Op: ast.OpIf, Kids: []*ast.Node{init, cond, then, els}}
}

func (p *parser) forStmt() *ast.Node {
	p.expect("for")
	p.expect("(")
	var init *ast.Node
	if !p.is(";") {
		save := p.pos
		for p.is("const") {
			p.next()
		}
		if p.is("auto") && (p.peekAt(1).s == "[" || p.peekAt(2).s == "[") {
			// for (const auto & [a, b] : coll): each element in a hidden
			// variable, its parts bound in the body
			p.next()
			ref := p.accept("&") || p.accept("&&")
			names := p.bindingNames()
			p.expect(":")
			coll := p.expr()
			p.expect(")")
			body := p.single()
			tmp := p.hidden()
			body = &ast.Node{Op: ast.OpBlock, Kids: append(bindings(tmp, names, ref), body)}
			return &ast.Node{Op: ast.OpRange, S: tmp, T: ast.TRef, Kids: []*ast.Node{coll, body}}
		}
		p.pos = save
		if typ, ok := p.tryType(); ok && p.peek().k == tIdent && p.peekAt(1).s == ":" {
			name := p.ident()
			p.expect(":")
			coll := p.expr()
			p.expect(")")
			body := p.single()
			return &ast.Node{Op: ast.OpRange, S: name, T: typ, Kids: []*ast.Node{coll, body}}
		}
		p.pos = save
		if ds := p.tryDecl(); ds != nil {
			if len(ds) == 1 {
				init = ds[0]
			} else {
				p.fail("several declarations in a for statement")
			}
		} else {
			init = &ast.Node{Op: ast.OpExpr, Kids: []*ast.Node{p.expr()}}
		}
	}
	p.expect(";")
	var cond, post *ast.Node
	if !p.is(";") {
		cond = p.expr()
	}
	p.expect(";")
	if !p.is(")") {
		post = p.expr()
	}
	p.expect(")")
	body := p.single()
	return &ast.Node{Op: ast.OpFor, Kids: []*ast.Node{init, cond, post, body}}
}

func (p *parser) switchStmt() *ast.Node {
	p.expect("switch")
	p.expect("(")
	v := p.expr()
	p.expect(")")
	p.expect("{")
	sw := &ast.Node{Op: ast.OpSwitch, Kids: []*ast.Node{v}}
	var cur *ast.Node
	for !p.is("}") {
		switch {
		case p.is("case"):
			p.next()
			label := p.condExpr()
			p.expect(":")
			cur = &ast.Node{Op: ast.OpCase, Kids: []*ast.Node{label}}
			sw.Kids = append(sw.Kids, cur)
		case p.is("default"):
			p.next()
			p.expect(":")
			cur = &ast.Node{Op: ast.OpCase, Kids: []*ast.Node{nil}}
			sw.Kids = append(sw.Kids, cur)
		case p.peek().k == tEOF:
			p.fail("unterminated switch")
		default:
			if cur == nil {
				p.fail("statement before the first case label")
			}
			cur.Kids = append(cur.Kids, p.statement()...)
		}
	}
	p.next()
	p.accept(";")
	return sw
}

// builtin type names, as the C++ spells them, and what evaluation keeps
// of each.
var builtinTypes = map[string]ast.Type{
	"bool": ast.TBool, "int": ast.TI32, "int8_t": ast.TI32, "int16_t": ast.TI32, "int32_t": ast.TI32,
	"short": ast.TI32, "char": ast.TI32, "llama_token": ast.TI32, "llama_pos": ast.TI32, "llama_seq_id": ast.TI32,
	"unsigned": ast.TU32, "uint8_t": ast.TU32, "uint16_t": ast.TU32, "uint32_t": ast.TU32,
	"int64_t": ast.TI64, "long": ast.TI64, "ssize_t": ast.TI64,
	"uint64_t": ast.TU64, "size_t": ast.TU64,
	"float": ast.TF32, "double": ast.TF64,
	"auto": ast.TAuto, "void": ast.TAuto,
}

var qualifiers = map[string]bool{"const": true, "static": true, "constexpr": true, "volatile": true,
	"struct": true, "enum": true, "signed": true, "inline": true, "mutable": true}

// tryType parses a type at the cursor; it restores the cursor and reports
// false when what follows is not a type.
func (p *parser) tryType() (ast.Type, bool) {
	save := p.pos

	sawQual := false
	for p.peek().k == tIdent && qualifiers[p.peek().s] {
		p.next()
		sawQual = true
	}
	t := p.peek()
	if t.k != tIdent {
		p.pos = save
		return 0, false
	}
	typ, builtin := builtinTypes[t.s]
	name := t.s
	p.next()
	if builtin {
		// "unsigned int", "long long", "unsigned long long"
		for p.peek().k == tIdent && (p.peek().s == "int" || p.peek().s == "long") {
			if name == "unsigned" && p.peek().s == "long" || name == "long" {
				typ = ast.TI64
				if name == "unsigned" {
					typ = ast.TU64
				}
			}
			p.next()
		}
	} else {
		for p.is("::") {
			p.next()
			name += "::" + p.ident()
		}
		if keywords[name] {
			p.pos = save
			return 0, false
		}
		switch {
		case name == "std::string":
			typ = ast.TStr
		case strings.HasPrefix(name, "std::"):
			typ = ast.TObj
		default:
			typ = ast.TAuto
		}
		if p.is("<") {
			if !p.templateArgs() {
				p.pos = save
				return 0, false
			}
			if typ == ast.TAuto {
				typ = ast.TObj
			}
		}
	}
	for p.peek().k == tIdent && qualifiers[p.peek().s] {
		p.next()
	}
	ptr, ref := false, false
	for {
		switch {
		case p.is("*"):
			ptr = true
		case p.is("&"), p.is("&&"):
			ref = true
		case p.is("const"):
		default:
			goto done
		}
		p.next()
	}
done:
	if ref {
		typ = ast.TRef
	} else if ptr {
		if name == "char" {
			typ = ast.TStr
		} else {
			typ = ast.TPtr
		}
	}
	// a bare identifier is a type only when a name follows it directly
	// ("a * b" and "a & b" are expressions), unless it is spelled like one
	// of llama.cpp's or the standard library's types
	if !builtin && !sawQual && !p.aliases[name] && !strings.HasPrefix(name, "std::") && !strings.HasPrefix(name, "llama_") && !strings.HasPrefix(name, "ggml_") && !strings.HasPrefix(name, "llm_") && !strings.HasPrefix(name, "gguf_") && !strings.HasPrefix(name, "clip_") {
		if ptr || ref || p.peek().k != tIdent {
			p.pos = save
			return 0, false
		}
	}
	return typ, true
}

var keywords = map[string]bool{"return": true, "if": true, "for": true, "while": true, "switch": true,
	"case": true, "break": true, "continue": true, "throw": true, "else": true, "true": true, "false": true,
	"nullptr": true, "NULL": true, "this": true, "new": true, "delete": true, "sizeof": true}

// templateArgs skips "<...>" with nesting; false if it does not close.
func (p *parser) templateArgs() bool {
	depth := 0
	for {
		t := p.next()
		switch {
		case t.k == tEOF:
			return false
		case t.s == "<":
			depth++
		case t.s == ">":
			depth--
			if depth == 0 {
				return true
			}
		case t.s == ">>":
			depth -= 2
			if depth <= 0 {
				return true
			}
		case t.s == ";" || t.s == "{" || t.s == "}":
			return false
		}
	}
}

// tryDecl parses "T a = e, *b, c{...}" when the cursor is at a
// declaration; it returns nil (cursor restored) otherwise.
func (p *parser) tryDecl() []*ast.Node {
	save := p.pos
	typ, ok := p.tryType()
	if !ok || p.peek().k != tIdent || keywords[p.peek().s] {
		p.pos = save
		return nil
	}
	// "a b" cannot be an expression, "a * b" / "a & b" as a statement is a
	// declaration in this code, but "f(x)" or "a = b" is not
	var out []*ast.Node
	typeText := ""
	for {
		name := p.ident()
		if typeText == "" {
			typeText = p.typeText(save)
		}
		d := &ast.Node{Op: ast.OpDecl, S: name, T: typ}
		if typ == ast.TObj {
			d.C = strings.TrimPrefix(strings.TrimPrefix(p.typeText(save), "static "), "const ")
		}
		switch {
		case p.accept("="):
			d.Kids = []*ast.Node{p.assignExpr()}
		case p.is("{"):
			d.Kids = []*ast.Node{p.braceList()}
		case p.is("("):
			p.next()
			args := &ast.Node{Op: ast.OpList, Kids: p.exprsUntil(")")}
			d.Kids = []*ast.Node{args}
			if typ == ast.TObj && strings.HasPrefix(d.C, "std::vector<") {
				// a vector's constructor, not its elements: vector(n) and
				// vector(n, value)
				d.Kids = []*ast.Node{{Op: ast.OpCall, Kids: append([]*ast.Node{{Op: ast.OpIdent, S: "std::vector"}}, args.Kids...)}}
			}
		case p.accept("["):
			// a local C array, "T a[N] = { ... };": (decl a :array N
			// [list]), its elements value-initialized past the list
			d.C = "array"
			if p.accept("]") {
				// T a[] = { ... }: as long as its list
				p.expect("=")
				list := p.braceList()
				d.Kids = []*ast.Node{{Op: ast.OpInt, I: int64(len(list.Kids))}, list}
				break
			}
			n := p.expr()
			p.expect("]")
			d.Kids = []*ast.Node{n}
			if p.accept("=") {
				d.Kids = append(d.Kids, p.braceList())
			}
		}
		if typ == ast.TAuto && (len(d.Kids) == 0 || d.Kids[0].Op == ast.OpList) {
			// a struct declared without an initializer (its members are
			// value-initialized) or with a brace list (its members by
			// position): the evaluator knows the headers' structs
			if tt := strings.TrimPrefix(strings.TrimPrefix(typeText, "const "), "struct "); !strings.Contains(tt, "auto") {
				d.C = tt
			}
		}
		out = append(out, d)
		if !p.accept(",") {
			break
		}
		// further declarators may add * or &
		for p.is("*") || p.is("&") {
			p.next()
		}
	}
	if !p.is(";") && !p.is(")") && !p.is(":") {
		p.pos = save
		return nil
	}
	return out
}

// typeText is the declaration's type as written, from save to the name.
func (p *parser) typeText(save int) string {
	var b strings.Builder
	prev := tEOF
	for _, t := range p.toks[save : p.pos-1] {
		if prev == tIdent && t.k == tIdent {
			b.WriteByte(' ')
		}
		b.WriteString(t.s)
		if t.s == "," {
			b.WriteByte(' ')
		}
		prev = t.k
	}
	return b.String()
}

// braceList reads a brace initializer list.
func (p *parser) braceList() *ast.Node {
	p.expect("{")
	return &ast.Node{Op: ast.OpList, Kids: p.exprsUntil("}")}
}

// expr is a full expression (comma operator not supported).
func (p *parser) expr() *ast.Node { return p.assignExpr() }

var assignOps = map[string]bool{"=": true, "+=": true, "-=": true, "*=": true, "/=": true, "%=": true,
	"&=": true, "|=": true, "^=": true, "<<=": true, ">>=": true}

func (p *parser) assignExpr() *ast.Node {
	lhs := p.condExpr()
	if t := p.peek(); t.k == tPunct && assignOps[t.s] {
		p.next()
		rhs := p.assignExpr()
		return &ast.Node{Op: ast.OpAssign, S: t.s, Kids: []*ast.Node{lhs, rhs}}
	}
	return lhs
}

func (p *parser) condExpr() *ast.Node {
	c := p.binary(0)
	if p.accept("?") {
		a := p.assignExpr()
		p.expect(":")
		b := p.assignExpr()
		return &ast.Node{Op: ast.OpCond, Kids: []*ast.Node{c, a, b}}
	}
	return c
}

var binLevels = [][]string{
	{"||"}, {"&&"}, {"|"}, {"^"}, {"&"}, {"==", "!="}, {"<", "<=", ">", ">="}, {"<<", ">>"}, {"+", "-"}, {"*", "/", "%"},
}

func (p *parser) binary(level int) *ast.Node {
	if level == len(binLevels) {
		return p.unary()
	}
	lhs := p.binary(level + 1)
	for {
		t := p.peek()
		if t.k != tPunct {
			return lhs
		}
		found := false
		for _, op := range binLevels[level] {
			if t.s == op {
				found = true
			}
		}
		if !found {
			return lhs
		}
		p.next()
		rhs := p.binary(level + 1)
		lhs = &ast.Node{Op: ast.OpBinary, S: t.s, Kids: []*ast.Node{lhs, rhs}}
	}
}

func (p *parser) unary() *ast.Node {
	t := p.peek()
	if t.k == tPunct {
		switch t.s {
		case "!", "-", "+", "~", "*", "&":
			p.next()
			return &ast.Node{Op: ast.OpUnary, S: t.s, Kids: []*ast.Node{p.unary()}}
		case "++", "--":
			p.next()
			return &ast.Node{Op: ast.OpUnary, S: "pre" + t.s, Kids: []*ast.Node{p.unary()}}
		case "(":
			// a C-style cast: "(T) x"
			save := p.pos
			p.next()
			if bt, ok := builtinTypes[p.peek().s]; ok && p.peek().k == tIdent || qualifiers[p.peek().s] || llamaTypeCast(p) {
				_ = bt
				if typ, ok := p.tryType(); ok && p.accept(")") {
					return &ast.Node{Op: ast.OpCast, T: typ, Kids: []*ast.Node{p.unary()}}
				}
			}
			p.pos = save
		}
	}
	if t.k == tIdent && t.s == "sizeof" {
		// sizeof(x): only memset's size, which the evaluator does not read
		p.next()
		p.expect("(")
		x := p.expr()
		p.expect(")")
		return &ast.Node{Op: ast.OpCall, Kids: []*ast.Node{{Op: ast.OpIdent, S: "sizeof"}, x}}
	}
	return p.postfix(p.primary())
}

// llamaTypeCast reports whether "(" opens a C-style cast to one of
// llama.cpp's or ggml's types: (llm_graph_input_attn_kv *) x,
// (llama_expert_gating_func_type) x.
func llamaTypeCast(p *parser) bool {
	t := p.peek()
	return t.k == tIdent && (strings.HasPrefix(t.s, "llm_") || strings.HasPrefix(t.s, "llama_") || strings.HasPrefix(t.s, "ggml_")) &&
		(p.peekAt(1).s == "*" || p.peekAt(1).s == ")")
}

func (p *parser) postfix(n *ast.Node) *ast.Node {
	for {
		t := p.peek()
		if t.k != tPunct {
			return n
		}
		switch t.s {
		case "(":
			n = p.callArgs(n)
		case "[":
			p.next()
			i := p.expr()
			p.expect("]")
			n = &ast.Node{Op: ast.OpIndex, Kids: []*ast.Node{n, i}}
		case ".", "->":
			p.next()
			f := p.ident()
			if p.is("<") && f == "template" {
				p.fail("member templates are not supported")
			}
			n = &ast.Node{Op: ast.OpMember, S: f, Kids: []*ast.Node{n}}
		case "++", "--":
			p.next()
			n = &ast.Node{Op: ast.OpUnary, S: "post" + t.s, Kids: []*ast.Node{n}}
		default:
			return n
		}
	}
}

// functions whose template arguments are read (casts) or ignored.
var templateCalls = map[string]bool{"static_cast": true, "reinterpret_cast": true, "const_cast": true,
	"std::max": true, "std::min": true, "std::clamp": true, "std::make_pair": true, "std::abs": true}

func (p *parser) primary() *ast.Node {
	t := p.next()
	switch t.k {
	case tNum:
		return number(p, t.s)
	case tStr:
		return &ast.Node{Op: ast.OpStr, S: t.s}
	case tChar:
		if len(t.s) != 1 {
			p.fail("bad character literal")
		}
		return &ast.Node{Op: ast.OpInt, I: int64(t.s[0])}
	case tPunct:
		switch t.s {
		case "(":
			e := p.expr()
			p.expect(")")
			return e
		case "{":
			p.pos--
			return p.braceList()
		case "[":
			return p.lambda()
		case "::":
			return p.primary()
		}
		p.pos--
		p.fail("unexpected %s in an expression", t)
	case tIdent:
		name := t.s
		for p.is("::") {
			p.next()
			name += "::" + p.ident()
		}
		if templateCalls[name] && p.is("<") {
			start := p.pos
			if !p.templateArgs() {
				p.fail("bad template arguments")
			}
			if strings.HasSuffix(name, "_cast") {
				sub := &parser{toks: append(append([]token{}, p.toks[start+1:p.pos-1]...), token{k: tEOF}), file: p.file}
				typ, ok := sub.tryType()
				if !ok {
					typ = ast.TAuto
				}
				p.expect("(")
				v := p.expr()
				p.expect(")")
				return &ast.Node{Op: ast.OpCast, T: typ, Kids: []*ast.Node{v}}
			}
		}
		if (name == "std::make_unique" || name == "std::make_shared") && p.is("<") {
			return p.makeUnique()
		}
		if name == "std::vector" && p.is("<") {
			return p.vectorOf()
		}
		if typ, ok := builtinTypes[name]; ok && p.is("(") && name != "auto" {
			// a functional cast: float(x)
			p.next()
			v := p.expr()
			p.expect(")")
			return &ast.Node{Op: ast.OpCast, T: typ, Kids: []*ast.Node{v}}
		}
		if name == "this" {
			return &ast.Node{Op: ast.OpIdent, S: "this"}
		}
		if strings.HasPrefix(name, "clip_") && p.is("{") {
			// clip_image_size{w, h}: a struct by its members' order
			return p.braceList()
		}
		if name == "new" {
			// new T(args): a call of T's constructor, named "new::T"
			class := p.ident()
			for p.is("::") {
				p.next()
				class += "::" + p.ident()
			}
			if p.is("<") && !p.templateArgs() {
				p.fail("bad template arguments")
			}
			return p.callArgs(&ast.Node{Op: ast.OpIdent, S: "new::" + class})
		}
		return &ast.Node{Op: ast.OpIdent, S: name}
	}
	p.pos--
	p.fail("unexpected %s", t)
	return nil
}

// makeUnique reads std::make_unique<T>(args): T's constructor, as new
// T(args).
func (p *parser) makeUnique() *ast.Node {
	start := p.pos
	if !p.templateArgs() {
		p.fail("bad template arguments")
	}
	var class strings.Builder
	for _, t := range p.toks[start+1 : p.pos-1] {
		class.WriteString(t.s)
	}
	if p.toks[p.pos-1].s == ">>" {
		class.WriteString(">") // the ">>" closing a nested template
	}
	return p.callArgs(&ast.Node{Op: ast.OpIdent, S: "new::" + class.String()})
}

// vectorOf reads std::vector<T>(n, v): a vector of n copies of v.
func (p *parser) vectorOf() *ast.Node {
	start := p.pos
	if !p.templateArgs() || !p.is("(") {
		p.pos = start
		p.fail("std::vector used other than as a constructor")
	}
	return p.callArgs(&ast.Node{Op: ast.OpIdent, S: "std::vector"})
}

// callArgs reads "(a, b, ...)" as a call of callee.
func (p *parser) callArgs(callee *ast.Node) *ast.Node {
	p.expect("(")
	return &ast.Node{Op: ast.OpCall, Kids: append([]*ast.Node{callee}, p.exprsUntil(")")...)}
}

// exprsUntil reads expressions separated by commas up to the token that
// closes them, and that token.
func (p *parser) exprsUntil(close string) []*ast.Node {
	var out []*ast.Node
	for !p.is(close) {
		out = append(out, p.assignExpr())
		if !p.accept(",") {
			break
		}
	}
	p.expect(close)
	return out
}

func (p *parser) lambda() *ast.Node {
	// capture list already opened
	p.skipPast("]", "lambda capture")
	params := &ast.Node{Op: ast.OpBlock}
	if p.accept("(") {
		params = p.params(tEOF)
		p.expect(")")
	}
	p.accept("mutable")
	ret := ""
	if p.accept("->") {
		if _, ok := p.structs[p.peek().s]; ok && p.peekAt(1).s == "{" {
			ret = p.next().s // a local struct (a bare name is no type to tryType)
		} else if _, ok := p.tryType(); !ok {
			p.fail("bad lambda return type")
		}
	}
	outer := p.ret
	p.ret = ret
	body := p.block()
	p.ret = outer
	return &ast.Node{Op: ast.OpLambda, Kids: []*ast.Node{params, body}}
}

func number(p *parser, s string) *ast.Node {
	l := strings.ToLower(s)
	isFloat := !strings.HasPrefix(l, "0x") && (strings.ContainsAny(l, ".e") || strings.HasSuffix(l, "f") && !strings.HasPrefix(l, "0x"))
	if isFloat {
		f, err := strconv.ParseFloat(strings.TrimRight(l, "fl"), 64)
		if err != nil {
			p.fail("bad number %s", s)
		}
		lit := &ast.Node{Op: ast.OpFloat, F: f}
		if strings.HasSuffix(l, "f") {
			// a float literal (1.0f): arithmetic with it is float's
			return &ast.Node{Op: ast.OpCast, T: ast.TF32, Kids: []*ast.Node{lit}}
		}
		return lit
	}
	u := strings.TrimRight(l, "ulz")
	v, err := strconv.ParseUint(u, 0, 64)
	if err != nil {
		p.fail("bad number %s", s)
	}
	return &ast.Node{Op: ast.OpInt, I: int64(v)}
}
