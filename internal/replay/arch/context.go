package arch

import (
	"fmt"
	"os"
	"strconv"
	"strings"

	"github.com/ggload/ggload/ggml"
	"github.com/ggload/ggload/internal/replay/cpp"
	"github.com/ggload/ggload/internal/replay/cpp/ast"
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
	Embeddings                     bool
	PoolingType                    int    // llama_pooling_type: -1 the model's
	NRSSeq                         uint32 // rollback snapshots per sequence

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
	r.setSplitMode(p)
	params, err := r.contextParams(p)
	if err != nil {
		return nil, err
	}
	if err := r.initFromModel(params, &lastErr); err != nil {
		return nil, err
	}
	if err := r.construct(params); err != nil {
		return nil, err
	}
	return r.resolved(params)
}

// setSplitMode gives the model its split mode and meta device, which
// llama_init_from_model reads.
func (r *Run) setSplitMode(p ContextParams) {
	r.splitMode = p.SplitMode
	ud := cpp.NewObject("llama_meta_device_get_split_state_userdata")
	ud.Fields["n_devices"] = &cpp.Cell{V: cpp.Int(int64(p.MetaDevices), ast.TU64)}
	ud.Fields["model"] = &cpp.Cell{V: cpp.Val{K: cpp.KObj, P: r.model}}
	r.model.Fields["get_split_state_ud"] = &cpp.Cell{V: cpp.Val{K: cpp.KObj, P: ud}}
}

// contextParams is llama_context_default_params with p's values set, as
// common_context_params_to_llama sets them.
func (r *Run) contextParams(p ContextParams) (*cpp.Cell, error) {
	def, err := r.program("llama_context_default_params")
	if err != nil {
		return nil, err
	}
	pv, err := r.Call(def, cpp.Void, nil)
	if err != nil {
		return nil, err
	}
	po, ok := pv.P.(*cpp.Object)
	if pv.K != cpp.KObj || !ok {
		return nil, fmt.Errorf("arch: llama_context_default_params returned %s", pv.Describe())
	}
	for _, kv := range []struct {
		name string
		v    cpp.Val
	}{
		{"n_ctx", cpp.Int(int64(p.NCtx), ast.TU32)}, {"n_batch", cpp.Int(int64(p.NBatch), ast.TU32)},
		{"n_ubatch", cpp.Int(int64(p.NUBatch), ast.TU32)}, {"n_seq_max", cpp.Int(int64(p.NSeqMax), ast.TU32)},
		{"flash_attn_type", cpp.Int(int64(p.FlashAttn), ast.TI32)},
		{"type_k", cpp.Int(int64(p.TypeK), ast.TI32)}, {"type_v", cpp.Int(int64(p.TypeV), ast.TI32)},
		{"offload_kqv", cpp.Bool(p.OffloadKQV)}, {"kv_unified", cpp.Bool(p.KVUnified)}, {"swa_full", cpp.Bool(p.SWAFull)},
		{"n_outputs_max", cpp.Int(int64(p.NOutputsMax), ast.TU32)},
		{"embeddings", cpp.Bool(p.Embeddings)}, {"pooling_type", cpp.Int(int64(p.PoolingType), ast.TI32)},
		{"n_rs_seq", cpp.Int(int64(p.NRSSeq), ast.TU32)},
	} {
		c, ok := po.Fields[kv.name]
		if !ok {
			return nil, fmt.Errorf("arch: llama_context_params has no %s", kv.name)
		}
		if err := c.Set(kv.v); err != nil {
			return nil, err
		}
	}
	return &cpp.Cell{V: pv}, nil
}

// initFromModel is llama_init_from_model's checks, which may change the
// params; where it returns nullptr, the error is the line it logged last.
func (r *Run) initFromModel(params *cpp.Cell, lastErr *string) error {
	initFn, err := r.program("llama_init_from_model")
	if err != nil {
		return err
	}
	v, err := r.CallCells(initFn, cpp.Void, []*cpp.Cell{{V: cpp.Val{K: cpp.KObj, P: r.model}}, params})
	if err != nil {
		return r.wrap("llama_init_from_model: ", err)
	}
	if v.K == cpp.KNull {
		msg := strings.TrimPrefix(*lastErr, "llama_init_from_model: ")
		if msg == "" {
			msg = "llama_init_from_model returned no context"
		}
		return &cpp.Throw{Msg: msg}
	}
	return nil
}

// construct runs llama_context's constructor with the params
// llama_init_from_model left: the context and its llama_cparams.
func (r *Run) construct(params *cpp.Cell) error {
	ctx, err := r.newContext()
	if err != nil {
		return err
	}
	ctor, err := r.program("llama_context::llama_context")
	if err != nil {
		return err
	}
	if _, err := r.CallCells(ctor, ctx, []*cpp.Cell{{V: cpp.Val{K: cpp.KObj, P: r.model}}, {V: params.V}}); err != nil {
		return r.wrap("llama_init_from_model: failed to initialize the context: ", err)
	}
	r.cparams, r.ctx = ctx.P.(*cpp.Object).Fields["cparams"].V.P.(*cpp.Object), ctx
	return nil
}

// resolved is the context's parameters as the constructor resolved them,
// and output_reserve(n_seq_max)'s size, before it allocates.
func (r *Run) resolved(params *cpp.Cell) (*Context, error) {
	or, err := r.program("llama_context::output_reserve")
	if err != nil {
		return nil, err
	}
	cp := r.cparams
	u := func(name string) uint32 { return uint32(cp.Fields[name].V.I) }
	locals, err := r.CallLocals(or, r.ctx, []cpp.Val{cpp.Int(int64(u("n_seq_max")), ast.TI32)}, "new_size")
	if err != nil {
		return nil, err
	}
	b := func(name string) bool { return cp.Fields[name].V.Truthy() }
	pf := func(name string) int64 { return params.V.P.(*cpp.Object).Fields[name].V.I }
	return &Context{
		NCtx: u("n_ctx"), NCtxSeq: u("n_ctx_seq"), NBatch: u("n_batch"), NUBatch: u("n_ubatch"),
		NSeqMax: u("n_seq_max"), NRSSeq: u("n_rs_seq"),
		FlashAttnType: int(pf("flash_attn_type")), FlashAttn: b("flash_attn"), AutoFA: b("auto_fa"),
		CausalAttn: b("causal_attn"), OffloadKQV: b("offload_kqv"), KVUnified: b("kv_unified"),
		SWAFull: pf("swa_full") != 0, TypeK: ggml.Type(pf("type_k")), TypeV: ggml.Type(pf("type_v")),
		OutputBytes: uint64(locals["new_size"].I),
	}, nil
}

// Memory is what create_memory reads of the context (llama_memory_params
// and llama_cparams), for Run.CreateMemory.
func (c *Context) Memory() MemoryParams {
	return MemoryParams{TypeK: c.TypeK, TypeV: c.TypeV, SWAFull: c.SWAFull, FlashAttn: c.FlashAttn,
		OffloadKQV: c.OffloadKQV, KVUnified: c.KVUnified, NCtxSeq: c.NCtxSeq, NSeqMax: c.NSeqMax, NUBatch: c.NUBatch, NRSSeq: c.NRSSeq}
}

// newContext is a llama_context object with the members the replayed
// code reads before any backend exists.
func (r *Run) newContext() (cpp.Val, error) {
	o := cpp.NewObject("llama_context")
	cp, err := r.NewStruct("llama_cparams", structFields["llama_cparams"])
	if err != nil {
		return cpp.Void, err
	}
	o.Fields["model"] = &cpp.Cell{V: cpp.Val{K: cpp.KObj, P: r.model}}
	o.Fields["cparams"] = &cpp.Cell{V: cpp.Val{K: cpp.KObj, P: cp}}
	for _, n := range []string{"t_start_us", "t_load_us"} {
		o.Fields[n] = &cpp.Cell{T: ast.TI64, V: cpp.Int(0, ast.TI64)}
	}
	o.Fields["n_outputs"] = &cpp.Cell{T: ast.TU32, V: cpp.Int(0, ast.TU32)}
	o.Fields["graph_reuse_disable"] = &cpp.Cell{T: ast.TBool, V: cpp.False}
	o.Fields["embd_layer_inp"] = &cpp.Cell{V: cpp.Val{K: cpp.KArr, P: &cpp.Array{Elem: ast.TAuto}}}
	o.Fields["output_ids"] = &cpp.Cell{V: cpp.Val{K: cpp.KArr, P: &cpp.Array{Elem: ast.TI32}}}
	o.Fields["buf_output"] = &cpp.Cell{V: cpp.Null}
	for _, n := range []string{"logits", "embd", "embd_nextn"} {
		bv := cpp.NewObject("buffer_view")
		bv.Fields["size"] = &cpp.Cell{T: ast.TU64, V: cpp.Int(0, ast.TU64)}
		o.Fields[n] = &cpp.Cell{V: cpp.Val{K: cpp.KObj, P: bv}}
	}
	sampling := cpp.NewObject("sampling_info")
	sampling.Fields["samplers"] = &cpp.Cell{V: cpp.Val{K: cpp.KMap, P: &cpp.Map{Vals: []*cpp.Cell{}, Elem: ast.TPtr}}}
	o.Fields["sampling"] = &cpp.Cell{V: cpp.Val{K: cpp.KObj, P: sampling}}
	return cpp.Val{K: cpp.KObj, P: o}, nil
}

func contextBuiltins() map[string]cpp.Builtin {
	logAt := func(level string) cpp.Builtin {
		return func(f *cpp.Frame, args []*ast.Node) (cpp.Val, error) {
			v, err := cpp.Format(f, args)
			if err != nil {
				return cpp.Void, err
			}
			if runOf(f).log != nil {
				runOf(f).log(level, strings.TrimSuffix(v.S, "\n"))
			}
			return cpp.Void, nil
		}
	}
	unplanned := func(name string) cpp.Builtin {
		return func(f *cpp.Frame, _ []*ast.Node) (cpp.Val, error) {
			return cpp.Void, f.Errorf("%s: ggload plans no backend samplers or buffers here", name)
		}
	}
	return map[string]cpp.Builtin{
		"LLAMA_LOG_INFO":  logAt("INFO"),
		"LLAMA_LOG_WARN":  logAt("WARN"),
		"LLAMA_LOG_ERROR": logAt("ERROR"),
		"LLAMA_LOG_DEBUG": logAt("DEBUG"),
		"GGML_PAD": func(f *cpp.Frame, args []*ast.Node) (cpp.Val, error) {
			vs, err := cpp.EvalArgs(f, args)
			if err != nil {
				return cpp.Void, err
			}
			if len(vs) != 2 || vs[0].K != cpp.KInt || vs[1].K != cpp.KInt || vs[1].I <= 0 {
				return cpp.Void, f.Errorf("GGML_PAD arguments")
			}
			// ((x) + (n) - 1) & ~((n) - 1), in x's type
			t := cpp.Common(vs[0].T, vs[1].T)
			return cpp.Int((vs[0].I+vs[1].I-1)&^(vs[1].I-1), t), nil
		},
		"getenv": func(f *cpp.Frame, args []*ast.Node) (cpp.Val, error) {
			vs, err := cpp.EvalArgs(f, args)
			if err != nil {
				return cpp.Void, err
			}
			if len(vs) != 1 || vs[0].K != cpp.KStr {
				return cpp.Void, f.Errorf("getenv arguments")
			}
			if v, ok := os.LookupEnv(vs[0].S); ok {
				return cpp.Str(v), nil
			}
			return cpp.Null, nil
		},
		"atoi": func(f *cpp.Frame, args []*ast.Node) (cpp.Val, error) {
			vs, err := cpp.EvalArgs(f, args)
			if err != nil {
				return cpp.Void, err
			}
			if len(vs) != 1 || vs[0].K != cpp.KStr {
				return cpp.Void, f.Errorf("atoi arguments")
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
			return cpp.Int(n, ast.TI32), nil
		},
		"ggml_is_quantized": func(f *cpp.Frame, args []*ast.Node) (cpp.Val, error) {
			t, err := typeArg(f, "ggml_is_quantized", args)
			if err != nil {
				return cpp.Void, err
			}
			return cpp.Bool(t.Quantized()), nil
		},
		"ggml_type_name": func(f *cpp.Frame, args []*ast.Node) (cpp.Val, error) {
			t, err := typeArg(f, "ggml_type_name", args)
			if err != nil {
				return cpp.Void, err
			}
			return cpp.Str(t.String()), nil
		},
		"ggml_backend_buffer_get_size": unplanned("ggml_backend_buffer_get_size"),
		"llama_sampler_chain_get":      unplanned("llama_sampler_chain_get"),
		"llama_sampler_chain_n":        unplanned("llama_sampler_chain_n"),
		"set_sampler":                  unplanned("set_sampler"),
	}
}

// typeArg reads a call's one argument, a ggml type.
func typeArg(f *cpp.Frame, fn string, args []*ast.Node) (ggml.Type, error) {
	vs, err := cpp.EvalArgs(f, args)
	if err != nil {
		return 0, err
	}
	if len(vs) != 1 || vs[0].K != cpp.KInt || !ggml.Type(vs[0].I).Valid() {
		return 0, f.Errorf("%s arguments", fn)
	}
	return ggml.Type(vs[0].I), nil
}
