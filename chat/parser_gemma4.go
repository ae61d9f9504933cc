// Port of llama.cpp common/parsers/gemma4.cpp (v0.5.0): Gemma 4, its
// channels and call:name{...} tool calls.

package chat

import (
	"strings"

	. "github.com/ggload/ggload/chat/internal/peg"
	"github.com/ggload/ggload/internal/ojson"
)

// convertToolResponsesGemma4 is workaround::convert_tool_responses_gemma4:
// an assistant's tool calls, the tool results after them and the
// assistant's answer, made one assistant message with "tool_responses"
// (the older Gemma 4 templates have no tool role).
func convertToolResponsesGemma4(messages ojson.Value) ojson.Value {
	ms := messages.Elems()
	out := ojson.ArrayValue()
	hasCalls := func(m ojson.Value) bool {
		tc, ok := m.Get("tool_calls")
		return ok && tc.IsArray() && tc.Len() > 0
	}
	hasContent := func(m ojson.Value) bool {
		c, ok := m.Get("content")
		if !ok || c.IsNull() {
			return false
		}
		return c.IsString() && c.Str() != "" || c.IsArray() && c.Len() > 0
	}
	for i := 0; i < len(ms); {
		msg := ms[i]
		if valueString(msg, "role", "") != "assistant" || !hasCalls(msg) {
			out.Append(msg)
			i++
			continue
		}
		var content, reasoning ojson.Value
		calls, responses := ojson.ArrayValue(), ojson.ArrayValue()
		if rc, ok := msg.Get("reasoning_content"); ok && rc.IsString() {
			reasoning = rc
		}
		calls.Append(elems(msg.At("tool_calls"))...)
		i++
		for i < len(ms) && valueString(ms[i], "role", "") == "tool" {
			cur := ms[i]
			var response ojson.Value
			if c, ok := cur.Get("content"); ok {
				response = c
				if c.IsString() {
					if v, err := ojson.ParseString(c.Str()); err == nil {
						response = v
					}
				}
			}
			name := ""
			if idx := responses.Len(); idx < calls.Len() {
				if tc := calls.Index(idx); contains(tc, "function") {
					name = valueString(tc.At("function"), "name", "")
				}
			}
			if name == "" {
				name = valueString(cur, "tool_call_id", "")
			}
			responses.Append(obj("name", name, "response", response))
			i++
		}
		if i < len(ms) && valueString(ms[i], "role", "") == "assistant" {
			if next := ms[i]; !hasCalls(next) && hasContent(next) {
				content = next.At("content")
				i++
			}
		}
		m := obj("role", "assistant", "tool_calls", calls)
		if responses.Len() > 0 {
			m.Set("tool_responses", responses)
		}
		if !content.IsNull() {
			m.Set("content", content)
		}
		if !reasoning.IsNull() {
			m.Set("reasoning_content", reasoning)
		}
		out.Append(m)
	}
	return out
}

func gemma4(t *template, g *genParams) *Params {
	p := &Params{Format: FormatPEGGemma4, SupportsThinking: true, ThinkingStartTag: "<|channel>thought", ThinkingEndTags: []string{"<channel|>"}}
	p.Prompt = directApply(t, g, nil, nil, nil)
	p.GenerationPrompt = generationPrompt(t, g, nil, nil, nil)
	if g.addGenPrompt && strings.HasSuffix(p.Prompt, "<turn|>\n") {
		// after content and a tool call the template opens no turn
		p.GenerationPrompt = "<|turn>model\n"
		p.Prompt += p.GenerationPrompt
	}
	p.MessageDelimiters = []MessageDelimiter{{RoleUser, "<|turn>user"}, {RoleAssistant, "<|turn>model"}}
	p.PreservedTokens = []string{"<|channel>", "<channel|>", "<|tool_call>", "<tool_call|>", "<|turn>"}
	if g.hasContinuation() {
		m := &g.continueMsg
		p.GenerationPrompt = ""
		if strings.HasSuffix(p.Prompt, "<turn|>\n") {
			p.GenerationPrompt = "<|turn>model\n"
		}
		p.GenerationPrompt += "<|channel>thought\n" + m.ReasoningContent
		if g.continuation == ContinueContent {
			p.GenerationPrompt += "<channel|>" + renderContent(m)
		}
		p.Prompt += p.GenerationPrompt
	}
	hasTools := g.hasTools()
	hasSchema := g.jsonSchema.IsObject()
	includeGrammar := hasSchema || hasTools && g.toolChoice != ToolChoiceNone
	extract := g.reasoningFormat != ReasoningNone
	p.parser = build(func(b *Builder) Expr {
		start := b.Do(Rule("start", Opt(Lit("<|turn>model\n"))))
		if extract {
			b.Do(Rule("thought", Sum(Lit("<|channel>thought"), Space(), Reasoning(Until("<channel|>")), Lit("<channel|>"))))
		} else {
			b.Do(Rule("thought", Content(Sum(Lit("<|channel>thought"), Space(), Until("<channel|>"), Lit("<channel|>")))))
		}
		emptyChannels := b.Do(Gbnf(ZeroOrMore(Add(Lit("<|channel>"), Not(Lit("thought")))), ""))
		thought := b.Do(Or(Sum(Peek(Lit("<|channel>")), emptyChannels, Ref("thought")), Not(Lit("<|channel>"))))
		if hasSchema {
			rf := b.Do(Chain(Lit("```json"), Content(SchemaJSON(JSON(), "response-format-schema", g.jsonSchema, false)), Lit("```")))
			return Sum(start, Opt(thought), rf)
		}
		if hasTools && g.toolChoice != ToolChoiceNone {
			b.Do(Rule("gemma4-string-content", Until(`<|"|>`)))
			b.Do(Rule("gemma4-string", Sum(Lit(`<|"|>`), Ref("gemma4-string-content"), Lit(`<|"|>`))))
			b.Do(Rule("gemma4-bool", JSONBool()))
			b.Do(Rule("gemma4-null", JSONNull()))
			b.Do(Rule("gemma4-number", JSONNumber()))
			b.Do(Rule("gemma4-dict-key", Add(Rule("gemma4-dict-key-name", Chars("[^:}]", 1, -1)), Lit(":"))))
			b.Do(Rule("gemma4-dict-kv", Sum(Ref("gemma4-dict-key"), Space(), Ref("gemma4-value"))))
			b.Do(RuleFn("gemma4-dict", func() Expr {
				ws := b.Do(Space())
				member := b.Do(Ref("gemma4-dict-kv"))
				members := b.Do(Seq(member, ZeroOrMore(Seq(Lit(","), ws, member))))
				return Seq(Lit("{"), ws, Choice(Lit("}"), Seq(members, ws, Lit("}"))))
			}))
			b.Do(RuleFn("gemma4-array", func() Expr {
				ws := b.Do(Space())
				value := b.Do(Ref("gemma4-value"))
				elems := b.Do(Seq(value, ZeroOrMore(Seq(Lit(","), ws, value))))
				return Seq(Lit("["), ws, Choice(Lit("]"), Seq(elems, ws, Lit("]"))))
			}))
			b.Do(RuleFn("gemma4-value", func() Expr {
				return Choice(Ref("gemma4-string"), Ref("gemma4-dict"), Ref("gemma4-array"),
					Ref("gemma4-number"), Ref("gemma4-bool"), Ref("gemma4-null"))
			}))
			choice := b.Do(Choice())
			foreachFunction(g.tools, func(fn ojson.Value) {
				name := FunctionName(fn)
				choice = b.Do(Or(choice, Rule("tool-"+name, Call(Seq(
					ToolOpen(Add(ToolName(Lit(name)), Peek(Lit("{")))),
					ToolArgs(Ref("gemma4-dict")))))))
			})
			minCalls, maxCalls := 0, 1
			if g.toolChoice == ToolChoiceRequired {
				minCalls = 1
			}
			if g.parallelToolCalls {
				maxCalls = -1
			}
			call := b.Do(TriggerRule("tool-call", Rep(Sum(S("<|tool_call>call:"), choice, S("<tool_call|>")), minCalls, maxCalls)))
			if g.toolChoice == ToolChoiceRequired {
				return Sum(start, thought, call)
			}
			scan := b.Do(Rule("scan-to-toolcall", Until("<|tool_call>")))
			content := b.Do(Rule("content", Content(UntilOneOf("<|channel>", "<channel|>", "<|tool_call>"))))
			message := b.Do(Rule("message", Add(thought, content)))
			return Sum(start, ZeroOrMore(message), scan, call)
		}
		// Gemma 4 may end its content with an empty thought, or a lone
		// <channel|>: the complete blocks are consumed, a lone closer ends
		content := b.Do(Rule("content", Content(UntilOneOf("<|channel>", "<channel|>"))))
		message := b.Do(Rule("message", Add(thought, content)))
		return Add(start, OneOrMore(message))
	})
	if includeGrammar {
		p.setGrammar(p.parser, !(hasSchema || hasTools && g.toolChoice == ToolChoiceRequired))
		p.GrammarTriggers = []GrammarTrigger{{TriggerWord, "<|tool_call>"}}
	}
	return p
}
