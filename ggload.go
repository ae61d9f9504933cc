package ggload

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/ggload/ggload/chat"
	"github.com/ggload/ggload/ggml"
	"github.com/ggload/ggload/gguf"
	"github.com/ggload/ggload/gguf/httpsrc"
	"github.com/ggload/ggload/loader"
	"github.com/ggload/ggload/place"
	"github.com/ggload/ggload/serve"
)

// HubPrefix starts a model name that is a Hugging Face repository:
// "hf:OWNER/NAME[:QUANT]", llama.cpp's -hf.
const HubPrefix = "hf:"

// Options are how a model is opened: each field is the options of the
// package that owns that step, and the zero value of each is llama.cpp's
// defaults (llama-server's, where the server has its own).
type Options struct {
	// Runtime opens the native libraries (the library directory, the
	// variant, RPC servers). Zero: the installed set, every backend.
	Runtime ggml.Options
	// Place is where the weights go and the context beside them (-ngl,
	// -dev, -ot, -c, -np, -b, --embeddings, --pooling, ...). A zero
	// Context.NParallel is llama-server's -np auto: 4 slots over one
	// unified cache. Context.Embeddings makes the model an embedding
	// model, as llama-server's --embeddings: Embed answers, and its
	// batch is one ubatch.
	Place place.Params
	// NoFit is -fit off: the context and the layers are as Place says,
	// whether the devices hold them or not. Fit are -fit's targets and
	// its least context (-fitt, -fitc).
	NoFit bool
	Fit   place.FitOptions
	// Load is how the weights are read (the loader's readers, staging,
	// a check of the tensors, a progress callback).
	Load loader.Options
	// Serve are llama-server's engine options (-t, -n, --cache-ram,
	// --ctx-checkpoints, -r, the default sampling, ...).
	Serve serve.Params
	// ChatTemplate is --chat-template: a built-in template's name or a
	// Jinja source; "": the model's own (ChatML where it has none).
	ChatTemplate string
	// Chat are llama-server's chat options (--no-jinja, --reasoning,
	// --reasoning-format, --chat-template-kwargs, ...).
	Chat chat.ServerOptions
	// HTTP are the requests' options of a URL or hub model (the token,
	// the client, the timeouts).
	HTTP httpsrc.Options
	// HubFile is -hff: the hub repository's file to bring, by its path,
	// in place of the one the quant tag chooses.
	HubFile string
	// Offline is --offline: a hub model comes from the Hugging Face cache
	// alone, or Open fails naming what the cache lacks.
	Offline bool
}

// Error is an error of a Model: what failed (Op: "open", "generate",
// "chat", "embed"), the model's name as Open was given it, and why.
type Error struct {
	Op   string
	Name string
	Err  error
}

func (e *Error) Error() string { return "ggload: " + e.Op + " " + e.Name + ": " + e.Err.Error() }
func (e *Error) Unwrap() error { return e.Err }

// ErrClosed is wrapped by the errors of a closed Model's methods, and
// of the requests under way when it closed.
var ErrClosed = errors.New("the model is closed")

// Model is an open model and llama-server's engine on it. Its methods
// may be called from any goroutine.
type Model struct {
	name string
	path string // the local file, or the URL, that was loaded
	opts Options

	rt      *ggml.Runtime
	gm      *gguf.Model
	lm      *loader.Model
	e       *serve.Engine
	release func() // the RPC connections held

	tmplOnce sync.Once
	tmpl     *chat.Templates
	tmplErr  error

	closed    atomic.Bool
	closeOnce sync.Once
	closeErr  error
}

// Open opens the model name names (a path, "hf:OWNER/NAME[:QUANT]" or a
// URL), places it as llama.cpp places it (with -fit unless NoFit), loads
// its weights and starts llama-server's engine on them. On an error,
// everything it made is freed.
func Open(ctx context.Context, name string, o Options) (_ *Model, err error) {
	m := &Model{name: name, opts: o}
	defer func() {
		if err != nil {
			m.Close()
			err = &Error{Op: "open", Name: name, Err: err}
		}
	}()
	if name == "" {
		return nil, errors.New("no model: want a GGUF file's path, " + HubPrefix + "OWNER/NAME[:QUANT] or a URL")
	}
	if m.rt, err = ggml.Open(ctx, o.Runtime); err != nil {
		return nil, err
	}
	if m.gm, err = m.openFile(ctx); err != nil {
		return nil, err
	}
	params := serverParams(o.Place)
	m.release = place.KeepConnected(m.rt, params)
	plan, err := m.plan(ctx, params)
	if err != nil {
		return nil, err
	}
	if m.lm, err = loader.Load(ctx, plan, o.Load); err != nil {
		return nil, err
	}
	if m.e, err = serve.New(m.lm, o.Serve); err != nil {
		return nil, err
	}
	return m, nil
}

// openFile reads the model's header: a hub repository's file brought
// into the cache first, a URL's over HTTP.
func (m *Model) openFile(ctx context.Context) (*gguf.Model, error) {
	o := &m.opts
	switch {
	case strings.HasPrefix(m.name, HubPrefix):
		repo := strings.TrimPrefix(m.name, HubPrefix)
		hm, err := httpsrc.Pull(ctx, repo, httpsrc.HubOptions{Options: o.HTTP, File: o.HubFile, Offline: o.Offline})
		if err != nil {
			return nil, err
		}
		m.path = hm.Path()
	case o.HubFile != "":
		return nil, fmt.Errorf("Options.HubFile %s names a file of a hub repository: the model's name wants the %s prefix", o.HubFile, HubPrefix)
	case httpsrc.IsURL(m.name):
		m.path = m.name
		return httpsrc.OpenModel(ctx, m.name, o.HTTP)
	default:
		m.path = m.name
	}
	return gguf.OpenModel(m.path)
}

// serverParams are the placement options as llama-server adjusts them
// before it loads: -np auto (4 slots over one unified cache), and an
// embedding model's batch of one ubatch.
func serverParams(p place.Params) place.Params {
	serve.ServerContext(&p.Context, p.Context.NParallel == 0)
	return p
}

// plan is the model's placement: -fit's unless NoFit, with a context
// llama.cpp would make.
func (m *Model) plan(ctx context.Context, params place.Params) (*place.Plan, error) {
	var plan *place.Plan
	if m.opts.NoFit {
		p, err := place.New(ctx, m.rt, m.gm, params)
		if err != nil {
			return nil, err
		}
		plan = p
	} else {
		fit, err := place.Fit(ctx, m.rt, m.gm, params, m.opts.Fit)
		if err != nil {
			return nil, err
		}
		plan = fit.Plan
	}
	if plan.ContextErr != nil {
		return nil, fmt.Errorf("the context: %w", plan.ContextErr)
	}
	if plan.Context == nil {
		return nil, fmt.Errorf("no context: %s is a model llama.cpp makes no context of alone", plan.Arch)
	}
	return plan, nil
}

// Close ends the requests under way (their errors wrap ErrClosed), stops the engine and frees what
// Open made: the context, the weights, the runtime, the files. Closing
// twice does nothing more.
func (m *Model) Close() error {
	m.closeOnce.Do(func() {
		m.closed.Store(true)
		var errs []error
		if m.e != nil {
			errs = append(errs, m.e.Close())
		}
		if m.lm != nil {
			errs = append(errs, m.lm.Close())
		}
		if m.release != nil {
			m.release()
		}
		if m.gm != nil {
			errs = append(errs, m.gm.Close())
		}
		if m.rt != nil {
			errs = append(errs, m.rt.Close())
		}
		if err := errors.Join(errs...); err != nil {
			m.closeErr = &Error{Op: "close", Name: m.name, Err: err}
		}
	})
	return m.closeErr
}

// Name is the model's name as Open was given it; Path the file (or URL)
// it loaded, a hub model's in the Hugging Face cache.
func (m *Model) Name() string { return m.name }
func (m *Model) Path() string { return m.path }

// Engine is llama-server's engine on the model, for what this package
// does not say (infill, rerank, slots, the engine's memory).
func (m *Model) Engine() *serve.Engine { return m.e }

// Templates are the model's chat templates (Options.ChatTemplate's
// where it is set), as llama-server reads them.
func (m *Model) Templates() (*chat.Templates, error) {
	m.tmplOnce.Do(func() {
		m.tmpl, m.tmplErr = chat.FromModel(m.gm, m.e.Vocab(), chat.Options{Template: m.opts.ChatTemplate, Name: "Options.ChatTemplate"})
	})
	return m.tmpl, m.tmplErr
}

// fail wraps a request's error with the model and the operation.
func (m *Model) fail(op string, err error) error {
	if err == nil {
		return nil
	}
	if m.closed.Load() && !errors.Is(err, ErrClosed) {
		err = fmt.Errorf("%w: %w", ErrClosed, err)
	}
	return &Error{Op: op, Name: m.name, Err: err}
}
