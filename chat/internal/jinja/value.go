// Port of llama.cpp common/jinja/value.h (v0.5.0): the runtime's values.
// The pin's virtual methods are functions here that switch on the type.

package jinja

import (
	"math"
	"strconv"
)

// value is jinja::value: a pointer to one of the types below, with an
// identity (the capability probe marks the values a template touched).
type value interface {
	b() *base
}

// base is what every value holds besides its data: the probe's marks.
type base struct {
	st     *stats
	shared bool // a singleton: never marked
}

func (x *base) b() *base { return x }

// stats is value_t::stats_t: whether the template used the value, and the
// filters, tests and accesses applied to it.
type stats struct {
	used bool
	ops  []string
}

func (s *stats) has(op string) bool {
	for _, o := range s.ops {
		if o == op {
			return true
		}
	}
	return false
}

type (
	undefVal struct {
		base
		hint string
	}
	noneVal struct{ base }
	boolVal struct {
		base
		v bool
	}
	intVal struct {
		base
		i int64
		f float64 // val_flt: ±Inf where the integer has no exact double
	}
	floatVal struct {
		base
		f float64
		i int64 // val_int: x86's truncation of f, 0 for NaN and infinities
	}
	strVal struct {
		base
		s   jstr
		one [1]Part // a one-part string's part, allocated with it
	}
	// arrVal is value_array_t, or value_tuple_t when tuple is set.
	arrVal struct {
		base
		items []value
		tuple bool
	}
	objVal struct {
		base
		keys, vals []value
		index      map[string]int // string keys, once the object is large
		ownIndex   bool           // index is this object's (not a frozen one's)
		noBuiltins bool           // the context and loop objects have none
	}
	funcVal struct {
		base
		name string
		fn   *builtin
		this value // bound first argument, or nil
	}
	kwargVal struct {
		base
		key string
		val value
	}
)

// builtin is a function a template may call.
type builtin struct {
	call func(a *args) value
}

var (
	noneSingleton  = &noneVal{base: base{shared: true}}
	trueSingleton  = &boolVal{base: base{shared: true}, v: true}
	falseSingleton = &boolVal{base: base{shared: true}, v: false}
)

func mkNone() value { return noneSingleton }

func mkBool(v bool) value {
	if v {
		return trueSingleton
	}
	return falseSingleton
}

var undefSingleton = &undefVal{base: base{shared: true}}

func mkUndef(hint string) value {
	if hint == "" {
		return undefSingleton
	}
	return &undefVal{hint: hint}
}

// cvtInt is static_cast<int64_t>(double) as x86 computes it: out of range
// and NaN give the "integer indefinite" value.
func cvtInt(f float64) int64 {
	if f != f || f >= 0x1p63 || f < -0x1p63 {
		return math.MinInt64
	}
	return int64(f)
}

func mkInt(i int64) *intVal {
	f := float64(i)
	if cvtInt(f) != i {
		f = math.Inf(1)
		if i < 0 {
			f = math.Inf(-1)
		}
	}
	return &intVal{i: i, f: f}
}

func mkFloat(f float64) *floatVal {
	var i int64
	if !math.IsInf(f, 0) && !math.IsNaN(f) {
		i = cvtInt(f)
	}
	return &floatVal{f: f, i: i}
}

func mkStr(s string) *strVal {
	v := &strVal{}
	v.one[0].Text = s
	v.s.parts = v.one[:]
	return v
}

// sharedStr is a string value shared by every render (the loop object's
// keys): never marked, never changed.
func sharedStr(s string) *strVal {
	v := mkStr(s)
	v.shared = true
	return v
}
func mkJStr(s jstr) *strVal     { return &strVal{s: s} }
func mkArr(items []value) value { return &arrVal{items: items} }
func mkTuple(items []value) value {
	return &arrVal{items: items, tuple: true}
}
func mkObj() *objVal { return &objVal{} }

// typeName is value_t::type().
func typeName(v value) string {
	switch x := v.(type) {
	case *undefVal:
		if x.hint == "" {
			return "Undefined"
		}
		return "Undefined (hint: '" + x.hint + "')"
	case *noneVal:
		return "None"
	case *boolVal:
		return "Boolean"
	case *intVal:
		return "Integer"
	case *floatVal:
		return "Float"
	case *strVal:
		return "String"
	case *arrVal:
		if x.tuple {
			return "Tuple"
		}
		return "Array"
	case *objVal:
		return "Object"
	case *funcVal:
		return "Function"
	case *kwargVal:
		return "KwArg"
	}
	return ""
}

func typeError(v value, expected string) {
	throw(typeName(v) + " " + expected)
}

func isUndef(v value) bool { _, ok := v.(*undefVal); return ok }
func isNone(v value) bool  { _, ok := v.(*noneVal); return ok }
func isStr(v value) bool   { _, ok := v.(*strVal); return ok }
func isInt(v value) bool   { _, ok := v.(*intVal); return ok }
func isFloat(v value) bool { _, ok := v.(*floatVal); return ok }
func isBool(v value) bool  { _, ok := v.(*boolVal); return ok }
func isArr(v value) bool   { _, ok := v.(*arrVal); return ok }
func isObj(v value) bool   { _, ok := v.(*objVal); return ok }
func isFunc(v value) bool  { _, ok := v.(*funcVal); return ok }
func isKwarg(v value) bool { _, ok := v.(*kwargVal); return ok }
func isTuple(v value) bool { a, ok := v.(*arrVal); return ok && a.tuple }

// isNumber is is_val<value_int> || is_val<value_float>.
func isNumber(v value) bool { return isInt(v) || isFloat(v) }

// isNumeric is value_t::is_numeric: booleans count.
func isNumeric(v value) bool { return isInt(v) || isFloat(v) || isBool(v) }

func asInt(v value) int64 {
	switch x := v.(type) {
	case *intVal:
		return x.i
	case *floatVal:
		return x.i
	case *boolVal:
		if x.v {
			return 1
		}
		return 0
	}
	typeError(v, "is not an int value")
	return 0
}

func asFloat(v value) float64 {
	switch x := v.(type) {
	case *intVal:
		return x.f
	case *floatVal:
		return x.f
	}
	typeError(v, "is not a float value")
	return 0
}

// numParts are val_int and val_flt as equivalence compares them.
func numParts(v value) (int64, float64) {
	switch x := v.(type) {
	case *intVal:
		return x.i, x.f
	case *floatVal:
		return x.i, x.f
	case *boolVal:
		if x.v {
			return 1, 1
		}
	}
	return 0, 0
}

func asBool(v value) bool {
	switch x := v.(type) {
	case *undefVal, *noneVal:
		return false
	case *boolVal:
		return x.v
	case *intVal:
		return x.i != 0
	case *floatVal:
		return x.f != 0
	case *strVal:
		return x.s.length() > 0
	case *arrVal:
		return len(x.items) > 0
	case *objVal:
		return len(x.keys) > 0
	}
	typeError(v, "is not a bool value")
	return false
}

// asString is value_t::as_string.
func asString(r *renderer, v value) jstr {
	switch x := v.(type) {
	case *strVal:
		return x.s
	case *intVal:
		return plain(strconv.FormatInt(x.i, 10))
	case *floatVal:
		return plain(floatString(x.f))
	case *boolVal:
		if x.v {
			return plain("True")
		}
		return plain("False")
	case *noneVal:
		return plain("None")
	case *arrVal:
		return plain(r.arrayRepr(x))
	case *objVal:
		return plain(r.objectRepr(x))
	}
	typeError(v, "is not a string value")
	return jstr{}
}

func asArray(v value) []value {
	if a, ok := v.(*arrVal); ok {
		return a.items
	}
	typeError(v, "is not an array value")
	return nil
}

func isImmutable(v value) bool {
	switch v.(type) {
	case *objVal:
		return false
	case *arrVal:
		return isTuple(v)
	}
	return true
}

// isHashable is value_t::is_hashable: arrays and objects are when every
// element (every value, for objects) is immutable and hashable.
func (r *renderer) isHashable(v value) bool {
	switch x := v.(type) {
	case *noneVal, *boolVal, *intVal, *floatVal, *strVal, *kwargVal:
		return true
	case *arrVal:
		r.enterValue()
		defer r.leaveValue()
		for _, e := range x.items {
			if !isImmutable(e) || !r.isHashable(e) {
				return false
			}
		}
		return true
	case *objVal:
		r.enterValue()
		defer r.leaveValue()
		for _, e := range x.vals {
			if !isImmutable(e) || !r.isHashable(e) {
				return false
			}
		}
		return true
	}
	return false
}

// equivalent is the pin's == between values (value_t::operator==).
func (r *renderer) equivalent(a, b value) bool {
	switch x := a.(type) {
	case *intVal, *floatVal, *boolVal:
		if !isNumeric(b) {
			return false
		}
		ai, af := numParts(a)
		bi, bf := numParts(b)
		return ai == bi && af == bf
	case *strVal:
		y, ok := b.(*strVal)
		return ok && x.s.str() == y.s.str()
	case *noneVal:
		return isNone(b)
	case *undefVal:
		return isUndef(b)
	case *arrVal:
		y, ok := b.(*arrVal)
		if !ok || x.tuple != y.tuple || !r.isHashable(x) || !r.isHashable(y) || len(x.items) != len(y.items) {
			return false
		}
		r.enterValue()
		defer r.leaveValue()
		for i := range x.items {
			if !r.equivalent(x.items[i], y.items[i]) {
				return false
			}
		}
		return true
	case *objVal:
		y, ok := b.(*objVal)
		if !ok || !r.isHashable(x) || !r.isHashable(y) || len(x.keys) != len(y.keys) {
			return false
		}
		r.enterValue()
		defer r.leaveValue()
		for i := range x.keys {
			if !r.equivalent(x.keys[i], y.keys[i]) || !r.equivalent(x.vals[i], y.vals[i]) {
				return false
			}
		}
		return true
	case *funcVal:
		// the pin compares target<func_hptr>() of the two: a function type
		// no std::function holds, so null for both, and every two
		// functions are equal
		return isFunc(b)
	case *kwargVal:
		y, ok := b.(*kwargVal)
		return ok && x.key == y.key && x.val == y.val
	}
	return false
}

// find is the position of key in the object (its hash table's answer).
func (r *renderer) objFind(o *objVal, key value) int {
	if !isImmutable(key) || !r.isHashable(key) {
		throw("Object key of unhashable type: " + typeName(key))
	}
	if s, ok := key.(*strVal); ok && o.index != nil {
		if i, ok := o.index[s.s.str()]; ok {
			return i
		}
		return -1
	}
	for i, k := range o.keys {
		if r.equivalent(key, k) {
			return i
		}
	}
	return -1
}

const indexFrom = 12

// objInsert is value_object_t::insert: an existing key keeps its place
// and its first key value, with the new value.
func (r *renderer) objInsert(o *objVal, key, val value) {
	if i := r.objFind(o, key); i >= 0 {
		o.vals[i] = val
		return
	}
	o.keys = append(o.keys, key)
	o.vals = append(o.vals, val)
	if s, ok := key.(*strVal); ok && o.index != nil {
		if !o.ownIndex {
			o.reindex()
		} else {
			o.index[s.s.str()] = len(o.keys) - 1
		}
	} else if len(o.keys) >= indexFrom {
		o.reindex()
	}
}

// reindex builds the string index when every key is a string (a NaN or
// other key that the index cannot hold keeps the object on linear scans).
func (o *objVal) reindex() {
	idx := make(map[string]int, len(o.keys))
	for i, k := range o.keys {
		s, ok := k.(*strVal)
		if !ok {
			o.index = nil
			return
		}
		if _, dup := idx[s.s.str()]; !dup {
			idx[s.s.str()] = i
		}
	}
	o.index, o.ownIndex = idx, true
}

// objGet is at(key, default).
func (r *renderer) objGet(o *objVal, key, def value) value {
	if i := r.objFind(o, key); i >= 0 {
		return o.vals[i]
	}
	return def
}

func (r *renderer) objGetStr(o *objVal, key string, def value) value {
	return r.objGet(o, mkStr(key), def)
}

// objAt is at(key): a missing key is an error.
func (r *renderer) objAt(o *objVal, key value) value {
	if i := r.objFind(o, key); i >= 0 {
		return o.vals[i]
	}
	throw("Key '" + asString(r, key).str() + "' not found in value of type Object")
	return nil
}

// arrAt is value_array_t::at(index): negative from the end, out of range
// an error.
func arrAt(a *arrVal, index int64) value {
	n := int64(len(a.items))
	if index < 0 {
		index += n
	}
	if index < 0 || index >= n {
		throw("Index " + strconv.FormatInt(index, 10) + " out of bounds for array of size " + strconv.Itoa(len(a.items)))
	}
	return a.items[index]
}

func arrGet(a *arrVal, index int64, def value) value {
	n := int64(len(a.items))
	if index < 0 {
		index += n
	}
	if index < 0 || index >= n {
		return def
	}
	return a.items[index]
}

func objCopy(o *objVal) *objVal {
	c := &objVal{keys: append([]value(nil), o.keys...), vals: append([]value(nil), o.vals...)}
	if o.index != nil {
		c.reindex()
	}
	return c
}
