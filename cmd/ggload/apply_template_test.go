package main

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"testing"

	"github.com/ggload/ggload/chat"
	"github.com/ggload/ggload/gguf"
	"github.com/ggload/ggload/internal/ojson"
	"github.com/ggload/ggload/lab/cxx"
	"github.com/ggload/ggload/lab/testenv"
)

// chatModel is the pin's vocabulary file name with a chat template (and a
// tool_use one, if given) set, written in dir.
func chatModel(t *testing.T, dir, vocabName, template, toolUse string) string {
	t.Helper()
	f, err := gguf.Open(filepath.Join(testenv.SourceTree(t), "models", "ggml-vocab-"+vocabName+".gguf"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	w := gguf.NewWriter()
	for k, v := range f.Pairs() {
		if err := w.Set(k, v); err != nil {
			t.Fatal(err)
		}
	}
	w.Set("tokenizer.chat_template", gguf.String(template))
	if toolUse != "" {
		w.Set("tokenizer.chat_template.tool_use", gguf.String(toolUse))
	}
	for _, ti := range f.Tensors {
		if err := w.AddTensorReader(ti.Name, ti.Type, ti.Shape[:max(ti.NDims, 1)], f.Data(ti)); err != nil {
			t.Fatal(err)
		}
	}
	out := filepath.Join(dir, vocabName+"-"+strconv.Itoa(len(template))+".gguf")
	if err := w.WriteFile(out); err != nil {
		t.Fatal(err)
	}
	return out
}

// serverOracle is the chat package's testdata/server.cpp: llama-server's
// reading of a chat request, and its parse of replies.
type serverOracle struct {
	in  *bufio.Writer
	out *bufio.Reader
	t   *testing.T
}

func startServerOracle(t *testing.T) *serverOracle {
	src := testenv.SourceTree(t)
	testdata, _ := filepath.Abs("../../chat/testdata")
	re := regexp.MustCompile(`MTMD_API[^;(]*?\b(mtmd_[a-z0-9_]+)\s*\(`)
	var names []string
	for _, h := range []string{"tools/mtmd/mtmd.h", "tools/mtmd/mtmd-helper.h"} {
		b, err := os.ReadFile(filepath.Join(src, h))
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range re.FindAllStringSubmatch(string(b), -1) {
			names = append(names, m[1])
		}
	}
	sort.Strings(names)
	var stubs strings.Builder
	stubs.WriteString("#include <cstdlib>\n")
	for i, n := range names {
		if i == 0 || names[i-1] != n {
			fmt.Fprintf(&stubs, "extern \"C\" void %s() { std::abort(); }\n", n)
		}
	}
	stubFile := filepath.Join(t.TempDir(), "mtmd-stubs.cpp")
	if err := os.WriteFile(stubFile, []byte(stubs.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	bin := cxx.Build(t, "chat-server-oracle", []string{filepath.Join(testdata, "server.cpp"), stubFile,
		filepath.Join(src, "tools/server/server-chat.cpp"), filepath.Join(src, "tools/server/server-common.cpp")},
		"-I", filepath.Join(src, "tools/server"), "-I", testdata)
	cmd := cxx.Command(t, bin)
	cmd.Env = append(cmd.Env, "TZ=UTC0", "CHAT_NOW=1767225600")
	in, _ := cmd.StdinPipe()
	out, _ := cmd.StdoutPipe()
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { in.Close(); cmd.Wait() })
	return &serverOracle{in: bufio.NewWriter(in), out: bufio.NewReader(out), t: t}
}

func (o *serverOracle) write(fields ...string) {
	for _, f := range fields {
		fmt.Fprintf(o.in, "%d\n%s", len(f), f)
	}
}

func (o *serverOracle) read() string {
	line, err := o.out.ReadString('\n')
	if err != nil {
		o.t.Fatal(err)
	}
	n, _ := strconv.Atoi(strings.TrimSuffix(line, "\n"))
	b := make([]byte, n)
	if _, err := io.ReadFull(o.out, b); err != nil {
		o.t.Fatal(err)
	}
	return string(b)
}

// ggload apply-template prints, with --json, what llama-server makes of
// the same request for a model file (its template, its vocabulary's BOS
// and EOS): the prompt, the format, the grammar, its laziness and
// triggers, the preserved tokens, the stops, the generation prompt, and
// each --parse file parsed; without --json, the prompt alone; and
// llama-server's error for a malformed request.
func TestApplyTemplateMatchesLlamaServer(t *testing.T) {
	src := testenv.SourceTree(t)
	tmpl := func(name string) string {
		b, err := os.ReadFile(filepath.Join(src, "models", "templates", name+".jinja"))
		if err != nil {
			t.Fatal(err)
		}
		return string(b)
	}
	dir := t.TempDir()
	t.Setenv("SOURCE_DATE_EPOCH", "1767225600")
	t.Setenv("TZ", "UTC0")
	write := func(name, s string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(s), 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	msgs := write("msgs.json", `[{"role":"system","content":"You are helpful."},{"role":"user","content":"Weather in Paris?"},`+
		`{"role":"assistant","content":"","tool_calls":[{"id":"c1","type":"function","function":{"name":"get_weather","arguments":"{\"city\":\"Lyon\"}"}}]},`+
		`{"role":"tool","tool_call_id":"c1","content":"rain"},{"role":"user","content":"And Paris?"}]`)
	prefill := write("prefill.json", `[{"role":"user","content":"Hi"},{"role":"assistant","content":"Hello, I"}]`)
	bad := write("bad.json", `[{"role":"user"}]`)
	badCall := write("badcall.json", `[{"role":"assistant","tool_calls":[{"type":"function","function":{"arguments":"{}"}}]}]`)
	tools := write("tools.json", `[{"type":"function","function":{"name":"get_weather","description":"Get the weather","parameters":`+
		`{"type":"object","properties":{"city":{"type":"string"},"days":{"type":"integer"}},"required":["city"]}}}]`)
	replies := []string{
		write("r1.txt", "<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Paris\"}}\n</tool_call>"),
		write("r2.txt", "<think>It rains.</think>It is raining."),
		write("r3.txt", "<tool_call>\n<function=get_weather>\n<parameter=city>\nParis\n</parameter>\n</function>\n</tool_call>"),
		write("r4.txt", "It is \xff sunny {\"name\": \"get_weather\"}"),
	}
	models := []string{
		chatModel(t, dir, "qwen2", tmpl("Qwen-Qwen2.5-7B-Instruct"), ""),
		chatModel(t, dir, "qwen35", tmpl("Qwen3.5-4B"), ""),
		chatModel(t, dir, "llama-bpe", tmpl("meta-llama-Llama-3.1-8B-Instruct"), ""),
		chatModel(t, dir, "llama-spm", tmpl("mistralai-Mistral-Nemo-Instruct-2407"), ""),
		chatModel(t, dir, "command-r", tmpl("google-gemma-2-2b-it"), tmpl("CohereForAI-c4ai-command-r7b-12-2024-tool_use")),
	}
	type flagCase struct {
		args   []string
		body   func(b ojson.Value)
		format int               // llama-server's --reasoning-format, 3 (deepseek) for none given
		kwargs map[string]string // its --chat-template-kwargs
	}
	cases := []flagCase{
		{args: []string{"--messages", msgs}},
		{args: []string{"--messages", msgs, "--tools", tools}, body: func(b ojson.Value) { b.Set("tools", mustJSON(t, tools)) }},
		{args: []string{"--messages", msgs, "--tools", tools, "--tool-choice", "required", "--parallel-tool-calls"}, body: func(b ojson.Value) {
			b.Set("tools", mustJSON(t, tools))
			b.Set("tool_choice", ojson.StringValue("required"))
			b.Set("parallel_tool_calls", ojson.BoolValue(true))
		}},
		{args: []string{"--messages", msgs, "--no-add-generation-prompt", "--reasoning-format", "none"}, body: func(b ojson.Value) {
			b.Set("add_generation_prompt", ojson.BoolValue(false))
		}, format: -3},
		{args: []string{"--messages", msgs, "--chat-template-kwargs", `{"enable_thinking": false}`, "--json-schema", `{"type":"object","properties":{"a":{"type":"integer"}}}`},
			body: func(b ojson.Value) {
				b.Set("json_schema", mustJSON(t, write("schema.json", `{"type":"object","properties":{"a":{"type":"integer"}}}`)))
			}, kwargs: map[string]string{"enable_thinking": "false"}},
		{args: []string{"--messages", prefill}},
		{args: []string{"--messages", bad}},
		{args: []string{"--messages", badCall}},
		{args: []string{"--messages", msgs, "--tool-choice", "sometimes"}, body: func(b ojson.Value) { b.Set("tool_choice", ojson.StringValue("sometimes")) }},
	}
	o := startServerOracle(t)
	n := 0
	for _, model := range models {
		for ci, c := range cases {
			n++
			msgFile := c.args[1]
			body := ojson.ObjectValue(ojson.Member{Key: "messages", Value: mustJSON(t, msgFile)})
			if c.body != nil {
				c.body(body)
			}
			kw := ojson.ObjectValue()
			for k, v := range c.kwargs {
				kw.Set(k, ojson.StringValue(v))
			}
			opts := ojson.ObjectValue(ojson.Member{Key: "reasoning_format", Value: ojson.IntValue(int64(3 + c.format))},
				ojson.Member{Key: "kwargs", Value: kw}).String()
			o.write("@"+model, "", "", body.String(), opts, strconv.Itoa(len(replies)))
			for _, r := range replies {
				b, _ := os.ReadFile(r)
				o.write(string(b))
			}
			o.in.Flush()
			status, pin := o.read(), o.read()
			var parsed []string
			for range replies {
				st, m := o.read(), o.read()
				if st != "ok" {
					m = ojson.ObjectValue(ojson.Member{Key: "error", Value: ojson.StringValue(m)}).String()
				}
				parsed = append(parsed, m)
			}
			args := append([]string{"apply-template", model}, c.args...)
			args = append(append(args, "--json", "--parse"), replies...)
			var out, errOut bytes.Buffer
			err := run(context.Background(), args, &out, &errOut)
			if status != "ok" {
				if err == nil || chatErrorText(err) != pin {
					t.Errorf("%s case %d: ours %v, llama-server's error %q", filepath.Base(model), ci, err, pin)
				}
				continue
			}
			if err != nil {
				t.Errorf("%s case %d: %v", filepath.Base(model), ci, err)
				continue
			}
			got, err := ojson.ParseString(out.String())
			if err != nil {
				t.Fatal(err)
			}
			if keys := strings.Join(got.Keys(), ","); keys != "prompt,format,grammar,grammar_lazy,grammar_triggers,preserved_tokens,additional_stops,generation_prompt,supports_thinking,parsed" {
				t.Fatalf("keys %s", keys)
			}
			want, _ := ojson.ParseString(pin)
			format := chat.Format(want.At("chat_format").Int()).String()
			check := func(name string, a, b ojson.Value) {
				if !ojson.Equal(a, b) {
					t.Errorf("%s case %d %s:\n ours %s\n  pin %s", filepath.Base(model), ci, name, a.String(), b.String())
				}
			}
			check("prompt", got.At("prompt"), want.At("prompt"))
			check("format", got.At("format"), ojson.StringValue(format))
			check("grammar", got.At("grammar"), ojson.StringValue(want.At("grammar").Str()))
			check("grammar_lazy", got.At("grammar_lazy"), want.At("grammar_lazy"))
			check("grammar_triggers", got.At("grammar_triggers"), want.At("grammar_triggers"))
			check("preserved_tokens", got.At("preserved_tokens"), want.At("preserved_tokens"))
			check("additional_stops", got.At("additional_stops"), want.At("stop"))
			check("generation_prompt", got.At("generation_prompt"), want.At("generation_prompt"))
			for i, p := range got.At("parsed").Elems() {
				w, _ := ojson.ParseString(parsed[i])
				check("parsed "+strconv.Itoa(i), p, w)
			}
			// without --json, the prompt alone
			plain, err := runCLI(t, append([]string{"apply-template", model}, c.args...)...)
			if err != nil || plain != got.At("prompt").Str() {
				t.Errorf("%s case %d: the plain prompt differs (%v)", filepath.Base(model), ci, err)
			}
		}
	}
	t.Logf("%d requests over %d model files", n, len(models))
}

func mustJSON(t *testing.T, path string) ojson.Value {
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	v, err := ojson.Parse(b)
	if err != nil {
		t.Fatal(err)
	}
	return v
}
