// Package ojson is JSON as llama.cpp holds it: nlohmann's ordered_json
// (the pin's common/json.h wraps it as common_json). Objects keep their keys
// in the order they were first added, numbers keep whether they were read
// as a signed integer, an unsigned one or a float, and Dump writes the bytes
// nlohmann's dump writes: the same escapes, the same shortest float digits
// (Grisu2) in the same layout, the same indentation. Parse accepts what
// nlohmann's parser accepts and names the error as it does.
//
// The chat templates, the JSON-schema converter and the server's answers
// all pass through this package, so that what ggload prints is what
// llama.cpp prints, byte for byte.
package ojson

import (
	"fmt"
	"math"
	"sort"
	"strconv"
)

// Kind is a value's type, as nlohmann's value_t names it.
type Kind uint8

const (
	Null Kind = iota
	Bool
	Int   // number_integer: read with a sign, or made from an int64
	Uint  // number_unsigned: read without a sign
	Float // number_float
	String
	Array
	Object
)

var kindNames = [...]string{"null", "boolean", "number", "number", "number", "string", "array", "object"}

// String is the name nlohmann's type_name gives the kind.
func (k Kind) String() string {
	if int(k) < len(kindNames) {
		return kindNames[k]
	}
	return "kind(" + strconv.Itoa(int(k)) + ")"
}

// Member is one key of an object and its value.
type Member struct {
	Key   string
	Value Value
}

// Value is one JSON value. The zero Value is null. Arrays and objects are
// held by reference, as Go slices are: copy them with Clone before
// changing one that others hold.
type Value struct {
	kind Kind
	b    bool
	i    int64
	u    uint64
	f    float64
	s    string
	arr  []Value
	obj  *members
}

type members struct {
	list  []Member
	index map[string]int // built once an object grows past a few keys
}

const indexFrom = 16

func (m *members) find(key string) int {
	if m.index != nil {
		if i, ok := m.index[key]; ok {
			return i
		}
		return -1
	}
	for i := range m.list {
		if m.list[i].Key == key {
			return i
		}
	}
	return -1
}

func (m *members) reindex() {
	if len(m.list) < indexFrom {
		m.index = nil
		return
	}
	m.index = make(map[string]int, len(m.list))
	for i, e := range m.list {
		m.index[e.Key] = i
	}
}

// NullValue is null.
func NullValue() Value { return Value{} }

// BoolValue is true or false.
func BoolValue(b bool) Value { return Value{kind: Bool, b: b} }

// IntValue is a signed integer.
func IntValue(i int64) Value { return Value{kind: Int, i: i} }

// UintValue is an unsigned integer.
func UintValue(u uint64) Value { return Value{kind: Uint, u: u} }

// FloatValue is a float.
func FloatValue(f float64) Value { return Value{kind: Float, f: f} }

// StringValue is a string (any bytes; Dump checks them).
func StringValue(s string) Value { return Value{kind: String, s: s} }

// ArrayValue is an array of vals (the slice is kept, not copied).
func ArrayValue(vals ...Value) Value {
	if vals == nil {
		vals = []Value{}
	}
	return Value{kind: Array, arr: vals}
}

// ObjectValue is an object of the members, in their order; a key given
// twice keeps its first place and its last value, as nlohmann's
// ordered_json does.
func ObjectValue(ms ...Member) Value {
	v := Value{kind: Object, obj: &members{}}
	for _, m := range ms {
		v.Set(m.Key, m.Value)
	}
	return v
}

// Kind is the value's type.
func (v Value) Kind() Kind { return v.kind }

// IsNull, IsNumber and the rest say what the value is.
func (v Value) IsNull() bool   { return v.kind == Null }
func (v Value) IsBool() bool   { return v.kind == Bool }
func (v Value) IsString() bool { return v.kind == String }
func (v Value) IsArray() bool  { return v.kind == Array }
func (v Value) IsObject() bool { return v.kind == Object }
func (v Value) IsNumber() bool { return v.kind == Int || v.kind == Uint || v.kind == Float }

// IsInteger says whether the value is a signed or unsigned integer.
func (v Value) IsInteger() bool { return v.kind == Int || v.kind == Uint }

// Bool is the value of a boolean (false otherwise).
func (v Value) Bool() bool { return v.kind == Bool && v.b }

// Str is the value of a string ("" otherwise).
func (v Value) Str() string {
	if v.kind == String {
		return v.s
	}
	return ""
}

// Int is the value of a number as an int64, converted as C++ converts
// (a float truncated toward zero, saturated where it does not fit).
func (v Value) Int() int64 {
	switch v.kind {
	case Int:
		return v.i
	case Uint:
		return int64(v.u)
	case Float:
		switch {
		case math.IsNaN(v.f):
			return 0
		case v.f >= math.MaxInt64:
			return math.MaxInt64
		case v.f <= math.MinInt64:
			return math.MinInt64
		}
		return int64(v.f)
	case Bool:
		if v.b {
			return 1
		}
	}
	return 0
}

// Uint is the value of an unsigned number (0 for others).
func (v Value) Uint() uint64 {
	switch v.kind {
	case Uint:
		return v.u
	case Int:
		return uint64(v.i)
	case Float:
		if v.f <= 0 || math.IsNaN(v.f) {
			return 0
		}
		if v.f >= math.MaxUint64 {
			return math.MaxUint64
		}
		return uint64(v.f)
	}
	return 0
}

// Float is the value of a number as a float64.
func (v Value) Float() float64 {
	switch v.kind {
	case Int:
		return float64(v.i)
	case Uint:
		return float64(v.u)
	case Float:
		return v.f
	case Bool:
		if v.b {
			return 1
		}
	}
	return 0
}

// Len is the number of elements of an array or members of an object, the
// bytes of a string, 0 for null and 1 for other values (nlohmann's size()).
func (v Value) Len() int {
	switch v.kind {
	case Null:
		return 0
	case Array:
		return len(v.arr)
	case Object:
		return len(v.obj.list)
	case String:
		return len(v.s)
	}
	return 1
}

// Index is an array's element i (null where there is none).
func (v Value) Index(i int) Value {
	if v.kind != Array || i < 0 || i >= len(v.arr) {
		return Value{}
	}
	return v.arr[i]
}

// Elems are an array's elements (nil otherwise); the slice is the array's.
func (v Value) Elems() []Value {
	if v.kind != Array {
		return nil
	}
	return v.arr
}

// Members are an object's members in order (nil otherwise); the slice is
// the object's: do not change it.
func (v Value) Members() []Member {
	if v.kind != Object {
		return nil
	}
	return v.obj.list
}

// Keys are an object's keys in order.
func (v Value) Keys() []string {
	ms := v.Members()
	keys := make([]string, len(ms))
	for i, m := range ms {
		keys[i] = m.Key
	}
	return keys
}

// Get is an object's value for key.
func (v Value) Get(key string) (Value, bool) {
	if v.kind != Object {
		return Value{}, false
	}
	if i := v.obj.find(key); i >= 0 {
		return v.obj.list[i].Value, true
	}
	return Value{}, false
}

// At is an object's value for key, null where there is none.
func (v Value) At(key string) Value {
	x, _ := v.Get(key)
	return x
}

// Has says whether an object has key (nlohmann's contains).
func (v Value) Has(key string) bool {
	_, ok := v.Get(key)
	return ok
}

// Set gives an object's key a value: a new key goes last, an existing one
// keeps its place. A null value becomes an empty object first, as
// nlohmann's operator[] makes it one.
func (v *Value) Set(key string, x Value) {
	if v.kind == Null {
		*v = Value{kind: Object, obj: &members{}}
	}
	if v.kind != Object {
		panic(fmt.Sprintf("ojson: Set on a %s", v.kind))
	}
	if i := v.obj.find(key); i >= 0 {
		v.obj.list[i].Value = x
		return
	}
	v.obj.list = append(v.obj.list, Member{key, x})
	if v.obj.index != nil {
		v.obj.index[key] = len(v.obj.list) - 1
	} else if len(v.obj.list) >= indexFrom {
		v.obj.reindex()
	}
}

// Delete removes an object's key, and says whether it was there.
func (v *Value) Delete(key string) bool {
	if v.kind != Object {
		return false
	}
	i := v.obj.find(key)
	if i < 0 {
		return false
	}
	v.obj.list = append(v.obj.list[:i:i], v.obj.list[i+1:]...)
	v.obj.reindex()
	return true
}

// Append adds x at the end of an array; a null value becomes an empty
// array first, as nlohmann's push_back makes it one.
func (v *Value) Append(x ...Value) {
	if v.kind == Null {
		*v = Value{kind: Array, arr: []Value{}}
	}
	if v.kind != Array {
		panic(fmt.Sprintf("ojson: Append on a %s", v.kind))
	}
	v.arr = append(v.arr, x...)
}

// Clone is a deep copy: arrays and objects that share nothing with v.
func (v Value) Clone() Value {
	switch v.kind {
	case Array:
		out := make([]Value, len(v.arr))
		for i, e := range v.arr {
			out[i] = e.Clone()
		}
		return Value{kind: Array, arr: out}
	case Object:
		m := &members{list: make([]Member, len(v.obj.list))}
		for i, e := range v.obj.list {
			m.list[i] = Member{e.Key, e.Value.Clone()}
		}
		m.reindex()
		return Value{kind: Object, obj: m}
	}
	return v
}

// Equal is nlohmann's operator==: numbers compare by value across their
// kinds (an integer and a float as floats), arrays element by element,
// objects as sets of keys (their order does not matter).
func Equal(a, b Value) bool {
	if a.IsNumber() && b.IsNumber() {
		switch {
		case a.kind == Float || b.kind == Float:
			return a.Float() == b.Float()
		case a.kind == Int && b.kind == Int:
			return a.i == b.i
		case a.kind == Uint && b.kind == Uint:
			return a.u == b.u
		case a.kind == Int: // and b unsigned: compared as nlohmann casts
			return a.i == int64(b.u)
		default:
			return int64(a.u) == b.i
		}
	}
	if a.kind != b.kind {
		return false
	}
	switch a.kind {
	case Null:
		return true
	case Bool:
		return a.b == b.b
	case String:
		return a.s == b.s
	case Array:
		if len(a.arr) != len(b.arr) {
			return false
		}
		for i := range a.arr {
			if !Equal(a.arr[i], b.arr[i]) {
				return false
			}
		}
		return true
	case Object:
		if len(a.obj.list) != len(b.obj.list) {
			return false
		}
		for _, m := range a.obj.list {
			x, ok := b.Get(m.Key)
			if !ok || !Equal(m.Value, x) {
				return false
			}
		}
		return true
	}
	return false
}

// FromGo converts a Go value: nil, bool, the integer and float types,
// string, []any, []string, map[string]any (its keys sorted, as a
// std::map would hold them), []Member and Value itself.
func FromGo(x any) (Value, error) {
	switch t := x.(type) {
	case nil:
		return Value{}, nil
	case Value:
		return t, nil
	case bool:
		return BoolValue(t), nil
	case int:
		return IntValue(int64(t)), nil
	case int8:
		return IntValue(int64(t)), nil
	case int16:
		return IntValue(int64(t)), nil
	case int32:
		return IntValue(int64(t)), nil
	case int64:
		return IntValue(t), nil
	case uint:
		return UintValue(uint64(t)), nil
	case uint8:
		return UintValue(uint64(t)), nil
	case uint16:
		return UintValue(uint64(t)), nil
	case uint32:
		return UintValue(uint64(t)), nil
	case uint64:
		return UintValue(t), nil
	case float32:
		return FloatValue(float64(t)), nil
	case float64:
		return FloatValue(t), nil
	case string:
		return StringValue(t), nil
	case []string:
		out := make([]Value, len(t))
		for i, s := range t {
			out[i] = StringValue(s)
		}
		return ArrayValue(out...), nil
	case []any:
		out := make([]Value, len(t))
		for i, e := range t {
			v, err := FromGo(e)
			if err != nil {
				return Value{}, err
			}
			out[i] = v
		}
		return ArrayValue(out...), nil
	case []Member:
		return ObjectValue(t...), nil
	case map[string]any:
		keys := make([]string, 0, len(t))
		for k := range t {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		out := Value{kind: Object, obj: &members{}}
		for _, k := range keys {
			v, err := FromGo(t[k])
			if err != nil {
				return Value{}, err
			}
			out.Set(k, v)
		}
		return out, nil
	}
	return Value{}, fmt.Errorf("ojson: cannot convert a %T", x)
}

// MarshalJSON writes the value as Dump(-1) does, bad UTF-8 replaced.
func (v Value) MarshalJSON() ([]byte, error) { return []byte(v.DumpSafe(-1)), nil }

// UnmarshalJSON reads the value as Parse does.
func (v *Value) UnmarshalJSON(b []byte) error {
	x, err := Parse(b)
	if err != nil {
		return err
	}
	*v = x
	return nil
}
