// Port of llama.cpp common/chat.cpp (v0.5.0): common_chat_templates_init
// and the template sources (llama_model_chat_template, src/llama-model.cpp).

package chat

import (
	"strings"
	"sync"

	"github.com/ggload/ggload/chat/internal/jinja"
	"github.com/ggload/ggload/gguf"
	"github.com/ggload/ggload/vocab"
)

// ChatML is the template llama.cpp falls back to when a model has none
// (CHATML_TEMPLATE_SRC).
const ChatML = "{%- for message in messages -%}\n" +
	"  {{- '<|im_start|>' + message.role + '\n' + message.content + '<|im_end|>\n' -}}\n" +
	"{%- endfor -%}\n" +
	"{%- if add_generation_prompt -%}\n" +
	"  {{- '<|im_start|>assistant\n' -}}\n" +
	"{%- endif -%}"

// Templates is common_chat_templates: a model's chat templates, parsed
// once, used by any number of goroutines.
type Templates struct {
	addBOS, addEOS bool
	explicit       bool
	def            *template // always set
	toolUse        *template // nil when the model has none

	thinkingOnce sync.Once
	canThink     bool
}

// template is common_chat_template: a parsed template, its tokens, its
// capabilities, and (once asked for) the autoparser's analysis of it.
type template struct {
	prog     *jinja.Template
	src      string // as the lexer normalized it
	bos, eos string
	caps     jinja.Caps

	analysisOnce sync.Once
	analysis     *autoparser
	analysisErr  error
}

// Options are common_chat_templates_init's other arguments.
type Options struct {
	// Template replaces the model's templates: a built-in name or a Jinja
	// source (--chat-template), or a file's contents
	// (--chat-template-file). "chatml" is the ChatML template.
	Template string
	// Name names Template in errors (the file it came from); the default
	// is "--chat-template".
	Name string
	// BOS and EOS are the bos_token and eos_token a template without a
	// model sees (the init's overrides); a model's vocabulary gives its
	// own.
	BOS, EOS string
}

// Model's template keys.
const (
	keyChatTemplate = "tokenizer.chat_template"
	toolUseVariant  = "tool_use"
)

// modelTemplate is llama_model_chat_template: the KV's text up to a NUL,
// or false.
func modelTemplate(m *gguf.Model, v *vocab.Vocab, name string) (string, bool) {
	key := keyChatTemplate
	if name != "" {
		key += "." + name
	}
	val, ok := m.Lookup(key)
	if !ok || val.IsArray() {
		// Mistral-Small-2503 has no template: the pin's one-off fix
		if name == "" && v != nil && v.Pre() == "tekken" {
			if n, err := m.Uint(m.Architecture() + ".block_count"); err == nil && n == 40 {
				return "mistral-v7-tekken", true
			}
		}
		return "", false
	}
	s, isStr := val.Str()
	if !isStr {
		s = val.String()
	}
	if i := strings.IndexByte(s, 0); i >= 0 {
		s = s[:i]
	}
	return s, true
}

// FromModel is common_chat_templates_init on a model: its
// tokenizer.chat_template and tool_use template (or opts.Template), its
// BOS and EOS tokens as the templates see them, and whether the
// vocabulary adds them. v may be nil: it is then loaded from m (a
// vocab-only file is enough).
func FromModel(m *gguf.Model, v *vocab.Vocab, opts Options) (*Templates, error) {
	if v == nil {
		var err error
		if v, err = vocab.Load(m); err != nil {
			return nil, err
		}
	}
	def, toolUse := opts.Template, ""
	explicit := opts.Template != ""
	defName, toolName := opts.Name, "tokenizer.chat_template.tool_use"
	if defName == "" {
		defName = "--chat-template"
	}
	if opts.Template == "" {
		defName = keyChatTemplate
		if s, ok := modelTemplate(m, v, ""); ok {
			def, explicit = s, true
		}
		if s, ok := modelTemplate(m, v, toolUseVariant); ok {
			toolUse, explicit = s, true
		}
	}
	piece := func(t vocab.Token) string {
		if t < 0 {
			return ""
		}
		b, err := v.AppendPiece(nil, t, 0, true)
		if err != nil {
			return ""
		}
		return string(b)
	}
	bos, eos := piece(v.BOS()), piece(v.EOS())
	return newTemplates(def, defName, toolUse, toolName, bos, eos, v.AddBOS(), v.AddEOS(), explicit)
}

// FromSource is common_chat_templates_init without a model: the template
// is opts.Template, BOS and EOS are opts.BOS and opts.EOS.
func FromSource(opts Options) (*Templates, error) {
	if opts.Template == "" {
		return nil, &Error{Msg: "no chat template: a template without a model must be given"}
	}
	name := opts.Name
	if name == "" {
		name = "--chat-template"
	}
	return newTemplates(opts.Template, name, "", "", opts.BOS, opts.EOS, false, false, true)
}

func newTemplates(def, defName, toolUse, toolName, bos, eos string, addBOS, addEOS, explicit bool) (*Templates, error) {
	if def == "" || def == "chatml" {
		if toolUse != "" {
			def, defName = toolUse, toolName
		} else {
			def, defName = ChatML, "chatml"
		}
	}
	// the pin patches two templates' error checks away
	if strings.Contains(def, "<|channel|>") && strings.Contains(def, "in message.content or") {
		def = strings.ReplaceAll(def, "{%- if \"<|channel|>analysis<|message|>\" in message.content or "+
			"\"<|channel|>final<|message|>\" in message.content %}", "{%- if false %}")
	}
	if strings.Contains(def, "[TOOL_CALLS]") && strings.Contains(def, "if (message['content'] is none or") {
		def = strings.ReplaceAll(def, "{%- if (message['content'] is none or message['content'] == '' or "+
			"message['content']|length == 0) and (message['tool_calls'] is not defined or "+
			"message['tool_calls'] is none or message['tool_calls']|length == 0) %}", "{%- if false %}")
	}
	t := &Templates{addBOS: addBOS, addEOS: addEOS, explicit: explicit}
	var err error
	if t.def, err = newTemplate(defName, def, bos, eos); err != nil {
		return nil, err
	}
	if toolUse != "" {
		// a tool_use template that fails is ignored, as the pin ignores it
		t.toolUse, _ = newTemplate(toolName, toolUse, bos, eos)
	}
	return t, nil
}

func newTemplate(name, src, bos, eos string) (*template, error) {
	prog, err := jinja.Parse(name, src)
	if err != nil {
		return nil, templateError(err)
	}
	caps, err := prog.Caps()
	if err != nil {
		return nil, templateError(err)
	}
	return &template{prog: prog, src: prog.Source(), bos: bos, eos: eos, caps: caps}, nil
}

// templateError is a Jinja error as an *Error.
func templateError(err error) error {
	if je, ok := err.(*jinja.Error); ok {
		return &Error{Msg: je.Msg, Template: je.Name, Line: je.Line, Col: je.Col}
	}
	return err
}

// WasExplicit is common_chat_templates_was_explicit: whether the model
// had a template or one was given.
func (t *Templates) WasExplicit() bool { return t.explicit }

// Source is common_chat_templates_source: the default template's source
// ("tool_use" for the tool_use template's, "" if none), as the lexer
// normalized it.
func (t *Templates) Source(variant string) string {
	if variant == toolUseVariant {
		if t.toolUse != nil {
			return t.toolUse.src
		}
		return ""
	}
	return t.def.src
}

// AddBOS and AddEOS say whether the vocabulary adds the BOS and EOS
// tokens (so that a prompt must not hold them).
func (t *Templates) AddBOS() bool { return t.addBOS }
func (t *Templates) AddEOS() bool { return t.addEOS }

// Caps is common_chat_templates_get_caps: the capabilities of the tool_use
// template where there is one, else of the default one, by the pin's
// names (supports_tools, supports_system_role, ...).
func (t *Templates) Caps() map[string]bool {
	if t.toolUse != nil {
		return t.toolUse.caps.Map()
	}
	return t.def.caps.Map()
}

// SupportsThinking is common_chat_templates_support_enable_thinking:
// whether the template has a thinking mode.
func (t *Templates) SupportsThinking() (bool, error) {
	p, err := t.Apply(&Inputs{
		Messages:        []Message{{Role: "user", Content: "test"}},
		ReasoningFormat: ReasoningDeepSeek,
	})
	if err != nil {
		return false, err
	}
	return p.SupportsThinking, nil
}
