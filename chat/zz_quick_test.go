package chat

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestQuickAll(t *testing.T) {
	o := startOracle(t)
	var us ours
	files, _ := filepath.Glob("/work/ref/models/templates/*.jinja")
	tool := Tool{Name: "get_weather", Description: "Get weather", Parameters: `{"type":"object","properties":{"city":{"type":"string"},"days":{"type":"integer"}},"required":["city"]}`}
	convs := []Inputs{
		{Messages: []Message{{Role: "user", Content: "hi"}}},
		{Messages: []Message{{Role: "system", Content: "sys"}, {Role: "user", Content: "hi"}}, Tools: []Tool{tool}},
		{Messages: []Message{{Role: "user", Content: "hi"}}, Tools: []Tool{tool}, ReasoningFormat: ReasoningDeepSeek, ParallelToolCalls: true},
		{Messages: []Message{{Role: "user", Content: "hi"}, {Role: "assistant", ToolCalls: []ToolCall{{Name: "get_weather", Arguments: `{"city":"Paris"}`, ID: "call_1"}}},
			{Role: "tool", Content: "sunny", ToolCallID: "call_1", ToolName: "get_weather"}}, Tools: []Tool{tool}, ReasoningFormat: ReasoningAuto},
		{Messages: []Message{{Role: "user", Content: "hi"}}, ReasoningFormat: ReasoningDeepSeek, DisableThinking: true},
		{Messages: []Message{{Role: "user", Content: "hi"}}, Tools: []Tool{tool}, ToolChoice: ToolChoiceRequired},
		{Messages: []Message{{Role: "user", Content: "hi"}}, JSONSchema: `{"type":"object","properties":{"a":{"type":"string"}}}`},
		{Messages: []Message{{Role: "user", Content: "hi"}}, Legacy: true},
	}
	replies := []reply{{"Hello there", false}, {"<think>hmm</think>Hello", false}, {"Hel", true}}
	bad := 0
	for _, f := range files {
		b, _ := os.ReadFile(f)
		for ci, in := range convs {
			q := &request{src: string(b), bos: "<s>", eos: "</s>", in: in, replies: replies}
			want := o.apply(q)
			got := us.apply(q)
			if d := diffParams(&got, &want); d != "" {
				bad++
				if len(d) > 3000 {
					d = d[:3000]
				}
				t.Errorf("%s conv %d:\n%s", filepath.Base(f), ci, d)
			}
		}
	}
	t.Logf("%d bad of %d", bad, len(files)*len(convs))
	_ = strings.Contains
}
