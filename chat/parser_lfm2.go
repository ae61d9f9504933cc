// Port of llama.cpp common/parsers/lfm2.cpp (v0.5.0): LFM2 and LFM2.5,
// their Python-style tool calls.

package chat

import (
	"strings"

	. "github.com/ggload/ggload/chat/internal/peg"
	"github.com/ggload/ggload/internal/ojson"
)

func lfm2(t *template, g *genParams, toolListTokens bool) *Params {
	const (
		callStart = "<|tool_call_start|>"
		callEnd   = "<|tool_call_end|>"
		listStart = "<|tool_list_start|>"
		listEnd   = "<|tool_list_end|>"
		thinkS    = "<think>"
		thinkE    = "</think>"
		genPrompt = "<|im_start|>assistant\n"
	)
	adjusted := copyThinking(g.messages, false)
	p := &Params{Format: FormatPEGNative, SupportsThinking: true, ThinkingStartTag: thinkS, ThinkingEndTags: []string{thinkE}}
	p.Prompt = directApply(t, g, &adjusted, nil, nil)
	p.GenerationPrompt = generationPrompt(t, g, &adjusted, nil, nil)
	p.PreservedTokens = []string{callStart, callEnd, thinkS, thinkE}
	if toolListTokens {
		p.PreservedTokens = append(p.PreservedTokens, listStart, listEnd)
	}
	hasTools := g.hasTools()
	hasSchema := g.jsonSchema.IsObject()
	extract := g.reasoningFormat != ReasoningNone && strings.Contains(t.src, thinkS)
	includeGrammar := hasSchema || hasTools && g.toolChoice != ToolChoiceNone
	if g.hasContinuation() {
		m := &g.continueMsg
		p.GenerationPrompt = genPrompt + thinkS + m.ReasoningContent
		if g.continuation == ContinueContent {
			p.GenerationPrompt += thinkE + renderContent(m)
		}
		p.Prompt += p.GenerationPrompt
	}
	p.parser = build(func(b *Builder) Expr {
		gen := b.Do(Lit(genPrompt))
		end := b.Do(End())
		reasoning := b.Do(Eps())
		if extract {
			reasoning = b.Do(Opt(Sum(S(thinkS), Reasoning(Until(thinkE)), S(thinkE))))
		}
		if !hasTools || g.toolChoice == ToolChoiceNone {
			if hasSchema {
				rf := b.Do(Content(SchemaJSON(JSON(), "response-format-schema", g.jsonSchema, false)))
				return Sum(gen, reasoning, rf, end)
			}
			return Sum(gen, reasoning, Content(Rest()), end)
		}
		calls := b.Do(Rule("tool-calls", TriggerRule("tool-call",
			Sum(Lit(callStart), PythonStyleToolCalls(g.tools, g.parallelToolCalls, true), Lit(callEnd)))))
		content := b.Do(Content(Until(callStart)))
		return Sum(gen, reasoning, content, calls, end)
	})
	if includeGrammar {
		p.setGrammar(p.parser, !(hasSchema || hasTools && g.toolChoice == ToolChoiceRequired))
		p.GrammarTriggers = []GrammarTrigger{{TriggerWord, callStart}}
	}
	return p
}

// copyThinking copies the messages with each string reasoning_content
// also as "thinking" (what the LFM2 and GPT-OSS templates read).
func copyThinking(messages ojson.Value, dropContentWithCalls bool) ojson.Value {
	out := ojson.ArrayValue()
	for _, msg := range copyMessages(messages) {
		if rc, ok := msg.Get("reasoning_content"); ok && rc.IsString() {
			msg.Set("thinking", rc)
			if tc, ok := msg.Get("tool_calls"); dropContentWithCalls && ok && tc.IsArray() && tc.Len() > 0 {
				msg.Delete("content")
			}
		}
		out.Append(msg)
	}
	return out
}
