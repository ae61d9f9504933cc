// Port of llama.cpp common/parsers/ling3.cpp (v0.5.0): Ling 3.0 (Bailing
// V3), its <role>X</role> sections and <arg_key>/<arg_value> tool calls.

package chat

import (
	"strings"

	. "github.com/ggload/ggload/chat/internal/peg"
	"github.com/ggload/ggload/grammar"
	"github.com/ggload/ggload/internal/ojson"
)

func ling3(t *template, g *genParams) *Params {
	const (
		role       = "<role>ASSISTANT</role>"
		thinkStart = "<think>"
		thinkEnd   = "</think>"
		callStart  = "<tool_call>"
		callEnd    = "</tool_call>"
		argKey     = "<arg_key>"
		argKeyEnd  = "</arg_key>"
		argVal     = "<arg_value>"
		roleEnd    = "<|role_end|>"
		argValEnd  = "</arg_value>"
	)
	p := &Params{Format: FormatPEGNative, SupportsThinking: true}
	p.Prompt = directApply(t, g, nil, nil, nil)
	p.GenerationPrompt = generationPrompt(t, g, nil, nil, nil)
	p.PreservedTokens = []string{thinkStart, thinkEnd, callStart, callEnd, argKey, argKeyEnd, argVal, argValEnd, roleEnd}
	p.ThinkingStartTag = thinkStart
	p.ThinkingEndTags = []string{thinkEnd, callStart}
	p.MessageDelimiters = []MessageDelimiter{
		{RoleAssistant, "<role>ASSISTANT</role>"},
		{RoleUser, "<role>HUMAN</role>"},
		{RoleTool, "<role>OBSERVATION</role>"},
		{RoleSystem, "<role>SYSTEM</role>"},
	}
	p.AdditionalStops = []string{roleEnd}
	if g.hasContinuation() {
		m := &g.continueMsg
		p.GenerationPrompt = role + "\n" + thinkStart + m.ReasoningContent
		if g.continuation == ContinueContent {
			p.GenerationPrompt += thinkEnd + renderContent(m)
		}
		p.Prompt += p.GenerationPrompt
	}
	thinkOpen := false
	if g.hasContinuation() {
		thinkOpen = g.continuation != ContinueContent
	} else {
		lastOpen, lastClose := strings.LastIndex(p.GenerationPrompt, thinkStart), strings.LastIndex(p.GenerationPrompt, thinkEnd)
		thinkOpen = lastOpen >= 0 && (lastClose < 0 || lastOpen > lastClose)
	}
	hasTools := g.hasTools()
	extract := g.reasoningFormat != ReasoningNone
	includeGrammar := hasTools && g.toolChoice != ToolChoiceNone
	p.parser = build(func(b *Builder) Expr {
		end := b.Do(End())
		opener := b.Do(Opt(Add(Lit(role), Opt(Space()))))
		var bodyEnd ID
		if thinkOpen {
			bodyEnd = b.Do(UntilOneOf(thinkEnd, callStart))
		} else {
			bodyEnd = b.Do(UntilOneOf(thinkEnd))
		}
		var body ID
		if extract {
			body = b.Do(Reasoning(bodyEnd))
		} else {
			body = b.Do(Content(bodyEnd))
		}
		reasoning := b.Do(Opt(Sum(Opt(Lit(thinkStart)), body, Opt(Lit(thinkEnd)))))
		content := b.Do(Opt(Content(UntilOneOf(callStart))))
		tail := b.Do(Add(Opt(Content(Until(roleEnd))), Opt(Lit(roleEnd))))
		if !hasTools || g.toolChoice == ToolChoiceNone {
			return Sum(opener, reasoning, tail, end)
		}
		choices := b.Do(Choice())
		argClose := b.Do(ToolArgClose(Lit(argValEnd)))
		argString := b.Do(Rule("ling3-arg-string", Add(ToolArgStringValue(Until(argValEnd)), argClose)))
		foreachFunction(g.tools, func(fn ojson.Value) {
			name := FunctionName(fn)
			var required, optional []ID
			foreachParameter(fn, func(param grammar.Property, doc *grammar.Document) {
				ruleName := "ling3-arg-" + name + "-" + param.Name
				types := param.Schema.ValueTypes()
				value := b.Do(Eps())
				switch {
				case !types.Has(grammar.TypeString):
					value = b.Do(Add(ToolArgJSONValue(Schema(JSON(), ruleName+"-schema", doc, param.Schema, false)), argClose))
				case types.IsOnly(grammar.TypeString):
					value = argString
				default:
					value = b.Do(Gbnf(Or(Atomic(Add(ToolArgJSONValue(Schema(JSON(), ruleName+"-schema", doc, param.Schema, false)), argClose)), argString),
						"ling3-arg-string"))
				}
				arg := b.Do(Rule(ruleName, Add(Opt(Space()),
					ToolArg(Sum(ToolArgOpen(Sum(Lit(argKey), ToolArgName(Lit(param.Name)), Lit(argKeyEnd))),
						Opt(Space()), Lit(argVal), value)))))
				if param.Required {
					required = append(required, arg)
				} else {
					optional = append(optional, arg)
				}
			})
			args := b.Do(Permute("ling3-"+name+"-args", required))
			if len(optional) > 0 {
				args = b.Do(Add(args, ZeroOrMore(Choice(idExprs(optional)...))))
			}
			call := b.Do(Call(Sum(ToolOpen(Sum(Lit(callStart), ToolName(Lit(name)), Opt(Space()))), ToolArgs(args),
				ToolClose(Add(Opt(Space()), Lit(callEnd))))))
			choices = b.Do(Or(choices, Rule("ling3-tool-"+name, call)))
		})
		calls := choices
		if g.parallelToolCalls {
			calls = b.Do(Add(choices, ZeroOrMore(Add(Space(), choices))))
		}
		section := b.Do(TriggerRule("ling3-tool-call", Sum(calls, Space(), Opt(Content(Until(roleEnd))), Opt(Lit(roleEnd)))))
		tools := section
		if g.toolChoice != ToolChoiceRequired {
			tools = b.Do(Opt(section))
		}
		return Sum(opener, reasoning, content, tools, tail, end)
	})
	if includeGrammar {
		p.setGrammar(p.parser, g.toolChoice != ToolChoiceRequired)
		p.GrammarTriggers = []GrammarTrigger{{TriggerWord, callStart}}
	}
	return p
}
