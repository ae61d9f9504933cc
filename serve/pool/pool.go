package pool

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"slices"
	"sort"
	"sync"
	"time"

	"github.com/ggload/ggload/ggml"
	"github.com/ggload/ggload/gguf"
	"github.com/ggload/ggload/loader"
	"github.com/ggload/ggload/place"
	"github.com/ggload/ggload/serve"
)

// Pool serves many models from one process: models by name, each loaded
// on demand into the memory its plan needs exactly, evicted least
// recently used when another needs the room. Its methods may be called
// from any goroutine.
type Pool struct {
	rt     *ggml.Runtime
	p      Params
	ctx    context.Context // the pool's lifetime: loads run in it
	cancel context.CancelFunc
	log    *slog.Logger

	// ledger is the memory per device: the host first, then each device
	// of the runtime (devIndex maps a device to its row).
	ledger   []account
	devIndex map[*ggml.Device]int

	mu      sync.Mutex
	models  map[string]*model   // by name
	names   map[string]*model   // by name and alias
	leaving map[*model]struct{} // out of the catalog, still holding memory
	changed chan struct{}       // closed (and replaced) at every change
	subs    map[*subscriber]struct{}
	closed  bool
	genSeq  uint64         // loads done: each resident model's number
	wg      sync.WaitGroup // loads, unloads and subscribers in progress
}

// account is one device's memory as the pool counts it.
type account struct {
	name   string
	dev    *ggml.Device // nil: the host
	budget uint64
	// live: the device's own report of its free memory bounds what the
	// pool gives too (a device that is not the CPU: others may use it).
	live bool
}

// state is a model's place in its life; Status is what it shows.
type state int

const (
	stUnloaded  state = iota
	stSleeping        // unloaded for idleness
	stAdmitting       // planned or planning, waiting for room: nothing held yet
	stLoading         // room reserved, loading
	stLoaded          // resident
	stUnloading       // resident, being freed
)

// model is one model of the pool: its catalog entry, and while resident
// what it holds.
type model struct {
	name     string
	src      Source
	opts     Options
	settings []Setting // the preset's, for lists

	st  state
	err error // the last load's failure
	job *job  // the load in progress

	// resident (stLoading, stLoaded, stUnloading)
	gen     uint64 // the load's number: leases of an older one are stale
	gm      *gguf.Model
	lm      *loader.Model
	e       *serve.Engine
	stamp   []fileTimes
	fit     *place.FitResult
	took    LoadTimes
	res     []uint64 // held per account (the plan's while loading, then the engine's)
	planned []uint64 // the plan's
	doneAt  time.Time

	refs     int // leases held
	waiting  int // requests waiting for it to load
	lastUsed time.Time
	useSeq   uint64 // bumped at each lease, to tell an idle timer it is late
	timer    *time.Timer
	draining bool  // no new leases: it unloads when the last ends
	stale    error // why it drains (its file changed)
	removed  bool  // gone from the catalog
}

// New opens the pool over the runtime's devices: the models of
// p.ModelsDir and p.ModelsPreset are listed (not loaded, but those marked
// load-on-startup, which start loading). The runtime stays the caller's:
// close it after the pool.
func New(rt *ggml.Runtime, p Params) (*Pool, error) {
	if rt == nil {
		return nil, errors.New("pool: no runtime")
	}
	if p.ModelsMax == 0 {
		p.ModelsMax = DefaultModelsMax
	}
	if p.MaxWait == 0 {
		p.MaxWait = DefaultMaxWait
	}
	if p.StopTimeout == 0 {
		p.StopTimeout = DefaultStopTimeout
	}
	ctx, cancel := context.WithCancel(context.Background())
	pl := &Pool{rt: rt, p: p, ctx: ctx, cancel: cancel, log: p.Logger, models: map[string]*model{}, names: map[string]*model{}, leaving: map[*model]struct{}{},
		changed: make(chan struct{}), subs: map[*subscriber]struct{}{}}
	if pl.log == nil {
		pl.log = slog.New(slog.DiscardHandler)
	}
	if err := pl.openLedger(); err != nil {
		cancel()
		return nil, err
	}
	cat, err := pl.readCatalog()
	if err != nil {
		cancel()
		return nil, err
	}
	startup := 0
	for _, m := range cat {
		if err := pl.addLocked(m); err != nil {
			cancel()
			return nil, err
		}
		if m.opts.LoadOnStartup {
			startup++
		}
	}
	if p.ModelsMax > 0 && startup > p.ModelsMax {
		cancel()
		return nil, fmt.Errorf("number of models to load on startup (%d) exceeds models_max (%d)", startup, p.ModelsMax)
	}
	pl.mu.Lock()
	for _, name := range slices.Sorted(maps.Keys(pl.models)) {
		if m := pl.models[name]; m.opts.LoadOnStartup {
			pl.startJobLocked(m, true)
		}
	}
	pl.mu.Unlock()
	return pl, nil
}

// openLedger makes the memory accounts: the host, then each device.
func (p *Pool) openLedger() error {
	budgets := map[string]uint64{}
	for _, b := range p.p.Budgets {
		if _, dup := budgets[b.Device]; dup {
			return fmt.Errorf("pool: two budgets for %s", b.Device)
		}
		budgets[b.Device] = b.Bytes
	}
	cpu := p.rt.CPUDevice()
	p.devIndex = map[*ggml.Device]int{}
	host := account{name: HostDevice}
	if b, ok := budgets[HostDevice]; ok {
		host.budget = b
	} else {
		host.budget = hostAvailable(cpu)
	}
	delete(budgets, HostDevice)
	p.ledger = []account{host}
	if cpu != nil {
		p.devIndex[cpu] = 0
	}
	for _, d := range p.rt.Devices() {
		if d == cpu || d.IsMeta() {
			continue
		}
		a := account{name: d.Name(), dev: d, live: true}
		if b, ok := budgets[d.Name()]; ok {
			a.budget = b
			delete(budgets, d.Name())
		} else {
			a.budget, _ = d.Memory()
		}
		p.devIndex[d] = len(p.ledger)
		p.ledger = append(p.ledger, a)
	}
	for name := range budgets {
		return fmt.Errorf("pool: a budget for %s, which is no device of the runtime", name)
	}
	return nil
}

// readCatalog lists the models of the models directory and the presets
// file, as the router's load_models does: the presets file's global
// section under every model, the directory's models, then the presets
// file's (a preset of a directory model's name adds to it).
func (p *Pool) readCatalog() ([]*model, error) {
	var dir, custom map[string]Preset
	var global Preset
	var err error
	if p.p.ModelsDir != "" {
		if dir, err = loadModelsDir(p.p.ModelsDir); err != nil {
			return nil, err
		}
	}
	if p.p.ModelsPreset != "" {
		if custom, global, err = loadINI(p.p.ModelsPreset); err != nil {
			return nil, err
		}
	}
	dir, custom = cascade(global, dir), cascade(global, custom)
	final := map[string]Preset{}
	src := map[string]Source{}
	for name, pr := range dir {
		final[name], src[name] = pr, FromModelsDir
	}
	for name, pr := range custom {
		if f, ok := final[name]; ok {
			f.merge(pr)
			final[name] = f
		} else {
			final[name] = pr
		}
		src[name] = FromPreset
	}
	var out []*model
	for _, name := range slices.Sorted(maps.Keys(final)) {
		pr := final[name]
		o := cloneOptions(p.p.Defaults)
		where := "models directory " + p.p.ModelsDir
		if src[name] == FromPreset {
			where = "presets file " + p.p.ModelsPreset
		}
		if err := applySettings(name, pr.Settings, &o, p.p.Configure); err != nil {
			return nil, fmt.Errorf("pool: %s: model '%s': %w", where, name, err)
		}
		out = append(out, &model{name: name, src: src[name], opts: o, settings: pr.Settings})
	}
	return out, nil
}

// cloneOptions copies o's slices, so that models do not share them.
func cloneOptions(o Options) Options {
	o.Aliases, o.Tags = slices.Clone(o.Aliases), slices.Clone(o.Tags)
	o.Place.DeviceNames = slices.Clone(o.Place.DeviceNames)
	o.Place.TensorSplit = slices.Clone(o.Place.TensorSplit)
	o.Place.Overrides = slices.Clone(o.Place.Overrides)
	o.Place.KVOverrides = slices.Clone(o.Place.KVOverrides)
	o.Fit.Targets = slices.Clone(o.Fit.Targets)
	o.Serve.Stop = slices.Clone(o.Serve.Stop)
	return o
}

// addLocked puts m in the catalog, its name and aliases checked as the
// router's add_model checks them. (New calls it before the pool is
// shared; Add with p.mu held.)
func (p *Pool) addLocked(m *model) error {
	if m.name == "" {
		return errors.New("pool: a model needs a name")
	}
	if _, ok := p.models[m.name]; ok {
		return fmt.Errorf("model '%s' appears multiple times", m.name)
	}
	if o, ok := p.names[m.name]; ok {
		return fmt.Errorf("model name '%s' conflicts with alias of model '%s'", m.name, o.name)
	}
	aliases := sortedSet(m.opts.Aliases)
	for _, a := range aliases {
		if _, ok := p.models[a]; ok {
			return fmt.Errorf("alias '%s' for model '%s' conflicts with existing model name", a, m.name)
		}
		if o, ok := p.names[a]; ok {
			return fmt.Errorf("alias '%s' for model '%s' conflicts with alias of model '%s'", a, m.name, o.name)
		}
	}
	p.models[m.name] = m
	p.names[m.name] = m
	for _, a := range aliases {
		p.names[a] = m
	}
	return nil
}

// sortedSet is a std::set of the strings: sorted, each once.
func sortedSet(s []string) []string {
	out := slices.Clone(s)
	sort.Strings(out)
	return slices.Compact(out)
}

// Add adds a model the program names itself, with its options.
func (p *Pool) Add(name string, o Options) error {
	if o.Path == "" {
		return fmt.Errorf("pool: model '%s' has no model file", name)
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		return ErrClosed
	}
	if err := p.addLocked(&model{name: name, src: FromProgram, opts: cloneOptions(o)}); err != nil {
		return fmt.Errorf("pool: %w", err)
	}
	p.emitLocked(Event{Model: name, Status: Unloaded})
	return nil
}

// Remove unloads a model (as Unload does) and takes it out of the pool.
func (p *Pool) Remove(ctx context.Context, name string) error {
	p.mu.Lock()
	m, err := p.lookupLocked(name)
	if err != nil {
		p.mu.Unlock()
		return err
	}
	m.removed = true
	p.dropNamesLocked(m)
	p.mu.Unlock()
	if err := p.unload(ctx, m); err != nil && !errors.Is(err, ErrNotLoaded) {
		return err
	}
	return nil
}

func (p *Pool) dropNamesLocked(m *model) {
	delete(p.models, m.name)
	if m.st != stUnloaded && m.st != stSleeping {
		p.leaving[m] = struct{}{}
	}
	for n, o := range p.names {
		if o == m {
			delete(p.names, n)
		}
	}
	p.emitLocked(Event{Model: m.name, Status: Unloaded, Removed: true})
}

// lookupLocked is the model of a name or an alias.
func (p *Pool) lookupLocked(name string) (*model, error) {
	if p.closed {
		return nil, ErrClosed
	}
	m, ok := p.names[name]
	if !ok {
		return nil, &NotFoundError{Name: name}
	}
	return m, nil
}

// notifyLocked wakes everything that waits for a change.
func (p *Pool) notifyLocked() {
	close(p.changed)
	p.changed = make(chan struct{})
}

// Reload reads the models directory and the presets file again, as the
// router's load_models does on a reload: a model gone from them, or
// whose settings changed, is unloaded (its requests finish first, as
// Unload lets them) and taken out or updated; new ones are added.
// Models the program added stay as they are.
func (p *Pool) Reload(ctx context.Context) error {
	cat, err := p.readCatalog()
	if err != nil {
		return err
	}
	fresh := map[string]*model{}
	for _, m := range cat {
		fresh[m.name] = m
	}
	p.mu.Lock()
	if p.closed {
		p.mu.Unlock()
		return ErrClosed
	}
	var gone []*model
	for name, m := range p.models {
		if m.src == FromProgram {
			continue
		}
		f, ok := fresh[name]
		if ok && slices.Equal(f.settings, m.settings) && f.src == m.src {
			delete(fresh, name)
			continue
		}
		gone = append(gone, m)
	}
	for _, m := range gone {
		m.removed = true
		p.dropNamesLocked(m)
	}
	p.mu.Unlock()
	var errs []error
	for _, m := range gone {
		if err := p.unload(ctx, m); err != nil && !errors.Is(err, ErrNotLoaded) {
			errs = append(errs, err)
		}
	}
	p.mu.Lock()
	for _, name := range slices.Sorted(maps.Keys(fresh)) {
		if err := p.addLocked(fresh[name]); err != nil {
			p.log.Warn("pool: reload", "model", name, "err", err)
			errs = append(errs, err)
		}
	}
	p.emitLocked(Event{Model: "*", Reload: true})
	p.mu.Unlock()
	return errors.Join(errs...)
}

// Close unloads every model and stops the pool: loads in progress are
// cancelled, requests in progress end with serve.ErrClosed. The runtime
// stays open.
func (p *Pool) Close() error {
	p.mu.Lock()
	if p.closed {
		p.mu.Unlock()
		p.wg.Wait()
		return nil
	}
	p.closed = true
	p.cancel()
	for _, m := range p.allLocked() {
		if m.timer != nil {
			m.timer.Stop()
		}
		if m.job != nil {
			m.job.cancelWith(ErrClosed)
		}
	}
	p.notifyLocked()
	p.mu.Unlock()
	// the loads end first (cancelled), then what is resident goes
	for {
		p.mu.Lock()
		var jobs []*job
		for _, m := range p.allLocked() {
			if m.job != nil {
				jobs = append(jobs, m.job)
			}
		}
		p.mu.Unlock()
		if len(jobs) == 0 {
			break
		}
		for _, j := range jobs {
			<-j.done
		}
	}
	var frees []func()
	p.mu.Lock()
	for _, m := range p.allLocked() {
		if m.st == stLoaded {
			frees = append(frees, p.startUnloadLocked(m, stUnloaded))
		}
	}
	p.mu.Unlock()
	for _, f := range frees {
		f()
	}
	p.wg.Wait()
	return nil
}

// DeviceMemory is one device's memory as the pool counts it.
type DeviceMemory struct {
	Device string // a device's name, HostDevice for the host
	Budget uint64 // what the pool may fill
	Held   uint64 // what the resident and loading models hold
	// Free and Total are the device's own report (the host's: ggml's).
	Free, Total uint64
}

// Memory is the pool's memory per device: the host first.
func (p *Pool) Memory() []DeviceMemory {
	p.mu.Lock()
	out := make([]DeviceMemory, len(p.ledger))
	for i, a := range p.ledger {
		out[i] = DeviceMemory{Device: a.name, Budget: a.budget, Held: p.heldLocked(i, nil, nil)}
	}
	p.mu.Unlock()
	for i, a := range p.ledger {
		d := a.dev
		if d == nil {
			d = p.rt.CPUDevice()
		}
		if d != nil {
			out[i].Free, out[i].Total = d.Memory()
		}
	}
	return out
}

// DeviceBytes is memory on one device.
type DeviceBytes struct {
	Device string
	Bytes  uint64
}

// Info describes a model.
type Info struct {
	Name          string
	Aliases, Tags []string // sorted
	Source        Source
	Path, Mmproj  string
	Draft         string
	// Settings are the model's settings from the models directory and
	// the presets file (the router shows them as its preset).
	Settings []Setting
	Status   Status
	// Stopping: it unloads once its requests end (Unload, Reload, or its
	// file changed: Err says so).
	Stopping bool
	Pinned   bool
	// Err is why its last load failed (Status Unloaded), or why it
	// stops.
	Err      error
	Requests int // requests using it now
	Waiting  int // requests waiting for it to load
	LastUsed time.Time
	// Memory is what it holds (while loading, its plan's; loaded, what
	// its engine allocated, and its prompt cache's limit), and Planned
	// what its plan said, per device.
	Memory, Planned []DeviceBytes
	// Fit is -fit's decision of its last load (nil with NoFit), and Took
	// how long that load's steps took.
	Fit  *place.FitResult
	Took LoadTimes
	// NCtx and NSlots are its engine's context and slots (loaded).
	NCtx, NSlots int
	// Gen numbers its load while it is resident (each load a new
	// number); 0 while it is not.
	Gen   uint64
	Extra any
}

// Models describes every model, by name.
func (p *Pool) Models() []Info {
	p.mu.Lock()
	defer p.mu.Unlock()
	out := make([]Info, 0, len(p.models))
	for _, name := range slices.Sorted(maps.Keys(p.models)) {
		out = append(out, p.infoLocked(p.models[name]))
	}
	return out
}

// Model describes the model of a name or alias.
func (p *Pool) Model(name string) (Info, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	m, err := p.lookupLocked(name)
	if err != nil {
		return Info{}, err
	}
	return p.infoLocked(m), nil
}

func (p *Pool) infoLocked(m *model) Info {
	in := Info{Name: m.name, Aliases: sortedSet(m.opts.Aliases), Tags: sortedSet(m.opts.Tags), Source: m.src, Path: m.opts.Path,
		Mmproj: m.opts.Mmproj, Draft: m.opts.Draft, Settings: slices.Clone(m.settings), Status: m.st.status(), Stopping: m.draining, Pinned: m.opts.Pin,
		Err: m.err, Requests: m.refs, Waiting: m.waiting, LastUsed: m.lastUsed, Fit: m.fit, Took: m.took, Extra: m.opts.Extra, Gen: m.gen}
	if m.stale != nil {
		in.Err = m.stale
	}
	in.Memory, in.Planned = p.bytesOf(m.res), p.bytesOf(m.planned)
	if m.e != nil && m.st == stLoaded {
		ei := m.e.Info()
		in.NCtx, in.NSlots = ei.NCtx, ei.NSlots
	}
	return in
}

func (p *Pool) bytesOf(v []uint64) []DeviceBytes {
	var out []DeviceBytes
	for i, n := range v {
		if n > 0 {
			out = append(out, DeviceBytes{p.ledger[i].name, n})
		}
	}
	return out
}

func (s state) status() Status {
	switch s {
	case stSleeping:
		return Sleeping
	case stAdmitting, stLoading:
		return Loading
	case stLoaded, stUnloading:
		return Loaded
	}
	return Unloaded
}

// ModelsMax is --models-max as the pool holds it (negative: no limit).
func (p *Pool) ModelsMax() int { return p.p.ModelsMax }
