// Port of llama.cpp tools/server/server-models.cpp (the router's routes:
// get_router_models, post_router_models_load, post_router_models_unload,
// get_router_props, router_validate_model) (v0.5.0).

package httpapi

import (
	"errors"
	"net/http"
	"time"

	"github.com/ggload/ggload/internal/ojson"
	"github.com/ggload/ggload/serve"
)

// The errors a router's Models answer with, which the handler words as
// llama-server's router does.
var (
	// ErrUnknownModel: no model of that name or alias.
	ErrUnknownModel = errors.New("httpapi: no such model")
	// ErrNotLoaded: the model is not running and may not be loaded
	// (autoload off).
	ErrNotLoaded = errors.New("httpapi: the model is not loaded")
	// ErrRunning: the model is loaded already (POST /models/load).
	ErrRunning = errors.New("httpapi: the model is running")
	// ErrNotRunning: the model is not running (POST /models/unload).
	ErrNotRunning = errors.New("httpapi: the model is not running")
)

// routeModel is router_validate_model and the load wait: the model the
// request names, running.
func (h *Handler) routeModel(r *http.Request, name string) (*Model, func(), error) {
	if name == "" {
		return nil, nil, errf(serve.ErrInvalidRequest, "model name is missing from the request")
	}
	// (is_autoload: the request's ?autoload=, else --models-autoload)
	autoload := h.models.Props().Autoload
	if a := param(r, "autoload"); a != "" {
		autoload = a == "true" || a == "1"
	}
	m, release, err := h.models.Acquire(r.Context(), name, autoload)
	switch {
	case errors.Is(err, ErrUnknownModel):
		return nil, nil, errf(serve.ErrInvalidRequest, "model '%s' not found", name)
	case errors.Is(err, ErrNotLoaded):
		return nil, nil, errf(serve.ErrInvalidRequest, "model is not loaded")
	}
	return m, release, err
}

// routerModels is GET /models and /v1/models of a router.
func (h *Handler) routerModels(w http.ResponseWriter, r *http.Request) error {
	if param(r, "reload") != "" {
		if err := h.models.Reload(r.Context()); err != nil {
			return err
		}
	}
	list := ojson.ArrayValue()
	t := time.Now().Unix()
	for _, s := range h.models.List(r.Context()) {
		status := obj("value", s.Status, "args", nonNil(s.Args))
		if s.Preset != "" {
			status.Set("preset", jv(s.Preset))
		}
		if s.Failed {
			// (the router's child's exit code: a failed load's is 1)
			status.Set("exit_code", jv(1))
			status.Set("failed", jv(true))
		}
		mi := obj("id", s.Name, "aliases", nonNil(s.Aliases), "tags", nonNil(s.Tags), "object", "model", "owned_by", "llamacpp",
			"created", t, "status", status, "architecture", obj("input_modalities", []string{"text"}, "output_modalities", []string{"text"}),
			"source", s.Source, "can_remove", false)
		if s.Loaded != nil {
			for _, m := range modelInfo(s.Loaded).Members() {
				if !mi.Has(m.Key) {
					mi.Set(m.Key, m.Value)
				}
			}
		}
		list.Append(mi)
	}
	h.writeJSON(w, http.StatusOK, obj("data", list, "object", "list"))
	return nil
}

// routerList is POST /models: llama-server's download of a model from a
// repository, which ggload does not do.
func (h *Handler) routerList(w http.ResponseWriter, r *http.Request, body []byte) error {
	data, err := parseBody(body)
	if err != nil {
		return err
	}
	if value(data, "model", "", getString) == "" {
		return invalidf("model must be a non-empty string")
	}
	return errf(serve.ErrNotSupported, "ggload downloads no model from a repository: put its file in --models-dir")
}

// routerDelete is DELETE /models?model=: llama-server's removal of a
// model it downloaded into its cache; ggload's models are none of them.
func (h *Handler) routerDelete(w http.ResponseWriter, r *http.Request, _ []byte) error {
	name := param(r, "model")
	if name == "" {
		return invalidf("model must be a non-empty string")
	}
	for _, s := range h.models.List(r.Context()) {
		if s.Name == name {
			return errf(serve.ErrServer, "model name=%s is not removable (not from cache)", name)
		}
	}
	return errf(serve.ErrServer, "model name=%s is not found", name)
}

// routerLoad is POST /models/load.
func (h *Handler) routerLoad(w http.ResponseWriter, r *http.Request, body []byte) error {
	data, err := parseBody(body)
	if err != nil {
		return err
	}
	err = h.models.Load(r.Context(), value(data, "model", "", getString))
	switch {
	case errors.Is(err, ErrUnknownModel):
		return errf(serve.ErrNotFound, "model is not found")
	case errors.Is(err, ErrRunning):
		return errf(serve.ErrInvalidRequest, "model is already running")
	case err != nil:
		return err
	}
	h.writeJSON(w, http.StatusOK, obj("success", true))
	return nil
}

// routerUnload is POST /models/unload.
func (h *Handler) routerUnload(w http.ResponseWriter, r *http.Request, body []byte) error {
	data, err := parseBody(body)
	if err != nil {
		return err
	}
	err = h.models.Unload(r.Context(), value(data, "model", "", getString))
	switch {
	case errors.Is(err, ErrUnknownModel):
		return errf(serve.ErrInvalidRequest, "model is not found")
	case errors.Is(err, ErrNotRunning):
		return errf(serve.ErrInvalidRequest, "model is not running")
	case err != nil:
		return err
	}
	h.writeJSON(w, http.StatusOK, obj("success", true))
	return nil
}

// routerProps is GET /props of a router without ?model=.
func (h *Handler) routerProps(w http.ResponseWriter, r *http.Request, maxInstances int, autoload bool) {
	h.writeJSON(w, http.StatusOK, obj("role", "router", "max_instances", maxInstances, "models_autoload", autoload,
		"model_alias", "llama-server", "model_path", "none",
		"default_generation_settings", obj("params", nil, "n_ctx", 0), // (json{} is null)
		"ui_settings", ojson.ObjectValue(), "build_info", h.o.BuildInfo, "cors_proxy_enabled", false))
}
