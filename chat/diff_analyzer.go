// Port of llama.cpp common/chat-diff-analyzer.cpp and the analysis types
// of common/chat-auto-parser.h (v0.5.0): the differential analysis that
// finds a template's reasoning, content and tool-call markers by
// rendering it on probe conversations and comparing the renders.

package chat

import (
	"sort"
	"strings"

	. "github.com/ggload/ggload/chat/internal/peg"
	"github.com/ggload/ggload/internal/ojson"
)

// The probe conversations' text.
const (
	funFirst       = "FFF_FIRST_FUN_F"
	funSecond      = "SSS_SECOND_FUN_S"
	argFirst       = "AA_ARG_FST_AA"
	argSecond      = "BB_ARG_SND_BB"
	userMsgText    = "U_USER_MSG Hello END_U"
	userMsgTwoText = "V_USER_MSG Hello END_V"
	assistantText  = "A_ASST_MSG I can help END_A"
	thinkingText   = "REASON_PART I am thinking END_R"
	callID001      = "call00001"
	callID002      = "call00002"
	callID999      = "call99999"
)

type reasoningMode int

const (
	reasoningNone reasoningMode = iota
	reasoningTagBased
	reasoningToolsOnly
)

type contentMode int

const (
	contentPlain contentMode = iota
	contentAlwaysWrapped
	contentWrappedWithReasoning
)

type callIDPosition int

const (
	callIDNone callIDPosition = iota
	callIDPreFuncName
	callIDBetweenFuncAndArgs
	callIDPostArgs
)

type toolFormat int

const (
	toolFormatNone toolFormat = iota
	toolFormatJSONNative
	toolFormatTagWithJSON
	toolFormatTagWithTagged
)

// analyzeReasoning is analyze_reasoning.
type analyzeReasoning struct {
	mode       reasoningMode
	start, end string
}

// analyzeContent is analyze_content.
type analyzeContent struct {
	mode       contentMode
	start, end string
}

func (c *analyzeContent) alwaysWrapped() bool {
	return c.mode == contentAlwaysWrapped && c.start != "" && c.end != ""
}

// toolFormatAnalysis is tool_format_analysis.
type toolFormatAnalysis struct {
	mode                                               toolFormat
	sectionStart, sectionEnd, perCallStart, perCallEnd string
	funNameIsKey, arrayWrapped, openaiWrapperTrigger   bool
	functionField, nameField, argsField                string
	idField, genIDField                                string
	parameterOrder                                     []string
}

type toolFunctionAnalysis struct{ namePrefix, nameSuffix, argsSeparator, close string }

type toolArgumentsAnalysis struct {
	start, end, namePrefix, nameSuffix, valuePrefix, valueSuffix, separator string
	tolerateIntertagWhitespace                                              bool
}

type toolIDAnalysis struct {
	pos            callIDPosition
	prefix, suffix string
}

// analyzeTools is analyze_tools.
type analyzeTools struct {
	format    toolFormatAnalysis
	function  toolFunctionAnalysis
	arguments toolArgumentsAnalysis
	callID    toolIDAnalysis
}

func newAnalyzeTools() analyzeTools {
	return analyzeTools{format: toolFormatAnalysis{functionField: "function", nameField: "name", argsField: "arguments"}}
}

// autoparser is autoparser::autoparser: a template's analysis.
type autoparser struct {
	caps            capsView
	userStart       string
	assistantStart  string
	reasoning       analyzeReasoning
	content         analyzeContent
	tools           analyzeTools
	preservedTokens []string
	additionalStops []string
}

// capsView is the part of jinja::caps the analysis reads.
type capsView struct{ supportsToolCalls, supportsParallelToolCalls bool }

// analyze is the template's analysis, made once.
func (t *template) analyze() *autoparser {
	t.analysisOnce.Do(func() {
		defer Catch(&t.analysisErr)
		t.analysis = analyzeTemplate(t)
	})
	if t.analysisErr != nil {
		Throw(t.analysisErr)
	}
	return t.analysis
}

// Probe messages.

func obj(kv ...any) ojson.Value {
	o := ojson.ObjectValue()
	for i := 0; i < len(kv); i += 2 {
		var v ojson.Value
		switch x := kv[i+1].(type) {
		case string:
			v = ojson.StringValue(x)
		case ojson.Value:
			v = x
		case nil:
			v = ojson.NullValue()
		}
		o.Set(kv[i].(string), v)
	}
	return o
}

func arr(vs ...ojson.Value) ojson.Value { return ojson.ArrayValue(vs...) }

func probeParamsSchema() ojson.Value {
	return obj("type", "object",
		"properties", obj(argFirst, obj("type", "string", "description", "First argument"),
			argSecond, obj("type", "string", "description", "Second argument")),
		"required", arr())
}

func probeTools() ojson.Value {
	return arr(
		obj("type", "function", "function", obj("name", funFirst, "description", "Test function foo", "parameters", probeParamsSchema())),
		obj("type", "function", "function", obj("name", funSecond, "description", "Test function bar", "parameters", probeParamsSchema())))
}

func probeUser() ojson.Value { return obj("role", "user", "content", userMsgText) }

func probeCall(name string, args ojson.Value, id string) ojson.Value {
	return obj("id", id, "type", "function", "function", obj("name", name, "arguments", args))
}

func firstCallZeroArgs() ojson.Value { return probeCall(funFirst, ojson.ObjectValue(), callID001) }
func firstCallOneArg() ojson.Value   { return probeCall(funFirst, obj(argFirst, "XXXX"), callID001) }
func firstCallOneArgOtherVal() ojson.Value {
	return probeCall(funFirst, obj(argFirst, "YYYY"), callID001)
}
func firstCallOtherArg() ojson.Value { return probeCall(funFirst, obj(argSecond, "YYYY"), callID001) }
func firstCall() ojson.Value {
	return probeCall(funFirst, obj(argFirst, "XXXX", argSecond, "YYYY"), callID001)
}
func secondCall() ojson.Value {
	return probeCall(funSecond, obj(argFirst, "XXXX", argSecond, "YYYY"), callID002)
}
func firstCallAltID() ojson.Value {
	return probeCall(funFirst, obj(argFirst, "XXXX", argSecond, "YYYY"), callID999)
}

func assistantMsg(content any, extra ...any) ojson.Value {
	return obj(append([]any{"role", "assistant", "content", content}, extra...)...)
}

func withCalls(calls ...ojson.Value) ojson.Value {
	return assistantMsg("", "tool_calls", arr(calls...))
}

func probe(msgs ojson.Value, tools ojson.Value, addGen bool) templateParams {
	return templateParams{messages: msgs, tools: tools, addGenPrompt: addGen, enableThinking: true}
}

func setMessages(msgs ...ojson.Value) func(*templateParams) {
	return func(p *templateParams) { p.messages = arr(msgs...) }
}

// workarounds are the analysis's patches for templates it reads wrong.
var workarounds = []func(t *template, a *autoparser){
	// old Qwen templates: reasoning they do not show
	func(t *template, a *autoparser) {
		if strings.Contains(t.src, "content.split('</think>')") && !strings.Contains(t.src, "reasoning_content") &&
			!strings.Contains(t.src, "<SPECIAL_12>") && a.reasoning.mode == reasoningNone {
			a.reasoning = analyzeReasoning{reasoningTagBased, "<think>", "</think>"}
			a.preservedTokens = append(a.preservedTokens, "<think>", "</think>")
		}
	},
	// Granite 3.3
	func(t *template, a *autoparser) {
		if strings.Contains(t.src, "Write your thoughts between <think></think> and write your response between <response></response>") {
			a.reasoning = analyzeReasoning{reasoningTagBased, "<think>", "</think>"}
			a.preservedTokens = append(a.preservedTokens, "<think>", "</think>")
			a.content = analyzeContent{contentWrappedWithReasoning, "<response>", "</response>"}
			a.preservedTokens = append(a.preservedTokens, "<response>", "</response>")
		}
	},
	// Cohere Command R+
	func(t *template, a *autoparser) {
		if strings.Contains(t.src, "<|CHATBOT_TOKEN|>") && strings.Contains(t.src, "<|END_OF_TURN_TOKEN|>") && a.content.start == "" {
			a.content = analyzeContent{contentAlwaysWrapped, "<|CHATBOT_TOKEN|>", "<|END_OF_TURN_TOKEN|>"}
			a.preservedTokens = append(a.preservedTokens, "<|CHATBOT_TOKEN|>", "<|END_OF_TURN_TOKEN|>")
			a.userStart = "<|START_OF_TURN_TOKEN|><|USER_TOKEN|>"
		}
	},
	// Functionary: no tool call section
	func(t *template, a *autoparser) {
		if strings.Contains(t.src, "set has_code_interpreter = tools | selectattr(\"type\", \"equalto\", \"code_interpreter\") | list | length > 0") {
			a.content.mode = contentPlain
			a.content.end = ""
			a.tools.function.namePrefix = ""
			a.tools.format.sectionStart = ""
			a.tools.format.sectionEnd = ""
			a.tools.format.perCallStart = "<function="
			a.tools.format.perCallEnd = "</function>"
			a.tools.function.close = ""
			a.preservedTokens = []string{"<|eot_id|>", "<|eom_id|>", "<function=", ">", "</function>"}
		}
	},
	// DeepSeek-R1-Distill-Qwen
	func(t *template, a *autoparser) {
		if strings.Contains(t.src, "{{'<｜Assistant｜><｜tool▁calls▁begin｜><｜tool▁call▁begin｜>' + tool['type'] + '<｜tool▁sep｜>'") {
			a.tools.format.sectionStart = "<｜tool▁calls▁begin｜>"
			a.tools.format.sectionEnd = "<｜tool▁calls▁end｜>"
			a.tools.format.perCallStart = "<｜tool▁call▁begin｜>function"
			a.tools.function.namePrefix = "<｜tool▁sep｜>"
			a.tools.format.perCallEnd = "<｜tool▁call▁end｜>"
			a.tools.function.close = "```"
		}
	},
	// Nemotron Nano v2
	func(t *template, a *autoparser) {
		if strings.Contains(t.src, "<SPECIAL_10>") && strings.Contains(t.src, "<SPECIAL_11>") &&
			strings.Contains(t.src, "<SPECIAL_12>") && strings.Contains(t.src, "<TOOL_RESPONSE>") {
			a.tools.format.mode = toolFormatJSONNative
			a.tools.format.sectionStart = ""
			a.tools.format.sectionEnd = ""
			a.tools.format.perCallStart = "<TOOLCALL>"
			a.tools.format.perCallEnd = "</TOOLCALL>"
			a.tools.format.arrayWrapped = true
			a.content = analyzeContent{contentPlain, "", ""}
			a.reasoning = analyzeReasoning{reasoningTagBased, "<think>\n", "</think>"}
			a.assistantStart = "<SPECIAL_11>Assistant"
			a.userStart = "<SPECIAL_11>User"
			a.preservedTokens = []string{"<SPECIAL_11>", "</think>", "<TOOLCALL>", "</TOOLCALL>"}
		}
	},
	// Fireworks
	func(t *template, a *autoparser) {
		if strings.Contains(t.src, "{%- set system_prompt = '<|start_header_id|>' + 'system' + '<|end_header_id|>\\n\\n'"+
			" + message['content'] | trim + '\\n' + system_prompt_suffix + '<|eot_id|>' -%}") {
			a.assistantStart = "<|start_header_id|>assistant<|end_header_id|>"
			a.userStart = "<|start_header_id|>user<|end_header_id|>"
		}
	},
	// Solar Open
	func(t *template, a *autoparser) {
		if strings.Contains(t.src, "<|begin|>assistant<|think|><|end|>") {
			a.assistantStart = "<|begin|>assistant"
		}
	},
	// Apriel 1.6
	func(t *template, a *autoparser) {
		if strings.Contains(t.src, "if not loop.last and '[BEGIN FINAL RESPONSE]' in asst_text") {
			a.userStart = "<|begin_user|>"
			a.assistantStart = "<|begin_assistant|>"
		}
	},
	// the JSON {name, parameters} tool instruction: the model writes the
	// OpenAI function wrapper
	func(t *template, a *autoparser) {
		if strings.Contains(t.src, "Respond in the format {\"name\": function name") && strings.Contains(t.src, "Do not use variables.") {
			a.tools.format.openaiWrapperTrigger = true
		}
	},
	// Laguna: delimiters rendered with whitespace the model does not write
	func(t *template, a *autoparser) {
		if strings.Contains(t.src, "laguna_glm_thinking") {
			a.reasoning.start = trimWhitespace(a.reasoning.start)
			a.reasoning.end = trimWhitespace(a.reasoning.end)
			a.tools.arguments.valuePrefix = trimWhitespace(a.tools.arguments.valuePrefix)
			a.tools.arguments.valueSuffix = trimWhitespace(a.tools.arguments.valueSuffix)
			a.tools.arguments.separator = trimWhitespace(a.tools.arguments.separator)
			a.tools.arguments.tolerateIntertagWhitespace = true
			a.additionalStops = append(a.additionalStops, "</assistant>")
		}
	},
	// Bailing V3
	func(t *template, a *autoparser) {
		if strings.Contains(t.src, "Bailing V3 chat template") {
			a.tools.arguments.valueSuffix = trimWhitespace(a.tools.arguments.valueSuffix)
			a.tools.arguments.tolerateIntertagWhitespace = true
		}
	},
}

// analyzeTemplate is autoparser::analyze_template.
func analyzeTemplate(t *template) *autoparser {
	a := &autoparser{caps: capsView{t.caps.SupportsToolCalls, t.caps.SupportsParallelToolCalls}}
	a.reasoning = reasoningAnalysis(t, t.caps.SupportsToolCalls)
	a.content = contentAnalysis(t, &a.reasoning)
	a.tools = newAnalyzeTools()
	if t.caps.SupportsToolCalls {
		a.tools = toolsAnalysis(t, a.caps, &a.reasoning)
	}
	a.assistantStart = a.detectAssistantStart(t)
	a.userStart = detectUserStart(t)
	a.collectPreservedTokens()
	for _, w := range workarounds {
		w(t, a)
	}
	return a
}

func (a *autoparser) collectPreservedTokens() {
	add := func(tok string) {
		tok = trimWhitespace(tok)
		if tok == "" {
			return
		}
		for _, p := range a.preservedTokens {
			if p == tok {
				return
			}
		}
		a.preservedTokens = append(a.preservedTokens, tok)
	}
	tl := &a.tools
	for _, tok := range []string{a.reasoning.start, a.reasoning.end, a.content.start, a.content.end,
		tl.format.sectionStart, tl.format.sectionEnd, tl.format.perCallStart, tl.format.perCallEnd,
		tl.function.namePrefix, tl.function.nameSuffix, tl.function.argsSeparator, tl.function.close,
		tl.arguments.start, tl.arguments.end, tl.arguments.namePrefix, tl.arguments.nameSuffix,
		tl.arguments.separator, tl.arguments.valuePrefix, tl.arguments.valueSuffix,
		tl.callID.prefix, tl.callID.suffix} {
		add(tok)
	}
}

func (a *autoparser) detectAssistantStart(t *template) string {
	c, ok := compareVariants(t, probe(arr(probeUser()), ojson.Value{}, false),
		setMessages(probeUser(), assistantMsg(assistantText)))
	if !ok {
		return ""
	}
	prefix := upTo(c.diff.right, assistantText)
	if s := trimWhitespace(a.reasoning.start); a.reasoning.start != "" && strings.Contains(prefix, s) {
		prefix = upTo(prefix, s)
	}
	if e := trimWhitespace(a.reasoning.end); a.reasoning.end != "" && strings.Contains(prefix, e) {
		prefix = upTo(prefix, e)
	}
	return trimWhitespace(prefix)
}

func detectUserStart(t *template) string {
	c, ok := compareVariants(t, probe(arr(), ojson.Value{}, false), setMessages(probeUser()))
	if !ok {
		userTwo := obj("role", "user", "content", userMsgTwoText)
		asst := assistantMsg(assistantText)
		c, ok = compareVariants(t, probe(arr(userTwo, asst), ojson.Value{}, false), setMessages(userTwo, asst, probeUser()))
		if !ok {
			return ""
		}
	}
	msg := c.diff.right
	if i := strings.Index(msg, assistantText); i >= 0 {
		msg = msg[i+len(assistantText):]
	}
	var b strings.Builder
	marker := false
	for _, s := range segmentize(upTo(msg, userMsgText)) {
		lower := asciiLower(s.value)
		if s.typ == segMarker && !marker && (strings.Contains(lower, "end") || strings.Contains(lower, "close")) {
			continue // an end marker, at the start
		}
		if s.typ == segText && !marker && trimWhitespace(s.value) == "" {
			continue
		}
		marker = marker || s.typ == segMarker
		b.WriteString(s.value)
	}
	return trimWhitespace(b.String())
}

func reasoningAnalysis(t *template, supportsTools bool) analyzeReasoning {
	var r analyzeReasoning
	r.comparePresence(t)
	r.compareThinkingEnabled(t)
	if supportsTools {
		r.compareScope(t)
	}
	return r
}

func (r *analyzeReasoning) comparePresence(t *template) {
	c, ok := compareVariants(t, probe(arr(probeUser(), assistantMsg(assistantText)), ojson.Value{}, false),
		setMessages(probeUser(), assistantMsg(assistantText, "reasoning_content", thinkingText)))
	if !ok {
		return
	}
	if c.diff.right == "" || !strings.Contains(c.diff.right, thinkingText) {
		return
	}
	delim := buildTagged(func(b *Builder) Expr {
		return Sum(Lit(thinkingText), Space(), Opt(Add(Tag("post", Add(Marker(), Space())), Rest())))
	})
	wrapped := buildTagged(func(b *Builder) Expr {
		return Sum(Tag("pre", Add(Marker(), Space())), Lit(thinkingText), Tag("post", Sum(Space(), Marker(), Space())), Rest())
	})
	res := wrapped.extractAnywhere(c.b)
	if !res.ok() {
		res = delim.extractAnywhere(c.b)
	}
	if res.ok() {
		if res.tags["pre"] != "" && res.tags["post"] != "" {
			r.mode, r.start, r.end = reasoningTagBased, res.tags["pre"], res.tags["post"]
		} else if res.tags["post"] != "" {
			r.mode, r.end = reasoningTagBased, res.tags["post"]
		}
	}
}

func (r *analyzeReasoning) compareThinkingEnabled(t *template) {
	p := probe(arr(probeUser()), ojson.Value{}, true)
	p.enableThinking = false
	c, ok := compareVariants(t, p, func(p *templateParams) { p.enableThinking = true })
	if !ok {
		return
	}
	d := c.diff
	leftT, rightT := trimWhitespace(d.left), trimWhitespace(d.right)
	switch {
	case leftT == "" && d.right != "":
		if rightT != "" && strings.HasSuffix(c.b, rightT) && r.start == "" {
			r.start, r.mode = d.right, reasoningTagBased
		}
	case rightT == "" && d.left != "":
		if leftT != "" && strings.HasSuffix(c.a, leftT) && r.end == "" {
			seg := pruneWhitespace(segmentize(c.a))
			if n := len(seg); n >= 2 && seg[n-1].value == leftT && seg[n-2].typ == segMarker {
				r.start = seg[n-2].value
			}
			r.end, r.mode = d.left, reasoningTagBased
		}
	case leftT != "" && rightT != "":
		// the whole renders differ (SmolLM3 changes its system message):
		// one render's tail may end the other with markers added
		const anchorLen = 64
		for dir := 0; dir < 2; dir++ {
			base, ext := c.b, c.a
			if dir == 1 {
				base, ext = c.a, c.b
			}
			n := min(len(base), anchorLen)
			anchor := base[len(base)-n:]
			pos := strings.LastIndex(ext, anchor)
			if pos < 0 || pos+n >= len(ext) {
				continue
			}
			extra := trimWhitespace(ext[pos+n:])
			if extra == "" {
				continue
			}
			seg := pruneWhitespace(segmentize(extra))
			if len(seg) == 2 && seg[0].typ == segMarker && seg[1].typ == segMarker {
				if r.start == "" {
					r.start = seg[0].value
				}
				if r.end == "" {
					r.end = seg[1].value
				}
				r.mode = reasoningTagBased
				break
			}
		}
	}
	if r.mode == reasoningNone && r.start == "" && r.end != "" {
		r.mode = reasoningTagBased
	}
}

func (r *analyzeReasoning) compareScope(t *template) {
	withContent := assistantMsg(assistantText, "reasoning_content", thinkingText)
	withTools := obj("role", "assistant", "content", nil, "reasoning_content", thinkingText,
		"tool_calls", arr(probeCall(funFirst, obj(argFirst, "VVVV", argSecond, "XXXX"), callID001)))
	c, ok := compareVariants(t, probe(arr(probeUser(), withContent), probeTools(), false), setMessages(probeUser(), withTools))
	if !ok {
		return
	}
	inA, inB := strings.Contains(c.a, thinkingText), strings.Contains(c.b, thinkingText)
	if inA || !inB {
		return
	}
	r.mode = reasoningToolsOnly
	wrapped := buildTagged(func(b *Builder) Expr {
		return Sum(Tag("pre", Add(Marker(), Space())), Lit(thinkingText), Space(), Tag("post", Add(Marker(), Space())))
	})
	if res := wrapped.extractAnywhere(c.b); res.ok() {
		r.start, r.end = res.tags["pre"], res.tags["post"]
		return
	}
	delim := buildTagged(func(b *Builder) Expr {
		return Sum(Lit(thinkingText), Space(), Opt(Tag("post", Add(Marker(), Space()))))
	})
	if res := delim.extractAnywhere(c.b); res.ok() {
		r.end = res.tags["post"]
	} else {
		r.mode = reasoningNone
	}
}

func contentAnalysis(t *template, reasoning *analyzeReasoning) analyzeContent {
	var ca analyzeContent
	contentOnly := assistantMsg(assistantText)
	withTools := obj("role", "assistant", "content", "", "tool_calls", arr(probeCall("test_func", obj("arg1", "value1"), callID001)))
	withReasoning := assistantMsg("", "reasoning_content", thinkingText)
	p := probe(arr(probeUser(), contentOnly), probeTools(), false)
	ct, ok1 := compareVariants(t, p, setMessages(probeUser(), withTools))
	cr, ok2 := compareVariants(t, p, setMessages(probeUser(), withReasoning))
	if !ok1 || !ok2 {
		return ca
	}
	dt, dr := ct.diff, cr.diff
	plain := false
	if trimWhitespace(dt.left) == assistantText {
		parser := buildTagged(func(b *Builder) Expr {
			return Sum(Space(), S(dr.left), Space(), Opt(Marker()), Space(), End())
		})
		if parser.extract(dr.left).ok() {
			ca.mode = contentPlain
			plain = true
		} else if reasoning.mode != reasoningNone && reasoning.end != "" {
			post := buildTagged(func(b *Builder) Expr {
				return Sum(Lit(reasoning.end), Space(), Lit(assistantText))
			})
			if post.extractAnywhere(dr.left).ok() {
				ca.mode = contentPlain
				plain = true
			}
		}
	}
	if !plain {
		rdiff := dr.left
		if reasoning.end != "" && strings.Contains(rdiff, reasoning.end) {
			rdiff = rdiff[strings.Index(rdiff, reasoning.end)+len(reasoning.end):]
		}
		pure := dt.left
		if len(rdiff) > len(dt.left) {
			pure = rdiff
		}
		wrapped := buildTagged(func(b *Builder) Expr {
			return Sum(Tag("pre", Add(Marker(), Space())), Lit(assistantText), Space(), Tag("post", Add(Marker(), Space())), Rest())
		})
		res := wrapped.extractAnywhere(pure)
		ca.start, ca.end = res.tags["pre"], res.tags["post"]
	}
	if ca.start != "" || ca.end != "" {
		ca.mode = contentAlwaysWrapped
	}
	return ca
}

func toolsAnalysis(t *template, caps capsView, reasoning *analyzeReasoning) analyzeTools {
	a := newAnalyzeTools()
	a.analyzeCalls(t, reasoning, caps.supportsParallelToolCalls)
	if a.format.mode != toolFormatNone && a.format.mode != toolFormatJSONNative {
		if caps.supportsParallelToolCalls {
			a.checkPerCallMarkers(t)
		}
		a.extractFunctionMarkers(t)
		if a.format.mode == toolFormatTagWithTagged {
			a.extractArgumentNameMarkers(t)
			a.extractArgumentValueMarkers(t)
		}
		a.extractArgumentSeparator(t)
		a.extractArgsMarkers(t)
		a.extractCallIDMarkers(t)
	}
	return a
}

func toolProbe(msgs ...ojson.Value) templateParams { return probe(arr(msgs...), probeTools(), false) }

func (a *analyzeTools) analyzeCalls(t *template, reasoning *analyzeReasoning, parallel bool) {
	c, ok := compareVariants(t, toolProbe(probeUser(), assistantMsg(assistantText)), setMessages(probeUser(), withCalls(firstCall())))
	if !ok || c.diff.right == "" {
		return
	}
	a.analyzeCallFormat(t, c.diff.right, funFirst, argFirst, reasoning, parallel)
}

func (a *analyzeTools) analyzeCallFormat(t *template, haystack, funNeedle, argNeedle string, reasoning *analyzeReasoning, parallel bool) {
	if funNeedle == "" || argNeedle == "" || haystack == "" {
		return
	}
	inJSON := func(needle string) bool {
		parser := buildTagged(func(b *Builder) Expr {
			return Shl(Choice(Lit("{"), Lit(":")), Choice(Tag("dq", Sum(Lit(`"`), Lit(needle), Lit(`"`)))))
		})
		return parser.extractAnywhere(haystack).ok()
	}
	funQuote, argQuote := inJSON(funNeedle), inJSON(argNeedle)
	switch {
	case funQuote:
		a.format.mode = toolFormatJSONNative
	case argQuote:
		a.format.mode = toolFormatTagWithJSON
	default:
		a.format.mode = toolFormatTagWithTagged
	}
	clean := haystack
	if reasoning.start != "" {
		if i := strings.Index(haystack, reasoning.start); i >= 0 {
			clean = haystack[:i] + haystack[i+len(reasoning.start):]
		}
	}
	if reasoning.end != "" {
		if i := strings.Index(clean, reasoning.end); i >= 0 {
			clean = clean[:i] + clean[i+len(reasoning.end):]
		}
	}
	if a.format.mode == toolFormatJSONNative {
		a.analyzeJSONNative(clean, funNeedle, argNeedle)
		if parallel {
			a.analyzeJSONNativeParallel(t)
		}
	} else {
		a.analyzeNonJSON(clean, funNeedle)
	}
	a.format.sectionEnd = trimWhitespace(a.format.sectionEnd)
	a.format.perCallEnd = trimWhitespace(a.format.perCallEnd)
}

func (a *analyzeTools) analyzeJSONNativeParallel(t *template) {
	c, ok := compareVariants(t, toolProbe(probeUser(), withCalls(firstCall())), setMessages(probeUser(), withCalls(firstCall(), secondCall())))
	if !ok {
		return
	}
	if a.format.sectionStart != "" && strings.Contains(c.diff.right, a.format.sectionStart) {
		a.format.perCallStart, a.format.perCallEnd = a.format.sectionStart, a.format.sectionEnd
		a.format.sectionStart, a.format.sectionEnd = "", ""
	}
}

// intOf is a size_t position held in an int, as the pin holds
// find_first_of's in one: npos is -1.
func intOf(pos uint64) int64 { return int64(int32(pos)) }

func (a *analyzeTools) analyzeJSONNative(clean, funNeedle, argNeedle string) {
	jsonStart := intOf(uint64(strings.IndexByte(clean, '{')))
	jsonEnd := intOf(uint64(strings.LastIndexByte(clean, '}')))
	cut := substr(clean, uint64(jsonStart), uint64(jsonEnd-jsonStart+1))
	call, err := ojson.ParseString(cut)
	if err != nil {
		Throw(err)
	}
	register := func(prefix string, m ojson.Member) {
		name := m.Key
		if prefix != "" {
			name = prefix + "." + m.Key
		}
		switch {
		case m.Value.IsString() && strings.Contains(m.Value.Str(), "call0000"):
			a.format.idField = name
		case m.Value.IsString() && m.Value.Str() == funNeedle:
			a.format.nameField = name
		case strings.Contains(dump(m.Value, -1), argNeedle):
			a.format.argsField = name
		case strings.Contains(m.Key, "id"):
			a.format.genIDField = name
		}
	}
	for _, el := range Items(call) {
		if el.Key == funNeedle {
			a.format.funNameIsKey = true
			a.format.nameField, a.format.argsField = "", ""
			continue
		}
		if el.Value.IsObject() && !strings.Contains(dump(el.Value, -1), argNeedle) {
			a.format.functionField = el.Key
			for _, sub := range Items(el.Value) {
				register(el.Key, sub)
			}
		}
		register("", el)
	}
	arrayParser := buildTagged(func(b *Builder) Expr {
		return Sum(Tag("pre", Add(Lit("["), Space())), Lit(cut), Tag("post", Add(Space(), Lit("]"))))
	})
	if res := arrayParser.extractAnywhere(clean); res.ok() {
		a.format.arrayWrapped = true
		jsonStart -= int64(len(res.tags["pre"]))
		jsonEnd += int64(len(res.tags["post"]))
	}
	jsonEnd++
	type located struct {
		pos  uint64
		name string
	}
	var locs []located
	for _, f := range []string{a.format.nameField, a.format.argsField, a.format.idField, a.format.genIDField} {
		if f != "" {
			locs = append(locs, located{find(clean, f), f})
		}
	}
	sort.Slice(locs, func(i, j int) bool {
		if locs[i].pos != locs[j].pos {
			return locs[i].pos < locs[j].pos
		}
		return locs[i].name < locs[j].name
	})
	for _, l := range locs {
		a.format.parameterOrder = append(a.format.parameterOrder, l.name)
	}
	a.format.sectionStart = trimLeadingWhitespace(substr(clean, 0, uint64(jsonStart)))
	a.format.sectionEnd = trimWhitespace(substr(clean, uint64(jsonEnd), npos))
	if a.format.arrayWrapped && a.format.sectionEnd == "]" {
		a.format.sectionEnd = ""
	}
}

func (a *analyzeTools) analyzeNonJSON(clean, funNeedle string) {
	funMarker := buildTagged(func(b *Builder) Expr {
		return Tag("fun_marker", Choice(
			Sum(Tag("fun_pre", Add(Lit("<"), UntilOneOf(">", funNeedle))), Lit(funNeedle),
				Tag("fun_post", Sum(Not(Add(Space(), Lit("<"))), Until(">"), Lit(">"))), Space()),
			Sum(Tag("fun_pre", Add(Lit("["), UntilOneOf("]", funNeedle))), Lit(funNeedle),
				Tag("fun_post", Add(Not(Sum(Space(), Lit("["), Until("]"), Lit("]"))), Space())))))
	})
	funRes := funMarker.extractAnywhere(clean)
	marker := funNeedle
	if funRes.ok() {
		marker = funRes.tags["fun_marker"]
	}
	perTool := buildTagged(func(b *Builder) Expr {
		return Sum(Tag("sec_start", Add(Marker(), Space())), Tag("call_start", Add(Marker(), Space())),
			Tag("fun_pre", Until(marker)), S(marker), Tag("rest", Rest()))
	})
	section := buildTagged(func(b *Builder) Expr {
		return Sum(Tag("sec_start", Add(Marker(), Space())), S(marker), Tag("rest", Rest()))
	})
	res := perTool.extractAnywhere(clean)
	var end taggedResult
	if res.ok() {
		closers := buildTagged(func(b *Builder) Expr {
			return Sum(Tag("call_end", Add(Marker(), Space())), Tag("sec_end", Add(Marker(), Space())), End())
		})
		end = closers.extractAnywhere(res.tags["rest"])
		a.function.namePrefix = funRes.tags["fun_pre"] + a.function.namePrefix
	} else {
		res = section.extractAnywhere(clean)
		closer := buildTagged(func(b *Builder) Expr {
			return Sum(Tag("sec_end", Add(Marker(), Space())), End())
		})
		end = closer.extractAnywhere(res.tags["rest"])
	}
	a.format.perCallStart = res.tags["call_start"]
	a.format.perCallEnd = end.tags["call_end"]
	a.format.sectionStart = res.tags["sec_start"]
	a.format.sectionEnd = end.tags["sec_end"]
}

func (a *analyzeTools) checkPerCallMarkers(t *template) {
	c, ok := compareVariants(t, toolProbe(probeUser(), withCalls(firstCall())), setMessages(probeUser(), withCalls(firstCall(), secondCall())))
	if !ok {
		return
	}
	common := calculateDiffSplit(c.diff.suffix, c.diff.right)
	second := trimLeadingWhitespace(common.right)
	if a.format.sectionStart != "" && strings.HasPrefix(second, a.format.sectionStart) {
		a.format.perCallStart, a.format.perCallEnd = a.format.sectionStart, a.format.sectionEnd
		a.format.sectionStart, a.format.sectionEnd = "", ""
	}
	if a.format.perCallEnd != "" {
		one, two := strings.Count(c.a, a.format.perCallEnd), strings.Count(c.b, a.format.perCallEnd)
		if one > 0 && one == two {
			a.format.sectionEnd = a.format.perCallEnd
			a.format.perCallEnd = ""
		}
	}
}

func notMarkerAny() Expr { return Add(Not(Marker()), Any()) }

func (a *analyzeTools) extractFunctionMarkers(t *template) {
	p := toolProbe(probeUser(), withCalls(firstCall()))
	c, ok := compareVariants(t, p, setMessages(probeUser(), withCalls(secondCall())))
	if !ok {
		return
	}
	d := c.diff
	if !strings.Contains(d.left, funFirst) || !strings.Contains(d.right, funSecond) {
		return
	}
	prefixMarker := a.format.perCallStart
	if prefixMarker == "" {
		prefixMarker = a.format.sectionStart
	}
	if prefixMarker != "" && strings.Contains(d.prefix, prefixMarker) {
		a.function.namePrefix = d.prefix[strings.LastIndex(d.prefix, prefixMarker)+len(prefixMarker):]
	}
	nameParser := buildTagged(func(b *Builder) Expr {
		return Sum(Tag("pre", Until(funFirst)), Lit(funFirst), Tag("post", ZeroOrMore(notMarkerAny())))
	})
	if res := nameParser.extract(d.left); res.ok() {
		a.function.namePrefix += res.tags["pre"]
		a.function.nameSuffix = res.tags["post"]
	}
	if a.format.mode == toolFormatTagWithJSON {
		suffixParser := buildTagged(func(b *Builder) Expr {
			nonJSON := b.Do(Or(Marker(), Sum(Not(Lit("{")), Not(Lit("[")), Any())))
			afterJSON := b.Do(Add(ZeroOrMore(notMarkerAny()), Marker()))
			return Add(Tag("ext", ZeroOrMore(nonJSON)), afterJSON)
		})
		if res := suffixParser.extract(d.suffix); res.ok() {
			a.function.nameSuffix += res.tags["ext"]
		}
	} else {
		suffixParser := buildTagged(func(b *Builder) Expr {
			return Tag("ext", ZeroOrMore(notMarkerAny()))
		})
		if res := suffixParser.extract(d.suffix); res.ok() {
			a.function.nameSuffix += res.tags["ext"]
			argStart := func() Expr { return Sum(Marker(), Space(), Choice(Lit(argFirst), Lit(argSecond))) }
			sepParser := buildTagged(func(b *Builder) Expr {
				return Add(Tag("sep", ZeroOrMore(Add(Not(argStart()), Any()))), argStart())
			})
			if sr := sepParser.extract(substr(d.suffix, uint64(len(res.tags["ext"])), npos)); sr.ok() {
				a.function.argsSeparator = trimWhitespace(sr.tags["sep"])
			}
		}
	}
	suffixMarker := a.format.perCallEnd
	if suffixMarker == "" {
		suffixMarker = a.format.sectionEnd
	}
	closer := ""
	if suffixMarker == "" {
		if nc, ok := compareVariants(t, p, setMessages(probeUser(), assistantMsg(assistantText))); ok {
			l := nc.diff.left
			closer = substr(l, find(l, "YYYY")+4, npos)
		}
	} else {
		closer = upTo(d.suffix, suffixMarker)
	}
	if closer != "" {
		switch a.format.mode {
		case toolFormatTagWithTagged:
			cp := buildTagged(func(b *Builder) Expr {
				return Sum(Until("YYYY"), Lit("YYYY"), Space(), Marker(), Space(), Tag("close", Rest()))
			})
			if res := cp.extract(closer); res.ok() {
				a.function.close = res.tags["close"]
			}
		case toolFormatTagWithJSON:
			cp := buildTagged(func(b *Builder) Expr {
				return Sum(Until("YYYY"), Lit("YYYY"), Tag("post_val", Rest()))
			})
			if res := cp.extract(closer); res.ok() {
				post := res.tags["post_val"]
				if i := strings.LastIndexAny(post, "}]"); i >= 0 && i < len(post)-1 {
					a.function.close = trimLeadingWhitespace(post[i+1:])
				}
			}
		}
	}
	a.function.close = trimLeadingWhitespace(a.function.close)
}

// lastMarkerExpr matches a marker with nothing but text after it to the
// end.
func lastMarkerExpr() Expr { return Sum(Marker(), ZeroOrMore(notMarkerAny()), End()) }

func (a *analyzeTools) extractArgumentNameMarkers(t *template) {
	c, ok := compareVariants(t, toolProbe(probeUser(), withCalls(firstCallOneArg())), setMessages(probeUser(), withCalls(firstCallOtherArg())))
	if !ok {
		return
	}
	d := c.diff
	if d.left == "" || d.right == "" {
		return
	}
	leftP := buildTagged(func(b *Builder) Expr {
		return Sum(Tag("pre", Until(argFirst)), Lit(argFirst), Tag("suffix", UntilOneOf(`"`, "X")))
	})
	rightP := buildTagged(func(b *Builder) Expr {
		return Sum(Tag("pre", Until(argSecond)), Lit(argSecond), Tag("suffix", UntilOneOf(`"`, "Y")))
	})
	lr, rr := leftP.extractAnywhere(d.left), rightP.extractAnywhere(d.right)
	switch {
	case lr.ok() && rr.ok() && lr.tags["pre"] != "" && lr.tags["pre"] == rr.tags["pre"] && lr.tags["suffix"] == rr.tags["suffix"]:
		a.arguments.namePrefix = lr.tags["pre"]
		a.arguments.nameSuffix = lr.tags["suffix"]
	case strings.HasPrefix(d.left, argFirst) && strings.HasPrefix(d.right, argSecond):
		pre := buildTagged(func(b *Builder) Expr {
			last := b.Do(lastMarkerExpr())
			return Add(ZeroOrMore(Add(Not(last), Any())), Tag("name_prefix", last))
		})
		if res := pre.extract(d.prefix); res.ok() {
			a.arguments.namePrefix = res.tags["name_prefix"]
		} else {
			a.arguments.namePrefix = d.prefix
		}
		after := d.left[len(argFirst):] + d.suffix
		suf := buildTagged(func(b *Builder) Expr {
			return Tag("suffix", Sum(ZeroOrMore(notMarkerAny()), Marker(), Space()))
		})
		if res := suf.extractAnywhere(after); res.ok() {
			a.arguments.nameSuffix = res.tags["suffix"]
		}
	}
}

func (a *analyzeTools) extractArgumentValueMarkers(t *template) {
	c, ok := compareVariants(t, toolProbe(probeUser(), withCalls(firstCallOneArg())), setMessages(probeUser(), withCalls(firstCallOneArgOtherVal())))
	if !ok {
		return
	}
	d := c.diff
	if d.left != "XXXX" || d.right != "YYYY" {
		return
	}
	ending := argFirst + a.arguments.nameSuffix
	prefix := d.prefix
	if i := strings.LastIndex(prefix, ending); i >= 0 {
		prefix = prefix[i+len(ending):]
	}
	if prefix != "" {
		pp := buildTagged(func(b *Builder) Expr {
			last := b.Do(lastMarkerExpr())
			return Add(ZeroOrMore(Add(Not(last), Any())), Tag("val_prefix", last))
		})
		if res := pp.extract(prefix); res.ok() {
			a.arguments.valuePrefix = res.tags["val_prefix"]
		} else {
			a.arguments.valuePrefix = prefix
		}
	}
	vs := d.suffix
	if a.function.close != "" {
		vs = upTo(vs, a.function.close)
	} else if a.format.perCallEnd != "" || a.format.sectionEnd != "" {
		end := a.format.perCallEnd
		if end == "" {
			end = a.format.sectionEnd
		}
		vs = upTo(vs, end)
	}
	if trimWhitespace(vs) != "" {
		a.arguments.valueSuffix = vs
	}
}

func (a *analyzeTools) extractArgumentSeparator(t *template) {
	c, ok := compareVariants(t, toolProbe(probeUser(), withCalls(firstCallOneArg())), setMessages(probeUser(), withCalls(firstCall())))
	if !ok {
		return
	}
	if c.diff.right != "" {
		a.arguments.separator = untilCommonPrefix(c.diff.right, argFirst, argSecond)
	}
}

func (a *analyzeTools) extractArgsMarkers(t *template) {
	c, ok := compareVariants(t, toolProbe(probeUser(), withCalls(firstCallZeroArgs())), setMessages(probeUser(), withCalls(firstCallOneArg())))
	if !ok || a.format.mode != toolFormatJSONNative {
		return
	}
	d := c.diff
	prefixMarker, suffixMarker := a.format.sectionStart, a.format.sectionEnd
	if prefixMarker == "" {
		prefixMarker = a.format.perCallStart
	}
	if suffixMarker == "" {
		suffixMarker = a.format.perCallEnd
	}
	prefixPos := uint64(0)
	if prefixMarker != "" {
		prefixPos = rfind(d.prefix, prefixMarker)
	}
	suffixPos := uint64(len(d.suffix))
	if suffixMarker != "" {
		suffixPos = find(d.suffix, suffixMarker)
	}
	if prefixPos == npos {
		prefixPos = 0
	}
	if suffixPos == npos {
		suffixPos = uint64(len(d.suffix))
	}
	prefixCut := substr(d.prefix, prefixPos+uint64(len(prefixMarker)), npos)
	suffixCut := substr(d.suffix, 0, suffixPos)
	start := untilCommonPrefix(prefixCut, "{}", "{\"first\":")
	end := afterCommonSuffix(suffixCut, "{}", "\"XXXX\"}")
	if start == "" && end == "" {
		return
	}
	if i := strings.Index(start, funFirst); i >= 0 {
		start = start[i+len(funFirst):]
	}
	if i := strings.Index(start, callID001); i >= 0 {
		start = start[i+len(callID001):]
	}
	a.arguments.start, a.arguments.end = start, end
}

func (a *analyzeTools) extractCallIDMarkers(t *template) {
	c, ok := compareVariants(t, toolProbe(probeUser(), withCalls(firstCall())), setMessages(probeUser(), withCalls(firstCallAltID())))
	if !ok {
		return
	}
	d := c.diff
	if d.left == "" && d.right == "" {
		return
	}
	common := callID001[:commonPrefixLen(callID001, callID999)]
	inPrefix := strings.LastIndex(d.prefix, funFirst)
	inSuffix := strings.Index(d.suffix, funFirst)
	lastMarker := func(s string) string {
		p := buildTagged(func(b *Builder) Expr {
			last := b.Do(lastMarkerExpr())
			return Add(ZeroOrMore(Add(Not(last), Any())), Tag("m", Marker()))
		})
		if res := p.extractAnywhere(s); res.ok() {
			return res.tags["m"]
		}
		return ""
	}
	firstMarker := func(s string) string {
		p := buildTagged(func(b *Builder) Expr { return Tag("m", Marker()) })
		if res := p.extractAnywhere(s); res.ok() {
			return res.tags["m"]
		}
		return ""
	}
	switch {
	case inPrefix >= 0 && inSuffix < 0:
		argsInPrefix := strings.IndexByte(d.prefix[inPrefix:], '{')
		if argsInPrefix >= 0 {
			argsInPrefix += inPrefix
		}
		argsInSuffix := strings.IndexByte(d.suffix, '{')
		if argsInSuffix >= 0 && (argsInPrefix < 0 || argsInPrefix > len(d.prefix)) {
			a.callID.pos = callIDBetweenFuncAndArgs
			afterFunc := d.prefix[inPrefix+len(funFirst):]
			idp := buildTagged(func(b *Builder) Expr {
				return Sum(Tag("prefix", Marker()), ZeroOrMore(Sum(Not(Marker()), Not(Lit(common)), Any())), Lit(common))
			})
			if res := idp.extractAnywhere(afterFunc); res.ok() {
				a.callID.prefix = res.tags["prefix"]
			} else {
				a.callID.prefix = lastMarker(afterFunc)
			}
			sp := buildTagged(func(b *Builder) Expr {
				return Add(ZeroOrMore(Sum(Not(Marker()), Not(Lit("{")), Any())), Tag("suffix", Marker()))
			})
			if res := sp.extractAnywhere(d.suffix); res.ok() {
				a.callID.suffix = res.tags["suffix"]
			}
		} else if argsInPrefix >= 0 {
			a.callID.pos = callIDPostArgs
			afterArgs := d.prefix[argsInPrefix:]
			if i := strings.LastIndexByte(afterArgs, '}'); i >= 0 {
				a.callID.prefix = lastMarker(afterArgs[i+1:])
			}
			a.callID.suffix = firstMarker(d.suffix)
		}
	case inSuffix >= 0 && inPrefix < 0:
		a.callID.pos = callIDPreFuncName
		a.callID.prefix = lastMarker(d.prefix)
		a.callID.suffix = firstMarker(d.suffix[:inSuffix])
	}
	if a.callID.prefix == a.arguments.end {
		a.callID.prefix = ""
	}
	if a.callID.suffix == a.arguments.start {
		a.callID.suffix = ""
	}
	if a.callID.pos != callIDNone && a.callID.suffix != "" && strings.HasPrefix(a.format.perCallEnd, a.callID.suffix) {
		a.format.perCallEnd = ""
	}
}

// asciiLower is std::tolower over each byte, in the C locale.
func asciiLower(s string) string {
	b := []byte(s)
	for i, c := range b {
		if c >= 'A' && c <= 'Z' {
			b[i] = c + 'a' - 'A'
		}
	}
	return string(b)
}
