// Port of llama.cpp common/parsers/deepseek.cpp (v0.5.0): DeepSeek V3.2
// and V4, their DSML tool calls.

package chat

import (
	"sort"
	"strings"

	. "github.com/ggload/ggload/chat/internal/peg"
	"github.com/ggload/ggload/grammar"
	"github.com/ggload/ggload/internal/ojson"
)

// deepseekV4SortToolResults orders each run of tool results as the
// preceding assistant message ordered its calls (matched by id), as the
// V4 reference renders them.
func deepseekV4SortToolResults(messages ojson.Value) ojson.Value {
	adjusted := ojson.ArrayValue(copyMessages(messages)...)
	ms := adjusted.Elems()
	order := map[string]int{}
	for i := 0; i < len(ms); {
		role := valueString(ms[i], "role", "")
		if tc, ok := ms[i].Get("tool_calls"); role == "assistant" && ok && tc.IsArray() && tc.Len() > 0 {
			order = map[string]int{}
			for idx, c := range tc.Elems() {
				if id := valueString(c, "id", ""); id != "" {
					order[id] = idx
				}
			}
			i++
			continue
		}
		if role != "user" && role != "tool" {
			i++
			continue
		}
		var pos []int
		end := i
		for ; end < len(ms); end++ {
			r := valueString(ms[end], "role", "")
			if r == "tool" {
				pos = append(pos, end)
			} else if r != "user" {
				break
			}
		}
		if len(pos) > 1 && len(order) > 0 {
			results := make([]ojson.Value, len(pos))
			for k, p := range pos {
				results[k] = ms[p]
			}
			rank := func(m ojson.Value) int { return order[valueString(m, "tool_call_id", "")] }
			sort.SliceStable(results, func(a, b int) bool { return rank(results[a]) < rank(results[b]) })
			for k, p := range pos {
				ms[p] = results[k]
			}
		}
		i = end
	}
	return adjusted
}

func deepseekV32(t *template, g *genParams) *Params {
	// V4 names its block "tool_calls", orders tool results by call, and
	// closes a thinking-off generation prompt with a bare </think>
	v4 := !strings.Contains(t.src, "function_calls")
	var adjusted *ojson.Value
	if v4 {
		a := deepseekV4SortToolResults(g.messages)
		adjusted = &a
	}
	hasTools := g.hasTools()
	hasSchema := g.jsonSchema.IsObject()
	extract := g.reasoningFormat != ReasoningNone
	includeGrammar := hasSchema || hasTools && g.toolChoice != ToolChoiceNone
	var additional *ojson.Value
	if v4 && hasSchema {
		a := obj("response_format", g.jsonSchema)
		additional = &a
	}
	const (
		dsml       = "｜DSML｜"
		thinkStart = "<think>"
		thinkEnd   = "</think>"
		genPrompt  = "<｜Assistant｜>"
		separator  = "\n\n"
	)
	block := "function_calls"
	if v4 {
		block = "tool_calls"
	}
	fcStart, fcEnd := "<"+dsml+block+">", "</"+dsml+block+">"
	invokeStart, invokeEnd := "<"+dsml+"invoke", "</"+dsml+"invoke>"
	paramStart, paramEnd := "<"+dsml+"parameter", "</"+dsml+"parameter>"
	p := &Params{Format: FormatPEGNative, SupportsThinking: true, ThinkingStartTag: thinkStart, ThinkingEndTags: []string{thinkEnd, fcStart}}
	p.MessageDelimiters = []MessageDelimiter{{RoleAssistant, genPrompt}, {RoleUser, "<｜User｜>"}}
	p.Prompt = directApply(t, g, adjusted, nil, additional)
	p.GenerationPrompt = generationPrompt(t, g, adjusted, nil, additional)
	p.PreservedTokens = []string{dsml, thinkStart, thinkEnd}
	if g.hasContinuation() {
		m := &g.continueMsg
		if v4 && m.ReasoningContent == "" {
			p.GenerationPrompt = genPrompt + thinkEnd
			if g.continuation == ContinueContent {
				p.GenerationPrompt += renderContent(m)
			}
		} else {
			p.GenerationPrompt = genPrompt + thinkStart + m.ReasoningContent
			if g.continuation == ContinueContent {
				p.GenerationPrompt += thinkEnd + renderContent(m)
			}
		}
		p.Prompt += p.GenerationPrompt
	}
	requireTools := g.toolChoice == ToolChoiceRequired
	hasCalls := hasTools && g.toolChoice != ToolChoiceNone
	p.parser = build(func(b *Builder) Expr {
		gen := b.Do(Lit(genPrompt))
		end := b.Do(End())
		choice := b.Do(Choice())
		if hasCalls {
			foreachFunction(g.tools, func(fn ojson.Value) {
				name := FunctionName(fn)
				var required, optional []ID
				foreachParameter(fn, func(param grammar.Property, doc *grammar.Document) {
					isString := param.Schema.MayBeString()
					strAttr := "false"
					if isString {
						strAttr = "true"
					}
					var value Expr
					if isString {
						value = ToolArgStringValue(Until(paramEnd))
					} else {
						value = ToolArgJSONValue(Schema(JSON(), "tool-"+name+"-arg-"+param.Name+"-schema", doc, param.Schema, false))
					}
					arg := b.Do(ToolArg(Sum(ToolArgOpen(Sum(Lit(paramStart+" name=\""), ToolArgName(Lit(param.Name)),
						Lit("\" string=\""+strAttr+"\">"))), value, ToolArgClose(Lit(paramEnd)))))
					named := b.Do(Rule("tool-"+name+"-arg-"+param.Name, arg))
					if param.Required {
						required = append(required, named)
					} else {
						optional = append(optional, named)
					}
				})
				seq := requiredThenOptional(b, required, optional)
				fp := b.Do(Call(Sum(ToolOpen(Sum(Lit(invokeStart+" name=\""), ToolName(Lit(name)), Lit("\">\n"))),
					seq, Space(), ToolClose(Lit(invokeEnd)))))
				choice = b.Do(Or(choice, Rule("tool-"+name, fp)))
			})
		}
		calls := b.Do(Eps())
		if g.parallelToolCalls {
			calls = b.Do(TriggerRule("tool-call", Sum(Lit(fcStart), Space(), choice, ZeroOrMore(Add(Space(), choice)), Space(), Lit(fcEnd))))
		} else {
			calls = b.Do(TriggerRule("tool-call", Sum(Lit(fcStart), Space(), choice, Space(), Lit(fcEnd))))
		}
		reasoning := b.Do(Eps())
		reasoningWithCalls := b.Do(Eps())
		obligatory := calls
		allowReasoningWithCalls := false
		if !requireTools {
			calls = b.Do(Opt(calls))
		}
		switch {
		case extract && g.enableThinking:
			reasoning = b.Do(Opt(Sum(S(thinkStart), Reasoning(Until(thinkEnd)), S(thinkEnd))))
			reasoningWithCalls = b.Do(Sum(S(thinkStart), Reasoning(UntilOneOf(separator+fcStart, fcStart, thinkEnd)), Space(), obligatory))
			allowReasoningWithCalls = true
		case extract:
			// the thinking-off generation prompt's empty pair (V3.2) or
			// bare </think> (V4) is still consumed
			if v4 {
				reasoning = b.Do(Opt(Lit(thinkEnd)))
			} else {
				reasoning = b.Do(Opt(Sum(Lit(thinkStart), Until(thinkEnd), Lit(thinkEnd))))
			}
		}
		if hasSchema {
			rf := b.Do(Rule("response-format", Sum(Lit("```json"), Space(),
				Content(SchemaJSON(JSON(), "response-format-schema", g.jsonSchema, false)), Space(), Lit("```"))))
			return Sum(gen, reasoning, rf, end)
		}
		if !hasCalls {
			return Sum(gen, reasoning, Content(Rest()), end)
		}
		before := b.Do(Sum(Not(Lit(thinkStart)), Content(UntilOneOf(separator+fcStart, fcStart)), Space()))
		if allowReasoningWithCalls {
			return Sum(gen, Or(reasoningWithCalls, Sum(reasoning, before, calls)), end)
		}
		return Sum(gen, reasoning, before, calls, end)
	})
	if includeGrammar {
		p.setGrammar(p.parser, hasTools && !requireTools)
		p.GrammarTriggers = []GrammarTrigger{{TriggerWord, fcStart}}
	}
	return p
}
