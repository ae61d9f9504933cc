package ggload

import (
	"context"
	"errors"
	"fmt"
	"iter"
	"maps"
	"slices"
	"strings"

	"github.com/ggload/ggload/chat"
	"github.com/ggload/ggload/internal/ojson"
	"github.com/ggload/ggload/sample"
	"github.com/ggload/ggload/serve"
	"github.com/ggload/ggload/vocab"
)

// ChatOptions are one chat request's options: a request's (the zero
// value: llama-server's defaults), and what the chat template is given.
type ChatOptions struct {
	GenerateOptions
	// Tools are the functions the model may call, ToolChoice "auto"
	// (""), "none" or "required"; the calls come back parsed in the
	// reply's ToolCalls, the template's tool-call grammar applied to the
	// sampling as ggload serve applies it.
	Tools      []chat.Tool
	ToolChoice string
	// Kwargs are chat_template_kwargs: names and JSON texts, given to the
	// template as variables ("enable_thinking": "false").
	Kwargs map[string]string
}

// Chat renders the conversation with the model's chat template as
// llama-server renders a /v1/chat/completions request (its defaults
// and Options.Chat), generates the reply and returns it parsed:
// content, reasoning and tool calls, as llama-server parses them.
func (m *Model) Chat(ctx context.Context, messages []chat.Message, c ChatOptions) (chat.Message, error) {
	msg, err := m.chat(ctx, messages, c, nil)
	return msg, m.fail("chat", err)
}

// ChatStream is Chat streamed: what each piece of the reply adds to the
// message parsed so far (content, reasoning, a tool call's name or
// arguments), as llama-server's streaming chunks carry it. An error is
// the sequence's last item; stopping the loop early, or ctx ending,
// cancels the request.
func (m *Model) ChatStream(ctx context.Context, messages []chat.Message, c ChatOptions) iter.Seq2[chat.Diff, error] {
	return func(yield func(chat.Diff, error) bool) {
		_, err := m.chat(ctx, messages, c, func(d chat.Diff) bool { return yield(d, nil) })
		if err != nil && !errors.Is(err, errStopped) {
			yield(chat.Diff{ToolCallIndex: -1}, m.fail("chat", err))
		}
	}
}

// ChatPrompt is the template's output for the conversation, as Chat
// renders it: the prompt, and how the reply is parsed.
func (m *Model) ChatPrompt(messages []chat.Message, c ChatOptions) (*chat.Params, error) {
	p, err := m.chatPrompt(messages, &c)
	return p, m.fail("chat", err)
}

func (m *Model) chatPrompt(messages []chat.Message, c *ChatOptions) (*chat.Params, error) {
	tm, err := m.Templates()
	if err != nil {
		return nil, err
	}
	body, err := chatBody(messages, c)
	if err != nil {
		return nil, err
	}
	in, err := tm.RequestInputs(body, m.opts.Chat)
	if err != nil {
		return nil, err
	}
	return tm.Apply(in)
}

// chatBody is the conversation as the body of an OpenAI chat request,
// which llama-server reads (chat.Templates.RequestInputs).
func chatBody(messages []chat.Message, c *ChatOptions) (ojson.Value, error) {
	msgs := ojson.ArrayValue()
	for i := range messages {
		j, err := messages[i].JSON(false)
		if err != nil {
			return ojson.Value{}, fmt.Errorf("message %d: %w", i, err)
		}
		msgs.Append(j)
	}
	body := ojson.ObjectValue(ojson.Member{Key: "messages", Value: msgs})
	if len(c.Tools) > 0 {
		tools := ojson.ArrayValue()
		for _, t := range c.Tools {
			fn := ojson.ObjectValue(ojson.Member{Key: "name", Value: ojson.StringValue(t.Name)})
			if t.Description != "" {
				fn.Set("description", ojson.StringValue(t.Description))
			}
			if t.Parameters != "" {
				ps, err := ojson.ParseString(t.Parameters)
				if err != nil {
					return ojson.Value{}, fmt.Errorf("ChatOptions.Tools: %s's parameters: %w", t.Name, err)
				}
				fn.Set("parameters", ps)
			}
			tools.Append(ojson.ObjectValue(ojson.Member{Key: "type", Value: ojson.StringValue("function")}, ojson.Member{Key: "function", Value: fn}))
		}
		body.Set("tools", tools)
	}
	if c.ToolChoice != "" {
		body.Set("tool_choice", ojson.StringValue(c.ToolChoice))
	}
	// a grammar or a schema goes to the template, which makes the grammar
	// (or refuses it beside tools), as a chat request's does
	if g := c.Sampling.Grammar; g != "" {
		body.Set("grammar", ojson.StringValue(g))
	}
	if js := c.Sampling.JSONSchema; js != "" {
		v, err := ojson.ParseString(js)
		if err != nil {
			return ojson.Value{}, fmt.Errorf("ChatOptions.Sampling.JSONSchema: %w", err)
		}
		body.Set("json_schema", v)
	}
	if len(c.Kwargs) > 0 {
		kw := ojson.ObjectValue()
		for _, k := range slices.Sorted(maps.Keys(c.Kwargs)) {
			v, err := ojson.ParseString(c.Kwargs[k])
			if err != nil {
				return ojson.Value{}, fmt.Errorf("ChatOptions.Kwargs[%q]: want a JSON text: %w", k, err)
			}
			kw.Set(k, v)
		}
		body.Set("chat_template_kwargs", kw)
	}
	return body, nil
}

// chat runs a chat request: the template applied, the prompt tokenized
// as llama-server tokenizes it, the reply generated with the template's
// stop strings and preserved tokens, parsed as it streams (each change
// to onDiff, where it is set) and at its end.
func (m *Model) chat(ctx context.Context, messages []chat.Message, c ChatOptions, onDiff func(chat.Diff) bool) (chat.Message, error) {
	p, err := m.chatPrompt(messages, &c)
	if err != nil {
		return chat.Message{}, err
	}
	o, err := m.options(&c.GenerateOptions)
	if err != nil {
		return chat.Message{}, err
	}
	v := m.e.Vocab()
	o.Stop = append(o.Stop, p.AdditionalStops...)
	for _, s := range p.PreservedTokens {
		ids, err := v.Tokenize(s, false, true)
		if err != nil {
			return chat.Message{}, fmt.Errorf("the template's preserved token %q: %w", s, err)
		}
		if len(ids) == 1 && !slices.Contains(o.PreservedTokens, ids[0]) {
			o.PreservedTokens = append(o.PreservedTokens, ids[0])
		}
	}
	slices.Sort(o.PreservedTokens)
	if err := chatGrammar(v, p, &o); err != nil {
		return chat.Message{}, err
	}
	toks, err := v.Tokenize(p.Prompt, true, true)
	if err != nil {
		return chat.Message{}, fmt.Errorf("the prompt: %w", err)
	}
	st := p.NewStream(nil)
	var parseErr error
	res, err := m.run(ctx, toks, o, func(piece string, _ error) bool {
		_, diffs, err := st.Add(piece, true)
		if err != nil {
			parseErr = err
			return false
		}
		for _, d := range diffs {
			if onDiff != nil && !onDiff(d) {
				return false
			}
		}
		return true
	})
	if parseErr != nil {
		return chat.Message{}, fmt.Errorf("the reply: %w", parseErr)
	}
	if err != nil {
		return chat.Message{}, err
	}
	return finish(st, res, onDiff)
}

// finish parses the whole reply (what the stream held back included),
// hands the last changes to onDiff, and returns the message: the
// reply's text as its content where the parse finds nothing, as
// llama-server answers.
func finish(st *chat.Stream, res *serve.Result, onDiff func(chat.Diff) bool) (chat.Message, error) {
	rest := ""
	if strings.HasPrefix(res.Content, st.Text()) {
		rest = res.Content[len(st.Text()):]
	}
	msg, diffs, err := st.Add(rest, false)
	if err != nil {
		return chat.Message{}, fmt.Errorf("the reply: %w", err)
	}
	for _, d := range diffs {
		if onDiff != nil && !onDiff(d) {
			return msg, errStopped
		}
	}
	if msg.Empty() {
		msg = chat.Message{Role: "assistant", Content: res.Content}
	}
	return msg, nil
}

// chatGrammar puts the template's grammar in the request's sampling, as
// llama-server passes a chat request's on (oaicompat_chat_params_parse,
// then params_from_json_cmpl): the grammar (a tool call's, or the one
// the template made of a JSON schema or grammar the request gave), lazy
// with its triggers where the template says so, a trigger word of one
// token as that token (which must be preserved), and the generation
// prompt; where the template made no grammar, the request's own.
func chatGrammar(v *vocab.Vocab, p *chat.Params, o *serve.Options) error {
	s := &o.Sampling
	user := s.Grammar
	s.Grammar, s.JSONSchema, s.GrammarType, s.GrammarLazy, s.GrammarTriggers = "", "", sample.GrammarUser, false, nil
	s.GenerationPrompt = p.GenerationPrompt
	if p.Grammar == "" {
		// the request's own grammar, which llama-server keeps from the
		// body where the template made none
		s.Grammar = user
		return nil
	}
	s.Grammar, s.GrammarType, s.GrammarLazy = p.Grammar, sample.GrammarToolCalls, p.GrammarLazy
	for _, t := range p.GrammarTriggers {
		tr := sample.GrammarTrigger{Type: sample.TriggerType(t.Type), Value: t.Value}
		if tr.Type == sample.TriggerWord {
			ids, err := v.Tokenize(t.Value, false, true)
			if err != nil {
				return fmt.Errorf("the template's grammar trigger %q: %w", t.Value, err)
			}
			if len(ids) == 1 {
				if !slices.Contains(o.PreservedTokens, ids[0]) {
					return fmt.Errorf("the template's grammar trigger word should be marked as preserved token: %s", t.Value)
				}
				tr = sample.GrammarTrigger{Type: sample.TriggerToken, Value: t.Value, Token: ids[0]}
			}
		}
		s.GrammarTriggers = append(s.GrammarTriggers, tr)
	}
	if s.GrammarLazy && len(s.GrammarTriggers) == 0 {
		return errors.New("the template's lazy grammar has no triggers")
	}
	return nil
}
