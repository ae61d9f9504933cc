package cpp

import (
	"fmt"
	"maps"
	"math"
	"regexp"
	"strconv"
	"strings"
	"sync"

	"github.com/ggload/ggload/internal/replay/cpp/ast"
)

// StdBuiltins are the free functions of C++'s standard library (and the
// asserts of ggml) that the interpreter provides to every library.
func StdBuiltins() map[string]Builtin {
	b := map[string]Builtin{}
	for _, set := range []map[string]Builtin{
		mathBuiltins(), stringBuiltins(), containerBuiltins(), cMemoryBuiltins(), errorBuiltins(),
	} {
		maps.Copy(b, set)
	}
	return b
}

// mathBuiltins are <cmath>'s functions, in their std:: and C spellings,
// and <algorithm>'s and <numeric>'s on numbers.
func mathBuiltins() map[string]Builtin {
	return map[string]Builtin{
		"std::max":  bMinMax(false),
		"std::min":  bMinMax(true),
		"std::abs":  bAbs,
		"fabs":      bMath(math.Abs, double),
		"fabsf":     bMath(math.Abs, float),
		"std::sqrt": bMath(math.Sqrt, overloaded),
		"sqrtf":     bMath(math.Sqrt, float),
		"std::log":  bMath(math.Log, overloaded),
		"logf":      bMath(math.Log, float),
		"expf":      bMath(math.Exp, float),
		"powf":      bPow(float),
		"std::pow":  bPow(overloaded),
		"pow":       bPow(double),
		"std::lcm":  bLcm,
	}
}

// stringBuiltins make, convert, compare and match strings: llama.cpp's
// format, std::string and its conversions, strcmp, std::regex_match.
func stringBuiltins() map[string]Builtin {
	return map[string]Builtin{
		"format":           Format,
		"std::to_string":   bToString,
		"std::string":      bString,
		"std::stoull":      bStoull,
		"strcmp":           bStrcmp,
		"std::regex_match": bRegexMatch,
	}
}

// containerBuiltins are <algorithm>'s and <iterator>'s functions over
// arrays, std::vector's sized constructor, and std::move.
func containerBuiltins() map[string]Builtin {
	return map[string]Builtin{
		"std::fill":   bFill,
		"std::copy":   bCopy,
		"std::begin":  bBeginEnd(false),
		"std::end":    bBeginEnd(true),
		"std::vector": bVector,
		"std::move":   bMove,
	}
}

// cMemoryBuiltins are C's memset and sizeof, as far as llama.cpp uses
// them: to value-initialize a struct or an array.
func cMemoryBuiltins() map[string]Builtin {
	return map[string]Builtin{
		"memset": bMemset,
		"sizeof": bSizeof,
	}
}

// errorBuiltins are ggml's asserts and aborts, C's assert, and the
// exceptions llama.cpp throws (made from their message).
func errorBuiltins() map[string]Builtin {
	return map[string]Builtin{
		"GGML_ASSERT":           bAssert,
		"GGML_ABORT":            bAbort,
		"assert":                Nop, // compiled out in llama.cpp's release builds (NDEBUG)
		"std::runtime_error":    bString,
		"std::invalid_argument": bString,
	}
}

// bRegexMatch is std::regex_match of a string and a std::regex.
func bRegexMatch(f *Frame, args []*ast.Node) (Val, error) {
	if len(args) != 2 {
		return Void, f.Errorf("std::regex_match arguments")
	}
	vs, err := EvalArgs(f, args)
	if err != nil {
		return Void, err
	}
	s, rv := vs[0], vs[1]
	if s.K != KStr || rv.K != KObj || rv.P.(*Object).Class != "std::regex" {
		return Void, f.Errorf("std::regex_match arguments")
	}
	re, err := compiledRegex(rv.P.(*Object).Fields["pattern"].V.S)
	if err != nil {
		return Void, f.Errorf("%v", err)
	}
	return Bool(re.MatchString(s.S)), nil
}

// bLcm is std::lcm of two integers, in their common type.
func bLcm(f *Frame, args []*ast.Node) (Val, error) {
	vs, err := EvalArgs(f, args)
	if err != nil {
		return Void, err
	}
	if len(vs) != 2 || vs[0].K != KInt || vs[1].K != KInt {
		return Void, f.Errorf("std::lcm arguments")
	}
	t := Common(vs[0].T, vs[1].T)
	a, b := abs64(vs[0].I), abs64(vs[1].I)
	if a == 0 || b == 0 {
		return Int(0, t), nil
	}
	x, y := a, b
	for y != 0 {
		x, y = y, x%y
	}
	return Int(a/x*b, t), nil
}

// bStoull is std::stoull: the leading digits, after white space; none
// is std::invalid_argument.
func bStoull(f *Frame, args []*ast.Node) (Val, error) {
	vs, err := EvalArgs(f, args)
	if err != nil {
		return Void, err
	}
	if len(vs) != 1 || vs[0].K != KStr {
		return Void, f.Errorf("std::stoull arguments")
	}
	s := strings.TrimLeft(vs[0].S, " \t\n")
	end := 0
	for end < len(s) && s[end] >= '0' && s[end] <= '9' {
		end++
	}
	u, err := strconv.ParseUint(s[:end], 10, 64)
	if err != nil {
		return Void, &Throw{Msg: "stoull"}
	}
	return Int(int64(u), ast.TU64), nil
}

// bVector is std::vector(n, value): n copies of value.
func bVector(f *Frame, args []*ast.Node) (Val, error) {
	vs, err := EvalArgs(f, args)
	if err != nil {
		return Void, err
	}
	if len(vs) != 2 || vs[0].K != KInt {
		return Void, f.Errorf("std::vector(n, value) arguments")
	}
	a := &Array{Elem: ast.TAuto, Cells: make([]Cell, vs[0].I)}
	for i := range a.Cells {
		a.Cells[i].V = vs[1]
	}
	return Val{K: KArr, P: a}, nil
}

// bMove is std::move: its argument's value.
func bMove(f *Frame, args []*ast.Node) (Val, error) {
	if len(args) != 1 {
		return Void, f.Errorf("std::move of %d arguments", len(args))
	}
	return f.Eval(args[0])
}

// bMemset is memset(&x, 0, sizeof(x)) or memset(array, 0, sizeof(array)):
// it value-initializes x; the size is x's own.
func bMemset(f *Frame, args []*ast.Node) (Val, error) {
	if len(args) != 3 {
		return Void, f.Errorf("memset with %d arguments", len(args))
	}
	dst := args[0]
	if dst.Op == ast.OpUnary && dst.S == "&" {
		dst = dst.Kids[0]
	}
	v, err := f.Eval(dst)
	if err != nil {
		return Void, err
	}
	if z, err := f.Eval(args[1]); err != nil || z.K != KInt || z.I != 0 {
		return Void, f.Errorf("memset to other than 0")
	}
	if s := args[2]; s.Op != ast.OpCall || len(s.Kids) != 2 || s.Kids[0].S != "sizeof" || ExprString(s.Kids[1]) != ExprString(dst) {
		return Void, f.Errorf("memset of %s with a size other than its own", ExprString(dst))
	}
	return Void, zeroValue(v)
}

// bSizeof is sizeof of a scalar type; an object's size is only memset's,
// which does not read it.
func bSizeof(f *Frame, args []*ast.Node) (Val, error) {
	if len(args) == 1 && args[0].Op == ast.OpIdent {
		if n, ok := scalarSizes[args[0].S]; ok {
			return Int(n, ast.TU64), nil
		}
	}
	return Void, f.Errorf("sizeof(%s): only of a scalar type, or as memset's size", ExprString(args[0]))
}

func EvalArgs(f *Frame, args []*ast.Node) ([]Val, error) {
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

func Nop(*Frame, []*ast.Node) (Val, error) { return Void, nil }

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
	v, err := Format(f, args)
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
	vs, err := EvalArgs(f, args)
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
		vs, err := EvalArgs(f, args)
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

// The precision a math function computes in: C's f-suffixed functions
// take and give float, the unsuffixed ones double, and <cmath>'s
// overloads float where every argument is a float (sqrtf(24) and
// 1.0f / sqrtf(24) round to float at each step, as the compiled code
// does: not to the double's nearest float).
const (
	double = iota
	float
	overloaded
)

// mathResult is fn's result for arguments vs at precision prec.
func mathResult(prec int, vs []Val, fn func(xs []float64) float64) Val {
	f32 := prec == float
	if prec == overloaded {
		f32 = true
		for _, v := range vs {
			if v.K != KFloat || v.T != ast.TF32 {
				f32 = false
			}
		}
	}
	xs := make([]float64, len(vs))
	for i, v := range vs {
		xs[i] = v.Float()
		if f32 {
			xs[i] = float64(float32(xs[i]))
		}
	}
	if f32 {
		return Val{K: KFloat, T: ast.TF32, F: float64(float32(fn(xs)))}
	}
	return Val{K: KFloat, T: ast.TF64, F: fn(xs)}
}

func bMath(fn func(float64) float64, prec int) Builtin {
	return func(f *Frame, args []*ast.Node) (Val, error) {
		vs, err := EvalArgs(f, args)
		if err != nil {
			return Void, err
		}
		if len(vs) != 1 {
			return Void, f.Errorf("math function with %d arguments", len(vs))
		}
		return mathResult(prec, vs, func(xs []float64) float64 { return fn(xs[0]) }), nil
	}
}

// bStrcmp is strcmp of two strings: negative, zero or positive.
func bStrcmp(f *Frame, args []*ast.Node) (Val, error) {
	vs, err := EvalArgs(f, args)
	if err != nil {
		return Void, err
	}
	if len(vs) != 2 || vs[0].K != KStr || vs[1].K != KStr {
		return Void, f.Errorf("strcmp of %d arguments", len(vs))
	}
	return Int(int64(strings.Compare(vs[0].S, vs[1].S)), ast.TI32), nil
}

// bAbs is std::abs: of an integer, an integer; of a float, a float.
func bAbs(f *Frame, args []*ast.Node) (Val, error) {
	vs, err := EvalArgs(f, args)
	if err != nil {
		return Void, err
	}
	if len(vs) != 1 {
		return Void, f.Errorf("std::abs with %d arguments", len(vs))
	}
	if v := vs[0]; v.K == KInt {
		if v.I < 0 {
			return Int(-v.I, v.T), nil
		}
		return v, nil
	}
	return mathResult(overloaded, vs, func(xs []float64) float64 { return math.Abs(xs[0]) }), nil
}

func bPow(prec int) Builtin {
	return func(f *Frame, args []*ast.Node) (Val, error) {
		vs, err := EvalArgs(f, args)
		if err != nil {
			return Void, err
		}
		if len(vs) != 2 {
			return Void, f.Errorf("pow with %d arguments", len(vs))
		}
		return mathResult(prec, vs, func(xs []float64) float64 { return math.Pow(xs[0], xs[1]) }), nil
	}
}

// bBeginEnd is std::begin or std::end of an array.
func bBeginEnd(end bool) Builtin {
	return func(f *Frame, args []*ast.Node) (Val, error) {
		vs, err := EvalArgs(f, args)
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
	vs, err := EvalArgs(f, args)
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

// bFill is std::fill(c.begin(), c.end(), v) over an array.
func bFill(f *Frame, args []*ast.Node) (Val, error) {
	if len(args) != 3 {
		return Void, f.Errorf("std::fill with %d arguments", len(args))
	}
	vs, err := EvalArgs(f, args)
	if err != nil {
		return Void, err
	}
	from, to, v := vs[0], vs[1], vs[2]
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

// Format is llama.cpp's printf-style format().
func Format(f *Frame, args []*ast.Node) (Val, error) {
	vs, err := EvalArgs(f, args)
	if err != nil {
		return Void, err
	}
	if len(vs) == 0 || vs[0].K != KStr {
		return Void, f.Errorf("format without a format string")
	}
	return Str(CFormat(vs[0].S, vs[1:])), nil
}

// CFormat formats like C's printf for the conversions llama.cpp's messages
// use.
func CFormat(format string, args []Val) string {
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
				s = Str(FormatValue(v))
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

func FormatValue(v Val) string {
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

// regexps are the patterns std::regex objects hold, compiled once.
var regexps sync.Map // ECMAScript source → *regexp.Regexp (anchored: regex_match)

func compiledRegex(src string) (*regexp.Regexp, error) {
	if re, ok := regexps.Load(src); ok {
		return re.(*regexp.Regexp), nil
	}
	// the pin's patterns are literal names with \. \d * ? ( | ), which
	// ECMAScript and Go's syntax read alike
	re, err := regexp.Compile(`^(?:` + src + `)$`)
	if err != nil {
		return nil, fmt.Errorf("std::regex %q: %v", src, err)
	}
	regexps.Store(src, re)
	return re, nil
}

// regexObjects are the std::regex values by pattern: one per pattern,
// shared, as nothing writes to a regex once made.
var regexObjects sync.Map // string → Val

func newRegex(src string) (Val, error) {
	if v, ok := regexObjects.Load(src); ok {
		return v.(Val), nil
	}
	if _, err := compiledRegex(src); err != nil {
		return Void, err
	}
	o := NewObject("std::regex")
	o.Fields["pattern"] = &Cell{V: Str(src)}
	v, _ := regexObjects.LoadOrStore(src, Val{K: KObj, P: o})
	return v.(Val), nil
}

func abs64(x int64) int64 {
	if x < 0 {
		return -x
	}
	return x
}

// stringMethod is std::string's substr and find.
func stringMethod(f *Frame, s, name string, args []*ast.Node) (Val, error) {
	vs, err := EvalArgs(f, args)
	if err != nil {
		return Void, err
	}
	pos := func(i int, def int64) (int64, error) {
		if i >= len(vs) {
			return def, nil
		}
		if vs[i].K != KInt {
			return 0, f.Errorf("%s argument %d: %s", name, i, vs[i].Describe())
		}
		return WrapInt(vs[i].I, ast.TU64), nil
	}
	npos := int64(-1)
	switch name {
	case "substr":
		p, err := pos(0, 0)
		if err != nil {
			return Void, err
		}
		n, err := pos(1, npos)
		if err != nil {
			return Void, err
		}
		if uint64(p) > uint64(len(s)) {
			return Void, &Throw{Msg: "basic_string::substr: __pos > this->size()"}
		}
		end := uint64(len(s))
		if rest := end - uint64(p); uint64(n) < rest {
			end = uint64(p) + uint64(n)
		}
		return Str(s[p:end]), nil
	case "find":
		if len(vs) < 1 {
			return Void, f.Errorf("find without an argument")
		}
		var needle string
		switch vs[0].K {
		case KInt:
			needle = string(rune(byte(vs[0].I)))
		case KStr:
			needle = vs[0].S
		default:
			return Void, f.Errorf("find of %s", vs[0].Describe())
		}
		p, err := pos(1, 0)
		if err != nil {
			return Void, err
		}
		if uint64(p) > uint64(len(s)) {
			return Int(npos, ast.TU64), nil
		}
		i := strings.Index(s[p:], needle)
		if i < 0 {
			return Int(npos, ast.TU64), nil
		}
		return Int(p+int64(i), ast.TU64), nil
	}
	return Void, f.Errorf("std::string::%s", name)
}

// Constant is a constant of C++ and its standard library: true, false,
// nullptr (and NULL), INFINITY, FLT_MAX, std::string::npos, INT32_MAX,
// UINT32_MAX. A library's and a host's constants come after these.
func Constant(name string) (Val, bool) {
	switch name {
	case "true":
		return True, true
	case "false":
		return False, true
	case "nullptr", "NULL":
		return Null, true
	case "INFINITY":
		return Val{K: KFloat, T: ast.TF32, F: math.Inf(1)}, true
	case "FLT_MAX":
		return Val{K: KFloat, T: ast.TF32, F: math.MaxFloat32}, true
	case "std::string::npos":
		return Int(-1, ast.TU64), true
	case "INT32_MAX":
		return Int(math.MaxInt32, ast.TI32), true
	case "UINT32_MAX":
		return Int(math.MaxUint32, ast.TU32), true
	}
	return Void, false
}

// scalarSizes are sizeof of the scalar types the pin's code measures.
var scalarSizes = map[string]int64{"float": 4, "double": 8, "int32_t": 4, "uint32_t": 4, "int": 4, "llama_token": 4,
	"int64_t": 8, "uint64_t": 8, "size_t": 8, "int8_t": 1, "uint8_t": 1, "int16_t": 2, "uint16_t": 2}

// zeroValue sets every scalar inside a struct or array to zero.
func zeroValue(v Val) error {
	switch v.K {
	case KObj:
		for _, c := range v.P.(*Object).Fields {
			if err := zeroCell(c); err != nil {
				return err
			}
		}
	case KArr:
		a := v.P.(*Array)
		for i := range a.Cells {
			if err := zeroCell(&a.Cells[i]); err != nil {
				return err
			}
		}
	default:
		return fmt.Errorf("memset of %s", v.Describe())
	}
	return nil
}

func zeroCell(c *Cell) error {
	switch c.V.K {
	case KInt:
		c.V = Int(0, c.V.T)
	case KFloat:
		c.V = Val{K: KFloat, T: c.V.T}
	case KObj, KArr:
		return zeroValue(c.V)
	default:
		c.V = Null
	}
	return nil
}
