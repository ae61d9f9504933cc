// Port of llama.cpp common/chat.cpp (v0.5.0): the OpenAI shapes of
// messages and tools (common_chat_msgs_parse_oaicompat,
// common_chat_tools_parse_oaicompat, their inverses), and the checks
// llama-server makes on a request's messages first
// (tools/server/server-common.cpp, oaicompat_chat_params_parse).

package chat

import (
	"github.com/ggload/ggload/chat/internal/peg"
	"github.com/ggload/ggload/internal/ojson"
)

// Error is what llama.cpp's chat code throws, its what() in Msg: a
// malformed message or tool, a template that fails to parse or render
// (with its name and the place in it), a reply that does not parse.
type Error struct {
	Msg string
	// Template names the template that failed (a file, or the model's
	// tokenizer.chat_template), and Line and Col the place in it, where
	// known.
	Template  string
	Line, Col int
}

func (e *Error) Error() string {
	if e.Line > 0 {
		return e.Template + ":" + itoa(e.Line) + ":" + itoa(e.Col) + ": " + e.Msg
	}
	return e.Msg
}

// nlohmann's exceptions, as the pin's common_json (common/json.cpp)
// raises them.

type jsonError string

func (e jsonError) Error() string { return string(e) }

func typeError(code int, msg string) error {
	return jsonError("[json.exception.type_error." + itoa(code) + "] " + msg)
}

// at is json::at(key): the member, or nlohmann's error.
func at(v ojson.Value, key string) ojson.Value {
	if !v.IsObject() {
		peg.Throw(typeError(304, "cannot use at() with "+v.Kind().String()))
	}
	m, ok := v.Get(key)
	if !ok {
		peg.Throw(jsonError("[json.exception.out_of_range.403] key '" + key + "' not found"))
	}
	return m
}

// asString is get<std::string>().
func asString(v ojson.Value) string {
	if !v.IsString() {
		peg.Throw(typeError(302, "type must be string, but is "+v.Kind().String()))
	}
	return v.Str()
}

// valueString is common_json's value(key, default) for a string: the
// default where v is no object or has no such key.
func valueString(v ojson.Value, key, def string) string {
	m, ok := v.Get(key)
	if !ok {
		return def
	}
	return asString(m)
}

// dump is json::dump(indent), its type_error 316 thrown on bad UTF-8.
func dump(v ojson.Value, indent int) string {
	s, err := v.Dump(indent)
	if err != nil {
		peg.Throw(err)
	}
	return s
}

// elems is what a range-for over a json value walks: an array's
// elements, an object's values, nothing for null, else the value itself.
func elems(v ojson.Value) []ojson.Value {
	switch v.Kind() {
	case ojson.Array:
		return v.Elems()
	case ojson.Object:
		var out []ojson.Value
		for _, m := range v.Members() {
			out = append(out, m.Value)
		}
		return out
	case ojson.Null:
		return nil
	}
	return []ojson.Value{v}
}

// contains is json::contains: false for what is not an object.
func contains(v ojson.Value, key string) bool { return v.IsObject() && v.Has(key) }

func invalid(msg string) { peg.Throw(&Error{Msg: msg}) }

// ParseMessages is common_chat_msgs_parse_oaicompat: the messages of an
// OpenAI request ("messages"), or the pin's error ("Failed to parse
// messages: Missing 'role' in message: {...}").
func ParseMessages(messages ojson.Value) (msgs []Message, err error) {
	err = rethrowTo("Failed to parse messages: ", "", func() { msgs = parseMessages(messages) })
	return msgs, err
}

// rethrowTo runs fn and catches what it throws, as the pin's catch that
// throws again with what() between a prefix and a suffix. An *Error keeps
// its template and place.
func rethrowTo(prefix, suffix string, fn func()) (err error) {
	defer func() {
		if err != nil {
			if e, ok := err.(*Error); ok {
				err = &Error{Msg: prefix + e.Msg + suffix, Template: e.Template, Line: e.Line, Col: e.Col}
			} else {
				err = &Error{Msg: prefix + err.Error() + suffix}
			}
		}
	}()
	defer peg.Catch(&err)
	fn()
	return nil
}

func parseMessages(messages ojson.Value) []Message {
	if !messages.IsArray() {
		invalid("Expected 'messages' to be an array, got " + dump(messages, -1))
	}
	var msgs []Message
	for _, message := range messages.Elems() {
		if !message.IsObject() {
			invalid("Expected 'message' to be an object, got " + dump(message, -1))
		}
		var msg Message
		if !message.Has("role") {
			invalid("Missing 'role' in message: " + dump(message, -1))
		}
		msg.Role = asString(message.At("role"))
		hasContent, hasCalls := message.Has("content"), message.Has("tool_calls")
		if hasContent {
			content := message.At("content")
			switch {
			case content.IsString():
				msg.Content = content.Str()
			case content.IsArray():
				for _, part := range content.Elems() {
					if !contains(part, "type") {
						invalid("Missing content part type: " + dump(part, -1))
					}
					t := at(part, "type")
					if !t.IsString() || t.Str() != "text" && t.Str() != "media_marker" {
						invalid("Unsupported content part type: " + dump(t, -1))
					}
					msg.ContentParts = append(msg.ContentParts, ContentPart{Type: t.Str(), Text: asString(at(part, "text"))})
				}
			case !content.IsNull():
				invalid("Invalid 'content' type: expected string or array, got " + dump(content, -1) +
					" (ref: https://github.com/ggml-org/llama.cpp/issues/8367)")
			}
		}
		if hasCalls {
			for _, call := range elems(message.At("tool_calls")) {
				var tc ToolCall
				if !contains(call, "type") {
					invalid("Missing tool call type: " + dump(call, -1))
				}
				if t := at(call, "type"); !t.IsString() || t.Str() != "function" {
					invalid("Unsupported tool call type: " + dump(call, -1))
				}
				if !contains(call, "function") {
					invalid("Missing tool call function: " + dump(call, -1))
				}
				fc := at(call, "function")
				if !contains(fc, "name") {
					invalid("Missing tool call name: " + dump(call, -1))
				}
				tc.Name = asString(at(fc, "name"))
				if args := at(fc, "arguments"); args.IsString() {
					tc.Arguments = args.Str()
				} else {
					tc.Arguments = dump(args, -1)
				}
				if call.Has("id") {
					tc.ID = asString(call.At("id"))
				}
				msg.ToolCalls = append(msg.ToolCalls, tc)
			}
		}
		if !hasContent && !hasCalls {
			invalid("Expected 'content' or 'tool_calls' (ref: https://github.com/ggml-org/llama.cpp/issues/8367 & " +
				"https://github.com/ggml-org/llama.cpp/issues/12279)")
		}
		if message.Has("reasoning_content") {
			msg.ReasoningContent = asString(message.At("reasoning_content"))
		}
		if message.Has("name") {
			msg.ToolName = asString(message.At("name"))
		}
		if message.Has("tool_call_id") {
			msg.ToolCallID = asString(message.At("tool_call_id"))
		}
		msgs = append(msgs, msg)
	}
	return msgs
}

// MessagesJSON is common_chat_msgs_to_json_oaicompat: the messages as an
// OpenAI array, typed parts kept unless concatTypedText.
func MessagesJSON(msgs []Message, concatTypedText bool) (ojson.Value, error) {
	return renderMessages(msgs, caps{stringContent: true, typedContent: !concatTypedText})
}

// ParseTools is common_chat_tools_parse_oaicompat: the function tools of
// an OpenAI request ("tools"; null for none), or the pin's error.
func ParseTools(tools ojson.Value) (out []Tool, err error) {
	suffix := ""
	if s, e := tools.Dump(2); e == nil {
		suffix = "; tools = " + s
	}
	err = rethrowTo("Failed to parse tools: ", suffix, func() {
		if tools.IsNull() {
			return
		}
		if !tools.IsArray() {
			invalid("Expected 'tools' to be an array, got " + dump(tools, -1))
		}
		for _, tool := range tools.Elems() {
			if !contains(tool, "type") {
				invalid("Missing tool type: " + dump(tool, -1))
			}
			if t := at(tool, "type"); !t.IsString() || t.Str() != "function" {
				invalid("Unsupported tool type: " + dump(tool, -1))
			}
			if !contains(tool, "function") {
				invalid("Missing tool function: " + dump(tool, -1))
			}
			f := at(tool, "function")
			name := asString(at(f, "name"))
			desc := valueString(f, "description", "")
			params := ojson.ObjectValue()
			if p, ok := f.Get("parameters"); ok {
				params = p
			}
			out = append(out, Tool{Name: name, Description: desc, Parameters: dump(params, -1)})
		}
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// ToolsJSON is common_chat_tools_to_json_oaicompat: the tools as an
// OpenAI array, or null for none. A tool's parameters must be JSON.
func ToolsJSON(tools []Tool) (out ojson.Value, err error) {
	if len(tools) == 0 {
		return ojson.NullValue(), nil
	}
	arr := ojson.ArrayValue()
	for _, t := range tools {
		params, perr := ojson.ParseString(t.Parameters)
		if perr != nil {
			return ojson.Value{}, &Error{Msg: perr.Error()}
		}
		arr.Append(ojson.ObjectValue(
			ojson.Member{Key: "type", Value: str("function")},
			ojson.Member{Key: "function", Value: ojson.ObjectValue(
				ojson.Member{Key: "name", Value: str(t.Name)},
				ojson.Member{Key: "description", Value: str(t.Description)},
				ojson.Member{Key: "parameters", Value: params})}))
	}
	return arr, nil
}

// ToolChoice is common_chat_tool_choice. The zero value is auto.
type ToolChoice int

// The tool choices.
const (
	ToolChoiceAuto ToolChoice = iota
	ToolChoiceRequired
	ToolChoiceNone
)

// ParseToolChoice is common_chat_tool_choice_parse_oaicompat.
func ParseToolChoice(s string) (ToolChoice, error) {
	switch s {
	case "auto":
		return ToolChoiceAuto, nil
	case "none":
		return ToolChoiceNone, nil
	case "required":
		return ToolChoiceRequired, nil
	}
	return 0, &Error{Msg: "Invalid tool_choice: " + s}
}

// Continuation is common_chat_continuation: how continue_final_message
// continues the last message. The zero value is none.
type Continuation int

// The continuations.
const (
	ContinueNone Continuation = iota
	ContinueAuto
	ContinueReasoning
	ContinueContent
)

// ParseContinuation is common_chat_continuation_parse: true, or
// "reasoning_content" or "content".
func ParseContinuation(v ojson.Value) Continuation {
	if v.IsBool() && v.Bool() {
		return ContinueAuto
	}
	if v.IsString() {
		switch v.Str() {
		case "reasoning_content":
			return ContinueReasoning
		case "content":
			return ContinueContent
		}
	}
	return ContinueNone
}

// CheckMessages makes the checks llama-server makes on a request's
// "messages" before it converts them (oaicompat_chat_params_parse), with
// its error text. Media parts (image_url, input_audio, input_video,
// video_url) are refused as a server without a projector refuses them.
func CheckMessages(messages ojson.Value) error {
	if !messages.IsArray() {
		return &Error{Msg: "Expected 'messages' to be an array"}
	}
	for _, msg := range messages.Elems() {
		role := ""
		if r, ok := msg.Get("role"); ok && msg.IsObject() && r.IsString() {
			role = r.Str()
		}
		if role != "assistant" && !contains(msg, "content") {
			return &Error{Msg: "All non-assistant messages must contain 'content'"}
		}
		if role == "assistant" {
			if !contains(msg, "content") && !contains(msg, "tool_calls") {
				return &Error{Msg: "Assistant message must contain either 'content' or 'tool_calls'!"}
			}
			if !contains(msg, "content") {
				continue
			}
		}
		content := msg.At("content")
		if content.IsString() || content.IsNull() {
			continue
		}
		if !content.IsArray() {
			return &Error{Msg: "Expected 'content' to be a string or an array"}
		}
		for _, p := range content.Elems() {
			t := ""
			if v, ok := p.Get("type"); ok && p.IsObject() && v.IsString() {
				t = v.Str()
			}
			switch t {
			case "text":
			case "image_url":
				return &Error{Msg: "image input is not supported - hint: if this is unexpected, you may need to provide the mmproj"}
			case "input_audio":
				return &Error{Msg: "audio input is not supported - hint: if this is unexpected, you may need to provide the mmproj"}
			case "input_video", "video_url":
				return &Error{Msg: "video input is not supported - hint: if this is unexpected, you may need to provide the mmproj"}
			default:
				return &Error{Msg: "unsupported content[].type"}
			}
		}
	}
	return nil
}
