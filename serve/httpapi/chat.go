// Port of llama.cpp tools/server/server-common.cpp (the server's part of
// oaicompat_chat_params_parse), tools/server/server-context.cpp (the chat,
// responses, anthropic, apply-template and count-tokens routes) and
// tools/server/server-task.cpp (task_result_state, the chat results'
// to_json) (v0.5.0).

package httpapi

import (
	"errors"
	"net/http"
	"strings"
	"time"

	"github.com/ggload/ggload/chat"
	"github.com/ggload/ggload/internal/ojson"
	"github.com/ggload/ggload/serve"
)

// ChatSettings are the server's chat options (--jinja, --chat-template,
// --reasoning-format, ...): the zero value is llama-server's defaults.
type ChatSettings struct {
	// Template is --chat-template (a built-in name or a Jinja source) or
	// --chat-template-file's contents, TemplateName names it in errors;
	// "": the model's.
	Template, TemplateName string
	// Server are the options that shape a request's inputs.
	Server chat.ServerOptions
	// ReasoningBudget is --reasoning-budget (0 or negative: none, as -1);
	// ReasoningBudgetMessage is --reasoning-budget-message.
	ReasoningBudget        int
	ReasoningBudgetMessage string
}

func (c ChatSettings) budget() int {
	if c.ReasoningBudget <= 0 {
		return -1
	}
	return c.ReasoningBudget
}

// chatRoutes are the chat endpoints.
func (h *Handler) chatRoutes(add func(method string, fn route, paths ...string)) {
	add("POST", h.chatCompletions(resOAIChat, nil), "/chat/completions", "/v1/chat/completions")
	add("POST", h.chatCompletions(resOAIResp, responsesToChat), "/v1/responses", "/responses")
	add("POST", h.chatCompletions(resAnthropic, anthropicToChat), "/v1/messages")
	add("POST", h.countTokens(resOAIChat, nil), "/chat/completions/input_tokens", "/v1/chat/completions/input_tokens")
	add("POST", h.countTokens(resOAIResp, responsesToChat), "/responses/input_tokens", "/v1/responses/input_tokens")
	add("POST", h.countTokens(resAnthropic, anthropicToChat), "/v1/messages/count_tokens")
	add("POST", h.applyTemplate, "/apply-template")
	add("POST", h.control, "/v1/chat/completions/control")
}

// chatCompletions is POST /v1/chat/completions, /v1/responses and
// /v1/messages: the request converted to a chat completion, the chat
// template applied, the completion run, the reply parsed.
func (h *Handler) chatCompletions(rt resType, convert func(ojson.Value) (ojson.Value, error)) route {
	return func(w http.ResponseWriter, r *http.Request, body []byte) error {
		m, release, params, cp, err := h.chatRequest(r, body, convert)
		if err != nil {
			return err
		}
		defer release()
		return h.handleCompletions(w, r, m, kindCompletion, params, rt, cp)
	}
}

// chatParams is oaicompat_chat_params_parse: the request's chat template
// applied, as the completion parameters the schema reads (the prompt,
// the stop strings, the grammar, the reply's parser) and the rest of the
// request beside them.
func chatParams(body ojson.Value, m *Model) (ojson.Value, *chat.Params, error) {
	if m.Chat == nil {
		return ojson.Value{}, nil, errf(serve.ErrNotSupported, "this model has no chat templates")
	}
	llama := ojson.ObjectValue()
	if has(body, "stop") && body.At("stop").IsString() {
		llama.Set("stop", ojson.ArrayValue(body.At("stop")))
	} else {
		llama.Set("stop", value(body, "stop", ojson.ArrayValue(), asJSON))
	}
	in, err := m.Chat.RequestInputs(body, m.Settings.Chat.Server)
	if err != nil {
		return ojson.Value{}, nil, chatError(err)
	}
	if len(in.Tools) > 0 && in.ToolChoice != chat.ToolChoiceNone {
		llama.Set("parse_tool_calls", ojson.BoolValue(true))
	}
	p, err := m.Chat.Apply(in)
	if err != nil {
		return ojson.Value{}, nil, chatError(err)
	}
	llama.Set("chat_format", jv(int(p.Format)))
	llama.Set("prompt", jv(p.Prompt))
	if p.Grammar != "" {
		llama.Set("grammar", jv(p.Grammar))
		llama.Set("grammar_type", jv("tool_calls"))
	}
	llama.Set("grammar_lazy", jv(p.GrammarLazy))
	triggers := ojson.ArrayValue()
	for _, t := range p.GrammarTriggers {
		triggers.Append(obj("type", int(t.Type), "value", t.Value))
	}
	llama.Set("grammar_triggers", triggers)
	llama.Set("preserved_tokens", jv(nonNil(p.PreservedTokens)))
	llama.Set("generation_prompt", jv(p.GenerationPrompt))
	stop := llama.At("stop")
	if !stop.IsArray() {
		stop = ojson.ArrayValue(stop)
	}
	for _, s := range p.AdditionalStops {
		stop.Append(ojson.StringValue(s))
	}
	llama.Set("stop", stop)
	budget := value(body, "reasoning_budget_tokens", value(body, "thinking_budget_tokens", -1, getInt), getInt)
	if budget == -1 {
		budget = m.Settings.Chat.budget()
	}
	if len(p.ThinkingEndTags) > 0 {
		llama.Set("reasoning_budget_tokens", jv(budget))
		llama.Set("reasoning_budget_start_tag", jv(p.ThinkingStartTag))
		llama.Set("reasoning_budget_end_tags", jv(p.ThinkingEndTags))
		llama.Set("reasoning_budget_message", jv(value(body, "reasoning_budget_message", m.Settings.Chat.ReasoningBudgetMessage, getString)))
		llama.Set("reasoning_control", jv(value(body, "reasoning_control", false, getBool)))
	}
	hasTools := body.At("tools").IsArray() && body.At("tools").Len() > 0
	if value(body, "logprobs", false, getBool) {
		if hasTools && value(body, "stream", false, getBool) {
			return ojson.Value{}, nil, invalidf("logprobs is not supported with tools + stream")
		}
		llama.Set("n_probs", jv(value(body, "top_logprobs", 20, getInt)))
	} else if hasValue(body, "top_logprobs") {
		return ojson.Value{}, nil, invalidf("top_logprobs requires logprobs to be set to true")
	}
	for _, it := range body.Members() {
		if !llama.Has(it.Key) || it.Key == "n_predict" {
			llama.Set(it.Key, it.Value)
		}
	}
	return llama, p, nil
}

func getInt(x ojson.Value) (int, error) {
	n, err := getInt32(x)
	return int(n), err
}

// invalidArgs are the messages llama-server throws as invalid arguments
// (400) while it reads a chat request; its other errors are 500s.
var invalidArgs = []string{
	"Invalid tool_choice", "Unable to generate parser", "response_format type must be", "'messages' is required",
	"Expected 'messages' to be an array", "All non-assistant messages must contain", "Assistant message must contain",
	"Expected 'content' to be a string or an array", "unsupported content[].type", "Cannot have 2 or more",
	"Cannot set both add_generation_prompt", "Cannot continue an assistant message", "Cannot use custom grammar",
	"invalid type for \"enable_thinking\"", "file://", "file path is not allowed", "file does not exist",
	"Invalid uri", "uri must be base64",
	// (json_schema_to_grammar's, where the legacy templates convert the
	// request's schema)
	"JSON schema conversion failed",
}

// chatError is the status of a chat error: invalid_argument or
// runtime_error, by its message.
func chatError(err error) error {
	var ce *chat.Error
	msg := err.Error()
	if errors.As(err, &ce) {
		msg = ce.Msg
	}
	for _, p := range invalidArgs {
		if strings.HasPrefix(msg, p) && !(p == "Expected 'messages' to be an array" && strings.Contains(msg, ", got")) {
			return invalidf("%s", msg)
		}
	}
	return errors.New(msg)
}

// chatRequest is what every chat route does first: the body parsed, the
// model acquired (release it when done; nil on an error), the request
// converted to a chat completion where convert is given, and the chat
// template applied.
func (h *Handler) chatRequest(r *http.Request, body []byte, convert func(ojson.Value) (ojson.Value, error)) (*Model, func(), ojson.Value, *chat.Params, error) {
	data, err := parseBody(body)
	if err != nil {
		return nil, nil, ojson.Value{}, nil, err
	}
	m, release, err := h.acquire(r, data)
	if err != nil {
		return nil, nil, ojson.Value{}, nil, err
	}
	if convert != nil {
		if data, err = convert(data); err != nil {
			release()
			return nil, nil, ojson.Value{}, nil, err
		}
	}
	params, cp, err := chatParams(data, m)
	if err != nil {
		release()
		return nil, nil, ojson.Value{}, nil, err
	}
	return m, release, params, cp, nil
}

// applyTemplate is POST /apply-template: the prompt a chat request makes.
func (h *Handler) applyTemplate(w http.ResponseWriter, r *http.Request, body []byte) error {
	_, release, params, _, err := h.chatRequest(r, body, nil)
	if err != nil {
		return err
	}
	defer release()
	h.writeJSON(w, http.StatusOK, obj("prompt", params.At("prompt")))
	return nil
}

// countTokens is handle_count_tokens: the tokens of a chat request's
// prompt.
func (h *Handler) countTokens(rt resType, convert func(ojson.Value) (ojson.Value, error)) route {
	return func(w http.ResponseWriter, r *http.Request, body []byte) error {
		m, release, params, _, err := h.chatRequest(r, body, convert)
		if err != nil {
			return err
		}
		defer release()
		toks, err := tokenizeMixed(m.Engine.Vocab(), params.At("prompt"), true, true)
		if err != nil {
			return err
		}
		out := obj("input_tokens", int64(len(toks)))
		if rt != resAnthropic {
			out.Set("object", jv("response.input_tokens"))
		}
		h.writeJSON(w, http.StatusOK, out)
		return nil
	}
}

// control is POST /v1/chat/completions/control (reasoning_end): the
// engine has no reasoning budget to end yet, so no completion is found.
func (h *Handler) control(w http.ResponseWriter, r *http.Request, body []byte) error {
	data, err := parseBody(body)
	if err != nil {
		return err
	}
	if value(data, "id", "", getString) == "" {
		return errf(serve.ErrInvalidRequest, "missing completion id")
	}
	if value(data, "action", "", getString) != "reasoning_end" {
		return errf(serve.ErrInvalidRequest, "unknown control action")
	}
	return errf(serve.ErrNotSupported, "ending reasoning at run time is not supported yet")
}

// chatState is task_result_state: a task's reply as parsed so far, and
// the ids and blocks its streamed answer has opened.
type chatState struct {
	params *chat.Params // nil: all content
	text   string
	msg    chat.Message
	ids    []string

	respID, reasoningID, messageID, fcID string
	respCreated                          bool
	thinkingStarted, textStarted         bool
}

func newChatState(p *taskParams, cp *chat.Params) *chatState {
	s := &chatState{params: cp, respID: "resp_" + randomString(), reasoningID: "rs_" + randomString(), messageID: "msg_" + randomString()}
	if p.isContinuation && !p.echo {
		s.msg, _ = s.parse("", true)
	}
	return s
}

func (s *chatState) parse(text string, partial bool) (chat.Message, error) {
	if s.params == nil {
		return chat.Message{Role: "assistant", Content: text}, nil
	}
	return s.params.Parse(text, partial)
}

// update is update_chat_msg: the text added, the reply parsed again,
// and what changed.
func (s *chatState) update(added string, partial bool) ([]chat.Diff, error) {
	s.text += added
	prev := s.msg
	msg, err := s.parse(s.text, partial)
	if err != nil {
		return nil, err
	}
	if msg.Empty() {
		return nil, nil
	}
	msg.SetToolCallIDs(&s.ids, randomString)
	s.msg = msg
	return chat.Diffs(&prev, &s.msg)
}

// chatChunk is one chunk of a streamed chat completion.
func (req *cmplReq) chatChunk(t *cmplTask, finish any, delta ojson.Value) ojson.Value {
	return obj("choices", ojson.ArrayValue(obj("finish_reason", finish, "index", t.index, "delta", delta)),
		"created", time.Now().Unix(), "id", req.id, "model", req.m.Name, "system_fingerprint", req.h.o.BuildInfo,
		"object", "chat.completion.chunk")
}

func (req *cmplReq) finishReason(res *serve.Result, msg *chat.Message) string {
	if res.Stop == serve.StopWord || res.Stop == serve.StopEOS {
		if len(msg.ToolCalls) > 0 {
			return "tool_calls"
		}
		return "stop"
	}
	return "length"
}

// finalChat is the final result's to_json for the chat types.
func (req *cmplReq) finalChat(t *cmplTask, res *serve.Result) (ojson.Value, error) {
	diffs, err := t.state.update(res.Content, false)
	if err != nil {
		return ojson.Value{}, err
	}
	msg := t.state.msg
	if msg.Empty() {
		msg = chat.Message{Role: "assistant", Content: res.Content}
	}
	switch {
	case req.rt == resOAIChat && req.stream:
		return req.finalChatStream(t, res, diffs)
	case req.rt == resOAIChat:
		return req.finalChatJSON(t, res, &msg)
	case req.rt == resOAIResp && req.stream:
		return req.finalRespStream(t, res), nil
	case req.rt == resOAIResp:
		return req.finalResp(t, res, &msg), nil
	case req.rt == resAnthropic && req.stream:
		return req.finalAnthropicStream(t, res, diffs), nil
	}
	return req.finalAnthropic(t, res, &msg), nil
}

func (req *cmplReq) finalChatJSON(t *cmplTask, res *serve.Result, msg *chat.Message) (ojson.Value, error) {
	mj, err := msg.JSON(false)
	if err != nil {
		return ojson.Value{}, err
	}
	choice := obj("finish_reason", req.finishReason(res, msg), "index", t.index, "message", mj)
	if !req.stream && len(res.Probs) > 0 {
		choice.Set("logprobs", obj("content", probsJSON(res.Probs, t.p.o.PostSamplingProbs)))
	}
	o := obj("choices", ojson.ArrayValue(choice), "created", time.Now().Unix(), "model", req.m.Name,
		"system_fingerprint", req.h.o.BuildInfo, "object", "chat.completion", "usage", req.usage(res), "id", req.id)
	if t.p.verbose {
		o.Set("__verbose", req.finalNone(t, res))
	}
	o.Set("timings", timingsJSON(res.Timings))
	return o, nil
}

func (req *cmplReq) finalChatStream(t *cmplTask, res *serve.Result, diffs []chat.Diff) (ojson.Value, error) {
	var out []ojson.Value
	for i := range diffs {
		out = append(out, req.chatChunk(t, nil, diffs[i].JSON()))
	}
	out = append(out, req.chatChunk(t, req.finishReason(res, &t.state.msg), ojson.ObjectValue()))
	if t.p.includeUsage {
		out = append(out, obj("choices", ojson.ArrayValue(), "created", time.Now().Unix(), "id", req.id, "model", req.m.Name,
			"system_fingerprint", req.h.o.BuildInfo, "object", "chat.completion.chunk", "usage", req.usage(res)))
	}
	out[len(out)-1].Set("timings", timingsJSON(res.Timings))
	if t.p.verbose {
		out[0].Set("__verbose", req.finalNone(t, res))
	}
	return ojson.ArrayValue(out...), nil
}

func respUsage(res *serve.Result) ojson.Value {
	return obj("input_tokens", res.NPromptTokens, "output_tokens", res.NDecoded, "total_tokens", res.NDecoded+res.NPromptTokens,
		"input_tokens_details", obj("cached_tokens", res.NPromptCached))
}

func (req *cmplReq) finalResp(t *cmplTask, res *serve.Result, msg *chat.Message) ojson.Value {
	output := ojson.ArrayValue()
	if msg.ReasoningContent != "" {
		output.Append(obj("id", "rs_"+randomString(), "summary", ojson.ArrayValue(), "type", "reasoning",
			"content", ojson.ArrayValue(obj("text", msg.ReasoningContent, "type", "reasoning_text")),
			"encrypted_content", "", "status", "completed"))
	}
	if msg.Content != "" {
		output.Append(obj("content", ojson.ArrayValue(obj("type", "output_text", "annotations", ojson.ArrayValue(), "logprobs", ojson.ArrayValue(), "text", msg.Content)),
			"id", "msg_"+randomString(), "role", msg.Role, "status", "completed", "type", "message"))
	}
	for _, tc := range t.state.msg.ToolCalls {
		output.Append(obj("id", "fc_"+tc.ID, "type", "function_call", "status", "completed", "arguments", tc.Arguments,
			"call_id", "call_"+tc.ID, "name", tc.Name))
	}
	now := time.Now().Unix()
	return obj("completed_at", now, "created_at", now, "id", t.state.respID, "model", req.m.Name, "object", "response",
		"output", output, "status", "completed", "usage", respUsage(res))
}

func event(name string, data ojson.Value) ojson.Value { return obj("event", name, "data", data) }

func (req *cmplReq) finalRespStream(t *cmplTask, res *serve.Result) ojson.Value {
	st, msg := t.state, &t.state.msg
	var evs []ojson.Value
	output := ojson.ArrayValue()
	if msg.ReasoningContent != "" {
		item := obj("id", st.reasoningID, "summary", ojson.ArrayValue(), "type", "reasoning",
			"content", ojson.ArrayValue(obj("text", msg.ReasoningContent, "type", "reasoning_text")), "encrypted_content", "")
		evs = append(evs, event("response.output_item.done", obj("type", "response.output_item.done", "item", item)))
		output.Append(item)
	}
	if msg.Content != "" {
		evs = append(evs, event("response.output_text.done", obj("type", "response.output_text.done", "item_id", st.messageID, "text", msg.Content)))
		part := obj("type", "output_text", "annotations", ojson.ArrayValue(), "logprobs", ojson.ArrayValue(), "text", msg.Content)
		evs = append(evs, event("response.content_part.done", obj("type", "response.content_part.done", "item_id", st.messageID, "part", part)))
		item := obj("type", "message", "status", "completed", "id", st.messageID, "content", ojson.ArrayValue(part), "role", "assistant")
		evs = append(evs, event("response.output_item.done", obj("type", "response.output_item.done", "item", item)))
		output.Append(item)
	}
	for _, tc := range msg.ToolCalls {
		item := obj("id", "fc_"+tc.ID, "type", "function_call", "status", "completed", "arguments", tc.Arguments, "call_id", "call_"+tc.ID, "name", tc.Name)
		evs = append(evs, event("response.output_item.done", obj("type", "response.output_item.done", "item", item)))
		output.Append(item)
	}
	data := obj("type", "response.completed", "response", obj("id", st.respID, "object", "response", "created_at", time.Now().Unix(),
		"status", "completed", "model", req.m.Name, "output", output, "usage", respUsage(res)))
	data.Set("timings", timingsJSON(res.Timings))
	evs = append(evs, event("response.completed", data))
	return ojson.ArrayValue(evs...)
}

func stopReason(res *serve.Result, msg *chat.Message) string {
	if res.Stop == serve.StopWord || res.Stop == serve.StopEOS {
		if len(msg.ToolCalls) > 0 {
			return "tool_use"
		}
		return "end_turn"
	}
	return "max_tokens"
}

func stopSequence(res *serve.Result) any {
	if res.StoppingWord == "" {
		return nil
	}
	return res.StoppingWord
}

func (req *cmplReq) finalAnthropic(t *cmplTask, res *serve.Result, msg *chat.Message) ojson.Value {
	blocks := ojson.ArrayValue()
	if msg.ReasoningContent != "" {
		blocks.Append(obj("type", "thinking", "thinking", msg.ReasoningContent, "signature", ""))
	}
	if msg.Content != "" {
		blocks.Append(obj("type", "text", "text", msg.Content))
	}
	for _, tc := range msg.ToolCalls {
		b := obj("type", "tool_use", "id", tc.ID, "name", tc.Name)
		in, err := ojson.ParseString(tc.Arguments)
		if err != nil {
			in = ojson.ObjectValue()
		}
		b.Set("input", in)
		blocks.Append(b)
	}
	return obj("id", req.id, "type", "message", "role", "assistant", "content", blocks, "model", req.m.Name,
		"stop_reason", stopReason(res, &t.state.msg), "stop_sequence", stopSequence(res),
		"usage", obj("cache_read_input_tokens", res.NPromptCached, "input_tokens", res.NPromptTokens-res.NPromptCached, "output_tokens", res.NDecoded))
}

func blockStart(index int, block ojson.Value) ojson.Value {
	return event("content_block_start", obj("type", "content_block_start", "index", index, "content_block", block))
}

func blockDelta(index int, delta ojson.Value) ojson.Value {
	return event("content_block_delta", obj("type", "content_block_delta", "index", index, "delta", delta))
}

func blockStop(index int) ojson.Value {
	return event("content_block_stop", obj("type", "content_block_stop", "index", index))
}

func (req *cmplReq) finalAnthropicStream(t *cmplTask, res *serve.Result, diffs []chat.Diff) ojson.Value {
	msg := &t.state.msg
	hasThinking, hasText := msg.ReasoningContent != "", msg.Content != ""
	textIndex := 0
	if hasThinking {
		textIndex = 1
	}
	thinkingStarted, textStarted := false, false
	started := map[int]bool{}
	var evs []ojson.Value
	for _, d := range diffs {
		if d.ReasoningContentDelta != "" {
			if !thinkingStarted {
				evs = append(evs, blockStart(0, obj("type", "thinking", "thinking", "")))
				thinkingStarted = true
			}
			evs = append(evs, blockDelta(0, obj("type", "thinking_delta", "thinking", d.ReasoningContentDelta)))
		}
		if d.ContentDelta != "" {
			if !textStarted {
				evs = append(evs, blockStart(textIndex, obj("type", "text", "text", "")))
				textStarted = true
			}
			evs = append(evs, blockDelta(textIndex, obj("type", "text_delta", "text", d.ContentDelta)))
		}
		if d.ToolCallIndex >= 0 {
			idx := b2i(hasThinking) + b2i(hasText) + d.ToolCallIndex
			if !started[d.ToolCallIndex] {
				tc := msg.ToolCalls[d.ToolCallIndex]
				evs = append(evs, blockStart(idx, obj("type", "tool_use", "id", tc.ID, "name", tc.Name)))
				started[d.ToolCallIndex] = true
			}
			if d.ToolCallDelta.Arguments != "" {
				evs = append(evs, blockDelta(idx, obj("type", "input_json_delta", "partial_json", d.ToolCallDelta.Arguments)))
			}
		}
	}
	if hasThinking {
		evs = append(evs, blockDelta(0, obj("type", "signature_delta", "signature", "")), blockStop(0))
	}
	if hasText {
		evs = append(evs, blockStop(textIndex))
	}
	for i := range msg.ToolCalls {
		evs = append(evs, blockStop(b2i(hasThinking)+b2i(hasText)+i))
	}
	evs = append(evs, event("message_delta", obj("type", "message_delta", "delta", obj("stop_reason", stopReason(res, msg), "stop_sequence", stopSequence(res)),
		"usage", obj("output_tokens", res.NDecoded))))
	evs = append(evs, event("message_stop", obj("type", "message_stop")))
	return ojson.ArrayValue(evs...)
}

func b2i(b bool) int {
	if b {
		return 1
	}
	return 0
}

// partialChat is the partial result's update and to_json for the chat
// types.
func (req *cmplReq) partialChat(t *cmplTask, ev *serve.Event) (ojson.Value, error) {
	content, _, probs := eventToken(ev)
	st := t.state
	// the state before this chunk, as the pin copies it
	thinkingStarted, textStarted := st.thinkingStarted, st.textStarted
	respCreated, fcID := st.respCreated, st.fcID
	diffs, err := st.update(content, true)
	if err != nil {
		return ojson.Value{}, err
	}
	hasReasoning := st.msg.ReasoningContent != ""
	if req.rt == resOAIResp && !st.respCreated && (ev.Progress != nil || ev.NDecoded == 1) {
		st.respCreated = true
	}
	for _, d := range diffs {
		if d.ReasoningContentDelta != "" {
			st.thinkingStarted = true
		}
		if d.ContentDelta != "" {
			st.textStarted = true
		}
		if d.ToolCallDelta.Name != "" {
			st.fcID = d.ToolCallDelta.ID
		}
	}
	switch req.rt {
	case resOAIChat:
		return req.partialChatChunks(t, ev, diffs, probs), nil
	case resOAIResp:
		return req.partialResp(ev, diffs, st, respCreated, thinkingStarted, textStarted, fcID), nil
	}
	return req.partialAnthropic(ev, diffs, hasReasoning, thinkingStarted, textStarted), nil
}

func (req *cmplReq) partialChatChunks(t *cmplTask, ev *serve.Event, diffs []chat.Diff, probs []serve.TokenOutput) ojson.Value {
	var out []ojson.Value
	if ev.NDecoded == 1 || ev.Progress != nil {
		out = append(out, req.chatChunk(t, nil, obj("role", "assistant", "content", nil)))
	}
	for i := range diffs {
		out = append(out, req.chatChunk(t, nil, diffs[i].JSON()))
	}
	if len(out) > 0 {
		last := out[len(out)-1]
		if probs != nil {
			c := last.At("choices").Index(0)
			c.Set("logprobs", obj("content", probsJSON(probs, t.p.o.PostSamplingProbs)))
		}
		if ev.Timings != nil {
			last.Set("timings", timingsJSON(*ev.Timings))
		}
		if ev.Progress != nil {
			last.Set("prompt_progress", progressJSON(ev.Progress))
		}
	}
	return ojson.ArrayValue(out...)
}

func inProgress(id string) ojson.Value {
	return obj("id", id, "object", "response", "status", "in_progress")
}

func (req *cmplReq) partialResp(ev *serve.Event, diffs []chat.Diff, st *chatState, created, thinkingStarted, textStarted bool, fcID string) ojson.Value {
	var evs []ojson.Value
	if !created {
		evs = append(evs, event("response.created", obj("type", "response.created", "response", inProgress(st.respID))),
			event("response.in_progress", obj("type", "response.in_progress", "response", inProgress(st.respID))))
	} else if ev.Progress != nil {
		evs = append(evs, event("response.in_progress", obj("type", "response.in_progress", "response", inProgress(st.respID))))
	}
	for _, d := range diffs {
		if d.ReasoningContentDelta != "" {
			if !thinkingStarted {
				evs = append(evs, event("response.output_item.added", obj("type", "response.output_item.added", "item",
					obj("id", st.reasoningID, "summary", ojson.ArrayValue(), "type", "reasoning", "content", ojson.ArrayValue(), "encrypted_content", "", "status", "in_progress"))))
				thinkingStarted = true
			}
			evs = append(evs, event("response.reasoning_text.delta", obj("type", "response.reasoning_text.delta", "delta", d.ReasoningContentDelta, "item_id", st.reasoningID)))
		}
		if d.ContentDelta != "" {
			if !textStarted {
				evs = append(evs, event("response.output_item.added", obj("type", "response.output_item.added", "item",
					obj("content", ojson.ArrayValue(), "id", st.messageID, "role", "assistant", "status", "in_progress", "type", "message"))))
				evs = append(evs, event("response.content_part.added", obj("type", "response.content_part.added", "item_id", st.messageID,
					"part", obj("type", "output_text", "text", ""))))
				textStarted = true
			}
			evs = append(evs, event("response.output_text.delta", obj("type", "response.output_text.delta", "item_id", st.messageID, "delta", d.ContentDelta)))
		}
		if d.ToolCallDelta.Name != "" {
			evs = append(evs, event("response.output_item.added", obj("type", "response.output_item.added", "item",
				obj("id", "fc_"+d.ToolCallDelta.ID, "arguments", "", "call_id", "call_"+d.ToolCallDelta.ID, "name", d.ToolCallDelta.Name,
					"type", "function_call", "status", "in_progress"))))
			fcID = d.ToolCallDelta.ID
		}
		if d.ToolCallDelta.Arguments != "" {
			evs = append(evs, event("response.function_call_arguments.delta", obj("type", "response.function_call_arguments.delta",
				"delta", d.ToolCallDelta.Arguments, "item_id", "fc_"+fcID)))
		}
	}
	if len(evs) > 0 {
		data := evs[len(evs)-1].At("data")
		if ev.Timings != nil {
			data.Set("timings", timingsJSON(*ev.Timings))
		}
		if ev.Progress != nil {
			data.Set("prompt_progress", progressJSON(ev.Progress))
		}
	}
	return ojson.ArrayValue(evs...)
}

func (req *cmplReq) partialAnthropic(ev *serve.Event, diffs []chat.Diff, hasReasoning, thinkingStarted, textStarted bool) ojson.Value {
	var evs []ojson.Value
	if ev.NDecoded == 1 {
		evs = append(evs, event("message_start", obj("type", "message_start", "message", obj("id", req.id, "type", "message", "role", "assistant",
			"content", ojson.ArrayValue(), "model", req.m.Name, "stop_reason", nil, "stop_sequence", nil,
			"usage", obj("cache_read_input_tokens", ev.NPromptCached, "input_tokens", ev.NPromptTokens-ev.NPromptCached, "output_tokens", 0)))))
	}
	textIndex := b2i(hasReasoning)
	for _, d := range diffs {
		if d.ReasoningContentDelta != "" {
			if !thinkingStarted {
				evs = append(evs, blockStart(0, obj("type", "thinking", "thinking", "")))
				thinkingStarted = true
			}
			evs = append(evs, blockDelta(0, obj("type", "thinking_delta", "thinking", d.ReasoningContentDelta)))
		}
		if d.ContentDelta != "" {
			if !textStarted {
				evs = append(evs, blockStart(textIndex, obj("type", "text", "text", "")))
				textStarted = true
			}
			evs = append(evs, blockDelta(textIndex, obj("type", "text_delta", "text", d.ContentDelta)))
		}
		if d.ToolCallIndex >= 0 {
			idx := b2i(hasReasoning) + b2i(textStarted) + d.ToolCallIndex
			if d.ToolCallDelta.Name != "" {
				evs = append(evs, blockStart(idx, obj("type", "tool_use", "id", d.ToolCallDelta.ID, "name", d.ToolCallDelta.Name)))
			}
			if d.ToolCallDelta.Arguments != "" {
				evs = append(evs, blockDelta(idx, obj("type", "input_json_delta", "partial_json", d.ToolCallDelta.Arguments)))
			}
		}
	}
	return ojson.ArrayValue(evs...)
}
