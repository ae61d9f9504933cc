// Port of llama.cpp common/chat-auto-parser-generator.cpp and
// common/parsers/parsers.cpp (v0.5.0): the parser and grammar the
// differential analysis gives a template.

package chat

import (
	"strings"

	. "github.com/ggload/ggload/chat/internal/peg"
	"github.com/ggload/ggload/grammar"
	"github.com/ggload/ggload/internal/ojson"
)

// foreachFunction is foreach_function: each function tool's function.
func foreachFunction(tools ojson.Value, fn func(function ojson.Value)) {
	for _, t := range elems(tools) {
		typ, ok := t.Get("type")
		if !t.IsObject() || !ok || !typ.IsString() || typ.Str() != "function" || !t.Has("function") {
			continue
		}
		fn(t.At("function"))
	}
}

// foreachParameter is foreach_parameter: each property of a function's
// parameter schema, with the document that holds it.
func foreachParameter(function ojson.Value, fn func(p grammar.Property, doc *grammar.Document)) {
	doc, err := grammar.ParseSchema(ToolParameters(function))
	if err != nil {
		Throw(err)
	}
	if doc.Root.Kind != grammar.KindObject {
		return
	}
	for _, p := range doc.Root.Properties {
		fn(p, doc)
	}
}

// lazyGrammar builds the grammar of a parser into p.
func (p *Params) setGrammar(a *Arena, lazy bool) {
	p.GrammarLazy = lazy
	p.Grammar = buildGrammar(a, lazy)
}

// generate is peg_generator::generate_parser.
func (ap *autoparser) generate(t *template, g *genParams) *Params {
	p := &Params{Format: FormatPEGNative}
	p.Prompt = directApply(t, g, nil, nil, nil)
	p.GenerationPrompt = generationPrompt(t, g, nil, nil, nil)
	p.PreservedTokens = append([]string(nil), ap.preservedTokens...)
	p.AdditionalStops = append(p.AdditionalStops, ap.additionalStops...)
	parserGenPrompt := p.GenerationPrompt
	if g.continuation != ContinueNone && !g.continueMsg.Empty() {
		m := &g.continueMsg
		if ap.reasoning.start != "" {
			p.GenerationPrompt = upTo(p.GenerationPrompt, ap.reasoning.start)
			p.GenerationPrompt += ap.reasoning.start + m.ReasoningContent
			if g.continuation == ContinueContent {
				p.GenerationPrompt += ap.reasoning.end
			}
		}
		if g.continuation == ContinueContent {
			p.GenerationPrompt += renderContent(m)
		}
		p.Prompt += p.GenerationPrompt
	}
	p.parser = ap.buildParser(g, parserGenPrompt)
	hasTools := ap.tools.format.mode != toolFormatNone && g.hasTools()
	trigger := ap.tools.format.sectionStart
	if trigger == "" {
		trigger = ap.tools.format.perCallStart
	}
	hasSchema := g.jsonSchema.IsObject() && g.jsonSchema.Len() > 0
	if hasSchema || hasTools && (g.toolChoice == ToolChoiceAuto && trigger != "" || g.toolChoice == ToolChoiceRequired) {
		p.setGrammar(p.parser, !hasSchema && g.toolChoice == ToolChoiceAuto)
		if p.GrammarLazy {
			p.GrammarTriggers = []GrammarTrigger{{TriggerWord, trigger}}
			if ap.tools.format.openaiWrapperTrigger {
				p.GrammarTriggers = append(p.GrammarTriggers, GrammarTrigger{TriggerWord, `{"type": "function",`})
			}
		}
	}
	return p
}

// buildContext is parser_build_context.
type buildContext struct {
	b                   *Builder
	g                   *genParams
	reasoningParser     ID
	extractingReasoning bool
	reasoning           *analyzeReasoning
	content             *analyzeContent
}

// buildParser is autoparser::build_parser.
func (ap *autoparser) buildParser(g *genParams, genPrompt string) *Arena {
	return build(func(b *Builder) Expr {
		ctx := &buildContext{b: b, g: g, reasoningParser: b.Do(Eps())}
		ctx.extractingReasoning = g.reasoningFormat != ReasoningNone && ap.reasoning.mode != reasoningNone
		ctx.content, ctx.reasoning = &ap.content, &ap.reasoning
		ctx.reasoningParser = ap.reasoning.buildParser(ctx)
		parser := b.Do(Eps())
		hasTools := g.hasTools()
		hasSchema := g.jsonSchema.IsObject() && g.jsonSchema.Len() > 0
		pure := ap.reasoning.mode == reasoningNone
		switch {
		case hasSchema:
			rf := b.Do(Rule("response-format", Content(SchemaJSON(JSON(), "response-format-schema", g.jsonSchema, false))))
			parser = b.Do(Sum(ctx.reasoningParser, Space(), Choice(
				Sum(Lit("```json"), Space(), rf, Space(), Lit("```")),
				Sum(Space(), rf, Space())), End()))
			pure = false
		case hasTools && g.toolChoice != ToolChoiceNone && ap.caps.supportsToolCalls:
			parser = ap.tools.buildParser(ctx)
			pure = false
		default:
			parser = ap.content.buildParser(ctx)
		}
		prefix := Prefix(genPrompt, trimWhitespace(ap.reasoning.start))
		if pure {
			return Add(prefix, parser)
		}
		return Shl(prefix, parser)
	})
}

func (r *analyzeReasoning) buildParser(ctx *buildContext) ID {
	b := ctx.b
	if !ctx.extractingReasoning {
		return b.Do(Eps())
	}
	if (r.mode == reasoningTagBased || r.mode == reasoningToolsOnly) && r.end != "" {
		if r.start != "" {
			return b.Do(Opt(Sum(Optspace(r.start), Reasoning(Until(trimWhitespace(r.end))), Optspace(r.end))))
		}
		return b.Do(Opt(Add(Reasoning(Until(trimWhitespace(r.end))), Optspace(r.end))))
	}
	return b.Do(Eps())
}

func (c *analyzeContent) buildParser(ctx *buildContext) ID {
	b := ctx.b
	if c.alwaysWrapped() {
		if ctx.extractingReasoning {
			return b.Do(Sum(ctx.reasoningParser, S(c.start), Content(Until(c.end)), S(c.end), End()))
		}
		return b.Do(Sum(Content(Until(c.start)), S(c.start), Content(Until(c.end)), S(c.end), End()))
	}
	return b.Do(Sum(ctx.reasoningParser, Content(Rest()), End()))
}

func (c *analyzeContent) buildOptionalWrapped(ctx *buildContext) ID {
	if c.alwaysWrapped() {
		return ctx.b.Do(Opt(Sum(S(c.start), Content(Until(c.end)), S(c.end))))
	}
	return ctx.b.Do(Eps())
}

func (a *analyzeTools) buildParser(ctx *buildContext) ID {
	switch a.format.mode {
	case toolFormatJSONNative:
		return a.buildJSONNative(ctx)
	case toolFormatTagWithJSON:
		return a.buildTagJSON(ctx)
	case toolFormatTagWithTagged:
		return a.buildTagTagged(ctx)
	}
	return ctx.b.Do(Eps())
}

func (a *analyzeTools) buildJSONNative(ctx *buildContext) ID {
	b, g, f := ctx.b, ctx.g, &a.format
	nameField, argsField := f.nameField, f.argsField
	if f.functionField != "" && f.functionField != "function" && !strings.Contains(nameField, ".") {
		nameField = f.functionField + "." + nameField
		argsField = f.functionField + "." + argsField
	}
	required := g.toolChoice == ToolChoiceRequired
	toolsParser := b.Do(Eps())
	if f.sectionStart == "" && f.perCallStart != "" {
		single := b.Do(StandardJSONTools(f.perCallStart, f.perCallEnd, g.tools, g.parallelToolCalls, required, nameField, argsField,
			f.arrayWrapped, f.funNameIsKey, f.idField, f.genIDField, f.parameterOrder, f.openaiWrapperTrigger))
		toolsParser = b.Do(TriggerRule("tool-calls", OneOrMore(Add(single, Space()))))
	} else {
		toolsParser = b.Do(StandardJSONTools(f.sectionStart, f.sectionEnd, g.tools, g.parallelToolCalls, required, nameField, argsField,
			f.arrayWrapped, f.funNameIsKey, f.idField, f.genIDField, f.parameterOrder, f.openaiWrapperTrigger))
	}
	if ctx.content != nil && ctx.content.alwaysWrapped() {
		wrapped := ctx.content.buildOptionalWrapped(ctx)
		return b.Do(Sum(ctx.reasoningParser, wrapped, toolsParser, End()))
	}
	start := "{"
	if f.sectionStart != "" {
		start = f.sectionStart
	} else if f.perCallStart != "" {
		start = f.perCallStart
	}
	return b.Do(Sum(ctx.reasoningParser, Opt(Content(Until(start))), toolsParser, End()))
}

// buildFunc is build_func_parser: a function's opener, call id and
// arguments, atomic where a partial match must not show, and its close.
func (a *analyzeTools) buildFunc(b *Builder, name string, callIDSection ID, haveCallID bool, args ID, peek *ID) ID {
	open := b.Do(ToolOpen(Sum(S(a.function.namePrefix), ToolName(Lit(name)), S(a.function.nameSuffix))))
	matched := false
	fp := b.Do(Eps())
	if a.function.argsSeparator != "" {
		open = b.Do(Sum(open, Space(), Lit(a.function.argsSeparator)))
	}
	switch {
	case a.function.nameSuffix != "":
		fp = b.Do(Sum(open, callIDSection, Space(), args))
		matched = true
	case haveCallID:
		fp = b.Do(Sum(Atomic(Add(open, callIDSection)), Space(), args))
		matched = true
	case peek != nil:
		fp = b.Do(Add(Atomic(Sum(open, callIDSection, Space(), *peek)), args))
		matched = true
	default:
		fp = b.Do(Sum(open, callIDSection, Space(), args))
	}
	switch {
	case a.function.close != "":
		fp = b.Do(Sum(fp, Space(), ToolClose(Lit(a.function.close))))
	case a.format.perCallEnd != "":
		var closePeek ID
		if a.arguments.tolerateIntertagWhitespace {
			closePeek = b.Do(Peek(Add(Space(), Lit(a.format.perCallEnd))))
		} else {
			closePeek = b.Do(Peek(Lit(a.format.perCallEnd)))
		}
		fp = b.Do(Add(fp, ToolClose(closePeek)))
	default:
		fp = b.Do(Add(fp, ToolClose(Space())))
	}
	if !matched {
		fp = b.Do(Atomic(fp))
	}
	return fp
}

func (a *analyzeTools) betweenCallID() bool {
	return a.callID.pos == callIDBetweenFuncAndArgs && a.callID.prefix != "" && (a.callID.suffix != "" || a.arguments.start != "")
}

func (a *analyzeTools) buildTagJSON(ctx *buildContext) ID {
	b, g := ctx.b, ctx.g
	choice := b.Do(Choice())
	foreachFunction(g.tools, func(fn ojson.Value) {
		name := FunctionName(fn)
		schema := ToolParameters(fn)
		haveCallID := false
		section := b.Do(Eps())
		if a.betweenCallID() {
			if a.callID.suffix != "" {
				section = b.Do(Add(Opt(Add(S(a.callID.prefix), ToolID(Until(a.callID.suffix)))), S(a.callID.suffix)))
			} else {
				section = b.Do(Opt(Add(S(a.callID.prefix), ToolID(Until(a.arguments.start)))))
			}
			haveCallID = true
		}
		args := b.Do(ToolArgs(SchemaJSON(JSON(), "tool-"+name+"-schema", schema, false)))
		if a.arguments.start != "" {
			args = b.Do(Add(Lit(a.arguments.start), args))
		}
		if a.arguments.end != "" {
			args = b.Do(Add(args, Lit(a.arguments.end)))
		}
		var peek *ID
		if a.arguments.start != "" {
			id := b.Do(Peek(Lit(a.arguments.start)))
			peek = &id
		}
		fp := a.buildFunc(b, name, section, haveCallID, args, peek)
		choice = b.Do(Or(choice, Rule("tool-"+name, fp)))
	})
	f := &a.format
	calls := b.Do(Eps())
	if f.perCallStart != "" {
		wrapped := b.Do(Sum(S(f.perCallStart), choice, S(f.perCallEnd)))
		if g.parallelToolCalls {
			calls = b.Do(TriggerRule("tool-call", Add(wrapped, ZeroOrMore(Add(Space(), wrapped)))))
		} else {
			calls = b.Do(TriggerRule("tool-call", wrapped))
		}
		if f.sectionStart != "" {
			end := End()
			if f.sectionEnd != "" {
				end = Lit(f.sectionEnd)
			}
			calls = b.Do(TriggerRule("tool-calls", Sum(Lit(f.sectionStart), Space(), calls, Space(), end)))
		}
	} else if g.parallelToolCalls {
		calls = b.Do(TriggerRule("tool-call", Sum(S(f.sectionStart), choice, ZeroOrMore(Add(S(", "), choice)), S(f.sectionEnd))))
	} else {
		calls = b.Do(TriggerRule("tool-call", Sum(S(f.sectionStart), choice, S(f.sectionEnd))))
	}
	if g.toolChoice != ToolChoiceRequired {
		calls = b.Do(Opt(calls))
	}
	before := b.Do(a.contentBeforeTools())
	return b.Do(Sum(ctx.reasoningParser, Opt(Content(before)), calls, End()))
}

func (a *analyzeTools) contentBeforeTools() Expr {
	trigger := a.format.sectionStart
	if trigger == "" {
		trigger = a.format.perCallStart
	}
	if trigger == "" {
		return Eps()
	}
	return Until(trigger)
}

func (a *analyzeTools) buildTagTagged(ctx *buildContext) ID {
	b, g, args := ctx.b, ctx.g, &a.arguments
	untilSuffix := b.Do(Rule("until-suffix", Until(args.valueSuffix)))
	choice := b.Do(Choice())
	foreachFunction(g.tools, func(fn ojson.Value) {
		name := FunctionName(fn)
		var required, optional []ID
		foreachParameter(fn, func(param grammar.Property, doc *grammar.Document) {
			var value Expr
			if param.Schema.MayBeString() {
				value = AC(Add(ToolArgStringValue(untilSuffix), ToolArgClose(Lit(args.valueSuffix))), args.valueSuffix)
			} else {
				value = Add(ToolArgJSONValue(Schema(JSON(), "tool-"+name+"-arg-"+param.Name+"-schema", doc, param.Schema, false)),
					ToolArgClose(Lit(args.valueSuffix)))
			}
			arg := b.Do(ToolArg(Sum(ToolArgOpen(Sum(S(args.namePrefix), ToolArgName(Lit(param.Name)), S(args.nameSuffix))),
				S(args.valuePrefix), value)))
			named := b.Do(Rule("tool-"+name+"-arg-"+param.Name, arg))
			if param.Required {
				required = append(required, named)
			} else {
				optional = append(optional, named)
			}
		})
		seq := requiredThenOptional(b, required, optional)
		if args.start != "" {
			seq = b.Do(Add(Lit(args.start), seq))
		}
		if args.end != "" {
			seq = b.Do(Add(seq, Lit(args.end)))
		}
		section := b.Do(Eps())
		haveCallID := false
		if a.betweenCallID() {
			haveCallID = true
			if a.callID.suffix != "" {
				section = b.Do(Opt(Sum(S(a.callID.prefix), ToolID(Until(a.callID.suffix)), S(a.callID.suffix))))
			} else {
				section = b.Do(Opt(Add(S(a.callID.prefix), ToolID(Until(args.start)))))
			}
		}
		var peek *ID
		if args.namePrefix != "" && len(required) > 0 {
			id := b.Do(Peek(Lit(args.namePrefix)))
			peek = &id
		}
		fp := a.buildFunc(b, name, section, haveCallID, seq, peek)
		choice = b.Do(Or(choice, Rule("tool-"+name, fp)))
	})
	f := &a.format
	calls := b.Do(Eps())
	if f.perCallStart != "" {
		wrapped := b.Do(Sum(S(f.perCallStart), Space(), choice, Space(), S(f.perCallEnd)))
		if g.parallelToolCalls {
			calls = b.Do(TriggerRule("tool-call", Sum(wrapped, ZeroOrMore(Add(Space(), wrapped)), Space())))
		} else {
			calls = b.Do(TriggerRule("tool-call", Add(wrapped, Space())))
		}
		if f.sectionStart != "" {
			end := End()
			if f.sectionEnd != "" {
				end = Add(Lit(f.sectionEnd), Space())
			}
			calls = b.Do(TriggerRule("tool-calls", Sum(Lit(f.sectionStart), Space(), calls, Space(), end)))
		}
	} else if g.parallelToolCalls {
		calls = b.Do(TriggerRule("tool-call", Sum(S(f.sectionStart), Space(), choice, ZeroOrMore(Add(S(", "), choice)), Space(), S(f.sectionEnd))))
	} else {
		calls = b.Do(TriggerRule("tool-call", Sum(S(f.sectionStart), Space(), choice, Space(), S(f.sectionEnd))))
	}
	if g.toolChoice != ToolChoiceRequired {
		calls = b.Do(Opt(calls))
	}
	before := b.Do(a.contentBeforeTools())
	return b.Do(Sum(ctx.reasoningParser, Opt(Content(before)), calls, End()))
}

// requiredThenOptional is the arguments' sequence the pin's parsers
// build: the required ones in order, spaces between, then any of the
// optional ones, each after a space, any number of times.
func requiredThenOptional(b *Builder, required, optional []ID) ID {
	seq := b.Do(Eps())
	for i, r := range required {
		if i > 0 {
			seq = b.Do(Add(seq, Space()))
		}
		seq = b.Do(Add(seq, r))
	}
	if len(optional) > 0 {
		anyOpt := b.Do(Choice())
		for _, o := range optional {
			anyOpt = b.Do(Or(anyOpt, o))
		}
		seq = b.Do(Add(seq, Rep(Add(Space(), anyOpt), 0, -1)))
	}
	return seq
}

// taggedArgs are a function's arguments as XML-like tags, as MiniCPM5's
// and Muse Glimmer's parsers build them: open+` name="NAME">` then the
// value, a string (stringValue) or JSON of the parameter's schema, closed
// by close; any number of them, in any order.
func taggedArgs(b *Builder, fn ojson.Value, name, open, close string, stringValue ID) ID {
	var argRules []ID
	foreachParameter(fn, func(prop grammar.Property, doc *grammar.Document) {
		value := b.Do(Eps())
		if prop.Schema.MayBeString() {
			value = stringValue
		} else {
			value = b.Do(Add(ToolArgJSONValue(Schema(JSON(), "tool-"+name+"-arg-"+prop.Name+"-schema", doc, prop.Schema, false)),
				ToolArgClose(Lit(close))))
		}
		argRules = append(argRules, b.Do(ToolArg(Add(ToolArgOpen(Sum(Lit(open+" name=\""), ToolArgName(Lit(prop.Name)), Lit("\">"))), value))))
	})
	args := b.Do(Eps())
	if len(argRules) > 0 {
		args = b.Do(ZeroOrMore(Add(Choice(idExprs(argRules)...), Space())))
	}
	return args
}
