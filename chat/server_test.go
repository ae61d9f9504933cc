package chat

import (
	"bufio"
	"fmt"
	"math/rand"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/ggload/ggload/chat/internal/chattest"
	"github.com/ggload/ggload/internal/ojson"
	"github.com/ggload/ggload/lab/cxx"
	"github.com/ggload/ggload/lab/testenv"
)

// serverOracle is a running testdata/server.cpp: llama-server's reading
// of a chat request.
type serverOracle struct{ oracle }

func startServerOracle(t *testing.T) *serverOracle {
	t.Helper()
	src := testenv.SourceTree(t)
	testdata, _ := filepath.Abs("testdata")
	bin := cxx.Build(t, "chat-server-oracle", []string{filepath.Join(testdata, "server.cpp"), mtmdStubs(t, src, t.TempDir()),
		filepath.Join(src, "tools/server/server-chat.cpp"), filepath.Join(src, "tools/server/server-common.cpp")},
		"-I", filepath.Join(src, "tools/server"), "-I", testdata)
	cmd := cxx.Command(t, bin)
	cmd.Env = append(cmd.Env, "TZ=UTC0", fmt.Sprintf("CHAT_NOW=%d", testNow))
	in, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		in.Close()
		cmd.Wait()
	})
	return &serverOracle{oracle{t: t, cmd: cmd, in: bufio.NewWriter(in), out: bufio.NewReaderSize(out, 1<<20)}}
}

// serverOpts are ServerOptions and what the oracle takes for them.
type serverOpts struct {
	opts      ServerOptions
	reasoning int
}

func (o *serverOpts) json() string {
	kw := ojson.ObjectValue()
	for k, v := range o.opts.Kwargs {
		kw.Set(k, ojson.StringValue(v))
	}
	f, _ := ParseReasoningFormat(o.opts.ReasoningFormat)
	if o.opts.ReasoningFormat == "" {
		f = ReasoningDeepSeek
	}
	return dumpOrDie(obj("use_jinja", ojson.BoolValue(!o.opts.Legacy), "prefill_assistant", ojson.BoolValue(!o.opts.NoPrefillAssistant),
		"reasoning_format", ojson.IntValue(int64(f)), "reasoning", ojson.IntValue(int64(o.reasoning)), "kwargs", kw,
		"force_pure_content", ojson.BoolValue(o.opts.ForcePureContent)))
}

// request answers with llama_params' chat fields, or the error.
func (o *serverOracle) request(src, body string, opts *serverOpts) (ojson.Value, string) {
	chattest.WriteFields(o.in, src, "<s>", "</s>", body, opts.json(), "0")
	o.flush()
	if o.read() != "ok" {
		return ojson.Value{}, o.read()
	}
	v, err := ojson.ParseString(o.read())
	if err != nil {
		o.t.Fatal(err)
	}
	return chatFields(v), ""
}

// chatFields are the members of llama_params that the chat code makes.
func chatFields(v ojson.Value) ojson.Value {
	out := ojson.ObjectValue()
	for _, k := range []string{"chat_format", "prompt", "grammar", "grammar_lazy", "grammar_triggers", "preserved_tokens",
		"generation_prompt", "stop", "message_delimiters", "reasoning_budget_start_tag", "reasoning_budget_end_tags", "parse_tool_calls"} {
		if m, ok := v.Get(k); ok {
			out.Set(k, m)
		}
	}
	return out
}

// ourRequest is the same fields from RequestInputs and Apply.
func ourRequest(t *Templates, body string, opts *serverOpts) (ojson.Value, string) {
	b, err := ojson.ParseString(body)
	if err != nil {
		return ojson.Value{}, err.Error()
	}
	in, err := t.RequestInputs(b, opts.opts)
	if err != nil {
		return ojson.Value{}, errText(err)
	}
	in.Now = time.Unix(testNow, 0).UTC()
	p, err := t.Apply(in)
	if err != nil {
		return ojson.Value{}, errText(err)
	}
	v := ojson.ObjectValue()
	v.Set("chat_format", ojson.IntValue(int64(p.Format)))
	v.Set("prompt", ojson.StringValue(p.Prompt))
	if p.Grammar != "" {
		v.Set("grammar", ojson.StringValue(p.Grammar))
	}
	v.Set("grammar_lazy", ojson.BoolValue(p.GrammarLazy))
	tr := ojson.ArrayValue()
	for _, g := range p.GrammarTriggers {
		tr.Append(obj("type", ojson.IntValue(int64(g.Type)), "value", g.Value))
	}
	v.Set("grammar_triggers", tr)
	v.Set("preserved_tokens", strs(p.PreservedTokens))
	v.Set("generation_prompt", ojson.StringValue(p.GenerationPrompt))
	stop := ojson.ArrayValue()
	if s, ok := b.Get("stop"); ok && s.IsString() {
		stop.Append(s)
	} else if ok && s.IsArray() {
		stop.Append(s.Elems()...)
	}
	stop.Append(strs(p.AdditionalStops).Elems()...)
	v.Set("stop", stop)
	d := ojson.ArrayValue()
	for _, m := range p.MessageDelimiters {
		d.Append(obj("role", m.Role.String(), "delimiter", m.Delimiter))
	}
	v.Set("message_delimiters", d)
	if len(p.ThinkingEndTags) > 0 {
		v.Set("reasoning_budget_start_tag", ojson.StringValue(p.ThinkingStartTag))
		v.Set("reasoning_budget_end_tags", strs(p.ThinkingEndTags))
	}
	if len(in.Tools) > 0 && in.ToolChoice != ToolChoiceNone {
		v.Set("parse_tool_calls", ojson.BoolValue(true))
	}
	// llama-server copies the request's other members over
	for _, m := range chatFields(b).Members() {
		if !v.Has(m.Key) {
			v.Set(m.Key, m.Value)
		}
	}
	return v, ""
}

func strs(ss []string) ojson.Value {
	a := ojson.ArrayValue()
	for _, s := range ss {
		a.Append(ojson.StringValue(s))
	}
	return a
}

// body is a random request body, often malformed.
func (g *gen) body() string {
	in := g.conversation()
	msgs, _ := MessagesJSON(in.Messages, false)
	ms := msgs.Elems()
	mutate := func(v ojson.Value) ojson.Value {
		switch g.r.Intn(14) {
		case 0:
			v.Delete("role")
		case 1:
			v.Set("role", ojson.IntValue(3))
		case 2:
			v.Delete("content")
		case 3:
			v.Set("content", ojson.IntValue(7))
		case 4:
			v.Set("content", ojson.ArrayValue(obj("type", "image_url", "image_url", obj("url", "data:image/png;base64,AAAA"))))
		case 5:
			v.Set("content", ojson.ArrayValue(obj("type", "text")))
		case 6:
			v.Set("content", ojson.ArrayValue(obj("text", "no type")))
		case 7:
			v.Set("tool_calls", ojson.ArrayValue(obj("type", "function", "function", obj("arguments", "{}"))))
		case 8:
			v.Set("tool_calls", ojson.ArrayValue(obj("type", "code", "function", obj("name", "f", "arguments", "{}"))))
		case 9:
			v.Set("tool_calls", ojson.ArrayValue(obj("type", "function", "function", obj("name", "f", "arguments", obj("a", ojson.IntValue(1))))))
		case 10:
			v.Set("reasoning_content", ojson.NullValue())
		case 11:
			v.Set("content", ojson.NullValue())
		}
		return v
	}
	if len(ms) > 0 && g.r.Intn(5) == 0 {
		i := g.r.Intn(len(ms))
		ms[i] = mutate(ms[i])
	}
	b := obj("messages", msgs)
	if len(in.Tools) > 0 {
		tools, _ := ToolsJSON(in.Tools)
		if g.r.Intn(8) == 0 {
			tools.Elems()[0].Set("type", ojson.StringValue("code"))
		}
		b.Set("tools", tools)
	}
	set := func(k string, vs ...ojson.Value) {
		if g.r.Intn(6) == 0 {
			b.Set(k, vs[g.r.Intn(len(vs))])
		}
	}
	s := ojson.StringValue
	set("tool_choice", s("auto"), s("none"), s("required"), s("bogus"), obj("type", "function"))
	set("parallel_tool_calls", ojson.BoolValue(true), ojson.BoolValue(false), s("yes"))
	set("add_generation_prompt", ojson.BoolValue(false), ojson.BoolValue(true))
	set("continue_final_message", ojson.BoolValue(true), s("content"), s("reasoning_content"))
	set("reasoning_format", s("none"), s("deepseek"), s("auto"), s("deepseek-legacy"), s("bogus"), ojson.IntValue(2))
	set("chat_template_kwargs", obj("enable_thinking", ojson.BoolValue(false)), obj("enable_thinking", s("no")),
		ojson.ArrayValue(s("x")), obj("reasoning_effort", s("high")))
	set("reasoning_effort", s("none"), s("low"), s(""))
	set("response_format", obj("type", "json_object"), obj("type", "json_schema", "json_schema", obj("schema", obj("type", "string"))),
		obj("type", "text"), obj("type", "xml"), s("json"))
	set("json_schema", obj("type", "object"), ojson.ObjectValue())
	set("grammar", s(`root ::= "a"`))
	set("stop", s("STOP"), ojson.ArrayValue(s("a"), s("b")))
	if g.r.Intn(40) == 0 {
		b.Delete("messages")
	}
	if g.r.Intn(40) == 0 {
		b.Set("messages", obj("role", "user"))
	}
	out, _ := b.Dump(-1)
	return out
}

// llama-server's reading of a chat request: the inputs RequestInputs
// makes of a random request (often malformed), applied, give what
// oaicompat_chat_params_parse gives llama-server; its errors are
// llama-server's, word for word. 60 requests; GGLOAD_CHAT_ALL=1 makes
// 1500.
func TestRequestDifferential(t *testing.T) {
	names, srcs := pinTemplates(t)
	var tools []Tool
	seen := map[string]bool{}
	for _, in := range pinConversations(t) {
		for _, tl := range in.Tools {
			if !seen[tl.Name] {
				seen[tl.Name] = true
				tools = append(tools, tl)
			}
		}
	}
	o := startServerOracle(t)
	var us ours
	g := &gen{r: rand.New(rand.NewSource(fuzzSeed())), tools: tools}
	rounds := 60
	if all() {
		rounds = 1500
	}
	var errs, bad int
	for i := 0; i < rounds; i++ {
		name := names[g.r.Intn(len(names))]
		opts := &serverOpts{reasoning: g.r.Intn(3) - 1}
		opts.opts.Legacy = g.r.Intn(10) == 0
		opts.opts.NoPrefillAssistant = g.r.Intn(5) == 0
		opts.opts.ReasoningFormat = g.pick([]string{"", "none", "auto", "deepseek", "deepseek-legacy"})
		switch opts.reasoning {
		case 0:
			opts.opts.Reasoning = "off"
		case 1:
			opts.opts.Reasoning = "on"
		}
		if g.r.Intn(4) == 0 {
			opts.opts.Kwargs = map[string]string{"preserve_reasoning": "false", "reasoning_effort": `"medium"`}
		}
		body := g.body()
		tm, err := us.templates(srcs[name], "<s>", "</s>")
		if err != nil {
			t.Fatal(err)
		}
		got, gotErr := ourRequest(tm, body, opts)
		want, wantErr := o.request(srcs[name], body, opts)
		if wantErr != "" {
			errs++
			if testing.Verbose() {
				t.Logf("refused: %.100s", wantErr)
			}
		}
		if gotErr != wantErr || !ojson.Equal(got, want) {
			bad++
			if bad <= 10 {
				t.Errorf("%s, request %s, options %s:\n ours %s %q\n  pin %s %q", name, tail(body, 1500), opts.json(),
					tail(got.String(), 1500), gotErr, tail(want.String(), 1500), wantErr)
			}
		}
	}
	t.Logf("%d requests (%d refused by both): %d differ", rounds, errs, bad)
	_ = strings.Contains
}
