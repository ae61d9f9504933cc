package ggload_test

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"strings"
	"testing"

	"github.com/ggload/ggload"
	"github.com/ggload/ggload/chat"
	"github.com/ggload/ggload/lab/testenv"
	"github.com/ggload/ggload/place"
	"github.com/ggload/ggload/sample"
	"github.com/ggload/ggload/serve/httpapi"
)

// cpu are the options of every test's model: the CPU alone (-dev none),
// so that the text does not depend on the machine's GPU.
func cpu(o ggload.Options) ggload.Options {
	o.Place.DeviceNames = []string{"none"}
	return o
}

// open opens a model for the test, closed when it ends.
func open(t testing.TB, name string, o ggload.Options) *ggload.Model {
	t.Helper()
	testenv.Runtime(t) // the native set, or the reason it is missing
	m, err := ggload.Open(context.Background(), name, cpu(o))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { m.Close() })
	return m
}

// generate is the text Generate streams.
func generate(t testing.TB, m *ggload.Model, prompt string, g ggload.GenerateOptions) string {
	t.Helper()
	var b strings.Builder
	for piece, err := range m.Generate(context.Background(), prompt, g) {
		if err != nil {
			t.Fatal(err)
		}
		b.WriteString(piece)
	}
	return b.String()
}

// ggloadBinary is the ggload command built from this tree, in the
// test's temporary directory.
func ggloadBinary(t testing.TB) string {
	t.Helper()
	goTool := filepath.Join(runtime.GOROOT(), "bin", "go")
	if _, err := os.Stat(goTool); err != nil {
		if goTool, err = exec.LookPath("go"); err != nil {
			t.Fatalf("no go command to build ggload with: %v", err)
		}
	}
	bin := filepath.Join(t.TempDir(), "ggload")
	cmd := exec.Command(goTool, "build", "-o", bin, "github.com/ggload/ggload/cmd/ggload")
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("building ggload: %v\n%s", err, out)
	}
	return bin
}

// runText is the text `ggload run MODEL -p PROMPT --json ARGS` generates.
func runText(t testing.TB, bin, model, prompt string, args ...string) string {
	t.Helper()
	cmd := exec.Command(bin, append([]string{"run", model, "-p", prompt, "-dev", "none", "--json"}, args...)...)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("ggload run: %v\n%s", err, stderr.String())
	}
	var r struct {
		TextBytes string `json:"text_bytes"`
	}
	if err := json.Unmarshal(out, &r); err != nil {
		t.Fatalf("ggload run --json: %v\n%s", err, out)
	}
	b, err := base64.StdEncoding.DecodeString(r.TextBytes)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// server is llama-server's HTTP API over the model's own engine (what
// ggload serve answers).
func server(t testing.TB, m *ggload.Model, s httpapi.Settings) http.Handler {
	t.Helper()
	mo, err := httpapi.NewModel(m.Engine(), ggload.LoaderModel(m), m.Path(), nil, nil, s)
	if err != nil {
		t.Fatal(err)
	}
	h := httpapi.New(&httpapi.Single{M: mo}, httpapi.Options{})
	h.SetReady()
	return h
}

// post posts the body to the handler and decodes its JSON answer.
func post(t testing.TB, h http.Handler, path string, body any) map[string]any {
	t.Helper()
	b, err := json.Marshal(body)
	if err != nil {
		t.Fatal(err)
	}
	w := httptest.NewRecorder()
	h.ServeHTTP(w, httptest.NewRequest("POST", path, bytes.NewReader(b)))
	if w.Code != http.StatusOK {
		t.Fatalf("POST %s: %d %s", path, w.Code, w.Body)
	}
	var out map[string]any
	if err := json.Unmarshal(w.Body.Bytes(), &out); err != nil {
		t.Fatalf("POST %s: %v\n%s", path, err, w.Body)
	}
	return out
}

// Generate streams the text ggload run gives for the same seed and
// sampling options, byte for byte, and the text llama-server's
// /completion gives on the same engine; another seed gives other text.
func TestGenerateIsRun(t *testing.T) {
	m := open(t, tinyWords, ggload.Options{})
	h := server(t, m, httpapi.Settings{})
	const prompt, n = "the people of the", 24
	cases := []struct {
		name string
		sp   sample.Params
		args []string
		http map[string]any
	}{
		{"seed", sample.Params{Seed: 42}, []string{"-s", "42"}, map[string]any{"seed": 42}},
		{"greedy", sample.Params{Temp: 0, Explicit: sample.SetTemp}, []string{"--temp", "0"}, map[string]any{"temperature": 0}},
		{"penalties", sample.Params{Seed: 7, PenaltyRepeat: 1.3, PenaltyLastN: 16, DryMultiplier: 0.8},
			[]string{"-s", "7", "--repeat-penalty", "1.3", "--repeat-last-n", "16", "--dry-multiplier", "0.8"},
			map[string]any{"seed": 7, "repeat_penalty": 1.3, "repeat_last_n": 16, "dry_multiplier": 0.8}},
	}
	bin := ggloadBinary(t)
	texts := map[string]string{}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got := generate(t, m, prompt, ggload.GenerateOptions{NPredict: n, Sampling: c.sp})
			want := runText(t, bin, tinyWords, prompt, append([]string{"-n", "24"}, c.args...)...)
			if got != want {
				t.Errorf("Generate %q\nggload run %q", got, want)
			}
			body := map[string]any{"prompt": prompt, "n_predict": n}
			for k, v := range c.http {
				body[k] = v
			}
			if srv := post(t, h, "/completion", body)["content"]; srv != got {
				t.Errorf("Generate %q\n/completion %q", got, srv)
			}
			if strings.Count(got, " ") < n/2 {
				t.Errorf("Generate %q: want about %d words", got, n)
			}
			texts[c.name] = got
		})
	}
	// the negative control: another seed, other text
	other := generate(t, m, prompt, ggload.GenerateOptions{NPredict: n, Sampling: sample.Params{Seed: 43}})
	if other == texts["seed"] {
		t.Errorf("seeds 42 and 43 both give %q", other)
	}
}

// Chat renders the conversation as llama-server renders it (the
// template's Apply), answers what /v1/chat/completions answers on the
// same engine, parsed; ChatStream's deltas add up to the same reply.
func TestChatIsServer(t *testing.T) {
	m := open(t, tinyWords, ggload.Options{})
	h := server(t, m, httpapi.Settings{})
	msgs := []chat.Message{{Role: "system", Content: "Be brief."}, {Role: "user", Content: "Where do the people live?"}}
	p, err := m.ChatPrompt(msgs, ggload.ChatOptions{})
	if err != nil {
		t.Fatal(err)
	}
	tm, err := m.Templates()
	if err != nil {
		t.Fatal(err)
	}
	want, err := tm.Apply(&chat.Inputs{Messages: msgs})
	if err != nil {
		t.Fatal(err)
	}
	if p.Prompt != want.Prompt || p.Format != want.Format {
		t.Errorf("ChatPrompt %q (%s), Apply %q (%s)", p.Prompt, p.Format, want.Prompt, want.Format)
	}
	co := ggload.ChatOptions{GenerateOptions: ggload.GenerateOptions{NPredict: 16, Sampling: sample.Params{Seed: 5}}}
	reply, err := m.Chat(context.Background(), msgs, co)
	if err != nil {
		t.Fatal(err)
	}
	body := map[string]any{"messages": []map[string]string{{"role": "system", "content": "Be brief."}, {"role": "user", "content": "Where do the people live?"}},
		"seed": 5, "max_tokens": 16}
	res := post(t, h, "/v1/chat/completions", body)
	srv := res["choices"].([]any)[0].(map[string]any)["message"].(map[string]any)
	if reply.Role != "assistant" || reply.Content != srv["content"] || reply.Content == "" {
		t.Errorf("Chat %+v\n/v1/chat/completions %v", reply, srv)
	}
	// the reply parsed as the template's parser parses the text
	parsed, err := p.Parse(reply.Content, false)
	if err != nil || !parsed.Equal(&reply) {
		t.Errorf("Chat %+v, Parse %+v (%v)", reply, parsed, err)
	}
	var streamed strings.Builder
	for d, err := range m.ChatStream(context.Background(), msgs, co) {
		if err != nil {
			t.Fatal(err)
		}
		streamed.WriteString(d.ContentDelta)
	}
	if streamed.String() != reply.Content {
		t.Errorf("ChatStream %q, Chat %q", streamed.String(), reply.Content)
	}
	// the negative control
	co.Sampling.Seed = 6
	if other, err := m.Chat(context.Background(), msgs, co); err != nil || other.Content == reply.Content {
		t.Errorf("seeds 5 and 6 both give %q (%v)", other.Content, err)
	}
}

// A template that opens the model's reasoning (DeepSeek R1's): the
// reply is reasoning until the model closes it, parsed as llama-server
// parses it, streamed as reasoning deltas.
func TestChatReasoning(t *testing.T) {
	src, err := os.ReadFile(filepath.Join(testenv.SourceTree(t), "models", "templates", "llama-cpp-deepseek-r1.jinja"))
	if err != nil {
		t.Fatal(err)
	}
	m := open(t, tinyWords, ggload.Options{ChatTemplate: string(src)})
	h := server(t, m, httpapi.Settings{Chat: httpapi.ChatSettings{Template: string(src)}})
	msgs := []chat.Message{{Role: "user", Content: "Think of the people."}}
	co := ggload.ChatOptions{GenerateOptions: ggload.GenerateOptions{NPredict: 12, Sampling: sample.Params{Seed: 3}}}
	reply, err := m.Chat(context.Background(), msgs, co)
	if err != nil {
		t.Fatal(err)
	}
	res := post(t, h, "/v1/chat/completions", map[string]any{"messages": []map[string]string{{"role": "user", "content": "Think of the people."}},
		"seed": 3, "max_tokens": 12})
	srv := res["choices"].([]any)[0].(map[string]any)["message"].(map[string]any)
	if reply.ReasoningContent != srv["reasoning_content"] || reply.Content != srv["content"] {
		t.Errorf("Chat %+v\n/v1/chat/completions %v", reply, srv)
	}
	t.Logf("reply %+v", reply)
	var reasoning strings.Builder
	for d, err := range m.ChatStream(context.Background(), msgs, co) {
		if err != nil {
			t.Fatal(err)
		}
		reasoning.WriteString(d.ReasoningContentDelta)
	}
	if reasoning.String() != reply.ReasoningContent {
		t.Errorf("ChatStream's reasoning %q, Chat's %q", reasoning.String(), reply.ReasoningContent)
	}
}

// Embed gives the engine's pooled, normalized embeddings, and
// /v1/embeddings' on the same engine, bit for bit, a text at a time.
// Texts embedded at once are decoded in one batch: their vectors are
// those of the texts alone within the last bits (a batch of several
// sequences takes other kernels), as llama-server's are.
func TestEmbedIsServer(t *testing.T) {
	m := open(t, tinyWords, ggload.Options{Place: place.Params{Context: place.ContextParams{Embeddings: true, Pooling: place.PoolingMean}}})
	h := server(t, m, httpapi.Settings{Embedding: true})
	texts := []string{"the people of the world", "a story", "more big under"}
	alone := make([][]float32, len(texts))
	for i, text := range texts {
		vecs, err := m.Embed(context.Background(), []string{text})
		if err != nil {
			t.Fatal(err)
		}
		alone[i] = vecs[0]
		toks, err := m.Engine().Vocab().Tokenize(text, true, true)
		if err != nil {
			t.Fatal(err)
		}
		e, err := m.Engine().Embed(context.Background(), toks, m.Engine().Defaults())
		if err != nil {
			t.Fatal(err)
		}
		res := post(t, h, "/v1/embeddings", map[string]any{"input": text})
		srv := res["data"].([]any)[0].(map[string]any)["embedding"].([]any)
		if len(vecs[0]) != len(e.Vectors[0]) || len(srv) != len(vecs[0]) || len(srv) == 0 {
			t.Fatalf("text %d: Embed %d dimensions, engine %d, server %d", i, len(vecs[0]), len(e.Vectors[0]), len(srv))
		}
		var norm float64
		for j, x := range vecs[0] {
			if x != e.Vectors[0][j] || x != float32(srv[j].(float64)) {
				t.Fatalf("text %d [%d]: Embed %g, engine %g, server %v", i, j, x, e.Vectors[0][j], srv[j])
			}
			norm += float64(x) * float64(x)
		}
		if norm < 0.999 || norm > 1.001 {
			t.Errorf("text %d: |v|² = %g, want 1", i, norm)
		}
	}
	// the negative control: other texts, other vectors
	if alone[0][0] == alone[1][0] && alone[0][1] == alone[1][1] {
		t.Errorf("texts 0 and 1 give the same embedding")
	}
	// at once: in order, each the text's own
	vecs, err := m.Embed(context.Background(), texts)
	if err != nil {
		t.Fatal(err)
	}
	cos := func(a, b []float32) float64 {
		var dot float64
		for j := range a {
			dot += float64(a[j]) * float64(b[j])
		}
		return dot
	}
	for i := range texts {
		if c := cos(vecs[i], alone[i]); c < 0.9999 {
			t.Errorf("text %d at once: cosine %g with its vector alone", i, c)
		}
	}
	if c := cos(alone[0], alone[1]); c >= 0.9999 {
		t.Errorf("texts 0 and 1: cosine %g: the check above tells nothing", c)
	}
}

// A grammar constrains Generate's and Chat's text as it constrains ggload
// run's and llama-server's: the same text, byte for byte, of the
// grammar's words alone (and without the grammar, other words too).
func TestGrammarIsRunAndServer(t *testing.T) {
	m := open(t, tinyWords, ggload.Options{})
	h := server(t, m, httpapi.Settings{})
	const prompt, n = "the people of the", 12
	const gbnf = `root ::= ("the" | " the" | " people" | " of" | " time")+`
	// the grammar's words, the last one perhaps cut by -n
	only := regexp.MustCompile(`^( ?(the|people|of|time))*( ?(t|th|p|pe|peo|peop|peopl|o|ti|tim))?$`)
	sp := sample.Params{Seed: 3, Grammar: gbnf}
	got := generate(t, m, prompt, ggload.GenerateOptions{NPredict: n, Sampling: sp})
	if !only.MatchString(got) {
		t.Errorf("Generate under the grammar: %q", got)
	}
	if want := runText(t, ggloadBinary(t), tinyWords, prompt, "-n", "12", "-s", "3", "--grammar", gbnf); got != want {
		t.Errorf("Generate %q\nggload run %q", got, want)
	}
	if srv := post(t, h, "/completion", map[string]any{"prompt": prompt, "n_predict": n, "seed": 3, "grammar": gbnf})["content"]; srv != got {
		t.Errorf("Generate %q\n/completion %q", got, srv)
	}
	if free := generate(t, m, prompt, ggload.GenerateOptions{NPredict: n, Sampling: sample.Params{Seed: 3}}); only.MatchString(free) {
		t.Errorf("without the grammar, the text is of its words too: %q", free)
	}
	msgs := []chat.Message{{Role: "user", Content: "Where do the people live?"}}
	reply, err := m.Chat(context.Background(), msgs, ggload.ChatOptions{GenerateOptions: ggload.GenerateOptions{NPredict: n, Sampling: sp}})
	if err != nil {
		t.Fatal(err)
	}
	res := post(t, h, "/v1/chat/completions", map[string]any{"messages": []map[string]string{{"role": "user", "content": "Where do the people live?"}},
		"seed": 3, "max_tokens": n, "grammar": gbnf})
	srv := res["choices"].([]any)[0].(map[string]any)["message"].(map[string]any)
	if reply.Content != srv["content"] || !only.MatchString(reply.Content) {
		t.Errorf("Chat %q\n/v1/chat/completions %q", reply.Content, srv["content"])
	}
}
