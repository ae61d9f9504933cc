package pool

import (
	"log/slog"
	"time"

	"github.com/ggload/ggload/loader"
	"github.com/ggload/ggload/place"
	"github.com/ggload/ggload/serve"
)

// Params are the pool's options: llama-server's router options and the
// memory the pool may fill. The zero value is llama-server's defaults,
// each device's budget its free memory.
type Params struct {
	// ModelsDir is --models-dir: a directory of GGUF files, each a model
	// (see the package documentation for how it is read).
	ModelsDir string
	// ModelsPreset is --models-preset: an INI file of models and their
	// options.
	ModelsPreset string
	// ModelsMax is --models-max, the most models resident (or loading)
	// at once; 0: 4, llama-server's default; negative: no limit (the
	// pin's --models-max 0).
	ModelsMax int
	// SleepIdle is --sleep-idle-seconds: a model no request has used for
	// this long is unloaded (its status becomes Sleeping and a request
	// loads it again); 0: never (the pin's -1). A model's own KeepAlive
	// takes priority.
	SleepIdle time.Duration
	// MaxWait bounds how long a load waits for memory (or for
	// --models-max) that busy models hold; 0: DefaultMaxWait; negative:
	// a load that does not fit at once is refused. Each request's own
	// context bounds its wait too.
	MaxWait time.Duration
	// StopTimeout is how long Unload lets a model's requests finish
	// before it ends them (the router's stop-timeout); 0: 10 s.
	StopTimeout time.Duration

	// Budgets is the memory the pool may fill on each device, by the
	// device's name ("CPU" for the host's memory). A device left out
	// gets its free memory when the pool starts, as the device reports
	// it; the host gets the memory the system says is available
	// (MemAvailable on Linux; elsewhere the total ggml reports).
	Budgets []Budget

	// Defaults are every model's options before its own settings (the
	// router's own command line as it applies to its models).
	Defaults Options
	// Configure, when not nil, reads a preset's settings (those the pool
	// does not read itself, in order: the presets file's "[*]" section,
	// then the model's) into o, which holds Defaults and the settings
	// the pool read (model, mmproj, alias, tags, load-on-startup, pin,
	// keep-alive). ggload serve passes its own reader of llama-server's
	// options. Nil: the pool reads a few options itself (see
	// the package documentation) and refuses the others.
	Configure func(name string, settings []Setting, o *Options) error

	// Logger receives the pool's decisions (loads, evictions,
	// refusals); nil: none.
	Logger *slog.Logger
}

// DefaultMaxWait is how long a load waits for memory by default.
const DefaultMaxWait = 5 * time.Minute

// DefaultModelsMax is llama-server's --models-max.
const DefaultModelsMax = 4

// DefaultStopTimeout is the router's stop timeout (DEFAULT_STOP_TIMEOUT).
const DefaultStopTimeout = 10 * time.Second

// HostDevice names the host's memory in Budgets and in reports.
const HostDevice = "CPU"

// Budget is the memory the pool may fill on one device.
type Budget struct {
	Device string
	Bytes  uint64
}

// Options are one model's: its file, how it is placed, loaded and
// served, and how it stays resident.
type Options struct {
	// Path is the model's GGUF file (-m), the first of a split model's.
	Path string
	// Mmproj is the projector found beside the model (--mmproj). It is
	// listed, not loaded: the engine serves text.
	Mmproj string
	// Draft is the speculative draft found beside the model
	// (--model-draft). It is listed, not loaded: the engine decodes the
	// model alone.
	Draft string
	// Aliases and Tags are --alias and --tags: other names the model
	// answers to, and labels for lists.
	Aliases, Tags []string

	// Place are the placement and context options (-ngl, -c, -np, ...).
	// A context of 0 sequences is llama-server's -np auto: 4 slots over
	// one unified cache.
	Place place.Params
	// NoFit is -fit off: the model is planned as its options say.
	NoFit bool
	// Fit are -fit's own options (-fitt, -fitc). Its targets are kept
	// free within the memory the pool gives the model.
	Fit place.FitOptions
	// Load are the loader's options (its progress callback included).
	Load loader.Options
	// Serve are the engine's options.
	Serve serve.Params

	// KeepAlive is how long the model stays resident with no request;
	// 0: Params.SleepIdle; negative: until evicted for room.
	KeepAlive time.Duration
	// Pin keeps the model resident: it is never evicted for room nor
	// unloaded for idleness (Unload and Close still unload it).
	Pin bool
	// LoadOnStartup loads the model when the pool starts
	// (load-on-startup).
	LoadOnStartup bool

	// Extra is the program's own (Configure's): what its layer above
	// keeps per model, handed back with each Lease.
	Extra any
}

// Status is a model's state, named as llama-server's router names it.
type Status int

const (
	Unloaded Status = iota // not resident (Info.Err says why a load failed)
	Loading                // planned, waiting for room, or loading
	Loaded                 // resident: requests run on it
	Sleeping               // unloaded after it was idle (KeepAlive, SleepIdle)
)

func (s Status) String() string {
	switch s {
	case Loading:
		return "loading"
	case Loaded:
		return "loaded"
	case Sleeping:
		return "sleeping"
	}
	return "unloaded"
}

// Source is where a model was found (server_model_source).
type Source int

const (
	FromProgram   Source = iota // added by the program (Pool.Add)
	FromModelsDir               // the models directory
	FromPreset                  // the presets file
)

func (s Source) String() string {
	switch s {
	case FromModelsDir:
		return "models_dir"
	case FromPreset:
		return "preset"
	}
	return "program"
}
