// Port of llama.cpp tools/server/server-models.cpp (v0.5.0): the router's
// model states (server_model_meta's is_running, ensure_model_ready's
// errors) as the routes read them, over ggload's pool in place of child
// processes.

package httpapi

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"

	"github.com/ggload/ggload/serve"
	"github.com/ggload/ggload/serve/pool"
)

// Router serves the models of a pool (package serve/pool) as
// llama-server's router mode serves them: a request names its model in
// its "model" field (or ?model= on a GET), which the pool loads where
// autoload allows it; GET /models lists the pool's catalog; POST
// /models/load and /models/unload load and unload. A request can reach
// only the pool's models, by name or alias: a name is never read as a
// path.
//
// A model's server settings are RouterOptions.Settings, or its own where
// the pool's Options.Extra for it is a Settings (ggload serve reads each
// model's preset into one).
type Router struct {
	p *pool.Pool
	o RouterOptions

	mu     sync.Mutex
	models map[string]routed // by model name: the last load described
}

// RouterOptions are the router's own options.
type RouterOptions struct {
	// NoAutoload is --no-models-autoload: a request for a model that is
	// not loaded is refused ("model is not loaded") unless it asks with
	// ?autoload=true; POST /models/load loads it.
	NoAutoload bool
	// Settings are each model's server settings (a model's own, in its
	// pool Options.Extra, take their place).
	Settings Settings
}

// routed is a loaded model as the handler describes it, made once per
// load.
type routed struct {
	gen uint64 // the pool's number of the load
	m   *Model
}

// NewRouter serves the pool's models. The pool stays the caller's: close
// it after the server.
func NewRouter(p *pool.Pool, o RouterOptions) *Router {
	return &Router{p: p, o: o, models: map[string]routed{}}
}

// Router reports true: requests name their model.
func (r *Router) Router() bool { return true }

// Acquire leases the model the request names, loading it first where
// autoload allows (a sleeping model is loaded whatever autoload says, as
// the router wakes a sleeping child).
func (r *Router) Acquire(ctx context.Context, name string, autoload bool) (*Model, func(), error) {
	if !autoload {
		if in, err := r.p.Model(name); err == nil && in.Status == pool.Sleeping {
			autoload = true
		}
	}
	l, err := r.p.Acquire(ctx, name, autoload)
	if err != nil {
		return nil, nil, r.poolError(ctx, err)
	}
	m, err := r.describe(l)
	if err != nil {
		l.Release()
		return nil, nil, err
	}
	return m, l.Release, nil
}

// describe is the handler's Model of a lease's engine, made at the
// model's first request after each load: the model is named as the
// router names its child (--alias NAME), its settings are its own or
// the router's.
func (r *Router) describe(l *pool.Lease) (*Model, error) {
	e := l.Engine()
	// (the lease keeps the load resident: its number stands)
	in, err := r.p.Model(l.Name())
	if err != nil {
		return nil, err
	}
	r.mu.Lock()
	rt, ok := r.models[l.Name()]
	r.mu.Unlock()
	if ok && rt.gen == in.Gen {
		return rt.m, nil
	}
	o := l.Options()
	s := r.o.Settings
	if own, ok := o.Extra.(Settings); ok {
		s = own
	}
	m, err := NewModel(e, l.Model(), o.Path, []string{l.Name()}, o.Tags, s)
	if err != nil {
		return nil, fmt.Errorf("model '%s': %w", l.Name(), err)
	}
	r.mu.Lock()
	r.models[l.Name()] = routed{gen: in.Gen, m: m}
	r.mu.Unlock()
	return m, nil
}

// poolError is the pool's error as the router words it: an unknown name
// and a model not loaded as router_validate_model, a failed load as
// ensure_model_ready (500), a model that finds no memory 503.
func (r *Router) poolError(ctx context.Context, err error) error {
	var room *pool.RoomError
	switch {
	case ctx.Err() != nil && (errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded)):
		return err
	case errors.Is(err, pool.ErrNotFound):
		return ErrUnknownModel
	case errors.Is(err, pool.ErrNotLoaded):
		return ErrNotLoaded
	case errors.As(err, &room):
		return errf(serve.ErrUnavailable, "%s", room.Error())
	case errors.Is(err, pool.ErrClosed):
		return errf(serve.ErrUnavailable, "the server is shutting down")
	}
	return errf(serve.ErrServer, "%s", err.Error())
}

// List is the pool's catalog, each model with its state: a loaded model
// with what /v1/models tells of it (described at its first request or
// list after its load, as the router's child tells it once loaded), a
// model whose last load failed marked failed.
func (r *Router) List(ctx context.Context) []ModelStatus {
	infos := r.p.Models()
	out := make([]ModelStatus, 0, len(infos))
	for _, in := range infos {
		s := ModelStatus{Name: in.Name, Aliases: in.Aliases, Tags: in.Tags, Status: in.Status.String(), Source: in.Source.String(),
			Failed: in.Status == pool.Unloaded && in.Err != nil, Args: presetArgs(in.Settings), Preset: presetINI(in.Name, in.Settings)}
		r.mu.Lock()
		rt, ok := r.models[in.Name]
		switch {
		case ok && in.Status == pool.Sleeping:
			// (a sleeping model is listed as it was loaded, as the
			// router lists its sleeping child)
			s.Loaded = rt.m
		case ok && rt.gen != in.Gen:
			delete(r.models, in.Name) // (an engine closed since)
			ok = false
		}
		r.mu.Unlock()
		if in.Status == pool.Loaded {
			if !ok {
				// (a lease without autoload: nothing loads)
				if l, err := r.p.Acquire(ctx, in.Name, false); err == nil {
					s.Loaded, _ = r.describe(l)
					l.Release()
				}
			} else {
				s.Loaded = rt.m
			}
		}
		out = append(out, s)
	}
	return out
}

// Load starts loading a model (POST /models/load) and returns: the load
// goes on, as the router's child starts, and GET /models tells how it
// ends. A model loaded, loading or sleeping is running already.
func (r *Router) Load(ctx context.Context, name string) error {
	in, err := r.p.Model(name)
	if err != nil {
		return r.poolError(ctx, err)
	}
	if in.Status != pool.Unloaded {
		return ErrRunning
	}
	started, cancel := context.WithCancel(ctx)
	cancel()
	// (a cancelled context: the load starts, detached, and Load returns)
	err = r.p.Load(started, in.Name)
	switch {
	case err == nil, errors.Is(err, context.Canceled):
		return nil
	case errors.Is(err, pool.ErrRunning):
		return ErrRunning
	}
	return r.poolError(ctx, err)
}

// Unload unloads a model (POST /models/unload): its requests finish
// first (the pool's StopTimeout), then its memory is freed. A model
// that is not resident is not running; a sleeping one holds nothing
// already.
func (r *Router) Unload(ctx context.Context, name string) error {
	in, err := r.p.Model(name)
	if err != nil {
		return r.poolError(ctx, err)
	}
	switch in.Status {
	case pool.Unloaded:
		return ErrNotRunning
	case pool.Sleeping:
		return nil // (it holds nothing: the router stops a sleeping child)
	}
	err = r.p.Unload(ctx, in.Name)
	if errors.Is(err, pool.ErrNotLoaded) {
		return ErrNotRunning
	}
	if err != nil {
		return r.poolError(ctx, err)
	}
	return nil
}

// Props are --models-max (the pin's 0 for no limit) and autoload.
func (r *Router) Props() RouterProps {
	return RouterProps{MaxInstances: max(r.p.ModelsMax(), 0), Autoload: !r.o.NoAutoload}
}

// presetArgs are a model's settings as the arguments of a command line
// (common_preset::to_args, without the program): "--key value".
func presetArgs(settings []pool.Setting) []string {
	var out []string
	for _, st := range settings {
		out = append(out, "--"+st.Key, st.Value)
	}
	return out
}

// presetINI is a model's settings as common_preset::to_ini writes them:
// its section, then "key = value" lines, newlines in values escaped.
func presetINI(name string, settings []pool.Setting) string {
	var b strings.Builder
	fmt.Fprintf(&b, "[%s]\n", name)
	for _, st := range settings {
		fmt.Fprintf(&b, "%s = %s\n", st.Key, strings.ReplaceAll(st.Value, "\n", "\\\n"))
	}
	b.WriteString("\n")
	return b.String()
}

// Reload reads the models directory and the presets file again
// (load_models): a model gone or changed is unloaded, new ones listed.
func (r *Router) Reload(ctx context.Context) error {
	if err := r.p.Reload(ctx); err != nil {
		return errf(serve.ErrServer, "%s", err.Error())
	}
	return nil
}
