// Port of llama.cpp src/llama-vocab.cpp (v0.5.0): the pre-tokenizer types
// (llama_vocab_pre_type) that tokenizer.ggml.pre selects.

package vocab

// preType is a pre-tokenizer, llama_vocab_pre_type, named by its enum
// name's suffix ("LLAMA3"); the name is also the key of its regular
// expressions in unicode.PreRegexes.
type preType string

const preDefault preType = "DEFAULT"

// preRule is what one branch of llama_vocab::impl::load's pre-tokenizer
// chain sets besides the type.
type preRule struct {
	typ          preType
	cleanSpaces  int8 // -1 false, 0 unchanged, 1 true
	ignoreMerges bool
	addBOS       bool
	addSEP       bool
	escapeWS     bool
	nullBOS      bool // special_bos_id = LLAMA_TOKEN_NULL
	noLowercase  bool // normalizer lowercase = false
}

// preRules maps tokenizer.ggml.pre to its branch of the chain. An empty
// name is the default type (with the pin's warning).
var preRules = func() map[string]preRule {
	m := map[string]preRule{}
	add := func(r preRule, names ...string) {
		for _, n := range names {
			m[n] = r
		}
	}
	off := int8(-1)
	add(preRule{typ: preDefault}, "", "default")
	add(preRule{typ: "MINICPM5", ignoreMerges: true}, "minicpm5")
	add(preRule{typ: "LLAMA3", ignoreMerges: true, addBOS: true},
		"llama3", "llama-v3", "llama-bpe", "falcon3", "falcon-h1", "pixtral", "midm-2.0", "lfm2", "jina-v5-nano")
	add(preRule{typ: "DEEPSEEK_LLM", cleanSpaces: off}, "deepseek-llm")
	add(preRule{typ: "DEEPSEEK_CODER", cleanSpaces: off}, "deepseek-coder")
	add(preRule{typ: "DEEPSEEK3_LLM", cleanSpaces: off}, "deepseek-v3")
	add(preRule{typ: "SPARK2_5", cleanSpaces: off}, "spark2_5")
	add(preRule{typ: "YOUTU", cleanSpaces: off, ignoreMerges: true}, "youtu")
	add(preRule{typ: "FALCON"}, "falcon")
	add(preRule{typ: "MPT"}, "mpt")
	add(preRule{typ: "STARCODER"}, "starcoder")
	add(preRule{typ: "GPT2"}, "gpt-2", "phi-2", "jina-es", "jina-de", "gigachat", "jina-v2-es", "jina-v2-de", "a.x-4.0", "mellum", "modern-bert")
	add(preRule{typ: "JAIS2"}, "jais-2")
	add(preRule{typ: "GEMMA4", escapeWS: true}, "gemma4", "granite-embed-multi-311m")
	add(preRule{typ: "SARVAM_MOE", escapeWS: true, cleanSpaces: off}, "sarvam-moe")
	add(preRule{typ: "GPT2", addSEP: true}, "jina-v1-en", "jina-v2-code", "roberta-bpe")
	add(preRule{typ: "WHITESPACE", noLowercase: true}, "whitespace")
	add(preRule{typ: "REFACT"}, "refact")
	add(preRule{typ: "COMMAND_R", cleanSpaces: off}, "command-r")
	add(preRule{typ: "QWEN2", cleanSpaces: off}, "qwen2", "deepseek-r1-qwen", "kormo", "f2llmv2")
	add(preRule{typ: "QWEN35", cleanSpaces: off}, "qwen35")
	add(preRule{typ: "STABLELM2"}, "stablelm2")
	add(preRule{typ: "OLMO"}, "olmo")
	add(preRule{typ: "DBRX"}, "dbrx")
	add(preRule{typ: "SMAUG"}, "smaug-bpe")
	add(preRule{typ: "PORO", cleanSpaces: off}, "poro-chat")
	add(preRule{typ: "CHATGLM4", nullBOS: true}, "glm4", "chatglm-bpe")
	add(preRule{typ: "VIKING", cleanSpaces: off}, "viking")
	add(preRule{typ: "JAIS"}, "jais")
	add(preRule{typ: "TEKKEN", cleanSpaces: off, ignoreMerges: true, addBOS: true}, "tekken")
	add(preRule{typ: "SMOLLM", cleanSpaces: off}, "smollm")
	add(preRule{typ: "CODESHELL"}, "codeshell")
	add(preRule{typ: "BLOOM"}, "bloom")
	add(preRule{typ: "GPT3_FINNISH"}, "gpt3-finnish")
	add(preRule{typ: "EXAONE"}, "exaone")
	add(preRule{typ: "GPT2"}, "exaone4")
	add(preRule{typ: "EXAONE_MOE"}, "exaone-moe")
	add(preRule{typ: "CHAMELEON", addBOS: true, cleanSpaces: off}, "chameleon")
	add(preRule{typ: "MINERVA"}, "minerva-7b")
	add(preRule{typ: "QWEN2"}, "megrez")
	add(preRule{typ: "GPT4O", cleanSpaces: off}, "gpt-4o", "llama4", "kanana2", "talkie")
	add(preRule{typ: "GRANITE_EMB_MULTI", cleanSpaces: off, ignoreMerges: true}, "granite-embed-multi-97m")
	add(preRule{typ: "TINY_AYA", cleanSpaces: off}, "tiny_aya", "cohere2moe")
	add(preRule{typ: "SUPERBPE", cleanSpaces: off}, "superbpe")
	add(preRule{typ: "TRILLION", cleanSpaces: off}, "trillion")
	add(preRule{typ: "GRANITE_DOCLING", cleanSpaces: off}, "granite-docling")
	add(preRule{typ: "BAILINGMOE", cleanSpaces: off}, "bailingmoe", "bailingmoe2", "llada-moe")
	add(preRule{typ: "SEED_CODER", cleanSpaces: off}, "seed-coder")
	add(preRule{typ: "HUNYUAN", cleanSpaces: off}, "hunyuan")
	add(preRule{typ: "HUNYUAN_DENSE", cleanSpaces: off}, "hunyuan-dense")
	add(preRule{typ: "HY_V4", cleanSpaces: off}, "hy_v4")
	add(preRule{typ: "JOYAI_LLM", cleanSpaces: off}, "joyai-llm")
	add(preRule{typ: "KIMI_K2", cleanSpaces: off}, "kimi-k2")
	add(preRule{typ: "UFAKZEKA", cleanSpaces: off}, "ufakzeka")
	add(preRule{typ: "GROK_2", cleanSpaces: off}, "grok-2")
	add(preRule{typ: "AFMOE", cleanSpaces: off}, "afmoe")
	add(preRule{typ: "LAGUNA", cleanSpaces: off}, "laguna")
	add(preRule{typ: "MINIMAX_M2", cleanSpaces: off}, "minimax-m2")
	add(preRule{typ: "SOLAR_OPEN", cleanSpaces: off}, "solar-open")
	add(preRule{typ: "MELLUM2"}, "mellum2")
	return m
}()

// byteEncoded reports whether a BPE pre-tokenizer works on GPT-2
// byte-encoded text (llm_tokenizer_bpe's byte_encode).
func (p preType) byteEncoded() bool {
	switch p {
	case "GEMMA4", "SARVAM_MOE", "WHITESPACE":
		return false
	}
	return true
}
