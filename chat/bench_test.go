package chat

import (
	"fmt"
	"strconv"
	"testing"
	"time"
)

// benchConversation is 32 messages with tools: a system message, then
// turns of a user's question, the assistant's reasoning and tool call,
// the tool's result and the assistant's answer, and a last question.
func benchConversation() Inputs {
	in := Inputs{Now: time.Unix(testNow, 0).UTC(), ParallelToolCalls: true}
	in.Tools = []Tool{
		{Name: "get_weather", Description: "The weather in a city, now.",
			Parameters: `{"type":"object","properties":{"city":{"type":"string","description":"The city"},"unit":{"type":"string","enum":["celsius","fahrenheit"]}},"required":["city"]}`},
		{Name: "search", Description: "Search the web.",
			Parameters: `{"type":"object","properties":{"query":{"type":"string"},"max_results":{"type":"integer","minimum":1,"maximum":20}},"required":["query"]}`},
		{Name: "python", Description: "Run Python code and return its output.",
			Parameters: `{"type":"object","properties":{"code":{"type":"string"}},"required":["code"]}`},
	}
	in.Messages = append(in.Messages, Message{Role: "system", Content: "You are a helpful assistant with tools. Answer briefly."})
	cities := []string{"Paris", "Tokyo", "Lima", "Oslo", "Cairo", "Perth"}
	for i := 0; len(in.Messages) < 31; i++ {
		id := fmt.Sprintf("%09d", i+1)
		city := cities[i%len(cities)]
		in.Messages = append(in.Messages,
			Message{Role: "user", Content: "What is the weather in " + city + "? And tell me something about it."},
			Message{Role: "assistant", ReasoningContent: "The user asks about " + city + "; I should call get_weather.",
				ToolCalls: []ToolCall{{Name: "get_weather", Arguments: `{"city":"` + city + `","unit":"celsius"}`, ID: id}}},
			Message{Role: "tool", ToolCallID: id, ToolName: "get_weather", Content: `{"temperature":` + strconv.Itoa(10+i) + `,"sky":"clear"}`},
			Message{Role: "assistant", Content: "It is " + strconv.Itoa(10+i) + " °C and clear in " + city + ". " + city + " is a city with a long history."},
		)
	}
	in.Messages = append(in.Messages, Message{Role: "user", Content: "Thanks. Now search for the best time to visit them all."})
	return in
}

// BenchmarkApply is the whole Apply (render, grammar, parser) of a
// 32-message conversation with three tools, per template of the pin's
// models/templates/, next to the pin's common_chat_templates_apply on
// the same inputs (pin-ns/op) and the ratio ours/pin's: each on
// templates made once, as a server holds them. Templates the
// conversation does not render on (in the pin) are skipped.
//
//	go test ./chat -run '^$' -bench 'Apply$' -benchtime 20x
func BenchmarkApply(b *testing.B) { benchApply(b, "apply") }

// BenchmarkApplyCold is the same with the templates made anew each time:
// FromSource then Apply, against common_chat_templates_init then apply.
func BenchmarkApplyCold(b *testing.B) { benchApply(b, "init") }

func benchApply(b *testing.B, mode string) {
	names, srcs := pinTemplates(b)
	o := startOracle(b)
	in := benchConversation()
	inJSON := inputsJSON(&in)
	for _, name := range names {
		b.Run(name, func(b *testing.B) {
			src := srcs[name]
			// the pin first: whether it renders, and its time
			pin := func(n int) (time.Duration, string) {
				o.send("bench", src, "<s>", "</s>", inJSON, strconv.Itoa(n), mode)
				o.flush()
				if o.read() != "ok" {
					return 0, o.read()
				}
				return time.Duration(o.readInt()), ""
			}
			if _, err := pin(1); err != "" {
				b.Skipf("the pin: %s", err)
			}
			opts := Options{Template: src, BOS: "<s>", EOS: "</s>", Name: name}
			t, err := FromSource(opts)
			if err != nil {
				b.Fatal(err)
			}
			if _, err := t.Apply(&in); err != nil {
				b.Fatalf("the pin renders it, we do not: %v", err)
			}
			b.ReportAllocs()
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				if mode == "init" {
					if t, err = FromSource(opts); err != nil {
						b.Fatal(err)
					}
				}
				if _, err := t.Apply(&in); err != nil {
					b.Fatal(err)
				}
			}
			b.StopTimer()
			ours := b.Elapsed()
			theirs, _ := pin(b.N)
			b.ReportMetric(float64(theirs.Nanoseconds())/float64(b.N), "pin-ns/op")
			if theirs > 0 {
				b.ReportMetric(float64(ours)/float64(theirs), "ratio")
			}
		})
	}
}

// The benchmark's conversation gives here what it gives the pin, on
// every template.
func TestBenchConversation(t *testing.T) {
	names, srcs := pinTemplates(t)
	o := startOracle(t)
	var us ours
	in := benchConversation()
	rendered := 0
	for _, name := range names {
		q := &request{src: srcs[name], bos: "<s>", eos: "</s>", in: in}
		want, got := o.apply(q), us.apply(q)
		if d := diffParams(&got, &want); d != "" {
			t.Errorf("%s:\n%s", name, tail(d, 3000))
		}
		if want.err == "" {
			rendered++
		}
	}
	t.Logf("%d templates, %d render the conversation", len(names), rendered)
}
