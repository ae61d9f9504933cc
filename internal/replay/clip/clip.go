// Package clip is the pinned llama.cpp's projector loader replayed: the
// hyperparameters and the tensors that tools/mtmd/clip.cpp's
// clip_model_loader reads from a projector file for one encoder
// (load_hparams, load_tensors). The programs and tables are generated
// from the pinned source by internal/replay/gen (scripts/gen-archs.sh) and run
// by package cpp, a Run being their Host.
package clip

import (
	_ "embed"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math"
	"strconv"
	"strings"

	"github.com/ggload/ggload/gguf"
	"github.com/ggload/ggload/internal/replay/cpp"
	"github.com/ggload/ggload/internal/replay/cpp/ast"
)

// programsText is the generated programs.
//
//go:embed programs.sx
var programsText string

var programs = cpp.NewLibrary(programsText, staticGlobal, structFields)

func init() {
	// the loader's builtins and the graphs': where both have a function,
	// the graphs' while a graph is built, the loader's otherwise
	all := graphBuiltins()
	for name, b := range builtins {
		if gb, ok := all[name]; ok {
			loader := b
			all[name] = func(f *cpp.Frame, args []*ast.Node) (cpp.Val, error) {
				if _, building := f.I.Session.(*session); building {
					return gb(f, args)
				}
				return loader(f, args)
			}
			continue
		}
		all[name] = b
	}
	programs.Register(all)
}

// Modalities are clip's encoders, in the order clip_init creates them.
var Modalities = []string{"vision", "audio", "gen_audio"}

var modalityConst = map[string]string{"vision": "CLIP_MODALITY_VISION", "audio": "CLIP_MODALITY_AUDIO", "gen_audio": "CLIP_MODALITY_GEN_AUDIO"}

// Encoder is one encoder of a projector file as clip loads it.
type Encoder struct {
	Modality  string
	Projector string // the projector type's name (PROJECTOR_TYPE_NAMES)
	// Tensors are the file's tensors clip loads, in the order it loads
	// them (its weight context's order).
	Tensors []gguf.TensorInfo
	// Embd is the width of the embeddings it hands the text model
	// (clip_n_mmproj_embd).
	Embd int64
	// Hparams is clip_hparams as load_hparams left it.
	Hparams *cpp.Object
	// Model is clip_model as load_tensors left it.
	Model *cpp.Object

	path string
	run  *Run
	ctx  *cpp.Object // clip_ctx
}

// Int is an integer member of the encoder's clip_hparams.
func (e *Encoder) Int(name string) (int64, bool) {
	c, ok := e.Hparams.Fields[name]
	if !ok || c.V.K != cpp.KInt {
		return 0, false
	}
	return c.V.I, true
}

// Error is clip's own refusal of a projector file: what its loader
// throws or asserts.
type Error struct {
	Path, Modality, Msg string
}

func (e *Error) Error() string {
	return fmt.Sprintf("mmproj %s: %s encoder: %s", e.Path, e.Modality, strings.TrimSpace(e.Msg))
}

// Options are clip_context_params' settings that change what the loader
// reads: --image-min-tokens and --image-max-tokens (0: not given, the
// model's own).
type Options struct {
	ImageMinTokens, ImageMaxTokens int
}

// Load replays clip_model_loader's load_hparams and load_tensors for one
// encoder of the projector file f (read from path).
func Load(path string, f *gguf.File, modality string) (*Encoder, error) {
	return LoadWith(path, f, modality, Options{})
}

// LoadWith is Load with clip_context_params' options, set on the model
// before its hyperparameters are read, as clip_ctx's constructor sets them.
func LoadWith(path string, f *gguf.File, modality string, o Options) (*Encoder, error) {
	mc, ok := modalityConst[modality]
	if !ok {
		return nil, fmt.Errorf("clip: unknown modality %q", modality)
	}
	r := &Run{path: path, f: f, seen: map[string]bool{}}
	r.Interp = cpp.Interp{Lib: programs, Host: r}
	loader := cpp.NewObject("clip_model_loader")
	loader.Open = true
	flag := func(key string) cpp.Val {
		v, ok := f.Lookup(key)
		if !ok {
			return cpp.False
		}
		b, _ := v.Bool()
		return cpp.Bool(b)
	}
	loader.Fields["has_vision"] = &cpp.Cell{V: flag("clip.has_vision_encoder"), T: ast.TBool}
	loader.Fields["has_audio"] = &cpp.Cell{V: flag("clip.has_audio_encoder"), T: ast.TBool}
	loader.Fields["has_gen_audio"] = &cpp.Cell{V: flag("clip.has_gen_audio_encoder"), T: ast.TBool}
	loader.Fields["fname"] = &cpp.Cell{V: cpp.Str(path), T: ast.TStr}
	loader.Fields["ctx_meta"] = &cpp.Cell{V: handle("ctx_meta")}
	loader.Fields["ctx_gguf"] = &cpp.Cell{V: handle("ctx_gguf")}
	this := cpp.Val{K: cpp.KObj, P: loader}

	model, err := r.NewStruct("clip_model", structFields["clip_model"])
	if err != nil {
		return nil, err
	}
	model.Open = true
	hparams := model.Fields["hparams"].V.P.(*cpp.Object)
	if o.ImageMinTokens > 0 {
		hparams.Fields["custom_image_min_tokens"].V = cpp.Int(int64(o.ImageMinTokens), ast.TI32)
	}
	if o.ImageMaxTokens > 0 {
		hparams.Fields["custom_image_max_tokens"].V = cpp.Int(int64(o.ImageMaxTokens), ast.TI32)
	}
	ctx := cpp.NewObject("clip_ctx")
	ctx.Open = true
	ctx.Fields["model"] = &cpp.Cell{V: cpp.Val{K: cpp.KObj, P: model}}
	ctx.Fields["backend"] = &cpp.Cell{V: handle("backend")}
	ctx.Fields["ctx_data"] = &cpp.Cell{V: handle("ctx_data")}
	ctx.Fields["buf"] = &cpp.Cell{V: handle("buf")}
	// the weights' data are ggload's to read: clip's reading is skipped
	ctx.Fields["no_alloc"] = &cpp.Cell{V: cpp.True, T: ast.TBool}
	mem, err := r.Container("std::map<ggml_backend_dev_t, size_t>")
	if err != nil {
		return nil, err
	}
	ctx.Fields["mem_usage"] = &cpp.Cell{V: mem}

	fail := func(err error) (*Encoder, error) {
		var th *cpp.Throw
		var ab *cpp.Abort
		switch {
		case errors.As(err, &th):
			return nil, &Error{Path: path, Modality: modality, Msg: th.Msg}
		case errors.As(err, &ab):
			return nil, &Error{Path: path, Modality: modality, Msg: ab.Msg}
		}
		return nil, fmt.Errorf("mmproj %s: %s encoder: replaying clip's loader: %w", path, modality, err)
	}
	hp, err := programs.Lookup("clip_model_loader::load_hparams")
	if err != nil {
		return nil, err
	}
	modelCell := &cpp.Cell{V: cpp.Val{K: cpp.KObj, P: model}}
	if _, err := r.CallCells(hp, this, []*cpp.Cell{modelCell, {V: cpp.Int(enumConsts[mc], ast.TI32), T: ast.TI32}}); err != nil {
		return fail(err)
	}
	tp, err := programs.Lookup("clip_model_loader::load_tensors")
	if err != nil {
		return nil, err
	}
	if _, err := r.CallCells(tp, this, []*cpp.Cell{{V: cpp.Val{K: cpp.KObj, P: ctx}}}); err != nil {
		return fail(err)
	}
	ep, err := programs.Lookup("clip_n_mmproj_embd")
	if err != nil {
		return nil, err
	}
	embd, err := r.CallCells(ep, cpp.Void, []*cpp.Cell{{V: cpp.Val{K: cpp.KObj, P: ctx}}})
	if err != nil {
		return fail(err)
	}
	e := &Encoder{Modality: modality, Tensors: r.loaded, Model: model, Embd: int64(int32(embd.I)), path: path, run: r, ctx: ctx}
	e.Hparams = model.Fields["hparams"].V.P.(*cpp.Object)
	pt := model.Fields["proj_type"].V.I
	for _, p := range projectorNames {
		if enumConsts[p[0]] == pt {
			e.Projector = p[1]
		}
	}
	return e, nil
}

// Run is one replay of clip's loader on a file: the programs' Host.
type Run struct {
	cpp.Interp
	path   string
	f      *gguf.File
	loaded []gguf.TensorInfo
	seen   map[string]bool
	// fin's read position (get_vector's seekg)
	pos int64
}

// handle is an opaque native object of clip's (a backend, a context, a
// smart pointer to one): what the programs pass around without looking
// inside.
func handle(name string) cpp.Val {
	o := cpp.NewObject("handle")
	o.Open = true
	o.Fields["what"] = &cpp.Cell{V: cpp.Str(name)}
	return cpp.Val{K: cpp.KObj, P: o}
}

// Function is a program of the replay, nil if none.
func (r *Run) Function(name string) *cpp.Program {
	p, _ := programs.Lookup(name)
	return p
}

// Global resolves a constant.
func (r *Run) Global(name string) (cpp.Val, bool) { return staticGlobal(name) }

func staticGlobal(name string) (cpp.Val, bool) {
	if s, ok := formats[name]; ok {
		return cpp.Str(s), true
	}
	if v, ok := enumConsts[name]; ok {
		return cpp.Int(v, ast.TI32), true
	}
	if vs, ok := constArrays[name]; ok {
		// a fresh array each time: the programs only read it
		a := &cpp.Array{Elem: ast.TI32, Fixed: true, Cells: make([]cpp.Cell, len(vs))}
		for i, v := range vs {
			a.Cells[i] = cpp.Cell{V: cpp.Int(v, ast.TI32), T: ast.TI32}
		}
		return cpp.Val{K: cpp.KArr, P: a}, true
	}
	switch name {
	case "std::ios::beg":
		return cpp.Int(0, ast.TI32), true
	case "INT32_MAX":
		return cpp.Int(math.MaxInt32, ast.TI32), true
	}
	return cpp.Void, false
}

// ConstLen: clip's structs hold no arrays sized by constants.
func (r *Run) ConstLen(name string) (int64, bool) {
	v, ok := enumConsts[name]
	return v, ok
}

// NewStruct is a struct of clip-model.h, value-initialized as declared.
func (r *Run) NewStruct(class string, fields []cpp.FieldDef) (*cpp.Object, error) {
	o := cpp.NewObject(class)
	o.Open = true
	for _, fd := range fields {
		c := &cpp.Cell{T: fd.Type}
		switch {
		case fd.Struct != "":
			sub, err := r.NewStruct(fd.Struct, structFields[fd.Struct])
			if err != nil {
				return nil, err
			}
			c.T, c.V = ast.TAuto, cpp.Val{K: cpp.KObj, P: sub}
		case fd.Len != "":
			n, err := strconv.ParseInt(fd.Len, 0, 64)
			if err != nil {
				v, ok := enumConsts[fd.Len]
				if !ok {
					return nil, fmt.Errorf("clip: %s.%s: length %s", class, fd.Name, fd.Len)
				}
				n = v
			}
			c.T, c.V = ast.TAuto, cpp.Val{K: cpp.KArr, P: cpp.NewArray(fd.Type, int(n), true)}
		case fd.Type == ast.TObj:
			v, err := r.Container(fd.CType)
			if err != nil {
				v = cpp.Null // a container the programs never use
			}
			c.T, c.V = ast.TAuto, v
		default:
			v, err := defaultValue(fd)
			if err != nil {
				return nil, fmt.Errorf("clip: %s.%s: %w", class, fd.Name, err)
			}
			c.V = v
		}
		o.Fields[fd.Name] = c
	}
	return o, nil
}

// defaultValue evaluates a member's initializer.
func defaultValue(fd cpp.FieldDef) (cpp.Val, error) {
	s := strings.TrimSpace(fd.Default)
	if s == "" {
		return cpp.Zero(fd.Type), nil
	}
	if v, ok := enumConsts[s]; ok {
		return cpp.Int(v, ast.TI32), nil
	}
	if fd.Type == ast.TStr {
		return cpp.Str(strings.Trim(s, `"`)), nil
	}
	var v cpp.Val
	switch {
	case s == "true" || s == "false":
		v = cpp.Bool(s == "true")
	case strings.ContainsAny(s, ".eE") && !strings.HasPrefix(s, "0x"):
		x, err := strconv.ParseFloat(strings.TrimSuffix(s, "f"), 64)
		if err != nil {
			return cpp.Void, fmt.Errorf("initializer %q: %w", s, err)
		}
		v = cpp.Val{K: cpp.KFloat, T: ast.TF64, F: x}
		if strings.HasSuffix(s, "f") {
			v.T, v.F = ast.TF32, float64(float32(x))
		}
	default:
		x, err := strconv.ParseInt(s, 0, 64)
		if err != nil {
			return cpp.Void, fmt.Errorf("initializer %q: %w", s, err)
		}
		v = cpp.Int(x, ast.TI32)
	}
	return cpp.Convert(v, fd.Type)
}

// HasMethod: the loader's getters, clip_hparams' methods, the handles'
// smart-pointer methods and the file stream's.
func (r *Run) HasMethod(obj cpp.Val, name string) bool {
	if obj.K != cpp.KObj {
		return false
	}
	switch o := obj.P.(*cpp.Object); o.Class {
	case "clip_model_loader":
		return loaderGetters[name]
	case "clip_hparams", "clip_layer", "clip_model":
		return r.method(o.Class, name, -1) != nil
	case "handle":
		switch name {
		case "get", "reset", "seekg", "read", "close", "size", "data":
			return true
		}
	case "unique_ptr":
		return name == "get" || name == "reset"
	case "clip_image_f32":
		return name == "nx" || name == "ny" || name == "get_size"
	case "anyres_info":
		return name == "is_tiled"
	case "clip_ctx":
		return name == "proj_type"
	}
	return false
}

// method is a struct's method program: of n arguments where it is
// overloaded (any, n < 0); nil if none.
func (r *Run) method(class, name string, n int) *cpp.Program {
	if p := r.Function(class + "::" + name); p != nil {
		return p
	}
	if n >= 0 {
		return r.Function(fmt.Sprintf("%s::%s/%d", class, name, n))
	}
	for i := 0; i < 8; i++ {
		if p := r.Function(fmt.Sprintf("%s::%s/%d", class, name, i)); p != nil {
			return p
		}
	}
	return nil
}

var loaderGetters = map[string]bool{"get_bool": true, "get_i32": true, "get_u32": true, "get_f32": true,
	"get_arr_f32": true, "get_string": true, "get_arr_int": true}

// CallMethod calls a method of the replay's objects.
func (r *Run) CallMethod(f *cpp.Frame, m *cpp.Method, args []*ast.Node) (cpp.Val, error) {
	o := m.Recv.P.(*cpp.Object)
	switch o.Class {
	case "clip_model_loader":
		return r.getter(f, m.Name, args)
	case "clip_hparams", "clip_layer", "clip_model":
		p := r.method(o.Class, m.Name, len(args))
		if p == nil {
			return cpp.Void, f.Errorf("%s::%s with %d arguments", o.Class, m.Name, len(args))
		}
		return r.Invoke(f, p, m.Recv, args)
	case "handle":
		switch m.Name {
		case "get":
			return m.Recv, nil
		case "reset", "close":
			return cpp.Void, nil
		case "size":
			return o.Field("n").V, nil
		case "data":
			return cpp.Null, nil
		case "seekg":
			vs, err := cpp.EvalArgs(f, args)
			if err != nil {
				return cpp.Void, err
			}
			r.pos = vs[0].I
			return cpp.Void, nil
		case "read":
			return r.read(f, args)
		}
	case "unique_ptr":
		if m.Name == "get" {
			return o.Fields["p"].V, nil
		}
		vs, err := cpp.EvalArgs(f, args)
		if err != nil {
			return cpp.Void, err
		}
		o.Fields["p"].V = cpp.Null
		if len(vs) == 1 {
			o.Fields["p"].V = vs[0]
		}
		return cpp.Void, nil
	case "clip_image_f32":
		switch m.Name {
		case "nx":
			return o.Fields["nx_"].V, nil
		case "ny":
			return o.Fields["ny_"].V, nil
		case "get_size":
			sz := cpp.NewObject("clip_image_size")
			sz.Fields["width"] = &cpp.Cell{V: o.Fields["nx_"].V, T: ast.TI32}
			sz.Fields["height"] = &cpp.Cell{V: o.Fields["ny_"].V, T: ast.TI32}
			return cpp.Val{K: cpp.KObj, P: sz}, nil
		}
	case "anyres_info":
		return cpp.Bool(o.Fields["grid_x"].V.I > 0 && o.Fields["grid_y"].V.I > 0), nil
	case "clip_ctx":
		return o.Fields["model"].V.P.(*cpp.Object).Fields["proj_type"].V, nil
	}
	return cpp.Void, f.Errorf("method %s of %s", m.Name, m.Recv.Describe())
}

func asErr[T error](err error, target *T) bool { return errors.As(err, target) }

// read is fin.read(reinterpret_cast<char *>(v.data()), n): n bytes of
// little-endian floats from the file into the vector v.
func (r *Run) read(f *cpp.Frame, args []*ast.Node) (cpp.Val, error) {
	if len(args) != 2 {
		return cpp.Void, f.Errorf("read arguments")
	}
	dst := args[0]
	for dst.Op == ast.OpCast {
		dst = dst.Kids[0]
	}
	// v.data(): a call of member data on v
	if dst.Op != ast.OpCall || len(dst.Kids) != 1 || dst.Kids[0].Op != ast.OpMember || dst.Kids[0].S != "data" {
		return cpp.Void, f.Errorf("read into %s", dst.Op)
	}
	v, err := f.Eval(dst.Kids[0].Kids[0])
	if err != nil {
		return cpp.Void, err
	}
	n, err := f.Eval(args[1])
	if err != nil {
		return cpp.Void, err
	}
	a, ok := v.P.(*cpp.Array)
	if v.K != cpp.KArr || !ok || int64(len(a.Cells))*4 < n.I {
		return cpp.Void, f.Errorf("read of %d bytes into %s", n.I, v.Describe())
	}
	buf := make([]byte, n.I)
	if _, err := r.f.ReaderAt().ReadAt(buf, r.pos); err != nil && !(err == io.EOF && len(buf) == 0) {
		return cpp.Void, &cpp.Throw{Msg: fmt.Sprintf("reading %d bytes at %d: %v", n.I, r.pos, err)}
	}
	for i := 0; i+4 <= len(buf); i += 4 {
		a.Cells[i/4].V = cpp.Val{K: cpp.KFloat, T: ast.TF32, F: float64(math.Float32frombits(binary.LittleEndian.Uint32(buf[i:])))}
	}
	r.pos += n.I
	return cpp.Void, nil
}
