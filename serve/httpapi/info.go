// Port of llama.cpp tools/server/server-context.cpp (get_health,
// get_metrics, get_slots, post_slots, get_props, post_props, get_models,
// the LoRA endpoints, server_slot::to_json) and tools/server/server-task.cpp
// (server_task_result_metrics::to_metrics, the slot results' to_json)
// (v0.5.0).

package httpapi

import (
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/ggload/ggload/internal/ojson"
	"github.com/ggload/ggload/serve"
)

// metrics are server_metrics as the HTTP layer counts them from its
// requests' results.
type metrics struct {
	mu                           sync.Mutex
	promptN, promptCached        uint64
	promptUS                     float64
	predictN, predictSteps       uint64
	predictUS                    float64
	bucketPromptN, bucketPredict uint64
	bucketPromptUS, bucketPredUS float64
	nDecode, nBusy               uint64
	nTokensMax                   uint64
	processing                   int
}

// begin and end count a completion under way (requests_processing).
func (m *metrics) begin() {
	m.mu.Lock()
	m.processing++
	m.mu.Unlock()
}

func (m *metrics) end() {
	m.mu.Lock()
	m.processing--
	m.mu.Unlock()
}

// add counts a finished task: its prompt, its generation, and the
// decodes it took (its prompt's batches, then one a token after the
// first).
func (m *metrics) add(t serve.Timings, nBatch int, nTokens int) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.promptN += uint64(t.PromptN)
	m.promptCached += uint64(t.CacheN)
	m.promptUS += t.PromptMS * 1000
	m.bucketPromptN += uint64(t.PromptN)
	m.bucketPromptUS += t.PromptMS * 1000
	steps := uint64(max(t.PredictedN-1, 0))
	m.predictN += uint64(t.PredictedN)
	m.predictSteps += steps
	m.predictUS += t.PredictedMS * 1000
	m.bucketPredict += steps
	m.bucketPredUS += t.PredictedMS * 1000
	if nBatch > 0 && t.PromptN > 0 {
		d := uint64((t.PromptN + nBatch - 1) / nBatch)
		m.nDecode += d + steps
		m.nBusy += d + steps
	}
	m.nTokensMax = max(m.nTokensMax, uint64(nTokens))
}

// getMetrics is GET /metrics: Prometheus text.
func (h *Handler) getMetrics(w http.ResponseWriter, r *http.Request, _ []byte) error {
	if !h.o.Metrics {
		return errf(serve.ErrNotSupported, "This server does not support metrics endpoint. Start it with `--metrics`")
	}
	m := &h.met
	m.mu.Lock()
	rate := func(n uint64, us float64) float64 {
		if us > 0 {
			return float64(n) / us * 1e6
		}
		return 0
	}
	type item struct {
		name, help string
		v          float64
	}
	counters := []item{
		{"prompt_tokens_total", "Number of prompt tokens processed, excluding cached tokens", float64(m.promptN)},
		{"prompt_tokens_cached_total", "Number of prompt tokens reused from the cache", float64(m.promptCached)},
		{"prompt_seconds_total", "Total time spent processing prompts", m.promptUS / 1e6},
		{"tokens_predicted_total", "Number of generation tokens processed", float64(m.predictN)},
		{"tokens_predicted_seconds_total", "Total time spent generating tokens", m.predictUS / 1e6},
		{"n_decode_total", "Total number of llama_decode() calls, excluding speculative decoding and multimodal decoding", float64(m.nDecode)},
		{"n_tokens_max", "Largest observed sequence length (prompt + generation)", float64(m.nTokensMax)},
		{"spec_decode_num_draft_tokens_total", "Speculative: Total draft tokens generated", 0},
		{"spec_decode_num_accepted_tokens_total", "Speculative: Total draft tokens accepted by the target model", 0},
		{"spec_decode_num_drafts_total", "Speculative: Total speculative decoding verification steps", 0},
	}
	deferred := 0
	if mo, release, err := h.acquire(r, ojson.Value{}); err == nil {
		deferred = max(0, m.processing-mo.Settings.NParallel)
		release()
	}
	gauges := []item{
		{"prompt_tokens_seconds", "Average prompt throughput in tokens/s", rate(m.bucketPromptN, m.bucketPromptUS)},
		{"predicted_tokens_seconds", "Average generation throughput in tokens/s", rate(m.bucketPredict, m.bucketPredUS)},
		{"requests_processing", "Number of requests processing", float64(m.processing - deferred)},
		{"requests_deferred", "Number of requests deferred", float64(deferred)},
		{"n_busy_slots_per_decode", "Average number of busy slots per llama_decode() call", float64(m.nBusy) / max(float64(m.nDecode), 1)},
	}
	m.bucketPromptN, m.bucketPromptUS, m.bucketPredict, m.bucketPredUS = 0, 0, 0, 0
	m.mu.Unlock()
	var b strings.Builder
	for _, g := range []struct {
		typ   string
		items []item
	}{{"counter", counters}, {"gauge", gauges}} {
		for _, it := range g.items {
			fmt.Fprintf(&b, "# HELP llamacpp:%s %s\n# TYPE llamacpp:%s %s\nllamacpp:%s %s\n", it.name, it.help, it.name, g.typ, it.name, cppDouble(it.v))
		}
	}
	w.Header().Set("Process-Start-Time-Unix", strconv.FormatInt(h.start.Unix(), 10))
	h.writeBody(w, http.StatusOK, "text/plain; version=0.0.4", b.String())
	return nil
}

// cppDouble is a double as an ostream writes it (%g, 6 digits).
func cppDouble(f float64) string {
	return strconv.FormatFloat(f, 'g', 6, 64)
}

// getSlots is GET /slots.
func (h *Handler) getSlots(w http.ResponseWriter, r *http.Request, _ []byte) error {
	m, release, err := h.acquire(r, ojson.Value{})
	if err != nil {
		return err
	}
	defer release()
	if h.o.NoSlots {
		return errf(serve.ErrNotSupported, "This server does not support slots endpoint. Start it with `--slots`")
	}
	slots, err := m.Engine.Slots(r.Context())
	if err != nil {
		return err
	}
	idle := 0
	arr := ojson.ArrayValue()
	for _, s := range slots {
		if !s.IsProcessing {
			idle++
		}
		arr.Append(slotJSON(m, s))
	}
	if param(r, "fail_on_no_slot") != "" && idle == 0 {
		return errf(serve.ErrUnavailable, "no slot available")
	}
	h.writeJSON(w, http.StatusOK, arr)
	return nil
}

// slotJSON is server_slot::to_json(only_metrics).
func slotJSON(m *Model, s serve.SlotInfo) ojson.Value {
	o := obj("id", s.ID, "n_ctx", s.NCtx, "speculative", false, "is_processing", s.IsProcessing)
	if s.IDTask < 0 {
		return o
	}
	p := paramsOf(s.Params)
	o.Set("id_task", jv(s.IDTask))
	o.Set("n_prompt_tokens", jv(s.NPromptTokens))
	o.Set("n_prompt_tokens_processed", jv(uint64(s.NPromptTokensProcessed)))
	o.Set("n_prompt_tokens_cache", jv(uint64(s.NPromptTokensCache)))
	o.Set("params", p.toJSON(true))
	o.Set("next_token", ojson.ArrayValue(obj("has_next_token", s.HasNextToken, "has_new_line", s.HasNewLine,
		"n_remain", s.NRemain, "n_decoded", uint64(s.NDecoded))))
	return o
}

// paramsOf is a request's parameters from the engine's options alone
// (what a slot remembers of its last task).
func paramsOf(o serve.Options) *taskParams {
	return &taskParams{o: o, shown: o.Sampling.LogitBias, reasoningFormat: "deepseek", nCmpl: 1, reasoningBudgetTokens: -1,
		preserved: o.PreservedTokens, generationPrompt: o.Sampling.GenerationPrompt}
}

// postSlots is POST /slots/:id_slot?action=save|restore|erase.
func (h *Handler) postSlots(w http.ResponseWriter, r *http.Request, body []byte) error {
	data, _ := parseBody(body)
	m, release, err := h.acquire(r, data)
	if err != nil {
		return err
	}
	defer release()
	if m.Settings.SlotSavePath == "" {
		return errf(serve.ErrNotSupported, "This server does not support slots action. Start it with `--slot-save-path`")
	}
	id, err := stoi(param(r, "id_slot"))
	if err != nil {
		return errf(serve.ErrInvalidRequest, "Invalid slot ID")
	}
	switch param(r, "action") {
	case "save", "restore":
		data, err := parseBody(body)
		if err != nil {
			return err
		}
		fv, err := at(data, "filename")
		if err != nil {
			return err
		}
		name, err := getString(fv)
		if err != nil {
			return err
		}
		if !validFilename(name) {
			return errf(serve.ErrInvalidRequest, "Invalid filename")
		}
		if param(r, "action") == "save" {
			f, err := m.Engine.SaveSlot(r.Context(), id, name)
			if err != nil {
				return err
			}
			h.writeJSON(w, http.StatusOK, obj("id_slot", f.Slot, "filename", f.Filename, "n_saved", f.NTokens, "n_written", uint64(f.NBytes),
				"timings", obj("save_ms", f.TimeMS)))
			return nil
		}
		f, err := m.Engine.RestoreSlot(r.Context(), id, name)
		if err != nil {
			return err
		}
		h.writeJSON(w, http.StatusOK, obj("id_slot", f.Slot, "filename", f.Filename, "n_restored", f.NTokens, "n_read", uint64(f.NBytes),
			"timings", obj("restore_ms", f.TimeMS)))
		return nil
	case "erase":
		n, err := m.Engine.EraseSlot(r.Context(), id)
		if err != nil {
			return err
		}
		h.writeJSON(w, http.StatusOK, obj("id_slot", id, "n_erased", n))
		return nil
	}
	return errf(serve.ErrInvalidRequest, "Invalid action")
}

// stoi is std::stoi: leading spaces, a sign, digits; what follows them
// is ignored; no digits or a value past int is an error.
func stoi(s string) (int, error) {
	t := strings.TrimLeft(s, " \t\n\v\f\r")
	i := 0
	if i < len(t) && (t[i] == '+' || t[i] == '-') {
		i++
	}
	j := i
	for j < len(t) && t[j] >= '0' && t[j] <= '9' {
		j++
	}
	if j == i {
		return 0, strconv.ErrSyntax
	}
	n, err := strconv.ParseInt(t[:j], 10, 32)
	return int(n), err
}

// getProps is GET /props.
func (h *Handler) getProps(w http.ResponseWriter, r *http.Request, _ []byte) error {
	if h.models.Router() && param(r, "model") == "" {
		rp := h.models.Props()
		h.routerProps(w, r, rp.MaxInstances, rp.Autoload)
		return nil
	}
	m, release, err := h.acquire(r, ojson.Value{})
	if err != nil {
		return err
	}
	defer release()
	// (a task's default parameters, with the server's sampling)
	p := paramsOf(serve.Options{NPredict: -1, TMaxPredictMS: -1, CachePrompt: true, IDSlot: -1, Sampling: m.Engine.Defaults().Sampling})
	p.reasoningFormat = "none"
	v := m.Engine.Vocab()
	bos, eos := "", ""
	if t := v.BOS(); t >= 0 {
		bos = piece(v, t, true)
	}
	if t := v.EOS(); t >= 0 {
		eos = piece(v, t, true)
	}
	props := obj(
		"default_generation_settings", obj("params", p.toJSON(true), "n_ctx", m.Engine.Info().NCtxSlot),
		"total_slots", m.Settings.NParallel,
		"model_alias", m.Name,
		"model_ftype", m.FType,
		"model_path", m.Path,
		"modalities", obj("vision", false, "video", false, "audio", false),
		"media_marker", mediaMarker(),
		"endpoint_slots", !h.o.NoSlots,
		"endpoint_props", h.o.Props,
		"endpoint_metrics", h.o.Metrics,
		"ui", m.Settings.UI,
		"ui_settings", ojson.ObjectValue(),
		"chat_template", m.chatSource(""),
		"chat_template_caps", m.chatCaps(),
		"bos_token", bos,
		"eos_token", eos,
		"build_info", h.o.BuildInfo,
		"is_sleeping", false,
		"cors_proxy_enabled", false,
	)
	if !m.Settings.Chat.Server.Legacy && m.chatSource("tool_use") != "" {
		props.Set("chat_template_tool_use", jv(m.chatSource("tool_use")))
	}
	h.writeJSON(w, http.StatusOK, props)
	return nil
}

var mediaMarker = sync.OnceValue(func() string { return "<__media_" + randomString() + "__>" })

// postProps is POST /props.
func (h *Handler) postProps(w http.ResponseWriter, r *http.Request, _ []byte) error {
	if !h.o.Props {
		return errf(serve.ErrNotSupported, "This server does not support changing global properties. Start it with `--props`")
	}
	h.writeJSON(w, http.StatusOK, obj("success", true))
	return nil
}

// modelInfo is get_res_model_info.
func modelInfo(m *Model) ojson.Value {
	return obj("id", m.Name, "aliases", nonNil(m.Aliases), "tags", nonNil(m.Tags), "object", "model", "created", time.Now().Unix(),
		"owned_by", "llamacpp", "meta", obj("vocab_type", m.VocabType, "n_vocab", m.NVocab, "n_ctx", m.Engine.Info().NCtxSlot,
			"n_ctx_train", m.NCtxTrain, "n_embd", m.NEmbd, "n_params", m.NParams, "size", m.Size, "ftype", m.FType))
}

// getModels is GET /models and /v1/models.
func (h *Handler) getModels(w http.ResponseWriter, r *http.Request, _ []byte) error {
	if h.models.Router() {
		return h.routerModels(w, r)
	}
	m, release, err := h.acquire(r, ojson.Value{})
	if err != nil {
		return err
	}
	defer release()
	h.writeJSON(w, http.StatusOK, obj(
		"models", ojson.ArrayValue(obj("name", m.Name, "model", m.Name, "modified_at", "", "size", "", "digest", "", "type", "model",
			"description", "", "tags", []string{""}, "capabilities", []string{"completion"}, "parameters", "",
			"details", obj("parent_model", "", "format", "gguf", "family", "", "families", []string{""}, "parameter_size", "",
				"quantization_level", ""))),
		"object", "list",
		"data", ojson.ArrayValue(modelInfo(m)),
	))
	return nil
}

// getLora is GET /lora-adapters: ggload serves no adapter yet, so the
// list is empty.
func (h *Handler) getLora(w http.ResponseWriter, r *http.Request, _ []byte) error {
	h.writeJSON(w, http.StatusOK, ojson.ArrayValue())
	return nil
}

// postLora is POST /lora-adapters.
func (h *Handler) postLora(w http.ResponseWriter, r *http.Request, body []byte) error {
	data, err := parseBody(body)
	if err != nil {
		return err
	}
	if !data.IsArray() {
		return errf(serve.ErrInvalidRequest, "Request body must be an array")
	}
	// (construct_lora_list sets the adapters it has: ids past them are
	// not read)
	if _, err := parseLoraRequest(data); err != nil {
		return err
	}
	h.writeJSON(w, http.StatusOK, obj("success", true))
	return nil
}
