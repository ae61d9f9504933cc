// Port of llama.cpp common/parsers/minimax-m3.cpp (v0.5.0): MiniMax-M3,
// its namespaced XML tool calls with values expanded as XML.

package chat

import (
	"strconv"

	. "github.com/ggload/ggload/chat/internal/peg"
	"github.com/ggload/ggload/grammar"
	"github.com/ggload/ggload/internal/ojson"
)

// The MiniMax-M3 mapper's tags.
const (
	tagArgObject = "tool-arg-object"
	tagArgArray  = "tool-arg-array"
	tagArgItem   = "tool-arg-item"
)

func minimaxM3(t *template, g *genParams) *Params {
	const (
		ns         = "]<]minimax[>["
		thinkStart = "<mm:think>"
		thinkEnd   = "</mm:think>"
		fcStart    = ns + "<tool_call>"
		fcEnd      = ns + "</tool_call>"
		invokeEnd  = ns + "</invoke>"
	)
	p := &Params{Format: FormatPEGMinimaxM3, SupportsThinking: true, ThinkingStartTag: thinkStart, ThinkingEndTags: []string{thinkEnd}}
	p.Prompt = directApply(t, g, nil, nil, nil)
	p.GenerationPrompt = generationPrompt(t, g, nil, nil, nil)
	p.PreservedTokens = []string{ns, "<tool_call>", "</tool_call>", thinkStart, thinkEnd}
	p.MessageDelimiters = []MessageDelimiter{
		{RoleAssistant, "]~b]ai"},
		{RoleUser, "]~b]user"},
		{RoleTool, "]~b]tool"},
		{RoleSystem, "]~b]developer"},
		{RoleSystem, "]~b]system"},
	}
	hasTools := g.hasTools()
	hasSchema := g.jsonSchema.IsObject()
	extract := g.reasoningFormat != ReasoningNone
	includeGrammar := hasSchema || hasTools && g.toolChoice != ToolChoiceNone
	genPrompt := p.GenerationPrompt
	if g.hasContinuation() {
		m := &g.continueMsg
		p.GenerationPrompt = genPrompt + thinkStart + m.ReasoningContent
		if g.continuation == ContinueContent {
			p.GenerationPrompt += thinkEnd + renderContent(m)
		}
		p.Prompt += p.GenerationPrompt
	}
	p.parser = build(func(b *Builder) Expr {
		gen := b.Do(Prefix(genPrompt, thinkStart))
		end := b.Do(End())
		reasoning := b.Do(Eps())
		if extract {
			var block ID
			if g.enableThinking {
				block = b.Do(Sum(Lit(thinkStart), Space(), AC(Add(Reasoning(Until(thinkEnd)), Lit(thinkEnd)), thinkEnd)))
			} else {
				block = b.Do(Add(Lit(thinkStart), AC(Add(Until(thinkEnd), Lit(thinkEnd)), thinkEnd)))
			}
			// a turn without reasoning starts with a bare </mm:think>
			reasoning = b.Do(Opt(Choice(block, Lit(thinkEnd))))
		}
		if hasSchema {
			rf := b.Do(Rule("response-format", Sum(Lit("```json"), Space(),
				Content(SchemaJSON(JSON(), "response-format-schema", g.jsonSchema, false)), Space(), Lit("```"))))
			return Sum(gen, reasoning, rf, end)
		}
		if !hasTools || g.toolChoice == ToolChoiceNone {
			return Sum(gen, reasoning, Content(Rest()), end)
		}
		choice := b.Do(Choice())
		foreachFunction(g.tools, func(fn ojson.Value) {
			name := FunctionName(fn)
			doc, err := grammar.ParseSchema(ToolParameters(fn))
			if err != nil {
				Throw(err)
			}
			var valueOf func(s *grammar.Schema, ruleName, close string) ID
			var membersOf func(s *grammar.Schema, prefix string) ID
			elementOf := func(tag string, s *grammar.Schema, ruleName string) ID {
				close := ns + "</" + tag + ">"
				v := valueOf(s, ruleName, close)
				open := b.Do(ToolArgOpen(Sum(Lit(ns+"<"), ToolArgName(Lit(tag)), Lit(">"))))
				return b.Do(Rule(ruleName, ToolArg(Add(open, v))))
			}
			valueOf = func(s *grammar.Schema, ruleName, close string) ID {
				closeTag := b.Do(ToolArgClose(Lit(close)))
				if s.MayBeString() {
					return b.Do(AC(Add(ToolArgStringValue(Until(close)), closeTag), close))
				}
				switch s.Kind {
				case grammar.KindAnyOf:
					var choices []ID
					for i, alt := range s.Children {
						choices = append(choices, valueOf(alt, ruleName+"-"+strconv.Itoa(i), close))
					}
					return b.Do(Choice(idExprs(choices)...))
				case grammar.KindObject:
					if len(s.Properties) > 0 {
						return b.Do(Sum(Tag(tagArgObject, Lazy(func() ID { return membersOf(s, ruleName) })), Space(), closeTag))
					}
				case grammar.KindArray:
					itemClose := ns + "</item>"
					iv := valueOf(s.Items, ruleName+"-item", itemClose)
					item := b.Do(Rule(ruleName+"-item", Tag(tagArgItem, Add(Lit(ns+"<item>"), iv))))
					return b.Do(Sum(Tag(tagArgArray, Rep(Add(Space(), item), 0, -1)), Space(), closeTag))
				}
				return b.Do(Add(ToolArgJSONValue(Schema(JSON(), ruleName+"-schema", doc, s, false)), closeTag))
			}
			membersOf = func(s *grammar.Schema, prefix string) ID {
				var required, optional []ID
				for _, prop := range s.Properties {
					el := elementOf(prop.Name, prop.Schema, prefix+"-"+prop.Name)
					if prop.Required {
						required = append(required, el)
					} else {
						optional = append(optional, el)
					}
				}
				members := requiredThenOptional(b, required, optional)
				return members
			}
			body := b.Do(Eps())
			if doc.Root.Kind == grammar.KindObject {
				body = membersOf(doc.Root, "tool-"+name+"-arg")
			}
			fp := b.Do(Call(Sum(ToolOpen(Sum(Lit(ns+"<invoke name=\""), ToolName(Lit(name)), Lit("\">"))),
				Space(), body, Space(), ToolClose(Lit(invokeEnd)))))
			choice = b.Do(Or(choice, Rule("tool-"+name, fp)))
		})
		calls := b.Do(Eps())
		if g.parallelToolCalls {
			calls = b.Do(TriggerRule("tool-call", Sum(Lit(fcStart), Space(), choice, ZeroOrMore(Add(Space(), choice)), Space(), Lit(fcEnd))))
		} else {
			calls = b.Do(TriggerRule("tool-call", Sum(Lit(fcStart), Space(), choice, Space(), Lit(fcEnd))))
		}
		if g.toolChoice != ToolChoiceRequired {
			calls = b.Do(Opt(calls))
		}
		before := b.Do(Content(Until(fcStart)))
		return Sum(gen, reasoning, before, calls, end)
	})
	if includeGrammar {
		p.setGrammar(p.parser, !(hasSchema || hasTools && g.toolChoice == ToolChoiceRequired))
		p.GrammarTriggers = []GrammarTrigger{{TriggerWord, fcStart}}
	}
	return p
}
