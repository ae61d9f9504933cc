// Port of llama.cpp common/jinja/value.cpp (v0.5.0): func_args, the global
// functions and the tests (global_builtins), tojson, selectattr and
// default.

package jinja

import (
	"strconv"
)

// args is func_args: the arguments of a call, keyword arguments among them
// in their places, and the scope the call was made from.
type args struct {
	r    *renderer
	ctx  *scope
	name string // func_name, for errors
	list []value
}

func (a *args) count() int { return len(a.list) }

func (a *args) kwarg(key string, def value) value {
	for _, v := range a.list {
		if kw, ok := v.(*kwargVal); ok && kw.key == key {
			return kw.val
		}
	}
	return def
}

// kwargOrPos is get_kwarg_or_pos: the keyword argument, else the
// positional one at pos unless that is a keyword argument, else undefined.
func (a *args) kwargOrPos(key string, pos int) value {
	v := a.kwarg(key, mkUndef(""))
	if isUndef(v) && pos < len(a.list) && !isKwarg(a.list[pos]) {
		return a.list[pos]
	}
	return v
}

func (a *args) pos(i int) value {
	if i < len(a.list) {
		return a.list[i]
	}
	throw("Function '" + a.name + "' expected at least " + strconv.Itoa(i+1) + " arguments, got " + strconv.Itoa(len(a.list)))
	return nil
}

func (a *args) posOr(i int, def value) value {
	if i < len(a.list) {
		return a.list[i]
	}
	return def
}

func (a *args) ensureCount(lo, hi int) {
	n := len(a.list)
	if n < lo || n > hi {
		throw("Function '" + a.name + "' expected between " + strconv.Itoa(lo) + " and " + strconv.Itoa(hi) + " arguments, got " + strconv.Itoa(n))
	}
}

// vtype is a T of ensure_val<T>; its name is what typeid(T).name() prints
// for the pin's std::shared_ptr<jinja::T>.
type vtype uint8

const (
	vInt vtype = iota
	vFloat
	vString
	vBool
	vArray
	vObject
)

var vtypeNames = [...]string{"value_int_t", "value_float_t", "value_string_t", "value_bool_t", "value_array_t", "value_object_t"}

func (t vtype) mangled() string {
	n := vtypeNames[t]
	return "St10shared_ptrIN5jinja" + strconv.Itoa(len(n)) + n + "EE"
}

func (t vtype) is(v value) bool {
	switch t {
	case vInt:
		return isInt(v)
	case vFloat:
		return isFloat(v)
	case vString:
		return isStr(v)
	case vBool:
		return isBool(v)
	case vArray:
		return isArr(v)
	}
	return isObj(v)
}

func (a *args) ensureVal(t vtype, v value) {
	if !t.is(v) {
		throw("Function '" + a.name + "' expected value of type " + t.mangled() + ", got " + typeName(v))
	}
}

// ensure is ensure_vals: at least as many arguments as are required, and
// the required ones present of their types.
func (a *args) ensure(types []vtype, required ...bool) {
	n := 0
	for i := range types {
		if i >= len(required) || required[i] {
			n++
		}
	}
	a.ensureCount(n, 999)
	for i, t := range types {
		if (i >= len(required) || required[i]) && len(a.list) > i {
			a.ensureVal(t, a.list[i])
		}
	}
}

// ensure1 is ensure_vals<T>().
func (a *args) ensure1(t vtype) {
	a.ensureCount(1, 999)
	a.ensureVal(t, a.list[0])
}

func fn(f func(*args) value) *builtin { return &builtin{call: f} }

var globalBuiltins map[string]*builtin

func init() {
	globalBuiltins = map[string]*builtin{
		"raise_exception": fn(func(a *args) value {
			a.ensure1(vString)
			throw("Jinja Exception: " + asString(a.r, a.list[0]).str())
			return nil
		}),
		"namespace": fn(func(a *args) value {
			out := mkObj()
			for _, v := range a.list {
				kw, ok := v.(*kwargVal)
				if !ok {
					throw("namespace() arguments must be kwargs")
				}
				a.r.objInsert(out, mkStr(kw.key), kw.val)
			}
			return out
		}),
		"strftime_now": fn(func(a *args) value {
			a.ensure1(vString)
			s, ok := strftime(asString(a.r, a.list[0]).str(), a.r.now)
			if !ok {
				throw("strftime_now: failed to format time")
			}
			return mkStr(s)
		}),
		"range":  fn(builtinRange),
		"tojson": fn(tojson),

		"test_is_boolean":  fn(testType(isBool)),
		"test_is_callable": fn(testType(isFunc)),
		"test_is_odd": fn(func(a *args) value {
			a.ensure1(vInt)
			return mkBool(asInt(a.list[0])%2 != 0)
		}),
		"test_is_even": fn(func(a *args) value {
			a.ensure1(vInt)
			return mkBool(asInt(a.list[0])%2 == 0)
		}),
		"test_is_false": fn(func(a *args) value {
			a.ensureCount(1, 999)
			b, ok := a.list[0].(*boolVal)
			return mkBool(ok && !b.v)
		}),
		"test_is_true": fn(func(a *args) value {
			a.ensureCount(1, 999)
			b, ok := a.list[0].(*boolVal)
			return mkBool(ok && b.v)
		}),
		"test_is_divisibleby": fn(func(a *args) value {
			a.ensure([]vtype{vInt, vInt})
			x, y := a.list[0].(*intVal).i, a.list[1].(*intVal).i
			if y == 0 || (y == -1 && x == -1<<63) {
				// the pin's integer division traps here
				throw("integer division by zero or overflow in divisibleby")
			}
			return mkBool(x%y == 0)
		}),
		"test_is_string":   fn(testType(isStr)),
		"test_is_integer":  fn(testType(isInt)),
		"test_is_float":    fn(testType(isFloat)),
		"test_is_number":   fn(testType(isNumber)),
		"test_is_iterable": fn(testType(func(v value) bool { return isArr(v) || isStr(v) || isUndef(v) })),
		"test_is_sequence": fn(testType(func(v value) bool { return isArr(v) || isStr(v) || isUndef(v) })),
		"test_is_mapping":  fn(testType(isObj)),
		"test_is_lower": fn(func(a *args) value {
			a.ensure1(vString)
			return mkBool(a.list[0].(*strVal).s.isLower())
		}),
		"test_is_upper": fn(func(a *args) value {
			a.ensure1(vString)
			return mkBool(a.list[0].(*strVal).s.isUpper())
		}),
		"test_is_none": fn(testType(isNone)),
		"test_is_defined": fn(func(a *args) value {
			a.ensureCount(1, 999)
			return mkBool(!isUndef(a.list[0]))
		}),
		"test_is_undefined":   fn(testType(isUndef)),
		"test_is_eq":          fn(testCompare(cmpEq)),
		"test_is_equalto":     fn(testCompare(cmpEq)),
		"test_is_ge":          fn(testCompare(cmpGe)),
		"test_is_gt":          fn(testCompare(cmpGt)),
		"test_is_greaterthan": fn(testCompare(cmpGt)),
		"test_is_lt":          fn(testCompare(cmpLt)),
		"test_is_lessthan":    fn(testCompare(cmpLt)),
		"test_is_ne":          fn(testCompare(cmpNe)),
		"test_is_in":          fn(testIsIn),
		"test_is_test": fn(func(a *args) value {
			a.ensure1(vString)
			_, ok := globalBuiltins["test_is_"+a.list[0].(*strVal).s.str()]
			return mkBool(ok)
		}),
		"test_is_sameas": fn(func(*args) value {
			throwNotImpl("sameas test not implemented")
			return nil
		}),
		"test_is_escaped": fn(func(*args) value {
			throwNotImpl("escaped test not implemented")
			return nil
		}),
		"test_is_filter": fn(func(*args) value {
			throwNotImpl("filter test not implemented")
			return nil
		}),
	}
}

func testType(is func(value) bool) func(*args) value {
	return func(a *args) value {
		a.ensureCount(1, 999)
		return mkBool(is(a.pos(0)))
	}
}

func testCompare(op cmpOp) func(*args) value {
	return func(a *args) value {
		a.ensureCount(2, 2)
		return mkBool(a.r.compare(a.list[0], a.list[1], op))
	}
}

func testIsIn(a *args) value {
	a.ensureCount(2, 999)
	needle, hay := a.list[0], a.list[1]
	switch h := hay.(type) {
	case *undefVal:
		return mkBool(false)
	case *arrVal:
		for _, it := range h.items {
			if a.r.equivalent(needle, it) {
				return mkBool(true)
			}
		}
		return mkBool(false)
	case *strVal:
		n, ok := needle.(*strVal)
		if !ok {
			throw("'in' test expects args[1] as string when args[0] is string, got args[1] as " + typeName(needle))
		}
		return mkBool(stringsContains(h.s.str(), n.s.str()))
	case *objVal:
		return mkBool(a.r.objFind(h, needle) >= 0)
	}
	throw("'in' test expects iterable as first argument, got " + typeName(hay))
	return nil
}

func builtinRange(a *args) value {
	a.ensureCount(1, 3)
	a.ensure([]vtype{vInt, vInt, vInt}, true, false, false)
	arg0 := a.list[0]
	arg1 := a.posOr(1, mkUndef(""))
	arg2 := a.posOr(2, mkUndef(""))
	var start, stop, step int64
	switch a.count() {
	case 1:
		start, stop, step = 0, asInt(arg0), 1
	case 2:
		start, stop, step = asInt(arg0), asInt(arg1), 1
	default:
		start, stop, step = asInt(arg0), asInt(arg1), asInt(arg2)
	}
	if step == 0 {
		throw("range() step argument must not be zero")
	}
	n := rangeLen(start, stop, step)
	if n > maxRangeLen {
		throw("range() of more than " + strconv.Itoa(maxRangeLen) + " elements")
	}
	items := make([]value, 0, n)
	for i := start; len(items) < int(n); i += step {
		items = append(items, mkInt(i))
	}
	return mkArr(items)
}

// rangeLen counts the pin's range loop without running it (nor
// overflowing).
func rangeLen(start, stop, step int64) uint64 {
	if step > 0 {
		if start >= stop {
			return 0
		}
		d := uint64(stop) - uint64(start)
		return (d-1)/uint64(step) + 1
	}
	if start <= stop {
		return 0
	}
	d := uint64(start) - uint64(stop)
	s := uint64(-step)
	if step == -1<<63 {
		s = 1 << 63
	}
	return (d-1)/s + 1
}

// defaultValue is default_value.
func defaultValue(a *args) value {
	a.ensureCount(2, 3)
	check := asBool(a.kwargOrPos("boolean", 2))
	v := a.list[0]
	var none bool
	if check {
		none = !asBool(v)
	} else {
		none = isUndef(v) || isNone(v)
	}
	if none {
		return a.list[1]
	}
	return v
}

// selectattr is selectattr<is_reject>: select, reject, selectattr and
// rejectattr alike.
func selectattr(reject bool) func(*args) value {
	return func(a *args) value {
		a.ensureCount(2, 4)
		a.ensure([]vtype{vArray, vString, vString, vString}, true, true, false, false)
		arr := append([]value(nil), asArray(a.list[0])...)
		attribute := a.list[1]
		var out []value
		keep := func(sel bool, item value) {
			if sel != reject {
				out = append(out, item)
			}
		}
		switch a.count() {
		case 2:
			for _, item := range arr {
				o, ok := item.(*objVal)
				if !ok {
					throw("selectattr: item is not an object")
				}
				keep(asBool(a.r.objGet(o, attribute, mkUndef(""))), item)
			}
		case 3:
			name := asString(a.r, a.list[1]).str()
			testVal := a.list[2]
			fn, ok := globalBuiltins["test_is_"+name]
			if !ok {
				throw("selectattr: unknown test '" + name + "'")
			}
			for _, item := range arr {
				keep(asBool(fn.call(&args{r: a.r, ctx: a.ctx, list: []value{item, testVal}})), item)
			}
		case 4:
			name := asString(a.r, a.list[2]).str()
			extra := a.list[3]
			fn, ok := globalBuiltins["test_is_"+name]
			if !ok {
				throw("selectattr: unknown test '" + name + "'")
			}
			for _, item := range arr {
				o, ok := item.(*objVal)
				if !ok {
					throw("selectattr: item is not an object")
				}
				attr := a.r.objGet(o, attribute, mkUndef(""))
				keep(asBool(fn.call(&args{r: a.r, ctx: a.ctx, list: []value{attr, extra}})), item)
			}
		default:
			throw("selectattr: invalid number of arguments")
		}
		return mkArr(out)
	}
}

// tojson is the pin's tojson filter (not nlohmann's dump: the pin writes
// its values itself, floats as an ostream prints them).
func tojson(a *args) value {
	a.ensureCount(1, 5)
	ascii := a.kwargOrPos("ensure_ascii", 1)
	indentV := a.kwargOrPos("indent", 2)
	seps := a.kwargOrPos("separators", 3)
	sortKeys := a.kwargOrPos("sort_keys", 4)
	indent := -1
	if a.r.stats {
		a.r.markDeep(a.pos(0))
	}
	if iv, ok := indentV.(*intVal); ok {
		indent = int(int32(iv.i))
	}
	if asBool(sortKeys) {
		throwNotImpl("tojson sort_keys=true not implemented")
	}
	ensureASCII := asBool(ascii)
	var sepList []value
	if arr, ok := seps.(*arrVal); ok {
		sepList = arr.items
	}
	itemSep := ", "
	if indent >= 0 {
		itemSep = ","
	}
	if len(sepList) > 0 {
		itemSep = asString(a.r, sepList[0]).str()
	}
	keySep := ": "
	if len(sepList) > 1 {
		keySep = asString(a.r, sepList[1]).str()
	}
	s := a.r.toJSON(a.pos(0), indent, itemSep, keySep)
	if ensureASCII {
		s = jsonEnsureASCII(s)
	}
	return mkStr(s)
}
