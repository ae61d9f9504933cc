package arch

import (
	"fmt"
	"os"
	"strconv"
	"strings"

	"github.com/ggload/ggload/ggml"
	"github.com/ggload/ggload/internal/arch/ast"
)

// A context of the model, replayed: llama_context_default_params, the
// checks of llama_init_from_model up to the constructor it tries, the
// constructor up to its first backend (every parameter it resolves, with
// its log lines), and output_reserve up to the buffer it allocates. All
// three are the pin's code (programs.sx); what follows them (backends,
// the memory module, the scheduler) is ggload's to plan.

// ContextParams are the llama_context_params a context is made with, as
// common_context_params_to_llama sets them over
// llama_context_default_params, and the model's split mode.
type ContextParams struct {
	NCtx, NBatch, NUBatch, NSeqMax uint32
	FlashAttn                      int // llama_flash_attn_type: -1 auto, 0 disabled, 1 enabled
	TypeK, TypeV                   ggml.Type
	OffloadKQV, KVUnified, SWAFull bool
	NOutputsMax                    uint32 // the most outputs of a batch; 0: n_batch

	SplitMode   int // llama_split_mode of the model
	MetaDevices int // split mode tensor: the meta device's devices
}

// Context is a context's parameters as llama_context's constructor
// resolves them (its llama_cparams), and the output buffer's size.
type Context struct {
	NCtx, NCtxSeq, NBatch, NUBatch, NSeqMax, NRSSeq uint32

	FlashAttnType         int  // params.flash_attn_type as llama_init_from_model leaves it
	FlashAttn, AutoFA     bool // cparams.flash_attn, cparams.auto_fa
	CausalAttn            bool
	OffloadKQV, KVUnified bool
	SWAFull               bool
	TypeK, TypeV          ggml.Type

	OutputBytes uint64 // output_reserve's new_size for n_seq_max outputs
}

// InitContext replays the making of a context of the model with params
// p. log hears llama.cpp's log lines (level "INFO", "WARN", "ERROR",
// "DEBUG"). Where llama.cpp returns no context, the error is a Throw with
// the line it logged; where its constructor throws, the Throw is that.
func (r *Run) InitContext(p ContextParams, log func(level, msg string)) (*Context, error) {
	if !r.Exact() {
		return nil, fmt.Errorf("arch: %s: no context for a model llama.cpp %s does not know", r.Arch, Pin)
	}
	var lastErr string
	r.log = func(level, msg string) {
		if level == "ERROR" {
			lastErr = msg
		}
		if log != nil {
			log(level, msg)
		}
	}
	defer func() { r.log = nil }()

	// the model's split mode and meta device, which llama_init_from_model reads
	r.splitMode = p.SplitMode
	ud := newObject("llama_meta_device_get_split_state_userdata")
	ud.fields["n_devices"] = &Cell{V: vInt(int64(p.MetaDevices), ast.TU64)}
	ud.fields["model"] = &Cell{V: Val{K: KObj, P: r.model}}
	r.model.fields["get_split_state_ud"] = &Cell{V: Val{K: KObj, P: ud}}

	prog := func(name string) (*Program, error) { return r.program(name) }
	def, err := prog("llama_context_default_params")
	if err != nil {
		return nil, err
	}
	pv, err := r.call(def, vVoid, nil)
	if err != nil {
		return nil, err
	}
	params := &Cell{V: pv}
	po, ok := pv.P.(*Object)
	if pv.K != KObj || !ok {
		return nil, fmt.Errorf("arch: llama_context_default_params returned %s", pv.describe())
	}
	set := func(name string, v Val) error {
		c, ok := po.fields[name]
		if !ok {
			return fmt.Errorf("arch: llama_context_params has no %s", name)
		}
		return c.set(v)
	}
	for _, kv := range []struct {
		name string
		v    Val
	}{
		{"n_ctx", vInt(int64(p.NCtx), ast.TU32)}, {"n_batch", vInt(int64(p.NBatch), ast.TU32)},
		{"n_ubatch", vInt(int64(p.NUBatch), ast.TU32)}, {"n_seq_max", vInt(int64(p.NSeqMax), ast.TU32)},
		{"flash_attn_type", vInt(int64(p.FlashAttn), ast.TI32)},
		{"type_k", vInt(int64(p.TypeK), ast.TI32)}, {"type_v", vInt(int64(p.TypeV), ast.TI32)},
		{"offload_kqv", vBool(p.OffloadKQV)}, {"kv_unified", vBool(p.KVUnified)}, {"swa_full", vBool(p.SWAFull)},
		{"n_outputs_max", vInt(int64(p.NOutputsMax), ast.TU32)},
	} {
		if err := set(kv.name, kv.v); err != nil {
			return nil, err
		}
	}

	// llama_init_from_model: its checks; a nullptr is the line it logged
	initFn, err := prog("llama_init_from_model")
	if err != nil {
		return nil, err
	}
	v, err := r.callCells(initFn, vVoid, []*Cell{{V: Val{K: KObj, P: r.model}}, params})
	if err != nil {
		return nil, r.wrap("llama_init_from_model: ", err)
	}
	if v.K == KNull {
		msg := strings.TrimPrefix(lastErr, "llama_init_from_model: ")
		if msg == "" {
			msg = "llama_init_from_model returned no context"
		}
		return nil, &Throw{Msg: msg}
	}

	// the constructor, with the params llama_init_from_model left
	ctx, err := r.newContext()
	if err != nil {
		return nil, err
	}
	ctor, err := prog("llama_context::llama_context")
	if err != nil {
		return nil, err
	}
	if _, err := r.callCells(ctor, ctx, []*Cell{{V: Val{K: KObj, P: r.model}}, {V: params.V}}); err != nil {
		return nil, r.wrap("llama_init_from_model: failed to initialize the context: ", err)
	}
	// output_reserve(n_seq_max): its size, before it allocates
	or, err := prog("llama_context::output_reserve")
	if err != nil {
		return nil, err
	}
	cp := ctx.P.(*Object).fields["cparams"].V.P.(*Object)
	r.cparams, r.ctx = cp, ctx
	u := func(name string) uint32 { return uint32(cp.fields[name].V.I) }
	locals, err := r.callLocals(or, ctx, []Val{vInt(int64(u("n_seq_max")), ast.TI32)}, "new_size")
	if err != nil {
		return nil, err
	}
	b := func(name string) bool { return cp.fields[name].V.truthy() }
	pf := func(name string) int64 { return params.V.P.(*Object).fields[name].V.I }
	return &Context{
		NCtx: u("n_ctx"), NCtxSeq: u("n_ctx_seq"), NBatch: u("n_batch"), NUBatch: u("n_ubatch"),
		NSeqMax: u("n_seq_max"), NRSSeq: u("n_rs_seq"),
		FlashAttnType: int(pf("flash_attn_type")), FlashAttn: b("flash_attn"), AutoFA: b("auto_fa"),
		CausalAttn: b("causal_attn"), OffloadKQV: b("offload_kqv"), KVUnified: b("kv_unified"),
		SWAFull: pf("swa_full") != 0, TypeK: ggml.Type(pf("type_k")), TypeV: ggml.Type(pf("type_v")),
		OutputBytes: uint64(locals["new_size"].I),
	}, nil
}

// newContext is a llama_context object with the members the replayed
// code reads before any backend exists.
func (r *Run) newContext() (Val, error) {
	o := newObject("llama_context")
	cp, err := r.newStruct("llama_cparams", structFields["llama_cparams"])
	if err != nil {
		return vVoid, err
	}
	o.fields["model"] = &Cell{V: Val{K: KObj, P: r.model}}
	o.fields["cparams"] = &Cell{V: Val{K: KObj, P: cp}}
	for _, n := range []string{"t_start_us", "t_load_us"} {
		o.fields[n] = &Cell{T: ast.TI64, V: vInt(0, ast.TI64)}
	}
	o.fields["n_outputs"] = &Cell{T: ast.TU32, V: vInt(0, ast.TU32)}
	o.fields["graph_reuse_disable"] = &Cell{T: ast.TBool, V: vFalse}
	o.fields["embd_layer_inp"] = &Cell{V: Val{K: KArr, P: &Array{elem: ast.TAuto}}}
	o.fields["output_ids"] = &Cell{V: Val{K: KArr, P: &Array{elem: ast.TI32}}}
	o.fields["buf_output"] = &Cell{V: vNull}
	for _, n := range []string{"logits", "embd", "embd_nextn"} {
		bv := newObject("buffer_view")
		bv.fields["size"] = &Cell{T: ast.TU64, V: vInt(0, ast.TU64)}
		o.fields[n] = &Cell{V: Val{K: KObj, P: bv}}
	}
	sampling := newObject("sampling_info")
	sampling.fields["samplers"] = &Cell{V: Val{K: KMap, P: &cmap{vals: []Val{}}}}
	o.fields["sampling"] = &Cell{V: Val{K: KObj, P: sampling}}
	return Val{K: KObj, P: o}, nil
}

// callCells runs a program with its parameters bound to the cells given:
// what the program does to a parameter, the caller sees.
func (r *Run) callCells(p *Program, this Val, args []*Cell) (Val, error) {
	f := &frame{r: r, fn: p.Name, this: this, sc: r.newScope(nil)}
	defer r.release(f.sc)
	for i, d := range p.Params.Kids {
		if i >= len(args) {
			return vVoid, fmt.Errorf("arch: %s: %d arguments for %d parameters", p.Name, len(args), len(p.Params.Kids))
		}
		if d.S != "" {
			f.sc.define(d.S, args[i])
		}
	}
	if _, err := f.exec(p.Body); err != nil {
		return vVoid, err
	}
	return f.ret, nil
}

// callLocals runs a program and returns the values its body's variables
// named have when it ends.
func (r *Run) callLocals(p *Program, this Val, args []Val, names ...string) (map[string]Val, error) {
	out := map[string]Val{}
	r.capture = &capture{names: names, out: out}
	defer func() { r.capture = nil }()
	if _, err := r.call(p, this, args); err != nil {
		return nil, err
	}
	for _, n := range names {
		if _, ok := out[n]; !ok {
			return nil, fmt.Errorf("arch: %s has no variable %s at its end", p.Name, n)
		}
	}
	return out, nil
}

// capture is callLocals' request: the variables of the scopes that end.
type capture struct {
	names []string
	out   map[string]Val
}

func (c *capture) scopeEnds(s *scope) {
	for _, n := range c.names {
		for i := len(s.names) - 1; i >= 0; i-- {
			if s.names[i] == n {
				c.out[n] = s.cells[i].V // the outermost scope ends last
				break
			}
		}
	}
}

func contextBuiltins() map[string]builtinFunc {
	logAt := func(level string) builtinFunc {
		return func(f *frame, args []*ast.Node) (Val, error) {
			v, err := bFormat(f, args)
			if err != nil {
				return vVoid, err
			}
			if f.r.log != nil {
				f.r.log(level, strings.TrimSuffix(v.S, "\n"))
			}
			return vVoid, nil
		}
	}
	unplanned := func(name string) builtinFunc {
		return func(f *frame, _ []*ast.Node) (Val, error) {
			return vVoid, f.errorf("%s: ggload plans no backend samplers or buffers here", name)
		}
	}
	return map[string]builtinFunc{
		"LLAMA_LOG_INFO":  logAt("INFO"),
		"LLAMA_LOG_WARN":  logAt("WARN"),
		"LLAMA_LOG_ERROR": logAt("ERROR"),
		"LLAMA_LOG_DEBUG": logAt("DEBUG"),
		"GGML_PAD": func(f *frame, args []*ast.Node) (Val, error) {
			vs, err := evalArgs(f, args)
			if err != nil {
				return vVoid, err
			}
			if len(vs) != 2 || vs[0].K != KInt || vs[1].K != KInt || vs[1].I <= 0 {
				return vVoid, f.errorf("GGML_PAD arguments")
			}
			// ((x) + (n) - 1) & ~((n) - 1), in x's type
			t := common(vs[0].T, vs[1].T)
			return vInt((vs[0].I+vs[1].I-1)&^(vs[1].I-1), t), nil
		},
		"getenv": func(f *frame, args []*ast.Node) (Val, error) {
			vs, err := evalArgs(f, args)
			if err != nil {
				return vVoid, err
			}
			if len(vs) != 1 || vs[0].K != KStr {
				return vVoid, f.errorf("getenv arguments")
			}
			if v, ok := os.LookupEnv(vs[0].S); ok {
				return vStr(v), nil
			}
			return vNull, nil
		},
		"atoi": func(f *frame, args []*ast.Node) (Val, error) {
			vs, err := evalArgs(f, args)
			if err != nil {
				return vVoid, err
			}
			if len(vs) != 1 || vs[0].K != KStr {
				return vVoid, f.errorf("atoi arguments")
			}
			s := strings.TrimLeft(vs[0].S, " \t\n")
			end := 0
			if end < len(s) && (s[end] == '-' || s[end] == '+') {
				end++
			}
			for end < len(s) && s[end] >= '0' && s[end] <= '9' {
				end++
			}
			n, _ := strconv.ParseInt(s[:end], 10, 32)
			return vInt(n, ast.TI32), nil
		},
		"ggml_is_quantized": func(f *frame, args []*ast.Node) (Val, error) {
			t, err := typeArg(f, "ggml_is_quantized", args)
			if err != nil {
				return vVoid, err
			}
			return vBool(t.Quantized()), nil
		},
		"ggml_type_name": func(f *frame, args []*ast.Node) (Val, error) {
			t, err := typeArg(f, "ggml_type_name", args)
			if err != nil {
				return vVoid, err
			}
			return vStr(t.String()), nil
		},
		"ggml_backend_buffer_get_size": unplanned("ggml_backend_buffer_get_size"),
		"llama_sampler_chain_get":      unplanned("llama_sampler_chain_get"),
		"llama_sampler_chain_n":        unplanned("llama_sampler_chain_n"),
		"set_sampler":                  unplanned("set_sampler"),
	}
}

// typeArg reads a call's one argument, a ggml type.
func typeArg(f *frame, fn string, args []*ast.Node) (ggml.Type, error) {
	vs, err := evalArgs(f, args)
	if err != nil {
		return 0, err
	}
	if len(vs) != 1 || vs[0].K != KInt || !ggml.Type(vs[0].I).Valid() {
		return 0, f.errorf("%s arguments", fn)
	}
	return ggml.Type(vs[0].I), nil
}
