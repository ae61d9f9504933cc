package httpapi_test

import (
	"bytes"
	"context"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	"github.com/ggload/ggload/internal/ojson"
	"github.com/ggload/ggload/place"
	"github.com/ggload/ggload/serve"
	"github.com/ggload/ggload/serve/httpapi"
)

// fuzzPaths are the endpoints whose bodies the fuzzer writes.
var fuzzPaths = []string{
	"/completion", "/v1/completions", "/infill", "/embedding", "/v1/embeddings", "/rerank", "/tokenize", "/detokenize",
	"/slots/0?action=save", "/slots/0?action=restore", "/slots/0?action=erase", "/props", "/lora-adapters",
	"/v1/chat/completions", "/v1/responses", "/v1/messages", "/v1/messages/count_tokens", "/apply-template",
	"/models/load", "/models/unload",
}

// panicWatch is a log handler that records the handler's panics.
type panicWatch struct {
	mu     sync.Mutex
	panics []string
}

func (p *panicWatch) Enabled(context.Context, slog.Level) bool { return true }
func (p *panicWatch) Handle(_ context.Context, r slog.Record) error {
	if strings.Contains(r.Message, "panicked") {
		p.mu.Lock()
		r.Attrs(func(a slog.Attr) bool {
			p.panics = append(p.panics, a.String())
			return true
		})
		p.mu.Unlock()
	}
	return nil
}
func (p *panicWatch) WithAttrs([]slog.Attr) slog.Handler { return p }
func (p *panicWatch) WithGroup(string) slog.Handler      { return p }

// Every endpoint's reading of its body holds whatever it is given: no
// panic, and an answer of 200, or of 4xx or 5xx in llama-server's error
// shape ({"error": {"code", "message", "type"}}, with the status as its
// code).
func FuzzEndpoints(f *testing.F) {
	seeds := []string{
		`{"prompt":"Hello","n_predict":4}`, `{"prompt":[1,2,"x"],"n_predict":2,"stream":true}`, `{"prompt":"x","n_probs":3,"n_predict":2}`,
		`{"prompt":"x","logit_bias":{"12":false,"a":-1},"n_predict":1}`, `{"prompt":"x","samplers":"kpt","n_predict":1}`,
		`{"prompt":{"prompt_string":"a"},"n_predict":1}`, `{"input_prefix":"a","input_suffix":"b","input_extra":[{"text":"c"}]}`,
		`{"content":"hello","with_pieces":true}`, `{"tokens":[1,2,3]}`, `{"tokens":[-1]}`, `{"filename":"x.bin"}`, `{"filename":"../x"}`,
		`{"input":["a","b"],"encoding_format":"base64"}`, `{"query":"a","documents":["b"]}`, `[{"id":0,"scale":1}]`,
		`{"messages":[{"role":"user","content":"hi"}]}`, `{"prompt":"x","n_predict":1e400}`, `{"prompt":"x","seed":-1.5,"n_predict":1}`,
		`{"prompt":"x","stop":[null,[],"",1],"n_predict":1}`, `{"prompt":"x","grammar_triggers":[{"type":1,"value":"a"}],"n_predict":1}`,
		`{"prompt":"x","response_fields":["a/b"],"n_predict":1}`, `nul\x00`, `{"prompt":"\xff\xfe","n_predict":1}`, `{`, ``, `[]`, `"x"`, `null`,
		`{"model":"m"}`, `{"prompt":"x","n":2,"n_predict":1}`, `{"prompt":"x","dry_sequence_breakers":["a"],"dry_multiplier":1,"n_predict":2}`,
		`{"prompt":"x","grammar":"root ::= [a-z]+ | \"(\" root","n_predict":3}`, `{"prompt":"x","grammar":"root ::= (","n_predict":1}`,
		`{"prompt":"x","json_schema":{"type":"array","items":{"$ref":"#"}},"n_predict":3}`, `{"prompt":"x","json_schema":{"pattern":"(a"},"n_predict":1}`,
		`{"prompt":"x","grammar":"root ::= \"a\"","grammar_lazy":true,"grammar_triggers":[{"type":3,"value":"(?=x)"}],"n_predict":2}`,
		`{"messages":[{"role":"user","content":"hi"}],"response_format":{"type":"json_schema","json_schema":{"schema":{"enum":[1,"a"]}}},"max_tokens":2}`,
	}
	for i, s := range seeds {
		f.Add(uint8(i), []byte(s))
	}
	// the handlers the fuzzer asks: a text model's (with slot files) and
	// an embedding model's
	watch := &panicWatch{}
	o := httpapi.Options{Logger: slog.New(watch)}
	// (a small default n_predict and context: an input that asks for no
	// limit ends soon)
	short := serve.Params{NPredict: 8}
	_, h1 := newServer(f, textModel(f, "llama", "llama-spm", 2), config{nCtx: 128, nParallel: 2, slotSavePath: f.TempDir() + "/", http: o, params: short})
	_, h2 := newServer(f, textModel(f, "bert", "bert-bge", 2), config{nCtx: 256, nParallel: 2, nBatch: 256, embedding: true, pooling: place.PoolingMean, http: o})
	hs := []*httpapi.Handler{h1, h2}
	f.Fuzz(func(t *testing.T, which uint8, body []byte) {
		h := hs[int(which)%len(hs)]
		path := fuzzPaths[int(which/2)%len(fuzzPaths)]
		askFuzzed(t, h, watch, path, body)
	})
}

// askFuzzed posts body to path and holds the answer to llama-server's
// shapes: no panic, 200, or 4xx and 5xx with llama-server's error object.
func askFuzzed(t *testing.T, h http.Handler, watch *panicWatch, path string, body []byte) {
	t.Helper()
	rec := httptest.NewRecorder()
	req := httptest.NewRequest(http.MethodPost, path, bytes.NewReader(body))
	h.ServeHTTP(rec, req)
	watch.mu.Lock()
	panics := watch.panics
	watch.panics = nil
	watch.mu.Unlock()
	if len(panics) > 0 {
		t.Fatalf("POST %s %q panicked: %v", path, body, panics)
	}
	code := rec.Code
	switch {
	case code == 200:
		return
	case code < 400 || code > 599:
		t.Fatalf("POST %s %q: status %d", path, body, code)
	}
	v, err := ojson.Parse(rec.Body.Bytes())
	if err != nil {
		t.Fatalf("POST %s %q: %d with a body that is not JSON: %q", path, body, code, rec.Body.String())
	}
	e := v.At("error")
	if !e.At("message").IsString() || !e.At("type").IsString() || e.At("code").Int() != int64(code) {
		t.Fatalf("POST %s %q: %d with %s", path, body, code, rec.Body.String())
	}
}

// The router's reading of its requests holds whatever it is given, as
// FuzzEndpoints holds one model's: its own routes, and the model's
// routes through the name a body gives.
func FuzzRouter(f *testing.F) {
	paths := []string{"/models/load", "/models/unload", "/completion", "/v1/chat/completions", "/tokenize", "/completion?autoload=false", "/props"}
	for i, s := range []string{`{"model":"alpha","prompt":"x","n_predict":1}`, `{"model":"beta","content":"x"}`, `{"model":"../outside"}`,
		`{"model":["alpha"]}`, `{"model":null}`, `{"model":"alpha","messages":[{"role":"user","content":"x"}],"max_tokens":1}`, `{`, ``, `[]`,
		`{"model":"alpha\u0000"}`, `{"model":"alpha","prompt":"x","n_predict":1,"stream":true}`} {
		f.Add(uint8(i), []byte(s))
	}
	watch := &panicWatch{}
	dir, _ := routerDir(f)
	srv, _ := newRouter(f, dir, routerConfig{nPredict: 8, logger: slog.New(watch)})
	h := srv.Config.Handler
	f.Fuzz(func(t *testing.T, which uint8, body []byte) {
		askFuzzed(t, h, watch, paths[int(which)%len(paths)], body)
	})
}
