// Port of llama.cpp tools/server/server-common.cpp (v0.5.0): the chat part
// of oaicompat_chat_params_parse, how llama-server turns an OpenAI chat
// completion request into the inputs of common_chat_templates_apply.

package chat

import (
	"github.com/ggload/ggload/chat/internal/peg"
	"github.com/ggload/ggload/internal/ojson"
)

// ServerOptions are llama-server's chat options. The zero value is its
// defaults.
type ServerOptions struct {
	// Legacy is --no-jinja.
	Legacy bool
	// NoPrefillAssistant is --no-prefill-assistant: a trailing assistant
	// message is not continued.
	NoPrefillAssistant bool
	// ReasoningFormat is --reasoning-format ("" is deepseek).
	ReasoningFormat string
	// Reasoning is --reasoning on|off|auto ("" is auto: on where the
	// template can think; on and off also set the enable_thinking
	// kwarg).
	Reasoning string
	// Kwargs are --chat-template-kwargs (and --reasoning-effort's):
	// names and JSON texts. preserve_reasoning defaults to true, as
	// llama-server's does.
	Kwargs map[string]string
	// ForcePureContent is --skip-chat-parsing.
	ForcePureContent bool
}

// jsonValue is llama-server's json_value: the member, if present, not
// null and of the wanted kind (else the default).
func jsonValue(body ojson.Value, key string, ok func(ojson.Value) bool) (ojson.Value, bool) {
	v, has := body.Get(key)
	if !has || v.IsNull() || !ok(v) {
		return ojson.Value{}, false
	}
	return v, true
}

func jsonString(body ojson.Value, key, def string) string {
	if v, ok := jsonValue(body, key, ojson.Value.IsString); ok {
		return v.Str()
	}
	return def
}

func jsonBool(body ojson.Value, key string, def bool) bool {
	if v, ok := jsonValue(body, key, ojson.Value.IsBool); ok {
		return v.Bool()
	}
	return def
}

// RequestInputs is how llama-server reads an OpenAI chat completion
// request ("messages", "tools", "tool_choice", "response_format",
// "json_schema", "grammar", "parallel_tool_calls",
// "add_generation_prompt", "continue_final_message", "reasoning_format",
// "chat_template_kwargs", "reasoning_effort"): the inputs to Apply, or
// llama-server's error for the request.
func (t *Templates) RequestInputs(body ojson.Value, opts ServerOptions) (in *Inputs, err error) {
	defer peg.Catch(&err)
	in = &Inputs{Legacy: opts.Legacy, ForcePureContent: opts.ForcePureContent}
	tools, _ := body.Get("tools")
	if tools.IsNull() {
		tools = ojson.Value{}
	}
	hasTools := tools.IsArray() && tools.Len() > 0
	toolChoice := jsonString(body, "tool_choice", "auto")
	if opts.Legacy {
		if hasTools {
			invalid("tools param requires --jinja flag")
		}
		if toolChoice != "auto" {
			invalid("tool_choice param requires --jinja flag")
		}
	}
	anyValue := func(ojson.Value) bool { return true }
	schema, _ := jsonValue(body, "json_schema", anyValue)
	grammarText := jsonString(body, "grammar", "")
	if !schema.IsNull() && grammarText != "" {
		invalid("Cannot use both json_schema and grammar")
	}
	if body.Has("response_format") {
		rf, ok := jsonValue(body, "response_format", anyValue)
		if !ok {
			rf = ojson.ObjectValue()
		}
		switch typ := jsonString(rf, "type", ""); typ {
		case "json_object":
			if rf.Has("schema") || peg.Empty(schema) {
				if s, ok := jsonValue(rf, "schema", anyValue); ok {
					schema = s
				} else {
					schema = ojson.ObjectValue()
				}
			}
		case "json_schema":
			wrapper, ok := jsonValue(rf, "json_schema", anyValue)
			if !ok {
				wrapper = ojson.ObjectValue()
			}
			if s, ok := jsonValue(wrapper, "schema", anyValue); ok {
				schema = s
			} else {
				schema = ojson.ObjectValue()
			}
		case "", "text":
		default:
			invalid("response_format type must be one of \"text\" or \"json_object\", but got: " + typ)
		}
	}
	if schema.IsObject() && schema.Len() == 0 {
		schema = ojson.ObjectValue(ojson.Member{Key: "type", Value: str("object")})
	}
	if !body.Has("messages") {
		invalid("'messages' is required")
	}
	messages := body.At("messages")
	if err := CheckMessages(messages); err != nil {
		peg.Throw(err)
	}
	if in.Messages, err = ParseMessages(messages); err != nil {
		peg.Throw(err)
	}
	if in.Tools, err = ParseTools(tools); err != nil {
		peg.Throw(err)
	}
	if in.ToolChoice, err = ParseToolChoice(toolChoice); err != nil {
		peg.Throw(err)
	}
	if !schema.IsNull() {
		in.JSONSchema = dump(schema, -1)
	}
	in.Grammar = grammarText
	in.ParallelToolCalls = jsonBool(body, "parallel_tool_calls", t.Caps()["supports_parallel_tool_calls"])
	in.NoGenerationPrompt = !jsonBool(body, "add_generation_prompt", true)
	if v, ok := body.Get("continue_final_message"); ok {
		in.Continue = ParseContinuation(v)
	}
	n := len(in.Messages)
	if in.Continue == ContinueNone && !opts.NoPrefillAssistant && n > 0 && in.Messages[n-1].Role == "assistant" {
		if n >= 2 && in.Messages[n-2].Role == "assistant" {
			invalid("Cannot have 2 or more assistant messages at the end of the list.")
		}
		in.Continue = ContinueAuto
		in.NoGenerationPrompt = true
	}
	if in.Continue != ContinueNone && !in.NoGenerationPrompt {
		invalid("Cannot set both add_generation_prompt and continue_final_message to true.")
	}
	if in.Continue != ContinueNone && n > 0 && in.Messages[n-1].Role == "assistant" && len(in.Messages[n-1].ToolCalls) > 0 {
		invalid("Cannot continue an assistant message that contains tool calls.")
	}
	format := opts.ReasoningFormat
	if format == "" {
		format = "deepseek"
	}
	if body.Has("reasoning_format") {
		format = asString(body.At("reasoning_format"))
	}
	if in.ReasoningFormat, err = ParseReasoningFormat(format); err != nil {
		peg.Throw(err)
	}
	in.DisableThinking = opts.Legacy || opts.Reasoning == "off" || !t.thinking()
	if len(in.Tools) > 0 && in.ToolChoice != ToolChoiceNone && body.Has("grammar") {
		invalid("Cannot use custom grammar constraints with tools.")
	}
	in.Kwargs = map[string]string{}
	switch opts.Reasoning {
	case "on":
		in.Kwargs["enable_thinking"] = "true"
	case "off":
		in.Kwargs["enable_thinking"] = "false"
	}
	for k, v := range opts.Kwargs {
		in.Kwargs[k] = v
	}
	if _, ok := in.Kwargs["preserve_reasoning"]; !ok {
		in.Kwargs["preserve_reasoning"] = "true"
	}
	if kw, ok := jsonValue(body, "chat_template_kwargs", anyValue); ok {
		for _, m := range peg.Items(kw) {
			in.Kwargs[m.Key] = dump(m.Value, -1)
		}
	}
	switch v, ok := in.Kwargs["enable_thinking"]; {
	case !ok:
	case v == "true":
		in.DisableThinking = false
	case v == "false":
		in.DisableThinking = true
	case v != "" && v[0] == '"':
		invalid("invalid type for \"enable_thinking\" (expected boolean, got string)")
	}
	if body.Has("reasoning_effort") {
		switch effort := jsonString(body, "reasoning_effort", ""); effort {
		case "none":
			in.DisableThinking = true
			delete(in.Kwargs, "reasoning_effort")
		case "":
		default:
			in.Kwargs["reasoning_effort"] = quote(effort)
		}
	}
	return in, nil
}

// thinking is common_chat_templates_support_enable_thinking, once.
func (t *Templates) thinking() bool {
	t.thinkingOnce.Do(func() { t.canThink, _ = t.SupportsThinking() })
	return t.canThink
}
