package arch

import (
	"errors"
	"fmt"
	"math"
	"strconv"
	"strings"

	"github.com/ggload/ggload/ggml"
	"github.com/ggload/ggload/gguf"
	"github.com/ggload/ggload/internal/arch/ast"
)

// Tensor is a tensor as the programs see it: a created weight, or a file
// tensor's metadata.
type Tensor struct {
	Name  string
	Type  int // ggml type id
	Ne    [4]int64
	Index int // the creation's place among the Placer's calls (0 first)
}

// Class is llm_tensor_layer: where a tensor belongs in the layer model.
type Class int

// Classes.
const (
	ClassInput Class = iota
	ClassOutput
	ClassRepeating
)

// Creation is one create_tensor call that found its tensor in the file, in
// llama.cpp's order. Unused tensors (TENSOR_SKIP, or an op of NONE) are
// reported too, with Skip set.
type Creation struct {
	Name   string // the GGUF tensor name
	Kind   string // the llm_tensor without its prefix ("ATTN_Q")
	Class  Class
	Op     string // the probe's ggml op ("MUL_MAT"), after the bias and adapter rules
	Bid    int    // the block the call named (-1: none)
	Shape  [4]int64
	Weight *gguf.Weight
	Dup    bool // TENSOR_DUPLICATED
	Skip   bool // unused: consumed, not placed
	Lazy   bool // TENSOR_READ_LAZY: a candidate for reading on demand
}

// Placer places the tensors a replay creates. The Creation is valid
// during the call only.
type Placer interface {
	Place(c *Creation) error
}

// Options are the model parameters the programs read.
type Options struct {
	LoadMTP bool // llama_model_params.load_mtp: load the MTP/NextN blocks

	// Optional, if set, hears of every optional tensor a program asked for
	// and the model lacks (the synthesizer's candidates).
	Optional func(*Need)

	// SupplyKey and SupplyTensor, if set, are asked for a required key or
	// tensor the model lacks; what they supply is used as if the model had
	// it (the synthesizer fills a model this way in one pass).
	SupplyKey    func(*Need) (gguf.Value, bool)
	SupplyTensor func(*Need) (ggml.Type, bool)

	// Overrides are llama_model_params.kv_overrides: get_key reads an
	// override of its kind instead of the file's value (of a key given
	// twice, the first).
	Overrides []KVOverride

	// Log, if set, hears llama.cpp's log lines of the replay (the
	// overrides used or ignored), at "INFO" or "WARN".
	Log func(level, text string)
}

// Run is one model's replay: its architecture, its hyperparameters (after
// Load), then its tensors (CreateTensors).
type Run struct {
	gm      *gguf.Model
	Arch    string
	entry   archEntry
	opts    Options
	model   *Object
	hparams *Hparams
	ml      Val
	vocab   Val
	placer  Placer
	steps   int64

	maxLayers int64
	nCreated  int
	nPlaced   int             // the Placer's calls so far
	created   map[string]bool // file tensors created (not as duplicates)

	extraKV      map[string]gguf.Value   // keys SupplyKey gave
	extraWeights map[string]*gguf.Weight // tensors SupplyTensor gave

	freeScopes []*scope // scopes no frame uses any more
	overrides  map[string]KVOverride
	memory     *Memory // what the last memory constructor made (CreateMemory)

	progCache map[string]*Program // llama_model_base methods by name
	hpCache   map[string]*Program // llama_hparams methods by name
	creation  Creation            // the one passed to the placer

	split  *splitCtx     // the SplitState call replaying
	hpMemo map[hpKey]Val // llama_hparams method results by arguments, during SplitState

	log       func(level, msg string) // InitContext's listener of LLAMA_LOG_*
	splitMode int                     // llama_model::split_mode(), for InitContext
	capture   *capture                // callLocals' variables

	cparams  *Object     // the llama_cparams InitContext resolved (BuildGraph's)
	ctx      Val         // the llama_context InitContext made
	nTensors int         // llama_model::n_tensors(), for Reserve
	graph    *graphState // the graph BuildGraph builds
}

// stepLimit bounds a replay's statements: programs of the pin run a few
// hundred per layer.
const stepLimit = 1 << 28

func (r *Run) tick() error {
	r.steps++
	if r.steps > stepLimit {
		return &evalError{"", "too many steps"}
	}
	return nil
}

// ErrUnknownArch is wrapped by Load's error for an architecture the pin
// does not load.
var ErrUnknownArch = errors.New("unknown model architecture")

// Known reports whether the pin loads the architecture (by GGUF name).
func Known(arch string) bool {
	_, ok := archTable[arch]
	return ok
}

// Projector reports whether the architecture is a multimodal projector
// (LLM_ARCH_CLIP), which llama.cpp refuses as a main model.
func Projector(arch string) bool { return archTable[arch].Enum == "LLM_ARCH_CLIP" }

// Architectures lists the architectures the pin loads, by GGUF name.
func Architectures() []string {
	out := make([]string, 0, len(archTable))
	for a := range archTable {
		out = append(out, a)
	}
	return out
}

// Load reads the model's architecture and hyperparameters as llama.cpp's
// llama_model_load does (load_hparams, then the vocabulary's size). The
// error's text is llama.cpp's.
func Load(m *gguf.Model, opts Options) (*Run, error) {
	name := m.Architecture()
	for _, o := range opts.Overrides {
		if o.Key != "general.architecture" {
			continue
		}
		// the loader's get_key of the architecture's name takes a string override
		if o.Type == OverrideStr {
			if opts.Log != nil {
				opts.Log("INFO", fmt.Sprintf("validate_override: Using metadata override (%5s) '%s' = %s", o.Type, o.Key, o.Str))
			}
			name = o.Str
		} else if opts.Log != nil {
			opts.Log("WARN", fmt.Sprintf("validate_override: Warning: Bad metadata override type for key '%s', expected %s but got %s", o.Key, OverrideStr, o.Type))
		}
		break
	}
	e, ok := archTable[name]
	if !ok {
		return nil, fmt.Errorf("%w: '%s'", ErrUnknownArch, gguf.Printable(name, 64))
	}
	return load(m, name, e, opts)
}

// LoadGeneric reads the hyperparameters every architecture shares (the
// architecture-independent part of load_hparams) of a model whose
// architecture the pin does not know, so that its tensors can be placed
// by name. It has no CreateTensors.
func LoadGeneric(m *gguf.Model, opts Options) (*Run, error) {
	name := m.Architecture()
	if name == "" {
		return nil, fmt.Errorf("%w: the model has no general.architecture", ErrUnknownArch)
	}
	return load(m, name, archEntry{Enum: "LLM_ARCH_GENERIC"}, Options{Overrides: opts.Overrides, Log: opts.Log})
}

// Exact reports whether the run replays the architecture's own programs
// (false for LoadGeneric).
func (r *Run) Exact() bool { return r.entry.Tensors != "" }

func load(m *gguf.Model, name string, e archEntry, opts Options) (*Run, error) {
	r := &Run{gm: m, Arch: name, entry: e, opts: opts,
		extraKV: map[string]gguf.Value{}, extraWeights: map[string]*gguf.Weight{},
		progCache: map[string]*Program{}, hpCache: map[string]*Program{}}
	for _, o := range opts.Overrides {
		if _, dup := r.overrides[o.Key]; !dup {
			if r.overrides == nil {
				r.overrides = map[string]KVOverride{}
			}
			r.overrides[o.Key] = o
		}
	}
	// std::array<..., LLAMA_MAX_LAYERS> holds every layer; ggload lets a
	// model with more layers than the pin's 512 be planned, so the arrays
	// grow with it (see LayerLimit)
	r.maxLayers = enumConsts["LLAMA_MAX_LAYERS"]
	if v, ok := m.Lookup(name + ".block_count"); ok {
		if n, ok := v.Uint(); ok && int64(n) > r.maxLayers && n <= 1<<16 {
			r.maxLayers = int64(n)
		}
	}
	h, err := r.newHparams()
	if err != nil {
		return nil, err
	}
	r.hparams = h
	r.ml = r.newLoader()
	if r.model, err = r.newModel(e.Class); err != nil {
		return nil, err
	}
	r.model.fields["hparams"] = &Cell{V: Val{K: KObj, P: h.obj}}
	r.model.fields["ml"] = &Cell{V: r.ml}
	r.model.fields["arch"] = &Cell{V: Val{K: KEnum, S: e.Enum, I: famArch}}
	r.model.fields["layers"] = &Cell{V: Val{K: KArr, P: &Array{elem: ast.TAuto, class: "llama_layer"}}}
	r.model.fields["pimpl"] = &Cell{V: Val{K: KObj, P: newObject("llama_model::impl")}}
	for _, f := range []string{"vocab_only", "no_alloc"} {
		h.obj.fields[f].V = vFalse
	}
	p, err := r.program("llama_model_base::load_hparams")
	if err != nil {
		return nil, err
	}
	if _, err := r.call(p, Val{K: KObj, P: r.model}, []Val{r.ml}); err != nil {
		return nil, r.wrap("error loading model hyperparameters: ", err)
	}
	if e.Enum == "LLM_ARCH_CLIP" {
		return nil, fmt.Errorf("%w: CLIP cannot be used as main model, use it with --mmproj instead", ErrUnknownArch)
	}
	v, err := r.newVocab()
	if err != nil {
		return nil, fmt.Errorf("error loading model vocabulary: %w", err)
	}
	r.vocab = v
	r.model.fields["vocab"] = &Cell{V: v}
	return r, nil
}

// wrap prefixes a thrown error's text as llama.cpp does; evaluator
// defects and aborts keep their own.
func (r *Run) wrap(prefix string, err error) error {
	var t *Throw
	if errors.As(err, &t) {
		return &Throw{Msg: prefix + t.Msg, Need: t.Need}
	}
	return err
}

// CreateTensors replays load_tensors' tensor creation: load_arch_tensors,
// the generic scale pass, then done_getting_tensors's count.
func (r *Run) CreateTensors(p Placer) error {
	if !r.Exact() {
		return fmt.Errorf("arch: %s: no tensor programs for a generic run", r.Arch)
	}
	r.placer = p
	r.nCreated, r.nPlaced = 0, 0
	r.hpMemo = nil
	r.created = make(map[string]bool, len(r.gm.Weights))
	prog, err := r.program("llama_model_base::create_tensors")
	if err != nil {
		return err
	}
	if _, err := r.call(prog, Val{K: KObj, P: r.model}, []Val{r.ml}); err != nil {
		return err
	}
	n := len(r.gm.Weights) + len(r.extraWeights)
	if r.nCreated > n {
		return &Throw{Msg: fmt.Sprintf("done_getting_tensors: too many tensors created; expected %d, got %d", n, r.nCreated)}
	}
	if r.nCreated < n {
		// llama.cpp counts; name the tensors the architecture never asked for
		var unused []string
		for i := range r.gm.Weights {
			if name := r.gm.Weights[i].Name; !r.created[name] {
				unused = append(unused, name)
			}
		}
		more := ""
		if len(unused) > 5 {
			more = fmt.Sprintf(" and %d more", len(unused)-5)
			unused = unused[:5]
		}
		return &Throw{Msg: fmt.Sprintf("done_getting_tensors: wrong number of tensors; expected %d, got %d (the %s architecture does not use %s%s)",
			n, r.nCreated, r.Arch, strings.Join(unused, ", "), more)}
	}
	return nil
}

// HasTensor reports whether a member of the model (tok_embd, output)
// holds a tensor after CreateTensors.
func (r *Run) HasTensor(member string) bool {
	c, ok := r.model.fields[member]
	return ok && c.V.K == KTensor
}

// VocabSize is the vocabulary's token count.
func (r *Run) VocabSize() int64 {
	if r.vocab.K != KObj {
		return 0
	}
	return r.vocab.P.(*Object).fields["n_tokens"].V.I
}

// Hparams is the model's llama_hparams.
func (r *Run) Hparams() *Hparams { return r.hparams }

// LayerLimit is the pin's LLAMA_MAX_LAYERS: llama.cpp refuses a model
// with more layers.
func LayerLimit() int { return int(enumConsts["LLAMA_MAX_LAYERS"]) }

func (r *Run) program(name string) (*Program, error) {
	p, err := lookupProgram(name)
	if err != nil {
		return nil, err
	}
	if p == nil {
		return nil, &evalError{name, "no such program"}
	}
	return p, nil
}

// prog finds a program by name, nil if none.
func (r *Run) prog(name string) *Program {
	p, _ := lookupProgram(name)
	return p
}

// call runs a program with evaluated arguments.
func (r *Run) call(p *Program, this Val, args []Val) (Val, error) {
	f := &frame{r: r, fn: p.Name, this: this, sc: r.newScope(nil)}
	defer r.release(f.sc)
	for i, d := range p.Params.Kids {
		c := f.sc.cell(d.T)
		if d.T == ast.TRef || d.T == ast.TObj {
			c.T = ast.TAuto
		}
		switch {
		case i < len(args):
			if err := c.set(args[i]); err != nil {
				return vVoid, err
			}
		case len(d.Kids) > 0:
			v, err := f.eval(d.Kids[0])
			if err != nil {
				return vVoid, err
			}
			if err := c.set(v); err != nil {
				return vVoid, err
			}
		}
		if d.S != "" {
			f.sc.define(d.S, c)
		}
	}
	if _, err := f.exec(p.Body); err != nil {
		return vVoid, err
	}
	return f.ret, nil
}

// invoke runs a program called from a frame with unevaluated arguments.
func (r *Run) invoke(caller *frame, p *Program, this Val, args []*ast.Node) (Val, error) {
	f := &frame{r: r, fn: p.Name, this: this, sc: r.newScope(nil)}
	defer r.release(f.sc)
	if err := bindParams(caller, f, p.Params, args); err != nil {
		return vVoid, err
	}
	if _, err := f.exec(p.Body); err != nil {
		return vVoid, err
	}
	return f.ret, nil
}

func (r *Run) invokeClosure(caller *frame, c *closure, args []*ast.Node) (Val, error) {
	f := &frame{r: r, fn: c.fn, this: c.this, sc: r.newScope(c.sc)}
	defer r.release(f.sc)
	if err := bindParams(caller, f, c.params, args); err != nil {
		return vVoid, err
	}
	if _, err := f.exec(c.body); err != nil {
		return vVoid, err
	}
	return f.ret, nil
}

// global resolves a constant name.
func (r *Run) global(name string) (Val, bool) {
	if name == "LLAMA_MAX_LAYERS" {
		return vInt(r.maxLayers, ast.TI32), true
	}
	return staticGlobal(name)
}

// staticGlobal resolves a constant whose value depends on no model.
func staticGlobal(name string) (Val, bool) {
	name = strings.TrimPrefix(name, "llama_model_loader::")
	switch name {
	case "true":
		return vTrue, true
	case "false":
		return vFalse, true
	case "nullptr", "NULL":
		return vNull, true
	case "INFINITY":
		return Val{K: KFloat, T: ast.TF32, F: math.Inf(1)}, true
	case "FLT_MAX":
		return Val{K: KFloat, T: ast.TF32, F: math.MaxFloat32}, true
	case "std::string::npos":
		return vInt(-1, ast.TU64), true
	case "INT32_MAX":
		return vInt(math.MaxInt32, ast.TI32), true
	case "UINT32_MAX":
		return vInt(math.MaxUint32, ast.TU32), true
	case "LLAMA_MAX_LAYERS":
		return vVoid, false // the model's (see Load)
	}
	if _, ok := tensorNames[name]; ok {
		return Val{K: KEnum, S: name, I: famTensor, P: templateOfKind(name)}, true
	}
	if _, ok := tensorInfos[name]; ok {
		return Val{K: KEnum, S: name, I: famTensor}, true
	}
	if _, ok := kvNames[name]; ok {
		return Val{K: KEnum, S: name, I: famKV}, true
	}
	if _, ok := archNames[name]; ok {
		return Val{K: KEnum, S: name, I: famArch}, true
	}
	if v, ok := enumConsts[name]; ok {
		return vInt(v, ast.TI32), true
	}
	return vVoid, false
}

// kvKey is LLM_KV(arch)(kid): the metadata key of an LLM_KV_ constant.
func (r *Run) kvKey(v Val) (string, error) {
	switch {
	case v.K == KEnum && v.I == famKV:
		t, ok := kvNames[v.S]
		if !ok {
			return "", fmt.Errorf("no key name for %s", v.S)
		}
		return strings.Replace(t, "%s", r.Arch, 1), nil
	case v.K == KStr:
		return v.S, nil
	case v.K == KTN:
		return v.P.(*tnVal).String(), nil
	}
	return "", fmt.Errorf("%s is not a metadata key", v.describe())
}

// container makes an empty value of a std:: container type.
func (r *Run) container(ctype string) (Val, error) {
	base, args, _ := strings.Cut(ctype, "<")
	args = strings.TrimSuffix(args, ">")
	elem, n, _ := strings.Cut(args, ",")
	et := elemType(strings.TrimSpace(elem))
	switch base {
	case "std::vector":
		return Val{K: KArr, P: &Array{elem: et}}, nil
	case "std::array":
		size, err := r.constLen(strings.TrimSpace(n))
		if err != nil {
			return vVoid, err
		}
		return Val{K: KArr, P: newArray(et, int(size), true)}, nil
	case "std::unordered_set", "std::set":
		return Val{K: KMap, P: &cmap{}}, nil
	case "std::map", "std::unordered_map":
		return Val{K: KMap, P: &cmap{vals: []Val{}}}, nil
	case "std::stringstream", "std::ostringstream":
		o := newObject("stringstream")
		o.fields["str"] = &Cell{V: vStr("")}
		return Val{K: KObj, P: o}, nil
	}
	return vVoid, fmt.Errorf("unsupported container %s", ctype)
}

func elemType(s string) ast.Type {
	switch s {
	case "bool":
		return ast.TBool
	case "int", "int32_t", "llama_token":
		return ast.TI32
	case "uint32_t", "unsigned":
		return ast.TU32
	case "int64_t":
		return ast.TI64
	case "uint64_t", "size_t":
		return ast.TU64
	case "float":
		return ast.TF32
	case "double":
		return ast.TF64
	case "std::string":
		return ast.TStr
	}
	return ast.TAuto
}

func (r *Run) constLen(s string) (int64, error) {
	if a, b, ok := strings.Cut(s, "*"); ok {
		// a C array's length: a product
		x, err := r.constLen(a)
		if err != nil {
			return 0, err
		}
		y, err := r.constLen(b)
		return x * y, err
	}
	if s == "LLAMA_MAX_LAYERS" {
		return r.maxLayers, nil
	}
	if v, ok := enumConsts[s]; ok {
		return v, nil
	}
	return strconv.ParseInt(s, 10, 64)
}

// Hparams is a model's llama_hparams, as the programs filled it.
type Hparams struct {
	r   *Run
	obj *Object
}

func (r *Run) newHparams() (*Hparams, error) {
	obj, err := r.newStruct("llama_hparams", hparamsFields)
	if err != nil {
		return nil, err
	}
	return &Hparams{r: r, obj: obj}, nil
}

// newModel is the model object of a class: llama_model's members and
// those of the class and its bases.
func (r *Run) newModel(class string) (*Object, error) {
	o, err := r.newStruct("llama_model", modelFields["llama_model"])
	if err != nil {
		return nil, err
	}
	for c := class; c != ""; c = classParents[c] {
		if err := r.addFields(o, modelFields[c]); err != nil {
			return nil, err
		}
	}
	return o, nil
}

func (r *Run) newStruct(class string, fields []fieldDef) (*Object, error) {
	o := newObject(class)
	return o, r.addFields(o, fields)
}

func (r *Run) addFields(o *Object, fields []fieldDef) error {
	class := o.class
	for _, fd := range fields {
		c := &Cell{T: fd.Type}
		switch {
		case fd.Type == ast.TObj && fd.Struct == "":
			v, err := r.container(fd.CType)
			if err != nil {
				v = vNull // a container the programs never use
			}
			c.T = ast.TAuto
			c.V = v
		case fd.Struct != "":
			sub, err := r.newStruct(fd.Struct, structFields[fd.Struct])
			if err != nil {
				return err
			}
			c.T = ast.TAuto
			c.V = Val{K: KObj, P: sub}
		case fd.Len != "":
			n, err := r.constLen(fd.Len)
			if err != nil {
				return fmt.Errorf("arch: %s.%s: length %s: %w", class, fd.Name, fd.Len, err)
			}
			c.T = ast.TAuto
			c.V = Val{K: KArr, P: newArray(fd.Type, int(n), true)}
		default:
			v, err := defaultValue(fd)
			if err != nil {
				return fmt.Errorf("arch: %s.%s: %w", class, fd.Name, err)
			}
			c.V = v
		}
		o.fields[fd.Name] = c
	}
	return nil
}

// defaultValue evaluates a member's initializer: a number, a boolean, an
// enum constant, INFINITY, with an optional sign.
func defaultValue(fd fieldDef) (Val, error) {
	s := strings.TrimSpace(fd.Default)
	if s == "" {
		return zeroOf(fd.Type), nil
	}
	neg := false
	if rest, ok := strings.CutPrefix(s, "-"); ok {
		neg, s = true, strings.TrimSpace(rest)
	}
	var v Val
	switch {
	case strings.HasPrefix(s, "\"") && fd.Type == ast.TStr:
		u, err := strconv.Unquote(s)
		if err != nil {
			return vVoid, fmt.Errorf("initializer %q", fd.Default)
		}
		return vStr(u), nil
	case s == "true":
		v = vTrue
	case s == "false":
		v = vFalse
	case s == "INFINITY":
		v = Val{K: KFloat, T: ast.TF32, F: math.Inf(1)}
	default:
		if c, ok := enumConsts[s]; ok {
			v = vInt(c, ast.TI32)
		} else if i, err := strconv.ParseInt(strings.TrimRight(s, "uUlL"), 0, 64); err == nil {
			v = vInt(i, ast.TI64)
		} else if f, err := strconv.ParseFloat(strings.TrimRight(s, "fF"), 64); err == nil {
			v = Val{K: KFloat, T: ast.TF64, F: f}
		} else {
			return vVoid, fmt.Errorf("initializer %q", fd.Default)
		}
	}
	if neg {
		var err error
		if v, err = arith("-", vInt(0, ast.TI32), v); err != nil {
			return vVoid, err
		}
	}
	return convert(v, fd.Type)
}

// Field reads a scalar member of llama_hparams.
func (h *Hparams) Field(name string) (int64, error) {
	c, ok := h.obj.fields[name]
	if !ok {
		return 0, fmt.Errorf("arch: llama_hparams has no member %s", name)
	}
	switch c.V.K {
	case KInt:
		return c.V.I, nil
	case KFloat:
		return int64(c.V.F), nil
	}
	return 0, fmt.Errorf("arch: llama_hparams.%s is not a number", name)
}

// Call calls a method of llama_hparams (n_head, is_swa, n_expert_used_max,
// ...) with integer arguments; booleans come back as 0 or 1.
func (h *Hparams) Call(method string, args ...int64) (int64, error) {
	p, err := h.r.program("llama_hparams::" + method)
	if err != nil {
		return 0, err
	}
	vs := make([]Val, len(args))
	for i, a := range args {
		vs[i] = vInt(a, ast.TI64)
	}
	v, err := h.r.call(p, Val{K: KObj, P: h.obj}, vs)
	if err != nil {
		return 0, err
	}
	if v.K != KInt {
		return 0, fmt.Errorf("arch: llama_hparams::%s returned %s", method, v.describe())
	}
	return v.I, nil
}
