// Port of llama.cpp common/parsers/gigachat-v3.cpp (v0.5.0): GigaChat 3.

package chat

import (
	. "github.com/ggload/ggload/chat/internal/peg"
)

func gigaChatV3(t *template, g *genParams) *Params {
	const callPrefix = "<|message_sep|>\n\nfunction call<|role_sep|>\n"
	p := &Params{Format: FormatPEGNative}
	p.Prompt = directApply(t, g, nil, nil, nil)
	p.GenerationPrompt = generationPrompt(t, g, nil, nil, nil)
	p.PreservedTokens = []string{"<|message_sep|>\n\n", "<|role_sep|>\n"}
	if g.hasContinuation() {
		p.GenerationPrompt = "assistant<|role_sep|>\n" + renderContent(&g.continueMsg)
		p.Prompt += p.GenerationPrompt
	}
	hasTools := g.hasTools()
	includeGrammar := hasTools && g.toolChoice != ToolChoiceNone
	p.parser = build(func(b *Builder) Expr {
		ret := b.Do(Eps())
		if hasTools && g.toolChoice != ToolChoiceNone {
			choice := b.Do(Choice())
			for _, tool := range elems(g.tools) {
				function := at(tool, "function")
				name := FunctionName(function)
				schema := ToolParameters(function)
				toolName := b.Do(JSONMember("name", Sum(S(`"`), ToolName(Lit(name)), S(`"`))))
				toolArgs := b.Do(JSONMember("arguments", ToolArgs(SchemaJSON(JSON(), "tool-"+name+"-schema", schema, false))))
				open := b.Do(ToolOpen(Shl(Lit("{"), toolName)))
				choice = b.Do(Or(choice, Rule("tool-"+name, Chain(open, S(","), toolArgs, S("}")))))
			}
			minCalls := 0
			if g.toolChoice == ToolChoiceRequired {
				minCalls = 1
			}
			call := b.Do(Rule("tool-call", Add(Lit(callPrefix), choice)))
			calls := b.Do(TriggerRule("tool-call-root", Rep(call, minCalls, 1)))
			ret = b.Do(Shl(Content(Until("<|message_sep|>\n\n")), calls))
		} else {
			includeGrammar = false
			ret = b.Do(Content(Rest()))
		}
		return Add(Lit("assistant<|role_sep|>\n"), ret)
	})
	if includeGrammar {
		p.setGrammar(p.parser, hasTools && g.toolChoice == ToolChoiceAuto)
		p.GrammarTriggers = []GrammarTrigger{{TriggerWord, callPrefix}}
	}
	return p
}
