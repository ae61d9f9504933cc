package arch

import (
	"errors"
	"fmt"
	"math"
	"strconv"
	"strings"

	"github.com/ggload/ggload/ggml"
	"github.com/ggload/ggload/gguf"
	"github.com/ggload/ggload/internal/replay/cpp"
	"github.com/ggload/ggload/internal/replay/cpp/ast"
)

// Tensor is a tensor as the programs see it: a created weight, or a file
// tensor's metadata.
type Tensor struct {
	Name  string
	Type  int // ggml type id
	Ne    [4]int64
	Index int // the creation's place among the Placer's calls (0 first)
}

// Member is a member of the tensor as the programs read it (its
// llama_tensor_weight's tensor is itself: Void).
func (t *Tensor) Member(name string) (cpp.Val, bool) {
	switch name {
	case "ne":
		return cpp.Dims(ast.TI64, t.Ne), true
	case "nb":
		// the strides ggml gives a contiguous tensor of its type and shape
		typ := ggml.Type(t.Type)
		row, err := typ.RowSize(t.Ne[0])
		if err != nil || typ.TypeSize() == 0 {
			return cpp.Void, false
		}
		nb := [4]int64{typ.TypeSize(), row, row * t.Ne[1], row * t.Ne[1] * t.Ne[2]}
		return cpp.Dims(ast.TU64, nb), true
	case "type":
		return cpp.Int(int64(t.Type), ast.TI32), true
	case "name":
		return cpp.Str(t.Name), true
	case "tensor":
		return cpp.Void, true // llama_tensor_weight::tensor
	}
	return cpp.Void, false
}

// Describe names the tensor in errors.
func (t *Tensor) Describe() string { return "tensor " + t.Name }

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
	Optional func(*cpp.Need)

	// SupplyKey and SupplyTensor, if set, are asked for a required key or
	// tensor the model lacks; what they supply is used as if the model had
	// it (the synthesizer fills a model this way in one pass).
	SupplyKey    func(*cpp.Need) (gguf.Value, bool)
	SupplyTensor func(*cpp.Need) (ggml.Type, bool)

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
	cpp.Interp // the interpreter its programs run in; the Run is its Host
	gm         *gguf.Model
	Arch       string
	entry      archEntry
	opts       Options
	model      *cpp.Object
	hparams    *Hparams
	ml         cpp.Val
	vocab      cpp.Val
	placer     Placer

	maxLayers int64
	nCreated  int
	nPlaced   int             // the Placer's calls so far
	created   map[string]bool // file tensors created (not as duplicates)

	extraKV      map[string]gguf.Value   // keys SupplyKey gave
	extraWeights map[string]*gguf.Weight // tensors SupplyTensor gave

	overrides map[string]KVOverride
	memory    *Memory // what the last memory constructor made (CreateMemory)

	progCache map[string]*cpp.Program // llama_model_base methods by name
	hpCache   map[string]*cpp.Program // llama_hparams methods by name
	creation  Creation                // the one passed to the placer

	split  *splitCtx         // the SplitState call replaying
	hpMemo map[hpKey]cpp.Val // llama_hparams method results by arguments, during SplitState

	log       func(level, msg string) // InitContext's listener of LLAMA_LOG_*
	splitMode int                     // llama_model::split_mode(), for InitContext

	cparams  *cpp.Object // the llama_cparams InitContext resolved (BuildGraph's)
	ctx      cpp.Val     // the llama_context InitContext made
	nTensors int         // llama_model::n_tensors(), for Reserve
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
		progCache: map[string]*cpp.Program{}, hpCache: map[string]*cpp.Program{}}
	r.Lib, r.Host = programs, r
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
	r.model.Open = true // its members never assigned are null pointers
	r.model.Fields["hparams"] = &cpp.Cell{V: cpp.Val{K: cpp.KObj, P: h.obj}}
	r.model.Fields["ml"] = &cpp.Cell{V: r.ml}
	r.model.Fields["arch"] = &cpp.Cell{V: cpp.Val{K: cpp.KEnum, S: e.Enum, I: famArch}}
	r.model.Fields["layers"] = &cpp.Cell{V: cpp.Val{K: cpp.KArr, P: &cpp.Array{Elem: ast.TAuto, Make: newLayer}}}
	r.model.Fields["pimpl"] = &cpp.Cell{V: cpp.Val{K: cpp.KObj, P: cpp.NewObject("llama_model::impl")}}
	for _, f := range []string{"vocab_only", "no_alloc"} {
		h.obj.Fields[f].V = cpp.False
	}
	p, err := r.program("llama_model_base::load_hparams")
	if err != nil {
		return nil, err
	}
	if _, err := r.Call(p, cpp.Val{K: cpp.KObj, P: r.model}, []cpp.Val{r.ml}); err != nil {
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
	r.model.Fields["vocab"] = &cpp.Cell{V: v}
	return r, nil
}

// wrap prefixes a thrown error's text as llama.cpp does; evaluator
// defects and aborts keep their own.
func (r *Run) wrap(prefix string, err error) error {
	var t *cpp.Throw
	if errors.As(err, &t) {
		return &cpp.Throw{Msg: prefix + t.Msg, Need: t.Need}
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
	if _, err := r.Call(prog, cpp.Val{K: cpp.KObj, P: r.model}, []cpp.Val{r.ml}); err != nil {
		return err
	}
	n := len(r.gm.Weights) + len(r.extraWeights)
	if r.nCreated > n {
		return &cpp.Throw{Msg: fmt.Sprintf("done_getting_tensors: too many tensors created; expected %d, got %d", n, r.nCreated)}
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
		return &cpp.Throw{Msg: fmt.Sprintf("done_getting_tensors: wrong number of tensors; expected %d, got %d (the %s architecture does not use %s%s)",
			n, r.nCreated, r.Arch, strings.Join(unused, ", "), more)}
	}
	return nil
}

// HasTensor reports whether a member of the model (tok_embd, output)
// holds a tensor after CreateTensors.
func (r *Run) HasTensor(member string) bool {
	c, ok := r.model.Fields[member]
	return ok && c.V.K == cpp.KTensor
}

// VocabSize is the vocabulary's token count.
func (r *Run) VocabSize() int64 {
	if r.vocab.K != cpp.KObj {
		return 0
	}
	return r.vocab.P.(*cpp.Object).Fields["n_tokens"].V.I
}

// Hparams is the model's llama_hparams.
func (r *Run) Hparams() *Hparams { return r.hparams }

// LayerLimit is the pin's LLAMA_MAX_LAYERS: llama.cpp refuses a model
// with more layers.
func LayerLimit() int { return int(enumConsts["LLAMA_MAX_LAYERS"]) }

func (r *Run) program(name string) (*cpp.Program, error) {
	p, err := LookupProgram(name)
	if err != nil {
		return nil, err
	}
	if p == nil {
		return nil, &cpp.EvalError{Fn: name, Msg: "no such program"}
	}
	return p, nil
}

// Function finds a program by name, nil if none.
func (r *Run) Function(name string) *cpp.Program {
	p, _ := LookupProgram(name)
	return p
}

// Global resolves a constant name.
func (r *Run) Global(name string) (cpp.Val, bool) {
	if name == "LLAMA_MAX_LAYERS" {
		return cpp.Int(r.maxLayers, ast.TI32), true
	}
	return staticGlobal(name)
}

// staticGlobal resolves a constant whose value depends on no model.
func staticGlobal(name string) (cpp.Val, bool) {
	name = strings.TrimPrefix(name, "llama_model_loader::")
	if name == "LLAMA_MAX_LAYERS" {
		return cpp.Void, false // the model's (see Load)
	}
	if _, ok := tensorNames[name]; ok {
		return cpp.Val{K: cpp.KEnum, S: name, I: famTensor, P: templateOfKind(name)}, true
	}
	if _, ok := tensorInfos[name]; ok {
		return cpp.Val{K: cpp.KEnum, S: name, I: famTensor}, true
	}
	if _, ok := kvNames[name]; ok {
		return cpp.Val{K: cpp.KEnum, S: name, I: famKV}, true
	}
	if _, ok := archNames[name]; ok {
		return cpp.Val{K: cpp.KEnum, S: name, I: famArch}, true
	}
	if v, ok := enumConsts[name]; ok {
		return cpp.Int(v, ast.TI32), true
	}
	return cpp.Void, false
}

// kvKey is LLM_KV(arch)(kid): the metadata key of an LLM_KV_ constant.
func (r *Run) kvKey(v cpp.Val) (string, error) {
	switch {
	case v.K == cpp.KEnum && v.I == famKV:
		t, ok := kvNames[v.S]
		if !ok {
			return "", fmt.Errorf("no key name for %s", v.S)
		}
		return strings.Replace(t, "%s", r.Arch, 1), nil
	case v.K == cpp.KStr:
		return v.S, nil
	case v.K == cpp.KTN:
		return v.P.(*tnVal).String(), nil
	}
	return "", fmt.Errorf("%s is not a metadata key", v.Describe())
}

// ConstLen is a constant that sizes an array: LLAMA_MAX_LAYERS (as this
// model needs it), or one of the pin's enums.
func (r *Run) ConstLen(name string) (int64, bool) {
	if name == "LLAMA_MAX_LAYERS" {
		return r.maxLayers, true
	}
	v, ok := enumConsts[name]
	return v, ok
}

// Hparams is a model's llama_hparams, as the programs filled it.
type Hparams struct {
	r   *Run
	obj *cpp.Object
}

func (r *Run) newHparams() (*Hparams, error) {
	obj, err := r.NewStruct("llama_hparams", hparamsFields)
	if err != nil {
		return nil, err
	}
	obj.Strict = true // every member is declared: another name is an error
	return &Hparams{r: r, obj: obj}, nil
}

// newModel is the model object of a class: llama_model's members and
// those of the class and its bases.
func (r *Run) newModel(class string) (*cpp.Object, error) {
	o, err := r.NewStruct("llama_model", modelFields["llama_model"])
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

// NewStruct is a struct of class with its declared fields, each
// value-initialized as its declaration says.
func (r *Run) NewStruct(class string, fields []cpp.FieldDef) (*cpp.Object, error) {
	o := cpp.NewObject(class)
	// every member of llama_hparams is declared: another name is an error
	o.Strict = class == "llama_hparams"
	return o, r.addFields(o, fields)
}

func (r *Run) addFields(o *cpp.Object, fields []cpp.FieldDef) error {
	class := o.Class
	for _, fd := range fields {
		c := &cpp.Cell{T: fd.Type}
		switch {
		case fd.Type == ast.TObj && fd.Struct == "":
			v, err := r.Container(fd.CType)
			if err != nil {
				v = cpp.Null // a container the programs never use
			}
			c.T = ast.TAuto
			c.V = v
		case fd.Struct != "":
			sub, err := r.NewStruct(fd.Struct, structFields[fd.Struct])
			if err != nil {
				return err
			}
			c.T = ast.TAuto
			c.V = cpp.Val{K: cpp.KObj, P: sub}
		case fd.Len != "":
			n, err := r.ArrayLen(fd.Len)
			if err != nil {
				return fmt.Errorf("arch: %s.%s: length %s: %w", class, fd.Name, fd.Len, err)
			}
			c.T = ast.TAuto
			c.V = cpp.Val{K: cpp.KArr, P: cpp.NewArray(fd.Type, int(n), true)}
		default:
			v, err := defaultValue(fd)
			if err != nil {
				return fmt.Errorf("arch: %s.%s: %w", class, fd.Name, err)
			}
			c.V = v
		}
		o.Fields[fd.Name] = c
	}
	return nil
}

// defaultValue evaluates a member's initializer: a number, a boolean, an
// enum constant, INFINITY, with an optional sign.
func defaultValue(fd cpp.FieldDef) (cpp.Val, error) {
	s := strings.TrimSpace(fd.Default)
	if s == "" {
		return cpp.Zero(fd.Type), nil
	}
	neg := false
	if rest, ok := strings.CutPrefix(s, "-"); ok {
		neg, s = true, strings.TrimSpace(rest)
	}
	var v cpp.Val
	switch {
	case strings.HasPrefix(s, "\"") && fd.Type == ast.TStr:
		u, err := strconv.Unquote(s)
		if err != nil {
			return cpp.Void, fmt.Errorf("initializer %q", fd.Default)
		}
		return cpp.Str(u), nil
	case s == "true":
		v = cpp.True
	case s == "false":
		v = cpp.False
	case s == "INFINITY":
		v = cpp.Val{K: cpp.KFloat, T: ast.TF32, F: math.Inf(1)}
	default:
		if c, ok := enumConsts[s]; ok {
			v = cpp.Int(c, ast.TI32)
		} else if i, err := strconv.ParseInt(strings.TrimRight(s, "uUlL"), 0, 64); err == nil {
			v = cpp.Int(i, ast.TI64)
		} else if f, err := strconv.ParseFloat(strings.TrimRight(s, "fF"), 64); err == nil {
			v = cpp.Val{K: cpp.KFloat, T: ast.TF64, F: f}
		} else {
			return cpp.Void, fmt.Errorf("initializer %q", fd.Default)
		}
	}
	if neg {
		var err error
		if v, err = cpp.Arith("-", cpp.Int(0, ast.TI32), v); err != nil {
			return cpp.Void, err
		}
	}
	return cpp.Convert(v, fd.Type)
}

// Field reads a scalar member of llama_hparams.
func (h *Hparams) Field(name string) (int64, error) {
	c, ok := h.obj.Fields[name]
	if !ok {
		return 0, fmt.Errorf("arch: llama_hparams has no member %s", name)
	}
	switch c.V.K {
	case cpp.KInt:
		return c.V.I, nil
	case cpp.KFloat:
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
	vs := make([]cpp.Val, len(args))
	for i, a := range args {
		vs[i] = cpp.Int(a, ast.TI64)
	}
	v, err := h.r.Call(p, cpp.Val{K: cpp.KObj, P: h.obj}, vs)
	if err != nil {
		return 0, err
	}
	if v.K != cpp.KInt {
		return 0, fmt.Errorf("arch: llama_hparams::%s returned %s", method, v.Describe())
	}
	return v.I, nil
}

// newLayer is a llama_layer. Its struct-typed members (nextn, posnet,
// ...) are members by value: they come into being on first use.
func newLayer() cpp.Val {
	o := &cpp.Object{Class: "llama_layer", Fields: make(map[string]*cpp.Cell, 64)}
	o.Members = func(name string) *cpp.Object {
		if st, ok := layerStructs[name]; ok {
			return cpp.NewObject(st)
		}
		return nil
	}
	return cpp.Val{K: cpp.KObj, P: o}
}

// runOf is the replay a frame of its programs runs in.
func runOf(f *cpp.Frame) *Run { return Of(f) }

// enum families of KEnum values
const (
	famTensor = iota
	famKV
	famArch
)

// The errors of the replay's programs, as llama.cpp raises them (the
// evaluator's: package cpp).
type (
	// Throw is a C++ exception a program raised: llama.cpp reports it as
	// the load's error.
	Throw = cpp.Throw
	// Abort is a GGML_ASSERT or GGML_ABORT that would end llama.cpp's
	// process.
	Abort = cpp.Abort
	// Need describes a metadata key or a tensor a model lacks or has
	// wrong.
	Need = cpp.Need
)
