package main

import (
	"context"
	"fmt"
	"io"

	"github.com/ggload/ggload/chat"
	"github.com/ggload/ggload/gguf"
	"github.com/ggload/ggload/internal/ojson"
)

func init() {
	register(command{"apply-template", "MODEL --messages FILE [options]",
		"a conversation in MODEL's chat template, as llama-server renders it, and replies parsed back", runApplyTemplate})
	optionSets["apply-template"] = func() *optionSet { return applyTemplateOptions(&applyTemplateFlags{}) }
}

type applyTemplateFlags struct {
	template, templateFile string
	messages, tools        string
	toolChoice             string
	parallel, noGen        bool
	reasoningFormat        string
	kwargs, schema         string
	parse                  []string
	json, noJinja          bool
}

func applyTemplateOptions(f *applyTemplateFlags) *optionSet {
	s := newOptionSet("apply-template",
		"Apply MODEL's chat template (its tokenizer.chat_template, or --chat-template) to a conversation as llama-server does for an OpenAI chat request, with llama.cpp's Jinja engine and chat formats, and print the prompt. MODEL may hold a vocabulary alone. --parse files hold model replies, parsed back into content, reasoning and tool calls as llama-server parses them. The date the templates print is SOURCE_DATE_EPOCH's where it is set.",
		"ggload apply-template MODEL --messages FILE [--chat-template-file F | --chat-template S] [--tools FILE] [--tool-choice auto|none|required] [--parallel-tool-calls] [--no-add-generation-prompt] [--reasoning-format FMT] [--chat-template-kwargs JSON] [--json-schema JSON] [--parse FILE ...] [--json]")
	s.group("template")
	s.add(&option{names: []string{"--chat-template"}, env: "LLAMA_ARG_CHAT_TEMPLATE", value: "JINJA_TEMPLATE", help: "the template: a Jinja source, or a built-in's name (chatml, llama3, ...; by name under --no-jinja) in place of the model's",
		set: func(v string) error { f.template = v; return nil }})
	s.add(&option{names: []string{"--chat-template-file"}, env: "LLAMA_ARG_CHAT_TEMPLATE_FILE", value: "JINJA_TEMPLATE_FILE", help: "the template, from a file",
		set: func(v string) error { f.templateFile = v; return nil }})
	s.add(&option{names: []string{"--jinja"}, env: "LLAMA_ARG_JINJA", neg: []string{"--no-jinja"}, help: "use llama.cpp's Jinja engine (default); --no-jinja uses llama.cpp's built-in formats, detected from the template",
		on: func(on bool) error { f.noJinja = !on; return nil }})
	s.group("request (as an OpenAI chat completion request's members)")
	s.add(&option{names: []string{"--messages"}, value: "FILE", help: "the conversation: a JSON array of OpenAI messages, or a whole request object",
		set: func(v string) error { f.messages = v; return nil }})
	s.add(&option{names: []string{"--tools"}, value: "FILE", help: "a JSON array of OpenAI function tools",
		set: func(v string) error { f.tools = v; return nil }})
	s.add(&option{names: []string{"--tool-choice"}, value: "auto|none|required", help: "tool_choice (default: auto)",
		set: func(v string) error { f.toolChoice = v; return nil }})
	s.add(&option{names: []string{"--parallel-tool-calls"}, help: "allow several tool calls in one reply (default: as the template supports)",
		on: func(on bool) error { f.parallel = on; return nil }})
	s.add(&option{names: []string{"--no-add-generation-prompt"}, help: "leave the assistant's turn unopened",
		on: func(on bool) error { f.noGen = on; return nil }})
	s.add(&option{names: []string{"--json-schema"}, value: "JSON", help: "constrain the reply to a JSON schema",
		set: func(v string) error { f.schema = v; return nil }})
	s.group("server")
	s.add(&option{names: []string{"--reasoning-format"}, env: "LLAMA_ARG_THINK", value: "FORMAT", help: "none, deepseek, deepseek-legacy or auto: whether reasoning is parsed out of a reply (default: deepseek, llama-server's)",
		set: func(v string) error { f.reasoningFormat = v; return nil }})
	s.add(&option{names: []string{"--chat-template-kwargs"}, env: "LLAMA_ARG_CHAT_TEMPLATE_KWARGS", value: "STRING", help: "a JSON object of variables for the template, e.g. '{\"enable_thinking\": false}'",
		set: func(v string) error { f.kwargs = v; return nil }})
	s.group("output")
	s.add(&option{names: []string{"--parse"}, value: "FILE ...", help: "parse a model reply (the file's bytes); more files may follow",
		set: func(v string) error { f.parse = append(f.parse, v); return nil }})
	s.add(&option{names: []string{"--json"}, help: "print one JSON object: prompt, format, grammar, grammar_lazy, grammar_triggers, preserved_tokens, additional_stops, generation_prompt, supports_thinking, parsed",
		on: func(on bool) error { f.json = on; return nil }})
	return s
}

func readJSONFile(what, path string) (ojson.Value, error) {
	b, err := readPromptFile(path)
	if err != nil {
		return ojson.Value{}, fmt.Errorf("%s: %w", what, err)
	}
	v, err := ojson.Parse(b)
	if err != nil {
		return ojson.Value{}, fmt.Errorf("%s %s: %w", what, path, err)
	}
	return v, nil
}

func runApplyTemplate(ctx context.Context, args []string, stdout io.Writer) error {
	var f applyTemplateFlags
	s := applyTemplateOptions(&f)
	pos, err := s.parse(args)
	if err != nil {
		return helpOr(s, stdout, err)
	}
	switch {
	case len(pos) == 0:
		return s.errorf("no MODEL given: usage: %s", s.usage[0])
	case len(pos) > 1 && len(f.parse) == 0:
		return s.errorf("one MODEL, not %d: usage: %s", len(pos), s.usage[0])
	case f.messages == "":
		return s.errorf("no --messages FILE given: usage: %s", s.usage[0])
	case f.template != "" && f.templateFile != "":
		return s.errorf("--chat-template and --chat-template-file both given")
	}
	// the files after --parse's first
	f.parse = append(f.parse, pos[1:]...)
	opts := chat.Options{Template: f.template}
	if f.templateFile != "" {
		b, err := readPromptFile(f.templateFile)
		if err != nil {
			return fmt.Errorf("error: failed to open file '%s': %w", f.templateFile, err)
		}
		opts.Template, opts.Name = string(b), f.templateFile
	}
	m, err := gguf.OpenModel(pos[0])
	if err != nil {
		return err
	}
	defer m.Close()
	tm, err := chat.FromModel(m, nil, opts)
	if err != nil {
		return err
	}
	body, err := requestBody(&f)
	if err != nil {
		return err
	}
	sopts := chat.ServerOptions{Legacy: f.noJinja, ReasoningFormat: f.reasoningFormat}
	if f.kwargs != "" {
		kw, err := ojson.ParseString(f.kwargs)
		if err != nil {
			return fmt.Errorf("--chat-template-kwargs: %w", err)
		}
		sopts.Kwargs = map[string]string{}
		for _, item := range kwItems(kw) {
			s, err := item.Value.Dump(-1)
			if err != nil {
				return fmt.Errorf("--chat-template-kwargs: %w", err)
			}
			sopts.Kwargs[item.Key] = s
		}
	}
	in, err := tm.RequestInputs(body, sopts)
	if err != nil {
		return err
	}
	p, err := tm.Apply(in)
	if err != nil {
		return err
	}
	if !f.json {
		_, err = io.WriteString(stdout, p.Prompt)
		return err
	}
	out, err := applyJSON(p, f.parse)
	if err != nil {
		return err
	}
	_, err = io.WriteString(stdout, out+"\n")
	return err
}

// requestBody is the request the flags make: the messages file (an
// array, or a request object) with the other flags' members set.
func requestBody(f *applyTemplateFlags) (ojson.Value, error) {
	msgs, err := readJSONFile("--messages", f.messages)
	if err != nil {
		return ojson.Value{}, err
	}
	body := ojson.ObjectValue()
	if msgs.IsObject() {
		body = msgs
	} else {
		body.Set("messages", msgs)
	}
	if f.tools != "" {
		tools, err := readJSONFile("--tools", f.tools)
		if err != nil {
			return ojson.Value{}, err
		}
		body.Set("tools", tools)
	}
	if f.toolChoice != "" {
		body.Set("tool_choice", ojson.StringValue(f.toolChoice))
	}
	if f.parallel {
		body.Set("parallel_tool_calls", ojson.BoolValue(true))
	}
	if f.noGen {
		body.Set("add_generation_prompt", ojson.BoolValue(false))
	}
	if f.schema != "" {
		schema, err := ojson.ParseString(f.schema)
		if err != nil {
			return ojson.Value{}, fmt.Errorf("--json-schema: %w", err)
		}
		body.Set("json_schema", schema)
	}
	return body, nil
}

// kwItems are the members of --chat-template-kwargs as llama.cpp's option
// walks them (items(): an array's by index).
func kwItems(v ojson.Value) []ojson.Member {
	switch {
	case v.IsObject():
		return v.Members()
	case v.IsArray():
		var out []ojson.Member
		for i, e := range v.Elems() {
			out = append(out, ojson.Member{Key: fmt.Sprint(i), Value: e})
		}
		return out
	case v.IsNull():
		return nil
	}
	return []ojson.Member{{Value: v}}
}

// applyJSON is --json's object, the replies in files parsed.
func applyJSON(p *chat.Params, files []string) (string, error) {
	o := ojson.ObjectValue()
	str := ojson.StringValue
	strs := func(ss []string) ojson.Value {
		a := ojson.ArrayValue()
		for _, s := range ss {
			a.Append(str(s))
		}
		return a
	}
	o.Set("prompt", str(p.Prompt))
	o.Set("format", str(p.Format.String()))
	o.Set("grammar", str(p.Grammar))
	o.Set("grammar_lazy", ojson.BoolValue(p.GrammarLazy))
	triggers := ojson.ArrayValue()
	for _, t := range p.GrammarTriggers {
		triggers.Append(ojson.ObjectValue(ojson.Member{Key: "type", Value: ojson.IntValue(int64(t.Type))},
			ojson.Member{Key: "value", Value: str(t.Value)}))
	}
	o.Set("grammar_triggers", triggers)
	o.Set("preserved_tokens", strs(p.PreservedTokens))
	o.Set("additional_stops", strs(p.AdditionalStops))
	o.Set("generation_prompt", str(p.GenerationPrompt))
	o.Set("supports_thinking", ojson.BoolValue(p.SupportsThinking))
	parsed := ojson.ArrayValue()
	for _, file := range files {
		b, err := readPromptFile(file)
		if err != nil {
			return "", fmt.Errorf("--parse: %w", err)
		}
		msg, err := p.Parse(string(b), false)
		var m ojson.Value
		if err == nil {
			m, err = msg.JSON(false)
		}
		if err != nil {
			m = ojson.ObjectValue(ojson.Member{Key: "error", Value: str(chatErrorText(err))})
		}
		parsed.Append(m)
	}
	o.Set("parsed", parsed)
	return o.DumpSafe(-1), nil
}

// chatErrorText is the pin's message of a chat error.
func chatErrorText(err error) string {
	if e, ok := err.(*chat.Error); ok {
		return e.Msg
	}
	return err.Error()
}
