package chat

import (
	"strings"
	"sync"
	"testing"

	"github.com/ggload/ggload/internal/ojson"
)

// Bad input never panics: Go's fuzzing over requests, templates and
// replies (the corpus entries run in every test run; go test -fuzz
// FuzzX runs them at length).

var fuzzTemplates struct {
	once  sync.Once
	names []string
	tmpls []*Templates
	err   error
}

// someTemplates are every template of the pin's models/templates/, made.
func someTemplates(t testing.TB) ([]string, []*Templates) {
	names, srcs := pinTemplates(t)
	f := &fuzzTemplates
	f.once.Do(func() {
		for _, n := range names {
			tm, err := FromSource(Options{Template: srcs[n], BOS: "<s>", EOS: "</s>", Name: n})
			if err != nil {
				f.err = err
				return
			}
			f.names, f.tmpls = append(f.names, n), append(f.tmpls, tm)
		}
	})
	if f.err != nil {
		t.Fatal(f.err)
	}
	return f.names, f.tmpls
}

var fuzzSeedRequests = []string{
	`{"messages":[{"role":"user","content":"Hi"}]}`,
	`{"messages":[{"role":"system","content":"Be brief."},{"role":"user","content":[{"type":"text","text":"Hi"}]},{"role":"assistant","content":"Hello","reasoning_content":"greet"},{"role":"user","content":"Weather?"}],"tools":[{"type":"function","function":{"name":"w","description":"d","parameters":{"type":"object","properties":{"c":{"type":"string"}},"required":["c"]}}}],"tool_choice":"required","parallel_tool_calls":true}`,
	`{"messages":[{"role":"user","content":"x"},{"role":"assistant","tool_calls":[{"type":"function","id":"call_1","function":{"name":"w","arguments":"{\"c\":\"P\"}"}}]},{"role":"tool","tool_call_id":"call_1","content":"sunny"}],"tools":[{"type":"function","function":{"name":"w","parameters":{"type":"object"}}}]}`,
	`{"messages":[{"role":"user","content":"x"},{"role":"assistant","content":"par"}],"continue_final_message":true,"add_generation_prompt":false}`,
	`{"messages":[{"role":"user","content":"json"}],"response_format":{"type":"json_schema","json_schema":{"schema":{"type":"array","items":{"type":"integer"},"minItems":2}}}}`,
	`{"messages":[{"role":"user","content":"g"}],"grammar":"root ::= \"a\" | \"b\""}`,
	`{"messages":[{"role":"user","content":"t"}],"chat_template_kwargs":{"enable_thinking":false,"reasoning_effort":"high"}}`,
	`{"messages":[{"role":"bogus","content":3}]}`,
	`{"messages":"nope"}`,
	`[]`,
}

// Any request body, on any template: an error or params, and the params'
// parser takes any reply.
func FuzzRequest(f *testing.F) {
	for i, s := range fuzzSeedRequests {
		f.Add(s, uint8(i*7), "<think>a</think>b<tool_call>{\"name\":\"w\",\"arguments\":{\"c\":\"P\"}}</tool_call>", i%2 == 0)
	}
	f.Fuzz(func(t *testing.T, body string, which uint8, reply string, partial bool) {
		_, tmpls := someTemplates(t)
		j, err := ojson.ParseString(body)
		if err != nil {
			return
		}
		tm := tmpls[int(which)%len(tmpls)]
		in, err := tm.RequestInputs(j, ServerOptions{})
		if err != nil {
			return
		}
		p, err := tm.Apply(in)
		if err != nil {
			return
		}
		_, _ = p.Parse(reply, partial)
		s := p.NewStream(nil)
		for len(reply) > 0 {
			n := min(len(reply), 3)
			if _, _, err := s.Add(reply[:n], true); err != nil {
				break
			}
			reply = reply[n:]
		}
	})
}

// Any reply, to the params of any template with tools, whole or partial,
// and streamed in pieces.
func FuzzParse(f *testing.F) {
	for i, s := range []string{
		"Hello", "<think>I think</think>Hello", "<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Paris\"}}\n</tool_call>",
		"[TOOL_CALLS]get_weather[ARGS]{\"city\":\"Paris\"}", "<|channel|>analysis<|message|>x<|end|><|start|>assistant<|channel|>final<|message|>y",
		"{\"tool_calls\": [{\"name\": \"search\", \"arguments\": {\"query\": \"q\"}}]}", "<function=python>\n<parameter=code>\nprint(1)\n</parameter>\n</function>",
		"\xff\xfe<think>", strings.Repeat("{[", 200),
	} {
		f.Add(s, uint8(i*11), i%3 == 0)
	}
	f.Fuzz(func(t *testing.T, reply string, which uint8, partial bool) {
		_, tmpls := someTemplates(t)
		tm := tmpls[int(which)%len(tmpls)]
		in := benchConversation()
		in.Messages = in.Messages[:2]
		p, err := tm.Apply(&in)
		if err != nil {
			return
		}
		_, _ = p.Parse(reply, partial)
	})
}

// Any template source: an error naming the line, or a template that
// renders (or fails to) without a panic.
func FuzzTemplate(f *testing.F) {
	for _, s := range []string{
		"{% for m in messages %}{{ m.role }}: {{ m.content }}\n{% endfor %}",
		"{{ bos_token }}{% if tools %}{{ tools | tojson }}{% endif %}{{ raise_exception('x') }}",
		"{% macro f(n) %}{{ f(n + 1) }}{% endmacro %}{{ f(0) }}",
		"{% set ns = namespace(x=[]) %}{% for i in range(300) %}{% set ns.x = ns.x + [i] %}{% endfor %}",
		"<|im_start|>{{ messages[0]['content'] * 100000000 }}",
		"{% for", "{{ x.y.z() }}", "{% if add_generation_prompt %}<|assistant|>{% endif %}",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, src string) {
		tm, err := FromSource(Options{Template: src, Name: "fuzz"})
		if err != nil {
			return
		}
		in := benchConversation()
		in.Messages = in.Messages[:4]
		_, _ = tm.Apply(&in)
		in.Legacy = true
		_, _ = tm.Apply(&in)
	})
}
