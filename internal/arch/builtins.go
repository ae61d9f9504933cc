package arch

import (
	"fmt"
	"math"
	"strconv"
	"strings"

	"github.com/ggload/ggload/internal/arch/ast"
)

type archEntry struct{ Enum, Class, Hparams, Tensors string }

// FieldDef is a data member of llama_hparams or of a struct inside it.
type FieldDef struct {
	Name    string
	CType   string
	Type    ast.Type
	Enum    bool
	Len     string
	Struct  string
	Default string
}

// builtins are the free functions the evaluator provides (ast.Builtins
// names them for the generator).
var builtins map[string]Builtin

func init() {
	builtins = map[string]Builtin{
		"format":                              bFormat,
		"std::to_string":                      bToString,
		"std::max":                            bMinMax(false),
		"std::min":                            bMinMax(true),
		"std::abs":                            bMath(math.Abs),
		"fabs":                                bMath(math.Abs),
		"fabsf":                               bMath(math.Abs),
		"std::sqrt":                           bMath(math.Sqrt),
		"sqrtf":                               bMath(math.Sqrt),
		"std::log":                            bMath(math.Log),
		"logf":                                bMath(math.Log),
		"expf":                                bMath(math.Exp),
		"powf":                                bPow,
		"std::pow":                            bPow,
		"pow":                                 bPow,
		"strcmp":                              bStrcmp,
		"std::fill":                           bFill,
		"std::copy":                           bCopy,
		"std::begin":                          bBeginEnd(false),
		"std::end":                            bBeginEnd(true),
		"std::string":                         bString,
		"std::runtime_error":                  bString,
		"std::invalid_argument":               bString,
		"GGML_ASSERT":                         bAssert,
		"GGML_ABORT":                          bAbort,
		"assert":                              bNop, // compiled out in llama.cpp's release builds (NDEBUG)
		"llama_rope_scaling_type_from_string": bRopeScaling,
		"llm_ffn_op_type_from_string":         bFFNOp,
		"LLM_TN":                              bLLMTN,
		"LLM_KV":                              bLLMKV,
		// llama_model::gguf_kv, a string copy of the metadata, is not kept:
		// the loop that fills it sees no keys
		"gguf_get_n_kv":    func(*Frame, []*ast.Node) (Val, error) { return Int(0, ast.TI64), nil },
		"gguf_get_kv_type": bNop,
		"gguf_get_key":     func(*Frame, []*ast.Node) (Val, error) { return Str(""), nil },
		"gguf_kv_to_str":   func(*Frame, []*ast.Node) (Val, error) { return Str(""), nil },
	}
	for n, b := range memoryBuiltins() {
		builtins[n] = b
	}
	for n, b := range splitBuiltins() {
		builtins[n] = b
	}
	for n, b := range memsetBuiltins() {
		builtins[n] = b
	}
	for n, b := range contextBuiltins() {
		builtins[n] = b
	}
	for n, b := range graphBuiltins() {
		builtins[n] = b
	}
	builtins["std::move"] = func(f *Frame, args []*ast.Node) (Val, error) {
		if len(args) != 1 {
			return Void, f.Errorf("std::move of %d arguments", len(args))
		}
		return f.Eval(args[0])
	}
	// another context (a draft model's target) exists only with
	// ctx_other, which ggload's contexts never have: llama_get_memory of
	// null is null; the others are reached only through it
	builtins["llama_get_memory"] = func(*Frame, []*ast.Node) (Val, error) { return Null, nil }
	for _, n := range []string{"llama_get_model", "llama_model_n_layer"} {
		builtins[n] = func(f *Frame, _ []*ast.Node) (Val, error) {
			return Void, f.Errorf("%s of another context (ggload plans one context)", n)
		}
	}
	// a backend sampler's graph: ggload's contexts have no samplers
	builtins["llama_sampler_backend_n_nodes"] = func(f *Frame, _ []*ast.Node) (Val, error) {
		return Void, f.Errorf("llama_sampler_backend_n_nodes: ggload plans contexts without backend samplers")
	}
	for n := range ast.Builtins {
		if _, ok := builtins[n]; !ok && !modelMethods[n] {
			panic("arch: builtin " + n + " has no implementation")
		}
	}
}

// modelMethods are the llama_model_base members the evaluator provides.
var modelMethods = map[string]bool{"create_tensor": true, "tn": true, "arch_name": true, "type_name": true,
	"load_arch_hparams": true, "load_arch_tensors": true, "get_tensor": true, "tensor_split": true,
	"split_mode": true, "n_tensors": true}

func evalArgs(f *Frame, args []*ast.Node) ([]Val, error) {
	var buf [4]Val
	out := buf[:0]
	if len(args) > len(buf) {
		out = make([]Val, 0, len(args))
	}
	out = out[:len(args)]
	for i, a := range args {
		v, err := f.Eval(a)
		if err != nil {
			return nil, err
		}
		out[i] = v
	}
	return out, nil
}

func bNop(*Frame, []*ast.Node) (Val, error) { return Void, nil }

func bAssert(f *Frame, args []*ast.Node) (Val, error) {
	if len(args) != 1 {
		return Void, f.Errorf("GGML_ASSERT with %d arguments", len(args))
	}
	v, err := f.Eval(args[0])
	if err != nil {
		return Void, err
	}
	if !v.Truthy() {
		return Void, &Abort{Msg: "GGML_ASSERT(" + ExprString(args[0]) + ") failed", Where: f.Fn}
	}
	return Void, nil
}

func bAbort(f *Frame, args []*ast.Node) (Val, error) {
	v, err := bFormat(f, args)
	if err != nil {
		return Void, err
	}
	return Void, &Abort{Msg: v.S, Where: f.Fn}
}

func bString(f *Frame, args []*ast.Node) (Val, error) {
	if len(args) == 0 {
		return Str(""), nil
	}
	v, err := f.Eval(args[0])
	if err != nil {
		return Void, err
	}
	s, err := Convert(v, ast.TStr)
	if err != nil {
		return Void, f.Errorf("%v", err)
	}
	return s, nil
}

func bToString(f *Frame, args []*ast.Node) (Val, error) {
	vs, err := evalArgs(f, args)
	if err != nil {
		return Void, err
	}
	if len(vs) != 1 {
		return Void, f.Errorf("std::to_string with %d arguments", len(vs))
	}
	v := vs[0]
	switch v.K {
	case KInt:
		if v.T == ast.TU64 {
			return Str(strconv.FormatUint(uint64(v.I), 10)), nil
		}
		return Str(strconv.FormatInt(v.I, 10)), nil
	case KFloat:
		return Str(fmt.Sprintf("%f", v.F)), nil
	}
	return Void, f.Errorf("std::to_string of %s", v.Describe())
}

func bMinMax(isMin bool) Builtin {
	return func(f *Frame, args []*ast.Node) (Val, error) {
		vs, err := evalArgs(f, args)
		if err != nil {
			return Void, err
		}
		if len(vs) != 2 {
			return Void, f.Errorf("std::max/min with %d arguments", len(vs))
		}
		less, err := Arith("<", vs[0], vs[1])
		if err != nil {
			return Void, f.Errorf("%v", err)
		}
		a, b := vs[0], vs[1]
		if a.K == KInt && b.K == KInt {
			t := Common(a.T, b.T)
			a, b = Int(a.I, t), Int(b.I, t)
		}
		if less.Truthy() == isMin {
			return a, nil
		}
		return b, nil
	}
}

func bMath(fn func(float64) float64) Builtin {
	return func(f *Frame, args []*ast.Node) (Val, error) {
		vs, err := evalArgs(f, args)
		if err != nil {
			return Void, err
		}
		if len(vs) != 1 {
			return Void, f.Errorf("math function with %d arguments", len(vs))
		}
		return Val{K: KFloat, T: ast.TF64, F: fn(vs[0].Float())}, nil
	}
}

// bStrcmp is strcmp of two strings: negative, zero or positive.
func bStrcmp(f *Frame, args []*ast.Node) (Val, error) {
	vs, err := evalArgs(f, args)
	if err != nil {
		return Void, err
	}
	if len(vs) != 2 || vs[0].K != KStr || vs[1].K != KStr {
		return Void, f.Errorf("strcmp of %d arguments", len(vs))
	}
	return Int(int64(strings.Compare(vs[0].S, vs[1].S)), ast.TI32), nil
}

func bPow(f *Frame, args []*ast.Node) (Val, error) {
	vs, err := evalArgs(f, args)
	if err != nil {
		return Void, err
	}
	if len(vs) != 2 {
		return Void, f.Errorf("pow with %d arguments", len(vs))
	}
	return Val{K: KFloat, T: ast.TF64, F: math.Pow(vs[0].Float(), vs[1].Float())}, nil
}

// bFill is std::fill(c.begin(), c.end(), v) over an array.
// bBeginEnd is std::begin or std::end of an array.
func bBeginEnd(end bool) Builtin {
	return func(f *Frame, args []*ast.Node) (Val, error) {
		vs, err := evalArgs(f, args)
		if err != nil {
			return Void, err
		}
		if len(vs) != 1 || vs[0].K != KArr {
			return Void, f.Errorf("std::begin/std::end of %d arguments (an array wanted)", len(vs))
		}
		a := vs[0].P.(*Array)
		if end {
			return Val{K: KIter, P: a, I: int64(len(a.Cells))}, nil
		}
		return Val{K: KIter, P: a}, nil
	}
}

// bCopy is std::copy(first, last, out) from an array into an array (or
// a position in one).
func bCopy(f *Frame, args []*ast.Node) (Val, error) {
	vs, err := evalArgs(f, args)
	if err != nil {
		return Void, err
	}
	if len(vs) != 3 || vs[0].K != KIter || vs[1].K != KIter || vs[0].P != vs[1].P {
		return Void, f.Errorf("std::copy of %d arguments (two iterators into one array, then the destination)", len(vs))
	}
	src, ok := vs[0].P.(*Array)
	if !ok {
		return Void, f.Errorf("std::copy from a map")
	}
	out := vs[2]
	if out.K == KArr {
		out = Val{K: KIter, P: out.P}
	}
	dst, ok := out.P.(*Array)
	if out.K != KIter || !ok {
		return Void, f.Errorf("std::copy into %s", vs[2].Describe())
	}
	from, to, at := vs[0].I, vs[1].I, out.I
	if from < 0 || to < from || to > int64(len(src.Cells)) || at < 0 || at+to-from > int64(len(dst.Cells)) {
		return Void, &Abort{Msg: fmt.Sprintf("std::copy of elements %d to %d of %d into position %d of %d: out of bounds", from, to, len(src.Cells), at, len(dst.Cells)), Where: f.Fn}
	}
	for i := from; i < to; i++ {
		if err := dst.Cells[at+i-from].Set(src.Cells[i].V); err != nil {
			return Void, err
		}
	}
	return Val{K: KIter, P: dst, I: at + to - from}, nil
}

func bFill(f *Frame, args []*ast.Node) (Val, error) {
	if len(args) != 3 {
		return Void, f.Errorf("std::fill with %d arguments", len(args))
	}
	from, err := f.Eval(args[0])
	if err != nil {
		return Void, err
	}
	to, err := f.Eval(args[1])
	if err != nil {
		return Void, err
	}
	v, err := f.Eval(args[2])
	if err != nil {
		return Void, err
	}
	if from.K != KIter || to.K != KIter || from.P != to.P {
		return Void, f.Errorf("std::fill over %s and %s", from.Describe(), to.Describe())
	}
	a, ok := from.P.(*Array)
	if !ok {
		return Void, f.Errorf("std::fill over a map")
	}
	for i := from.I; i < to.I && i < int64(len(a.Cells)); i++ {
		if err := a.Cells[i].Set(v); err != nil {
			return Void, err
		}
	}
	return Void, nil
}

func bRopeScaling(f *Frame, args []*ast.Node) (Val, error) {
	vs, err := evalArgs(f, args)
	if err != nil {
		return Void, err
	}
	if len(vs) != 1 || vs[0].K != KStr {
		return Void, f.Errorf("llama_rope_scaling_type_from_string arguments")
	}
	for _, p := range ropeScalingTypes {
		if p[1] == vs[0].S {
			return Int(enumConsts[p[0]], ast.TI32), nil
		}
	}
	return Int(enumConsts["LLAMA_ROPE_SCALING_TYPE_UNSPECIFIED"], ast.TI32), nil
}

func bFFNOp(f *Frame, args []*ast.Node) (Val, error) {
	vs, err := evalArgs(f, args)
	if err != nil {
		return Void, err
	}
	if len(vs) != 2 || vs[0].K != KStr {
		return Void, f.Errorf("llm_ffn_op_type_from_string arguments")
	}
	for _, p := range ffnOpTypes {
		if p[0] == vs[0].S {
			return Int(enumConsts[p[1]], ast.TI32), nil
		}
	}
	return vs[1], nil
}

// bLLMTN is LLM_TN(arch): a tensor namer, used as tn(...).
func bLLMTN(f *Frame, args []*ast.Node) (Val, error) {
	return Val{K: KFunc, P: &Method{Recv: Val{K: KObj, P: runOf(f).model}, Name: "tn"}}, nil
}

// bLLMKV is LLM_KV(arch): a key namer, used as kv(LLM_KV_...).
func bLLMKV(f *Frame, args []*ast.Node) (Val, error) {
	return Val{K: KFunc, P: &Method{Recv: runOf(f).ml, Name: "llm_kv"}}, nil
}

// bFormat is llama.cpp's printf-style format().
func bFormat(f *Frame, args []*ast.Node) (Val, error) {
	vs, err := evalArgs(f, args)
	if err != nil {
		return Void, err
	}
	if len(vs) == 0 || vs[0].K != KStr {
		return Void, f.Errorf("format without a format string")
	}
	return Str(cformat(vs[0].S, vs[1:])), nil
}

// cformat formats like C's printf for the conversions llama.cpp's messages
// use.
func cformat(format string, args []Val) string {
	var b strings.Builder
	ai := 0
	next := func() Val {
		if ai < len(args) {
			ai++
			return args[ai-1]
		}
		return Void
	}
	for i := 0; i < len(format); i++ {
		c := format[i]
		if c != '%' {
			b.WriteByte(c)
			continue
		}
		j := i + 1
		for j < len(format) && strings.IndexByte("-+ #0", format[j]) >= 0 {
			j++
		}
		for j < len(format) && (format[j] >= '0' && format[j] <= '9' || format[j] == '.') {
			j++
		}
		spec := format[i+1 : j]
		for j < len(format) && strings.IndexByte("hlLqjzt", format[j]) >= 0 {
			j++
		}
		if j >= len(format) {
			b.WriteString(format[i:])
			break
		}
		verb := format[j]
		i = j
		switch verb {
		case '%':
			b.WriteByte('%')
		case 'd', 'i':
			v := next()
			fmt.Fprintf(&b, "%"+spec+"d", v.I)
		case 'u':
			v := next()
			if v.T == ast.TU64 {
				fmt.Fprintf(&b, "%"+spec+"d", uint64(v.I))
			} else {
				fmt.Fprintf(&b, "%"+spec+"d", v.I)
			}
		case 'x', 'X', 'o':
			v := next()
			fmt.Fprintf(&b, "%"+spec+string(verb), v.I)
		case 'f', 'g', 'e', 'F', 'G', 'E':
			v := next()
			fmt.Fprintf(&b, "%"+spec+string(verb), v.Float())
		case 's':
			v := next()
			s, err := Convert(v, ast.TStr)
			if err != nil {
				s = Str(formatValue(v))
			}
			fmt.Fprintf(&b, "%"+spec+"s", s.S)
		case 'c':
			b.WriteByte(byte(next().I))
		case 'p':
			next()
			b.WriteString("0x0")
		default:
			b.WriteString(format[i-len(spec)-1 : j+1])
		}
	}
	return b.String()
}

func formatValue(v Val) string {
	switch v.K {
	case KInt:
		if v.T == ast.TU64 {
			return strconv.FormatUint(uint64(v.I), 10)
		}
		return strconv.FormatInt(v.I, 10)
	case KFloat:
		return strconv.FormatFloat(v.F, 'g', -1, 64)
	case KStr:
		return v.S
	}
	return v.Describe()
}
