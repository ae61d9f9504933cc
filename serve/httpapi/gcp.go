// Port of llama.cpp tools/server/server-http.cpp (register_gcp_compat:
// the Vertex AI prediction protocol) (v0.5.0).

package httpapi

import (
	"bytes"
	"net/http"
	"strings"
	"sync"

	"github.com/ggload/ggload/internal/ojson"
	"github.com/ggload/ggload/serve"
)

// GCP is Google Cloud's Vertex AI prediction protocol (llama-server's
// AIP_MODE=PREDICTION): POST PredictRoute takes {"instances": [...]},
// each naming the endpoint it is for in "@requestFormat" (a path, or its
// camelCase name: "chatCompletions"), and answers {"predictions": [...]}.
type GCP struct {
	// PredictRoute is AIP_PREDICT_ROUTE ("": /predict); HealthRoute is
	// AIP_HEALTH_ROUTE, /health's second path ("": none).
	PredictRoute, HealthRoute string
}

// gcpFormat is path_to_gcp_format: "/v1/chat/completions" ->
// "chatCompletions".
func gcpFormat(path string) string {
	s := strings.TrimPrefix(path, "/v1")
	if len(path) <= 3 {
		s = path
	}
	s = strings.TrimPrefix(s, "/")
	var b strings.Builder
	up := false
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c == ':' {
			break
		}
		if c == '/' || c == '-' || c == '_' {
			up = true
			continue
		}
		if up && c >= 'a' && c <= 'z' {
			c -= 'a' - 'A'
		}
		b.WriteByte(c)
		up = false
	}
	return b.String()
}

// addGCP registers the prediction route (after every other route).
func (h *Handler) addGCP(t map[string]route) {
	g := h.o.GCP
	if g == nil {
		return
	}
	predict := g.PredictRoute
	if predict == "" {
		predict = "/predict"
	}
	aliases := map[string]string{}
	var paths []string
	for k := range t {
		if p, ok := strings.CutPrefix(k, "POST "); ok && !strings.Contains(p, ":") {
			paths = append(paths, p)
		}
	}
	// (the first registration wins a name, as the pin's emplace keeps it)
	for _, p := range paths {
		if _, ok := aliases[gcpFormat(p)]; !ok || len(p) < len(aliases[gcpFormat(p)]) {
			aliases[gcpFormat(p)] = p
		}
	}
	if g.HealthRoute != "" {
		t["GET "+g.HealthRoute] = h.health
	}
	t["POST "+predict] = func(w http.ResponseWriter, r *http.Request, body []byte) error {
		data, err := parseBody(body)
		if err != nil {
			return errf(serve.ErrInvalidRequest, "%s", err.Error())
		}
		if !data.IsObject() {
			return errf(serve.ErrInvalidRequest, "request body must be a JSON object")
		}
		inst, ok := data.Get("instances")
		if !ok || !inst.IsArray() {
			return errf(serve.ErrInvalidRequest, "request body must include an array field named instances")
		}
		if inst.Len() > 128 {
			return errf(serve.ErrInvalidRequest, "instances array exceeds maximum size of 128")
		}
		preds := make([]ojson.Value, inst.Len())
		var wg sync.WaitGroup
		for i, in := range inst.Elems() {
			wg.Add(1)
			go func() {
				defer wg.Done()
				preds[i] = h.gcpInstance(r, t, aliases, in)
			}()
		}
		wg.Wait()
		h.writeJSON(w, http.StatusOK, obj("predictions", ojson.ArrayValue(preds...)))
		return nil
	}
}

// gcpInstance runs one instance through its endpoint's handler.
func (h *Handler) gcpInstance(r *http.Request, t map[string]route, aliases map[string]string, in ojson.Value) ojson.Value {
	fail := func(e *apiError) ojson.Value { return obj("error", errorObject(e)) }
	if !in.IsObject() {
		return fail(errf(serve.ErrInvalidRequest, "each instance must be a JSON object"))
	}
	f, ok := in.Get("@requestFormat")
	if !ok || !f.IsString() {
		return fail(errf(serve.ErrInvalidRequest, "each instance must include a string @requestFormat"))
	}
	payload := in.Clone()
	payload.Delete("@requestFormat")
	if payload.Has("stream") {
		payload.Set("stream", ojson.BoolValue(false))
	}
	path, ok := aliases[f.Str()]
	if !ok {
		if _, ok := t["POST "+f.Str()]; !ok {
			return fail(errf(serve.ErrInvalidRequest, "no handler registered for @requestFormat: %s", f.Str()))
		}
		path = f.Str()
	}
	rec := &recorder{header: http.Header{}}
	req := r.Clone(r.Context())
	req.URL.Path = path
	if err := t["POST "+path](rec, req, []byte(payload.DumpSafe(-1))); err != nil {
		return fail(toAPIError(err))
	}
	if rec.body.Len() == 0 {
		return ojson.NullValue()
	}
	v, err := ojson.Parse(rec.body.Bytes())
	if err != nil {
		return ojson.StringValue(rec.body.String())
	}
	return v
}

// recorder is a ResponseWriter that keeps an answer in memory.
type recorder struct {
	header http.Header
	status int
	body   bytes.Buffer
}

func (r *recorder) Header() http.Header         { return r.header }
func (r *recorder) WriteHeader(status int)      { r.status = status }
func (r *recorder) Write(b []byte) (int, error) { return r.body.Write(b) }
