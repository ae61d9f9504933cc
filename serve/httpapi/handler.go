// Port of llama.cpp tools/server/server-http.cpp (the middlewares, the
// routing and the error handler) and tools/server/server.cpp (the routes)
// (v0.5.0).

package httpapi

import (
	"context"
	"crypto/sha256"
	"crypto/subtle"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"net/url"
	"strings"
	"sync/atomic"
	"time"

	"github.com/ggload/ggload/internal/ojson"
	"github.com/ggload/ggload/serve"
)

// Options are the server's HTTP options (common_params' server part):
// the zero value is llama-server's defaults.
type Options struct {
	// APIKeys are --api-key and --api-key-file's keys: a request other
	// than /health must carry one (Authorization: Bearer KEY, or
	// X-Api-Key). None: no check.
	APIKeys []string
	// CORSOrigins is --cors-origins ("": "*"; "localhost": the Origin
	// header reflected only when it is a local host).
	CORSOrigins string
	// CORSMethods and CORSHeaders are --cors-methods and --cors-headers
	// ("": "GET, POST, DELETE, OPTIONS" and "*").
	CORSMethods, CORSHeaders string
	// NoCORSCredentials is --no-cors-credentials.
	NoCORSCredentials bool
	// APIPrefix is --api-prefix, the path the endpoints are under.
	APIPrefix string
	// Metrics is --metrics (GET /metrics), Props is --props (POST
	// /props), NoSlots is --no-slots (GET /slots refused).
	Metrics, Props, NoSlots bool
	// MaxBodyBytes bounds a request's body; 0: 100 MiB, as cpp-httplib
	// bounds it (413 past it).
	MaxBodyBytes int64
	// WriteTimeout bounds each write of an answer (--timeout); 0: 3600 s.
	WriteTimeout time.Duration
	// Logger gets the server's warnings; nil: slog's default.
	Logger *slog.Logger
	// BuildInfo is what answers name as system_fingerprint and
	// build_info; "": ggload's.
	BuildInfo string
	// GCP, if set, adds Vertex AI's prediction route.
	GCP *GCP
}

// Handler is llama-server's HTTP API over a model or a pool: an
// http.Handler a program mounts in its own mux.
type Handler struct {
	models Models
	o      Options
	keys   [][sha256.Size]byte
	routes map[string]route
	ready  atomic.Bool
	start  time.Time
	log    *slog.Logger
	met    metrics
}

type route func(w http.ResponseWriter, r *http.Request, body []byte) error

// New is the handler for models; it answers 503 "Loading model" until
// SetReady (a program that hands it a loaded model calls it at once).
func New(models Models, o Options) *Handler {
	h := &Handler{models: models, o: o, start: time.Now(), log: o.Logger}
	if h.log == nil {
		h.log = slog.Default()
	}
	if h.o.CORSOrigins == "" {
		h.o.CORSOrigins = "*"
	}
	if h.o.CORSMethods == "" {
		h.o.CORSMethods = "GET, POST, DELETE, OPTIONS"
	}
	if h.o.CORSHeaders == "" {
		h.o.CORSHeaders = "*"
	}
	if h.o.MaxBodyBytes <= 0 {
		h.o.MaxBodyBytes = 100 << 20
	}
	if h.o.WriteTimeout <= 0 {
		h.o.WriteTimeout = 3600 * time.Second
	}
	if h.o.BuildInfo == "" {
		h.o.BuildInfo = "ggload"
	}
	for _, k := range o.APIKeys {
		h.keys = append(h.keys, sha256.Sum256([]byte(k)))
	}
	h.routes = h.table()
	return h
}

// SetReady lets requests in (llama-server's is_ready).
func (h *Handler) SetReady() { h.ready.Store(true) }

// table is server.cpp's routes.
func (h *Handler) table() map[string]route {
	t := map[string]route{}
	add := func(method string, fn route, paths ...string) {
		for _, p := range paths {
			t[method+" "+p] = fn
		}
	}
	add("GET", h.health, "/health", "/v1/health")
	add("GET", h.getMetrics, "/metrics")
	add("GET", h.getProps, "/props")
	add("POST", h.postProps, "/props")
	add("GET", h.getModels, "/models", "/v1/models")
	add("POST", h.completions(resNone), "/completion", "/completions")
	add("POST", h.completions(resOAICmpl), "/v1/completions")
	add("POST", h.infill, "/infill")
	add("POST", h.embeddings(resNone), "/embedding", "/embeddings")
	add("POST", h.embeddings(resOAIEmbd), "/v1/embeddings")
	add("POST", h.rerank, "/rerank", "/reranking", "/v1/rerank", "/v1/reranking")
	add("POST", h.tokenize, "/tokenize")
	add("POST", h.detokenize, "/detokenize")
	add("GET", h.getLora, "/lora-adapters")
	add("POST", h.postLora, "/lora-adapters")
	add("GET", h.getSlots, "/slots")
	add("POST", h.postSlots, "/slots/:id_slot")
	h.chatRoutes(add)
	if h.models.Router() {
		add("POST", h.routerList, "/models")
		add("POST", h.routerLoad, "/models/load")
		add("POST", h.routerUnload, "/models/unload")
		add("DELETE", h.routerDelete, "/models")
	}
	forbidden := func(w http.ResponseWriter, r *http.Request, _ []byte) error {
		h.writeJSON(w, http.StatusForbidden, ojson.ObjectValue(ojson.Member{Key: "error", Value: ojson.ObjectValue(
			ojson.Member{Key: "message", Value: ojson.StringValue("this feature is disabled")},
			ojson.Member{Key: "type", Value: ojson.StringValue("feature_disabled")},
		)}))
		return nil
	}
	add("GET", forbidden, "/cors-proxy", "/tools")
	add("POST", forbidden, "/cors-proxy", "/tools")
	h.addGCP(t)
	return t
}

// find is cpp-httplib's routing: an exact path, or /slots/ID.
func (h *Handler) find(method, path string) (route, map[string]string) {
	if method == http.MethodHead {
		method = http.MethodGet
	}
	if fn, ok := h.routes[method+" "+path]; ok {
		return fn, nil
	}
	if id, ok := strings.CutPrefix(path, "/slots/"); ok && id != "" && !strings.Contains(id, "/") {
		if fn, ok := h.routes[method+" /slots/:id_slot"]; ok {
			s, err := url.PathUnescape(id)
			if err != nil {
				s = id
			}
			return fn, map[string]string{"id_slot": s}
		}
	}
	return nil, nil
}

type paramsKey struct{}

// param is a path or query parameter (server_http_req::get_param).
func param(r *http.Request, key string) string {
	if p, ok := r.Context().Value(paramsKey{}).(map[string]string); ok {
		if v, ok := p[key]; ok {
			return v
		}
	}
	return r.URL.Query().Get(key)
}

// ServeHTTP answers a request as llama-server's pre-routing handler,
// router and error handler do: CORS headers, OPTIONS answered at once,
// 503 while loading, the API key checked, the route's handler run (its
// error written in llama-server's shape), 404 "File Not Found" for a path
// it does not serve.
func (h *Handler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("Server", "llama.cpp")
	h.cors(w, r)
	if r.Method == http.MethodOptions {
		cred := "true"
		if h.o.NoCORSCredentials {
			cred = "false"
		}
		w.Header().Set("Access-Control-Allow-Credentials", cred)
		w.Header().Set("Access-Control-Allow-Methods", h.o.CORSMethods)
		w.Header().Set("Access-Control-Allow-Headers", h.o.CORSHeaders)
		w.Header().Set("Content-Type", "text/html")
		w.Header().Set("Content-Length", "0")
		w.WriteHeader(http.StatusOK)
		return
	}
	path := r.URL.Path
	if h.o.APIPrefix != "" {
		p, ok := strings.CutPrefix(path, h.o.APIPrefix)
		if !ok {
			h.notFound(w)
			return
		}
		path = p
	}
	if !h.ready.Load() && path != "/" {
		h.writeMiddlewareError(w, errf(serve.ErrUnavailable, "Loading model"))
		return
	}
	if !h.authorized(r, path) {
		h.log.Warn("unauthorized: Invalid API Key")
		h.writeMiddlewareError(w, errf(serve.ErrAuthentication, "Invalid API Key"))
		return
	}
	fn, params := h.find(r.Method, path)
	if fn == nil {
		h.notFound(w)
		return
	}
	if params != nil {
		r = r.WithContext(context.WithValue(r.Context(), paramsKey{}, params))
	}
	var body []byte
	if r.Body != nil {
		b, err := io.ReadAll(http.MaxBytesReader(w, r.Body, h.o.MaxBodyBytes))
		if err != nil {
			var mbe *http.MaxBytesError
			if errors.As(err, &mbe) {
				w.Header().Set("Connection", "close")
				w.WriteHeader(http.StatusRequestEntityTooLarge)
			}
			return
		}
		body = b
	}
	defer func() {
		if p := recover(); p != nil {
			if p == http.ErrAbortHandler {
				panic(p)
			}
			h.log.Error("httpapi: a handler panicked", "path", path, "panic", p)
			h.writeError(w, errf(serve.ErrServer, "unknown error"))
		}
	}()
	if err := fn(w, r, body); err != nil {
		if canceled(r.Context(), err) {
			return
		}
		ae := toAPIError(err)
		h.log.Warn("got exception", "error", ae.msg)
		h.writeError(w, ae)
	}
}

// cors is the pre-routing handler's CORS headers.
func (h *Handler) cors(w http.ResponseWriter, r *http.Request) {
	origin := r.Header.Get("Origin")
	switch {
	case !h.o.NoCORSCredentials && h.o.CORSOrigins == "*":
		w.Header().Set("Access-Control-Allow-Origin", origin)
	case h.o.CORSOrigins == "localhost":
		if origin != "" && originIsLocalhost(origin) {
			w.Header().Set("Access-Control-Allow-Origin", origin)
		}
	default:
		w.Header().Set("Access-Control-Allow-Origin", h.o.CORSOrigins)
	}
}

func originIsLocalhost(origin string) bool {
	u, err := url.Parse(origin)
	if err != nil {
		return false
	}
	host := u.Hostname()
	return host == "localhost" || host == "127.0.0.1" || host == "::1"
}

// authorized is middleware_validate_api_key, the keys compared in
// constant time (each key's digest against the request's).
func (h *Handler) authorized(r *http.Request, path string) bool {
	if len(h.keys) == 0 || path == "/health" || path == "/v1/health" || path == "/" {
		return true
	}
	key := r.Header.Get("Authorization")
	if key == "" {
		key = r.Header.Get("X-Api-Key")
	}
	key = strings.TrimPrefix(key, "Bearer ")
	got := sha256.Sum256([]byte(key))
	ok := 0
	for _, k := range h.keys {
		ok |= subtle.ConstantTimeCompare(got[:], k[:])
	}
	return ok == 1
}

// writeMiddlewareError is a middleware's error: its object written as a
// literal, message, type and code in that order.
func (h *Handler) writeMiddlewareError(w http.ResponseWriter, e *apiError) {
	h.writeJSON(w, e.typ.Code(), ojson.ObjectValue(ojson.Member{Key: "error", Value: ojson.ObjectValue(
		ojson.Member{Key: "message", Value: ojson.StringValue(e.msg)},
		ojson.Member{Key: "type", Value: ojson.StringValue(e.typ.String())},
		ojson.Member{Key: "code", Value: ojson.IntValue(int64(e.typ.Code()))},
	)}))
}

// notFound is the error handler's answer to a 404.
func (h *Handler) notFound(w http.ResponseWriter) {
	h.writeJSON(w, http.StatusNotFound, ojson.ObjectValue(ojson.Member{Key: "error", Value: ojson.ObjectValue(
		ojson.Member{Key: "message", Value: ojson.StringValue("File Not Found")},
		ojson.Member{Key: "type", Value: ojson.StringValue("not_found_error")},
		ojson.Member{Key: "code", Value: ojson.IntValue(404)},
	)}))
}

// writeError writes {"error": {...}} with the status of its type (a 404
// becomes the error handler's "File Not Found", as cpp-httplib's error
// handler rewrites every 404).
func (h *Handler) writeError(w http.ResponseWriter, e *apiError) {
	if e.typ.Code() == http.StatusNotFound {
		h.notFound(w)
		return
	}
	h.writeJSON(w, e.typ.Code(), ojson.ObjectValue(ojson.Member{Key: "error", Value: errorObject(e)}))
}

// writeJSON writes v as safe_json_to_str writes it.
func (h *Handler) writeJSON(w http.ResponseWriter, status int, v ojson.Value) {
	h.writeBody(w, status, "application/json; charset=utf-8", v.DumpSafe(-1))
}

func (h *Handler) writeBody(w http.ResponseWriter, status int, contentType, body string) {
	hd := w.Header()
	hd.Set("Content-Type", contentType)
	if status >= 400 {
		hd.Set("Connection", "close")
	}
	w.WriteHeader(status)
	rc := http.NewResponseController(w)
	rc.SetWriteDeadline(time.Now().Add(h.o.WriteTimeout))
	io.WriteString(w, body)
}

// health is GET /health.
func (h *Handler) health(w http.ResponseWriter, r *http.Request, _ []byte) error {
	h.writeJSON(w, http.StatusOK, obj("status", ojson.StringValue("ok")))
	return nil
}

// obj is an object of key, value pairs.
func obj(kv ...any) ojson.Value {
	o := ojson.ObjectValue()
	for i := 0; i+1 < len(kv); i += 2 {
		o.Set(kv[i].(string), jv(kv[i+1]))
	}
	return o
}

// jv is a Go value as nlohmann holds it: a float32 widened to double as
// C++ widens it, ints as integers, strings, slices, and ojson values.
func jv(x any) ojson.Value {
	switch x := x.(type) {
	case ojson.Value:
		return x
	case nil:
		return ojson.NullValue()
	case bool:
		return ojson.BoolValue(x)
	case int:
		return ojson.IntValue(int64(x))
	case int32:
		return ojson.IntValue(int64(x))
	case int64:
		return ojson.IntValue(x)
	case uint32:
		return ojson.UintValue(uint64(x))
	case uint64:
		return ojson.UintValue(x)
	case float32:
		return ojson.FloatValue(float64(x))
	case float64:
		return ojson.FloatValue(x)
	case string:
		return ojson.StringValue(x)
	case []string:
		a := ojson.ArrayValue()
		for _, s := range x {
			a.Append(ojson.StringValue(s))
		}
		return a
	case []int32:
		a := ojson.ArrayValue()
		for _, t := range x {
			a.Append(ojson.IntValue(int64(t)))
		}
		return a
	case []ojson.Value:
		return ojson.ArrayValue(x...)
	}
	panic("httpapi: no JSON for a value of this type")
}

// parseBody is json::parse(req.body).
func parseBody(body []byte) (ojson.Value, error) {
	return ojson.Parse(body)
}
