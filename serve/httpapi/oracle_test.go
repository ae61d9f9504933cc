package httpapi_test

import (
	"bytes"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/ggload/ggload/internal/ojson"
	"github.com/ggload/ggload/place"
)

// exchange is one request to both servers.
type exchange struct {
	method, path, body string
	header             map[string]string
}

// answer is a server's answer as the comparison reads it: the status,
// the headers that matter, and the body normalized (the fields that vary
// from run to run masked: times, ids, the build).
type answer struct {
	status int
	ctype  string
	body   string
}

// volatile are the fields whose values differ between two runs of the
// same server: wall-clock times, random ids, the build's name.
var volatile = map[string]bool{
	"created": true, "id": true, "system_fingerprint": true, "build_info": true, "media_marker": true,
	"prompt_ms": true, "prompt_per_token_ms": true, "prompt_per_second": true, "predicted_ms": true,
	"predicted_per_token_ms": true, "predicted_per_second": true, "time_ms": true, "save_ms": true, "restore_ms": true,
	"created_at": true, "completed_at": true, "item_id": true, "call_id": true,
	// (the engine's own count of tasks: llama-server counts its cancels
	// and other internal tasks too)
	"id_task": true,
}

// alsoMasked are more fields a comparison masks (the text of the n>1
// exchanges).
var alsoMasked = map[string]bool{}

func mask(v ojson.Value) ojson.Value {
	switch {
	case v.IsObject():
		out := ojson.ObjectValue()
		for _, m := range v.Members() {
			if volatile[m.Key] || alsoMasked[m.Key] {
				out.Set(m.Key, ojson.StringValue("<masked>"))
				continue
			}
			out.Set(m.Key, mask(m.Value))
		}
		return out
	case v.IsArray():
		out := ojson.ArrayValue()
		for _, e := range v.Elems() {
			out.Append(mask(e))
		}
		return out
	}
	return v
}

// normalize masks a body: JSON, or server-sent events of JSON.
func normalize(ctype string, body []byte) string {
	if strings.HasPrefix(ctype, "text/event-stream") {
		var b strings.Builder
		for _, ev := range strings.Split(string(body), "\n\n") {
			for _, line := range strings.Split(ev, "\n") {
				if d, ok := strings.CutPrefix(line, "data: "); ok && d != "[DONE]" {
					v, err := ojson.ParseString(d)
					if err == nil {
						line = "data: " + mask(v).DumpSafe(-1)
					}
				}
				b.WriteString(line + "\n")
			}
			b.WriteString("\n")
		}
		return b.String()
	}
	v, err := ojson.Parse(body)
	if err != nil {
		return string(body)
	}
	return mask(v).DumpSafe(-1)
}

// oneShot is a client that opens a connection for each request:
// llama-server (cpp-httplib) closes a connection idle for five seconds,
// and a request sent on it as it closes gets no answer (Go does not send
// a POST again), which a slow request to the other server can bring
// about.
var oneShot = &http.Client{Transport: &http.Transport{DisableKeepAlives: true}}

func do(t testing.TB, base string, x exchange) answer {
	t.Helper()
	var rd io.Reader
	if x.body != "" {
		rd = strings.NewReader(x.body)
	}
	req, err := http.NewRequest(x.method, base+x.path, rd)
	if err != nil {
		t.Fatal(err)
	}
	for k, v := range x.header {
		req.Header.Set(k, v)
	}
	resp, err := oneShot.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	ct := resp.Header.Get("Content-Type")
	return answer{resp.StatusCode, ct, normalize(ct, b)}
}

// compareAnswers asks both servers each request, in order, and holds
// ggload's answers to llama-server's.
func compareAnswers(t *testing.T, ours, theirs string, xs []exchange) {
	t.Helper()
	for _, x := range xs {
		w := do(t, theirs, x)
		g := do(t, ours, x)
		what := fmt.Sprintf("%s %s %s", x.method, x.path, x.body)
		if g.status != w.status || g.ctype != w.ctype {
			t.Errorf("%s: status %d %q, llama-server %d %q\n  ours:   %.600s\n  theirs: %.600s", what, g.status, g.ctype, w.status, w.ctype, g.body, w.body)
			continue
		}
		if g.body != w.body {
			i := 0
			for i < len(g.body) && i < len(w.body) && g.body[i] == w.body[i] {
				i++
			}
			t.Errorf("%s: bodies differ from byte %d\n  ours:   ...%.300s\n  theirs: ...%.300s", what, i, g.body[max(0, i-80):], w.body[max(0, i-80):])
		}
	}
}

// The native and OpenAI completion endpoints answer as llama-server
// answers, request by request: greedy and seeded, streamed or not, with
// n_probs, stop strings, several prompts, n > 1, their errors.
func completionExchanges() []exchange {
	return []exchange{
		{method: "POST", path: "/completion", body: `{"prompt":"Hello world","n_predict":8,"temperature":0}`},
		{method: "POST", path: "/completion", body: `{"prompt":"Hello world","n_predict":8,"seed":42,"return_tokens":true}`},
		{method: "POST", path: "/completion", body: `{"prompt":"Once upon","n_predict":6,"seed":7,"stream":true}`},
		{method: "POST", path: "/completion", body: `{"prompt":"Once upon","n_predict":4,"temperature":0,"n_probs":3}`},
		{method: "POST", path: "/completion", body: `{"prompt":"Once upon","n_predict":4,"temperature":0,"n_probs":2,"post_sampling_probs":true,"stream":true}`},
		{method: "POST", path: "/completion", body: `{"prompt":"abc","n_predict":12,"temperature":0,"stop":["d"," "]}`},
		{method: "POST", path: "/completion", body: `{"prompt":["one","two"],"n_predict":3,"temperature":0}`},
		{method: "POST", path: "/completion", body: `{"prompt":[1, 15043, 3186],"n_predict":3,"temperature":0,"id_slot":1}`},
		{method: "POST", path: "/completion", body: `{"prompt":"x","n_predict":3,"temperature":0,"response_fields":["content","generation_settings/n_predict","nope"]}`},
		{method: "POST", path: "/v1/completions", body: `{"prompt":"Hello","max_tokens":5,"temperature":0}`},
		{method: "POST", path: "/v1/completions", body: `{"prompt":"Hello","max_tokens":5,"seed":3,"stream":true}`},
		{method: "POST", path: "/v1/completions", body: `{"prompt":"Hello","max_tokens":3,"temperature":0,"logprobs":2}`},
		// errors
		{method: "POST", path: "/completion", body: `{"prompt":"x","n_predict":"a"}`},
		{method: "POST", path: "/completion", body: `{"prompt":"x","n_predict":-5}`},
		{method: "POST", path: "/completion", body: `{"n_predict":1}`},
		{method: "POST", path: "/completion", body: `{"prompt":"x",`},
		{method: "POST", path: "/completion", body: `[1,2]`},
		{method: "POST", path: "/completion", body: `{"prompt":{"a":1}}`},
		{method: "POST", path: "/completion", body: `{"prompt":"x","n":9}`},
		{method: "POST", path: "/completion", body: `{"prompt":"x","dry_sequence_breakers":[]}`},
		{method: "GET", path: "/nope"},
		{method: "GET", path: "/completion"},
	}
}

// The other native endpoints answer as llama-server answers.
func nativeExchanges() []exchange {
	return []exchange{
		{method: "GET", path: "/health"},
		{method: "GET", path: "/v1/health"},
		{method: "GET", path: "/props"},
		{method: "POST", path: "/props", body: `{}`},
		{method: "GET", path: "/metrics"},
		{method: "POST", path: "/tokenize", body: `{"content":"Hello world <s>"}`},
		{method: "POST", path: "/tokenize", body: `{"content":"Hello world <s>","add_special":true,"with_pieces":true}`},
		{method: "POST", path: "/tokenize", body: `{"content":"héllo 🙂","with_pieces":true,"parse_special":false}`},
		{method: "POST", path: "/tokenize", body: `{"content":["a",15043,"b"]}`},
		{method: "POST", path: "/tokenize", body: `{}`},
		{method: "POST", path: "/detokenize", body: `{"tokens":[15043,3186,29871]}`},
		{method: "POST", path: "/detokenize", body: `{"tokens":"x"}`},
		{method: "POST", path: "/completion", body: `{"prompt":"Hello world","n_predict":4,"temperature":0}`},
		{method: "GET", path: "/slots"},
		{method: "POST", path: "/slots/0?action=save", body: `{"filename":"s0.bin"}`},
		{method: "POST", path: "/slots/0?action=save", body: `{"filename":"../s0.bin"}`},
		{method: "POST", path: "/slots/1?action=erase"},
		{method: "POST", path: "/slots/x?action=erase"},
		{method: "POST", path: "/slots/0?action=nope"},
		{method: "POST", path: "/embedding", body: `{"content":"x"}`},
		{method: "POST", path: "/rerank", body: `{"query":"x","documents":["a"]}`},
		{method: "POST", path: "/infill", body: `{"input_prefix":"a","input_suffix":"b"}`},
		{method: "GET", path: "/lora-adapters"},
		{method: "POST", path: "/lora-adapters", body: `[{"id":0,"scale":0.5}]`},
		{method: "OPTIONS", path: "/completion", header: map[string]string{"Origin": "http://example.test"}},
	}
}

// The text model's endpoints answer as llama-server answers, request by
// request: completions (native and OpenAI's), the other native endpoints,
// chat with llama.cpp's built-in templates (--no-jinja), and what the
// OpenAI Go SDK reads of completions.
func TestTextModelIsLlamaServer(t *testing.T) {
	path := textModel(t, "llama", "llama-spm", 2)
	c := config{nCtx: 1024, nParallel: 2, slotSavePath: t.TempDir() + "/", alias: "tiny"}
	ours, _ := newServer(t, path, c)
	theirs := startLlama(t, path, c)
	t.Run("completions", func(t *testing.T) { compareAnswers(t, ours.URL, theirs.URL, completionExchanges()) })
	t.Run("native", func(t *testing.T) { compareAnswers(t, ours.URL, theirs.URL, nativeExchanges()) })
	t.Run("chat", func(t *testing.T) { compareAnswers(t, ours.URL, theirs.URL, chatExchanges()) })
	t.Run("openai-go", func(t *testing.T) { sameCompletionsSDK(t, ours.URL, theirs.URL) })
	t.Run("n", func(t *testing.T) { compareN(t, ours.URL, theirs.URL) })
}

func compareN(t *testing.T, ours, theirs string) {
	alsoMasked = map[string]bool{"content": true, "text": true}
	defer func() { alsoMasked = map[string]bool{} }()
	compareAnswers(t, ours, theirs, nExchanges())
}

// nExchanges ask for several completions of a prompt (n): run last,
// since the pin's other completions share the first one's cells of the
// KV cache (copy_state_to), where ggload's engine processes each prompt
// in cells of its own, and the cells a later prompt takes then differ;
// their texts are not compared (the prompts decoded together in one
// batch give other logits than one prompt copied).
func nExchanges() []exchange {
	msgs := `"messages":[{"role":"system","content":"Be brief."},{"role":"user","content":"Hello there"}]`
	return []exchange{
		{method: "POST", path: "/v1/completions", body: `{"prompt":"Hello","max_tokens":3,"temperature":0,"n":2}`},
		{method: "POST", path: "/v1/chat/completions", body: `{` + msgs + `,"max_tokens":4,"temperature":0,"n":2}`},
	}
}

// With llama.cpp's Jinja engine, chat answers as llama-server's, and the
// OpenAI and Anthropic Go SDKs and the npm openai client read the same
// replies of both.
func TestJinjaChatIsLlamaServer(t *testing.T) {
	path := textModel(t, "llama", "llama-spm", 2)
	c := config{nCtx: 1024, nParallel: 2, alias: "tiny", jinja: true}
	ours, _ := newServer(t, path, c)
	theirs := startLlama(t, path, c)
	t.Run("chat", func(t *testing.T) { compareAnswers(t, ours.URL, theirs.URL, chatExchanges()) })
	t.Run("sdks", func(t *testing.T) { sameChatSDKs(t, ours.URL, theirs.URL) })
	t.Run("node", func(t *testing.T) { sameNodeClient(t, ours.URL, theirs.URL, "chat") })
	t.Run("n", func(t *testing.T) { compareN(t, ours.URL, theirs.URL) })
}

// Embeddings and rank scores answer as llama-server's, float for float,
// and the OpenAI Go SDK and the npm openai client read the same vectors
// of both.
func TestEmbeddingsAreLlamaServer(t *testing.T) {
	path := textModel(t, "bert", "bert-bge", 2)
	configs := []config{{nCtx: 512, nParallel: 2, nBatch: 128, embedding: true, pooling: place.PoolingMean, alias: "tiny"}, {nCtx: 512, nParallel: 1, nBatch: 512, rerank: true}}
	if all() {
		configs = append(configs, config{nCtx: 512, nParallel: 2, nBatch: 128, embedding: true})
	}
	for _, c := range configs {
		ours, _ := newServer(t, path, c)
		theirs := startLlama(t, path, c)
		var xs []exchange
		if c.rerank {
			xs = []exchange{
				{method: "POST", path: "/rerank", body: `{"query":"a cat","documents":["a dog","a cat sat","hello"]}`},
				{method: "POST", path: "/v1/rerank", body: `{"query":"a cat","documents":["a dog","a cat sat","hello"],"top_n":2}`},
				{method: "POST", path: "/rerank", body: `{"query":"a cat","texts":["a dog","hello"],"return_text":true}`},
				{method: "POST", path: "/rerank", body: `{"documents":["a"]}`},
				{method: "POST", path: "/rerank", body: `{"query":1,"documents":["a"]}`},
				{method: "POST", path: "/rerank", body: `{"query":"q","documents":[]}`},
			}
		} else {
			xs = []exchange{
				{method: "POST", path: "/embedding", body: `{"content":"hello world"}`},
				{method: "POST", path: "/embeddings", body: `{"content":["hello","world"],"embd_normalize":-1}`},
				{method: "POST", path: "/v1/embeddings", body: `{"input":"hello world","model":"m"}`},
				{method: "POST", path: "/v1/embeddings", body: `{"input":["hello","world"],"encoding_format":"base64"}`},
				{method: "POST", path: "/v1/embeddings", body: `{"input":"x","encoding_format":"hex"}`},
				{method: "POST", path: "/v1/embeddings", body: `{"nope":1}`},
				{method: "POST", path: "/v1/embeddings", body: `{"input":null}`},
				{method: "POST", path: "/completion", body: `{"prompt":"x","n_predict":1}`},
			}
		}
		compareAnswers(t, ours.URL, theirs.URL, xs)
		if c.pooling == place.PoolingMean {
			t.Run("openai-go", func(t *testing.T) { sameEmbeddingsSDK(t, ours.URL, theirs.URL) })
			t.Run("node", func(t *testing.T) { sameNodeClient(t, ours.URL, theirs.URL, "embeddings") })
		}
	}
}

// An API key is asked of every endpoint but /health, in either header,
// as llama-server asks it.
func TestAPIKeyIsLlamaServers(t *testing.T) {
	path := textModel(t, "llama", "llama-spm", 2)
	c := config{nCtx: 512, nParallel: 1, apiKeys: []string{"k1", "k2"}}
	ours, _ := newServer(t, path, c)
	theirs := startLlama(t, path, c)
	xs := []exchange{
		{method: "GET", path: "/health"},
		{method: "GET", path: "/props"},
		{method: "GET", path: "/props", header: map[string]string{"Authorization": "Bearer k2"}},
		{method: "GET", path: "/props", header: map[string]string{"Authorization": "Bearer k3"}},
		{method: "GET", path: "/props", header: map[string]string{"X-Api-Key": "k1"}},
		{method: "GET", path: "/props", header: map[string]string{"Authorization": "k1"}},
		{method: "POST", path: "/tokenize", body: `{"content":"a"}`, header: map[string]string{"Authorization": "Bearer k1x"}},
	}
	compareAnswers(t, ours.URL, theirs.URL, xs)
}

var _ = bytes.NewReader

// chatExchanges are the chat endpoints' requests (OpenAI's chat
// completions and responses, Anthropic's messages, the template and the
// token counts): greedy and seeded, streamed or not, and their errors.
func chatExchanges() []exchange {
	msgs := `"messages":[{"role":"system","content":"Be brief."},{"role":"user","content":"Hello there"}]`
	return []exchange{
		{method: "GET", path: "/props"},
		{method: "POST", path: "/apply-template", body: `{` + msgs + `}`},
		{method: "POST", path: "/v1/chat/completions", body: `{` + msgs + `,"max_tokens":8,"temperature":0}`},
		{method: "POST", path: "/v1/chat/completions", body: `{` + msgs + `,"max_tokens":8,"seed":5}`},
		{method: "POST", path: "/v1/chat/completions", body: `{` + msgs + `,"max_tokens":6,"seed":9,"stream":true,"stream_options":{"include_usage":true}}`},
		{method: "POST", path: "/v1/chat/completions", body: `{` + msgs + `,"max_tokens":4,"temperature":0,"logprobs":true,"top_logprobs":2}`},
		{method: "POST", path: "/v1/chat/completions", body: `{"messages":[{"role":"user","content":"Hi"},{"role":"assistant","content":"Well"}],"max_tokens":4,"temperature":0}`},
		{method: "POST", path: "/v1/chat/completions/input_tokens", body: `{` + msgs + `}`},
		{method: "POST", path: "/v1/messages", body: `{"system":"Be brief.","messages":[{"role":"user","content":"Hello"}],"max_tokens":6,"temperature":0}`},
		{method: "POST", path: "/v1/messages", body: `{"messages":[{"role":"user","content":[{"type":"text","text":"Hello"}]}],"max_tokens":6,"temperature":0,"stream":true}`},
		{method: "POST", path: "/v1/messages/count_tokens", body: `{"messages":[{"role":"user","content":"Hello"}]}`},
		{method: "POST", path: "/v1/responses", body: `{"input":"Hello","instructions":"Be brief.","max_output_tokens":6,"temperature":0}`},
		{method: "POST", path: "/v1/responses", body: `{"input":[{"role":"user","content":"Hello"}],"max_output_tokens":6,"temperature":0,"stream":true}`},
		{method: "POST", path: "/v1/responses/input_tokens", body: `{"input":"Hello"}`},
		// JSON output (the grammar of the schema, which the legacy
		// templates convert themselves)
		{method: "POST", path: "/v1/chat/completions", body: `{` + msgs + `,"max_tokens":6,"temperature":0,"response_format":{"type":"json_object","schema":{"type":"integer"}}}`},
		{method: "POST", path: "/v1/chat/completions", body: `{` + msgs + `,"max_tokens":6,"seed":2,"stream":true,"response_format":{"type":"json_schema","json_schema":{"schema":{"type":"array","items":{"type":"integer"}}}}}`},
		{method: "POST", path: "/v1/chat/completions", body: `{` + msgs + `,"max_tokens":0,"temperature":0,"response_format":{"type":"json_object","schema":123}}`},
		{method: "POST", path: "/v1/chat/completions", body: `{` + msgs + `,"max_tokens":0,"temperature":0,"response_format":{"type":"json_object","schema":{"type":"hiccup"}}}`},
		// errors
		{method: "POST", path: "/v1/chat/completions", body: `{"max_tokens":4}`},
		{method: "POST", path: "/v1/chat/completions", body: `{"messages":"x"}`},
		{method: "POST", path: "/v1/chat/completions", body: `{"messages":[{"content":"x"}]}`},
		{method: "POST", path: "/v1/chat/completions", body: `{"messages":[{"role":"user"}]}`},
		{method: "POST", path: "/v1/chat/completions", body: `{` + msgs + `,"response_format":{"type":"yaml"}}`},
		{method: "POST", path: "/v1/chat/completions", body: `{` + msgs + `,"top_logprobs":2}`},
		{method: "POST", path: "/v1/chat/completions", body: `{` + msgs + `,"tools":[{"type":"function","function":{"name":"f","parameters":{"type":"object"}}}],"tool_choice":"none","max_tokens":4,"temperature":0}`},
		{method: "POST", path: "/v1/chat/completions", body: `{"messages":[{"role":"user","content":"a"},{"role":"assistant","content":"b"},{"role":"assistant","content":"c"}]}`},
		{method: "POST", path: "/v1/responses", body: `{"instructions":"x"}`},
		{method: "POST", path: "/v1/responses", body: `{"input":5}`},
		{method: "POST", path: "/v1/messages", body: `{"max_tokens":4}`},
	}
}
