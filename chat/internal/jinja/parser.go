// Port of llama.cpp common/jinja/parser.h and parser.cpp (v0.5.0).

package jinja

import (
	"math"
	"strconv"
	"strings"
)

// parseError is what the pin's parser throws: a parser_exception (tagged,
// with the source shown at pos) or a bare std::runtime_error (the message
// alone; pos is then only where the parser was, for Error.Line).
type parseError struct {
	msg    string
	pos    int // where the message shows the source
	at     int // where the parser was, for Error.Line (the end past the last token)
	tagged bool
}

// maxParseDepth bounds the parser's recursion. The pin has no bound (a
// deep enough nesting overflows its stack); here it is an error.
const maxParseDepth = 1000

type parser struct {
	tokens  []token
	current int
	depth   int
	end     int // the source's length
}

func parseTokens(tokens []token, end int) *program {
	p := &parser{tokens: tokens, end: end}
	var body []node
	for p.current < len(p.tokens) {
		body = append(body, p.parseAny())
	}
	return &program{body: body}
}

func (p *parser) fail(msg string, pos int) {
	panic(&parseError{msg: msg, pos: pos, at: p.where(), tagged: true})
}

// failPlain is a std::runtime_error thrown by the parser: no source shown.
func (p *parser) failPlain(msg string) {
	panic(&parseError{msg: msg, pos: p.peek(0).pos, at: p.where()})
}

// where is the position of the token the parser is at, or the end of the
// source past the last one.
func (p *parser) where() int {
	if p.current < len(p.tokens) {
		return p.tokens[p.current].pos
	}
	return p.end
}

// at is the source position of token i (mk_stmt's tokens[start_pos].pos).
func (p *parser) at(i int) nodeBase {
	if i < len(p.tokens) {
		return nodeBase{pos: p.tokens[i].pos}
	}
	return nodeBase{}
}

var eofToken = token{t: tEOF}

func (p *parser) peek(off int) token {
	if p.current+off >= len(p.tokens) {
		return eofToken
	}
	return p.tokens[p.current+off]
}

func (p *parser) next() token {
	if p.current >= len(p.tokens) {
		pos := 0
		if len(p.tokens) > 0 {
			pos = p.tokens[len(p.tokens)-1].pos
		}
		p.fail("Parser Error: Unexpected EOF", pos)
	}
	t := p.tokens[p.current]
	p.current++
	return t
}

func (p *parser) expect(t tokenType, msg string) token {
	tok := p.peek(0)
	if tok.t != t {
		p.fail("Parser Error: "+msg+" (Got "+tok.value+")", tok.pos)
	}
	p.current++
	return tok
}

func (p *parser) expectIdent(name string) {
	tok := p.peek(0)
	if tok.t != tIdent || tok.value != name {
		p.fail("Expected identifier: "+name, tok.pos)
	}
	p.current++
}

func (p *parser) is(t tokenType) bool { return p.peek(0).t == t }

func (p *parser) isIdent(name string) bool {
	tok := p.peek(0)
	return tok.t == tIdent && tok.value == name
}

func (p *parser) isStatement(names ...string) bool {
	if p.peek(0).t != tOpenStatement || p.peek(1).t != tIdent {
		return false
	}
	v := p.peek(1).value
	for _, n := range names {
		if v == n {
			return true
		}
	}
	return false
}

// enter bounds the recursion; leave is deferred beside it.
func (p *parser) enter() {
	p.depth++
	if p.depth > maxParseDepth {
		p.failPlain("template nested deeper than " + strconv.Itoa(maxParseDepth) + " levels")
	}
}

func (p *parser) leave() { p.depth-- }

func (p *parser) parseAny() node {
	p.enter()
	defer p.leave()
	start := p.current
	switch p.peek(0).t {
	case tComment:
		return &commentStmt{p.at(start), p.next().value}
	case tText:
		return &strLit{p.at(start), p.next().value}
	case tOpenStatement:
		return p.parseStatement()
	case tOpenExpression:
		return p.parseJinjaExpression()
	}
	p.failPlain("Unexpected token type")
	return nil
}

func (p *parser) parseJinjaExpression() node {
	p.expect(tOpenExpression, "Expected {{")
	n := p.parseExpression()
	p.expect(tCloseExpression, "Expected }}")
	return n
}

func (p *parser) parseBody(until ...string) []node {
	var body []node
	for !p.isStatement(until...) {
		body = append(body, p.parseAny())
	}
	return body
}

func (p *parser) expectEnd(name string) {
	p.expect(tOpenStatement, "Expected {%")
	p.expectIdent(name)
	p.expect(tCloseStatement, "Expected %}")
}

func (p *parser) parseStatement() node {
	p.expect(tOpenStatement, "Expected {%")
	if p.peek(0).t != tIdent {
		p.failPlain("Unknown statement")
	}
	start := p.current
	name := p.next().value
	switch name {
	case "set":
		return p.parseSet(start)
	case "if":
		n := p.parseIf(start)
		p.expectEnd("endif")
		return n
	case "macro":
		n := p.parseMacro(start)
		p.expectEnd("endmacro")
		return n
	case "for":
		n := p.parseFor(start)
		p.expectEnd("endfor")
		return n
	case "break":
		p.expect(tCloseStatement, "Expected %}")
		return &breakStmt{p.at(start)}
	case "continue":
		p.expect(tCloseStatement, "Expected %}")
		return &continueStmt{p.at(start)}
	case "call":
		return p.parseCallStatement(start)
	case "filter":
		f := p.parsePrimary()
		if _, ok := f.(*identNode); ok && p.is(tOpenParen) {
			f = p.parseCall(f)
		}
		p.expect(tCloseStatement, "Expected %}")
		body := p.parseBody("endfilter")
		p.expectEnd("endfilter")
		return &filterStmt{p.at(start), f, body}
	case "generation", "endgeneration":
		// transformers' generation blocks are ignored: the token after the
		// name is skipped whatever it is
		n := &noopStmt{p.at(start)}
		p.current++
		return n
	}
	p.failPlain("Unknown statement: " + name)
	return nil
}

func (p *parser) parseCallStatement(start int) node {
	var callerArgs []node
	if p.is(tOpenParen) {
		callerArgs = p.parseArgs()
	}
	callee := p.parsePrimary()
	if _, ok := callee.(*identNode); !ok {
		p.failPlain("Expected identifier")
	}
	args := p.parseArgs()
	p.expect(tCloseStatement, "Expected %}")
	body := p.parseBody("endcall")
	p.expectEnd("endcall")
	call := &callExpr{p.at(start), callee, args}
	return &callStmt{p.at(start), call, callerArgs, body}
}

func (p *parser) parseSet(start int) node {
	left := p.parseSequence(false)
	var val node
	var body []node
	if p.is(tEquals) {
		p.current++
		val = p.parseSequence(false)
	} else {
		p.expect(tCloseStatement, "Expected %}")
		body = p.parseBody("endset")
		p.expect(tOpenStatement, "Expected {%")
		p.expectIdent("endset")
	}
	p.expect(tCloseStatement, "Expected %}")
	return &setStmt{p.at(start), left, val, body}
}

func (p *parser) parseIf(start int) node {
	p.enter()
	defer p.leave()
	test := p.parseExpression()
	p.expect(tCloseStatement, "Expected %}")
	body := p.parseBody("elif", "else", "endif")
	var alternate []node
	if p.isStatement("elif") {
		pos0 := p.current
		p.current += 2
		alternate = append(alternate, p.parseIf(pos0))
	} else if p.isStatement("else") {
		p.current += 2
		p.expect(tCloseStatement, "Expected %}")
		alternate = p.parseBody("endif")
	}
	return &ifStmt{p.at(start), test, body, alternate}
}

func (p *parser) parseMacro(start int) node {
	name := p.parsePrimary()
	args := p.parseArgs()
	p.expect(tCloseStatement, "Expected %}")
	body := p.parseBody("endmacro")
	return &macroStmt{p.at(start), name, args, body}
}

func (p *parser) parseSequence(primary bool) node {
	start := p.current
	one := func() node {
		if primary {
			return p.parsePrimary()
		}
		return p.parseExpression()
	}
	exprs := []node{one()}
	tuple := p.is(tComma)
	for p.is(tComma) {
		p.current++
		exprs = append(exprs, one())
	}
	if tuple {
		return &tupleLit{p.at(start), exprs}
	}
	return exprs[0]
}

func (p *parser) parseFor(start int) node {
	loopvar := p.parseSequence(true)
	if !p.isIdent("in") {
		p.failPlain("Expected 'in'")
	}
	p.current++
	iterable := p.parseExpression()
	p.expect(tCloseStatement, "Expected %}")
	body := p.parseBody("endfor", "else")
	var otherwise []node
	if p.isStatement("else") {
		p.current += 2
		p.expect(tCloseStatement, "Expected %}")
		otherwise = p.parseBody("endfor")
	}
	return &forStmt{p.at(start), loopvar, iterable, body, otherwise}
}

func (p *parser) parseExpression() node {
	p.enter()
	defer p.leave()
	return p.parseIfExpression()
}

func (p *parser) parseIfExpression() node {
	a := p.parseOr()
	if p.isIdent("if") {
		start := p.current
		p.current++
		test := p.parseOr()
		if p.isIdent("else") {
			pos0 := p.current
			p.current++
			p.enter()
			defer p.leave()
			no := p.parseIfExpression()
			return &ternaryExpr{p.at(pos0), test, a, no}
		}
		return &selectExpr{p.at(start), a, test}
	}
	return a
}

func (p *parser) parseOr() node {
	left := p.parseAnd()
	for p.isIdent("or") {
		start := p.current
		op := p.next()
		left = &binaryExpr{p.at(start), op.value, left, p.parseAnd()}
	}
	return left
}

func (p *parser) parseAnd() node {
	left := p.parseNot()
	for p.isIdent("and") {
		start := p.current
		op := p.next()
		left = &binaryExpr{p.at(start), op.value, left, p.parseNot()}
	}
	return left
}

func (p *parser) parseNot() node {
	if p.isIdent("not") {
		p.enter()
		defer p.leave()
		start := p.current
		op := p.next()
		return &unaryExpr{p.at(start), op.value, p.parseNot()}
	}
	return p.parseComparison()
}

func (p *parser) parseComparison() node {
	left := p.parseAdditive()
	for {
		start := p.current
		var op string
		switch {
		case p.isIdent("not") && p.peek(1).t == tIdent && p.peek(1).value == "in":
			op = "not in"
			p.current += 2
		case p.isIdent("in"), p.is(tComparison):
			op = p.next().value
		default:
			return left
		}
		left = &binaryExpr{p.at(start), op, left, p.parseAdditive()}
	}
}

func (p *parser) parseAdditive() node {
	left := p.parseMultiplicative()
	for p.is(tAdditive) {
		start := p.current
		op := p.next()
		left = &binaryExpr{p.at(start), op.value, left, p.parseMultiplicative()}
	}
	return left
}

func (p *parser) parseMultiplicative() node {
	left := p.parseTest()
	for p.is(tMultiplicative) {
		start := p.current
		op := p.next()
		left = &binaryExpr{p.at(start), op.value, left, p.parseTest()}
	}
	return left
}

func (p *parser) parseTest() node {
	operand := p.parseFilter()
	for p.isIdent("is") {
		start := p.current
		p.current++
		negate := false
		if p.isIdent("not") {
			p.current++
			negate = true
		}
		test := p.parsePrimary()
		if p.is(tOpenParen) {
			test = p.parseCall(test)
		}
		operand = &testExpr{p.at(start), operand, negate, test}
	}
	return operand
}

func (p *parser) parseFilter() node {
	operand := p.parseUnary()
	for p.is(tPipe) {
		start := p.current
		p.current++
		f := p.parsePrimary()
		if p.is(tOpenParen) {
			f = p.parseCall(f)
		}
		operand = &filterExpr{p.at(start), operand, f}
	}
	return operand
}

func (p *parser) parseUnary() node {
	if p.is(tUnary) {
		p.enter()
		defer p.leave()
		start := p.current
		op := p.next()
		return &unaryExpr{p.at(start), op.value, p.parseUnary()}
	}
	return p.parseCallMember()
}

func (p *parser) parseCallMember() node {
	member := p.parseMember(p.parsePrimary())
	if p.is(tOpenParen) {
		return p.parseCall(member)
	}
	return member
}

func (p *parser) parseCall(callee node) node {
	p.enter()
	defer p.leave()
	start := p.current
	expr := &callExpr{p.at(start), callee, p.parseArgs()}
	member := p.parseMember(expr)
	if p.is(tOpenParen) {
		return p.parseCall(member)
	}
	return member
}

func (p *parser) parseArgs() []node {
	p.expect(tOpenParen, "Expected (")
	var args []node
	for !p.is(tCloseParen) {
		var arg node
		if tok := p.peek(0); tok.t == tMultiplicative && tok.value == "*" {
			start := p.current
			p.current++
			arg = &spreadExpr{p.at(start), p.parseExpression()}
		} else {
			arg = p.parseExpression()
			if p.is(tEquals) {
				start := p.current
				p.current++
				arg = &kwargExpr{p.at(start), arg, p.parseExpression()}
			}
		}
		args = append(args, arg)
		if p.is(tComma) {
			p.current++
		}
	}
	p.expect(tCloseParen, "Expected )")
	return args
}

func (p *parser) parseMember(object node) node {
	start := p.current
	for p.is(tDot) || p.is(tOpenSquare) {
		op := p.next()
		computed := op.t == tOpenSquare
		var prop node
		if computed {
			prop = p.parseMemberArgs()
			p.expect(tCloseSquare, "Expected ]")
		} else {
			prop = p.parsePrimary()
		}
		m := &memberExpr{nodeBase: p.at(start), object: object, property: prop, computed: computed}
		if id, ok := prop.(*identNode); ok && !computed {
			m.name = sharedStr(id.name)
		}
		object = m
	}
	return object
}

func (p *parser) parseMemberArgs() node {
	var slices []node
	isSlice := false
	start := p.current
	for !p.is(tCloseSquare) {
		if p.is(tColon) {
			slices = append(slices, nil)
			p.current++
			isSlice = true
		} else {
			slices = append(slices, p.parseExpression())
			if p.is(tColon) {
				p.current++
				isSlice = true
			}
		}
	}
	if isSlice {
		get := func(i int) node {
			if i < len(slices) {
				return slices[i]
			}
			return nil
		}
		return &sliceExpr{p.at(start), get(0), get(1), get(2)}
	}
	if len(slices) == 0 {
		return &blankExpr{p.at(start)}
	}
	return slices[0]
}

func (p *parser) parsePrimary() node {
	p.enter()
	defer p.leave()
	start := p.current
	t := p.next()
	switch t.t {
	case tNumeric:
		if strings.IndexByte(t.value, '.') >= 0 {
			f, ok := stod(t.value)
			if !ok {
				p.failPlain("stod")
			}
			return &floatLit{p.at(start), f}
		}
		i, err := strconv.ParseInt(t.value, 10, 64)
		if err != nil {
			p.failPlain("stoll")
		}
		return &intLit{p.at(start), i}
	case tString:
		v := t.value
		for p.is(tString) {
			v += p.next().value
		}
		return &strLit{p.at(start), v}
	case tIdent:
		return &identNode{p.at(start), t.value}
	case tOpenParen:
		e := p.parseSequence(false)
		p.expect(tCloseParen, "Expected )")
		return e
	case tOpenSquare:
		var vals []node
		for !p.is(tCloseSquare) {
			vals = append(vals, p.parseExpression())
			if p.is(tComma) {
				p.current++
			}
		}
		p.current++
		return &arrayLit{p.at(start), vals}
	case tOpenCurly:
		var keys, vals []node
		for !p.is(tCloseCurly) {
			k := p.parseExpression()
			p.expect(tColon, "Expected :")
			keys = append(keys, k)
			vals = append(vals, p.parseExpression())
			if p.is(tComma) {
				p.current++
			}
		}
		p.current++
		return &objectLit{p.at(start), keys, vals}
	}
	p.failPlain("Unexpected token: " + t.value + " of type " + strconv.Itoa(int(t.t)))
	return nil
}

// stod is std::stod on the lexer's digits: false where the pin throws
// out_of_range (the value overflows, or underflows to zero or a
// subnormal, as glibc's strtod reports ERANGE).
func stod(s string) (float64, bool) {
	f, err := strconv.ParseFloat(s, 64)
	if err != nil && !strings.Contains(err.Error(), "range") {
		return 0, false
	}
	a := math.Abs(f)
	if math.IsInf(a, 0) {
		return f, false
	}
	if a < 0x1p-1022 && strings.Trim(s, "+-0.") != "" {
		return f, false
	}
	return f, true
}
