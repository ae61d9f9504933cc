package httpapi

import (
	"fmt"
	"math"

	"github.com/ggload/ggload/internal/ojson"
)

// jsonError is an exception of nlohmann's json, as its what() says it:
// "[json.exception.type_error.302] type must be number, but is string".
// llama-server turns these into 500s (or into 400s where a schema field
// wraps them).
type jsonError struct {
	kind string // "type_error", "out_of_range"
	id   int
	msg  string
}

func (e *jsonError) Error() string {
	return fmt.Sprintf("[json.exception.%s.%d] %s", e.kind, e.id, e.msg)
}

func typeError(id int, format string, args ...any) error {
	return &jsonError{"type_error", id, fmt.Sprintf(format, args...)}
}

// at is nlohmann's at(key): the value of an object's key.
func at(v ojson.Value, key string) (ojson.Value, error) {
	if !v.IsObject() {
		return ojson.Value{}, typeError(304, "cannot use at() with %s", v.Kind())
	}
	x, ok := v.Get(key)
	if !ok {
		return ojson.Value{}, &jsonError{"out_of_range", 403, fmt.Sprintf("key '%s' not found", key)}
	}
	return x, nil
}

// has is nlohmann's contains(key): false for a value that is not an
// object.
func has(v ojson.Value, key string) bool { return v.IsObject() && v.Has(key) }

// hasValue is a key that is there and not null (the schema's has_value,
// and json_value's test).
func hasValue(v ojson.Value, key string) bool {
	x, ok := v.Get(key)
	return ok && v.IsObject() && !x.IsNull()
}

// cvtInt is C++'s static_cast of a double to a 64-bit integer on x86-64
// (cvttsd2si): truncated toward zero, and the "integer indefinite"
// 0x8000000000000000 where it does not fit.
func cvtInt(f float64) int64 {
	if math.IsNaN(f) || f >= 0x1p63 || f < -0x1p63 {
		return math.MinInt64
	}
	return int64(f)
}

// getInt is get<T>() of a signed integer type narrower than int64 (the
// arithmetic overload of from_json: a boolean converts too), as a C++
// cast to 32 bits makes it.
func getInt32(v ojson.Value) (int32, error) {
	switch v.Kind() {
	case ojson.Int, ojson.Uint:
		return int32(v.Int()), nil
	case ojson.Float:
		f := v.Float()
		if math.IsNaN(f) || f >= 0x1p31 || f < -0x1p31 {
			return math.MinInt32, nil
		}
		return int32(f), nil
	case ojson.Bool:
		if v.Bool() {
			return 1, nil
		}
		return 0, nil
	}
	return 0, typeError(302, "type must be number, but is %s", v.Kind())
}

// getInt64 is get<int64_t>() (nlohmann's own integer type: no boolean).
func getInt64(v ojson.Value) (int64, error) {
	switch v.Kind() {
	case ojson.Int, ojson.Uint:
		return v.Int(), nil
	case ojson.Float:
		return cvtInt(v.Float()), nil
	}
	return 0, typeError(302, "type must be number, but is %s", v.Kind())
}

// getUint32 is get<uint32_t>().
func getUint32(v ojson.Value) (uint32, error) {
	switch v.Kind() {
	case ojson.Int, ojson.Uint:
		return uint32(v.Uint()), nil
	case ojson.Float:
		return uint32(cvtInt(v.Float())), nil
	case ojson.Bool:
		if v.Bool() {
			return 1, nil
		}
		return 0, nil
	}
	return 0, typeError(302, "type must be number, but is %s", v.Kind())
}

// getFloat32 is get<float>().
func getFloat32(v ojson.Value) (float32, error) {
	switch v.Kind() {
	case ojson.Int:
		return float32(v.Int()), nil
	case ojson.Uint:
		return float32(v.Uint()), nil
	case ojson.Float:
		return float32(v.Float()), nil
	case ojson.Bool:
		if v.Bool() {
			return 1, nil
		}
		return 0, nil
	}
	return 0, typeError(302, "type must be number, but is %s", v.Kind())
}

// getFloat64 is get<double>() (nlohmann's own float type: no boolean).
func getFloat64(v ojson.Value) (float64, error) {
	if !v.IsNumber() {
		return 0, typeError(302, "type must be number, but is %s", v.Kind())
	}
	return v.Float(), nil
}

// getBool is get<bool>().
func getBool(v ojson.Value) (bool, error) {
	if !v.IsBool() {
		return false, typeError(302, "type must be boolean, but is %s", v.Kind())
	}
	return v.Bool(), nil
}

// getString is get<std::string>().
func getString(v ojson.Value) (string, error) {
	if !v.IsString() {
		return "", typeError(302, "type must be string, but is %s", v.Kind())
	}
	return v.Str(), nil
}

// getStrings is get<std::vector<std::string>>().
func getStrings(v ojson.Value) ([]string, error) {
	if !v.IsArray() {
		return nil, typeError(302, "type must be array, but is %s", v.Kind())
	}
	out := make([]string, 0, v.Len())
	for _, e := range v.Elems() {
		s, err := getString(e)
		if err != nil {
			return nil, err
		}
		out = append(out, s)
	}
	return out, nil
}

// getTokens is get<llama_tokens>() (a vector of int32_t).
func getTokens(v ojson.Value) ([]int32, error) {
	if !v.IsArray() {
		return nil, typeError(302, "type must be array, but is %s", v.Kind())
	}
	out := make([]int32, 0, v.Len())
	for _, e := range v.Elems() {
		t, err := getInt32(e)
		if err != nil {
			return nil, err
		}
		out = append(out, t)
	}
	return out, nil
}

// getFloats is get<std::vector<float>>().
func getFloats(v ojson.Value) ([]float32, error) {
	if !v.IsArray() {
		return nil, typeError(302, "type must be array, but is %s", v.Kind())
	}
	out := make([]float32, 0, v.Len())
	for _, e := range v.Elems() {
		f, err := getFloat32(e)
		if err != nil {
			return nil, err
		}
		out = append(out, f)
	}
	return out, nil
}

// value is llama-server's json_value(body, key, default): the key's value
// as get converts it, or the default where the key is missing or null,
// or where the value is of a wrong type (the pin logs a warning then).
func value[T any](body ojson.Value, key string, def T, get func(ojson.Value) (T, error)) T {
	if !hasValue(body, key) {
		return def
	}
	x, err := get(body.At(key))
	if err != nil {
		return def
	}
	return x
}

// asJSON is get<json>(): any value.
func asJSON(v ojson.Value) (ojson.Value, error) { return v, nil }
