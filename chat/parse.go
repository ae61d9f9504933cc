// Port of llama.cpp common/chat.cpp (v0.5.0): common_chat_parse and
// common_chat_peg_parse; and of common/chat-peg-parser.cpp's mappers,
// which turn a parse's tagged nodes into a message.

package chat

import (
	"strings"

	"github.com/ggload/ggload/chat/internal/peg"
	"github.com/ggload/ggload/internal/ojson"
)

// Parse is common_chat_parse: the model's reply to the prompt of these
// params (the text generated after it) as a message: content,
// reasoning_content and tool calls. With partial, the reply may still be
// streaming: what parses so far comes back, where a whole reply would be
// an error. A tool call keeps the id the reply gives it, if any; see
// Message.SetToolCallIDs for the ids a server gives the others.
func (p *Params) Parse(text string, partial bool) (Message, error) {
	return parseWith(p.parser, p.Format, p.GenerationPrompt, text, partial)
}

// contentOnly is the parser of a reply that is all content.
var contentOnly = func() *peg.Arena {
	a, err := peg.BuildParser(func(b *peg.Builder) peg.Expr { return peg.Add(peg.Content(peg.Rest()), peg.End()) })
	if err != nil {
		panic(err)
	}
	return a
}()

// parseWith is common_chat_peg_parse.
func parseWith(a *peg.Arena, format Format, genPrompt, text string, partial bool) (msg Message, err error) {
	defer peg.Catch(&err)
	if a.Empty() {
		a = contentOnly
	}
	ctx := &peg.Context{Input: genPrompt + text, Flags: peg.Lenient}
	res, err := a.Parse(ctx, 0)
	if err != nil {
		return Message{}, err
	}
	if res.Type == peg.Fail && (!partial || res.End == 0) {
		return Message{}, &Error{Msg: "The model produced output that does not match the expected " + format.String() + " format"}
	}
	kind := "base"
	switch format {
	case FormatPEGGemma4:
		kind = "gemma4"
	case FormatPEGMinimaxM3:
		kind = "minimax"
	}
	msg = mapAST(kind, &ctx.AST, res)
	msg.Role = "assistant"
	return msg, nil
}

// mapAST is a mapper's from_ast: "base" (common_chat_peg_mapper),
// "gemma4" or "minimax".
func mapAST(kind string, ast *peg.AST, res peg.Result) Message {
	var msg Message
	switch kind {
	case "gemma4":
		m := &gemma4Mapper{msg: &msg}
		for _, id := range res.Nodes {
			m.visit(ast, id)
		}
	case "minimax":
		for _, id := range res.Nodes {
			minimaxVisit(&msg, ast, id)
		}
	default:
		m := &mapper{msg: &msg}
		m.fromAST(ast, res)
	}
	return msg
}

// mapper is common_chat_peg_mapper.
type mapper struct {
	msg *Message
	// the call being read: the pending one (before its name is known) or
	// the last of msg.ToolCalls
	pending        ToolCall
	hasPending     bool
	cur            int // -1: none, -2: the pending call, else an index in msg.ToolCalls
	argCount       int
	closeQuote     bool
	argsBuffer     string
	curInitialized bool
}

func (m *mapper) current() *ToolCall {
	switch {
	case !m.curInitialized || m.cur == -1:
		return nil
	case m.cur == -2:
		return &m.pending
	}
	return &m.msg.ToolCalls[m.cur]
}

// argsTarget is args_target: the call's arguments once its name is
// known, the buffer before.
func (m *mapper) argsTarget() *string {
	if c := m.current(); c != nil && c.Name != "" {
		return &c.Arguments
	}
	return &m.argsBuffer
}

func (m *mapper) fromAST(ast *peg.AST, res peg.Result) {
	ast.VisitResult(res, m.mapNode)
	if m.hasPending && m.pending.Name != "" {
		if m.argsBuffer != "" {
			m.pending.Arguments = m.argsBuffer
		}
		if m.closeQuote && m.pending.Arguments != "" {
			m.pending.Arguments += `"`
		}
		m.msg.ToolCalls = append(m.msg.ToolCalls, m.pending)
		m.hasPending = false
	}
	// whitespace-only reasoning (an empty <think></think>) is none
	if strings.Trim(m.msg.ReasoningContent, " \n\r\t") == "" {
		m.msg.ReasoningContent = ""
	}
}

func trimTrailingSpace(s string) string {
	for s != "" && isSpace(s[len(s)-1]) {
		s = s[:len(s)-1]
	}
	return s
}

// trimArgName is chat-peg-parser.cpp's trim: one leading space, every
// trailing one.
func trimArgName(s string) string {
	if s != "" && isSpace(s[0]) {
		s = s[1:]
	}
	return trimTrailingSpace(s)
}

// quote is ordered_json(s).dump(): s as a JSON string, nlohmann's error
// thrown on bad UTF-8.
func quote(s string) string { return dump(ojson.StringValue(s), -1) }

// escapeInner is escape_json_string_inner.
func escapeInner(s string) string {
	q := quote(s)
	if len(q) >= 2 && q[0] == '"' && q[len(q)-1] == '"' {
		return q[1 : len(q)-1]
	}
	return q
}

// braceDepth is json_brace_depth: the '{' left open outside strings.
func braceDepth(s string) int {
	depth := 0
	inString, escaped := false, false
	for i := 0; i < len(s); i++ {
		c := s[i]
		if escaped {
			escaped = false
			continue
		}
		if c == '\\' && inString {
			escaped = true
			continue
		}
		if c == '"' {
			inString = !inString
			continue
		}
		if !inString {
			if c == '{' {
				depth++
			} else if c == '}' {
				depth--
			}
		}
	}
	return depth
}

func isWordChar(c byte) bool {
	return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '_'
}

// normalizeQuotes is normalize_quotes_to_json: Python's single-quoted
// strings and True/False/None as JSON (a prefix of a literal as a
// prefix, so that streamed partials only grow).
func normalizeQuotes(in string) string {
	var b strings.Builder
	inSingle, inDouble := false, false
	for i := 0; i < len(in); i++ {
		c := in[i]
		if c == '\\' && i+1 < len(in) {
			next := in[i+1]
			switch {
			case inSingle && next == '\'':
				b.WriteByte('\'')
				i++
			case inSingle && next == '"':
				b.WriteString(`\"`)
				i++
			case inSingle || inDouble:
				b.WriteByte(c)
				b.WriteByte(next)
				i++
			default:
				b.WriteByte(c)
			}
			continue
		}
		switch {
		case c == '"':
			if inSingle {
				b.WriteString(`\"`)
			} else {
				inDouble = !inDouble
				b.WriteByte(c)
			}
		case c == '\'':
			switch {
			case inDouble:
				b.WriteByte(c)
			case inSingle:
				inSingle = false
				b.WriteByte('"')
			default:
				inSingle = true
				b.WriteByte('"')
			}
		case !inSingle && !inDouble && (c == 'T' || c == 'F' || c == 'N') && (i == 0 || !isWordChar(in[i-1])):
			n := 0
			for i+n < len(in) && isWordChar(in[i+n]) {
				n++
			}
			tok := in[i : i+n]
			matched := false
			for _, lit := range [][2]string{{"True", "true"}, {"False", "false"}, {"None", "null"}} {
				if n <= len(lit[0]) && lit[0][:n] == tok {
					b.WriteString(lit[1][:min(n, len(lit[1]))])
					i += n - 1
					matched = true
					break
				}
			}
			if !matched {
				b.WriteByte(c)
			}
		default:
			b.WriteByte(c)
		}
	}
	return b.String()
}

func (m *mapper) mapNode(n *peg.Node) {
	switch n.Tag {
	case peg.TagReasoning:
		m.msg.ReasoningContent += n.SanitizedText()
	case peg.TagContent:
		m.msg.Content += n.SanitizedText()
	case peg.TagToolOpen:
		m.pending, m.hasPending = ToolCall{}, true
		m.cur, m.curInitialized = -2, true
		m.argCount = 0
		m.argsBuffer = ""
		m.closeQuote = false
	}
	cur := m.current()
	switch n.Tag {
	case peg.TagToolID:
		if cur != nil {
			t := trimTrailingSpace(n.Text)
			if len(t) >= 2 && t[0] == '"' && t[len(t)-1] == '"' {
				t = t[1 : len(t)-1]
			}
			cur.ID = t
		}
	case peg.TagToolName:
		if cur != nil {
			cur.Name = trimTrailingSpace(n.Text)
			if m.argsBuffer != "" {
				cur.Arguments = m.argsBuffer
				m.argsBuffer = ""
			} else if cur.Arguments == "" {
				cur.Arguments = "{"
			}
			if m.hasPending {
				m.msg.ToolCalls = append(m.msg.ToolCalls, m.pending)
				m.hasPending = false
				m.pending = ToolCall{}
				m.cur = len(m.msg.ToolCalls) - 1
			}
		}
	case peg.TagToolArgs:
		if cur != nil {
			if t := trimTrailingSpace(n.Text); t != "" && t[0] == '{' {
				*m.argsTarget() = t
			}
		}
	case peg.TagToolArgOpen:
		m.closeQuote = false
	case peg.TagToolArgName:
		if cur != nil {
			entry := ""
			if m.argCount > 0 {
				entry = ","
			}
			entry += quote(trimArgName(n.Text)) + ":"
			m.argCount++
			t := m.argsTarget()
			if *t == "" {
				*t = "{"
			}
			*t += entry
		}
	case peg.TagToolArgValue, peg.TagToolArgStringValue:
		if cur != nil {
			isString := n.Tag == peg.TagToolArgStringValue
			add := ""
			switch {
			case n.Text == "" && isString:
				add = `"`
				m.closeQuote = true
			case isString:
				if !m.closeQuote {
					add = `"`
					m.closeQuote = true
				}
				add += escapeInner(n.Text)
			case n.Text != "":
				add = normalizeQuotes(n.Text)
			}
			*m.argsTarget() += add
		}
	case peg.TagToolArgClose:
		if cur != nil && m.closeQuote {
			*m.argsTarget() += `"`
			m.closeQuote = false
		}
	case peg.TagToolClose:
		if cur != nil {
			if cur.Name == "" && m.argsBuffer != "" {
				cur.Arguments = m.argsBuffer
				m.argsBuffer = ""
			}
			if m.closeQuote {
				cur.Arguments += `"`
				m.closeQuote = false
			}
			for d := braceDepth(cur.Arguments); d > 0; d-- {
				cur.Arguments += "}"
			}
			if m.hasPending {
				if cur.Name != "" {
					m.msg.ToolCalls = append(m.msg.ToolCalls, m.pending)
				}
				m.hasPending = false
			}
		}
	}
}

// gemma4Mapper is common_chat_peg_gemma4_mapper.
type gemma4Mapper struct{ msg *Message }

func gemma4JSON(ast *peg.AST, id int) string {
	n := ast.Get(id)
	if n.Text == "" {
		return ""
	}
	switch n.Rule {
	case "gemma4-number", "gemma4-bool", "gemma4-null", "gemma4-dict-key-name":
		return n.Text
	case "gemma4-string-content":
		return escapeInner(n.Text)
	case "gemma4-string":
		s := `"`
		if len(n.Children) > 0 {
			s += gemma4JSON(ast, n.Children[0])
			if !n.Partial {
				s += `"`
			}
		}
		return s
	case "gemma4-array", "gemma4-dict":
		open, close := "[", "]"
		if n.Rule == "gemma4-dict" {
			open, close = "{", "}"
		}
		s := open
		for i, c := range n.Children {
			if i > 0 {
				s += ","
			}
			s += gemma4JSON(ast, c)
		}
		if !n.Partial {
			s += close
		}
		return s
	case "gemma4-dict-key":
		s := `"`
		if len(n.Children) > 0 {
			s += escapeInner(gemma4JSON(ast, n.Children[0]))
		}
		if !n.Partial {
			s += `":`
		}
		return s
	case "gemma4-dict-kv":
		s := ""
		for _, c := range n.Children {
			s += gemma4JSON(ast, c)
		}
		return s
	case "gemma4-value":
		if len(n.Children) > 0 {
			return gemma4JSON(ast, n.Children[0])
		}
	}
	return ""
}

func (m *gemma4Mapper) visit(ast *peg.AST, id int) {
	n := ast.Get(id)
	switch n.Tag {
	case peg.TagReasoning:
		m.msg.ReasoningContent += n.SanitizedText()
		return
	case peg.TagContent:
		m.msg.Content += n.SanitizedText()
		return
	case peg.TagTool:
		nameID, argsID := ast.FindByTag(n, peg.TagToolName, 3), ast.FindByTag(n, peg.TagToolArgs, 3)
		if nameID >= 0 && argsID >= 0 {
			name, args := ast.Get(nameID), ast.Get(argsID)
			if !name.Partial {
				call := ToolCall{Name: name.Text}
				if len(args.Children) > 0 {
					call.Arguments = gemma4JSON(ast, args.Children[0])
				}
				m.msg.ToolCalls = append(m.msg.ToolCalls, call)
			}
		}
		return
	}
	for _, c := range n.Children {
		m.visit(ast, c)
	}
}

// The MiniMax-M3 mapper (common_chat_peg_minimax_m3_mapper).

func minimaxCollect(ast *peg.AST, n *peg.Node, tag string, out *[]int) {
	for _, c := range n.Children {
		if child := ast.Get(c); child.Tag == tag {
			*out = append(*out, c)
		} else {
			minimaxCollect(ast, child, tag, out)
		}
	}
}

func minimaxValueOf(ast *peg.AST, n *peg.Node) int {
	for _, c := range n.Children {
		switch ast.Get(c).Tag {
		case peg.TagToolArgValue, peg.TagToolArgStringValue, tagArgObject, tagArgArray:
			return c
		}
	}
	return -1
}

func minimaxMember(ast *peg.AST, n *peg.Node) string {
	nameID := ast.FindByTag(n, peg.TagToolArgName, 3)
	if nameID < 0 {
		return ""
	}
	return quote(ast.Get(nameID).Text) + ":" + minimaxValue(ast, minimaxValueOf(ast, n), !n.Partial)
}

func minimaxContainer(ast *peg.AST, n *peg.Node, isObject, closed bool) string {
	tag := tagArgItem
	if isObject {
		tag = peg.TagToolArg
	}
	var entries []int
	minimaxCollect(ast, n, tag, &entries)
	s := "["
	if isObject {
		s = "{"
	}
	comma := false
	for _, id := range entries {
		e := ast.Get(id)
		var text string
		if isObject {
			text = minimaxMember(ast, e)
		} else {
			text = minimaxValue(ast, minimaxValueOf(ast, e), !e.Partial)
		}
		if text == "" {
			continue
		}
		if comma {
			s += ","
		}
		comma = true
		s += text
	}
	if closed {
		if isObject {
			s += "}"
		} else {
			s += "]"
		}
	}
	return s
}

func minimaxValue(ast *peg.AST, id int, closed bool) string {
	if id < 0 {
		return ""
	}
	n := ast.Get(id)
	switch n.Tag {
	case tagArgObject:
		return minimaxContainer(ast, n, true, closed)
	case tagArgArray:
		return minimaxContainer(ast, n, false, closed)
	case peg.TagToolArgStringValue:
		s := `"` + escapeInner(n.Text)
		if closed {
			s += `"`
		}
		return s
	}
	return n.Text // numbers and booleans as the template writes them
}

func minimaxVisit(msg *Message, ast *peg.AST, id int) {
	n := ast.Get(id)
	switch n.Tag {
	case peg.TagReasoning:
		msg.ReasoningContent += n.SanitizedText()
		return
	case peg.TagContent:
		msg.Content += n.SanitizedText()
		return
	case peg.TagTool:
		if nameID := ast.FindByTag(n, peg.TagToolName, 3); nameID >= 0 {
			msg.ToolCalls = append(msg.ToolCalls, ToolCall{Name: ast.Get(nameID).Text,
				Arguments: minimaxContainer(ast, n, true, !n.Partial)})
		}
		return
	}
	for _, c := range n.Children {
		minimaxVisit(msg, ast, c)
	}
}
