// Port of llama.cpp common/peg-parser.cpp (v0.5.0): parser_executor, the
// parse of each parser kind.

package peg

// MaxDepth bounds how deeply parsers may nest during a parse. The pin has
// no bound and its stack overflows on a deep enough input (a JSON value
// nested some tens of thousands deep); here the parser that would go
// deeper fails instead.
const MaxDepth = 100000

// Parse runs the root parser on the context's input from start. A rule
// that cannot be found comes back as an *Exception (the pin throws it).
func (a *Arena) Parse(ctx *Context, start int) (r Result, err error) {
	defer Catch(&err)
	if a.root == Invalid {
		throwf("No root parser set")
	}
	return a.parse(a.root, ctx, start), nil
}

func (a *Arena) parse(id ID, ctx *Context, start int) Result {
	if int(id) < 0 || int(id) >= len(a.parsers) {
		throwf("parser id %d out of range", id)
	}
	if ctx.depth >= MaxDepth {
		return Result{Type: Fail, Start: start, End: start}
	}
	ctx.depth++
	defer func() { ctx.depth-- }()
	p := &a.parsers[id]
	switch p.kind {
	case KindEpsilon:
		return Result{Type: Success, Start: start, End: start}
	case KindStart:
		return at(start == 0, start)
	case KindEnd:
		return at(start >= len(ctx.Input), start)
	case KindLiteral:
		return parseLiteral(p, ctx, start)
	case KindSequence:
		return a.parseSequence(p, ctx, start)
	case KindChoice:
		for _, c := range p.children {
			if r := a.parse(c, ctx, start); r.Type != Fail {
				return r
			}
		}
		return Result{Type: Fail, Start: start, End: start}
	case KindRepetition:
		return a.parseRepetition(p, ctx, start)
	case KindAnd:
		r := a.parse(p.child, ctx, start)
		return Result{Type: r.Type, Start: start, End: start}
	case KindNot:
		r := a.parse(p.child, ctx, start)
		switch r.Type {
		case Success:
			return Result{Type: Fail, Start: start, End: start}
		case NeedMoreInput:
			return Result{Type: NeedMoreInput, Start: start, End: start}
		}
		return Result{Type: Success, Start: start, End: start}
	case KindAny:
		_, n, st := parseUTF8(ctx.Input, start)
		switch st {
		case utf8Incomplete:
			if !ctx.lenient() {
				return Result{Type: Fail, Start: start, End: start}
			}
			return Result{Type: NeedMoreInput, Start: start, End: start}
		case utf8Invalid:
			return Result{Type: Fail, Start: start, End: start}
		}
		return Result{Type: Success, Start: start, End: start + n}
	case KindSpace:
		pos := start
		for pos < len(ctx.Input) && isSpace(ctx.Input[pos]) {
			pos++
		}
		return Result{Type: Success, Start: start, End: pos}
	case KindChars:
		return parseChars(p, ctx, start)
	case KindString:
		return parseString(p, ctx, start)
	case KindUntil:
		return parseUntil(p, ctx, start)
	case KindSchema, KindGbnf, KindAC:
		return a.parse(p.child, ctx, start)
	case KindRule, KindTag:
		r := a.parse(p.child, ctx, start)
		if r.Type == Fail {
			return r
		}
		text := ""
		if r.Start < len(ctx.Input) {
			text = ctx.Input[r.Start:r.End]
		}
		n := Node{Start: r.Start, End: r.End, Text: text, Children: r.Nodes, Partial: r.Type == NeedMoreInput, Invalid: r.Invalid}
		if p.kind == KindRule {
			n.Rule = p.name
		} else {
			n.Tag = p.tag
		}
		id := ctx.AST.add(n)
		return Result{Type: r.Type, Start: r.Start, End: r.End, Nodes: []int{id}, Invalid: r.Invalid}
	case KindRef:
		return a.parse(a.rule(p.name), ctx, start)
	case KindAtomic:
		r := a.parse(p.child, ctx, start)
		if r.Type == NeedMoreInput {
			r.Nodes = nil
		}
		return r
	}
	throwf("parser %d has an unknown kind %d", id, p.kind)
	return Result{}
}

func at(ok bool, pos int) Result {
	if ok {
		return Result{Type: Success, Start: pos, End: pos}
	}
	return Result{Type: Fail, Start: pos, End: pos}
}

// isSpace is std::isspace in the C locale.
func isSpace(c byte) bool {
	return c == ' ' || c == '\t' || c == '\n' || c == '\v' || c == '\f' || c == '\r'
}

func parseLiteral(p *parser, ctx *Context, start int) Result {
	pos := start
	for i := 0; i < len(p.literal); i++ {
		if pos >= len(ctx.Input) {
			if !ctx.lenient() {
				return Result{Type: Fail, Start: start, End: start}
			}
			return Result{Type: NeedMoreInput, Start: start, End: pos}
		}
		if ctx.Input[pos] != p.literal[i] {
			return Result{Type: Fail, Start: start, End: start}
		}
		pos++
	}
	return Result{Type: Success, Start: start, End: pos}
}

func (a *Arena) parseSequence(p *parser, ctx *Context, start int) Result {
	pos := start
	var nodes []int
	var inv []InvalidUTF8
	for _, c := range p.children {
		r := a.parse(c, ctx, pos)
		if r.Type == Fail {
			return Result{Type: Fail, Start: start, End: r.End}
		}
		nodes = append(nodes, r.Nodes...)
		inv = append(inv, r.Invalid...)
		if r.Type == NeedMoreInput {
			return Result{Type: NeedMoreInput, Start: start, End: r.End, Nodes: nodes, Invalid: inv}
		}
		pos = r.End
	}
	return Result{Type: Success, Start: start, End: pos, Nodes: nodes, Invalid: inv}
}

func (a *Arena) parseRepetition(p *parser, ctx *Context, start int) Result {
	pos := start
	count := 0
	var nodes []int
	var inv []InvalidUTF8
	for p.max == -1 || count < p.max {
		if pos >= len(ctx.Input) {
			break
		}
		r := a.parse(p.child, ctx, pos)
		if r.Type == Success {
			if r.End == pos {
				break // an empty match would loop forever
			}
			nodes = append(nodes, r.Nodes...)
			inv = append(inv, r.Invalid...)
			pos = r.End
			count++
			continue
		}
		if r.Type == NeedMoreInput {
			nodes = append(nodes, r.Nodes...)
			inv = append(inv, r.Invalid...)
			return Result{Type: NeedMoreInput, Start: start, End: r.End, Nodes: nodes, Invalid: inv}
		}
		break
	}
	if p.min > 0 && count < p.min {
		if pos >= len(ctx.Input) && ctx.lenient() {
			return Result{Type: NeedMoreInput, Start: start, End: pos, Nodes: nodes, Invalid: inv}
		}
		return Result{Type: Fail, Start: start, End: pos}
	}
	return Result{Type: Success, Start: start, End: pos, Nodes: nodes, Invalid: inv}
}

func parseChars(p *parser, ctx *Context, start int) Result {
	pos := start
	count := 0
	for p.max == -1 || count < p.max {
		cp, n, st := parseUTF8(ctx.Input, pos)
		if st == utf8Incomplete {
			if count >= p.min {
				return Result{Type: Success, Start: start, End: pos}
			}
			if !ctx.lenient() {
				return Result{Type: Fail, Start: start, End: start}
			}
			return Result{Type: NeedMoreInput, Start: start, End: pos}
		}
		if st == utf8Invalid {
			if count >= p.min {
				return Result{Type: Success, Start: start, End: pos}
			}
			return Result{Type: Fail, Start: start, End: start}
		}
		match := false
		for _, r := range p.ranges {
			if uint32(cp) >= r.Start && uint32(cp) <= r.End {
				match = true
				break
			}
		}
		if p.negated {
			match = !match
		}
		if !match {
			break
		}
		pos += n
		count++
	}
	if count < p.min {
		if pos >= len(ctx.Input) && ctx.lenient() {
			return Result{Type: NeedMoreInput, Start: start, End: pos}
		}
		return Result{Type: Fail, Start: start, End: pos}
	}
	return Result{Type: Success, Start: start, End: pos}
}

func isHex(c byte) bool {
	return c >= '0' && c <= '9' || c >= 'a' && c <= 'f' || c >= 'A' && c <= 'F'
}

// escape is handle_escape_sequence: pos is at a backslash.
func escape(ctx *Context, start int, pos *int, delim byte) Result {
	save := *pos
	*pos++
	if *pos >= len(ctx.Input) {
		if !ctx.lenient() {
			return Result{Type: Fail, Start: start, End: start}
		}
		*pos = save
		return Result{Type: NeedMoreInput, Start: start, End: *pos}
	}
	c := ctx.Input[*pos]
	switch c {
	case delim, '\\', '/', 'b', 'f', 'n', 'r', 't':
		*pos++
		return Result{Type: Success, Start: start, End: *pos}
	case 'u':
		*pos++
		for i := 0; i < 4; i++ {
			if *pos >= len(ctx.Input) {
				if !ctx.lenient() {
					return Result{Type: Fail, Start: start, End: start}
				}
				*pos = save
				return Result{Type: NeedMoreInput, Start: start, End: *pos}
			}
			if !isHex(ctx.Input[*pos]) {
				return Result{Type: Fail, Start: start, End: start}
			}
			*pos++
		}
		return Result{Type: Success, Start: start, End: *pos}
	}
	return Result{Type: Fail, Start: start, End: start}
}

func parseString(p *parser, ctx *Context, start int) Result {
	pos := start
	for pos < len(ctx.Input) {
		c := ctx.Input[pos]
		if c == p.delim {
			return Result{Type: Success, Start: start, End: pos}
		}
		if c == '\\' {
			if r := escape(ctx, start, &pos, p.delim); r.Type != Success {
				return r
			}
			continue
		}
		_, n, st := parseUTF8(ctx.Input, pos)
		switch st {
		case utf8Incomplete:
			if !ctx.lenient() {
				return Result{Type: Fail, Start: start, End: start}
			}
			return Result{Type: NeedMoreInput, Start: start, End: pos}
		case utf8Invalid:
			return Result{Type: Fail, Start: start, End: start}
		}
		pos += n
	}
	if !ctx.lenient() {
		return Result{Type: Fail, Start: start, End: pos}
	}
	return Result{Type: NeedMoreInput, Start: start, End: pos}
}

func parseUntil(p *parser, ctx *Context, start int) Result {
	pos, last := start, start
	var inv []InvalidUTF8
	for pos < len(ctx.Input) {
		_, n, st := parseUTF8(ctx.Input, pos)
		if st == utf8Incomplete && ctx.lenient() {
			return Result{Type: NeedMoreInput, Start: start, End: last, Invalid: inv}
		}
		if st != utf8OK {
			inv = append(inv, InvalidUTF8{pos, n})
			pos += n
			last = pos
			continue
		}
		if p.matcher.checkAt(ctx.Input, pos) != noMatch {
			return Result{Type: Success, Start: start, End: pos, Invalid: inv}
		}
		pos += n
		last = pos
	}
	if last == len(ctx.Input) && ctx.lenient() {
		return Result{Type: NeedMoreInput, Start: start, End: last, Invalid: inv}
	}
	return Result{Type: Success, Start: start, End: last, Invalid: inv}
}
