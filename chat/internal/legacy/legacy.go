// Port of llama.cpp src/llama-chat.cpp (v0.5.0) and of
// llama_chat_apply_template (src/llama.cpp).

// Package legacy holds llama.cpp's built-in chat templates: the formats
// that libllama writes without a Jinja engine (llama_chat_apply_template),
// and the detection that picks one from a template's name or source. This
// is what llama.cpp uses under --no-jinja. Messages are C strings there:
// a role or content is cut at its first NUL byte, as the pin cuts it.
package legacy

import (
	"sort"
	"strings"
)

// Template is one of the built-in formats (llm_chat_template).
type Template int

const (
	ChatML Template = iota
	Llama2
	Llama2Sys
	Llama2SysBOS
	Llama2SysStrip
	MistralV1
	MistralV3
	MistralV3Tekken
	MistralV7
	MistralV7Tekken
	Phi3
	Phi4
	Falcon3
	Zephyr
	Monarch
	Gemma
	Orion
	OpenChat
	Vicuna
	VicunaOrca
	DeepSeek
	DeepSeek2
	DeepSeek3
	DeepSeekOCR
	CommandR
	Llama3
	ChatGLM3
	ChatGLM4
	GLMEdge
	MiniCPM
	Exaone3
	Exaone4
	ExaoneMoE
	RWKVWorld
	Granite3
	Granite40
	Granite41
	GigaChat
	Megrez
	Yandex
	Bailing
	BailingThink
	Bailing2
	Llama4
	SmolVLM
	Dots1
	HunyuanMoE
	OpenAIMoE
	HunyuanDense
	HunyuanVL
	KimiK2
	SeedOSS
	Grok2
	PanguEmbed
	SolarOpen
	Unknown
)

// names are the built-in templates by name (LLM_CHAT_TEMPLATES).
var names = map[string]Template{
	"chatml": ChatML, "llama2": Llama2, "llama2-sys": Llama2Sys, "llama2-sys-bos": Llama2SysBOS,
	"llama2-sys-strip": Llama2SysStrip, "mistral-v1": MistralV1, "mistral-v3": MistralV3,
	"mistral-v3-tekken": MistralV3Tekken, "mistral-v7": MistralV7, "mistral-v7-tekken": MistralV7Tekken,
	"phi3": Phi3, "phi4": Phi4, "falcon3": Falcon3, "zephyr": Zephyr, "monarch": Monarch, "gemma": Gemma,
	"orion": Orion, "openchat": OpenChat, "vicuna": Vicuna, "vicuna-orca": VicunaOrca, "deepseek": DeepSeek,
	"deepseek2": DeepSeek2, "deepseek3": DeepSeek3, "deepseek-ocr": DeepSeekOCR, "command-r": CommandR,
	"llama3": Llama3, "chatglm3": ChatGLM3, "chatglm4": ChatGLM4, "glmedge": GLMEdge, "minicpm": MiniCPM,
	"exaone3": Exaone3, "exaone4": Exaone4, "exaone-moe": ExaoneMoE, "rwkv-world": RWKVWorld,
	"granite": Granite3, "granite-4.0": Granite40, "granite-4.1": Granite41, "gigachat": GigaChat,
	"megrez": Megrez, "yandex": Yandex, "bailing": Bailing, "bailing-think": BailingThink,
	"bailing2": Bailing2, "llama4": Llama4, "smolvlm": SmolVLM, "hunyuan-moe": HunyuanMoE,
	"gpt-oss": OpenAIMoE, "hunyuan-dense": HunyuanDense, "hunyuan-vl": HunyuanVL, "kimi-k2": KimiK2,
	"seed_oss": SeedOSS, "grok-2": Grok2, "pangu-embedded": PanguEmbed, "solar-open": SolarOpen,
}

// Names are the built-in templates' names, sorted as
// llama_chat_builtin_templates lists them.
func Names() []string {
	out := make([]string, 0, len(names))
	for n := range names {
		out = append(out, n)
	}
	sort.Strings(out)
	return out
}

// FromName is the built-in template of that name (llm_chat_template_from_str).
func FromName(name string) (Template, bool) {
	t, ok := names[name]
	return t, ok
}

// Detect is llm_chat_detect_template: a built-in template's name, or the
// format that a template's source looks like, or Unknown.
func Detect(tmpl string) Template {
	if t, ok := names[tmpl]; ok {
		return t
	}
	has := func(s string) bool { return strings.Contains(tmpl, s) }
	switch {
	case has("<|im_start|>"):
		switch {
		case has("<|im_sep|>"):
			return Phi4
		case has("<end_of_utterance>"):
			return SmolVLM // <|im_start|> as BOS, but not chatml
		}
		return ChatML
	case strings.HasPrefix(tmpl, "mistral") || has("[INST]"):
		return detectMistral(tmpl)
	case has("<|assistant|>") && has("<|end|>"):
		return Phi3
	case has("[gMASK]<sop>"):
		return ChatGLM4
	case has("<|assistant|>") && has("<|user|>"):
		switch {
		case has("<|tool_declare|>"):
			return ExaoneMoE
		case has("</s>"):
			return Falcon3
		}
		return GLMEdge
	case has("<|{{ item['role'] }}|>") && has("<|begin_of_image|>"):
		return GLMEdge
	case has("<|user|>") && has("<|endoftext|>"):
		return Zephyr
	case has("bos_token + message['role']"):
		return Monarch
	case has("<start_of_turn>"):
		return Gemma
	case has("'\\n\\nAssistant: ' + eos_token"):
		return Orion
	case has("GPT4 Correct "):
		return OpenChat
	case has("USER: ") && has("ASSISTANT: "):
		if has("SYSTEM: ") {
			return VicunaOrca
		}
		return Vicuna
	case has("### Instruction:") && has("<|EOT|>"):
		return DeepSeek
	case has("<|START_OF_TURN_TOKEN|>") && has("<|USER_TOKEN|>"):
		return CommandR
	case has("<|start_header_id|>") && has("<|end_header_id|>"):
		return Llama3
	case has("[gMASK]sop"):
		return ChatGLM3
	case has("<用户>"):
		return MiniCPM
	case has("'Assistant: ' + message['content'] + eos_token"):
		return DeepSeek2
	case has("<｜Assistant｜>") && has("<｜User｜>") && has("<｜end▁of▁sentence｜>"):
		return DeepSeek3
	case has("[|system|]") && has("[|assistant|]") && has("[|endofturn|]"):
		if has("[|tool|]") {
			return Exaone4
		}
		return Exaone3
	case has("rwkv-world") || has("{{- 'User: ' + message['content']|trim + '\\n\\n' -}}"):
		return RWKVWorld
	case has("<|start_of_role|>"):
		if has("<tool_call>") || has("<tools>") {
			if has("g4_default_system_message") {
				return Granite40
			}
			return Granite41
		}
		return Granite3
	case has("message['role'] + additional_special_tokens[0] + message['content'] + additional_special_tokens[1]"):
		return GigaChat
	case has("<|role_start|>"):
		return Megrez
	case has(" Ассистент:"):
		return Yandex
	case has("<role>ASSISTANT</role>") && has("'HUMAN'"):
		return Bailing
	case has("<role>ASSISTANT</role>") && has("\"HUMAN\"") && has("<think>"):
		return BailingThink
	case has("<role>ASSISTANT</role>") && has("<role>HUMAN</role>") && has("<|role_end|>"):
		return Bailing2
	case has("<|header_start|>") && has("<|header_end|>"):
		return Llama4
	case has("<|endofuserprompt|>"):
		return Dots1
	case has("<|extra_0|>") && has("<|extra_4|>"):
		return HunyuanMoE
	case has("<|start|>") && has("<|channel|>"):
		return OpenAIMoE
	case has("<｜hy_Assistant｜>") && has("<｜hy_begin▁of▁sentence｜>"):
		return HunyuanVL
	case has("<｜hy_Assistant｜>") && has("<｜hy_place▁holder▁no▁3｜>"):
		return HunyuanDense
	case has("<|im_assistant|>assistant<|im_middle|>"):
		return KimiK2
	case has("<seed:bos>"):
		return SeedOSS
	case has("'Assistant: '  + message['content'] + '<|separator|>"):
		return Grok2
	case has("[unused9]系统：[unused10]"):
		return PanguEmbed
	case has("<|begin|>") && has("<|end|>") && has("<|content|>"):
		return SolarOpen
	}
	return Unknown
}

func detectMistral(tmpl string) Template {
	has := func(s string) bool { return strings.Contains(tmpl, s) }
	switch {
	case has("[SYSTEM_PROMPT]"):
		return MistralV7
	case has("' [INST] ' + system_message") || has("[AVAILABLE_TOOLS]"):
		// the official v1, v3 and v3-tekken templates
		switch {
		case has(" [INST]"):
			return MistralV1
		case has("\"[INST]\""):
			return MistralV3Tekken
		}
		return MistralV3
	case has("content.strip()"):
		return Llama2SysStrip
	case has("bos_token + '[INST]"):
		return Llama2SysBOS
	case has("<<SYS>>"):
		return Llama2Sys
	}
	return Llama2
}

// Message is one message of a chat, as llama_chat_message holds it.
type Message struct {
	Role, Content string
}

// cstr is s as a C string reads it: up to its first NUL.
func cstr(s string) string {
	if i := strings.IndexByte(s, 0); i >= 0 {
		return s[:i]
	}
	return s
}

// Apply is llama_chat_apply_template: the chat in the format that tmpl (a
// built-in name, or a template's source) is detected as, and false where
// it is none of them (the pin's -1). llama.cpp's null template means
// "chatml": pass that name.
func Apply(tmpl string, chat []Message, addAssistant bool) (string, bool) {
	t := Detect(cstr(tmpl))
	if t == Unknown {
		return "", false
	}
	return Format(t, chat, addAssistant)
}
