package arch

import (
	"errors"
	"slices"
	"strings"
	"testing"

	"github.com/ggload/ggload/ggml"
	"github.com/ggload/ggload/gguf"
	"github.com/ggload/ggload/internal/replay/cpp"
	"github.com/ggload/ggload/internal/replay/cpp/ast"
)

// readsWriter is the llama model with a key of every type the loader's
// reads meet: 64-bit integers and floats, arrays of strings, of 64-bit
// unsigned integers, of bools, of 64-bit signed integers and of doubles.
func readsWriter(t *testing.T) *gguf.Writer {
	t.Helper()
	w := llamaWriter(t, false)
	arr := func(elems any) gguf.Value {
		v, err := gguf.Array(elems)
		if err != nil {
			t.Fatal(err)
		}
		return v
	}
	for k, v := range map[string]gguf.Value{
		"test.i32":   gguf.Int32(-5),
		"test.i64":   gguf.Int64(-1 << 40),
		"test.u64":   gguf.Uint64(1 << 40),
		"test.f64":   gguf.Float64(0.25),
		"test.u32s":  arr([]uint32{1, 2}),
		"test.u64s":  arr([]uint64{7, 8, 9}),
		"test.strs":  arr([]string{"a", "bc"}),
		"test.bools": arr([]bool{true, false}),
		"test.i64s":  arr([]int64{1}),
		"test.f64s":  arr([]float64{1}),
	} {
		if err := w.Set(k, v); err != nil {
			t.Fatal(err)
		}
	}
	return w
}

// runWith evaluates a program body in the run of a model w writes, with
// options o, this being the model.
func runWith(t *testing.T, w *gguf.Writer, o Options, body string) (cpp.Val, error) {
	t.Helper()
	r, err := Load(memModel(t, w), o)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(body, "(block") {
		body = "(block " + body + ")"
	}
	p, err := cpp.DecodeProgram("fn test test.cpp:1\n(block)\n" + body)
	if err != nil {
		t.Fatal(err)
	}
	programs.Prepare(p)
	return r.Call(p, cpp.Val{K: cpp.KObj, P: r.model}, nil)
}

// The loader's metadata reads into every type of destination, with the
// pin's type rules and its words for what it refuses.
func TestLoaderReads(t *testing.T) {
	var logs []string
	o := Options{Overrides: []KVOverride{
		{Key: "test.flag", Type: OverrideBool, Bool: true},
		{Key: "test.name", Type: OverrideStr, Str: "over"},
		{Key: "test.i32", Type: OverrideFloat, Float: 1.5}, // of the wrong kind: ignored
	}, Log: func(level, text string) { logs = append(logs, level+" "+text) }}
	eval := func(t *testing.T, body string) (cpp.Val, error) { return runWith(t, readsWriter(t), o, body) }
	values := []struct {
		name, body string
		want       any
	}{
		{"get_key_or_arr of a scalar", `(block (decl "n" :u32 0) (expr (call (mem "get_key_or_arr" ml) "llama.block_count" n)) (return n))`, int64(2)},
		{"get_key_or_arr of an array, not required", `(block (decl "n" :u32 0) (return (call (mem "get_key_or_arr" ml) "test.u32s" n false)))`, int64(0)},
		{"get_key_or_arr of nothing, not required", `(block (decl "n" :u32 0) (return (call (mem "get_key_or_arr" ml) "test.none" n false)))`, int64(0)},
		{"get_key of an int64_t", `(block (decl "x" :i64 0) (expr (call (mem "get_key" ml) "test.i64" x)) (return x))`, int64(-1 << 40)},
		{"get_key of a uint64_t", `(block (decl "x" :u64 0) (expr (call (mem "get_key" ml) "test.u64" x)) (return x))`, int64(1 << 40)},
		{"get_key of a double", `(block (decl "x" :f64 0) (expr (call (mem "get_key" ml) "test.f64" x)) (return (cast :i32 (bin "*" x 100))))`, int64(25)},
		{"get_key into an auto int", `(block (decl "x" 0) (expr (call (mem "get_key" ml) "test.i32" x)) (return x))`, int64(-5)},
		{"get_key of a tensor name, not required", `(block (decl "x" :u32 0) (return (call (mem "get_key" ml) (call tn LLM_TENSOR_OUTPUT "weight") x false)))`, int64(0)},
		{"a bool override", `(block (decl "b" :bool false) (expr (call (mem "get_key" ml) "test.flag" b)) (return b))`, int64(1)},
		{"a string override", `(block (decl "s" :str "") (expr (call (mem "get_key" ml) "test.name" s)) (return s))`, "over"},
		{"an override of another kind is ignored", `(block (decl "x" :i32 0) (expr (call (mem "get_key" ml) "test.i32" x)) (return x))`, int64(-5)},
		{"get_arr of strings", `(block (decl "v" :obj @"std::vector<std::string>") (expr (call (mem "get_arr" ml) "test.strs" v)) (return (idx v 1)))`, "bc"},
		{"get_arr of uint64_t", `(block (decl "v" :obj @"std::vector<uint64_t>") (expr (call (mem "get_arr" ml) "test.u64s" v)) (return (bin "+" (call (mem "size" v)) (idx v 2))))`, int64(12)},
		{"get_arr of bools into a std::array", `(block (decl "a" :obj @"std::array<int, 4>") (expr (call (mem "get_arr" ml) "test.bools" a)) (return (bin "+" (bin "*" 10 (idx a 0)) (idx a 1))))`, int64(10)},
		{"get_arr of a scalar, not required", `(block (decl "v" :obj @"std::vector<uint32_t>") (return (call (mem "get_arr" ml) "llama.block_count" v false)))`, int64(0)},
		{"get_arr of nothing, not required", `(block (decl "v" :obj @"std::vector<uint32_t>") (return (call (mem "get_arr" ml) "test.none" v false)))`, int64(0)},
		{"get_arr_n", `(block (decl "n" :u32 0) (expr (call (mem "get_arr_n" ml) "test.strs" n)) (return n))`, int64(2)},
		{"a file tensor itself", `(block (decl "w" (call (mem "get_tensor_meta" ml) "token_embd.weight")) (return (bin "==" (mem "tensor" w) w)))`, int64(1)},
		{"n_tensors", `(return (call (mem "n_tensors" this)))`, int64(0)},
		{"the metadata's keys are not kept", `(return (bin "+" (call gguf_get_n_kv 0) (call (mem "size" (bin "+" (call gguf_get_key 0 0) (call gguf_kv_to_str 0 0))))))`, int64(0)},
		{"another context has no memory", `(return (bin "==" (call llama_get_memory nullptr) nullptr))`, int64(1)},
	}
	for _, c := range values {
		checkValueWith(t, eval, c.name, c.body, c.want)
	}
	for _, want := range []string{
		"INFO validate_override: Using metadata override ( bool) 'test.flag' = true",
		"INFO validate_override: Using metadata override (  str) 'test.name' = over",
		"WARN validate_override: Warning: Bad metadata override type for key 'test.i32', expected int but got float",
	} {
		if !slices.Contains(logs, want) {
			t.Errorf("no log line %q in %q", want, logs)
		}
	}
	failures := []struct{ name, body, kind, want string }{
		{"get_key_or_arr of an array", `(block (decl "n" :u32 0) (expr (call (mem "get_key_or_arr" ml) "test.u32s" n)))`, "throw", "expected scalar, found array for key: test.u32s"},
		{"get_key_or_arr of nothing", `(block (decl "n" :u32 0) (expr (call (mem "get_key_or_arr" ml) "test.none" n)))`, "throw", "key not found in model: test.none"},
		{"get_key_or_arr past the array", `(block (decl "a" :obj @"std::array<int, 4>") (expr (call (mem "get_key_or_arr" ml) "test.u32s" a 5)))`, "throw", "n > N_MAX: 5 > 4 for key test.u32s"},
		{"get_key_or_arr into an array without a length", `(block (decl "a" :obj @"std::array<int, 4>") (expr (call (mem "get_key_or_arr" ml) "test.u32s" a)))`, "eval", "get_key_or_arr: no length"},
		{"get_key into a pointer", `(block (decl "p" :ptr nullptr) (expr (call (mem "get_key" ml) "llama.block_count" p)))`, "eval", "destination of type ptr for llama.block_count"},
		{"get_key of one argument", `(expr (call (mem "get_key" ml) "llama.block_count"))`, "eval", "get_key: 1 arguments"},
		{"get_key of a number", `(block (decl "x" :u32 0) (expr (call (mem "get_key" ml) 5 x)))`, "eval", "i32 5 is not a metadata key"},
		{"get_key into a value", `(expr (call (mem "get_key" ml) "llama.block_count" 5))`, "eval", "not an lvalue"},
		{"get_key of a key that fails", `(block (decl "x" :u32 0) (expr (call (mem "get_key" ml) (call nothing) x)))`, "eval", "unknown function nothing"},
		{"get_key of a requirement that fails", `(block (decl "x" :u32 0) (expr (call (mem "get_key" ml) "llama.block_count" x (call nothing))))`, "eval", "unknown function nothing"},
		{"get_key_or_arr of a length that fails", `(block (decl "a" :obj @"std::array<int, 4>") (expr (call (mem "get_key_or_arr" ml) "test.u32s" a (call nothing))))`, "eval", "unknown function nothing"},
		{"get_arr into a scalar", `(block (decl "x" :u32 0) (expr (call (mem "get_arr" ml) "test.u32s" x)))`, "eval", "get_arr into u32 0"},
		{"get_arr of a scalar", `(block (decl "v" :obj @"std::vector<uint32_t>") (expr (call (mem "get_arr" ml) "llama.block_count" v)))`, "throw", "array key not found in model: llama.block_count"},
		{"get_arr of bools into a vector", `(block (decl "v" :obj @"std::vector<uint32_t>") (expr (call (mem "get_arr" ml) "test.bools" v)))`, "throw", "test.bools is not a string/float32/uint32/int32/uint64 array"},
		{"get_arr of int64_t elements", `(block (decl "v" :obj @"std::vector<int64_t>") (expr (call (mem "get_arr" ml) "test.i64s" v)))`, "throw", "test.i64s is not a string/float32/uint32/int32/uint64 array"},
		{"get_arr of doubles", `(block (decl "v" :obj @"std::vector<double>") (expr (call (mem "get_arr" ml) "test.f64s" v)))`, "throw", "test.f64s is not a string/float32/uint32/int32/uint64 array"},
		{"get_arr of strings into ints", `(block (decl "v" :obj @"std::vector<uint32_t>") (expr (call (mem "get_arr" ml) "test.strs" v)))`, "throw", "test.strs has wrong array element type str"},
		{"get_arr past a std::array", `(block (decl "a" :obj @"std::array<uint64_t, 2>") (expr (call (mem "get_arr" ml) "test.u64s" a)))`, "throw", "array length 3 for key test.u64s exceeds max 2"},
		{"get_arr_n of a scalar", `(block (decl "n" :u32 0) (expr (call (mem "get_arr_n" ml) "llama.block_count" n)))`, "throw", "key llama.block_count has wrong type u32 but expected type arr"},
		{"a loader method's argument that fails", `(return (call (mem "get_weight" ml) (call nothing)))`, "eval", "unknown function nothing"},
		{"a loader method without its argument", `(return (call (mem "llm_kv" ml)))`, "eval", "llm_kv: missing argument 0"},
		{"llm_kv of what fails", `(return (call (mem "llm_kv" ml) (call nothing)))`, "eval", "unknown function nothing"},
		{"a file tensor's member it has not", `(return (mem "grad" (call (mem "get_tensor_meta" ml) "token_embd.weight")))`, "eval", "member grad of"},
		{"a layer count of another context", `(return (call llama_model_n_layer nullptr))`, "eval", "llama_model_n_layer of another context"},
		{"a sampler's graph", `(return (call llama_sampler_backend_n_nodes nullptr))`, "eval", "without backend samplers"},
		{"a rope scaling of what fails", `(return (call llama_rope_scaling_type_from_string (call nothing)))`, "eval", "unknown function nothing"},
		{"an ffn op of what fails", `(return (call llm_ffn_op_type_from_string (call nothing) 0))`, "eval", "unknown function nothing"},
	}
	for _, c := range failures {
		_, err := eval(t, c.body)
		var a *cpp.Abort
		var th *cpp.Throw
		kind := "other"
		switch {
		case errors.As(err, &a):
			kind = "abort"
		case errors.As(err, &th):
			kind = "throw"
		case IsEvalError(err):
			kind = "eval"
		}
		if err == nil || kind != c.kind || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: %v (%s), want %s %q", c.name, err, kind, c.kind, c.want)
		}
	}
}

// checkValueWith evaluates body by eval and compares its value with
// want, an int64 or a string.
func checkValueWith(t *testing.T, eval func(*testing.T, string) (cpp.Val, error), name, body string, want any) {
	t.Helper()
	v, err := eval(t, body)
	if err != nil {
		t.Errorf("%s: %v", name, err)
		return
	}
	switch w := want.(type) {
	case int64:
		if v.K != cpp.KInt || v.I != w {
			t.Errorf("%s = %s, want %d", name, v.Describe(), w)
		}
	case string:
		if v.K != cpp.KStr || v.S != w {
			t.Errorf("%s = %s, want %q", name, v.Describe(), w)
		}
	}
}

// The tensor namer and create_tensor refuse what llama.cpp would crash
// or throw on, before anything is created.
func TestCreateTensorRefusals(t *testing.T) {
	for _, c := range []struct{ name, body, want string }{
		{"tn of nothing", `(return (call tn))`, "tn with 0 arguments"},
		{"tn of a number", `(return (call tn 5 "weight"))`, "tn without a tensor"},
		{"tn of what fails", `(return (call tn (call nothing)))`, "unknown function nothing"},
		{"a layer past the model's", `(return (call create_tensor (call tn LLM_TENSOR_ATTN_Q "weight" 7) (list 64 64) 0))`,
			"vector::_M_range_check: __n (which is 7) >= this->size() (which is 2)"},
		{"create_tensor of a string", `(return (call create_tensor "output.weight" (list 64 100) 0))`, `create_tensor of "output.weight"`},
		{"create_tensor of no shape", `(return (call create_tensor (call tn LLM_TENSOR_OUTPUT "weight") 64 0))`, "create_tensor arguments"},
		{"create_tensor of a shape of strings", `(return (call create_tensor (call tn LLM_TENSOR_OUTPUT "weight") (list "x") 0))`, "create_tensor shape"},
		{"create_tensor of a name that fails", `(return (call create_tensor (call nothing) (list 64) 0))`, "unknown function nothing"},
		{"create_tensor of flags that fail", `(return (call create_tensor (call tn LLM_TENSOR_OUTPUT "weight") (list 64 100) (call nothing)))`, "unknown function nothing"},
		{"the loader's overload of no shape", `(return (call create_tensor ml (call tn LLM_TENSOR_OUTPUT "weight") "x" 0))`, "create_tensor arguments"},
	} {
		_, err := runWith(t, llamaWriter(t, false), Options{}, c.body)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: %v, want %q", c.name, err, c.want)
		}
	}
	// a tensor name with an extra id (the experts' xid)
	checkValueWith(t, func(t *testing.T, body string) (cpp.Val, error) {
		return runWith(t, llamaWriter(t, false), Options{}, body)
	},
		"tn of a layer and an id", `(return (call std::string (call tn LLM_TENSOR_FFN_UP_EXP "weight" 1 3)))`, "blk.1.ffn_up.3.weight")
}

// llama.cpp's errors of a model's vocabulary.
func TestVocabRefusals(t *testing.T) {
	ints, err := gguf.Array([]int32{1, 2})
	if err != nil {
		t.Fatal(err)
	}
	strs, err := gguf.Array([]string{"a", "b", "c"})
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name string
		kvs  map[string]gguf.Value // a nil map deletes tokenizer.ggml.model
		want string                // "" loads, with n tokens
		n    int64
	}{
		{"no tokenizer model", nil, "key not found in model: tokenizer.ggml.model", 0},
		{"no tokens", map[string]gguf.Value{"tokenizer.ggml.model": gguf.String("llama")}, "error loading model vocabulary: cannot find tokenizer vocab in model file", 0},
		{"tokens of numbers", map[string]gguf.Value{"tokenizer.ggml.model": gguf.String("llama"), "tokenizer.ggml.tokens": ints}, "invalid gguf type for tokenizer.ggml.tokens", 0},
		{"a token type count of a string", map[string]gguf.Value{"tokenizer.ggml.token_type_count": gguf.String("2")}, "key tokenizer.ggml.token_type_count has wrong type str but expected type u32", 0},
		{"a vocabulary size of a string", map[string]gguf.Value{"llama.vocab_size": gguf.String("100")}, "key llama.vocab_size has wrong type str but expected type u32", 0},
		{"tokens", map[string]gguf.Value{"tokenizer.ggml.model": gguf.String("llama"), "tokenizer.ggml.tokens": strs}, "", 3},
	} {
		w := llamaWriter(t, false)
		if c.kvs == nil {
			w.Delete("tokenizer.ggml.model")
		}
		for k, v := range c.kvs {
			if err := w.Set(k, v); err != nil {
				t.Fatal(err)
			}
		}
		r, err := Load(memModel(t, w), Options{})
		switch {
		case c.want == "" && (err != nil || r.VocabSize() != c.n):
			t.Errorf("%s: %v", c.name, err)
		case c.want != "" && (err == nil || !strings.Contains(err.Error(), c.want)):
			t.Errorf("%s: %v, want %q", c.name, err, c.want)
		}
	}
	w := llamaWriter(t, false)
	w.Delete("general.architecture")
	if _, err := LoadGeneric(memModel(t, w), Options{}); !errors.Is(err, ErrUnknownArch) {
		t.Errorf("a generic model of no architecture: %v", err)
	}
}

// What the graph replay reads of a run: the objects, the context, the
// pin's programs and tables.
func TestReplayAccessors(t *testing.T) {
	r, err := Load(memModel(t, llamaWriter(t, false)), Options{})
	if err != nil {
		t.Fatal(err)
	}
	if err := r.CreateTensors(&recorder{}); err != nil {
		t.Fatal(err)
	}
	if r.CParams() != nil || r.Context().K == cpp.KObj {
		t.Error("a context before InitContext")
	}
	cx, err := r.InitContext(ContextParams{NBatch: 512, NUBatch: 512, NSeqMax: 1, FlashAttn: -1, TypeK: ggml.TypeF16, TypeV: ggml.TypeF16, SplitMode: 1}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if r.Model() == nil || r.Model().Class != "llama_model" || r.Hparams().Object().Class != "llama_hparams" {
		t.Errorf("the model %v, its hparams %v", r.Model(), r.Hparams().Object())
	}
	// n_ubatch as llama_context's constructor resolved it: no more than
	// n_ctx, the model's 128
	if cp := r.CParams(); cp == nil || cp.Fields["n_ubatch"].V.I != 128 || cx.NUBatch != 128 {
		t.Errorf("cparams' n_ubatch %s, the context's %d", cp.Fields["n_ubatch"].V.Describe(), cx.NUBatch)
	}
	if c := r.Context(); c.K != cpp.KObj || c.P.(*cpp.Object).Class != "llama_context" {
		t.Errorf("the context is %s", c.Describe())
	}
	if r.Class() != "llama_model_llama" || r.SplitMode() != 1 || ClassParent("llama_model_llama") != "llama_model_base" {
		t.Errorf("class %s, split mode %d", r.Class(), r.SplitMode())
	}
	r.SetTensorCount(200)
	p, err := r.Program("llama_context::graph_max_nodes")
	if err != nil || p == nil {
		t.Fatalf("graph_max_nodes: %v", err)
	}
	if v, err := r.Call(p, r.Context(), []cpp.Val{cpp.Int(512, ast.TU32)}); err != nil || v.I != 1600 {
		t.Errorf("graph_max_nodes of 200 tensors = %s, %v; want llama.cpp's max(1024, 8*200)", v.Describe(), err)
	}
	if _, err := r.Program("no::such_program"); !IsEvalError(err) {
		t.Errorf("Program of nothing: %v", err)
	}
	if r.ModelProgram("build_arch_graph") == nil || r.ModelProgram("no_such_method") != nil {
		t.Error("ModelProgram")
	}
	if v, ok := EnumConst("LLAMA_MAX_LAYERS"); !ok || v != 512 {
		t.Errorf("EnumConst(LLAMA_MAX_LAYERS) = %d, %v", v, ok)
	}
	if _, ok := EnumConst("NO_SUCH_CONSTANT"); ok {
		t.Error("EnumConst of nothing")
	}
	var th *cpp.Throw
	if err := r.Wrap("prefix: ", &cpp.Throw{Msg: "boom"}); !errors.As(err, &th) || th.Msg != "prefix: boom" {
		t.Errorf("Wrap of a throw: %v", err)
	}
	other := errors.New("other")
	if err := r.Wrap("prefix: ", other); err != other {
		t.Errorf("Wrap of another error: %v", err)
	}
	if Library() != programs {
		t.Error("Library")
	}
	// a function of another context, called where llama_context calls it
	p, err = cpp.DecodeProgram("fn test test.cpp:1\n(block)\n(block (return (call llama_get_model nullptr)))")
	if err != nil {
		t.Fatal(err)
	}
	programs.Prepare(p)
	if _, err := r.Call(p, r.Context(), nil); !IsEvalError(err) || !strings.Contains(err.Error(), "llama_get_model of another context") {
		t.Errorf("llama_get_model: %v", err)
	}
}

// An override's number as C's atol and atof read it: saturated past
// int64_t, 0 where no number begins.
func TestOverrideNumbers(t *testing.T) {
	for _, c := range []struct {
		in    string
		i     int64
		f     float64
		isInt bool
		b     bool
	}{
		{"k=int:99999999999999999999", 1<<63 - 1, 0, true, false},
		{"k=int:-99999999999999999999", -1 << 63, 0, true, false},
		{"k=int:abc", 0, 0, true, false},
		{"k=float:  \t2.5", 0, 2.5, false, false},
		{"k=float:abc", 0, 0, false, false},
		{"k=bool:false", 0, 0, false, false},
	} {
		o, err := ParseKVOverride(c.in)
		if err != nil || o.Int != c.i || o.Float != c.f || o.Bool != c.b || (o.Type == OverrideInt) != c.isInt {
			t.Errorf("%q: %+v, %v", c.in, o, err)
		}
	}
	for _, ty := range []OverrideType{OverrideInt, OverrideFloat, OverrideBool, OverrideStr, 9} {
		if want := map[OverrideType]string{OverrideInt: "int", OverrideFloat: "float", OverrideBool: "bool", OverrideStr: "str", 9: "unknown"}[ty]; ty.String() != want {
			t.Errorf("%d is %q, want %q", int(ty), ty.String(), want)
		}
	}
}
