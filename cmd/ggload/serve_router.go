package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"os"
	"strings"
	"time"

	"github.com/ggload/ggload/loader"
	"github.com/ggload/ggload/serve/httpapi"
	"github.com/ggload/ggload/serve/pool"
)

// routerFlags are llama-server's router options: the models it serves
// (a directory, a presets file), how many may be loaded at once, whether
// a request loads its model, and idleness. ggload's router holds its
// models in one process (package serve/pool), by their exact memory.
type routerFlags struct {
	modelsDir    string
	modelsPreset string
	modelsMax    int // the pin's: 0 no limit
	noAutoload   bool
	sleepIdle    int // seconds; -1: never
}

func (rf *routerFlags) add(s *optionSet) {
	s.group("router (llama-server's router mode: no model given, the models of a directory or presets file, loaded by exact memory)")
	s.add(&option{names: []string{"--models-dir"}, value: "PATH", env: "LLAMA_ARG_MODELS_DIR",
		help: "directory containing models for the router server (default: disabled)",
		set:  func(v string) error { rf.modelsDir = v; return nil }})
	s.add(&option{names: []string{"--models-preset"}, value: "PATH", env: "LLAMA_ARG_MODELS_PRESET",
		help: "path to INI file containing model presets for the router server (default: disabled)",
		set:  func(v string) error { rf.modelsPreset = v; return nil }})
	s.add(&option{names: []string{"--models-max"}, value: "N", env: "LLAMA_ARG_MODELS_MAX",
		help: fmt.Sprintf("for router server, maximum number of models to load simultaneously (default: %d, 0 = unlimited); memory limits them too", pool.DefaultModelsMax),
		set: func(v string) error {
			n, err := intIn(v, math.MinInt32, math.MaxInt32)
			rf.modelsMax = int(n)
			return err
		}})
	s.add(&option{names: []string{"--models-autoload"}, neg: []string{"--no-models-autoload"}, env: "LLAMA_ARG_MODELS_AUTOLOAD",
		help: "for router server, whether to automatically load models (default: enabled)",
		on:   func(on bool) error { rf.noAutoload = !on; return nil }})
	s.add(&option{names: []string{"--sleep-idle-seconds"}, value: "SECONDS",
		help: "number of seconds of idleness after which a model is unloaded (router mode; default: -1 = disabled)",
		set: func(v string) error {
			n, err := intIn(v, math.MinInt32, math.MaxInt32)
			if err == nil && (n == 0 || n < -1) {
				err = errors.New("invalid value: cannot be 0 or less than -1")
			}
			rf.sleepIdle = int(n)
			return err
		}})
}

func newRouterFlags() routerFlags {
	return routerFlags{modelsMax: pool.DefaultModelsMax, sleepIdle: -1}
}

// given lists the router's options the command line gave (the
// environment's are left alone, as llama-server leaves them with one
// model).
func (rf *routerFlags) given(s *optionSet) []string {
	var out []string
	for _, n := range []string{"--models-dir", "--models-preset", "--models-max", "--models-autoload"} {
		if o := s.byName[n]; s.given[o] && !s.setByEnv(o) {
			out = append(out, n)
		}
	}
	return out
}

// params are the pool's options: the router's, and each model's read by
// configure.
func (rf *routerFlags) params(args []string) pool.Params {
	p := pool.Params{ModelsDir: rf.modelsDir, ModelsPreset: rf.modelsPreset, ModelsMax: rf.modelsMax,
		Configure: configureModel(args), Logger: slog.New(slog.NewTextHandler(os.Stderr, nil))}
	if rf.modelsMax <= 0 {
		p.ModelsMax = -1 // (the pin's 0: no limit)
	}
	if rf.sleepIdle > 0 {
		p.SleepIdle = time.Duration(rf.sleepIdle) * time.Second
	}
	return p
}

// configureModel reads one model's options as llama-server's router
// makes its child's command line: the model's preset (the presets
// file's "[*]" section, then its own) rendered as arguments
// (common_preset::to_args), with the router's own command line over
// them (load_models merges base_preset last), read as ggload serve reads
// a command line, the environment first.
func configureModel(router []string) func(string, []pool.Setting, *pool.Options) error {
	return func(name string, settings []pool.Setting, o *pool.Options) error {
		pf := defaultPlaceFlags()
		sf := newServeFlags()
		s := serveOptions(&pf, &sf)
		args, err := presetArgs(s, name, settings)
		if err != nil {
			return err
		}
		pos, err := s.parse(append(args, router...))
		if err != nil {
			return err
		}
		if len(pos) > 0 {
			return fmt.Errorf("preset '%s': %s is no option", name, pos[0])
		}
		if err := pf.finish(s); err != nil {
			return err
		}
		if pf.hub.repo != "" || pf.modelURL != "" {
			// (listed, as the router lists it; its load fails: it has no
			// local file)
			fmt.Fprintf(os.Stderr, "ggload: serve: warning: preset '%s': -hf and -mu: the router's models are local files (model = PATH); it is listed and cannot load\n", name)
			pf.hub.repo, pf.modelURL = "", ""
		}
		if err := routerRefuses(&pf); err != nil {
			return fmt.Errorf("preset '%s': %w", name, err)
		}
		if err := sf.prepare(s, &pf); err != nil {
			return err
		}
		o.Place = pf.params()
		o.NoFit, o.Fit = !pf.fit, pf.fitOptions()
		o.Load = loader.Options{CheckTensors: pf.check}
		o.Serve = sf.engine
		// (the engine adds the model's own sampling defaults to the
		// options that leave them unset)
		sp := sf.sampling.params(nil, true)
		o.Serve.Sampling = &sp
		o.Extra = sf.settings
		return nil
	}
}

// routerRefuses names what a model of ggload's router cannot have: its
// file from elsewhere than the models directory or the presets file,
// adapters, a projector, a draft.
func routerRefuses(pf *placeFlags) error {
	switch {
	case pf.hub.repo != "" || pf.modelURL != "":
		return errors.New("-hf and -mu: the router's models are local files (--models-dir, or model = PATH in --models-preset)")
	case len(pf.lora.files) > 0:
		return errors.New("--lora: the router's models take no adapter yet")
	case len(pf.cvec.files) > 0:
		return errors.New("--control-vector: the router's models take no control vector yet")
	case pf.mmproj.given():
		return fmt.Errorf("-mm: %s", whyMedia)
	case pf.draft.model != "":
		return fmt.Errorf("-md: %s", whySpec)
	}
	return nil
}

// presetArgs renders a model's settings as arguments, as
// common_preset::to_args does: a key is an option's spelling without its
// dashes or its environment variable; a switch set false takes its
// negative spelling (or is left out); a negative spelling's value is
// turned over.
func presetArgs(s *optionSet, name string, settings []pool.Setting) ([]string, error) {
	byEnv := map[string]*option{}
	for _, g := range s.groups {
		for _, o := range g.opts {
			if o.env != "" {
				byEnv[o.env] = o
			}
		}
	}
	var args []string
	for _, st := range settings {
		o, spelled := byEnv[st.Key], ""
		if o != nil {
			spelled = o.names[len(o.names)-1]
		} else if strings.HasPrefix(st.Key, "-") || st.Key == "" {
			o = nil
		} else if o2, ok := s.lookup("--" + st.Key); ok {
			o, spelled = o2, "--"+st.Key
			if _, exact := s.byName[spelled]; !exact {
				spelled = "-" + st.Key
			}
		}
		if o == nil {
			return nil, fmt.Errorf("option '%s' not recognized in preset '%s'", st.Key, name)
		}
		switch {
		case o.set2 != nil:
			return nil, fmt.Errorf("preset '%s': option '%s' has two values, which is not supported yet", name, st.Key)
		case o.value == "" && !o.optValue:
			on, ok := parseBool(st.Value)
			if !ok {
				on = false // (is_truthy: any other word is false)
			}
			if contains(o.neg, spelled) {
				on, spelled = !on, o.names[len(o.names)-1]
			}
			if !on {
				if len(o.neg) == 0 {
					continue
				}
				spelled = o.neg[len(o.neg)-1]
			}
			args = append(args, spelled)
		default:
			args = append(args, spelled+"="+st.Value)
		}
	}
	return args, nil
}

// serveRouter serves the pool's models until the context ends.
func (sf *serveFlags) serveRouter(ctx context.Context, pf *placeFlags, args []string) error {
	if err := routerRefuses(pf); err != nil {
		return err
	}
	rt, err := pf.open(ctx)
	if err != nil {
		return err
	}
	defer rt.Close()
	p, err := pool.New(rt, sf.router.params(args))
	if err != nil {
		return fmt.Errorf("serve: %w", err)
	}
	defer p.Close()
	r := httpapi.NewRouter(p, httpapi.RouterOptions{NoAutoload: sf.router.noAutoload, Settings: sf.settings})
	h := httpapi.New(r, sf.http)
	srv, errc, err := sf.start(h)
	if err != nil {
		return err
	}
	defer srv.Close()
	h.SetReady()
	n := len(p.Models())
	fmt.Fprintf(os.Stderr, "ggload: serve: router mode, %d models (--models-max %d; memory as the pool measures it)\n", n, sf.router.modelsMax)
	return sf.wait(ctx, srv, errc)
}
