// Port of llama.cpp common/chat.cpp (v0.5.0): common_chat_templates_apply,
// its Jinja and legacy routes, the direct render and the generation
// prompt, and the workarounds for templates' quirks.

package chat

import (
	"os"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/ggload/ggload/chat/internal/jinja"
	"github.com/ggload/ggload/chat/internal/legacy"
	"github.com/ggload/ggload/chat/internal/peg"
	"github.com/ggload/ggload/grammar"
	"github.com/ggload/ggload/internal/ojson"
)

// ReasoningFormat is common_reasoning_format. The zero value is none.
type ReasoningFormat int

// The reasoning formats.
const (
	ReasoningNone ReasoningFormat = iota
	ReasoningAuto
	ReasoningDeepSeekLegacy
	ReasoningDeepSeek
)

var reasoningNames = [...]string{"none", "auto", "deepseek-legacy", "deepseek"}

// String is common_reasoning_format_name.
func (f ReasoningFormat) String() string {
	if f >= 0 && int(f) < len(reasoningNames) {
		return reasoningNames[f]
	}
	return "reasoning(" + itoa(int(f)) + ")"
}

// ParseReasoningFormat is common_reasoning_format_from_name.
func ParseReasoningFormat(name string) (ReasoningFormat, error) {
	for i, n := range reasoningNames {
		if n == name {
			return ReasoningFormat(i), nil
		}
	}
	return 0, &Error{Msg: "Unknown reasoning format: " + name}
}

// Format is common_chat_format: how a reply is parsed.
type Format int

// The formats.
const (
	FormatContentOnly Format = iota
	FormatPEGSimple
	FormatPEGNative
	FormatPEGGemma4
	FormatPEGMinimaxM3
)

// String is common_chat_format_name.
func (f Format) String() string {
	switch f {
	case FormatContentOnly:
		return "Content-only"
	case FormatPEGSimple:
		return "peg-simple"
	case FormatPEGNative:
		return "peg-native"
	case FormatPEGGemma4:
		return "peg-gemma4"
	case FormatPEGMinimaxM3:
		return "peg-minimax-m3"
	}
	return "Unknown chat format"
}

// TriggerType is common_grammar_trigger_type.
type TriggerType int

// The trigger types.
const (
	TriggerToken TriggerType = iota
	TriggerWord
	TriggerPattern
	TriggerPatternFull
)

// GrammarTrigger is common_grammar_trigger: what starts a lazy grammar.
type GrammarTrigger struct {
	Type  TriggerType
	Value string
}

// Role is common_chat_role.
type Role int

// The roles.
const (
	RoleUnknown Role = iota
	RoleSystem
	RoleAssistant
	RoleUser
	RoleTool
)

// String is common_chat_role_to_string.
func (r Role) String() string {
	switch r {
	case RoleSystem:
		return "system"
	case RoleAssistant:
		return "assistant"
	case RoleUser:
		return "user"
	case RoleTool:
		return "tool"
	}
	return ""
}

// MessageDelimiter is common_chat_msg_delimiter: the text that starts a
// message of a role in the prompt.
type MessageDelimiter struct {
	Role      Role
	Delimiter string
}

// Inputs are common_chat_templates_inputs. The zero value is llama.cpp's
// defaults: a generation prompt, the Jinja route, thinking enabled, tool
// choice auto, reasoning not extracted.
type Inputs struct {
	Messages []Message
	// Grammar is a GBNF grammar to constrain the reply with; JSONSchema
	// a JSON schema (as text) to do so.
	Grammar    string
	JSONSchema string
	// NoGenerationPrompt leaves the assistant's turn unopened
	// (add_generation_prompt false).
	NoGenerationPrompt bool
	// Continue continues the last message (continue_final_message).
	Continue Continuation
	// Legacy uses llama.cpp's built-in templates, not Jinja (--no-jinja).
	Legacy bool

	// The rest is the Jinja route's only.
	Tools             []Tool
	ToolChoice        ToolChoice
	ParallelToolCalls bool
	ReasoningFormat   ReasoningFormat
	// DisableThinking is enable_thinking false.
	DisableThinking bool
	// Now is the time templates see; the zero Time means
	// SOURCE_DATE_EPOCH's where it is set, else the clock's.
	Now time.Time
	// Kwargs are chat_template_kwargs: names and JSON texts, given to the
	// template as variables.
	Kwargs map[string]string
	// ForcePureContent renders without separating reasoning or tools
	// (--skip-chat-parsing).
	ForcePureContent bool
}

// Params are common_chat_params: the prompt, and how to constrain and
// parse the reply to it.
type Params struct {
	Format           Format
	Prompt           string
	Grammar          string
	GrammarLazy      bool
	GenerationPrompt string
	SupportsThinking bool
	ThinkingStartTag string
	ThinkingEndTags  []string
	GrammarTriggers  []GrammarTrigger
	PreservedTokens  []string
	AdditionalStops  []string
	// MessageDelimiters start each role's messages in the prompt.
	MessageDelimiters []MessageDelimiter

	parser *peg.Arena // nil: the content-only parser
}

// genParams is autoparser::generation_params.
type genParams struct {
	messages          ojson.Value
	tools             ojson.Value
	toolChoice        ToolChoice
	jsonSchema        ojson.Value
	parallelToolCalls bool
	reasoningFormat   ReasoningFormat
	grammar           string
	addGenPrompt      bool
	continuation      Continuation
	continueMsg       Message
	enableThinking    bool
	now               time.Time
	extraContext      ojson.Value
	addBOS, addEOS    bool
	isInference       bool
	markInput         bool
}

func newGenParams() genParams {
	return genParams{parallelToolCalls: true, reasoningFormat: ReasoningAuto, enableThinking: true, isInference: true, markInput: true}
}

func (g *genParams) hasContinuation() bool {
	return g.continuation != ContinueNone && !g.continueMsg.Empty()
}

func (g *genParams) hasTools() bool { return g.tools.IsArray() && g.tools.Len() > 0 }

func (g *genParams) hasSchema() bool { return g.jsonSchema.IsObject() }

// renderContent is msg.render_content(), thrown.
func renderContent(m *Message) string {
	s, err := m.RenderContent("\n\n")
	if err != nil {
		peg.Throw(err)
	}
	return s
}

// normalize is messages_inp_normalizer: content as strings or as typed
// parts, whichever alone the template supports.
func normalize(messages ojson.Value, c jinja.Caps) ojson.Value {
	onlyString := c.SupportsStringContent && !c.SupportsTypedContent
	onlyTyped := !c.SupportsStringContent && c.SupportsTypedContent
	if !onlyString && !onlyTyped || !messages.IsArray() {
		return messages
	}
	out := ojson.ArrayValue()
	for _, m := range messages.Elems() {
		m = m.Clone()
		if content, ok := m.Get("content"); ok && m.IsObject() {
			switch {
			case onlyTyped && content.IsString():
				m.Set("content", ojson.ArrayValue(ojson.ObjectValue(
					ojson.Member{Key: "type", Value: str("text")}, ojson.Member{Key: "text", Value: content})))
			case onlyString && content.IsArray():
				parts := content.Elems()
				m.Set("content", str(joinParts(func(i int) string { return valueString(parts[i], "type", "") },
					func(i int) string { return valueString(parts[i], "text", "") }, len(parts))))
			}
		}
		out.Append(m)
	}
	return out
}

type caps struct{ stringContent, typedContent bool }

// renderMessages is render_message_to_json.
func renderMessages(msgs []Message, c caps) (out ojson.Value, err error) {
	defer peg.Catch(&err)
	return messagesJSON(msgs, jinja.Caps{SupportsStringContent: c.stringContent, SupportsTypedContent: c.typedContent}), nil
}

func messagesJSON(msgs []Message, c jinja.Caps) ojson.Value {
	arr := ojson.ArrayValue()
	for i := range msgs {
		j, err := msgs[i].JSON(false)
		if err != nil {
			peg.Throw(err)
		}
		arr.Append(j)
	}
	return normalize(arr, c)
}

// defaultNow is the time when Inputs.Now is zero.
func defaultNow() time.Time {
	if s, ok := os.LookupEnv("SOURCE_DATE_EPOCH"); ok {
		if sec, err := strconv.ParseInt(s, 10, 64); err == nil {
			return time.Unix(sec, 0)
		}
	}
	return time.Now()
}

// directApply is common_chat_template_direct_apply_impl: the template
// rendered on the inputs (or the overrides), as the pin's runtime does.
func directApply(t *template, in *genParams, msgs, tools, additional *ojson.Value) string {
	inp := ojson.ObjectValue()
	if msgs != nil {
		inp.Set("messages", *msgs)
	} else {
		inp.Set("messages", normalize(in.messages, t.caps))
	}
	inp.Set("bos_token", str(t.bos))
	inp.Set("eos_token", str(t.eos))
	inp.Set("enable_thinking", ojson.BoolValue(in.enableThinking))
	if tools != nil {
		inp.Set("tools", *tools)
	} else if !peg.Empty(in.tools) {
		inp.Set("tools", in.tools)
	}
	if in.extraContext.IsObject() {
		for _, m := range in.extraContext.Members() {
			inp.Set(m.Key, m.Value)
		}
	}
	if additional != nil {
		for _, m := range additional.Members() {
			inp.Set(m.Key, m.Value)
		}
	}
	if in.addGenPrompt {
		inp.Set("add_generation_prompt", ojson.BoolValue(true))
	}
	now := in.now
	if now.IsZero() {
		now = defaultNow()
	}
	ctx := &jinja.Context{Now: now}
	if v, ok := inp.Get("preserve_reasoning"); ok && v.IsBool() {
		ctx.PreserveReasoning(v.Bool())
	}
	if v, ok := inp.Get("reasoning_effort"); ok && v.IsString() {
		ctx.ReasoningEffort(v.Str())
	}
	if err := ctx.SetJSON(inp, in.markInput); err != nil {
		peg.Throw(templateError(err))
	}
	out, err := t.prog.Render(ctx)
	if err != nil {
		peg.Throw(templateError(err))
	}
	if in.addBOS && strings.HasPrefix(out, t.bos) {
		out = out[len(t.bos):]
	}
	if in.addEOS && strings.HasSuffix(out, t.eos) {
		out = out[:len(out)-len(t.eos)]
	}
	return out
}

// generationPrompt is common_chat_template_generation_prompt_impl: what
// the template adds for the assistant's turn (the render with the
// generation prompt past its common prefix with the render without).
func generationPrompt(t *template, in *genParams, msgs, tools, additional *ojson.Value) string {
	p := *in
	p.addGenPrompt = false
	p.continuation = ContinueNone
	without := directApply(t, &p, msgs, tools, additional)
	p.addGenPrompt = true
	with := directApply(t, &p, msgs, tools, additional)
	n := 0
	for n < len(without) && n < len(with) && without[n] == with[n] {
		n++
	}
	return with[n:]
}

// The workarounds the pin applies to the messages before rendering.

func mapDeveloperToSystem(messages ojson.Value) {
	for i, m := range messages.Elems() {
		if r, ok := m.Get("role"); ok && m.IsObject() && r.IsString() && r.Str() == "developer" {
			m.Set("role", str("system"))
			messages.Elems()[i] = m
		}
	}
}

// systemNotSupported merges a leading system message into the next one,
// or drops it.
func systemNotSupported(messages *ojson.Value) {
	ms := messages.Elems()
	if len(ms) == 0 {
		return
	}
	if r := at(ms[0], "role"); !r.IsString() || r.Str() != "system" {
		return
	}
	rest := ojson.ArrayValue(ms[1:]...)
	if len(ms) > 1 {
		second := ms[1]
		b := asString(at(second, "content")) // GCC evaluates the right operand first
		a := asString(at(ms[0], "content"))
		second.Set("content", str(a+"\n"+b))
	}
	*messages = rest
}

func requiresNonNullContent(messages ojson.Value) {
	for i, m := range messages.Elems() {
		if contains(m, "tool_calls") && !contains(m, "content") {
			m.Set("content", str(""))
			messages.Elems()[i] = m
		}
	}
}

// funcArgsNotString parses tool call arguments held as text.
func funcArgsNotString(messages ojson.Value) {
	for _, m := range messages.Elems() {
		if !contains(m, "tool_calls") {
			continue
		}
		calls := m.At("tool_calls")
		for i, tc := range elems(calls) {
			f, ok := tc.Get("function")
			if !ok || !tc.IsObject() || !contains(f, "arguments") {
				continue
			}
			args := f.At("arguments")
			if !args.IsString() {
				continue
			}
			v, err := ojson.ParseString(args.Str())
			if err != nil {
				invalid("Failed to parse tool call arguments as JSON: " + err.Error())
			}
			f.Set("arguments", v)
			tc.Set("function", f)
			if calls.IsArray() {
				calls.Elems()[i] = tc
			}
		}
	}
}

// trimAllContent trims the messages' contents, reasoning and text parts.
func trimAllContent(msgs []Message) []Message {
	out := make([]Message, len(msgs))
	for i, m := range msgs {
		m.Content = trimWhitespace(m.Content)
		m.ReasoningContent = trimWhitespace(m.ReasoningContent)
		parts := make([]ContentPart, len(m.ContentParts))
		for j, p := range m.ContentParts {
			if p.Type == "text" {
				p.Text = trimWhitespace(p.Text)
			}
			parts[j] = p
		}
		m.ContentParts = parts
		out[i] = m
	}
	return out
}

var monthAbbr = [...]string{"Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec"}

// extraContext is common_chat_extra_context: the date, as "%b %d %Y" and
// "%d %b %Y".
func extraContext(now time.Time) ojson.Value {
	d := now.Day()
	dd := strconv.Itoa(d)
	if d < 10 {
		dd = "0" + dd
	}
	mon, year := monthAbbr[now.Month()-1], strconv.Itoa(now.Year())
	return ojson.ObjectValue(ojson.Member{Key: "datetime", Value: str(mon + " " + dd + " " + year)},
		ojson.Member{Key: "date_string", Value: str(dd + " " + mon + " " + year)})
}

// Apply is common_chat_templates_apply: the prompt for the inputs, and
// how to constrain and parse the reply. Its errors are the pin's: a
// malformed message, a template that fails to render (an *Error naming
// the template and the place), a grammar with tools.
func (t *Templates) Apply(in *Inputs) (p *Params, err error) {
	defer peg.Catch(&err)
	if in.Legacy {
		return t.applyLegacy(in), nil
	}
	return t.applyJinja(in), nil
}

func (t *Templates) applyJinja(in *Inputs) *Params {
	g := newGenParams()
	var err error
	if g.tools, err = ToolsJSON(in.Tools); err != nil {
		peg.Throw(err)
	}
	tmpl := t.def
	if g.tools.IsArray() && t.toolUse != nil {
		tmpl = t.toolUse
	}
	src := tmpl.src
	msgs := in.Messages
	if strings.Contains(src, "You have access to the following functions in JSONSchema format") {
		msgs = trimAllContent(msgs) // StepFun: leftover whitespace makes it loop
	}
	g.messages = messagesJSON(msgs, tmpl.caps)
	g.toolChoice = in.ToolChoice
	g.reasoningFormat = in.ReasoningFormat
	g.enableThinking = !in.DisableThinking
	g.grammar = in.Grammar
	g.now = in.Now
	if g.now.IsZero() {
		g.now = defaultNow()
	}
	g.addGenPrompt = !in.NoGenerationPrompt
	g.addBOS, g.addEOS = t.addBOS, t.addEOS
	g.continuation = in.Continue
	if g.continuation != ContinueNone {
		g.addGenPrompt = false
		if len(in.Messages) > 0 {
			g.continueMsg = in.Messages[len(in.Messages)-1]
			g.messages = ojson.ArrayValue(g.messages.Elems()[:g.messages.Len()-1]...)
		}
		if g.continuation == ContinueAuto && len(in.Messages) > 0 {
			g.continuation = ContinueContent
			if m := &g.continueMsg; m.ReasoningContent != "" && m.Content == "" && len(m.ContentParts) == 0 {
				g.continuation = ContinueReasoning
			}
		}
	}
	if !strings.Contains(src, "<|channel|>") {
		mapDeveloperToSystem(g.messages)
	}
	if !tmpl.caps.SupportsSystemRole {
		systemNotSupported(&g.messages)
	}
	if tmpl.caps.SupportsToolCalls {
		requiresNonNullContent(g.messages)
	}
	if tmpl.caps.SupportsObjectArguments {
		funcArgsNotString(g.messages)
	}
	g.extraContext = extraContext(g.now)
	keys := make([]string, 0, len(in.Kwargs))
	for k := range in.Kwargs {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		v, err := ojson.ParseString(in.Kwargs[k])
		if err != nil {
			peg.Throw(err)
		}
		g.extraContext.Set(k, v)
	}
	if in.JSONSchema != "" {
		if g.jsonSchema, err = ojson.ParseString(in.JSONSchema); err != nil {
			peg.Throw(err)
		}
	}
	g.parallelToolCalls = in.ParallelToolCalls
	if g.tools.IsArray() && g.toolChoice != ToolChoiceNone && g.grammar != "" {
		invalid("Cannot specify grammar with tools")
	}
	if in.ForcePureContent {
		return pureContent(tmpl, &g)
	}
	if p := specialized(tmpl, src, &g); p != nil {
		return p
	}
	return autoParse(tmpl, &g)
}

// pureContent is the force_pure_content route: everything the model says
// is content.
func pureContent(tmpl *template, g *genParams) *Params {
	c := *g
	c.reasoningFormat = ReasoningNone
	p := &Params{Format: FormatPEGNative}
	p.Prompt = directApply(tmpl, &c, nil, nil, nil)
	p.GenerationPrompt = generationPrompt(tmpl, g, nil, nil, nil)
	p.parser = build(func(b *peg.Builder) peg.Expr {
		return peg.Shl(peg.Lit(p.GenerationPrompt), peg.Content(peg.Rest()))
	})
	return p
}

// build is build_chat_peg_parser, what it throws thrown on.
func build(fn func(b *peg.Builder) peg.Expr) *peg.Arena {
	a, err := peg.BuildParser(fn)
	if err != nil {
		peg.Throw(err)
	}
	return a
}

// buildGrammar is build_grammar over the parser's rules.
func buildGrammar(a *peg.Arena, lazy bool) string {
	g, err := grammar.Build(func(b *grammar.Builder) { a.BuildGrammar(b, lazy) }, grammar.BuildOptions{})
	if err != nil {
		peg.Throw(err)
	}
	return g
}

// autoParse is the differential autoparser's route.
func autoParse(tmpl *template, g *genParams) (p *Params) {
	err := rethrowTo("Unable to generate parser for this template. Automatic parser generation failed: ", "", func() {
		ap := tmpl.analyze()
		p = ap.generate(tmpl, g)
		if ap.assistantStart != "" {
			p.MessageDelimiters = append(p.MessageDelimiters, MessageDelimiter{RoleAssistant, ap.assistantStart})
		}
		if ap.userStart != "" {
			p.MessageDelimiters = append(p.MessageDelimiters, MessageDelimiter{RoleUser, ap.userStart})
		}
		p.SupportsThinking = ap.reasoning.mode != reasoningNone
		if p.SupportsThinking {
			p.ThinkingStartTag = trimWhitespace(ap.reasoning.start)
			if end := trimWhitespace(ap.reasoning.end); end != "" {
				p.ThinkingEndTags = []string{end}
			}
		}
	})
	if err != nil {
		peg.Throw(err)
	}
	return p
}

// applyLegacy is common_chat_templates_apply_legacy: llama.cpp's built-in
// format that the template is detected as.
func (t *Templates) applyLegacy(in *Inputs) *Params {
	chat := make([]legacy.Message, len(in.Messages))
	for i, m := range in.Messages {
		content := m.Content
		for _, part := range m.ContentParts {
			if part.Type != "text" && part.Type != "media_marker" {
				continue
			}
			if content != "" {
				content += "\n"
			}
			content += part.Text
		}
		chat[i] = legacy.Message{Role: m.Role, Content: content}
	}
	out, ok := legacy.Apply(t.def.src, chat, !in.NoGenerationPrompt)
	if !ok {
		invalid("this custom template is not supported, try using --jinja")
	}
	p := &Params{Prompt: out, Grammar: in.Grammar}
	if in.JSONSchema != "" {
		schema, err := ojson.ParseString(in.JSONSchema)
		if err != nil {
			peg.Throw(err)
		}
		if p.Grammar, err = grammar.FromJSONSchema(schema, false); err != nil {
			peg.Throw(err)
		}
	}
	return p
}

// FormatSingle is common_chat_format_single: the text one more message
// adds to the prompt of the past ones (with the generation prompt after a
// user message, addAssistant), as llama-cli formats a conversation turn by
// turn. now is the time the templates see (the zero Time: the clock's,
// or SOURCE_DATE_EPOCH's).
func (t *Templates) FormatSingle(past []Message, msg Message, addAssistant, useJinja bool, now time.Time) (string, error) {
	in := &Inputs{Legacy: !useJinja, Now: now}
	var before string
	if len(past) > 0 {
		in.Messages = past
		in.NoGenerationPrompt = true
		p, err := t.Apply(in)
		if err != nil {
			return "", err
		}
		before = p.Prompt
	}
	var b strings.Builder
	if addAssistant && before != "" && before[len(before)-1] == '\n' {
		b.WriteByte('\n')
	}
	in.Messages = append(append([]Message(nil), past...), msg)
	in.NoGenerationPrompt = !addAssistant
	p, err := t.Apply(in)
	if err != nil {
		return "", err
	}
	if len(before) > len(p.Prompt) {
		return "", &Error{Msg: "basic_string::substr: __pos (which is " + itoa(len(before)) +
			") > this->size() (which is " + itoa(len(p.Prompt)) + ")"}
	}
	b.WriteString(p.Prompt[len(before):])
	return b.String(), nil
}

// FormatExample is common_chat_format_example: a short conversation in
// the template's format.
func (t *Templates) FormatExample(useJinja bool, kwargs map[string]string) (string, error) {
	p, err := t.Apply(&Inputs{Legacy: !useJinja, Kwargs: kwargs, Messages: []Message{
		{Role: "system", Content: "You are a helpful assistant"},
		{Role: "user", Content: "Hello"},
		{Role: "assistant", Content: "Hi there"},
		{Role: "user", Content: "How are you?"},
	}})
	if err != nil {
		return "", err
	}
	return p.Prompt, nil
}

func itoa(n int) string { return strconv.Itoa(n) }
