// Port of llama.cpp tools/server/server-context.cpp
// (server_routes::handle_completions_impl, post_completions, post_infill)
// and tools/server/server-task.cpp (the completion results' to_json)
// (v0.5.0).

package httpapi

import (
	"context"
	"crypto/rand"
	"math"
	"net/http"
	"strings"
	"time"

	"github.com/ggload/ggload/chat"
	"github.com/ggload/ggload/internal/ojson"
	"github.com/ggload/ggload/sample"
	"github.com/ggload/ggload/serve"
)

// resType is task_response_type: the shape of a completion's answers.
type resType int

const (
	resNone resType = iota
	resOAICmpl
	resOAIChat
	resOAIResp
	resOAIASR
	resAnthropic
	resOAIEmbd
)

// taskKind is a completion or an infill (their slots batch apart).
type taskKind int

const (
	kindCompletion taskKind = iota
	kindInfill
)

// cmplTask is one task of a request: a prompt (of several), or one of
// n_cmpl completions of it.
type cmplTask struct {
	index  int
	child  bool // one of n_cmpl's completions after the first
	prompt []int32
	p      *taskParams
	state  *chatState // the chat reply's parse (resOAIChat and after)
}

// cmplReq is a completion request under way.
type cmplReq struct {
	h      *Handler
	m      *Model
	rt     resType
	kind   taskKind
	id     string // oaicompat_cmpl_id
	tasks  []*cmplTask
	stream bool
	ping   time.Duration
}

const alnum = "0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz"

// randomString is random_string: 32 characters of [0-9A-Za-z].
func randomString() string {
	b := make([]byte, 32)
	rand.Read(b)
	for i := range b {
		b[i] = alnum[int(b[i])%len(alnum)]
	}
	return string(b)
}

// completions is POST /completion, /completions and /v1/completions.
func (h *Handler) completions(rt resType) route {
	return func(w http.ResponseWriter, r *http.Request, body []byte) error {
		data, err := parseBody(body)
		if err != nil {
			return err
		}
		m, release, err := h.acquire(r, data)
		if err != nil {
			return err
		}
		defer release()
		return h.handleCompletions(w, r, m, kindCompletion, data, rt, nil)
	}
}

// acquire is the model a request names: in a router, its "model" field
// (a POST's body), or its ?model= parameter (a GET); one model's server
// reads neither.
func (h *Handler) acquire(r *http.Request, data ojson.Value) (*Model, func(), error) {
	if !h.models.Router() {
		return h.models.Acquire(r.Context(), "", true)
	}
	name := param(r, "model")
	if r.Method == http.MethodPost {
		name = value(data, "model", "", getString)
	}
	return h.routeModel(r, name)
}

// infill is POST /infill.
func (h *Handler) infill(w http.ResponseWriter, r *http.Request, body []byte) error {
	m, release, err := h.acquireBody(r, body)
	if err != nil {
		return err
	}
	defer release()
	v := m.Engine.Vocab()
	var miss string
	if v.FIMPre() < 0 {
		miss += "prefix token is missing. "
	}
	if v.FIMSuf() < 0 {
		miss += "suffix token is missing. "
	}
	if v.FIMMid() < 0 {
		miss += "middle token is missing. "
	}
	if miss != "" {
		return errf(serve.ErrNotSupported, "Infill is not supported by this model: %s", miss)
	}
	data, err := parseBody(body)
	if err != nil {
		return err
	}
	// (the pin's first checks set the error and go on: the last one that
	// failed is the answer, unless input_extra returns first)
	var fail *apiError
	if data.Has("prompt") && !data.At("prompt").IsString() {
		fail = errf(serve.ErrInvalidRequest, "\"prompt\" must be a string")
	}
	if !has(data, "input_prefix") {
		fail = errf(serve.ErrInvalidRequest, "\"input_prefix\" is required")
	}
	if !has(data, "input_suffix") {
		fail = errf(serve.ErrInvalidRequest, "\"input_suffix\" is required")
	}
	if has(data, "input_extra") && !data.At("input_extra").IsArray() {
		return errf(serve.ErrInvalidRequest, "\"input_extra\" must be an array of {\"filename\": string, \"text\": string}")
	}
	extra := value(data, "input_extra", ojson.ArrayValue(), asJSON)
	for _, c := range iterate(extra) {
		if t, ok := c.Get("text"); !ok || !t.IsString() {
			return errf(serve.ErrInvalidRequest, "extra_context chunk must contain a \"text\" field with a string value")
		}
		if f, ok := c.Get("filename"); ok && !f.IsString() {
			return errf(serve.ErrInvalidRequest, "extra_context chunk's \"filename\" field must be a string")
		}
	}
	if fail != nil {
		return fail
	}
	data.Set("input_extra", extra)
	prompt := value(data, "prompt", "", getString)
	pt, err := tokenizeInputPrompts(v, ojson.StringValue(prompt), false, true)
	if err != nil {
		return err
	}
	s := m.Settings
	toks, err := formatInfill(v, data.At("input_prefix"), data.At("input_suffix"), extra, s.NBatch, s.NPredict, m.Engine.Info().NCtxSlot, s.SPMInfill, pt[0])
	if err != nil {
		return err
	}
	data.Set("prompt", jv(toks))
	return h.handleCompletions(w, r, m, kindInfill, data, resNone, nil)
}

// handleCompletions is handle_completions_impl: the request's prompts
// tokenized and read with the schema into tasks, run, and answered at
// once or streamed.
func (h *Handler) handleCompletions(w http.ResponseWriter, r *http.Request, m *Model, kind taskKind, data ojson.Value, rt resType, cp *chat.Params) error {
	req, err := h.newCmplReq(m, kind, data, rt, cp)
	if err != nil {
		return asInvalid(err)
	}
	ctx, cancel := context.WithCancel(r.Context())
	defer cancel()
	reqs := make([]serve.Request, len(req.tasks))
	for i, t := range req.tasks {
		reqs[i] = serve.Request{Prompt: t.prompt, Options: t.p.o, Infill: kind == kindInfill}
	}
	pending, err := m.Engine.Post(ctx, reqs)
	if err != nil {
		return err
	}
	h.met.begin()
	defer h.met.end()
	items := make(chan item, len(req.tasks))
	for i, t := range req.tasks {
		go req.run(ctx, t, pending[i], items)
	}
	if !req.stream {
		return req.answer(w, r, items)
	}
	return req.streamAnswer(ctx, w, items)
}

// newCmplReq reads the request into its tasks.
func (h *Handler) newCmplReq(m *Model, kind taskKind, data ojson.Value, rt resType, cp *chat.Params) (*cmplReq, error) {
	prompt, err := at(data, "prompt")
	if err != nil {
		return nil, err
	}
	v := m.Engine.Vocab()
	inputs, err := tokenizeInputPrompts(v, prompt, true, true)
	if err != nil {
		return nil, err
	}
	req := &cmplReq{h: h, m: m, rt: rt, kind: kind, id: "chatcmpl-" + randomString()}
	base := m.Engine.Defaults()
	idSlot := value(data, "id_slot", -1, func(x ojson.Value) (int, error) { n, err := getInt32(x); return int(n), err })
	var ping int32
	for _, in := range inputs {
		p, err := evalSchema(v, base, m.Settings, data)
		if err != nil {
			return nil, err
		}
		p.o.IDSlot = idSlot
		ping = p.ssePing
		parent := &cmplTask{index: len(req.tasks), prompt: in, p: p}
		req.tasks = append(req.tasks, parent)
		for j := 1; j < int(p.nCmpl); j++ {
			cp := *p
			cp.o.IDSlot = -1
			if cp.o.Sampling.Seed != sample.DefaultSeed {
				cp.o.Sampling.Seed += uint32(j)
			}
			req.tasks = append(req.tasks, &cmplTask{index: len(req.tasks), child: true, prompt: in, p: &cp})
		}
	}
	for _, t := range req.tasks {
		t.state = newChatState(t.p, cp)
	}
	req.stream = value(data, "stream", false, getBool)
	if ping > 0 {
		req.ping = time.Duration(ping) * time.Second
	}
	return req, nil
}

// item is what a task sends its request: an event, its result or its
// error.
type item struct {
	t   *cmplTask
	ev  *serve.Event
	res *serve.Result
	err error
}

// run waits for one task on the engine; its events, then its end, go
// to out.
func (req *cmplReq) run(ctx context.Context, t *cmplTask, p *serve.Pending, out chan<- item) {
	send := func(it item) error {
		select {
		case out <- it:
			return nil
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	var on func(serve.Event) error
	if req.stream {
		on = func(ev serve.Event) error { return send(item{t: t, ev: &ev}) }
	}
	res, err := p.Wait(on)
	if err == nil {
		req.h.met.add(res.Timings, req.m.Settings.NBatch, res.NTokensCached)
		if t.child {
			// the pin keeps no context of a child's slot: the parent's is
			// enough (server_slot::release)
			req.m.Engine.EraseSlot(ctx, res.Slot)
		}
	}
	send(item{t: t, res: res, err: err})
}

// answer waits for every task's result and writes them as one answer:
// one object, the OpenAI answers' choices merged, or an array.
func (req *cmplReq) answer(w http.ResponseWriter, r *http.Request, items <-chan item) error {
	results := make([]*serve.Result, len(req.tasks))
	for range req.tasks {
		var it item
		select {
		case it = <-items:
		case <-r.Context().Done():
			return r.Context().Err()
		}
		if it.err != nil {
			return it.err
		}
		results[it.t.index] = it.res
	}
	arr := make([]ojson.Value, len(results))
	for i, res := range results {
		v, err := req.final(req.tasks[i], res)
		if err != nil {
			return err
		}
		arr[i] = v
	}
	var out ojson.Value
	switch {
	case len(arr) == 1:
		out = arr[0]
	case req.rt == resOAIChat || req.rt == resOAICmpl:
		out = arr[0]
		choices := out.At("choices")
		for _, a := range arr[1:] {
			choices.Append(a.At("choices").Index(0))
		}
		out.Set("choices", choices)
	default:
		out = ojson.ArrayValue(arr...)
	}
	req.h.writeJSON(w, http.StatusOK, out)
	return nil
}

// streamAnswer streams the tasks' answers as server-sent events: the
// first result decides between an error answer and a stream; then each
// result as the response type frames it, pings while the stream is
// silent, an error as an event, and the end.
func (req *cmplReq) streamAnswer(ctx context.Context, w http.ResponseWriter, items <-chan item) error {
	var first item
	select {
	case first = <-items:
	case <-ctx.Done():
		return ctx.Err()
	}
	if first.err != nil {
		return first.err
	}
	chunk, err := req.sse(first)
	if err != nil {
		return err
	}
	sw := &sseWriter{w: w, rc: http.NewResponseController(w), timeout: req.h.o.WriteTimeout}
	w.Header().Set("Content-Type", "text/event-stream")
	w.Header().Set("X-Accel-Buffering", "no")
	w.WriteHeader(http.StatusOK)
	if err := sw.write(chunk); err != nil {
		return nil
	}
	done := 0
	if first.res != nil {
		done++
	}
	var timer *time.Timer
	var tick <-chan time.Time
	for done < len(req.tasks) {
		if req.ping > 0 {
			if timer == nil {
				timer = time.NewTimer(req.ping)
				defer timer.Stop()
			} else {
				timer.Reset(req.ping)
			}
			tick = timer.C
		}
		select {
		case it := <-items:
			if it.err != nil {
				if canceled(ctx, it.err) {
					return nil
				}
				sw.write(req.sseError(toAPIError(it.err)))
				return nil
			}
			if it.res != nil {
				done++
			}
			chunk, err := req.sse(it)
			if err != nil {
				sw.write(req.sseError(toAPIError(err)))
				return nil
			}
			if err := sw.write(chunk); err != nil {
				return nil
			}
		case <-tick:
			if err := sw.write(":\n\n"); err != nil {
				return nil
			}
		case <-ctx.Done():
			return nil
		}
	}
	switch req.rt {
	case resNone, resOAIResp, resAnthropic:
	default:
		sw.write("data: [DONE]\n\n")
	}
	return nil
}

// sse is one result's events, framed.
func (req *cmplReq) sse(it item) (string, error) {
	var v ojson.Value
	var err error
	if it.res != nil {
		v, err = req.final(it.t, it.res)
	} else {
		var ok bool
		v, ok, err = req.partial(it.t, it.ev)
		if !ok {
			return "", err
		}
	}
	if err != nil {
		return "", err
	}
	switch req.rt {
	case resAnthropic:
		return formatAnthropicSSE(v), nil
	case resOAIResp:
		return formatRespSSE(v), nil
	}
	return formatOAISSE(v), nil
}

// sseError is format_error of the stream: an Anthropic error event, or
// {"error": ...} as data.
func (req *cmplReq) sseError(e *apiError) string {
	if req.rt == resAnthropic {
		return formatAnthropicSSE(obj("event", "error", "data", errorObject(e)))
	}
	return formatOAISSE(obj("error", errorObject(e)))
}

// formatOAISSE is format_oai_sse: "data: JSON" and a blank line, an
// array's items each its own event.
func formatOAISSE(v ojson.Value) string {
	var b strings.Builder
	one := func(x ojson.Value) {
		b.WriteString("data: ")
		b.WriteString(x.DumpSafe(-1))
		b.WriteString("\n\n")
	}
	if v.IsArray() {
		for _, x := range v.Elems() {
			one(x)
		}
	} else {
		one(v)
	}
	return b.String()
}

// formatRespSSE is format_oai_resp_sse: "event: NAME" before each data.
func formatRespSSE(v ojson.Value) string {
	var b strings.Builder
	for _, x := range iterate(v) {
		b.WriteString("event: " + x.At("event").Str() + "\n")
		b.WriteString("data: " + x.At("data").DumpSafe(-1) + "\n\n")
	}
	return b.String()
}

// formatAnthropicSSE is format_anthropic_sse.
func formatAnthropicSSE(v ojson.Value) string {
	var b strings.Builder
	for _, x := range iterate(v) {
		if has(x, "event") && has(x, "data") {
			b.WriteString("event: " + x.At("event").Str() + "\n")
			b.WriteString("data: " + x.At("data").DumpSafe(-1) + "\n\n")
		} else {
			b.WriteString("data: " + x.DumpSafe(-1) + "\n\n")
		}
	}
	return b.String()
}

// sseWriter writes a stream's chunks, each flushed at once under a write
// deadline, so that a stalled client ends its own request alone.
type sseWriter struct {
	w       http.ResponseWriter
	rc      *http.ResponseController
	timeout time.Duration
}

func (s *sseWriter) write(chunk string) error {
	if chunk == "" {
		return s.rc.Flush()
	}
	s.rc.SetWriteDeadline(time.Now().Add(s.timeout))
	if _, err := s.w.Write([]byte(chunk)); err != nil {
		return err
	}
	return s.rc.Flush()
}

// stopTypeName is stop_type_to_str.
func stopTypeName(s serve.StopType) string { return s.String() }

// timingsJSON is server_slot_stats::to_json.
func timingsJSON(t serve.Timings) ojson.Value {
	return obj("cache_n", uint64(t.CacheN), "prompt_n", uint64(t.PromptN), "prompt_ms", t.PromptMS,
		"prompt_per_token_ms", t.PromptPerTokenMS(), "prompt_per_second", t.PromptPerSecond(),
		"predicted_n", uint64(t.PredictedN), "predicted_ms", t.PredictedMS,
		"predicted_per_token_ms", t.PredictedPerTokenMS(), "predicted_per_second", t.PredictedPerSecond())
}

// logarithm is completion_token_output::logarithm: log, with 0 as the
// lowest float (JSON has no -inf).
func logarithm(x float32) float32 {
	if x == 0 {
		return -math.MaxFloat32
	}
	return float32(math.Log(float64(x)))
}

func bytesJSON(s string) ojson.Value {
	a := ojson.ArrayValue()
	for i := 0; i < len(s); i++ {
		a.Append(ojson.UintValue(uint64(s[i])))
	}
	return a
}

// probsJSON is completion_token_output::probs_vector_to_json.
func probsJSON(probs []serve.TokenOutput, post bool) ojson.Value {
	out := ojson.ArrayValue()
	pk, tk := "logprob", "top_logprobs"
	if post {
		pk, tk = "prob", "top_probs"
	}
	p := func(x float32) float32 {
		if post {
			return x
		}
		return logarithm(x)
	}
	for _, t := range probs {
		top := ojson.ArrayValue()
		for _, c := range t.Probs {
			top.Append(obj("id", c.ID, "token", c.Text[:serve.ValidUTF8Len(c.Text)], "bytes", bytesJSON(c.Text), pk, p(c.Prob)))
		}
		out.Append(obj("id", t.ID, "token", t.Text[:serve.ValidUTF8Len(t.Text)], "bytes", bytesJSON(t.Text), pk, p(t.Prob), tk, top))
	}
	return out
}

// final is server_task_result_cmpl_final::to_json for the request's
// response type.
func (req *cmplReq) final(t *cmplTask, res *serve.Result) (ojson.Value, error) {
	if req.stream {
		res.Content, res.Tokens = "", nil
	}
	switch req.rt {
	case resOAICmpl:
		return req.finalOAICmpl(t, res), nil
	case resOAIChat, resOAIResp, resAnthropic:
		return req.finalChat(t, res)
	}
	return req.finalNone(t, res), nil
}

// finalNone is to_json_non_oaicompat.
func (req *cmplReq) finalNone(t *cmplTask, res *serve.Result) ojson.Value {
	v := req.m.Engine.Vocab()
	prompt, _ := v.Detokenize(t.prompt, false, true)
	o := obj("index", t.index, "content", res.Content, "tokens", nonNil(res.Tokens), "id_slot", res.Slot, "stop", true,
		"model", req.m.Name, "tokens_predicted", res.NDecoded, "tokens_evaluated", res.NPromptTokens,
		"generation_settings", t.p.toJSON(false), "prompt", string(prompt), "has_new_line", res.HasNewLine,
		"truncated", res.Truncated, "stop_type", stopTypeName(res.Stop), "stopping_word", res.StoppingWord,
		"tokens_cached", res.NTokensCached, "timings", timingsJSON(res.Timings))
	if !req.stream && len(res.Probs) > 0 {
		o.Set("completion_probabilities", probsJSON(res.Probs, t.p.o.PostSamplingProbs))
	}
	if len(t.p.responseFields) > 0 {
		return nestedValues(t.p.responseFields, o)
	}
	return o
}

// nestedValues is json_get_nested_values: the fields of paths "a/b".
func nestedValues(paths []string, js ojson.Value) ojson.Value {
	out := ojson.ObjectValue()
	for _, path := range paths {
		cur, ok := js, true
		for _, k := range strings.Split(path, "/") {
			if ok && cur.IsObject() && cur.Has(k) {
				cur = cur.At(k)
			} else {
				ok = false
			}
		}
		if ok {
			out.Set(path, cur)
		}
	}
	return out
}

func (req *cmplReq) usage(res *serve.Result) ojson.Value {
	return obj("completion_tokens", res.NDecoded, "prompt_tokens", res.NPromptTokens, "total_tokens", res.NDecoded+res.NPromptTokens,
		"prompt_tokens_details", obj("cached_tokens", res.NPromptCached))
}

// finalOAICmpl is to_json_oaicompat.
func (req *cmplReq) finalOAICmpl(t *cmplTask, res *serve.Result) ojson.Value {
	logprobs := ojson.NullValue()
	if !req.stream && len(res.Probs) > 0 {
		logprobs = obj("content", probsJSON(res.Probs, t.p.o.PostSamplingProbs))
	}
	finish := "length"
	if res.Stop == serve.StopWord || res.Stop == serve.StopEOS {
		finish = "stop"
	}
	o := obj("choices", ojson.ArrayValue(obj("text", res.Content, "index", t.index, "logprobs", logprobs, "finish_reason", finish)),
		"created", time.Now().Unix(), "model", req.m.Name, "system_fingerprint", req.h.o.BuildInfo, "object", "text_completion",
		"usage", req.usage(res), "id", req.id)
	if t.p.verbose {
		o.Set("__verbose", req.finalNone(t, res))
	}
	o.Set("timings", timingsJSON(res.Timings))
	return o
}

// partial is server_task_result_cmpl_partial::to_json; false for the
// begin marker, which sends only the headers.
func (req *cmplReq) partial(t *cmplTask, ev *serve.Event) (ojson.Value, bool, error) {
	if ev.Begin {
		return ojson.Value{}, false, nil
	}
	switch req.rt {
	case resOAICmpl:
		return req.partialOAICmpl(t, ev), true, nil
	case resOAIChat, resOAIResp, resAnthropic:
		v, err := req.partialChat(t, ev)
		return v, true, err
	}
	return req.partialNone(t, ev), true, nil
}

// eventToken is the partial's content, tokens and probabilities.
func eventToken(ev *serve.Event) (string, []int32, []serve.TokenOutput) {
	if ev.Token == nil {
		return "", []int32{0}, nil
	}
	var probs []serve.TokenOutput
	if len(ev.Token.Probs) > 0 {
		probs = []serve.TokenOutput{*ev.Token}
	}
	return ev.Token.Text, []int32{ev.Token.ID}, probs
}

func progressJSON(p *serve.Progress) ojson.Value {
	return obj("total", p.Total, "cache", p.Cache, "processed", p.Processed, "time_ms", p.TimeMS)
}

// partialNone is to_json_non_oaicompat of a partial response.
func (req *cmplReq) partialNone(t *cmplTask, ev *serve.Event) ojson.Value {
	content, toks, probs := eventToken(ev)
	o := obj("index", t.index, "content", content, "tokens", toks, "stop", false, "id_slot", -1,
		"tokens_predicted", ev.NDecoded, "tokens_evaluated", ev.NPromptTokens)
	if ev.Timings != nil {
		o.Set("timings", timingsJSON(*ev.Timings))
	}
	if ev.Progress != nil {
		o.Set("prompt_progress", progressJSON(ev.Progress))
	}
	if probs != nil {
		o.Set("completion_probabilities", probsJSON(probs, t.p.o.PostSamplingProbs))
	}
	return o
}

// partialOAICmpl is to_json_oaicompat of a partial response.
func (req *cmplReq) partialOAICmpl(t *cmplTask, ev *serve.Event) ojson.Value {
	content, _, probs := eventToken(ev)
	logprobs := ojson.NullValue()
	if probs != nil {
		logprobs = obj("content", probsJSON(probs, t.p.o.PostSamplingProbs))
	}
	o := obj("choices", ojson.ArrayValue(obj("text", content, "index", t.index, "logprobs", logprobs, "finish_reason", nil)),
		"created", time.Now().Unix(), "model", req.m.Name, "system_fingerprint", req.h.o.BuildInfo, "object", "text_completion",
		"id", req.id)
	if t.p.verbose {
		o.Set("__verbose", req.partialNone(t, ev))
	}
	if ev.Timings != nil {
		o.Set("timings", timingsJSON(*ev.Timings))
	}
	if ev.Progress != nil {
		o.Set("prompt_progress", progressJSON(ev.Progress))
	}
	return o
}
