// Port of llama.cpp tools/server/server-context.cpp
// (handle_embeddings_impl, post_rerank, post_tokenize, post_detokenize)
// and tools/server/server-common.cpp (format_embeddings_response_oaicompat,
// format_response_rerank) (v0.5.0).

package httpapi

import (
	"context"
	"encoding/base64"
	"encoding/binary"
	"errors"
	"math"
	"net/http"
	"sort"
	"sync"
	"time"

	"github.com/ggload/ggload/internal/ojson"
	"github.com/ggload/ggload/serve"
)

// runAll runs fn for each of n tasks at once (post_tasks, wait_for_all):
// the first error ends the others.
func runAll(ctx context.Context, n int, fn func(ctx context.Context, i int) error) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var wg sync.WaitGroup
	errs := make([]error, n)
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if errs[i] = fn(ctx, i); errs[i] != nil {
				cancel()
			}
		}()
	}
	wg.Wait()
	// the first error by task, not one a cancellation caused
	for _, err := range errs {
		if err != nil && !errors.Is(err, context.Canceled) {
			return err
		}
	}
	for _, err := range errs {
		if err != nil {
			return err
		}
	}
	return nil
}

// embeddings is POST /embedding(s) and /v1/embeddings.
func (h *Handler) embeddings(rt resType) route {
	return func(w http.ResponseWriter, r *http.Request, body []byte) error {
		m, release, err := h.acquireBody(r, body)
		if err != nil {
			return err
		}
		defer release()
		if !m.Settings.Embedding {
			return errf(serve.ErrNotSupported, "This server does not support embeddings. Start it with `--embeddings`")
		}
		if rt != resNone && m.Engine.Info().Pooling == 0 {
			return errf(serve.ErrInvalidRequest, "Pooling type 'none' is not OAI compatible. Please use a different pooling type")
		}
		data, err := parseBody(body)
		if err != nil {
			return err
		}
		var prompt ojson.Value
		switch {
		case data.Has("input"):
			prompt = data.At("input")
		case has(data, "content"):
			rt = resNone
			prompt = data.At("content")
		default:
			return errf(serve.ErrInvalidRequest, "\"input\" or \"content\" must be provided")
		}
		useBase64 := false
		if data.Has("encoding_format") {
			f, err := getString(data.At("encoding_format"))
			if err != nil {
				return err
			}
			switch f {
			case "base64":
				useBase64 = true
			case "float":
			default:
				return errf(serve.ErrInvalidRequest, "The format to return the embeddings in. Can be either float or base64")
			}
		}
		v := m.Engine.Vocab()
		prompts, err := tokenizeInputPrompts(v, prompt, true, true)
		if err != nil {
			return err
		}
		for _, p := range prompts {
			if len(p) == 0 {
				return errf(serve.ErrInvalidRequest, "Input content cannot be empty")
			}
		}
		o := m.Engine.Defaults()
		o.EmbdNormalize = m.Settings.embdNormalize()
		if data.Has("embd_normalize") {
			n, err := getInt32(data.At("embd_normalize"))
			if err != nil {
				return err
			}
			o.EmbdNormalize = int(n)
		}
		res := make([]*serve.Embedding, len(prompts))
		err = runAll(r.Context(), len(prompts), func(ctx context.Context, i int) error {
			t0 := time.Now()
			e, err := m.Engine.Embed(ctx, prompts[i], o)
			res[i] = e
			if err == nil {
				// (an embedding's prompt is decoded whole: no cache)
				h.met.add(serve.Timings{PromptN: e.NTokens, PromptMS: float64(time.Since(t0).Microseconds()) / 1000}, m.Settings.NBatch, e.NTokens)
			}
			return err
		})
		if err != nil {
			return err
		}
		arr := ojson.ArrayValue()
		nTokens := 0
		for i, e := range res {
			if rt == resOAIEmbd {
				var first []float32
				if len(e.Vectors) > 0 {
					first = e.Vectors[0]
				}
				arr.Append(obj("index", i, "embedding", floatsJSON(first), "tokens_evaluated", e.NTokens))
				nTokens += e.NTokens
				continue
			}
			vecs := ojson.ArrayValue()
			for _, vec := range e.Vectors {
				vecs.Append(floatsJSON(vec))
			}
			arr.Append(obj("index", i, "embedding", vecs))
		}
		if rt != resOAIEmbd {
			h.writeJSON(w, http.StatusOK, arr)
			return nil
		}
		out := ojson.ArrayValue()
		for i, e := range arr.Elems() {
			if useBase64 {
				buf := make([]byte, 0, 4*len(res[i].Vectors[0]))
				for _, f := range res[i].Vectors[0] {
					buf = binary.LittleEndian.AppendUint32(buf, math.Float32bits(f))
				}
				out.Append(obj("embedding", base64.StdEncoding.EncodeToString(buf), "index", i, "object", "embedding", "encoding_format", "base64"))
				continue
			}
			out.Append(obj("embedding", e.At("embedding"), "index", i, "object", "embedding"))
		}
		h.writeJSON(w, http.StatusOK, obj("model", value(data, "model", m.Name, getString), "object", "list",
			"usage", obj("prompt_tokens", nTokens, "total_tokens", nTokens), "data", out))
		return nil
	}
}

// acquireBody is acquire for a handler that parses its body after its
// first checks: the model named in a body that parses.
func (h *Handler) acquireBody(r *http.Request, body []byte) (*Model, func(), error) {
	var data ojson.Value
	if h.models.Router() {
		d, err := parseBody(body)
		if err != nil {
			return nil, nil, err
		}
		data = d
	}
	return h.acquire(r, data)
}

func floatsJSON(v []float32) ojson.Value {
	a := ojson.ArrayValue()
	for _, f := range v {
		a.Append(ojson.FloatValue(float64(f)))
	}
	return a
}

// rerank is POST /rerank and its aliases.
func (h *Handler) rerank(w http.ResponseWriter, r *http.Request, body []byte) error {
	m, release, err := h.acquireBody(r, body)
	if err != nil {
		return err
	}
	defer release()
	if !m.Settings.Rerank {
		return errf(serve.ErrNotSupported, "This server does not support reranking. Start it with `--reranking`")
	}
	data, err := parseBody(body)
	if err != nil {
		return err
	}
	tei := has(data, "texts")
	q, ok := data.Get("query")
	if !ok || !data.IsObject() {
		return errf(serve.ErrInvalidRequest, "\"query\" must be provided")
	}
	if !q.IsString() {
		return errf(serve.ErrInvalidRequest, "\"query\" must be a string")
	}
	docs := value(data, "documents", value(data, "texts", []string(nil), getStrings), getStrings)
	if len(docs) == 0 {
		return errf(serve.ErrInvalidRequest, "\"documents\" must be a non-empty string array")
	}
	topN := value(data, "top_n", len(docs), func(x ojson.Value) (int, error) { n, err := getInt32(x); return int(n), err })
	v := m.Engine.Vocab()
	o := m.Engine.Defaults()
	type rank struct {
		score   float32
		nTokens int
	}
	ranks := make([]rank, len(docs))
	prompts := make([][]int32, len(docs))
	for i, d := range docs {
		p, err := formatRerank(v, m.RerankTemplate, m.HasRerankTemplate, q.Str(), d)
		if err != nil {
			return err
		}
		prompts[i] = p
	}
	err = runAll(r.Context(), len(docs), func(ctx context.Context, i int) error {
		t0 := time.Now()
		s, err := m.Engine.Rerank(ctx, prompts[i], o)
		ranks[i] = rank{s, len(prompts[i])}
		if err == nil {
			h.met.add(serve.Timings{PromptN: len(prompts[i]), PromptMS: float64(time.Since(t0).Microseconds()) / 1000}, m.Settings.NBatch, len(prompts[i]))
		}
		return err
	})
	if err != nil {
		return err
	}
	label := "relevance_score"
	if tei {
		label = "score"
	}
	returnText := tei && value(data, "return_text", false, getBool)
	type elem struct {
		v     ojson.Value
		score float64
	}
	var elems []elem
	nTokens := 0
	for i, rk := range ranks {
		e := obj("index", i, label, float64(rk.score))
		nTokens += rk.nTokens
		if returnText {
			e.Set("text", jv(docs[i]))
		}
		elems = append(elems, elem{e, float64(rk.score)})
	}
	sort.SliceStable(elems, func(i, j int) bool { return elems[i].score > elems[j].score })
	if topN < 0 {
		return errors.New("cannot create std::vector larger than max_size()")
	}
	elems = elems[:min(topN, len(elems))]
	results := ojson.ArrayValue()
	for _, e := range elems {
		results.Append(e.v)
	}
	if tei {
		h.writeJSON(w, http.StatusOK, results)
		return nil
	}
	h.writeJSON(w, http.StatusOK, obj("model", value(data, "model", m.Name, getString), "object", "list",
		"usage", obj("prompt_tokens", nTokens, "total_tokens", nTokens), "results", results))
	return nil
}

// tokenize is POST /tokenize.
func (h *Handler) tokenize(w http.ResponseWriter, r *http.Request, body []byte) error {
	data, err := parseBody(body)
	if err != nil {
		return err
	}
	m, release, err := h.acquire(r, data)
	if err != nil {
		return err
	}
	defer release()
	out := ojson.ArrayValue()
	if data.Has("content") {
		v := m.Engine.Vocab()
		toks, err := tokenizeMixed(v, data.At("content"), value(data, "add_special", false, getBool), value(data, "parse_special", true, getBool))
		if err != nil {
			return err
		}
		if value(data, "with_pieces", false, getBool) {
			for _, t := range toks {
				p := piece(v, t, true)
				pj := ojson.StringValue(p)
				if !isValidUTF8(p) {
					pj = ojson.ArrayValue()
					for i := 0; i < len(p); i++ {
						pj.Append(ojson.IntValue(int64(p[i])))
					}
				}
				out.Append(obj("id", t, "piece", pj))
			}
		} else {
			out = jv(nonNil(toks))
		}
	}
	h.writeJSON(w, http.StatusOK, obj("tokens", out))
	return nil
}

// detokenize is POST /detokenize.
func (h *Handler) detokenize(w http.ResponseWriter, r *http.Request, body []byte) error {
	data, err := parseBody(body)
	if err != nil {
		return err
	}
	m, release, err := h.acquire(r, data)
	if err != nil {
		return err
	}
	defer release()
	content := ""
	if data.Has("tokens") {
		toks, err := getTokens(data.At("tokens"))
		if err != nil {
			return err
		}
		v := m.Engine.Vocab()
		for _, t := range toks {
			if t < 0 || int(t) >= v.NTokens() {
				// (llama_token_to_piece reads out of its table there: the
				// pin's answer is undefined; ggload refuses it)
				return invalidf("token %d is not in the vocabulary (0 to %d)", t, v.NTokens()-1)
			}
		}
		content = tokensToStr(v, toks)
	}
	h.writeJSON(w, http.StatusOK, obj("content", content))
	return nil
}
