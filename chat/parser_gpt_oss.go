// Port of llama.cpp common/parsers/gpt-oss.cpp (v0.5.0): GPT-OSS's
// channels (the harmony format).

package chat

import (
	"strings"

	. "github.com/ggload/ggload/chat/internal/peg"
	"github.com/ggload/ggload/internal/ojson"
)

func gptOSS(t *template, g *genParams) *Params {
	// the template reads the reasoning as "thinking"
	adjusted := copyThinking(g.messages, true)
	prompt := directApply(t, g, &adjusted, nil, nil)
	// issue 15417: <|return|> ends a turn in inference, <|end|> in history
	if g.isInference && !g.addGenPrompt {
		if i := strings.LastIndex(prompt, "<|return|>"); i >= 0 {
			prompt = prompt[:i] + "<|end|>" + prompt[i+len("<|return|>"):]
		}
	}
	p := &Params{Format: FormatPEGNative, Prompt: prompt, SupportsThinking: true}
	p.GenerationPrompt = generationPrompt(t, g, &adjusted, nil, nil)
	p.MessageDelimiters = []MessageDelimiter{
		{RoleAssistant, "<|start|>assistant"},
		{RoleUser, "<|start|>user"},
		{RoleSystem, "<|start|>developer"},
		{RoleSystem, "<|start|>system"},
		{RoleTool, "<|start|>functions"},
	}
	p.ThinkingStartTag = "<|channel|>analysis<|message|>"
	p.ThinkingEndTags = []string{"<|end|>"}
	p.PreservedTokens = []string{"<|channel|>", "<|constrain|>", "<|message|>", "<|start|>", "<|end|>"}
	if g.hasContinuation() {
		m := &g.continueMsg
		p.GenerationPrompt = "<|start|>assistant<|channel|>analysis<|message|>" + m.ReasoningContent
		if g.continuation == ContinueContent {
			p.GenerationPrompt += "<|end|><|start|>assistant<|channel|>final<|message|>" + renderContent(m)
		}
		p.Prompt += p.GenerationPrompt
	}
	hasTools := g.hasTools()
	hasSchema := g.jsonSchema.IsObject()
	includeGrammar := hasSchema || hasTools && g.toolChoice != ToolChoiceNone
	extract := g.reasoningFormat != ReasoningNone
	p.parser = build(func(b *Builder) Expr {
		start := b.Do(Rule("start", Lit("<|start|>assistant")))
		end := b.Do(Rule("end", Lit("<|end|>")))
		content := b.Do(Rule("message-content", Until("<|end|>")))
		channel := b.Do(Add(Lit("<|channel|>"), Or(Lit("commentary"), Lit("analysis"))))
		constrainType := b.Do(Chars("[A-Za-z0-9_-]", 1, -1))
		// gpt-oss-20b may prefix a channel with this commentary
		stray := b.Do(Opt(Add(Lit("<|channel|>commentary"), Opt(Lit(" to=assistant")))))
		startAnalysis := b.Do(Add(stray, Lit("<|channel|>analysis<|message|>")))
		if extract {
			b.Do(Rule("analysis", Sum(startAnalysis, Reasoning(content), end)))
		} else {
			b.Do(Rule("analysis", Content(Sum(startAnalysis, content, end))))
		}
		analysis := b.Do(Ref("analysis"))
		preamble := b.Do(Rule("preamble", Sum(Lit("<|channel|>commentary<|message|>"), Content(content), end)))
		final := b.Do(Rule("final", Sum(stray, Lit("<|channel|>final<|message|>"), Content(content))))
		// any unsolicited tool call, a built-in function's
		unsolicited := b.Do(Rule("unsolicited", Atomic(Sum(Opt(channel), Lit(" to="), content, end))))
		anyMsg := b.Do(Rule("any", Or(preamble, analysis)))
		if hasSchema {
			constraint := b.Do(Opt(Sum(Space(), Opt(Lit("<|constrain|>")), constrainType)))
			rf := b.Do(Rule("response-format", Sum(Lit("<|channel|>final"), constraint, Lit("<|message|>"),
				Content(SchemaJSON(JSON(), "response-format-schema", g.jsonSchema, false)))))
			return Sum(ZeroOrMore(Add(start, analysis)), start, rf)
		}
		if hasTools && g.toolChoice != ToolChoiceNone {
			choice := b.Do(Choice())
			foreachFunction(g.tools, func(fn ojson.Value) {
				name := FunctionName(fn)
				params := ToolParameters(fn)
				funcName := b.Do(Add(Lit(" to=functions."), ToolName(Lit(name))))
				constraint := b.Do(Opt(Sum(Space(), Opt(Lit("<|constrain|>")), constrainType)))
				args := b.Do(ToolArgs(SchemaJSON(JSON(), "tool-"+name+"-schema", params, false)))
				inRole := b.Do(Call(Add(ToolOpen(Sum(funcName, channel, constraint, Lit("<|message|>"))), args)))
				inChannel := b.Do(Call(Add(ToolOpen(Sum(channel, funcName, constraint, Lit("<|message|>"))), args)))
				choice = b.Do(Or(choice, Rule("tool-"+name, Or(inRole, inChannel))))
			})
			call := b.Do(TriggerRule("tool-call", choice))
			if g.toolChoice == ToolChoiceRequired {
				return Sum(ZeroOrMore(Add(start, anyMsg)), start, call)
			}
			return Sum(ZeroOrMore(Add(start, anyMsg)), start, Or(call, final))
		}
		return Sum(ZeroOrMore(Add(start, anyMsg)), start, Or(final, unsolicited))
	})
	if includeGrammar {
		p.setGrammar(p.parser, !(hasSchema || hasTools && g.toolChoice == ToolChoiceRequired))
		p.GrammarTriggers = []GrammarTrigger{
			{TriggerPattern, `^\s+to$`},
			{TriggerPattern, `^<\|channel\|>(?:commentary|analysis)\s+to=functions$`},
			{TriggerPattern, `<\|start\|>assistant(\s+to)`},
			{TriggerPattern, `<\|start\|>assistant(<\|channel\|>(?:commentary|analysis)\s+to)`},
		}
	}
	return p
}
