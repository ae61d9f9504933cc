package pool

import (
	"context"
	"errors"
	"fmt"
	"os"
	"time"

	"github.com/ggload/ggload/ggml"
	"github.com/ggload/ggload/gguf"
	"github.com/ggload/ggload/loader"
	"github.com/ggload/ggload/place"
	"github.com/ggload/ggload/serve"
)

// errNobodyWaits stops a load waiting for room that no request wants
// any more.
var errNobodyWaits = errors.New("no request waits for the model any more")

// job is one load of a model: planning, waiting for room, loading. The
// requests that ask for the model while it runs wait for it.
type job struct {
	// actx bounds planning and the wait for room; lctx the load (Unload
	// and Close end both).
	actx, lctx       context.Context
	acancel, lcancel context.CancelCauseFunc
	detached         bool // Load's or load-on-startup's: it goes on with no request waiting
	admitting        bool // (p.mu) nothing is reserved yet
	done             chan struct{}
	err              error            // set before done is closed
	fit              *place.FitResult // -fit's decision, once made
	took             LoadTimes        // (p.mu)
}

// LoadTimes are how long each step of a model's last load took.
type LoadTimes struct {
	Plan   time.Duration // the file opened, -fit's plan
	Admit  time.Duration // the wait for room, evictions included
	Load   time.Duration // the weights loaded (package loader)
	Engine time.Duration // the engine made (its context, its first decode)
}

func newJob(parent context.Context, detached bool) *job {
	j := &job{detached: detached, admitting: true, done: make(chan struct{})}
	j.lctx, j.lcancel = context.WithCancelCause(parent)
	j.actx, j.acancel = context.WithCancelCause(j.lctx)
	return j
}

func (j *job) finished() bool {
	select {
	case <-j.done:
		return true
	default:
		return false
	}
}

// stopAdmitting ends the job where it still waits for room (p.mu held).
func (j *job) stopAdmitting(cause error) {
	if j.admitting {
		j.acancel(cause)
	}
}

// cancelWith ends the job wherever it is.
func (j *job) cancelWith(cause error) { j.lcancel(cause) }

// startJobLocked starts loading m (or, detached, marks the load in
// progress as wanted with no request).
func (p *Pool) startJobLocked(m *model, detached bool) {
	if m.job != nil {
		m.job.detached = m.job.detached || detached
		return
	}
	j := newJob(p.ctx, detached)
	m.job, m.st, m.err = j, stAdmitting, nil
	o := cloneOptions(m.opts)
	p.wg.Add(1)
	go p.runJob(m, j, o)
	p.notifyLocked()
	p.emitLocked(Event{Model: m.name, Status: Loading})
}

// resident is what a load makes.
type resident struct {
	gm      *gguf.Model
	lm      *loader.Model
	e       *serve.Engine
	stamp   []fileTimes
	fit     *place.FitResult
	planned []uint64
	held    []uint64
}

func (p *Pool) runJob(m *model, j *job, o Options) {
	defer p.wg.Done()
	t0 := time.Now()
	r, err := p.loadModel(m, j, o)
	p.mu.Lock()
	defer p.mu.Unlock()
	m.job, m.fit, m.took = nil, j.fit, j.took
	if err != nil {
		if cause := context.Cause(j.lctx); cause != nil && j.lctx.Err() != nil {
			err = cause
			if errors.Is(cause, context.Canceled) {
				err = ErrClosed
			}
		} else if cause := context.Cause(j.actx); cause != nil && j.actx.Err() != nil {
			err = cause
		}
		var room *RoomError
		if !errors.As(err, &room) && !errors.Is(err, errNobodyWaits) && !errors.Is(err, errUnloaded) && !errors.Is(err, ErrClosed) {
			err = &LoadError{Model: m.name, Err: err}
		}
		m.st, m.res, m.planned = stUnloaded, nil, nil
		delete(p.leaving, m)
		if !errors.Is(err, errNobodyWaits) && !errors.Is(err, errUnloaded) && !errors.Is(err, ErrClosed) {
			m.err = err
			p.log.Warn("pool: load failed", "model", m.name, "err", err)
		}
		j.err = err
		close(j.done)
		p.notifyLocked()
		p.emitLocked(Event{Model: m.name, Status: Unloaded, Err: m.err})
		return
	}
	p.genSeq++
	m.gm, m.lm, m.e, m.stamp, m.fit = r.gm, r.lm, r.e, r.stamp, r.fit
	m.res, m.planned = r.held, r.planned
	m.st, m.gen, m.doneAt, m.lastUsed = stLoaded, p.genSeq, time.Now(), time.Now()
	p.log.Info("pool: loaded", "model", m.name, "took", time.Since(t0), "memory", p.bytesOf(r.held))
	if differs(r.held, r.planned) {
		p.log.Warn("pool: the engine's memory is not its plan's", "model", m.name, "plan", p.bytesOf(r.planned), "engine", p.bytesOf(r.held))
	}
	close(j.done)
	p.notifyLocked()
	p.emitLocked(Event{Model: m.name, Status: Loaded})
	switch {
	case m.removed || p.closed:
		p.unloadAsyncLocked(m, stUnloaded)
	case m.waiting == 0:
		p.armIdleLocked(m)
	}
}

func differs(a, b []uint64) bool {
	for i := range a {
		if a[i] != b[i] {
			return true
		}
	}
	return false
}

// loadModel opens the model's file, plans it with -fit in the room the
// pool can give it, waits for that room (evicting idle models), and
// loads it. On any failure, or a panic, what it made is freed and its
// reservation dropped by the caller.
func (p *Pool) loadModel(m *model, j *job, o Options) (r *resident, err error) {
	ok := false
	defer func() {
		if x := recover(); x != nil {
			err = fmt.Errorf("panic: %v", x)
		}
	}()
	t0 := time.Now()
	step := func(d *time.Duration) {
		now := time.Now()
		p.mu.Lock()
		*d = now.Sub(t0)
		p.mu.Unlock()
		t0 = now
	}
	if o.Path == "" {
		return nil, errors.New("no model file: its preset sets no model")
	}
	gm, err := gguf.OpenModel(o.Path)
	if err != nil {
		return nil, err
	}
	defer func() {
		if !ok {
			gm.Close()
		}
	}()
	r = &resident{gm: gm}
	if r.stamp, err = stampFiles(gm); err != nil {
		return nil, err
	}
	plan, fit, err := p.plan(j, m, gm, &o)
	if err != nil {
		return nil, err
	}
	r.fit = fit
	p.mu.Lock()
	j.fit = fit
	p.mu.Unlock()
	if r.planned, err = p.needOf(plan, &o); err != nil {
		return nil, err
	}
	step(&j.took.Plan)
	if err := p.admit(j, m, r.planned); err != nil {
		return nil, err
	}
	step(&j.took.Admit)
	if r.lm, err = loader.Load(j.lctx, plan, o.Load); err != nil {
		return nil, err
	}
	step(&j.took.Load)
	defer func() {
		if !ok {
			r.lm.Close()
		}
	}()
	if r.e, err = serve.New(r.lm, o.Serve); err != nil {
		return nil, err
	}
	step(&j.took.Engine)
	r.held = p.heldBy(r.e, &o)
	ok = true
	return r, nil
}

// plan is the model's plan: -fit (unless NoFit) in the room the pool can
// give it, the context as llama-server adjusts it (-np auto where the
// options leave the slots unset).
func (p *Pool) plan(j *job, m *model, gm *gguf.Model, o *Options) (*place.Plan, *place.FitResult, error) {
	params := o.Place
	serve.ServerContext(&params.Context, params.Context.NParallel == 0)
	var plan *place.Plan
	var fit *place.FitResult
	var err error
	if o.NoFit {
		plan, err = place.New(j.actx, p.rt, gm, params)
	} else {
		devs, err := place.Devices(p.rt, params)
		if err != nil {
			return nil, nil, err
		}
		fo := o.Fit
		fo.Targets = p.fitTargets(devs, p.fitRoom(m, o), o.Fit)
		if fit, err = place.Fit(j.actx, p.rt, gm, params, fo); err == nil {
			plan = fit.Plan
		}
	}
	if err != nil {
		return nil, nil, err
	}
	if plan.ContextErr != nil {
		return nil, nil, fmt.Errorf("the context: %w", plan.ContextErr)
	}
	if plan.Context == nil {
		return nil, nil, errors.New("no context planned: the engine needs one")
	}
	return plan, fit, nil
}

// fitRoom is the memory -fit plans the model in, per account: the
// budget less what the pinned models hold (the others can be evicted
// for it), and on the host less the model's own prompt cache.
func (p *Pool) fitRoom(m *model, o *Options) []uint64 {
	p.mu.Lock()
	defer p.mu.Unlock()
	room := make([]uint64, len(p.ledger))
	for i, a := range p.ledger {
		room[i] = sub(a.budget, p.heldLocked(i, m, func(o *model) bool { return o.opts.Pin }))
	}
	if n, limited := o.Serve.PromptCacheLimit(); limited {
		room[0] = sub(room[0], n)
	}
	return room
}

// fitTargets are -fit's targets for the devices it measures, so that
// what it leaves free of each device's report is the model's target
// beyond the room the pool gives it: fit keeps used <= free - target,
// the pool wants used <= room - target. With no devices fit measures the
// host's total.
func (p *Pool) fitTargets(devs []*ggml.Device, room []uint64, fo place.FitOptions) []uint64 {
	cpu := p.rt.CPUDevice()
	if len(devs) == 0 {
		_, total := cpu.Memory()
		return []uint64{margin(total, room[0], fo.Target(0))}
	}
	hostFree, _ := cpu.Memory()
	out := make([]uint64, len(devs))
	for id, d := range devs {
		free, total := d.Memory()
		if free == 0 && total == 0 && d.Type() != ggml.DeviceGPU && d.Type() != ggml.DeviceIGPU {
			free = hostFree
		}
		r := free
		if i, ok := p.devIndex[d]; ok {
			r = room[i]
		}
		out[id] = margin(free, r, fo.Target(id))
	}
	return out
}

// margin is the target fit keeps free of a device reporting free so
// that the model uses at most room less target.
func margin(free, room, target uint64) uint64 {
	if room >= free {
		return target
	}
	if d := free - room; target > ^uint64(0)-d {
		return ^uint64(0)
	} else {
		return target + d
	}
}

// needOf is the model's memory per account as its plan sizes it, as -fit
// counts it (the weights, the context's memory, the compute buffers),
// and on the host the prompt cache's limit.
func (p *Pool) needOf(plan *place.Plan, o *Options) ([]uint64, error) {
	n := make([]uint64, len(p.ledger))
	for _, r := range plan.DeviceMemory() {
		if !r.ComputeKnown {
			return nil, fmt.Errorf("the compute buffers of %s are not sized by ggload (%s): the pool cannot hold what it does not know", plan.Arch, plan.Context.ComputeWhy)
		}
		b := r.Model + r.Context + r.Compute
		if r.Host || r.Device == nil {
			n[0] += b
			continue
		}
		i, ok := p.devIndex[r.Device]
		if !ok {
			return nil, fmt.Errorf("device %s is not one the pool counts (a split mode tensor's device)", r.Device.Name())
		}
		n[i] += b
	}
	// a compute buffer is allocated as the scheduler reserved it, and
	// some backends add to every allocation (the Vulkan host buffer type
	// adds 32 bytes): -fit's measure, as llama.cpp's, leaves that out
	for bt, b := range plan.Context.Compute {
		if b <= 1 {
			continue // (no buffer is made)
		}
		slack, err := bt.AllocSlack()
		if err != nil {
			return nil, err
		}
		chunks := uint64(1)
		if mx := bt.MaxSize(); mx > 0 && b > mx {
			chunks = (b + mx - 1) / mx
		}
		n[p.accountOfType(bt)] += slack * chunks
	}
	cache, limited := o.Serve.PromptCacheLimit()
	if !limited {
		return nil, errors.New("--cache-ram -1: a prompt cache without a limit cannot be held within the pool's memory")
	}
	n[0] += cache
	return n, nil
}

// heldBy is what a loaded engine holds per account: the buffers it
// allocated (the weights' and its context's), and on the host its prompt
// cache's limit.
func (p *Pool) heldBy(e *serve.Engine, o *Options) []uint64 {
	n := make([]uint64, len(p.ledger))
	mem := e.Memory()
	for _, w := range mem.Weights {
		n[p.accountOf(w.BufferType, w.Device)] += w.Bytes
	}
	for _, a := range mem.Context {
		n[p.accountOf(a.BufferType, "")] += a.Bytes
	}
	cache, _ := o.Serve.PromptCacheLimit()
	n[0] += cache
	return n
}

// accountOf is the account of a buffer type's memory, by its name.
func (p *Pool) accountOf(bufferType, device string) int {
	if bt, err := p.rt.BufferTypeByName(bufferType); err == nil {
		return p.accountOfType(bt)
	}
	for i, a := range p.ledger {
		if a.dev != nil && (a.name == device || a.name == bufferType) {
			return i
		}
	}
	return 0
}

// accountOfType is the account of a buffer type's memory: the host for
// host buffer types, else its device's.
func (p *Pool) accountOfType(bt ggml.BufferType) int {
	if !bt.IsHost() {
		if d, ok := bt.Device(); ok {
			if i, ok := p.devIndex[d]; ok {
				return i
			}
		}
	}
	return 0
}

// sub is a - b, 0 where b is more.
func sub(a, b uint64) uint64 {
	if b >= a {
		return 0
	}
	return a - b
}

// checkFiles is the model's files against what was loaded: the loader's
// check (the same file at each path, of the same size and modification
// time) and the inode's change time (a write that sets the modification
// time back still changes it). A model closed under the lease (a forced
// unload) is no change: nil, the caller sees the unload.
func (m *model) checkFiles(l *Lease) error {
	err := l.lm.CheckFile()
	if errors.Is(err, loader.ErrClosed) {
		return nil
	}
	if err != nil {
		return err
	}
	for _, st := range l.stamp {
		fi, err := os.Stat(st.path)
		if err != nil {
			return err
		}
		if c, ok := changeTime(fi); ok && st.ctimeOK && !c.Equal(st.ctime) {
			return fmt.Errorf("%w since it was loaded: %s: its inode changed at %s (loaded at %s)", loader.ErrFileChanged, st.path, c.Format(time.RFC3339Nano), st.ctime.Format(time.RFC3339Nano))
		}
	}
	return nil
}

// fileTimes is a model file's change time when it was opened.
type fileTimes struct {
	path    string
	ctime   time.Time
	ctimeOK bool
}

// stampFiles notes the change time of each of the model's open files.
func stampFiles(gm *gguf.Model) ([]fileTimes, error) {
	var out []fileTimes
	for i, f := range gm.Files {
		osf := f.OSFile()
		if osf == nil || i >= len(gm.Paths) {
			continue
		}
		fi, err := osf.Stat()
		if err != nil {
			return nil, err
		}
		c, ok := changeTime(fi)
		out = append(out, fileTimes{path: gm.Paths[i], ctime: c, ctimeOK: ok})
	}
	return out, nil
}
