package chat

import (
	"math/rand"
	"os"
	"strconv"
	"strings"
	"testing"

	"github.com/ggload/ggload/internal/ojson"
)

// gen makes random conversations and replies for the differential fuzz.
type gen struct {
	r     *rand.Rand
	tools []Tool // the pin's test tools
}

var fuzzTexts = []string{"hello", "", " ", "\n", "Hi there!", "héllo 测试 🎉", `say "quoted" and \back\`,
	"{\"a\": 1}", "<think>", "</think>", "<tool_call>", "[TOOL_CALLS]", "{{ x }}{% if %}", "line one\nline two\n\n",
	"  padded  ", "a\tb", "<|im_end|>", "```json\n{}\n```", "null", "true", "3.14", "'single'"}

func (g *gen) pick(xs []string) string { return xs[g.r.Intn(len(xs))] }

func (g *gen) text() string {
	n := g.r.Intn(3)
	var b strings.Builder
	for i := 0; i <= n; i++ {
		b.WriteString(g.pick(fuzzTexts))
	}
	return b.String()
}

// value is a random JSON value, nested at most depth deep.
func (g *gen) value(depth int) ojson.Value {
	k := g.r.Intn(8)
	if depth <= 0 && k >= 6 {
		k = g.r.Intn(6)
	}
	switch k {
	case 0:
		return ojson.StringValue(g.text())
	case 1:
		return ojson.IntValue(int64(g.r.Intn(2000) - 1000))
	case 2:
		return ojson.FloatValue(float64(g.r.Intn(10000)) / 8)
	case 3:
		return ojson.BoolValue(g.r.Intn(2) == 0)
	case 4:
		return ojson.NullValue()
	case 5:
		return ojson.StringValue(g.pick([]string{"Paris", "celsius", "x", "", "multi\nline"}))
	case 6:
		a := ojson.ArrayValue()
		for i := g.r.Intn(3); i > 0; i-- {
			a.Append(g.value(depth - 1))
		}
		return a
	}
	o := ojson.ObjectValue()
	for i := g.r.Intn(3); i > 0; i-- {
		o.Set(g.pick([]string{"a", "b", "name", "value", "nested"}), g.value(depth-1))
	}
	return o
}

// args are arguments for a tool: its properties mostly, sometimes others.
func (g *gen) args(t Tool) string {
	o := ojson.ObjectValue()
	params, err := ojson.ParseString(t.Parameters)
	if err == nil {
		for _, p := range params.At("properties").Members() {
			if g.r.Intn(4) == 0 {
				continue
			}
			switch p.Value.At("type").Str() {
			case "string":
				o.Set(p.Key, ojson.StringValue(g.text()))
			case "integer":
				o.Set(p.Key, ojson.IntValue(int64(g.r.Intn(100))))
			case "boolean":
				o.Set(p.Key, ojson.BoolValue(g.r.Intn(2) == 0))
			default:
				o.Set(p.Key, g.value(2))
			}
		}
	}
	if g.r.Intn(8) == 0 {
		o.Set("extra", g.value(2))
	}
	s, _ := o.Dump(-1)
	if g.r.Intn(6) == 0 {
		s, _ = o.Dump(2)
	}
	return s
}

func (g *gen) call(tools []Tool) ToolCall {
	t := Tool{Name: "some_function", Parameters: `{"type":"object","properties":{"a":{"type":"string"}}}`}
	if len(tools) > 0 {
		t = tools[g.r.Intn(len(tools))]
	}
	id := ""
	if g.r.Intn(3) > 0 {
		id = "call_" + strconv.Itoa(g.r.Intn(1000))
	}
	return ToolCall{Name: t.Name, Arguments: g.args(t), ID: id}
}

// assistant is an assistant message: content, reasoning, tool calls.
func (g *gen) assistant(tools []Tool) Message {
	m := Message{Role: "assistant"}
	if g.r.Intn(3) > 0 {
		m.Content = g.text()
	}
	if g.r.Intn(3) == 0 {
		m.ReasoningContent = g.text()
	}
	if len(tools) > 0 && g.r.Intn(2) == 0 {
		for i := 1 + g.r.Intn(2); i > 0; i-- {
			m.ToolCalls = append(m.ToolCalls, g.call(tools))
		}
	}
	return m
}

func (g *gen) content(m *Message) {
	if g.r.Intn(6) == 0 {
		for i := 1 + g.r.Intn(2); i > 0; i-- {
			m.ContentParts = append(m.ContentParts, ContentPart{"text", g.text()})
		}
		return
	}
	m.Content = g.text()
}

// conversation is a random conversation and options.
func (g *gen) conversation() Inputs {
	var in Inputs
	for i := g.r.Intn(3); i > 0; i-- {
		in.Tools = append(in.Tools, g.tools[g.r.Intn(len(g.tools))])
	}
	if g.r.Intn(3) == 0 {
		m := Message{Role: g.pick([]string{"system", "system", "developer"})}
		g.content(&m)
		in.Messages = append(in.Messages, m)
	}
	for turns := 1 + g.r.Intn(3); turns > 0; turns-- {
		u := Message{Role: "user"}
		g.content(&u)
		in.Messages = append(in.Messages, u)
		if turns == 1 {
			break
		}
		a := g.assistant(in.Tools)
		in.Messages = append(in.Messages, a)
		for _, c := range a.ToolCalls {
			in.Messages = append(in.Messages, Message{Role: "tool", Content: g.text(), ToolCallID: c.ID, ToolName: c.Name})
		}
	}
	in.ToolChoice = ToolChoice(g.r.Intn(3))
	in.ParallelToolCalls = g.r.Intn(2) == 0
	in.ReasoningFormat = ReasoningFormat(g.r.Intn(4))
	in.DisableThinking = g.r.Intn(4) == 0
	switch g.r.Intn(20) {
	case 0:
		in.NoGenerationPrompt = true
	case 1, 2:
		in.Messages = append(in.Messages, g.assistant(nil))
		in.NoGenerationPrompt = true
		in.Continue = Continuation(1 + g.r.Intn(3))
	case 3:
		in.JSONSchema = `{"type":"object","properties":{"answer":{"type":"string"},"n":{"type":"integer"}},"required":["answer"]}`
	case 4:
		in.Legacy = true
	case 5:
		in.ForcePureContent = true
	case 6:
		in.Grammar = `root ::= "yes" | "no"`
	case 7:
		in.Kwargs = map[string]string{"enable_thinking": g.pick([]string{"true", "false"}), "preserve_reasoning": "true"}
	case 8:
		in.Kwargs = map[string]string{"reasoning_effort": `"low"`, "custom": `{"k": [1, 2]}`}
	}
	return in
}

// replies are random replies to the params: an assistant turn as the
// template renders it after the prompt, truncated, garbled, or random.
func (g *gen) replies(tm *Templates, in Inputs, p *Params) []reply {
	var out []reply
	for k := 0; k < 3; k++ {
		next := in
		next.Messages = append(append([]Message(nil), in.Messages...), g.assistant(in.Tools))
		next.NoGenerationPrompt, next.Continue = true, ContinueNone
		text := ""
		if q, err := tm.Apply(&next); err == nil {
			n := commonPrefixLen(q.Prompt, p.Prompt)
			text = q.Prompt[n:]
		}
		out = append(out, reply{text, false})
		if text != "" {
			cut := g.r.Intn(len(text) + 1)
			out = append(out, reply{text[:cut], true}, reply{text[:cut], false})
		}
	}
	var b strings.Builder
	for i := g.r.Intn(6); i > 0; i-- {
		switch g.r.Intn(4) {
		case 0:
			b.WriteString(g.text())
		case 1:
			b.WriteString(g.pick(append([]string{p.ThinkingStartTag, "\xff\xfe"}, p.PreservedTokens...)))
		case 2:
			b.WriteString(string([]byte{byte(0x80 + g.r.Intn(0x7f))}))
		default:
			s, _ := g.value(2).Dump(-1)
			b.WriteString(s)
		}
	}
	out = append(out, reply{b.String(), g.r.Intn(2) == 0})
	return out
}

// A differential fuzz: random conversations over random templates of the
// pin, and random replies, give here what they give the pin, every
// field. The default run makes 120 conversations; GGLOAD_CHAT_ALL=1
// makes 3000.
func TestFuzzDifferential(t *testing.T) {
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
	o := startOracle(t)
	var us ours
	g := &gen{r: rand.New(rand.NewSource(fuzzSeed())), tools: tools}
	rounds := 120
	if all() {
		rounds = 3000
	}
	var convs, replies, partials, failed, bad int
	for i := 0; i < rounds; i++ {
		name := names[g.r.Intn(len(names))]
		in := g.conversation()
		tm, err := us.templates(srcs[name], "<s>", "</s>")
		if err != nil {
			t.Fatal(err)
		}
		q := &request{src: srcs[name], bos: "<s>", eos: "</s>", in: in}
		got := us.apply(q)
		if got.err == "" {
			q.replies = g.replies(tm, in, &got.params.Params)
			got = us.apply(q)
		} else {
			failed++
		}
		want := o.apply(q)
		convs++
		replies += len(q.replies)
		for _, r := range q.replies {
			if r.partial {
				partials++
			}
		}
		if d := diffParams(&got, &want); d != "" {
			bad++
			if bad <= 10 {
				t.Errorf("round %d, %s, inputs %s:\n%s", i, name, tail(inputsJSON(&in), 1500), tail(d, 3000))
			}
		}
	}
	t.Logf("%d conversations (%d refused by both), %d replies (%d partial): %d differ", convs, failed, replies, partials, bad)
}

// fuzzSeed is GGLOAD_CHAT_SEED, or 57.
func fuzzSeed() int64 {
	if s, err := strconv.ParseInt(os.Getenv("GGLOAD_CHAT_SEED"), 10, 64); err == nil {
		return s
	}
	return 57
}
