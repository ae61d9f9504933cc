// Port of llama.cpp common/parsers/functionary-v3-2.cpp (v0.5.0):
// Functionary v3.2's ">>>recipient\n" messages.

package chat

import (
	. "github.com/ggload/ggload/chat/internal/peg"
	"github.com/ggload/ggload/internal/ojson"
)

func functionaryV32(t *template, g *genParams) *Params {
	p := &Params{Format: FormatPEGNative}
	p.Prompt = directApply(t, g, nil, nil, nil)
	p.GenerationPrompt = generationPrompt(t, g, nil, nil, nil)
	p.PreservedTokens = []string{">>>all"}
	hasTools := g.hasTools()
	includeGrammar := hasTools && g.toolChoice != ToolChoiceNone
	if g.hasContinuation() {
		p.GenerationPrompt = "<|start_header_id|>assistant<|end_header_id|>\n\n>>>all\n" + renderContent(&g.continueMsg)
		p.Prompt += p.GenerationPrompt
	}
	p.parser = build(func(b *Builder) Expr {
		untilTool := b.Do(Add(Lit("all\n"), Content(Until(">>>"))))
		untilEnd := b.Do(Add(Lit("all\n"), Content(Rest())))
		gen := b.Do(Lit("<|start_header_id|>assistant<|end_header_id|>\n\n>>>"))
		if !hasTools || g.toolChoice == ToolChoiceNone {
			return Sum(gen, untilEnd, End())
		}
		choice := b.Do(Choice())
		foreachFunction(g.tools, func(fn ojson.Value) {
			name := FunctionName(fn)
			schema := ToolParameters(fn)
			tp := b.Do(Call(Add(ToolOpen(Add(ToolName(Lit(name)), Lit("\n"))),
				ToolArgs(SchemaJSON(JSON(), "tool-"+name+"-schema", schema, false)))))
			choice = b.Do(Or(choice, Rule("tool-"+name, tp)))
		})
		contentOnly := untilEnd
		toolsOnly := b.Do(TriggerRule("tools", OneOrMore(choice)))
		contentAndTools := b.Do(Add(untilTool, toolsOnly))
		ret := b.Do(Eps())
		switch {
		case g.toolChoice == ToolChoiceRequired && g.parallelToolCalls:
			ret = b.Do(Add(Choice(contentAndTools, toolsOnly), End()))
		case g.toolChoice == ToolChoiceRequired:
			ret = b.Do(Add(Choice(Add(untilTool, choice), toolsOnly), End()))
		case g.parallelToolCalls:
			ret = b.Do(Add(Choice(contentAndTools, contentOnly, toolsOnly), End()))
		default:
			contentAndTool := b.Do(Add(untilTool, choice))
			ret = b.Do(Add(Choice(contentAndTool, contentOnly, choice), End()))
		}
		return Add(gen, ret)
	})
	if includeGrammar {
		p.setGrammar(p.parser, g.toolChoice == ToolChoiceAuto)
		p.GrammarTriggers = []GrammarTrigger{{TriggerPattern, ">>>(?!all)"}}
	}
	return p
}
