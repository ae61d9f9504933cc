// Port of llama.cpp tools/server/server-chat.cpp
// (server_chat_convert_responses_to_chatcmpl,
// server_chat_convert_anthropic_to_oai) (v0.5.0).

package httpapi

import (
	"errors"
	"strings"

	"github.com/ggload/ggload/internal/ojson"
)

func isArrayAt(j ojson.Value, key string) bool  { return has(j, key) && j.At(key).IsArray() }
func isStringAt(j ojson.Value, key string) bool { return has(j, key) && j.At(key).IsString() }
func isString(j ojson.Value, s string) bool     { return j.IsString() && j.Str() == s }

// responsesToChat is server_chat_convert_responses_to_chatcmpl: an OpenAI
// Responses request as a Chat Completions one.
func responsesToChat(body ojson.Value) (ojson.Value, error) {
	if !has(body, "input") {
		return ojson.Value{}, invalidf("'input' is required")
	}
	if value(body, "previous_response_id", "", getString) != "" {
		return ojson.Value{}, invalidf("llama.cpp does not support 'previous_response_id'.")
	}
	input := body.At("input")
	out := body.Clone()
	out.Delete("input")
	var msgs []ojson.Value
	if has(body, "instructions") {
		msgs = append(msgs, obj("role", "system", "content", value(body, "instructions", "", getString)))
		out.Delete("instructions")
	}
	switch {
	case input.IsString():
		msgs = append(msgs, obj("role", "user", "content", input))
	case input.IsArray():
		for _, it := range input.Elems() {
			var err error
			if msgs, err = responsesItem(msgs, it.Clone()); err != nil {
				return ojson.Value{}, err
			}
		}
	default:
		return ojson.Value{}, invalidf("'input' must be a string or array of objects")
	}
	out.Set("messages", ojson.ArrayValue(msgs...))
	if has(body, "tools") {
		if !body.At("tools").IsArray() {
			return ojson.Value{}, invalidf("'tools' must be an array of objects")
		}
		var tools []ojson.Value
		for _, t := range body.At("tools").Elems() {
			t = t.Clone()
			if value(t, "type", "", getString) != "function" {
				continue // (no Chat Completions equivalent)
			}
			t.Delete("type")
			if !t.Has("strict") {
				t.Set("strict", ojson.BoolValue(true))
			}
			tools = append(tools, obj("type", "function", "function", t))
		}
		out.Delete("tools")
		if len(tools) > 0 {
			out.Set("tools", ojson.ArrayValue(tools...))
		}
	}
	if has(body, "max_output_tokens") {
		out.Delete("max_output_tokens")
		out.Set("max_tokens", body.At("max_output_tokens"))
	}
	if has(body, "reasoning") {
		if r := body.At("reasoning"); has(r, "effort") {
			out.Set("reasoning_effort", r.At("effort"))
		}
		out.Delete("reasoning")
	}
	return out, nil
}

// responsesItem converts one item of a Responses request's input list.
func responsesItem(msgs []ojson.Value, item ojson.Value) ([]ojson.Value, error) {
	mergePrev := len(msgs) > 0 && value(msgs[len(msgs)-1], "role", "", getString) == "assistant"
	if isStringAt(item, "content") {
		item.Set("content", ojson.ArrayValue(obj("text", item.At("content"), "type", "input_text")))
	}
	role := item.At("role")
	typ := item.At("type")
	switch {
	case isArrayAt(item, "content") && role.IsString() && (role.Str() == "user" || role.Str() == "system" || role.Str() == "developer"):
		var content []ojson.Value
		for _, in := range item.At("content").Elems() {
			switch value(in, "type", "", getString) {
			case "input_text":
				if !has(in, "text") {
					return nil, invalidf("'Input text' requires 'text'")
				}
				content = append(content, obj("text", in.At("text"), "type", "text"))
			case "input_image":
				if !has(in, "image_url") {
					return nil, invalidf("'image_url' is required")
				}
				content = append(content, obj("image_url", obj("url", in.At("image_url")), "type", "image_url"))
			case "input_file":
				return nil, invalidf("'input_file' is not supported by llamacpp at this moment")
			default:
				return nil, invalidf("'type' must be one of 'input_text', 'input_image', or 'input_file'")
			}
		}
		item.Delete("type")
		item.Delete("status")
		item.Set("content", ojson.ArrayValue(content...))
		return append(msgs, item), nil
	case isString(role, "assistant") && isString(typ, "message"):
		content := ojson.ArrayValue()
		if isStringAt(item, "content") {
			content.Append(obj("text", item.At("content"), "type", "text"))
		} else if isArrayAt(item, "content") {
			for _, o := range item.At("content").Elems() {
				switch value(o, "type", "", getString) {
				case "output_text", "input_text":
					if !isStringAt(o, "text") {
						return nil, invalidf("'Output text' requires 'text'")
					}
					content.Append(obj("text", o.At("text"), "type", "text"))
				case "refusal":
					if !isStringAt(o, "refusal") {
						return nil, invalidf("'Refusal' requires 'refusal'")
					}
					content.Append(obj("refusal", o.At("refusal"), "type", "refusal"))
				default:
					return nil, invalidf("'type' must be one of 'output_text' or 'refusal'")
				}
			}
		}
		if mergePrev {
			prev := msgs[len(msgs)-1]
			if !isArrayAt(prev, "content") {
				prev.Set("content", ojson.ArrayValue())
			}
			pc := prev.At("content")
			pc.Append(content.Elems()...)
			prev.Set("content", pc)
			msgs[len(msgs)-1] = prev
			return msgs, nil
		}
		item.Delete("status")
		item.Delete("type")
		item.Set("content", content)
		return append(msgs, item), nil
	case isStringAt(item, "arguments") && isStringAt(item, "call_id") && isStringAt(item, "name") && isString(typ, "function_call"):
		call := obj("function", obj("arguments", item.At("arguments"), "name", item.At("name")), "id", item.At("call_id"), "type", "function")
		if mergePrev {
			prev := msgs[len(msgs)-1]
			if !isArrayAt(prev, "tool_calls") {
				prev.Set("tool_calls", ojson.ArrayValue())
			}
			tc := prev.At("tool_calls")
			tc.Append(call)
			prev.Set("tool_calls", tc)
			msgs[len(msgs)-1] = prev
			return msgs, nil
		}
		return append(msgs, obj("role", "assistant", "tool_calls", ojson.ArrayValue(call))), nil
	case isStringAt(item, "call_id") && (isStringAt(item, "output") || isArrayAt(item, "output")) && isString(typ, "function_call_output"):
		if item.At("output").IsString() {
			return append(msgs, obj("content", item.At("output"), "role", "tool", "tool_call_id", item.At("call_id"))), nil
		}
		outs := item.At("output").Clone()
		for i, o := range outs.Elems() {
			if !has(o, "type") {
				return nil, invalidf("Output of tool call missing 'type' field")
			}
			t := o.At("type")
			if !isString(t, "input_text") && !isString(t, "input_image") {
				return nil, invalidf("Output of tool call should be 'Input text' or 'Input image'")
			}
			if isString(t, "input_text") {
				o.Set("type", ojson.StringValue("text"))
			} else {
				if !has(o, "image_url") {
					return nil, invalidf("'image_url' is required")
				}
				o.Set("type", ojson.StringValue("image_url"))
				o.Set("image_url", obj("url", o.At("image_url")))
			}
			outs.Elems()[i] = o
		}
		return append(msgs, obj("content", outs, "role", "tool", "tool_call_id", item.At("call_id"))), nil
	case isArrayAt(item, "summary") && isString(typ, "reasoning"):
		if !isArrayAt(item, "content") {
			return nil, invalidf("item['content'] is not an array")
		}
		if item.At("content").Len() == 0 {
			return nil, invalidf("item['content'] is empty")
		}
		first := item.At("content").Index(0)
		if !isStringAt(first, "text") {
			return nil, invalidf("item['content']['text'] is not a string")
		}
		if mergePrev {
			msgs[len(msgs)-1].Set("reasoning_content", first.At("text"))
			return msgs, nil
		}
		return append(msgs, obj("role", "assistant", "content", ojson.ArrayValue(), "reasoning_content", first.At("text"))), nil
	}
	return nil, invalidf("Cannot determine type of 'item'")
}

// normalizeBillingHeader is normalize_anthropic_billing_header: the cch
// stamp of a Claude Code system prompt made constant, so that the prompt
// cache gets past it.
func normalizeBillingHeader(s string) string {
	const prefix = "x-anthropic-billing-header:"
	if !strings.HasPrefix(s, prefix) {
		return s
	}
	i := strings.Index(s[len(prefix):], "cch=")
	if i < 0 {
		return s
	}
	r := len(prefix) + i + 4
	if r+5 < len(s) && s[r+5] == ';' {
		return s[:r] + "fffff" + s[r+5:]
	}
	return s
}

// imageURL is an Anthropic image source as an OpenAI image_url part (nil
// for a source of another type).
func imageURL(source ojson.Value) (ojson.Value, bool) {
	switch value(source, "type", "", getString) {
	case "base64":
		url := "data:" + value(source, "media_type", "image/jpeg", getString) + ";base64," + value(source, "data", "", getString)
		return obj("type", "image_url", "image_url", obj("url", url)), true
	case "url":
		return obj("type", "image_url", "image_url", obj("url", value(source, "url", "", getString))), true
	}
	return ojson.Value{}, false
}

// anthropicToChat is server_chat_convert_anthropic_to_oai: an Anthropic
// Messages request as an OpenAI Chat Completions one.
func anthropicToChat(body ojson.Value) (ojson.Value, error) {
	out := ojson.ObjectValue()
	msgs := ojson.ArrayValue()
	if sys := value(body, "system", ojson.Value{}, asJSON); !sys.IsNull() {
		var content string
		switch {
		case sys.IsString():
			content = normalizeBillingHeader(sys.Str())
		case sys.IsArray():
			for _, b := range sys.Elems() {
				if value(b, "type", "", getString) == "text" {
					content += normalizeBillingHeader(value(b, "text", "", getString))
				}
			}
		}
		msgs.Append(obj("role", "system", "content", content))
	}
	if !has(body, "messages") {
		return ojson.Value{}, errors.New("'messages' is required")
	}
	if messages := body.At("messages"); messages.IsArray() {
		for _, m := range messages.Elems() {
			anthropicMessage(&msgs, m)
		}
	}
	out.Set("messages", msgs)
	if has(body, "tools") && body.At("tools").IsArray() {
		tools := ojson.ArrayValue()
		for _, t := range body.At("tools").Elems() {
			params := ojson.ObjectValue()
			if has(t, "input_schema") {
				params = t.At("input_schema")
			}
			tools.Append(obj("type", "function", "function", obj("name", value(t, "name", "", getString),
				"description", value(t, "description", "", getString), "parameters", params)))
		}
		out.Set("tools", tools)
	}
	if has(body, "tool_choice") {
		if tc := body.At("tool_choice"); tc.IsObject() {
			switch value(tc, "type", "", getString) {
			case "auto":
				out.Set("tool_choice", ojson.StringValue("auto"))
			case "any", "tool":
				out.Set("tool_choice", ojson.StringValue("required"))
			}
		}
	}
	if has(body, "stop_sequences") {
		out.Set("stop", body.At("stop_sequences"))
	}
	if has(body, "max_tokens") {
		out.Set("max_tokens", body.At("max_tokens"))
	} else {
		out.Set("max_tokens", ojson.IntValue(4096))
	}
	for _, k := range []string{"temperature", "top_p", "top_k", "stream", "chat_template_kwargs"} {
		if has(body, k) {
			out.Set(k, body.At(k))
		}
	}
	if has(body, "thinking") {
		th := value(body, "thinking", ojson.ObjectValue(), asJSON)
		if value(th, "type", "", getString) == "enabled" {
			out.Set("thinking_budget_tokens", jv(value(th, "budget_tokens", 10000, func(x ojson.Value) (int, error) { n, err := getInt32(x); return int(n), err })))
		}
	}
	if has(body, "metadata") {
		md := value(body, "metadata", ojson.ObjectValue(), asJSON)
		if u := value(md, "user_id", "", getString); u != "" {
			out.Set("__metadata_user_id", ojson.StringValue(u))
		}
	}
	return out, nil
}

// anthropicMessage converts one Anthropic message (its blocks: text,
// thinking, images, tool uses and tool results).
func anthropicMessage(msgs *ojson.Value, m ojson.Value) {
	role := value(m, "role", "", getString)
	if !has(m, "content") {
		if role != "assistant" {
			msgs.Append(m)
		}
		return
	}
	content := m.At("content")
	if !content.IsArray() {
		msgs.Append(m)
		return
	}
	calls, converted, results := ojson.ArrayValue(), ojson.ArrayValue(), ojson.ArrayValue()
	var reasoning string
	hasCalls := false
	for _, b := range content.Elems() {
		switch value(b, "type", "", getString) {
		case "text":
			converted.Append(b)
		case "thinking":
			reasoning += value(b, "thinking", "", getString)
		case "image":
			if p, ok := imageURL(value(b, "source", ojson.ObjectValue(), asJSON)); ok {
				converted.Append(p)
			}
		case "tool_use":
			in := value(b, "input", ojson.ObjectValue(), asJSON)
			calls.Append(obj("id", value(b, "id", "", getString), "type", "function",
				"function", obj("name", value(b, "name", "", getString), "arguments", in.DumpSafe(-1))))
			hasCalls = true
		case "tool_result":
			id := value(b, "tool_use_id", "", getString)
			rc := value(b, "content", ojson.Value{}, asJSON)
			switch {
			case rc.IsString():
				results.Append(obj("role", "tool", "tool_call_id", id, "content", rc.Str()))
			case rc.IsArray():
				var text string
				parts := ojson.ArrayValue()
				images := false
				for _, c := range rc.Elems() {
					switch value(c, "type", "", getString) {
					case "text":
						t := value(c, "text", "", getString)
						text += t
						parts.Append(obj("type", "text", "text", t))
					case "image":
						images = true
						if p, ok := imageURL(value(c, "source", ojson.ObjectValue(), asJSON)); ok {
							parts.Append(p)
						}
					}
				}
				if !images {
					results.Append(obj("role", "tool", "tool_call_id", id, "content", text))
				} else {
					results.Append(obj("role", "tool", "tool_call_id", id, "content", parts))
				}
			default:
				results.Append(obj("role", "tool", "tool_call_id", id, "content", ""))
			}
		}
	}
	if converted.Len() > 0 || hasCalls || reasoning != "" {
		nm := obj("role", role)
		if converted.Len() > 0 {
			nm.Set("content", converted)
		} else {
			nm.Set("content", ojson.StringValue(""))
		}
		if calls.Len() > 0 {
			nm.Set("tool_calls", calls)
		}
		if reasoning != "" {
			nm.Set("reasoning_content", ojson.StringValue(reasoning))
		}
		msgs.Append(nm)
	}
	msgs.Append(results.Elems()...)
}
