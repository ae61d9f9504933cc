// Port of llama.cpp common/parsers/kimi-k3.cpp (v0.5.0): Kimi K3's
// <|open|>/<|close|> tagged sections.

package chat

import (
	. "github.com/ggload/ggload/chat/internal/peg"
	"github.com/ggload/ggload/internal/ojson"
)

func kimiK3(t *template, g *genParams) *Params {
	const (
		sep        = "<|sep|>"
		msgStart   = "<|open|>message role=\"assistant\"<|sep|>"
		thinkStart = "<|open|>think<|sep|>"
		thinkEnd   = "<|close|>think<|sep|>"
		respStart  = "<|open|>response<|sep|>"
		respEnd    = "<|close|>response<|sep|>"
		toolsStart = "<|open|>tools<|sep|>"
		toolsEnd   = "<|close|>tools<|sep|>"
		callStart  = "<|open|>call tool=\""
		callEnd    = "<|close|>call<|sep|>"
		argStart   = "<|open|>argument key=\""
		argEnd     = "<|close|>argument<|sep|>"
		msgEnd     = "<|close|>message<|sep|>"
		eom        = "<|end_of_msg|>"
	)
	p := &Params{Format: FormatPEGNative, SupportsThinking: true}
	p.Prompt = directApply(t, g, nil, nil, nil)
	p.GenerationPrompt = generationPrompt(t, g, nil, nil, nil)
	p.PreservedTokens = []string{"<|open|>", "<|close|>", "<|sep|>", "<|end_of_msg|>"}
	p.ThinkingStartTag = thinkStart
	p.ThinkingEndTags = []string{thinkEnd}
	p.MessageDelimiters = []MessageDelimiter{
		{RoleAssistant, "<|open|>message role=\"assistant\"<|sep|>"},
		{RoleUser, "<|open|>message role=\"user\"<|sep|>"},
		{RoleTool, "<|open|>message role=\"tool\""},
		{RoleSystem, "<|open|>message role=\"system\""},
	}
	hasTools := g.hasTools()
	extract := g.reasoningFormat != ReasoningNone
	includeGrammar := hasTools && g.toolChoice != ToolChoiceNone
	if g.hasContinuation() {
		m := &g.continueMsg
		p.GenerationPrompt = msgStart + thinkStart + m.ReasoningContent
		if g.continuation == ContinueContent {
			p.GenerationPrompt += thinkEnd + respStart + renderContent(m)
		}
		p.Prompt += p.GenerationPrompt
	}
	p.parser = build(func(b *Builder) Expr {
		end := b.Do(End())
		start := b.Do(Opt(Lit(msgStart)))
		var body ID
		if extract {
			body = b.Do(Reasoning(UntilOneOf(thinkEnd, respStart)))
		} else {
			body = b.Do(Content(UntilOneOf(thinkEnd, respStart)))
		}
		reasoning := b.Do(Opt(Sum(Opt(Lit(thinkStart)), body, Opt(Lit(thinkEnd)))))
		response := b.Do(Sum(Opt(Lit(respStart)), Content(UntilOneOf(respEnd, toolsStart, msgEnd)), Opt(Lit(respEnd))))
		trailer := b.Do(Add(Opt(Lit(msgEnd)), Opt(Lit(eom))))
		if !hasTools || g.toolChoice == ToolChoiceNone {
			return Sum(start, reasoning, response, trailer, end)
		}
		choices := b.Do(Choice())
		foreachFunction(g.tools, func(fn ojson.Value) {
			name := FunctionName(fn)
			schema := ToolParameters(fn)
			args := b.Do(Eps())
			if props := schema.At("properties"); schema.Has("properties") && !Empty(props) {
				argChoices := b.Do(Choice())
				for _, prop := range Items(props) {
					typ := "string"
					if tv, ok := prop.Value.Get("type"); ok && prop.Value.IsObject() && tv.IsString() {
						typ = tv.Str()
					}
					var value ID
					if typ == "string" {
						value = b.Do(ToolArgStringValue(Until(argEnd)))
					} else {
						value = b.Do(ToolArgValue(Until(argEnd)))
					}
					argChoices = b.Do(Or(argChoices, Rule("kimi-k3-arg-"+name+"-"+prop.Key,
						ToolArg(Sum(ToolArgOpen(Lit(argStart)), ToolArgName(Lit(prop.Key)), Lit(`"`),
							Until(sep), Lit(sep), value, ToolArgClose(Lit(argEnd)))))))
				}
				args = b.Do(ZeroOrMore(argChoices))
			}
			call := b.Do(Call(Sum(ToolOpen(Sum(Lit(callStart), ToolName(Lit(name)), Lit(`"`), Until(sep), Lit(sep))),
				ToolArgs(args), ToolClose(Lit(callEnd)))))
			choices = b.Do(Or(choices, Rule("kimi-k3-tool-"+name, call)))
		})
		section := b.Do(TriggerRule("kimi-k3-tool-call", Sum(Lit(toolsStart), OneOrMore(choices),
			Lit(toolsEnd), Opt(Lit(msgEnd)), Opt(Lit(eom)))))
		tools := section
		if g.toolChoice != ToolChoiceRequired {
			tools = b.Do(Opt(section))
		}
		return Sum(start, reasoning, response, tools, trailer, end)
	})
	if includeGrammar {
		p.setGrammar(p.parser, g.toolChoice != ToolChoiceRequired)
		p.GrammarTriggers = []GrammarTrigger{{TriggerWord, toolsStart}}
	}
	return p
}
