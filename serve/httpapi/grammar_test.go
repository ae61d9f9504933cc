package httpapi_test

import (
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/ggload/ggload/grammar"
	"github.com/ggload/ggload/internal/ojson"
	"github.com/ggload/ggload/lab/testenv"
)

// grammarExchanges are completions constrained by a GBNF grammar, a JSON
// schema, a lazy grammar and its triggers: greedy and seeded, streamed or
// not, on the native and OpenAI endpoints, and their errors.
func grammarExchanges() []exchange {
	const yesno = `"grammar":"root ::= (\"yes\" | \"no\") \" \" [a-z]+ \".\""`
	const person = `"json_schema":{"type":"object","properties":{"name":{"type":"string","maxLength":6},"age":{"type":"integer"}},"required":["name","age"]}`
	return []exchange{
		{method: "POST", path: "/completion", body: `{"prompt":"Is it","n_predict":16,"temperature":0,` + yesno + `}`},
		{method: "POST", path: "/completion", body: `{"prompt":"Is it","n_predict":16,"seed":42,` + yesno + `}`},
		{method: "POST", path: "/completion", body: `{"prompt":"Is it","n_predict":16,"seed":3,"stream":true,` + yesno + `}`},
		// a grammar that ends: only the end of generation is left
		{method: "POST", path: "/completion", body: `{"prompt":"Is it","n_predict":16,"temperature":0,"grammar":"root ::= \"yes\" | \"no\""}`},
		{method: "POST", path: "/completion", body: `{"prompt":"Tell","n_predict":24,"temperature":0,` + person + `}`},
		{method: "POST", path: "/completion", body: `{"prompt":"Tell","n_predict":24,"seed":11,"stream":true,` + person + `}`},
		{method: "POST", path: "/completion", body: `{"prompt":"Tell","n_predict":8,"temperature":0,"json_schema":{}}`},
		{method: "POST", path: "/completion", body: `{"prompt":"Is it","n_predict":4,"temperature":0,"n_probs":2,` + yesno + `}`},
		{method: "POST", path: "/completion", body: `{"prompt":"Is it","n_predict":4,"temperature":0,"n_probs":2,"post_sampling_probs":true,` + yesno + `}`},
		// json_schema wins over grammar only where grammar is absent
		{method: "POST", path: "/completion", body: `{"prompt":"Tell","n_predict":8,"temperature":0,"json_schema":{"type":"integer"},"grammar":"root ::= [a-c]+"}`},
		// a lazy grammar: free until a trigger word, pattern or full pattern
		{method: "POST", path: "/completion", body: `{"prompt":"Hello world","n_predict":16,"temperature":0,"grammar":"root ::= [0-9]+","grammar_lazy":true,"grammar_triggers":[{"type":1,"value":"zzz"}]}`},
		{method: "POST", path: "/completion", body: `{"prompt":"Hello world","n_predict":16,"temperature":0,"grammar":"root ::= [0-9]+","grammar_lazy":true,"grammar_triggers":[{"type":2,"value":"[a-z]"}]}`},
		{method: "POST", path: "/completion", body: `{"prompt":"Hello world","n_predict":16,"temperature":0,"grammar":"root ::= [0-9]+","grammar_lazy":true,"grammar_triggers":[{"type":3,"value":".*"}]}`},
		// triggers that fire: the grammar takes the text from the trigger on
		{method: "POST", path: "/completion", body: `{"prompt":"Hello world","n_predict":16,"temperature":0,"grammar":"root ::= \"G\" [0-9]+ \".\"","grammar_lazy":true,"grammar_triggers":[{"type":2,"value":"G"}]}`},
		{method: "POST", path: "/completion", body: `{"prompt":"Hello world","n_predict":16,"seed":9,"stream":true,"grammar":"root ::= [^G]* \"G\" [a-z ]+","grammar_lazy":true,"grammar_triggers":[{"type":3,"value":"[\\s\\S]*G"}]}`},
		{method: "POST", path: "/completion", body: `{"prompt":"Hello world","n_predict":8,"temperature":0,"grammar":"root ::= \"G7\" [0-9]+","grammar_lazy":true,"grammar_triggers":[{"type":1,"value":"G7"}],"preserved_tokens":["G"]}`},
		{method: "POST", path: "/v1/completions", body: `{"prompt":"Is it","max_tokens":16,"temperature":0,` + yesno + `}`},
		{method: "POST", path: "/v1/completions", body: `{"prompt":"Tell","max_tokens":16,"seed":5,"stream":true,` + person + `}`},
		// ignore_eos where only the end of generation is allowed
		{method: "POST", path: "/completion", body: `{"prompt":"Is it","n_predict":6,"temperature":0,"ignore_eos":true,"grammar":"root ::= \"yes\""}`},
		{method: "POST", path: "/completion", body: `{"prompt":"Is it","n_predict":6,"seed":1,"ignore_eos":true,"grammar":"root ::= \"yes\""}`},
		// errors
		{method: "POST", path: "/completion", body: `{"prompt":"x","n_predict":4,"temperature":0,"grammar":"root ::= ("}`},
		{method: "POST", path: "/completion", body: `{"prompt":"x","n_predict":4,"temperature":0,"grammar":"foo ::= \"a\""}`},
		{method: "POST", path: "/completion", body: `{"prompt":"x","n_predict":4,"temperature":0,"grammar":"root ::= root \"a\""}`},
		{method: "POST", path: "/completion", body: `{"prompt":"x","n_predict":4,"temperature":0,"stream":true,"grammar":"root ::= ("}`},
		{method: "POST", path: "/v1/completions", body: `{"prompt":"x","max_tokens":4,"grammar":"root ::= x"}`},
		{method: "POST", path: "/completion", body: `{"prompt":"x","n_predict":4,"temperature":0,"json_schema":{"$ref":"#/definitions/nope"}}`},
		{method: "POST", path: "/completion", body: `{"prompt":"x","n_predict":4,"temperature":0,"json_schema":{"type":"string","pattern":"("}}`},
		{method: "POST", path: "/completion", body: `{"prompt":"x","n_predict":4,"temperature":0,"json_schema":"nope"}`},
		{method: "POST", path: "/completion", body: `{"prompt":"x","n_predict":4,"temperature":0,"grammar":"root ::= \"a\"","grammar_lazy":true}`},
		{method: "POST", path: "/completion", body: `{"prompt":"x","n_predict":4,"temperature":0,"grammar":"root ::= \"a\"","grammar_lazy":true,"grammar_triggers":[{"type":1,"value":"<s>"}]}`},
		{method: "POST", path: "/completion", body: `{"prompt":"x","n_predict":4,"temperature":0,"grammar":"root ::= \"a\"","grammar_lazy":true,"grammar_triggers":[{"type":2,"value":"*a"}]}`},
		{method: "POST", path: "/completion", body: `{"prompt":"x","n_predict":4,"temperature":0,"grammar":"root ::= \"a\"","grammar_lazy":true,"grammar_triggers":[{"type":0,"value":"x"}]}`},
	}
}

// chatGrammarExchanges are chat requests with JSON output (response_format
// json_object and json_schema, json_schema itself, a grammar), streamed
// or not, on the chat, responses and messages endpoints.
func chatGrammarExchanges() []exchange {
	msgs := `"messages":[{"role":"user","content":"Tell me about a person."}]`
	const schema = `{"type":"object","properties":{"name":{"type":"string","maxLength":8},"age":{"type":"integer","minimum":0}},"required":["name","age"]}`
	return []exchange{
		{method: "POST", path: "/v1/chat/completions", body: `{` + msgs + `,"max_tokens":16,"temperature":0,"response_format":{"type":"json_object"}}`},
		{method: "POST", path: "/v1/chat/completions", body: `{` + msgs + `,"max_tokens":10,"seed":4,"stream":true,"response_format":{"type":"json_object"}}`},
		{method: "POST", path: "/v1/chat/completions", body: `{` + msgs + `,"max_tokens":16,"temperature":0,"response_format":{"type":"json_schema","json_schema":{"name":"person","schema":` + schema + `}}}`},
		{method: "POST", path: "/v1/chat/completions", body: `{` + msgs + `,"max_tokens":24,"seed":8,"stream":true,"stream_options":{"include_usage":true},"response_format":{"type":"json_schema","json_schema":{"name":"person","schema":` + schema + `}}}`},
		{method: "POST", path: "/v1/chat/completions", body: `{` + msgs + `,"max_tokens":16,"temperature":0,"response_format":{"type":"json_object","schema":{"type":"array","items":{"type":"integer"}}}}`},
		{method: "POST", path: "/v1/chat/completions", body: `{` + msgs + `,"max_tokens":16,"temperature":0,"json_schema":{"type":"integer"}}`},
		{method: "POST", path: "/v1/chat/completions", body: `{` + msgs + `,"max_tokens":16,"temperature":0,"grammar":"root ::= \"yes\" | \"no\""}`},
		{method: "POST", path: "/v1/responses", body: `{"input":"Tell me about a person.","max_output_tokens":16,"temperature":0,"text":{"format":{"type":"json_schema","name":"p","schema":` + schema + `}}}`},
		{method: "POST", path: "/v1/responses", body: `{"input":"Tell me about a person.","max_output_tokens":16,"temperature":0,"stream":true,"text":{"format":{"type":"json_object"}}}`},
		{method: "POST", path: "/v1/messages", body: `{"messages":[{"role":"user","content":"Tell me."}],"max_tokens":12,"temperature":0,"json_schema":` + schema + `}`},
		{method: "POST", path: "/v1/messages", body: `{"messages":[{"role":"user","content":"Tell me."}],"max_tokens":12,"temperature":0,"stream":true,"grammar":"root ::= [a-z]+"}`},
		// errors
		{method: "POST", path: "/v1/chat/completions", body: `{` + msgs + `,"max_tokens":4,"json_schema":{"type":"integer"},"grammar":"root ::= \"a\""}`},
		{method: "POST", path: "/v1/chat/completions", body: `{` + msgs + `,"max_tokens":4,"response_format":{"type":"json_schema","json_schema":{"schema":{"$ref":"#/nope"}}}}`},
		{method: "POST", path: "/v1/chat/completions", body: `{` + msgs + `,"max_tokens":4,"grammar":"root ::= ("}`},
		{method: "POST", path: "/v1/chat/completions", body: `{` + msgs + `,"max_tokens":4,"stream":true,"grammar":"root ::= ("}`},
	}
}

// toolExchanges are chat requests with tools on a template whose
// tool-call grammar is lazy (its trigger the tool call's opening tag):
// the trigger not written, and written (the call parsed); a call asked
// for with tool_choice required, where the grammar is not lazy.
func toolExchanges() []exchange {
	msgs := `"messages":[{"role":"user","content":"What is the weather in Paris?"}]`
	tools := `"tools":[{"type":"function","function":{"name":"get_weather","description":"the weather of a city","parameters":{"type":"object","properties":{"city":{"type":"string","maxLength":8}},"required":["city"]}}}]`
	// the tokens of "<tool_call>\n" biased, each less than the one
	// before, and penalized once they are among the last three tokens, so
	// that the model writes the trigger; the lazy grammar then takes the
	// call from it
	const call = `"logit_bias":{"27":400,"14172":300,"13429":200,"397":100},"presence_penalty":1000,"repeat_last_n":3`
	return []exchange{
		{method: "POST", path: "/apply-template", body: `{` + msgs + `,` + tools + `}`},
		{method: "POST", path: "/v1/chat/completions", body: `{` + msgs + `,` + tools + `,"max_tokens":30,"temperature":0,` + call + `}`},
		{method: "POST", path: "/v1/chat/completions", body: `{` + msgs + `,` + tools + `,"max_tokens":40,"seed":3,"stream":true,` + call + `}`},
		{method: "POST", path: "/v1/messages", body: `{"messages":[{"role":"user","content":"What is the weather in Paris?"}],"tools":[{"name":"get_weather","input_schema":{"type":"object","properties":{"city":{"type":"string","maxLength":8}},"required":["city"]}}],"max_tokens":40,"temperature":0,` + call + `}`},
		{method: "POST", path: "/v1/chat/completions", body: `{` + msgs + `,` + tools + `,"max_tokens":16,"temperature":0}`},
		{method: "POST", path: "/v1/chat/completions", body: `{` + msgs + `,` + tools + `,"max_tokens":16,"seed":2,"stream":true}`},
		{method: "POST", path: "/v1/chat/completions", body: `{` + msgs + `,` + tools + `,"tool_choice":"required","max_tokens":24,"temperature":0}`},
		{method: "POST", path: "/v1/chat/completions", body: `{` + msgs + `,` + tools + `,"tool_choice":"required","max_tokens":40,"seed":6,"stream":true}`},
		{method: "POST", path: "/v1/responses", body: `{"input":"What is the weather in Paris?","tools":[{"type":"function","name":"get_weather","parameters":{"type":"object","properties":{"city":{"type":"string","maxLength":8}},"required":["city"]}}],"tool_choice":"required","max_output_tokens":40,"temperature":0}`},
		{method: "POST", path: "/v1/messages", body: `{"messages":[{"role":"user","content":"What is the weather in Paris?"}],"tools":[{"name":"get_weather","input_schema":{"type":"object","properties":{"city":{"type":"string","maxLength":8}},"required":["city"]}}],"tool_choice":{"type":"any"},"max_tokens":40,"temperature":0}`},
		{method: "POST", path: "/v1/chat/completions", body: `{` + msgs + `,` + tools + `,"max_tokens":4,"grammar":"root ::= \"a\""}`},
	}
}

// Constrained sampling answers as llama-server's, request by request: a
// GBNF grammar, a JSON schema, lazy grammars with their triggers on
// /completion, and the errors of grammars and schemas that do not parse
// or convert; JSON output on the chat endpoints, which this vocabulary
// cannot give (the template's generation prompt tokenizes with a space
// before it, which the pin skips, and the grammar refuses the rest). A
// sample by default; GGLOAD_HTTP_ALL=1 runs every exchange.
func TestGrammarIsLlamaServer(t *testing.T) {
	path := textModel(t, "llama", "llama-spm", 2)
	c := config{nCtx: 1024, nParallel: 2, alias: "tiny", jinja: true, chatTemplateFile: qwenTemplate(t)}
	ours, _ := newServer(t, path, c)
	theirs := startLlama(t, path, c)
	xs := grammarExchanges()
	if !all() {
		xs = pick(xs, 0, 2, 3, 4, 5, 8, 13, 14, 15, 17, 18, 20, 23, 25, 29, 30)
	}
	t.Run("completion", func(t *testing.T) { compareAnswers(t, ours.URL, theirs.URL, xs) })
	t.Run("chat", func(t *testing.T) { compareAnswers(t, ours.URL, theirs.URL, chatGrammarExchanges()[:1]) })
}

// JSON output and tool calls answer as llama-server's on a model with
// Qwen 2.5's vocabulary and chat template: response_format json_object
// and json_schema (greedy and seeded, streamed or not) on the chat,
// responses and messages endpoints; tools offered on a template whose
// tool-call grammar is lazy (the call opens with <tool_call>), the call
// written and parsed; a call asked for with tool_choice required; JSON
// output as the OpenAI Go SDK asks for it and reads it. A
// sample by default (the grammar looks at this vocabulary's 151k tokens
// for each token sampled); GGLOAD_HTTP_ALL=1 runs every exchange.
func TestChatGrammarIsLlamaServer(t *testing.T) {
	path := textModel(t, "llama", "qwen2", 2)
	c := config{nCtx: 1024, nParallel: 2, alias: "tiny", jinja: true, chatTemplateFile: qwenTemplate(t)}
	ours, _ := newServer(t, path, c)
	theirs := startLlama(t, path, c)
	chats, tools := chatGrammarExchanges(), toolExchanges()
	if !all() {
		chats, tools = pick(chats, 1, 2, 6, 11), pick(tools, 1, 6)
	}
	t.Run("chat", func(t *testing.T) { compareAnswers(t, ours.URL, theirs.URL, chats) })
	t.Run("tools", func(t *testing.T) { compareAnswers(t, ours.URL, theirs.URL, tools) })
	t.Run("openai-go", func(t *testing.T) { sameJSONSDK(t, ours.URL, theirs.URL) })
}

// pick are the exchanges at indexes is: a suite's sample.
func pick(xs []exchange, is ...int) []exchange {
	out := make([]exchange, len(is))
	for i, k := range is {
		out[i] = xs[k]
	}
	return out
}

// qwenTemplate is a file holding the pin's Qwen 2.5 chat template.
func qwenTemplate(t *testing.T) string {
	t.Helper()
	src, err := os.ReadFile(filepath.Join(testenv.SourceTree(t), "models", "templates", "Qwen-Qwen2.5-7B-Instruct.jinja"))
	if err != nil {
		t.Fatal(err)
	}
	tmpl := filepath.Join(t.TempDir(), "qwen.jinja")
	if err := os.WriteFile(tmpl, src, 0o644); err != nil {
		t.Fatal(err)
	}
	return tmpl
}

// Requests with grammars, run together on two slots, each answered as
// its grammar says: a grammar that ends stops the generation at its end;
// a JSON schema's text is one its grammar takes; the same request
// without its grammar writes something else; a grammar that does not
// parse is a 400, one the sampled token leaves no way through a 500
// (the pin's "got exception"), and neither stops the server. Runs under
// the race detector too.
func TestGrammarsConcurrently(t *testing.T) {
	path := textModel(t, "llama", "llama-spm", 2)
	srv, _ := newServer(t, path, config{nCtx: 1024, nParallel: 2})
	const schema = `{"type":"object","properties":{"name":{"type":"string","maxLength":6},"age":{"type":"integer"}},"required":["name","age"]}`
	schemaGrammar, err := grammar.FromJSONSchema(mustParse(t, schema), false)
	if err != nil {
		t.Fatal(err)
	}
	type check func(status int, body ojson.Value) error
	content := func(b ojson.Value) string { return b.At("content").Str() }
	cases := []struct {
		body string
		ok   check
	}{
		{`{"prompt":"Is it","n_predict":16,"seed":7,"grammar":"root ::= \"yes\" | \"no\""}`, func(st int, b ojson.Value) error {
			if st != 200 || (content(b) != "yes" && content(b) != "no") || b.At("stop_type").Str() != "eos" {
				return fmt.Errorf("want yes or no, stopped at the end of generation")
			}
			return nil
		}},
		{`{"prompt":"Tell","n_predict":20,"seed":3,"json_schema":` + schema + `}`, func(st int, b ojson.Value) error {
			g, err := grammar.New(nil, schemaGrammar, "root")
			if err != nil {
				return err
			}
			if st != 200 || content(b) == "" {
				return fmt.Errorf("want a text")
			}
			return g.AcceptString(content(b))
		}},
		{`{"prompt":"Is it","n_predict":6,"temperature":0}`, func(st int, b ojson.Value) error {
			if st != 200 || content(b) == "" || strings.HasPrefix(content(b), "yes") || strings.HasPrefix(content(b), "no") {
				return fmt.Errorf("want the model's own text")
			}
			return nil
		}},
		{`{"prompt":"x","n_predict":4,"grammar":"root ::= ("}`, func(st int, b ojson.Value) error {
			if st != 400 || b.At("error").At("message").Str() != "Failed to initialize samplers: failed to parse grammar" {
				return fmt.Errorf("want the pin's 400")
			}
			return nil
		}},
		{`{"prompt":"Is it","n_predict":6,"seed":1,"ignore_eos":true,"grammar":"root ::= \"yes\""}`, func(st int, b ojson.Value) error {
			if st != 500 || !strings.HasPrefix(b.At("error").At("message").Str(), "got exception: Unexpected empty grammar stack after accepting piece: ") {
				return fmt.Errorf("want the pin's 500")
			}
			return nil
		}},
	}
	var wg sync.WaitGroup
	for round := range 2 {
		for i, c := range cases {
			wg.Add(1)
			go func() {
				defer wg.Done()
				resp, err := http.Post(srv.URL+"/completion", "application/json", strings.NewReader(c.body))
				if err != nil {
					t.Error(err)
					return
				}
				defer resp.Body.Close()
				raw, _ := io.ReadAll(resp.Body)
				b, err := ojson.Parse(raw)
				if err == nil {
					err = c.ok(resp.StatusCode, b)
				}
				if err != nil {
					t.Errorf("round %d, case %d %s: %v\n  got %d %.400s", round, i, c.body, err, resp.StatusCode, raw)
				}
			}()
		}
	}
	wg.Wait()
	waitIdle(t, srv.URL, 10*time.Second)
}

func mustParse(t *testing.T, s string) ojson.Value {
	t.Helper()
	v, err := ojson.ParseString(s)
	if err != nil {
		t.Fatal(err)
	}
	return v
}
