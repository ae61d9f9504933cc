// Port of llama.cpp common/parsers/qwen3-coder.cpp (v0.5.0): Qwen3-Coder's
// XML tool calls, also Nemotron Nano 3's, Qwen3.5's and StepFun-3.5-Flash's.

package chat

import (
	"strings"

	. "github.com/ggload/ggload/chat/internal/peg"
	"github.com/ggload/ggload/grammar"
	"github.com/ggload/ggload/internal/ojson"
)

func qwen3Coder(t *template, g *genParams) *Params {
	const genPrefix = "<|im_start|>assistant\n"
	p := &Params{Format: FormatPEGNative}
	p.Prompt = directApply(t, g, nil, nil, nil)
	p.GenerationPrompt = generationPrompt(t, g, nil, nil, nil)
	reasons := strings.Contains(t.src, "<think>")
	p.SupportsThinking = reasons
	p.PreservedTokens = []string{"<tool_call>", "</tool_call>"}
	coder := !reasons
	if reasons {
		p.ThinkingStartTag = "<think>"
		p.ThinkingEndTags = []string{"\n</think>", "</think>", "<tool_call>"}
		p.PreservedTokens = append(p.PreservedTokens, "<think>", "</think>")
	}
	p.MessageDelimiters = []MessageDelimiter{
		{RoleAssistant, "<|im_start|>assistant"},
		{RoleTool, "<|im_start|>user\n<tool_response>"},
		{RoleTool, "<|im_start|>tool_response"},
		{RoleUser, "<|im_start|>user"},
		{RoleSystem, "<|im_start|>system"},
	}
	hasTools := g.hasTools()
	hasSchema := g.jsonSchema.IsObject() && g.jsonSchema.Len() > 0
	extract := g.reasoningFormat != ReasoningNone
	includeGrammar := hasSchema || hasTools && g.toolChoice != ToolChoiceNone
	if g.hasContinuation() {
		m := &g.continueMsg
		p.GenerationPrompt = genPrefix
		if reasons {
			p.GenerationPrompt += "<think>\n" + m.ReasoningContent
			if g.continuation == ContinueContent {
				p.GenerationPrompt += "\n</think>\n\n"
			}
		}
		if g.continuation == ContinueContent {
			p.GenerationPrompt += renderContent(m)
		}
		p.Prompt += p.GenerationPrompt
	}
	starts := []string{"<tool_call>"}
	if coder {
		foreachFunction(g.tools, func(fn ojson.Value) {
			starts = append(starts, "<function="+FunctionName(fn)+">")
		})
	}
	p.parser = build(func(b *Builder) Expr {
		gen := b.Do(Lit(genPrefix))
		reasoning := b.Do(Eps())
		if reasons && extract {
			reasoning = b.Do(Opt(Sum(S("<think>"), Space(), Reasoning(UntilOneOf("</think>", "<tool_call>")),
				Or(Lit("</think>"), Peek(Lit("<tool_call>"))))))
		}
		if hasSchema {
			return Add(gen, Shl(reasoning, Content(SchemaJSON(JSON(), "response-format", g.jsonSchema, false))))
		}
		if hasTools && g.toolChoice != ToolChoiceNone {
			argClose := b.Do(ToolArgClose(Lit("\n</parameter>\n")))
			argString := b.Do(Rule("xml-arg-string", AC(Add(ToolArgStringValue(Until("\n</parameter>\n")), argClose), "\n</parameter>\n")))
			choice := b.Do(Choice())
			foreachFunction(g.tools, func(fn ojson.Value) {
				name := FunctionName(fn)
				var required, optional []ID
				foreachParameter(fn, func(param grammar.Property, doc *grammar.Document) {
					ruleName := "tool-" + name + "-arg-" + param.Name
					open := b.Do(ToolArgOpen(Sum(S("<parameter="), ToolArgName(Lit(param.Name)), S(">\n"))))
					types := param.Schema.ValueTypes()
					value := b.Do(Eps())
					switch {
					case !types.Has(grammar.TypeString):
						value = b.Do(Add(ToolArgJSONValue(Schema(JSON(), ruleName+"-schema", doc, param.Schema, false)), argClose))
					case types.IsOnly(grammar.TypeString):
						value = argString
					default:
						// the string alternative takes any text, so the grammar
						// keeps the raw string rule; the parse tries JSON first
						jv := b.Do(Choice())
						if types.Has(grammar.TypeObject) {
							jv = b.Do(Or(jv, JSONObject()))
						}
						if types.Has(grammar.TypeArray) {
							jv = b.Do(Or(jv, JSONArray()))
						}
						if types.Has(grammar.TypeNumber) || types.Has(grammar.TypeInteger) {
							jv = b.Do(Or(jv, JSONNumber()))
						}
						if types.Has(grammar.TypeBoolean) {
							jv = b.Do(Or(jv, JSONBool()))
						}
						if types.Has(grammar.TypeNull) {
							jv = b.Do(Or(jv, JSONNull()))
						}
						value = b.Do(Gbnf(Or(Atomic(Add(ToolArgJSONValue(jv), argClose)), argString), "xml-arg-string"))
					}
					r := b.Do(Rule(ruleName, ToolArg(Add(open, value))))
					if param.Required {
						required = append(required, r)
					} else {
						optional = append(optional, r)
					}
				})
				args := b.Do(Permute("tool-"+name+"-args", required))
				if len(optional) > 0 {
					args = b.Do(Add(args, ZeroOrMore(Choice(idExprs(optional)...))))
				}
				fp := b.Do(Call(Sum(ToolOpen(Sum(S("<function="), ToolName(Lit(name)), S(">\n"))), ToolArgs(args),
					ToolClose(Lit("</function>\n")))))
				choice = b.Do(Or(choice, Rule("tool-"+name, fp)))
			})
			minCalls := 0
			if g.toolChoice == ToolChoiceRequired {
				minCalls = 1
			}
			body := b.Do(Sum(choice, S("</tool_call>"), Space()))
			call := b.Do(Rule("tool-call", Add(S("<tool_call>\n"), body)))
			first := call
			if coder {
				first = b.Do(Rule("tool-call-first", Add(Opt(Lit("<tool_call>\n")), body)))
			}
			calls := first
			if g.parallelToolCalls {
				calls = b.Do(Add(first, ZeroOrMore(call)))
			}
			toolCalls := b.Do(TriggerRule("tool-call-root", Rep(calls, minCalls, 1)))
			return Add(gen, Chain(reasoning, Content(UntilOneOf(starts...)), toolCalls))
		}
		return Add(gen, Shl(reasoning, Content(Rest())))
	})
	if includeGrammar {
		p.setGrammar(p.parser, hasTools && g.toolChoice == ToolChoiceAuto)
		if p.GrammarLazy {
			for _, s := range starts {
				p.GrammarTriggers = append(p.GrammarTriggers, GrammarTrigger{TriggerWord, s})
			}
		}
	}
	return p
}

// idExprs is a list of built parsers as expressions.
func idExprs(ids []ID) []Expr {
	es := make([]Expr, len(ids))
	for i, id := range ids {
		es[i] = id
	}
	return es
}
