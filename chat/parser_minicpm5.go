// Port of llama.cpp common/parsers/minicpm5.cpp (v0.5.0): MiniCPM5's
// <function name="..."><param name="...">...</param></function> calls.

package chat

import (
	. "github.com/ggload/ggload/chat/internal/peg"
	"github.com/ggload/ggload/internal/ojson"
)

func minicpm5(t *template, g *genParams) *Params {
	p := &Params{Format: FormatPEGNative, SupportsThinking: true, ThinkingStartTag: "<think>", ThinkingEndTags: []string{"</think>"}}
	p.Prompt = directApply(t, g, nil, nil, nil)
	p.GenerationPrompt = generationPrompt(t, g, nil, nil, nil)
	p.PreservedTokens = []string{"<function", "<param", "</function>", "</param>", "<think>", "</think>"}
	p.MessageDelimiters = []MessageDelimiter{
		{RoleAssistant, "<|im_start|>assistant"},
		{RoleTool, "<|im_start|>user\n<tool_response>"},
		{RoleUser, "<|im_start|>user"},
		{RoleSystem, "<|im_start|>system"},
	}
	hasTools := g.hasTools()
	hasSchema := g.jsonSchema.IsObject() && g.jsonSchema.Len() > 0
	extract := g.reasoningFormat != ReasoningNone
	includeGrammar := hasSchema || hasTools && g.toolChoice != ToolChoiceNone
	if g.hasContinuation() {
		m := &g.continueMsg
		p.GenerationPrompt = "<|im_start|>assistant\n<think>\n" + m.ReasoningContent
		if g.continuation == ContinueContent {
			p.GenerationPrompt += "\n</think>\n\n" + renderContent(m)
		}
		p.Prompt += p.GenerationPrompt
	}
	p.parser = build(func(b *Builder) Expr {
		gen := b.Do(Lit("<|im_start|>assistant\n"))
		reasoning := b.Do(Eps())
		if extract {
			reasoning = b.Do(Add(Chain(S("<think>"), Reasoning(Until("</think>")), S("</think>")), Space()))
		}
		if hasSchema {
			return Sum(gen, reasoning, Content(SchemaJSON(JSON(), "response-format", g.jsonSchema, false)))
		}
		if hasTools && g.toolChoice != ToolChoiceNone {
			// CDATA lets a value hold what would close the tag
			stringValue := b.Do(Choice(
				Sum(Lit("<![CDATA["), AC(Add(ToolArgStringValue(Until("]]>")), Lit("]]>")), "]]>"), ToolArgClose(Lit("</param>"))),
				Add(Not(Lit("<![CDATA[")), AC(Add(ToolArgStringValue(Until("</param>")), ToolArgClose(Lit("</param>"))), "</param>"))))
			choice := b.Do(Choice())
			foreachFunction(g.tools, func(fn ojson.Value) {
				name := FunctionName(fn)
				args := taggedArgs(b, fn, name, "<param", "</param>", stringValue)
				tp := b.Do(Call(Chain(ToolOpen(Sum(Lit("<function name=\""), ToolName(Lit(name)), Lit("\">"))),
					ToolArgs(args), ToolClose(Lit("</function>")))))
				choice = b.Do(Or(choice, Rule("tool-"+name, tp)))
			})
			maxCalls := 1
			if g.parallelToolCalls {
				maxCalls = -1
			}
			calls := b.Do(TriggerRule("tool-call", Rep(Add(choice, Space()), 1, maxCalls)))
			content := b.Do(Content(Until("<function")))
			return Sum(gen, reasoning, content, calls, End())
		}
		return Sum(gen, reasoning, Content(Rest()), End())
	})
	if includeGrammar {
		p.setGrammar(p.parser, !(hasSchema || hasTools && g.toolChoice == ToolChoiceRequired))
		p.GrammarTriggers = []GrammarTrigger{{TriggerWord, "<function"}}
	}
	return p
}
