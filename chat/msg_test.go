package chat

import (
	"fmt"
	"math/rand"
	"strconv"
	"testing"

	"github.com/ggload/ggload/internal/ojson"
)

func (o *oracle) readMsgs() ([]Message, string) {
	if o.read() != "ok" {
		return nil, o.read()
	}
	var ms []Message
	for i, n := 0, o.readInt(); i < n; i++ {
		ms = append(ms, o.readMsg())
	}
	return ms, ""
}

// jsonMessage is a random OpenAI message, often malformed.
func (g *gen) jsonMessage() ojson.Value {
	m := ojson.ObjectValue()
	set := func(k string, v ojson.Value) {
		if g.r.Intn(8) > 0 {
			m.Set(k, v)
		}
	}
	set("role", g.pickValue(str("user"), str("assistant"), str("tool"), str("system"), ojson.IntValue(1)))
	switch g.r.Intn(7) {
	case 0, 1, 2:
		set("content", str(g.text()))
	case 3:
		parts := ojson.ArrayValue()
		for i := g.r.Intn(3); i >= 0; i-- {
			p := ojson.ObjectValue()
			if g.r.Intn(10) > 0 {
				p.Set("type", g.pickValue(str("text"), str("text"), str("media_marker"), str("image_url"), ojson.NullValue()))
			}
			if g.r.Intn(10) > 0 {
				p.Set("text", g.pickValue(str(g.text()), ojson.IntValue(3)))
			}
			parts.Append(p)
		}
		m.Set("content", parts)
	case 4:
		m.Set("content", g.pickValue(ojson.NullValue(), ojson.IntValue(5), ojson.ObjectValue()))
	}
	if g.r.Intn(3) == 0 {
		calls := ojson.ArrayValue()
		for i := g.r.Intn(2); i >= 0; i-- {
			c := ojson.ObjectValue()
			if g.r.Intn(10) > 0 {
				c.Set("type", g.pickValue(str("function"), str("function"), str("code")))
			}
			if g.r.Intn(10) > 0 {
				f := ojson.ObjectValue()
				if g.r.Intn(10) > 0 {
					f.Set("name", g.pickValue(str("f"), ojson.IntValue(2)))
				}
				if g.r.Intn(10) > 0 {
					f.Set("arguments", g.pickValue(str(`{"a":1}`), g.value(2)))
				}
				c.Set("function", f)
			}
			if g.r.Intn(2) == 0 {
				c.Set("id", g.pickValue(str("call_1"), ojson.NullValue()))
			}
			calls.Append(c)
		}
		m.Set("tool_calls", g.pickValue(calls, calls, ojson.NullValue(), str("x")))
	}
	if g.r.Intn(5) == 0 {
		m.Set("reasoning_content", g.pickValue(str(g.text()), ojson.NullValue()))
	}
	if g.r.Intn(6) == 0 {
		m.Set("name", str("tool_name"))
	}
	if g.r.Intn(6) == 0 {
		m.Set("tool_call_id", g.pickValue(str("call_1"), ojson.IntValue(9)))
	}
	if g.r.Intn(30) == 0 {
		return str("not an object")
	}
	return m
}

func (g *gen) pickValue(vs ...ojson.Value) ojson.Value { return vs[g.r.Intn(len(vs))] }

// ParseMessages and ParseTools read OpenAI messages and tools as
// common_chat_msgs_parse_oaicompat and common_chat_tools_parse_oaicompat
// read them, malformed ones refused with their words.
func TestParseMessagesTools(t *testing.T) {
	o := startOracle(t)
	g := &gen{r: rand.New(rand.NewSource(fuzzSeed()))}
	n, bad, refused := 400, 0, 0
	if all() {
		n = 5000
	}
	for i := 0; i < n; i++ {
		msgs := ojson.ArrayValue()
		for j := g.r.Intn(4); j > 0; j-- {
			msgs.Append(g.jsonMessage())
		}
		if g.r.Intn(40) == 0 {
			msgs = obj("messages", "x")
		}
		text := dumpOrDie(msgs)
		o.send("msgs", text)
		o.flush()
		want, wantErr := o.readMsgs()
		got, err := ParseMessages(msgs)
		gotErr := ""
		if err != nil {
			gotErr = errText(err)
			refused++
		}
		if gotErr != wantErr || fmt.Sprint(got) != fmt.Sprint(want) {
			bad++
			t.Errorf("messages %s:\n ours %+v %q\n  pin %+v %q", text, got, gotErr, want, wantErr)
		}
		tools := g.jsonTools()
		text = dumpOrDie(tools)
		o.send("tools", text)
		o.flush()
		var wantTools []Tool
		wantErr = ""
		if o.read() == "ok" {
			for j, m := 0, o.readInt(); j < m; j++ {
				wantTools = append(wantTools, Tool{o.read(), o.read(), o.read()})
			}
		} else {
			wantErr = o.read()
		}
		gotTools, err := ParseTools(tools)
		gotErr = ""
		if err != nil {
			gotErr = errText(err)
		}
		if gotErr != wantErr || fmt.Sprint(gotTools) != fmt.Sprint(wantTools) {
			bad++
			t.Errorf("tools %s:\n ours %+v %q\n  pin %+v %q", text, gotTools, gotErr, wantTools, wantErr)
		}
	}
	t.Logf("%d message lists (%d refused) and %d tool lists: %d differ", n, refused, n, bad)
}

func (g *gen) jsonTools() ojson.Value {
	if g.r.Intn(10) == 0 {
		return g.pickValue(ojson.NullValue(), str("x"), ojson.ObjectValue())
	}
	tools := ojson.ArrayValue()
	for i := g.r.Intn(3); i > 0; i-- {
		t := ojson.ObjectValue()
		if g.r.Intn(12) > 0 {
			t.Set("type", g.pickValue(str("function"), str("function"), ojson.IntValue(1), str("code")))
		}
		if g.r.Intn(12) > 0 {
			f := ojson.ObjectValue()
			if g.r.Intn(12) > 0 {
				f.Set("name", g.pickValue(str("get_"+strconv.Itoa(g.r.Intn(9))), ojson.IntValue(3)))
			}
			if g.r.Intn(2) == 0 {
				f.Set("description", g.pickValue(str(g.text()), ojson.IntValue(4)))
			}
			if g.r.Intn(2) == 0 {
				f.Set("parameters", g.value(2))
			}
			t.Set("function", g.pickValue(f, f, f, str("fn")))
		}
		tools.Append(t)
	}
	return tools
}

// randomMessage is a message with any of common_chat_msg's fields.
func (g *gen) randomMessage() Message {
	m := g.assistant(g.tools)
	m.Role = g.pick([]string{"user", "assistant", "tool"})
	if g.r.Intn(4) == 0 {
		for i := g.r.Intn(3); i >= 0; i-- {
			m.ContentParts = append(m.ContentParts, ContentPart{g.pick([]string{"text", "media_marker", "other"}), g.text()})
		}
	}
	if g.r.Intn(4) == 0 {
		m.ToolName, m.ToolCallID = "f", "call_9"
	}
	return m
}

// Message.JSON is to_json_oaicompat and Diffs is compute_diffs: the same
// JSON and the same deltas (or the same error).
func TestMessageJSONAndDiffs(t *testing.T) {
	o := startOracle(t)
	g := &gen{r: rand.New(rand.NewSource(fuzzSeed()))}
	n, bad := 400, 0
	if all() {
		n = 5000
	}
	for i := 0; i < n; i++ {
		m := g.randomMessage()
		concat := g.r.Intn(2) == 0
		c := "0"
		if concat {
			c = "1"
		}
		o.send("oaijson", dumpOrDie(msgJSON(&m)), c)
		o.flush()
		var want, wantErr string
		if o.read() == "ok" {
			want = o.read()
		} else {
			wantErr = o.read()
		}
		j, err := m.JSON(concat)
		got, gotErr := "", ""
		if err != nil {
			gotErr = errText(err)
		} else {
			got = dumpOrDie(j)
		}
		if got != want || gotErr != wantErr {
			bad++
			t.Errorf("to_json_oaicompat of %+v: ours %s %q, pin %s %q", m, got, gotErr, want, wantErr)
		}
		// a later parse of the same reply: longer texts, more calls, or
		// (now and then) something else
		cur := m
		cur.Content += g.text()
		cur.ReasoningContent += g.text()
		cur.ToolCalls = append([]ToolCall(nil), m.ToolCalls...)
		if len(cur.ToolCalls) > 0 {
			cur.ToolCalls[len(cur.ToolCalls)-1].Arguments += g.text()
		}
		if g.r.Intn(3) == 0 {
			cur.ToolCalls = append(cur.ToolCalls, g.call(g.tools))
		}
		if g.r.Intn(6) == 0 {
			cur = g.randomMessage()
		}
		o.send("diff", dumpOrDie(msgJSON(&m)), dumpOrDie(msgJSON(&cur)))
		o.flush()
		var wantDiffs []Diff
		wantErr = ""
		if o.read() == "ok" {
			for k, n := 0, o.readInt(); k < n; k++ {
				d := Diff{ReasoningContentDelta: o.read(), ContentDelta: o.read(), ToolCallIndex: -1}
				if idx := o.read(); idx != "-" {
					d.ToolCallIndex, _ = strconv.Atoi(idx)
				}
				d.ToolCallDelta = ToolCall{Name: o.read(), Arguments: o.read(), ID: o.read()}
				wantDiffs = append(wantDiffs, d)
			}
		} else {
			wantErr = o.read()
		}
		gotDiffs, err := Diffs(&m, &cur)
		gotErr = ""
		if err != nil {
			gotErr = err.Error()
		}
		if gotErr != wantErr || fmt.Sprint(gotDiffs) != fmt.Sprint(wantDiffs) {
			bad++
			t.Errorf("compute_diffs(%+v, %+v):\n ours %+v %q\n  pin %+v %q", m, cur, gotDiffs, gotErr, wantDiffs, wantErr)
		}
	}
	t.Logf("%d messages and diffs: %d differ", n, bad)
}
