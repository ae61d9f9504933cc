// Port of llama.cpp common/parsers/muse-glimmer.cpp (v0.5.0): Muse
// Glimmer's " to=<recipient>" messages and <|eom|>/<|eot|> terminators.

package chat

import (
	. "github.com/ggload/ggload/chat/internal/peg"
	"github.com/ggload/ggload/internal/ojson"
)

func museGlimmer(t *template, g *genParams) *Params {
	p := &Params{Format: FormatPEGNative, SupportsThinking: true}
	p.Prompt = directApply(t, g, nil, nil, nil)
	p.GenerationPrompt = "<|start|>assistant"
	p.PreservedTokens = []string{"<|start|>", "<|message|>", "<|eom|>", "<|eot|>",
		"<atem:function_calls>", "<atem:invoke", "<atem:parameter", "</atem:parameter>",
		"</atem:invoke>", "</atem:function_calls>"}
	p.MessageDelimiters = []MessageDelimiter{
		{RoleAssistant, "<|start|>assistant"},
		{RoleUser, "<|start|>user"},
		{RoleSystem, "<|start|>system"},
		{RoleTool, "<|start|>tool"},
	}
	if g.hasContinuation() {
		m := &g.continueMsg
		p.GenerationPrompt = "<|start|>assistant to=self<|message|>" + m.ReasoningContent
		if g.continuation == ContinueContent {
			p.GenerationPrompt += "<|eom|><|start|>assistant to=user<|message|>" + renderContent(m)
		}
		p.Prompt += p.GenerationPrompt
	}
	extract := g.reasoningFormat != ReasoningNone
	hasTools := g.hasTools()
	includeGrammar := hasTools && g.toolChoice != ToolChoiceNone
	p.parser = build(func(b *Builder) Expr {
		start := b.Do(Rule("start", Lit("<|start|>assistant")))
		if !extract && !includeGrammar {
			return Add(start, Content(Rest()))
		}
		if extract {
			b.Do(Rule("analysis", Sum(Lit(" to=self<|message|>"), Reasoning(Until("<|eom|>")), Lit("<|eom|>"))))
		} else {
			b.Do(Rule("analysis", Sum(Lit(" to=self<|message|>"), Content(Until("<|eom|>")), Lit("<|eom|>"))))
		}
		analysis := b.Do(Ref("analysis"))
		recipient := b.Do(Opt(Lit(" to=user")))
		final := b.Do(Rule("final", Sum(recipient, Lit("<|message|>"), Content(UntilOneOf("<|eot|>", "<|eom|>")))))
		if hasTools && g.toolChoice != ToolChoiceNone {
			stringValue := b.Do(AC(Add(ToolArgStringValue(Until("</atem:parameter>")), ToolArgClose(Lit("</atem:parameter>"))),
				"</atem:parameter>"))
			choice := b.Do(Choice())
			foreachFunction(g.tools, func(fn ojson.Value) {
				name := FunctionName(fn)
				args := taggedArgs(b, fn, name, "<atem:parameter", "</atem:parameter>", stringValue)
				tp := b.Do(Call(Chain(
					ToolOpen(Sum(Lit(" to="), Until("<|message|>"), Lit("<|message|><atem:function_calls>"), Space(),
						Lit("<atem:invoke name=\""), ToolName(Lit(name)), Lit("\">"), Space())),
					ToolArgs(args),
					ToolClose(Sum(Lit("</atem:invoke>"), Space(), Lit("</atem:function_calls>"))))))
				choice = b.Do(Or(choice, Rule("tool-"+name, tp)))
			})
			var calls ID
			if g.parallelToolCalls {
				calls = b.Do(TriggerRule("tool-call", Add(choice, ZeroOrMore(Sum(Lit("<|eom|>"), start, choice)))))
			} else {
				calls = b.Do(TriggerRule("tool-call", choice))
			}
			if g.toolChoice == ToolChoiceRequired {
				return Sum(ZeroOrMore(Add(start, analysis)), start, calls)
			}
			trailing := b.Do(Opt(Sum(Lit("<|eom|>"), start, calls)))
			return Sum(ZeroOrMore(Add(start, analysis)), start, Or(calls, Add(final, trailing)))
		}
		return Sum(ZeroOrMore(Add(start, analysis)), start, final)
	})
	if includeGrammar {
		p.setGrammar(p.parser, g.toolChoice != ToolChoiceRequired)
		p.GrammarTriggers = []GrammarTrigger{{TriggerPattern,
			`(?:^|<\|start\|>assistant)( to=(?!self<\|message\|>)(?!user<\|message\|>)[^<]*?<\|message\|>)`}}
	}
	return p
}
