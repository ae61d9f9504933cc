// Port of llama.cpp common/parsers/cohere2moe.cpp (v0.5.0): Cohere2 MoE
// ("North Code"), its marker-wrapped text and JSON actions.

package chat

import (
	. "github.com/ggload/ggload/chat/internal/peg"
)

func cohere2MoE(t *template, g *genParams) *Params {
	const (
		turnStart   = "<|START_OF_TURN_TOKEN|>"
		turnEnd     = "<|END_OF_TURN_TOKEN|>"
		chatbot     = "<|CHATBOT_TOKEN|>"
		user        = "<|USER_TOKEN|>"
		system      = "<|SYSTEM_TOKEN|>"
		thinkStart  = "<|START_THINKING|>"
		thinkEnd    = "<|END_THINKING|>"
		textStart   = "<|START_TEXT|>"
		textEnd     = "<|END_TEXT|>"
		actionStart = "<|START_ACTION|>"
		actionEnd   = "<|END_ACTION|>"
		resultStart = "<|START_TOOL_RESULT|>"
		resultEnd   = "<|END_TOOL_RESULT|>"
		genPrefix   = turnStart + chatbot
	)
	p := &Params{Format: FormatPEGNative, SupportsThinking: true, ThinkingStartTag: thinkStart, ThinkingEndTags: []string{thinkEnd}}
	p.Prompt = directApply(t, g, nil, nil, nil)
	p.GenerationPrompt = generationPrompt(t, g, nil, nil, nil)
	p.PreservedTokens = []string{turnStart, turnEnd, chatbot, user, system, thinkStart, thinkEnd,
		textStart, textEnd, actionStart, actionEnd, resultStart, resultEnd}
	p.MessageDelimiters = []MessageDelimiter{
		{RoleAssistant, genPrefix},
		{RoleUser, turnStart + user},
		{RoleTool, turnStart + system + resultStart},
		{RoleSystem, turnStart + system},
	}
	hasTools := g.hasTools()
	hasSchema := g.jsonSchema.IsObject() && g.jsonSchema.Len() > 0
	extract := g.reasoningFormat != ReasoningNone
	includeGrammar := hasSchema || hasTools && g.toolChoice != ToolChoiceNone
	if g.hasContinuation() {
		m := &g.continueMsg
		p.GenerationPrompt = genPrefix + thinkStart + m.ReasoningContent
		if g.continuation == ContinueContent {
			p.GenerationPrompt += thinkEnd + textStart + renderContent(m)
		}
		p.Prompt += p.GenerationPrompt
	}
	p.parser = build(func(b *Builder) Expr {
		gen := b.Do(Lit(genPrefix))
		end := b.Do(End())
		reasoning := b.Do(Eps())
		if extract {
			reasoning = b.Do(Opt(Sum(Lit(thinkStart), Reasoning(UntilOneOf(thinkEnd, textStart, actionStart)), Opt(Lit(thinkEnd)))))
		} else {
			reasoning = b.Do(Opt(Content(Sum(Lit(thinkStart), UntilOneOf(thinkEnd, textStart, actionStart), Opt(Lit(thinkEnd))))))
		}
		var text ID
		if hasSchema {
			text = b.Do(Sum(Lit(textStart), Content(SchemaJSON(JSON(), "response-format-schema", g.jsonSchema, false)), Opt(Lit(textEnd))))
		} else {
			text = b.Do(Sum(Lit(textStart), Content(Until(textEnd)), Opt(Lit(textEnd))))
		}
		if !hasTools || g.toolChoice == ToolChoiceNone {
			return Sum(gen, reasoning, text, Opt(Lit(turnEnd)), end)
		}
		calls := b.Do(StandardJSONTools(actionStart, actionEnd, g.tools, g.parallelToolCalls, true,
			"tool_name", "parameters", true, false, "", "tool_call_id", []string{"tool_call_id", "tool_name", "parameters"}, false))
		body := calls
		if g.toolChoice != ToolChoiceRequired {
			body = b.Do(Choice(calls, text))
		}
		return Sum(gen, reasoning, body, Opt(Lit(turnEnd)), end)
	})
	if includeGrammar {
		p.setGrammar(p.parser, !hasSchema && g.toolChoice == ToolChoiceAuto)
		p.GrammarTriggers = []GrammarTrigger{{TriggerWord, actionStart}}
	}
	return p
}
