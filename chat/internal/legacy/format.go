// Port of llama.cpp src/llama-chat.cpp (v0.5.0): llm_chat_apply_template.

package legacy

import "strings"

func isSpace(c byte) bool {
	return c == ' ' || c == '\t' || c == '\n' || c == '\v' || c == '\f' || c == '\r'
}

// trim drops the C locale's spaces at both ends.
func trim(s string) string {
	i, j := 0, len(s)
	for i < j && isSpace(s[i]) {
		i++
	}
	for j > i && isSpace(s[j-1]) {
		j--
	}
	return s[i:j]
}

func upperASCII(s string) string {
	b := []byte(s)
	for i, c := range b {
		if c >= 'a' && c <= 'z' {
			b[i] = c - 'a' + 'A'
		}
	}
	return string(b)
}

// Format writes the chat in the built-in format t (llm_chat_apply_template);
// false for Unknown.
func Format(t Template, chat []Message, addAssistant bool) (string, bool) {
	msgs := make([]Message, len(chat))
	for i, m := range chat {
		msgs[i] = Message{cstr(m.Role), cstr(m.Content)}
	}
	f, ok := formats[t]
	if !ok {
		return "", false
	}
	var b strings.Builder
	f(&b, t, msgs, addAssistant)
	return b.String(), true
}

type formatter func(b *strings.Builder, t Template, chat []Message, add bool)

var formats map[Template]formatter

func init() {
	formats = map[Template]formatter{
		ChatML:          formatChatML,
		MistralV7:       formatMistralV7,
		MistralV7Tekken: formatMistralV7,
		MistralV1:       formatMistral,
		MistralV3:       formatMistral,
		MistralV3Tekken: formatMistral,
		Llama2:          formatLlama2,
		Llama2Sys:       formatLlama2,
		Llama2SysBOS:    formatLlama2,
		Llama2SysStrip:  formatLlama2,
		Phi3: func(b *strings.Builder, _ Template, chat []Message, add bool) {
			each(chat, func(m Message) { w(b, "<|", m.Role, "|>\n", m.Content, "<|end|>\n") })
			addIf(b, add, "<|assistant|>\n")
		},
		Phi4: func(b *strings.Builder, _ Template, chat []Message, add bool) {
			each(chat, func(m Message) { w(b, "<|im_start|>", m.Role, "<|im_sep|>", m.Content, "<|im_end|>") })
			addIf(b, add, "<|im_start|>assistant<|im_sep|>")
		},
		Falcon3: func(b *strings.Builder, _ Template, chat []Message, add bool) {
			each(chat, func(m Message) { w(b, "<|", m.Role, "|>\n", m.Content, "\n") })
			addIf(b, add, "<|assistant|>\n")
		},
		Zephyr: func(b *strings.Builder, _ Template, chat []Message, add bool) {
			each(chat, func(m Message) { w(b, "<|", m.Role, "|>", "\n", m.Content, "<|endoftext|>\n") })
			addIf(b, add, "<|assistant|>\n")
		},
		Monarch: func(b *strings.Builder, _ Template, chat []Message, add bool) {
			for i, m := range chat {
				if i > 0 {
					b.WriteString("<s>") // the first message goes without BOS
				}
				w(b, m.Role, "\n", m.Content, "</s>\n")
			}
			addIf(b, add, "<s>assistant\n")
		},
		Gemma:      formatGemma,
		Orion:      formatOrion,
		OpenChat:   formatOpenChat,
		Vicuna:     formatVicuna,
		VicunaOrca: formatVicuna,
		DeepSeek: func(b *strings.Builder, _ Template, chat []Message, add bool) {
			each(chat, func(m Message) {
				switch m.Role {
				case "system":
					b.WriteString(m.Content)
				case "user":
					w(b, "### Instruction:\n", m.Content, "\n")
				case "assistant":
					w(b, "### Response:\n", m.Content, "\n<|EOT|>\n")
				}
			})
			addIf(b, add, "### Response:\n")
		},
		CommandR: func(b *strings.Builder, _ Template, chat []Message, add bool) {
			tokens := map[string]string{"system": "<|SYSTEM_TOKEN|>", "user": "<|USER_TOKEN|>", "assistant": "<|CHATBOT_TOKEN|>"}
			each(chat, func(m Message) {
				if tok, ok := tokens[m.Role]; ok {
					w(b, "<|START_OF_TURN_TOKEN|>", tok, trim(m.Content), "<|END_OF_TURN_TOKEN|>")
				}
			})
			addIf(b, add, "<|START_OF_TURN_TOKEN|><|CHATBOT_TOKEN|>")
		},
		Llama3: func(b *strings.Builder, _ Template, chat []Message, add bool) {
			each(chat, func(m Message) {
				w(b, "<|start_header_id|>", m.Role, "<|end_header_id|>\n\n", trim(m.Content), "<|eot_id|>")
			})
			addIf(b, add, "<|start_header_id|>assistant<|end_header_id|>\n\n")
		},
		ChatGLM3: func(b *strings.Builder, _ Template, chat []Message, add bool) {
			b.WriteString("[gMASK]sop")
			each(chat, func(m Message) { w(b, "<|", m.Role, "|>", "\n ", m.Content) })
			addIf(b, add, "<|assistant|>")
		},
		ChatGLM4: func(b *strings.Builder, _ Template, chat []Message, add bool) {
			b.WriteString("[gMASK]<sop>")
			each(chat, func(m Message) { w(b, "<|", m.Role, "|>", "\n", m.Content) })
			addIf(b, add, "<|assistant|>\n")
		},
		GLMEdge: func(b *strings.Builder, _ Template, chat []Message, add bool) {
			each(chat, func(m Message) { w(b, "<|", m.Role, "|>", "\n", m.Content) })
			addIf(b, add, "<|assistant|>")
		},
		MiniCPM: func(b *strings.Builder, _ Template, chat []Message, _ bool) {
			each(chat, func(m Message) {
				if m.Role == "user" {
					w(b, "<用户>", trim(m.Content), "<AI>")
				} else {
					b.WriteString(trim(m.Content))
				}
			})
		},
		DeepSeek2: func(b *strings.Builder, _ Template, chat []Message, add bool) {
			each(chat, func(m Message) {
				switch m.Role {
				case "system":
					w(b, m.Content, "\n\n")
				case "user":
					w(b, "User: ", m.Content, "\n\n")
				case "assistant":
					w(b, "Assistant: ", m.Content, "<｜end▁of▁sentence｜>")
				}
			})
			addIf(b, add, "Assistant:")
		},
		DeepSeek3: func(b *strings.Builder, _ Template, chat []Message, add bool) {
			each(chat, func(m Message) {
				switch m.Role {
				case "system":
					w(b, m.Content, "\n\n")
				case "user":
					w(b, "<｜User｜>", m.Content)
				case "assistant":
					w(b, "<｜Assistant｜>", m.Content, "<｜end▁of▁sentence｜>")
				}
			})
			addIf(b, add, "<｜Assistant｜>")
		},
		DeepSeekOCR: func(b *strings.Builder, _ Template, chat []Message, _ bool) {
			each(chat, func(m Message) { b.WriteString(m.Content) }) // no template
		},
		Exaone3: func(b *strings.Builder, _ Template, chat []Message, add bool) {
			formatExaone(b, chat, add, false)
		},
		Exaone4: func(b *strings.Builder, _ Template, chat []Message, add bool) {
			formatExaone(b, chat, add, true)
		},
		ExaoneMoE: func(b *strings.Builder, _ Template, chat []Message, add bool) {
			each(chat, func(m Message) {
				switch m.Role {
				case "system", "user", "assistant", "tool":
					w(b, "<|", m.Role, "|>\n", trim(m.Content), "<|endofturn|>\n")
				}
			})
			addIf(b, add, "<|assistant|>\n")
		},
		RWKVWorld: func(b *strings.Builder, _ Template, chat []Message, _ bool) {
			// this format wants "\n\n" as the model's end of turn
			for i, m := range chat {
				switch m.Role {
				case "system":
					w(b, "System: ", trim(m.Content), "\n\n")
				case "user":
					w(b, "User: ", trim(m.Content), "\n\n")
					if i == len(chat)-1 {
						b.WriteString("Assistant:")
					}
				case "assistant":
					w(b, "Assistant: ", trim(m.Content), "\n\n")
				}
			}
		},
		Granite3: func(b *strings.Builder, _ Template, chat []Message, add bool) {
			each(chat, func(m Message) {
				w(b, "<|start_of_role|>", m.Role, "<|end_of_role|>")
				if m.Role == "assistant_tool_call" {
					b.WriteString("<|tool_call|>")
				}
				w(b, m.Content, "<|end_of_text|>\n")
			})
			addIf(b, add, "<|start_of_role|>assistant<|end_of_role|>")
		},
		Granite40: formatGranite4,
		Granite41: formatGranite4,
		GigaChat:  formatGigaChat,
		Megrez: func(b *strings.Builder, _ Template, chat []Message, add bool) {
			each(chat, func(m Message) { w(b, "<|role_start|>", m.Role, "<|role_end|>", m.Content, "<|turn_end|>") })
			addIf(b, add, "<|role_start|>assistant<|role_end|>")
		},
		Yandex: func(b *strings.Builder, _ Template, chat []Message, add bool) {
			// "\n\n" is the model's end of turn
			each(chat, func(m Message) {
				switch m.Role {
				case "user":
					w(b, " Пользователь: ", m.Content, "\n\n")
				case "assistant":
					w(b, " Ассистент: ", m.Content, "\n\n")
				}
			})
			addIf(b, add, " Ассистент:[SEP]")
		},
		Bailing:      formatBailing,
		BailingThink: formatBailing,
		Bailing2: func(b *strings.Builder, _ Template, chat []Message, add bool) {
			if len(chat) == 0 || chat[0].Role != "system" {
				b.WriteString("<role>SYSTEM</role>detailed thinking off<|role_end|>")
			}
			each(chat, func(m Message) { w(b, "<role>", bailingRole(m.Role), "</role>", m.Content, "<|role_end|>") })
			addIf(b, add, "<role>ASSISTANT</role>")
		},
		Llama4: func(b *strings.Builder, _ Template, chat []Message, add bool) {
			each(chat, func(m Message) {
				w(b, "<|header_start|>", m.Role, "<|header_end|>\n\n", trim(m.Content), "<|eot|>")
			})
			addIf(b, add, "<|header_start|>assistant<|header_end|>\n\n")
		},
		SmolVLM: func(b *strings.Builder, _ Template, chat []Message, add bool) {
			b.WriteString("<|im_start|>") // its BOS; the rest is not chatml
			each(chat, func(m Message) {
				switch m.Role {
				case "system":
					w(b, m.Content, "\n\n")
				case "user":
					w(b, "User: ", m.Content, "<end_of_utterance>\n")
				default:
					w(b, "Assistant: ", m.Content, "<end_of_utterance>\n")
				}
			})
			addIf(b, add, "Assistant:")
		},
		Dots1: func(b *strings.Builder, _ Template, chat []Message, add bool) {
			each(chat, func(m Message) {
				switch m.Role {
				case "system":
					w(b, "<|system|>", m.Content, "<|endofsystem|>")
				case "user":
					w(b, "<|userprompt|>", m.Content, "<|endofuserprompt|>")
				default:
					w(b, "<|response|>", m.Content, "<|endofresponse|>")
				}
			})
			addIf(b, add, "<|response|>")
		},
		HunyuanMoE: func(b *strings.Builder, _ Template, chat []Message, _ bool) {
			each(chat, func(m Message) {
				switch m.Role {
				case "system":
					w(b, "<|startoftext|>", m.Content, "<|extra_4|>")
				case "assistant":
					w(b, m.Content, "<|eos|>")
				default:
					w(b, "<|startoftext|>", m.Content, "<|extra_0|>")
				}
			})
		},
		OpenAIMoE: func(b *strings.Builder, _ Template, chat []Message, add bool) {
			each(chat, func(m Message) {
				w(b, "<|start|>", m.Role, "<|message|>", m.Content)
				if m.Role == "assistant" {
					b.WriteString("<|return|>")
				} else {
					b.WriteString("<|end|>")
				}
			})
			addIf(b, add, "<|start|>assistant")
		},
		HunyuanDense: func(b *strings.Builder, _ Template, chat []Message, _ bool) {
			for i, m := range chat {
				if i == 0 && m.Role == "system" {
					w(b, m.Content, "<｜hy_place▁holder▁no▁3｜>")
				}
				switch m.Role {
				case "assistant":
					w(b, "<｜hy_Assistant｜>", m.Content, "<｜hy_place▁holder▁no▁2｜>")
				case "user":
					w(b, "<｜hy_User｜>", m.Content, "<｜hy_Assistant｜>")
				}
			}
		},
		HunyuanVL: func(b *strings.Builder, _ Template, chat []Message, _ bool) {
			b.WriteString("<｜hy_begin▁of▁sentence｜>")
			for i, m := range chat {
				if i == 0 && m.Role == "system" {
					w(b, m.Content, "<｜hy_place▁holder▁no▁3｜>")
					continue
				}
				switch m.Role {
				case "user":
					w(b, m.Content, "<｜hy_User｜>")
				case "assistant":
					w(b, m.Content, "<｜hy_Assistant｜>")
				}
			}
		},
		KimiK2: func(b *strings.Builder, _ Template, chat []Message, add bool) {
			heads := map[string]string{"system": "<|im_system|>system<|im_middle|>", "user": "<|im_user|>user<|im_middle|>",
				"assistant": "<|im_assistant|>assistant<|im_middle|>", "tool": "<|im_system|>tool<|im_middle|>"}
			each(chat, func(m Message) { w(b, heads[m.Role], m.Content, "<|im_end|>") })
			addIf(b, add, "<|im_assistant|>assistant<|im_middle|>")
		},
		SeedOSS: func(b *strings.Builder, _ Template, chat []Message, add bool) {
			each(chat, func(m Message) {
				content := m.Content
				if m.Role == "assistant" {
					content = trim(content)
				}
				w(b, "<seed:bos>", m.Role, "\n", content, "<seed:eos>")
			})
			addIf(b, add, "<seed:bos>assistant\n")
		},
		Grok2: func(b *strings.Builder, _ Template, chat []Message, add bool) {
			each(chat, func(m Message) {
				switch m.Role {
				case "system":
					w(b, "System: ", trim(m.Content), "<|separator|>\n\n")
				case "user":
					w(b, "Human: ", trim(m.Content), "<|separator|>\n\n")
				case "assistant":
					w(b, "Assistant: ", m.Content, "<|separator|>\n\n")
				}
			})
			addIf(b, add, "Assistant:")
		},
		PanguEmbed: func(b *strings.Builder, _ Template, chat []Message, add bool) {
			heads := map[string]string{"system": "[unused9]系统：", "user": "[unused9]用户：", "assistant": "[unused9]助手：",
				"tool": "[unused9]工具：", "function": "[unused9]方法："}
			for i, m := range chat {
				if i == 0 && m.Role != "system" {
					b.WriteString("[unused9]系统：[unused10]")
				}
				if h, ok := heads[m.Role]; ok {
					w(b, h, m.Content, "[unused10]")
				}
			}
			addIf(b, add, "[unused9]助手：")
		},
		SolarOpen: func(b *strings.Builder, _ Template, chat []Message, add bool) {
			each(chat, func(m Message) { w(b, "<|begin|>", m.Role, "<|content|>", m.Content, "<|end|>") })
			addIf(b, add, "<|begin|>assistant")
		},
	}
}

func w(b *strings.Builder, parts ...string) {
	for _, p := range parts {
		b.WriteString(p)
	}
}

func each(chat []Message, f func(Message)) {
	for _, m := range chat {
		f(m)
	}
}

func addIf(b *strings.Builder, add bool, s string) {
	if add {
		b.WriteString(s)
	}
}

func formatChatML(b *strings.Builder, _ Template, chat []Message, add bool) {
	each(chat, func(m Message) { w(b, "<|im_start|>", m.Role, "\n", m.Content, "<|im_end|>\n") })
	addIf(b, add, "<|im_start|>assistant\n")
}

// formatMistralV7 is the official v7 and v7-tekken templates.
func formatMistralV7(b *strings.Builder, t Template, chat []Message, _ bool) {
	sp := ""
	if t == MistralV7 {
		sp = " "
	}
	each(chat, func(m Message) {
		switch m.Role {
		case "system":
			w(b, "[SYSTEM_PROMPT]", sp, m.Content, "[/SYSTEM_PROMPT]")
		case "user":
			w(b, "[INST]", sp, m.Content, "[/INST]")
		default:
			w(b, sp, m.Content, "</s>")
		}
	})
}

// formatMistral is the official v1, v3 and v3-tekken templates.
func formatMistral(b *strings.Builder, t Template, chat []Message, _ bool) {
	leading, trailing := "", " "
	if t == MistralV1 {
		leading = " "
	}
	if t == MistralV3Tekken {
		trailing = ""
	}
	inTurn := false
	for _, m := range chat {
		if !inTurn {
			w(b, leading, "[INST]", trailing)
			inTurn = true
		}
		switch m.Role {
		case "system":
			w(b, m.Content, "\n\n")
		case "user":
			w(b, m.Content, leading, "[/INST]")
		default:
			content := m.Content
			if t == MistralV3 {
				content = trim(content)
			}
			w(b, trailing, content, "</s>")
			inTurn = false
		}
	}
}

// formatLlama2 is llama2 and its variants: with a system message, with
// BOS inside the history, with the messages trimmed.
func formatLlama2(b *strings.Builder, t Template, chat []Message, _ bool) {
	system := t != Llama2
	bosInside := t == Llama2SysBOS
	strip := t == Llama2SysStrip
	inTurn := true // no BOS at the start
	b.WriteString("[INST] ")
	for _, m := range chat {
		content := m.Content
		if strip {
			content = trim(content)
		}
		if !inTurn {
			inTurn = true
			if bosInside {
				b.WriteString("<s>[INST] ")
			} else {
				b.WriteString("[INST] ")
			}
		}
		switch m.Role {
		case "system":
			if system {
				w(b, "<<SYS>>\n", content, "\n<</SYS>>\n\n")
			} else {
				// a model without a system message still gets it, in the
				// first message and without <<SYS>>
				w(b, content, "\n")
			}
		case "user":
			w(b, content, " [/INST]")
		default:
			w(b, content, "</s>")
			inTurn = false
		}
	}
}

func formatGemma(b *strings.Builder, _ Template, chat []Message, add bool) {
	// gemma has no system role: the system message joins the next user one
	system := ""
	for _, m := range chat {
		if m.Role == "system" {
			system += trim(m.Content)
			continue
		}
		role := m.Role
		if role == "assistant" {
			role = "model"
		}
		w(b, "<start_of_turn>", role, "\n")
		if system != "" && role != "model" {
			w(b, system, "\n\n")
			system = ""
		}
		w(b, trim(m.Content), "<end_of_turn>\n")
	}
	addIf(b, add, "<start_of_turn>model\n")
}

func formatOrion(b *strings.Builder, _ Template, chat []Message, _ bool) {
	system := ""
	for _, m := range chat {
		switch m.Role {
		case "system":
			system += m.Content
		case "user":
			b.WriteString("Human: ")
			if system != "" {
				w(b, system, "\n\n")
				system = ""
			}
			w(b, m.Content, "\n\nAssistant: </s>")
		default:
			w(b, m.Content, "</s>")
		}
	}
}

func formatOpenChat(b *strings.Builder, _ Template, chat []Message, add bool) {
	each(chat, func(m Message) {
		if m.Role == "system" {
			w(b, m.Content, "<|end_of_turn|>")
			return
		}
		role := m.Role
		if role != "" {
			role = upperASCII(role[:1]) + role[1:]
		}
		w(b, "GPT4 Correct ", role, ": ", m.Content, "<|end_of_turn|>")
	})
	addIf(b, add, "GPT4 Correct Assistant:")
}

func formatVicuna(b *strings.Builder, t Template, chat []Message, add bool) {
	each(chat, func(m Message) {
		switch m.Role {
		case "system":
			if t == VicunaOrca {
				w(b, "SYSTEM: ", m.Content, "\n")
			} else {
				w(b, m.Content, "\n\n")
			}
		case "user":
			w(b, "USER: ", m.Content, "\n")
		case "assistant":
			w(b, "ASSISTANT: ", m.Content, "</s>\n")
		}
	})
	addIf(b, add, "ASSISTANT:")
}

func formatExaone(b *strings.Builder, chat []Message, add, tool bool) {
	each(chat, func(m Message) {
		switch m.Role {
		case "system":
			w(b, "[|system|]", trim(m.Content), "[|endofturn|]\n")
		case "user":
			w(b, "[|user|]", trim(m.Content), "\n")
		case "assistant":
			w(b, "[|assistant|]", trim(m.Content), "[|endofturn|]\n")
		case "tool":
			if tool {
				w(b, "[|tool|]", trim(m.Content), "[|endofturn|]\n")
			}
		}
	})
	addIf(b, add, "[|assistant|]")
}

func formatGranite4(b *strings.Builder, _ Template, chat []Message, add bool) {
	each(chat, func(m Message) {
		if m.Role == "assistant_tool_call" {
			b.WriteString("<|start_of_role|>assistant<|end_of_role|><|tool_call|>")
		} else {
			w(b, "<|start_of_role|>", m.Role, "<|end_of_role|>")
		}
		w(b, m.Content, "<|end_of_text|>\n")
	})
	addIf(b, add, "<|start_of_role|>assistant<|end_of_role|>")
}

func formatGigaChat(b *strings.Builder, _ Template, chat []Message, add bool) {
	hasSystem := len(chat) > 0 && chat[0].Role == "system"
	if hasSystem {
		w(b, "<s>", chat[0].Content, "<|message_sep|>")
		chat = chat[1:]
	} else {
		b.WriteString("<s>")
	}
	each(chat, func(m Message) {
		switch m.Role {
		case "user":
			w(b, "user<|role_sep|>", m.Content, "<|message_sep|>", "available functions<|role_sep|>[]<|message_sep|>")
		case "assistant":
			w(b, "assistant<|role_sep|>", m.Content, "<|message_sep|>")
		}
	})
	addIf(b, add, "assistant<|role_sep|>")
}

func bailingRole(role string) string {
	if role == "user" {
		return "HUMAN"
	}
	return upperASCII(role)
}

func formatBailing(b *strings.Builder, t Template, chat []Message, add bool) {
	each(chat, func(m Message) { w(b, "<role>", bailingRole(m.Role), "</role>", m.Content) })
	if add {
		b.WriteString("<role>ASSISTANT</role>")
		if t == BailingThink {
			b.WriteString("<think>")
		}
	}
}
