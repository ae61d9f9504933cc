// Port of llama.cpp common/chat.cpp (v0.5.0):
// common_chat_try_specialized_template, which picks the hand-written
// parsers of common/parsers/ for the templates the autoparser reads wrong.

package chat

import (
	"strings"

	"github.com/ggload/ggload/internal/ojson"
)

// isLFM2 is is_lfm2_template.
func isLFM2(src string) bool {
	return strings.Contains(src, "<|tool_list_start|>") && strings.Contains(src, "<|tool_list_end|>")
}

// specialized is common_chat_try_specialized_template: the params of the
// template's own parser, or nil where the autoparser does it.
func specialized(t *template, src string, g *genParams) *Params {
	has := func(s string) bool { return strings.Contains(src, s) }
	switch {
	case has("[SYSTEM_PROMPT]") && has("[TOOL_CALLS]") && has("[ARGS]") && !has("[CALL_ID]"):
		return ministral3(t, g)
	case has("<|channel|>"):
		return gptOSS(t, g)
	case has("<atem:function_calls>") && has("<|eom|>"):
		return museGlimmer(t, g)
	case has(">>>all") && has(">>>${recipient}"):
		return functionaryV32(t, g)
	case has("<|tool_calls_section_begin|>") && has("<|tool_call_begin|>"):
		return kimiK2(t, g)
	case has("<|open|>") && has("<|close|>") && has("<|end_of_msg|>"):
		return kimiK3(t, g)
	case has("<role>ASSISTANT</role>") && has("<arg_key>"):
		return ling3(t, g)
	case has("<|START_TEXT|>") && has("<|START_ACTION|>"):
		return cohere2MoE(t, g)
	case isLFM2(src):
		return lfm2(t, g, true)
	case has("List of tools: [") && !has("<|tool_list_start|>"):
		return lfm2(t, g, false)
	case has("<|role_sep|>") && has("<|message_sep|>") && !has("<|function_call|>"):
		return gigaChatV3(t, g)
	case has("]<]minimax[>[") && has("<tool_call>") && has("<invoke name="):
		return minimaxM3(t, g)
	case has("dsml_token") && has("DSML") && (has("function_calls") || has("tool_calls")):
		return deepseekV32(t, g)
	case has("'<|tool_call>call:'"):
		if !has("{#- OpenAI Chat Completions:") {
			// the older Gemma 4 templates
			g.messages = convertToolResponsesGemma4(g.messages)
		}
		return gemma4(t, g)
	case has("Tool usage guidelines:") && has("<function name=\"") && has("<param name=\""):
		return minicpm5(t, g)
	case has("<tool_call>") && has("<function=") && has("<parameter=") &&
		!has("'<tool_call><function=' ~ tool_call.name ~ '>'"):
		return qwen3Coder(t, g)
	}
	return nil
}

// copyMessages is a deep copy of the messages, to change for one
// template.
func copyMessages(msgs ojson.Value) []ojson.Value {
	var out []ojson.Value
	for _, m := range elems(msgs) {
		out = append(out, m.Clone())
	}
	return out
}
