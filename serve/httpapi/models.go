package httpapi

import (
	"context"
	"path/filepath"
	"slices"
	"sort"

	"github.com/ggload/ggload/chat"
	"github.com/ggload/ggload/loader"
	"github.com/ggload/ggload/serve"
	"github.com/ggload/ggload/vocab"
)

// Engine is what a model's requests run on: *serve.Engine.
type Engine interface {
	Complete(ctx context.Context, prompt []int32, o serve.Options, on func(serve.Event) error) (*serve.Result, error)
	Infill(ctx context.Context, prompt []int32, o serve.Options, on func(serve.Event) error) (*serve.Result, error)
	Post(ctx context.Context, reqs []serve.Request) ([]*serve.Pending, error)
	Embed(ctx context.Context, prompt []int32, o serve.Options) (*serve.Embedding, error)
	Rerank(ctx context.Context, prompt []int32, o serve.Options) (float32, error)
	Slots(ctx context.Context) ([]serve.SlotInfo, error)
	SaveSlot(ctx context.Context, id int, filename string) (*serve.SlotFile, error)
	RestoreSlot(ctx context.Context, id int, filename string) (*serve.SlotFile, error)
	EraseSlot(ctx context.Context, id int) (int, error)
	Defaults() serve.Options
	Info() serve.Info
	Vocab() *vocab.Vocab
}

var _ Engine = (*serve.Engine)(nil)

// Model is one model the handler serves: its engine, the names requests
// reach it by, and what llama-server tells of it (server_context_meta).
type Model struct {
	Engine Engine

	// Name is the model's name in answers (model_name): the first alias
	// in order, else the path it was loaded from.
	Name    string
	Aliases []string // sorted, as llama-server's std::set holds them
	Tags    []string
	Path    string

	// What /v1/models tells of the model.
	VocabType int // llama_vocab_type
	NVocab    int
	NCtxTrain int
	NEmbd     int
	NParams   uint64
	Size      uint64
	FType     string

	// RerankTemplate is the model's rerank prompt
	// (tokenizer.chat_template.rerank), where it has one.
	RerankTemplate    string
	HasRerankTemplate bool

	// Chat are the model's chat templates (nil: the chat endpoints are
	// refused).
	Chat *chat.Templates

	// Settings are the server's options for the model (the parts of
	// common_params its handlers read).
	Settings Settings
}

// Settings are the server's options that its handlers read for a model
// (common_params): a zero value is llama-server's defaults.
type Settings struct {
	// NParallel is -np, the slots (total_slots; n_cmpl's limit).
	NParallel int
	// NBatch is -b, the batch an infill's extra context is cut to.
	NBatch int
	// NPredict is -n, the server's n_predict (infill's budget).
	NPredict int
	// SPMInfill is --spm-infill: the suffix before the prefix.
	SPMInfill bool
	// Embedding is --embedding, and Rerank --reranking.
	Embedding, Rerank bool
	// SlotSavePath is --slot-save-path ("": slot actions are refused).
	SlotSavePath string
	// EmbdNormalize is --embd-normalize; NoEmbdNormalize: -1.
	EmbdNormalize   int
	NoEmbdNormalize bool
	// SSEPingInterval is --sse-ping-interval in seconds; 0: 30,
	// negative: none.
	SSEPingInterval int
	// Verbose is --verbose: answers carry __verbose.
	Verbose bool
	// UI is the web UI's switch as /props reports it (ggload has none).
	UI bool
	// Chat are the chat options.
	Chat ChatSettings
}

func (s Settings) embdNormalize() int {
	switch {
	case s.NoEmbdNormalize:
		return -1
	case s.EmbdNormalize == 0:
		return 2
	}
	return s.EmbdNormalize
}

func (s Settings) ssePing() int {
	if s.SSEPingInterval == 0 {
		return 30
	}
	return s.SSEPingInterval
}

// NewModel describes an engine on a loaded model as llama-server names
// and describes it: aliases (--alias) and tags (--tags), the model's
// name from the first alias or the path, its chat templates.
func NewModel(e *serve.Engine, m *loader.Model, path string, aliases, tags []string, s Settings) (*Model, error) {
	al := slices.Clone(aliases)
	sort.Strings(al)
	al = slices.Compact(al)
	tg := slices.Clone(tags)
	sort.Strings(tg)
	tg = slices.Compact(tg)
	name := path
	if len(al) > 0 {
		name = al[0]
	} else if name == "" {
		name = filepath.Base(path)
	}
	if len(al) == 0 && name != "" {
		al = []string{name}
	}
	info := e.Info()
	mo := &Model{Engine: e, Name: name, Aliases: al, Tags: tg, Path: path, Settings: s,
		NVocab: e.Vocab().NTokens(), NCtxTrain: info.NCtxTrain, VocabType: int(e.Vocab().Type())}
	if s.NParallel == 0 {
		mo.Settings.NParallel = info.NSlots
	}
	if s.NBatch == 0 {
		mo.Settings.NBatch = info.NBatch
	}
	if m != nil && m.Plan != nil && m.Plan.Model != nil {
		g := m.Plan.Model
		mo.NParams, mo.Size = g.NElements, g.NBytes
		mo.FType = g.FileTypeName()
		if t, err := g.String("tokenizer.chat_template.rerank"); err == nil {
			mo.RerankTemplate, mo.HasRerankTemplate = t, true
		}
		if a := g.Architecture(); a != "" {
			if n, err := g.Uint(a + ".embedding_length"); err == nil {
				mo.NEmbd = int(n)
			}
		}
		t, err := chat.FromModel(g, e.Vocab(), chat.Options{Template: s.Chat.Template, Name: s.Chat.TemplateName})
		if err != nil {
			return nil, err
		}
		mo.Chat = t
	}
	return mo, nil
}

// ModelStatus is one model of a router's list (GET /models).
type ModelStatus struct {
	Name    string
	Aliases []string
	Tags    []string
	// Status is "loaded", "loading", "unloaded" or "sleeping".
	Status string
	// Failed: the model's last load failed (Status "unloaded").
	Failed bool
	// Args are the model's options as a command line (the router lists
	// its child's), and Preset its preset as an INI section
	// (common_preset::to_ini; "": none).
	Args   []string
	Preset string
	// Source is where the model was found ("models_dir", "preset", ...).
	Source string
	// Loaded is the model while it runs.
	Loaded *Model
}

// Models is what the handler serves: one model (Single), or a pool of
// them by name (llama-server's router mode), which a request names in
// its "model" field.
type Models interface {
	// Router says whether requests are routed by the model they name
	// (the router's endpoints: /models, /models/load, /models/unload).
	Router() bool
	// Acquire is the model a request names, loaded first where autoload
	// allows it; release ends the request's use of it. In single mode
	// the name is not read.
	Acquire(ctx context.Context, name string, autoload bool) (m *Model, release func(), err error)
	// List describes the models.
	List(ctx context.Context) []ModelStatus
	// Load and Unload load and unload a model by name (router only).
	Load(ctx context.Context, name string) error
	Unload(ctx context.Context, name string) error
	// Props is what a router's GET /props reports.
	Props() RouterProps
	// Reload reads the router's models again (GET /models?reload=1).
	Reload(ctx context.Context) error
}

// RouterProps are a router's limits, as GET /props reports them.
type RouterProps struct {
	MaxInstances int
	Autoload     bool
}

// Single serves one model, whatever a request names, as llama-server
// does without --models-dir.
type Single struct{ M *Model }

func (s Single) Router() bool { return false }

func (s Single) Acquire(context.Context, string, bool) (*Model, func(), error) {
	return s.M, func() {}, nil
}

func (s Single) List(context.Context) []ModelStatus {
	return []ModelStatus{{Name: s.M.Name, Aliases: s.M.Aliases, Tags: s.M.Tags, Status: "loaded", Loaded: s.M}}
}

func (s Single) Load(context.Context, string) error {
	return errf(serve.ErrNotSupported, "this server serves one model: start it with --models-dir to load models")
}

func (s Single) Unload(context.Context, string) error {
	return errf(serve.ErrNotSupported, "this server serves one model: start it with --models-dir to unload models")
}

func (s Single) Props() RouterProps { return RouterProps{} }

func (s Single) Reload(context.Context) error { return nil }
