// Port of llama.cpp src/llama-model-loader.cpp (v0.5.0):
// llama_model_loader's metadata reads (get_key, get_key_or_arr, get_arr,
// get_arr_n, GGUFMeta).

package arch

import (
	"errors"
	"fmt"
	"strconv"

	"github.com/ggload/ggload/gguf"
	"github.com/ggload/ggload/internal/replay/cpp"
	"github.com/ggload/ggload/internal/replay/cpp/ast"
)

// The metadata reads of llama_model_loader (get_key, get_key_or_arr,
// get_arr, get_arr_n), with the pin's type rules and its messages. The
// rules are GGUFMeta's:
//
//   - get_key<T> takes the one GGUF type of T (GKV_Base<T>: bool is BOOL,
//     uint32_t UINT32, int32_t INT32, float FLOAT32, std::string STRING)
//     and refuses every other, arrays included; llama_pooling_type is read
//     through a uint32_t. An override of the key's tag kind is taken
//     instead of the file's value; one of another kind is warned about and
//     ignored.
//   - get_arr into a std::vector takes INT32 or UINT32 elements for an
//     int32_t or uint32_t element type, UINT64 for uint64_t, FLOAT32 for
//     float, STRING for std::string; into a std::array it also takes BOOL
//     for int32_t and uint32_t (as 0 and 1). Integer elements are copied
//     bit for bit.
//   - get_key_or_arr into a std::array<T, N> takes an array of exactly n
//     elements (by get_arr) or a scalar (by get_key<T>) repeated n times;
//     its uint32_t overload refuses arrays.

// ggufTypeNames are gguf_type_name's names.
var ggufTypeNames = map[gguf.ValueType]string{gguf.TypeUint8: "u8", gguf.TypeInt8: "i8", gguf.TypeUint16: "u16",
	gguf.TypeInt16: "i16", gguf.TypeUint32: "u32", gguf.TypeInt32: "i32", gguf.TypeFloat32: "f32",
	gguf.TypeBool: "bool", gguf.TypeString: "str", gguf.TypeArray: "arr", gguf.TypeUint64: "u64",
	gguf.TypeInt64: "i64", gguf.TypeFloat64: "f64"}

// gkvType is the GGUF type GGUFMeta::GKV<T> takes for a value of type t.
func gkvType(t ast.Type) (gguf.ValueType, bool) {
	switch t {
	case ast.TBool:
		return gguf.TypeBool, true
	case ast.TF32:
		return gguf.TypeFloat32, true
	case ast.TF64:
		return gguf.TypeFloat64, true
	case ast.TU32:
		return gguf.TypeUint32, true
	case ast.TI32:
		return gguf.TypeInt32, true
	case ast.TU64:
		return gguf.TypeUint64, true
	case ast.TI64:
		return gguf.TypeInt64, true
	case ast.TStr:
		return gguf.TypeString, true
	}
	return 0, false
}

// OverrideType is llama_model_kv_override_type.
type OverrideType int

// Override types, as llama.h numbers them.
const (
	OverrideInt OverrideType = iota
	OverrideFloat
	OverrideBool
	OverrideStr
)

// String is override_type_to_str's name of the type.
func (t OverrideType) String() string {
	switch t {
	case OverrideInt:
		return "int"
	case OverrideFloat:
		return "float"
	case OverrideBool:
		return "bool"
	case OverrideStr:
		return "str"
	}
	return "unknown"
}

// KVOverride is a metadata override (llama_model_kv_override, llama.cpp's
// --override-kv KEY=TYPE:VALUE): get_key reads it instead of the file's
// value of Key.
type KVOverride struct {
	Key   string
	Type  OverrideType
	Int   int64
	Float float64
	Bool  bool
	Str   string
}

// ParseKVOverride parses one KEY=TYPE:VALUE as common's
// string_parse_kv_override does (an int's value as atol reads it, a
// float's as atof, a bool's "true" or "false", a string of at most 127
// bytes).
func ParseKVOverride(s string) (KVOverride, error) {
	key, val, ok := cutByte(s, '=')
	if !ok || len(key) >= 128 {
		return KVOverride{}, fmt.Errorf("malformed KV override '%s'", s)
	}
	o := KVOverride{Key: key}
	switch {
	case hasPrefix(val, "int:"):
		o.Type, o.Int = OverrideInt, atol(val[4:])
	case hasPrefix(val, "float:"):
		o.Type, o.Float = OverrideFloat, atof(val[6:])
	case hasPrefix(val, "bool:"):
		o.Type = OverrideBool
		switch val[5:] {
		case "true":
			o.Bool = true
		case "false":
		default:
			return KVOverride{}, fmt.Errorf("invalid boolean value for KV override '%s'", s)
		}
	case hasPrefix(val, "str:"):
		o.Type, o.Str = OverrideStr, val[4:]
		if len(o.Str) > 127 {
			return KVOverride{}, fmt.Errorf("malformed KV override '%s', value cannot exceed 127 chars", s)
		}
	default:
		return KVOverride{}, fmt.Errorf("invalid type for KV override '%s'", s)
	}
	return o, nil
}

func cutByte(s string, c byte) (string, string, bool) {
	for i := 0; i < len(s); i++ {
		if s[i] == c {
			return s[:i], s[i+1:], true
		}
	}
	return s, "", false
}

func hasPrefix(s, p string) bool { return len(s) >= len(p) && s[:len(p)] == p }

// atol is C's atol: leading spaces, a sign, then digits up to the first
// other byte; 0 when there are none. (Overflow is undefined in C; it
// saturates here.)
func atol(s string) int64 {
	i := 0
	for i < len(s) && (s[i] == ' ' || s[i] >= '\t' && s[i] <= '\r') {
		i++
	}
	j := i
	if j < len(s) && (s[j] == '+' || s[j] == '-') {
		j++
	}
	for j < len(s) && s[j] >= '0' && s[j] <= '9' {
		j++
	}
	n, err := strconv.ParseInt(s[i:j], 10, 64)
	if err != nil {
		var ne *strconv.NumError
		if errors.As(err, &ne) && errors.Is(ne.Err, strconv.ErrRange) {
			return n
		}
		return 0
	}
	return n
}

// atof is C's atof for the forms strtod takes: the longest prefix that
// parses as a decimal or hexadecimal float, inf or nan; 0 when none does.
func atof(s string) float64 {
	i := 0
	for i < len(s) && (s[i] == ' ' || s[i] >= '\t' && s[i] <= '\r') {
		i++
	}
	s = s[i:]
	for n := len(s); n > 0; n-- {
		if f, err := strconv.ParseFloat(s[:n], 64); err == nil || errors.Is(err, strconv.ErrRange) {
			return f
		}
	}
	return 0
}

// overrideFor is the override of key of the kind a value of type t takes
// (try_override): bool for bool, int for the other integers, float for
// floats, str for strings. An override of another kind is warned about as
// validate_override warns, and not used.
func (r *Run) overrideFor(key string, t ast.Type) (cpp.Val, bool, error) {
	o, ok := r.overrides[key]
	if !ok {
		return cpp.Void, false, nil
	}
	var want OverrideType
	switch t {
	case ast.TBool:
		want = OverrideBool
	case ast.TF32, ast.TF64:
		want = OverrideFloat
	case ast.TStr:
		want = OverrideStr
	default:
		want = OverrideInt
	}
	if o.Type != want {
		r.logf("WARN", "validate_override: Warning: Bad metadata override type for key '%s', expected %s but got %s", key, want, o.Type)
		return cpp.Void, false, nil
	}
	var v cpp.Val
	var shown string
	switch o.Type {
	case OverrideBool:
		v, shown = cpp.Bool(o.Bool), strconv.FormatBool(o.Bool)
	case OverrideInt:
		v, shown = cpp.Int(o.Int, t), strconv.FormatInt(o.Int, 10)
	case OverrideFloat:
		v, shown = cpp.Val{K: cpp.KFloat, T: t, F: o.Float}, fmt.Sprintf("%.6f", o.Float)
	case OverrideStr:
		v, shown = cpp.Str(o.Str), o.Str
	}
	r.logf("INFO", "validate_override: Using metadata override (%5s) '%s' = %s", o.Type, key, shown)
	return v, true, nil
}

func (r *Run) logf(level, format string, args ...any) {
	if r.opts.Log != nil {
		r.opts.Log(level, fmt.Sprintf(format, args...))
	}
}

// lookup reads a metadata key of the model, or one a Supply callback gave.
func (r *Run) lookup(key string) (gguf.Value, bool) {
	if v, ok := r.gm.Lookup(key); ok {
		return v, true
	}
	v, ok := r.extraKV[key]
	return v, ok
}

// find is lookup, asking the SupplyKey callback for a missing key that
// the caller requires; missing is the pin's error for its absence.
func (r *Run) find(key string, required bool, missing *cpp.Throw) (gguf.Value, bool, error) {
	if v, ok := r.lookup(key); ok {
		return v, true, nil
	}
	if !required {
		return gguf.Value{}, false, nil
	}
	if r.opts.SupplyKey != nil && missing.Need != nil {
		if v, ok := r.opts.SupplyKey(missing.Need); ok {
			r.extraKV[key] = v
			return v, true, nil
		}
	}
	return gguf.Value{}, false, missing
}

// notFound is the pin's message for a missing key, with what the model
// lacks for the synthesizer: a scalar of type t, or (array) an array of
// elements of type t, of n elements (0: any).
func notFound(msg, key string, t ast.Type, array bool, n int) *cpp.Throw {
	want, _ := gkvType(t)
	return &cpp.Throw{Msg: msg + gguf.Printable(key, 256), Need: &cpp.Need{Key: key, Type: want, Array: array, Len: n}}
}

func wrongType(key string, got, want gguf.ValueType) *cpp.Throw {
	return &cpp.Throw{Msg: fmt.Sprintf("key %s has wrong type %s but expected type %s", gguf.Printable(key, 256), ggufTypeNames[got], ggufTypeNames[want]),
		Need: &cpp.Need{Key: key, Type: want}}
}

// keyType is the type get_key reads a destination with: its declared
// type, an enum llama_pooling_type as its uint32_t.
func (r *Run) keyType(dst *cpp.Cell) ast.Type {
	t := dst.T
	if t == ast.TAuto && dst.V.K == cpp.KInt {
		t = dst.V.T
	}
	if dst == r.hparams.obj.Fields["pooling_type"] {
		t = ast.TU32
	}
	return t
}

// getKey is get_key<T>: an override, else the key's value, of T's one type.
func (r *Run) getKey(key string, dst *cpp.Cell, req bool) (bool, error) {
	return r.getKeyAs(key, dst, r.keyType(dst), req)
}

func (r *Run) getKeyAs(key string, dst *cpp.Cell, t ast.Type, req bool) (bool, error) {
	want, known := gkvType(t)
	if !known {
		return false, &cpp.EvalError{Fn: "get_key", Msg: fmt.Sprintf("destination of type %s for %s", t, key)}
	}
	if v, ok, err := r.overrideFor(key, t); err != nil || ok {
		return ok, errors.Join(err, dst.Set(v))
	}
	v, ok, err := r.find(key, req, notFound("key not found in model: ", key, t, false, 0))
	if err != nil || !ok {
		return false, err
	}
	if v.Kind() != want {
		return false, wrongType(key, v.Kind(), want)
	}
	return true, dst.Set(scalar(v, t))
}

// scalar converts a metadata scalar of the right type to a value.
func scalar(v gguf.Value, t ast.Type) cpp.Val {
	switch v.Kind() {
	case gguf.TypeBool:
		b, _ := v.Bool()
		return cpp.Bool(b)
	case gguf.TypeFloat32, gguf.TypeFloat64:
		x, _ := v.Float()
		return cpp.Val{K: cpp.KFloat, T: t, F: x}
	case gguf.TypeString:
		s, _ := v.Str()
		return cpp.Str(s)
	}
	if i, ok := v.Int(); ok {
		return cpp.Int(i, t)
	}
	u, _ := v.Uint()
	return cpp.Int(int64(u), t)
}

// getKeyOrArrScalar is get_key_or_arr(kid, uint32_t &, required): a
// scalar only.
func (r *Run) getKeyOrArrScalar(key string, dst *cpp.Cell, req bool) (bool, error) {
	v, ok, err := r.find(key, req, notFound("key not found in model: ", key, r.keyType(dst), false, 0))
	if err != nil || !ok {
		return false, err
	}
	if v.IsArray() {
		if req {
			return false, &cpp.Throw{Msg: "expected scalar, found array for key: " + key}
		}
		return false, nil
	}
	return r.getKey(key, dst, req)
}

// getKeyOrArr is get_key_or_arr into a std::array of which n elements
// are used.
func (r *Run) getKeyOrArr(key string, a *cpp.Array, n int64, req bool) (bool, error) {
	v, ok, err := r.find(key, req, notFound("key not found in model: ", key, a.Elem, true, int(n)))
	if err != nil || !ok {
		return false, err
	}
	if uint64(n) > uint64(len(a.Cells)) {
		return false, &cpp.Throw{Msg: fmt.Sprintf("n > N_MAX: %d > %d for key %s", uint32(n), len(a.Cells), key)}
	}
	if v.IsArray() {
		if uint64(n) != v.Len() {
			return false, &cpp.Throw{Msg: fmt.Sprintf("key %s has wrong array length; expected %d, got %d", key, uint32(n), uint32(v.Len()))}
		}
		return r.getArr(key, a, req)
	}
	c := cpp.Cell{T: a.Elem}
	found, err := r.getKeyAs(key, &c, a.Elem, req)
	if err != nil || !found {
		return found, err
	}
	for i := int64(0); i < n; i++ {
		a.Cells[i].V = c.V
	}
	return true, nil
}

// getArr is get_arr into a std::array (fixed) or a std::vector.
func (r *Run) getArr(key string, a *cpp.Array, req bool) (bool, error) {
	missing := notFound("array key not found in model: ", key, a.Elem, true, 0)
	v, ok := r.lookup(key)
	if !ok {
		var err error
		if v, ok, err = r.find(key, req, missing); err != nil || !ok {
			return false, err
		}
	}
	if !v.IsArray() {
		if req {
			return false, missing
		}
		return false, nil
	}
	et := v.ElemType()
	var okType bool
	switch et {
	case gguf.TypeBool:
		if !a.Fixed {
			return false, &cpp.Throw{Msg: key + " is not a string/float32/uint32/int32/uint64 array"}
		}
		okType = a.Elem == ast.TI32 || a.Elem == ast.TU32
	case gguf.TypeUint32, gguf.TypeInt32:
		okType = a.Elem == ast.TI32 || a.Elem == ast.TU32
	case gguf.TypeUint64:
		okType = a.Elem == ast.TU64
	case gguf.TypeFloat32:
		okType = a.Elem == ast.TF32
	case gguf.TypeString:
		okType = a.Elem == ast.TStr
	default:
		return false, &cpp.Throw{Msg: key + " is not a string/float32/uint32/int32/uint64 array"}
	}
	if !okType {
		want, _ := gkvType(a.Elem)
		return false, &cpp.Throw{Msg: fmt.Sprintf("%s has wrong array element type %s", key, ggufTypeNames[et]), Need: &cpp.Need{Key: key, Type: want, Array: true}}
	}
	n := v.Len()
	if a.Fixed && n > uint64(len(a.Cells)) {
		return false, &cpp.Throw{Msg: fmt.Sprintf("array length %d for key %s exceeds max %d", uint32(n), key, len(a.Cells))}
	}
	if !a.Fixed {
		if n > 1<<24 {
			return false, fmt.Errorf("arch: array key %s has %d elements, more than ggload replays (%d)", key, n, 1<<24)
		}
		a.Cells = make([]cpp.Cell, n)
		for i := range a.Cells {
			a.Cells[i].T = a.Elem
		}
	}
	return true, r.fillArray(key, v, a)
}

// fillArray copies an array value's elements into the first cells of a.
func (r *Run) fillArray(key string, v gguf.Value, a *cpp.Array) error {
	bad := func(err error) error { return fmt.Errorf("arch: reading %s: %w", key, err) }
	switch v.ElemType() {
	case gguf.TypeString:
		ss, err := v.Strings()
		if err != nil {
			return bad(err)
		}
		for i, s := range ss {
			a.Cells[i].V = cpp.Str(s)
		}
	case gguf.TypeFloat32:
		fs, err := v.Floats()
		if err != nil {
			return bad(err)
		}
		for i, x := range fs {
			a.Cells[i].V = cpp.Val{K: cpp.KFloat, T: ast.TF32, F: x}
		}
	case gguf.TypeBool:
		bs, err := v.Bools()
		if err != nil {
			return bad(err)
		}
		for i, b := range bs {
			if err := a.Cells[i].Set(cpp.Bool(b)); err != nil {
				return err
			}
		}
	default:
		is, err := v.Ints()
		if err != nil {
			return bad(err)
		}
		for i, x := range is {
			// the elements are copied bit for bit into the array's type
			if err := a.Cells[i].Set(cpp.Int(x, ast.TI64)); err != nil {
				return err
			}
		}
	}
	return nil
}

// getArrN is get_arr_n: the length of an array key.
func (r *Run) getArrN(key string, dst *cpp.Cell, req bool) (bool, error) {
	v, ok, err := r.find(key, req, notFound("key not found in model: ", key, ast.TU32, true, 0))
	if err != nil || !ok {
		return false, err
	}
	if !v.IsArray() {
		return false, wrongType(key, v.Kind(), gguf.TypeArray)
	}
	return true, dst.Set(cpp.Int(int64(v.Len()), ast.TU64))
}
