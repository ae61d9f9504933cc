package chat

import (
	"bufio"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/ggload/ggload/chat/internal/chattest"
	"github.com/ggload/ggload/internal/ojson"
	"github.com/ggload/ggload/lab/cxx"
	"github.com/ggload/ggload/lab/testenv"
)

func TestMain(m *testing.M) { testenv.Main(m) }

// all says whether the whole of a conformance suite runs (else a sample).
func all() bool { return os.Getenv("GGLOAD_CHAT_ALL") != "" }

// testNow is the second the oracle's clock and ours are fixed at.
const testNow = 1767225600 // 2026-01-01 00:00:00 UTC

// oracle is a running testdata/oracle.cpp: the pin's chat code.
type oracle struct {
	t   testing.TB
	cmd *exec.Cmd
	in  *bufio.Writer
	out *bufio.Reader
}

func oracleBin(t testing.TB) string {
	t.Helper()
	src, err := filepath.Abs("testdata/oracle.cpp")
	if err != nil {
		t.Fatal(err)
	}
	dir, _ := filepath.Abs("testdata")
	return cxx.Build(t, "chat-oracle", []string{src}, "-I", dir)
}

func startOracle(t testing.TB) *oracle {
	t.Helper()
	cmd := cxx.Command(t, oracleBin(t))
	cmd.Env = append(cmd.Env, "TZ=UTC0", "CHAT_NOW="+strconv.Itoa(testNow))
	in, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	outp, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stderr = io.Discard // the pin's warnings
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	o := &oracle{t: t, cmd: cmd, in: bufio.NewWriterSize(in, 1<<20), out: bufio.NewReaderSize(outp, 1<<20)}
	t.Cleanup(func() {
		in.Close()
		cmd.Wait()
	})
	return o
}

func (o *oracle) send(fields ...string) {
	if err := chattest.WriteFields(o.in, fields...); err != nil {
		o.t.Fatal(err)
	}
}

func (o *oracle) flush() {
	if err := o.in.Flush(); err != nil {
		o.t.Fatal(err)
	}
}

func (o *oracle) read() string {
	s, err := chattest.ReadField(o.out)
	if err != nil {
		o.t.Fatalf("oracle: %v", err)
	}
	return s
}

func (o *oracle) readInt() int {
	n, err := strconv.Atoi(o.read())
	if err != nil {
		o.t.Fatalf("oracle: %v", err)
	}
	return n
}

func (o *oracle) readStrings() []string {
	n := o.readInt()
	var out []string
	for i := 0; i < n; i++ {
		out = append(out, o.read())
	}
	return out
}

func (o *oracle) readMsg() Message {
	var m Message
	m.Role = o.read()
	m.Content = o.read()
	for i, n := 0, o.readInt(); i < n; i++ {
		m.ContentParts = append(m.ContentParts, ContentPart{o.read(), o.read()})
	}
	for i, n := 0, o.readInt(); i < n; i++ {
		m.ToolCalls = append(m.ToolCalls, ToolCall{o.read(), o.read(), o.read()})
	}
	m.ReasoningContent = o.read()
	m.ToolName = o.read()
	m.ToolCallID = o.read()
	return m
}

// oracleParams are common_chat_params as the oracle writes them, the
// parser as its JSON text.
type oracleParams struct {
	Params
	parserJSON string
}

func (o *oracle) readParams() oracleParams {
	var p oracleParams
	p.Format = Format(o.readInt())
	p.Prompt = o.read()
	p.Grammar = o.read()
	p.GrammarLazy = o.read() == "1"
	p.GenerationPrompt = o.read()
	p.SupportsThinking = o.read() == "1"
	p.ThinkingStartTag = o.read()
	p.ThinkingEndTags = o.readStrings()
	for i, n := 0, o.readInt(); i < n; i++ {
		p.GrammarTriggers = append(p.GrammarTriggers, GrammarTrigger{TriggerType(o.readInt()), o.read()})
	}
	p.PreservedTokens = o.readStrings()
	p.AdditionalStops = o.readStrings()
	for i, n := 0, o.readInt(); i < n; i++ {
		p.MessageDelimiters = append(p.MessageDelimiters, MessageDelimiter{Role(o.readInt()), o.read()})
	}
	p.parserJSON = o.read()
	return p
}

// reply is a model's reply to parse, whole or partial.
type reply struct {
	text    string
	partial bool
}

// result is a parse's message, or its error.
type result struct {
	msg Message
	err string
}

// applyResult is an apply's params (or error) and its replies' parses.
type applyResult struct {
	params oracleParams
	err    string
	parsed []result
}

// request is one template and inputs.
type request struct {
	src, bos, eos string
	in            Inputs
	replies       []reply
}

func (o *oracle) apply(q *request) applyResult {
	fields := []string{"apply", q.src, q.bos, q.eos, inputsJSON(&q.in), strconv.Itoa(len(q.replies))}
	for _, r := range q.replies {
		p := "0"
		if r.partial {
			p = "1"
		}
		fields = append(fields, r.text, p)
	}
	o.send(fields...)
	o.flush()
	var r applyResult
	if o.read() == "ok" {
		r.params = o.readParams()
	} else {
		r.err = o.read()
	}
	for range q.replies {
		if o.read() == "ok" {
			r.parsed = append(r.parsed, result{msg: o.readMsg()})
		} else {
			r.parsed = append(r.parsed, result{err: o.read()})
		}
	}
	return r
}

// msgJSON is a message as chatio.hpp reads it.
func msgJSON(m *Message) ojson.Value {
	parts := ojson.ArrayValue()
	for _, p := range m.ContentParts {
		parts.Append(obj("type", p.Type, "text", p.Text))
	}
	calls := ojson.ArrayValue()
	for _, c := range m.ToolCalls {
		calls.Append(obj("name", c.Name, "arguments", c.Arguments, "id", c.ID))
	}
	return obj("role", m.Role, "content", m.Content, "content_parts", parts, "tool_calls", calls,
		"reasoning_content", m.ReasoningContent, "tool_name", m.ToolName, "tool_call_id", m.ToolCallID)
}

func msgFromJSON(j ojson.Value) Message {
	s := func(v ojson.Value, k string) string { return v.At(k).Str() }
	m := Message{Role: s(j, "role"), Content: s(j, "content"), ReasoningContent: s(j, "reasoning_content"),
		ToolName: s(j, "tool_name"), ToolCallID: s(j, "tool_call_id")}
	for _, p := range j.At("content_parts").Elems() {
		m.ContentParts = append(m.ContentParts, ContentPart{s(p, "type"), s(p, "text")})
	}
	for _, c := range j.At("tool_calls").Elems() {
		m.ToolCalls = append(m.ToolCalls, ToolCall{s(c, "name"), s(c, "arguments"), s(c, "id")})
	}
	return m
}

func dumpOrDie(v ojson.Value) string {
	s, err := v.Dump(-1)
	if err != nil {
		panic(err)
	}
	return s
}

func inputsJSON(in *Inputs) string {
	msgs := ojson.ArrayValue()
	for i := range in.Messages {
		msgs.Append(msgJSON(&in.Messages[i]))
	}
	tools := ojson.ArrayValue()
	for _, t := range in.Tools {
		tools.Append(obj("name", t.Name, "description", t.Description, "parameters", t.Parameters))
	}
	kw := ojson.ObjectValue()
	for k, v := range in.Kwargs {
		kw.Set(k, ojson.StringValue(v))
	}
	b := ojson.BoolValue
	n := func(i int) ojson.Value { return ojson.IntValue(int64(i)) }
	j := obj("messages", msgs, "grammar", in.Grammar, "json_schema", in.JSONSchema,
		"add_generation_prompt", b(!in.NoGenerationPrompt), "continue_final_message", n(int(in.Continue)),
		"use_jinja", b(!in.Legacy), "tools", tools, "tool_choice", n(int(in.ToolChoice)),
		"parallel_tool_calls", b(in.ParallelToolCalls), "reasoning_format", n(int(in.ReasoningFormat)),
		"enable_thinking", b(!in.DisableThinking), "chat_template_kwargs", kw, "force_pure_content", b(in.ForcePureContent))
	return dumpOrDie(j)
}

func inputsFromJSON(s string) (Inputs, error) {
	j, err := ojson.ParseString(s)
	if err != nil {
		return Inputs{}, err
	}
	var in Inputs
	for _, m := range j.At("messages").Elems() {
		in.Messages = append(in.Messages, msgFromJSON(m))
	}
	in.Grammar = j.At("grammar").Str()
	in.JSONSchema = j.At("json_schema").Str()
	in.NoGenerationPrompt = !j.At("add_generation_prompt").Bool()
	in.Continue = Continuation(j.At("continue_final_message").Int())
	in.Legacy = !j.At("use_jinja").Bool()
	for _, t := range j.At("tools").Elems() {
		in.Tools = append(in.Tools, Tool{t.At("name").Str(), t.At("description").Str(), t.At("parameters").Str()})
	}
	in.ToolChoice = ToolChoice(j.At("tool_choice").Int())
	in.ParallelToolCalls = j.At("parallel_tool_calls").Bool()
	in.ReasoningFormat = ReasoningFormat(j.At("reasoning_format").Int())
	in.DisableThinking = !j.At("enable_thinking").Bool()
	if kw := j.At("chat_template_kwargs"); kw.Len() > 0 {
		in.Kwargs = map[string]string{}
		for _, m := range kw.Members() {
			in.Kwargs[m.Key] = m.Value.Str()
		}
	}
	in.ForcePureContent = j.At("force_pure_content").Bool()
	return in, nil
}

// ours answers a request with this package.
type ours struct {
	mu    sync.Mutex
	cache map[[3]string]*Templates
}

func (o *ours) templates(src, bos, eos string) (*Templates, error) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.cache == nil {
		o.cache = map[[3]string]*Templates{}
	}
	k := [3]string{src, bos, eos}
	if t, ok := o.cache[k]; ok {
		return t, nil
	}
	t, err := FromSource(Options{Template: src, BOS: bos, EOS: eos, Name: "test"})
	if err != nil {
		return nil, err
	}
	o.cache[k] = t
	return t, nil
}

func errText(err error) string {
	if e, ok := err.(*Error); ok {
		return e.Msg
	}
	return err.Error()
}

func (o *ours) apply(q *request) applyResult {
	var r applyResult
	t, err := o.templates(q.src, q.bos, q.eos)
	if err == nil {
		in := q.in
		in.Now = time.Unix(testNow, 0).UTC()
		var p *Params
		if p, err = t.Apply(&in); err == nil {
			r.params.Params = *p
			if p.parser != nil {
				r.params.parserJSON = dumpOrDie(p.parser.JSON())
			}
		}
	}
	if err != nil {
		r.err = errText(err)
		for range q.replies {
			r.parsed = append(r.parsed, result{err: "no params"})
		}
		return r
	}
	for _, rp := range q.replies {
		m, err := r.params.Parse(rp.text, rp.partial)
		if err != nil {
			r.parsed = append(r.parsed, result{err: errText(err)})
		} else {
			r.parsed = append(r.parsed, result{msg: m})
		}
	}
	return r
}

// diffParams says how two applies differ, field by field ("" if not).
func diffParams(got, want *applyResult) string {
	if got.err != "" || want.err != "" {
		if got.err != want.err {
			return fmt.Sprintf("error: ours %q, the pin's %q", got.err, want.err)
		}
		return ""
	}
	g, w := &got.params, &want.params
	var d []string
	check := func(name string, a, b any) {
		if fmt.Sprint(a) != fmt.Sprint(b) {
			d = append(d, fmt.Sprintf("%s:\n ours %q\n  pin %q", name, fmt.Sprint(a), fmt.Sprint(b)))
		}
	}
	check("format", g.Format, w.Format)
	check("prompt", g.Prompt, w.Prompt)
	if g.Grammar != w.Grammar {
		d = append(d, "grammar: "+lineDiff(g.Grammar, w.Grammar))
	}
	check("grammar_lazy", g.GrammarLazy, w.GrammarLazy)
	check("generation_prompt", g.GenerationPrompt, w.GenerationPrompt)
	check("supports_thinking", g.SupportsThinking, w.SupportsThinking)
	check("thinking_start_tag", g.ThinkingStartTag, w.ThinkingStartTag)
	check("thinking_end_tags", g.ThinkingEndTags, w.ThinkingEndTags)
	check("grammar_triggers", g.GrammarTriggers, w.GrammarTriggers)
	check("preserved_tokens", g.PreservedTokens, w.PreservedTokens)
	check("additional_stops", g.AdditionalStops, w.AdditionalStops)
	check("message_delimiters", g.MessageDelimiters, w.MessageDelimiters)
	if !sameParser(g.parserJSON, w.parserJSON) {
		d = append(d, "parser: "+parserDiff(g.parserJSON, w.parserJSON))
	}
	for i := range want.parsed {
		if i >= len(got.parsed) {
			break
		}
		a, b := got.parsed[i], want.parsed[i]
		if a.err != b.err || !a.msg.Equal(&b.msg) {
			d = append(d, fmt.Sprintf("parse %d:\n ours %+v %q\n  pin %+v %q", i, a.msg, a.err, b.msg, b.err))
		}
	}
	return strings.Join(d, "\n")
}

// sameParser compares two arenas' JSON: the same parsers in the same
// order, the same rules whatever their order (the pin's are in a hash
// map's).
func sameParser(a, b string) bool {
	if a == b {
		return true
	}
	if a == "" || b == "" {
		return false
	}
	ja, err1 := ojson.ParseString(a)
	jb, err2 := ojson.ParseString(b)
	return err1 == nil && err2 == nil && ojson.Equal(ja, jb)
}

// lineDiff shows the first line where two texts differ.
func lineDiff(a, b string) string {
	la, lb := strings.Split(a, "\n"), strings.Split(b, "\n")
	for i := 0; i < len(la) || i < len(lb); i++ {
		var x, y string
		if i < len(la) {
			x = la[i]
		}
		if i < len(lb) {
			y = lb[i]
		}
		if x != y {
			return fmt.Sprintf("line %d:\n ours %q\n  pin %q", i+1, x, y)
		}
	}
	return "(same lines)"
}

// parserDiff shows the first parser where two arenas differ.
func parserDiff(a, b string) string {
	ja, err1 := ojson.ParseString(a)
	jb, err2 := ojson.ParseString(b)
	if err1 != nil || err2 != nil {
		return fmt.Sprintf("ours %.200q pin %.200q", a, b)
	}
	pa, pb := ja.At("parsers").Elems(), jb.At("parsers").Elems()
	for i := 0; i < len(pa) || i < len(pb); i++ {
		if i >= len(pa) || i >= len(pb) || !ojson.Equal(pa[i], pb[i]) {
			show := func(ps []ojson.Value) string {
				var out []string
				for j := max(0, i-2); j < min(len(ps), i+3); j++ {
					out = append(out, fmt.Sprintf("%d:%s", j, ps[j].String()))
				}
				return strings.Join(out, " ")
			}
			return fmt.Sprintf("parser %d of %d/%d:\n ours %s\n  pin %s", i, len(pa), len(pb), show(pa), show(pb))
		}
	}
	return fmt.Sprintf("rules or root: ours %s %s\n  pin %s %s", ja.At("rules").String(), ja.At("root").String(), jb.At("rules").String(), jb.At("root").String())
}
