// Port of llama.cpp common/parsers/ministral3.cpp (v0.5.0): Ministral 3
// and Magistral Large 3.

package chat

import (
	. "github.com/ggload/ggload/chat/internal/peg"
	"github.com/ggload/ggload/internal/ojson"
)

func ministral3(t *template, g *genParams) *Params {
	// system and assistant messages as typed blocks: thinking, then text
	adjusted := ojson.ArrayValue()
	for _, msg := range elems(g.messages) {
		role := ""
		if r, ok := msg.Get("role"); ok && r.IsString() {
			role = r.Str()
		}
		if role != "system" && role != "assistant" {
			adjusted.Append(msg)
			continue
		}
		content := ojson.ArrayValue()
		if rc, ok := msg.Get("reasoning_content"); ok && rc.IsString() {
			content.Append(obj("type", "thinking", "thinking", rc.Str()))
		}
		if c, ok := msg.Get("content"); ok {
			if c.IsString() {
				content.Append(obj("type", "text", "text", c.Str()))
			} else if c.IsArray() {
				content.Append(c.Clone().Elems()...) // common_json::insert appends each block
			}
		}
		m := msg.Clone()
		m.Set("content", content)
		m.Delete("reasoning_content")
		adjusted.Append(m)
	}
	hasTools := g.hasTools()
	hasSchema := g.jsonSchema.IsObject() && g.jsonSchema.Len() > 0
	extract := g.reasoningFormat != ReasoningNone
	includeGrammar := true
	p := &Params{Format: FormatPEGNative, SupportsThinking: true, ThinkingStartTag: "[THINK]", ThinkingEndTags: []string{"[/THINK]"}}
	p.Prompt = directApply(t, g, &adjusted, nil, nil)
	p.GenerationPrompt = generationPrompt(t, g, &adjusted, nil, nil)
	p.PreservedTokens = []string{"[THINK]", "[/THINK]", "[TOOL_CALLS]", "[ARGS]"}
	if g.hasContinuation() {
		m := &g.continueMsg
		p.GenerationPrompt = "[THINK]" + m.ReasoningContent
		if g.continuation == ContinueContent {
			p.GenerationPrompt += "[/THINK]" + renderContent(m)
		}
		p.Prompt += p.GenerationPrompt
	}
	p.parser = build(func(b *Builder) Expr {
		gen := b.Do(Eps())
		var reasoning ID
		if extract {
			reasoning = b.Do(Opt(Sum(S("[THINK]"), Reasoning(Until("[/THINK]")), S("[/THINK]"))))
		} else {
			reasoning = b.Do(Eps())
		}
		if hasSchema {
			return Add(gen, Chain(Shl(reasoning, S("```json")), Content(SchemaJSON(JSON(), "response-format", g.jsonSchema, false)), S("```")))
		}
		if hasTools && g.toolChoice != ToolChoiceNone {
			choice := b.Do(Choice())
			foreachFunction(g.tools, func(fn ojson.Value) {
				name := FunctionName(fn)
				schema := ToolParameters(fn)
				choice = b.Do(Or(choice, Rule("tool-"+name, Add(ToolOpen(Add(ToolName(Lit(name)), S("[ARGS]"))),
					ToolArgs(SchemaJSON(JSON(), "tool-"+name+"-schema", schema, false))))))
			})
			minCalls, maxCalls := 0, 1
			if g.toolChoice == ToolChoiceRequired {
				minCalls = 1
			}
			if g.parallelToolCalls {
				maxCalls = -1
			}
			calls := b.Do(TriggerRule("tool-call", Rep(Add(S("[TOOL_CALLS]"), choice), minCalls, maxCalls)))
			return Add(gen, Chain(reasoning, Content(Until("[TOOL_CALLS]")), calls))
		}
		includeGrammar = false
		return Add(gen, Shl(reasoning, Content(Rest())))
	})
	if includeGrammar {
		p.setGrammar(p.parser, hasTools && g.toolChoice == ToolChoiceAuto)
		p.GrammarTriggers = []GrammarTrigger{{TriggerWord, "[TOOL_CALLS]"}}
	}
	return p
}
