// Port of llama.cpp common/parsers/kimi-k2.cpp (v0.5.0): Kimi K2
// Thinking, its call ids functions.<name>:<index>.

package chat

import (
	. "github.com/ggload/ggload/chat/internal/peg"
	"github.com/ggload/ggload/internal/ojson"
)

func kimiK2(t *template, g *genParams) *Params {
	const (
		sectionBegin = "<|tool_calls_section_begin|>"
		sectionEnd   = "<|tool_calls_section_end|>"
		callBegin    = "<|tool_call_begin|>"
		argsBegin    = "<|tool_call_argument_begin|>"
		callEnd      = "<|tool_call_end|>"
		thinkStart   = "<think>"
		thinkEnd     = "</think>"
		genPrompt    = "<|im_assistant|>assistant<|im_middle|>"
	)
	p := &Params{Format: FormatPEGNative, SupportsThinking: true}
	p.Prompt = directApply(t, g, nil, nil, nil)
	p.GenerationPrompt = generationPrompt(t, g, nil, nil, nil)
	p.PreservedTokens = []string{sectionBegin, sectionEnd, callBegin, argsBegin, callEnd, thinkStart, thinkEnd}
	hasTools := g.hasTools()
	extract := g.reasoningFormat != ReasoningNone
	includeGrammar := hasTools && g.toolChoice != ToolChoiceNone
	p.ThinkingStartTag = thinkStart
	p.ThinkingEndTags = []string{thinkEnd}
	if g.hasContinuation() {
		m := &g.continueMsg
		p.GenerationPrompt = genPrompt + thinkStart + m.ReasoningContent
		if g.continuation == ContinueContent {
			p.GenerationPrompt += thinkEnd + renderContent(m)
		}
		p.Prompt += p.GenerationPrompt
	}
	p.parser = build(func(b *Builder) Expr {
		end := b.Do(End())
		var reasoning ID
		if extract {
			reasoning = b.Do(Opt(Sum(S(thinkStart), Reasoning(UntilOneOf(thinkEnd, sectionBegin, callBegin)), Opt(Lit(thinkEnd)))))
		} else {
			reasoning = b.Do(Eps())
		}
		gen := b.Do(Lit(genPrompt))
		if !hasTools || g.toolChoice == ToolChoiceNone {
			return Sum(gen, reasoning, Content(Rest()), end)
		}
		choice := b.Do(Choice())
		foreachFunction(g.tools, func(fn ojson.Value) {
			name := FunctionName(fn)
			schema := ToolParameters(fn)
			id := b.Do(ToolID(Sum(Lit("functions."), ToolName(Lit(name)), Lit(":"), Chars("[0-9]", 1, -1))))
			tp := b.Do(Call(Sum(ToolOpen(Add(id, Lit(argsBegin))), ToolArgs(SchemaJSON(JSON(), "tool-"+name+"-schema", schema, false)),
				ToolClose(Opt(Lit(callEnd))))))
			choice = b.Do(Or(choice, Rule("tool-"+name, tp)))
		})
		minCalls, maxCalls := 0, 1
		if g.toolChoice == ToolChoiceRequired {
			minCalls = 1
		}
		if g.parallelToolCalls {
			maxCalls = -1
		}
		calls := b.Do(Rule("tool-calls", Add(Opt(Lit(sectionBegin)),
			TriggerRule("tool-call", Add(Rep(Add(S(callBegin), choice), minCalls, maxCalls), Opt(Lit(sectionEnd)))))))
		before := b.Do(Content(UntilOneOf(sectionBegin, callBegin)))
		return Sum(gen, reasoning, before, calls, end)
	})
	if includeGrammar {
		p.setGrammar(p.parser, g.toolChoice == ToolChoiceAuto)
		p.GrammarTriggers = []GrammarTrigger{{TriggerWord, callBegin}}
	}
	return p
}
