// Port of llama.cpp common/jinja/value.cpp (v0.5.0): the built-in filters
// and methods of each value type (value_*_t::get_builtins).

package jinja

import (
	"strconv"
	"strings"
)

type table = map[string]*builtin

var (
	intMethods, floatMethods, stringMethods, boolMethods   table
	arrayMethods, objectMethods, noneMethods, undefMethods table
	noMethods                                              = table{}
)

// builtinsOf is get_builtins: functions and keyword arguments have none.
func builtinsOf(v value) table {
	switch x := v.(type) {
	case *intVal:
		return intMethods
	case *floatVal:
		return floatMethods
	case *strVal:
		return stringMethods
	case *boolVal:
		return boolMethods
	case *arrVal:
		return arrayMethods
	case *objVal:
		if x.noBuiltins {
			return noMethods
		}
		return objectMethods
	case *noneVal:
		return noneMethods
	case *undefVal:
		return undefMethods
	}
	typeError(v, "has no builtins")
	return nil
}

func notImpl(msg string) *builtin {
	return fn(func(*args) value {
		throwNotImpl(msg)
		return nil
	})
}

// empty is empty_value_fn<T>.
func empty(mk func() value) *builtin { return fn(func(*args) value { return mk() }) }

func init() {
	intMethods = table{
		"default": fn(defaultValue),
		"abs": fn(func(a *args) value {
			a.ensure1(vInt)
			v := asInt(a.list[0])
			if v < 0 {
				v = -v
			}
			return mkInt(v)
		}),
		"int": fn(func(a *args) value {
			a.ensure1(vInt)
			return mkInt(asInt(a.list[0]))
		}),
		"float": fn(func(a *args) value {
			a.ensure1(vInt)
			return mkFloat(float64(asInt(a.list[0])))
		}),
		"safe":   fn(tojson),
		"string": fn(tojson),
		"tojson": fn(tojson),
	}
	floatMethods = table{
		"default": fn(defaultValue),
		"abs": fn(func(a *args) value {
			a.ensure1(vFloat)
			v := asFloat(a.list[0])
			if v < 0 {
				v = -v
			}
			return mkFloat(v)
		}),
		"int": fn(func(a *args) value {
			a.ensure1(vFloat)
			return mkInt(cvtInt(asFloat(a.list[0])))
		}),
		"float": fn(func(a *args) value {
			a.ensure1(vFloat)
			return mkFloat(asFloat(a.list[0]))
		}),
		"safe":   fn(tojson),
		"string": fn(tojson),
		"tojson": fn(tojson),
	}
	boolString := fn(func(a *args) value {
		a.ensure1(vBool)
		if asBool(a.list[0]) {
			return mkStr("True")
		}
		return mkStr("False")
	})
	boolMethods = table{
		"default": fn(defaultValue),
		"int": fn(func(a *args) value {
			a.ensure1(vBool)
			if asBool(a.list[0]) {
				return mkInt(1)
			}
			return mkInt(0)
		}),
		"float": fn(func(a *args) value {
			a.ensure1(vBool)
			if asBool(a.list[0]) {
				return mkFloat(1)
			}
			return mkFloat(0)
		}),
		"safe":   boolString,
		"string": boolString,
		"tojson": fn(tojson),
	}
	noneString := fn(func(*args) value { return mkStr("None") })
	emptyArr := empty(func() value { return mkArr(nil) })
	noneMethods = table{
		"default":    fn(defaultValue),
		"tojson":     fn(tojson),
		"string":     noneString,
		"safe":       noneString,
		"items":      emptyArr,
		"map":        emptyArr,
		"reject":     emptyArr,
		"rejectattr": emptyArr,
		"select":     emptyArr,
		"selectattr": emptyArr,
		"unique":     emptyArr,
	}
	emptyStr := empty(func() value { return &strVal{} })
	emptyInt := empty(func() value { return mkInt(0) })
	emptyUndef := empty(func() value { return mkUndef("") })
	undefMethods = table{
		"default":    fn(defaultValue),
		"capitalize": emptyStr,
		"first":      emptyUndef,
		"items":      emptyArr,
		"join":       emptyStr,
		"last":       emptyUndef,
		"length":     emptyInt,
		"list":       emptyArr,
		"lower":      emptyStr,
		"map":        emptyArr,
		"max":        emptyUndef,
		"min":        emptyUndef,
		"reject":     emptyArr,
		"rejectattr": emptyArr,
		"replace":    emptyStr,
		"reverse":    emptyArr,
		"safe":       emptyStr,
		"select":     emptyArr,
		"selectattr": emptyArr,
		"sort":       emptyArr,
		"string":     emptyStr,
		"strip":      emptyStr,
		"sum":        emptyInt,
		"title":      emptyStr,
		"truncate":   emptyStr,
		"unique":     emptyArr,
		"upper":      emptyStr,
		"wordcount":  emptyInt,
	}
	stringMethods = stringTable()
	arrayMethods = arrayTable()
	objectMethods = objectTable()
}

func strOf(a *args, i int) jstr { return asString(a.r, a.list[i]) }

func stripMethod(left, right, checked bool, what string) *builtin {
	return fn(func(a *args) value {
		if checked {
			a.ensure1(vString)
		} else if !isStr(a.pos(0)) {
			throw(what + "() first argument must be a string")
		}
		chars := a.kwargOrPos("chars", 1)
		if isUndef(chars) {
			return mkJStr(strOf(a, 0).strip(left, right, nil))
		}
		cs := asString(a.r, chars).str()
		return mkJStr(strOf(a, 0).strip(left, right, &cs))
	})
}

func stringTable() table {
	oneToOne := func(op func(jstr) jstr) *builtin {
		return fn(func(a *args) value {
			a.ensure1(vString)
			return mkJStr(op(strOf(a, 0)))
		})
	}
	return table{
		// the pin's table names default twice; a std::map keeps the first
		"default":    fn(defaultValue),
		"upper":      oneToOne(jstr.upper),
		"lower":      oneToOne(jstr.lower),
		"strip":      stripMethod(true, true, false, "strip"),
		"rstrip":     stripMethod(false, true, true, "rstrip"),
		"lstrip":     stripMethod(true, false, true, "lstrip"),
		"title":      oneToOne(jstr.title),
		"capitalize": oneToOne(jstr.capitalize),
		"length": fn(func(a *args) value {
			a.ensure1(vString)
			return mkInt(int64(strOf(a, 0).length()))
		}),
		"startswith": fn(func(a *args) value {
			a.ensure([]vtype{vString, vString})
			return mkBool(strings.HasPrefix(strOf(a, 0).str(), strOf(a, 1).str()))
		}),
		"endswith": fn(func(a *args) value {
			a.ensure([]vtype{vString, vString})
			return mkBool(strings.HasSuffix(strOf(a, 0).str(), strOf(a, 1).str()))
		}),
		"split":   fn(func(a *args) value { return strSplit(a, false) }),
		"rsplit":  fn(func(a *args) value { return strSplit(a, true) }),
		"replace": fn(strReplace),
		"format":  fn(strFormat),
		"int":     fn(strInt),
		"float": fn(func(a *args) value {
			a.ensure1(vString)
			def := a.kwargOrPos("default", 1)
			if f, ok := stodC(strOf(a, 0).str()); ok {
				return mkFloat(f)
			}
			if isUndef(def) {
				return mkFloat(0)
			}
			return mkFloat(asFloat(def))
		}),
		"string": fn(func(a *args) value {
			a.ensure1(vString)
			return mkJStr(strOf(a, 0))
		}),
		"slice": fn(func(a *args) value {
			a.ensureCount(1, 4)
			a.ensure([]vtype{vString, vInt, vInt, vInt}, true, true, false, false)
			start, stop, step := sliceArgs(a)
			in := strOf(a, 0)
			s := in.str()
			b := sliceIndexes(int64(len(s)), start, stop, step, func(i int64, out []byte) []byte { return append(out, s[i]) })
			return mkJStr(plain(string(b)).markInputFrom(in))
		}),
		"safe": fn(func(a *args) value {
			a.ensure1(vString)
			return a.list[0]
		}),
		"tojson": fn(tojson),
		"indent": fn(strIndent),
		"join":   notImpl("String join builtin not implemented"),
	}
}

// sliceArgs are a slice's start, stop and step from its arguments (the
// value first), with the pin's checks.
func sliceArgs(a *args) (start, stop, step int64) {
	arg0 := a.list[1]
	arg1 := a.posOr(2, mkUndef(""))
	arg2 := a.posOr(3, mkUndef(""))
	switch a.count() {
	case 1:
		start, stop, step = 0, asInt(arg0), 1
	case 2:
		start, stop, step = asInt(arg0), asInt(arg1), 1
	default:
		start, stop, step = asInt(arg0), asInt(arg1), asInt(arg2)
	}
	if step == 0 {
		throw("slice step cannot be zero")
	}
	return
}

// sliceIndexes is the pin's Python-like slice over n elements, calling
// add for each index taken. The loop is the pin's, wrapping as x86 does
// where a huge step overflows the index.
func sliceIndexes[T any](n, start, stop, step int64, add func(int64, T) T) T {
	var out T
	dir := int64(1)
	if step < 0 {
		dir = -1
	}
	if dir >= 0 {
		if start < 0 {
			start = max(n+start, 0)
		} else {
			start = min(start, n)
		}
		if stop < 0 {
			stop = max(n+stop, 0)
		} else {
			stop = min(stop, n)
		}
	} else {
		if start < 0 {
			start = max(n+start, 0)
		} else {
			start = min(start, n-1)
		}
		if stop < -1 {
			stop = max(n+stop, -1)
		} else {
			stop = min(stop, n-1)
		}
	}
	iters := 0
	for i := start; dir*i < dir*stop; i += step {
		if i >= 0 && i < n {
			out = add(i, out)
		}
		iters++
		if iters > maxSteps {
			throw("slice ran more than " + strconv.Itoa(maxSteps) + " steps")
		}
	}
	return out
}

func strSplit(a *args, fromRight bool) value {
	a.ensureCount(1, 3)
	what := "split"
	if fromRight {
		what = "rsplit"
	}
	in, ok := a.pos(0).(*strVal)
	if !ok {
		throw(what + "() first argument must be a string")
	}
	s := in.s.str()
	delim := " "
	if a.count() > 1 {
		delim = strOf(a, 1).str()
	}
	if delim == "" {
		throw("empty separator")
	}
	maxsplit := int64(-1)
	if a.count() > 2 {
		maxsplit = asInt(a.list[2])
	}
	var out []value
	for maxsplit != 0 {
		var i int
		if fromRight {
			i = strings.LastIndex(s, delim)
		} else {
			i = strings.Index(s, delim)
		}
		if i < 0 {
			break
		}
		if fromRight {
			out = append(out, mkStr(s[i+len(delim):]))
			s = s[:i]
		} else {
			out = append(out, mkStr(s[:i]))
			s = s[i+len(delim):]
		}
		maxsplit--
	}
	out = append(out, mkJStr(plain(s).markInputFrom(in.s)))
	if fromRight {
		for i, j := 0, len(out)-1; i < j; i, j = i+1, j-1 {
			out[i], out[j] = out[j], out[i]
		}
	}
	return mkArr(out)
}

func strReplace(a *args) value {
	a.ensure([]vtype{vString, vString, vString, vInt}, true, true, true, false)
	s, old, repl := strOf(a, 0).str(), strOf(a, 1).str(), strOf(a, 2).str()
	count := int64(-1)
	if a.count() > 3 {
		count = asInt(a.list[3])
	}
	if count > 0 {
		throwNotImpl("String replace with count argument not implemented")
	}
	if old != repl {
		if old == "" {
			if int64(len(repl))*int64(len(s)+1)+int64(len(s)) > maxStringSize {
				throw("string longer than " + strconv.Itoa(maxStringSize) + " bytes")
			}
			var b strings.Builder
			b.WriteString(repl)
			for i := 0; i < len(s); i++ {
				b.WriteByte(s[i])
				b.WriteString(repl)
			}
			s = b.String()
		} else {
			n := strings.Count(s, old)
			if int64(len(s))+int64(n)*(int64(len(repl))-int64(len(old))) > maxStringSize {
				throw("string longer than " + strconv.Itoa(maxStringSize) + " bytes")
			}
			s = strings.ReplaceAll(s, old, repl)
		}
	}
	return mkJStr(plain(s).markInputFrom(strOf(a, 0)))
}

func strFormat(a *args) value {
	in, ok := a.pos(0).(*strVal)
	if !ok {
		throw("format() first argument must be a string")
	}
	fmtIsInput := in.s.allInput()
	s := in.s.str()
	var out []Part
	var lit []byte
	flush := func() {
		if len(lit) > 0 {
			out = append(out, Part{Text: string(lit), Input: fmtIsInput})
			lit = lit[:0]
		}
	}
	idx := 1
	for i := 0; i < len(s); i++ {
		if s[i] != '{' {
			lit = append(lit, s[i])
			continue
		}
		if i+1 >= len(s) || s[i+1] != '}' {
			throwNotImpl("format() only supports simple '{}' placeholders")
		}
		i++
		flush()
		arg := asString(a.r, a.pos(idx))
		idx++
		out = append(out, arg.parts...)
	}
	flush()
	r := jstr{parts: out}
	checkSize(r)
	return mkJStr(r)
}

func strInt(a *args) value {
	in := a.pos(0)
	def := a.kwargOrPos("default", 1)
	baseV := a.kwargOrPos("base", 2)
	base := 10
	if !isUndef(baseV) {
		base = int(int32(asInt(baseV)))
	}
	if base != 0 && (base < 2 || base > 36) {
		throw("int() base must be 0 or between 2 and 36")
	}
	s, ok := in.(*strVal)
	if !ok {
		throw("int() first argument must be a string")
	}
	if v, ok := stoi(s.s.str(), base); ok {
		return mkInt(v)
	}
	if isUndef(def) {
		return mkInt(0)
	}
	return mkInt(asInt(def))
}

// strIndent is the indent filter, line by line as std::getline reads them.
func strIndent(a *args) value {
	a.ensureCount(1, 4)
	in := a.pos(0)
	width := a.kwargOrPos("width", 1)
	first := asBool(a.kwargOrPos("first", 2))
	blank := asBool(a.kwargOrPos("blank", 3))
	sv, ok := in.(*strVal)
	if !ok {
		throw("indent() first argument must be a string")
	}
	var ind string
	switch w := width.(type) {
	case *intVal:
		if w.i < 0 {
			throw("basic_string::_M_replace_aux")
		}
		if w.i > maxStringSize {
			throw("string longer than " + strconv.Itoa(maxStringSize) + " bytes")
		}
		ind = strings.Repeat(" ", int(w.i))
	case *strVal:
		ind = w.s.str()
	default:
		ind = "    "
	}
	input := sv.s.str()
	lines := strings.Split(input, "\n")
	if strings.HasSuffix(input, "\n") || input == "" {
		lines = lines[:len(lines)-1]
	}
	var b strings.Builder
	size := int64(len(input))
	for _, line := range lines {
		if b.Len() > 0 {
			b.WriteByte('\n')
		}
		add := first
		if b.Len() > 0 {
			add = line != "" || blank
		}
		if add {
			size += int64(len(ind))
			if size > maxStringSize {
				throw("string longer than " + strconv.Itoa(maxStringSize) + " bytes")
			}
			b.WriteString(ind)
		}
		b.WriteString(line)
	}
	if input != "" && input[len(input)-1] == '\n' {
		b.WriteByte('\n')
		if blank {
			b.WriteString(ind)
		}
	}
	return mkJStr(plain(b.String()).markInputFrom(sv.s))
}

func arrayTable() table {
	return table{
		"default": fn(defaultValue),
		"list": fn(func(a *args) value {
			a.ensure1(vArray)
			return mkArr(append([]value(nil), asArray(a.list[0])...))
		}),
		"first": fn(func(a *args) value {
			a.ensure1(vArray)
			arr := asArray(a.list[0])
			if len(arr) == 0 {
				return mkUndef("")
			}
			return arr[0]
		}),
		"last": fn(func(a *args) value {
			a.ensure1(vArray)
			arr := asArray(a.list[0])
			if len(arr) == 0 {
				return mkUndef("")
			}
			return arr[len(arr)-1]
		}),
		"length": fn(func(a *args) value {
			a.ensure1(vArray)
			return mkInt(int64(len(asArray(a.list[0]))))
		}),
		"slice": fn(func(a *args) value {
			a.ensureCount(1, 4)
			a.ensure([]vtype{vArray, vInt, vInt, vInt}, true, true, false, false)
			start, stop, step := sliceArgs(a)
			arr := asArray(a.list[0])
			out := sliceIndexes(int64(len(arr)), start, stop, step, func(i int64, out []value) []value { return append(out, arr[i]) })
			return sameKind(a.list[0], out)
		}),
		"selectattr": fn(selectattr(false)),
		"select":     fn(selectattr(false)),
		"rejectattr": fn(selectattr(true)),
		"reject":     fn(selectattr(true)),
		"join":       fn(arrJoin),
		"string": fn(func(a *args) value {
			a.ensure1(vArray)
			if a.r.stats {
				a.r.markDeep(a.list[0])
			}
			return mkJStr(asString(a.r, a.list[0]))
		}),
		"tojson": fn(tojson),
		"map":    fn(arrMap),
		"append": fn(func(a *args) value {
			a.ensureCount(2, 999)
			arr, ok := a.list[0].(*arrVal)
			if !ok {
				throw("append: first argument must be an array")
			}
			if arr.tuple {
				throw("Attempting to modify immutable type")
			}
			arr.items = append(arr.items, a.list[1])
			return a.list[0]
		}),
		"pop": fn(func(a *args) value {
			a.ensureCount(1, 2)
			a.ensure([]vtype{vArray, vInt}, true, false)
			index := int64(-1)
			if a.count() == 2 {
				index = asInt(a.list[1])
			}
			arr := a.list[0].(*arrVal)
			if arr.tuple {
				throw("Attempting to modify immutable type")
			}
			n := int64(len(arr.items))
			if index < 0 {
				index += n
			}
			if index < 0 || index >= n {
				throw("Index " + strconv.FormatInt(index, 10) + " out of bounds for array of size " + strconv.Itoa(len(arr.items)))
			}
			v := arr.items[index]
			arr.items = append(arr.items[:index:index], arr.items[index+1:]...)
			return v
		}),
		"sort": fn(arrSort),
		"reverse": fn(func(a *args) value {
			a.ensure1(vArray)
			arr := asArray(a.list[0])
			out := make([]value, len(arr))
			for i, v := range arr {
				out[len(arr)-1-i] = v
			}
			return sameKind(a.list[0], out)
		}),
		"min":    fn(func(a *args) value { return arrMinMax(a, "min", cmpLt) }),
		"max":    fn(func(a *args) value { return arrMinMax(a, "max", cmpGt) }),
		"unique": notImpl("Array unique builtin not implemented"),
	}
}

// sameKind is a tuple of items when v is a tuple, else an array.
func sameKind(v value, items []value) value {
	if isTuple(v) {
		return mkTuple(items)
	}
	return mkArr(items)
}

func arrJoin(a *args) value {
	a.ensureCount(1, 3)
	arrV, ok := a.pos(0).(*arrVal)
	if !ok {
		throw("join() first argument must be an array")
	}
	delimV := a.kwargOrPos("d", 1)
	attribute := a.kwargOrPos("attribute", 2)
	attrInt, attrIsInt := attribute.(*intVal)
	if !isUndef(attribute) && !isStr(attribute) && !attrIsInt {
		throw("join() attribute must be string or integer")
	}
	delim := ""
	if !isUndef(delimV) {
		delim = asString(a.r, delimV).str()
	}
	var b strings.Builder
	arr := arrV.items
	for i := 0; i < len(arr); i++ {
		v := arr[i]
		if !isUndef(attribute) {
			if inner, ok := v.(*arrVal); ok && attrIsInt {
				v = arrAt(inner, attrInt.i)
			} else if o, ok := v.(*objVal); ok && !attrIsInt {
				v = a.r.objAt(o, attribute)
			}
		}
		if !isStr(v) && !isInt(v) && !isFloat(v) {
			throw("join() can only join arrays of strings or numerics")
		}
		b.WriteString(asString(a.r, v).str())
		if i < len(arr)-1 {
			b.WriteString(delim)
		}
		if b.Len() > maxStringSize {
			throw("string longer than " + strconv.Itoa(maxStringSize) + " bytes")
		}
	}
	return mkStr(b.String())
}

func arrMap(a *args) value {
	a.ensureCount(2, 999)
	arr, ok := a.pos(0).(*arrVal)
	if !ok {
		throw("map: first argument must be an array")
	}
	if !isKwarg(a.list[1]) {
		throwNotImpl("map: filter-mapping not implemented")
	}
	attribute := a.kwargOrPos("attribute", 1)
	attrInt, attrIsInt := attribute.(*intVal)
	if !isStr(attribute) && !attrIsInt {
		throw("map: attribute must be string or integer")
	}
	def := a.kwarg("default", mkUndef(""))
	items := append([]value(nil), arr.items...)
	out := make([]value, 0, len(items))
	for _, item := range items {
		var v value
		if attrIsInt {
			if inner, ok := item.(*arrVal); ok {
				v = arrGet(inner, attrInt.i, def)
			} else {
				v = def
			}
		} else if o, ok := item.(*objVal); ok {
			v = a.r.objGet(o, attribute, def)
		} else {
			v = def
		}
		out = append(out, v)
	}
	return sameKind(arr, out)
}

func arrSort(a *args) value {
	a.ensureCount(1, 4)
	arrV, ok := a.pos(0).(*arrVal)
	if !ok {
		throw("sort: first argument must be an array")
	}
	reverse := a.kwargOrPos("reverse", 1)
	_ = a.kwargOrPos("case_sensitive", 2)
	attribute := a.kwargOrPos("attribute", 3)
	rev := asBool(reverse)
	attrInt, attrIsInt := attribute.(*intVal)
	op := cmpLt
	if rev {
		op = cmpGt
	}
	items := append([]value(nil), arrV.items...)
	less := func(x, y value) bool {
		vx, vy := x, y
		if !isUndef(attribute) {
			ax, okx := x.(*arrVal)
			ay, oky := y.(*arrVal)
			ox, okox := x.(*objVal)
			oy, okoy := y.(*objVal)
			switch {
			case attrIsInt && okx && oky:
				vx, vy = arrAt(ax, attrInt.i), arrAt(ay, attrInt.i)
			case !attrIsInt && okox && okoy:
				vx, vy = a.r.objAt(ox, attribute), a.r.objAt(oy, attribute)
			default:
				throw("sort: unsupported object attribute comparison between " + typeName(x) + " and " + typeName(y))
			}
		}
		return a.r.compare(vx, vy, op)
	}
	stdSort(items, less)
	return sameKind(arrV, items)
}

func arrMinMax(a *args, what string, op cmpOp) value {
	a.ensureCount(1, 4)
	a.ensure1(vArray)
	_ = a.kwargOrPos("case_sensitive", 1)
	if !isUndef(a.kwargOrPos("attribute", 2)) {
		throwNotImpl(what + ": attribute not implemented")
	}
	arr := asArray(a.list[0])
	if len(arr) == 0 {
		return mkUndef("")
	}
	res := arr[0]
	for _, v := range arr[1:] {
		if a.r.compare(v, res, op) {
			res = v
		}
	}
	return res
}

func objectTable() table {
	return table{
		"get": fn(func(a *args) value {
			a.ensureCount(2, 3)
			o, ok := a.pos(0).(*objVal)
			if !ok {
				throw("get: first argument must be an object")
			}
			if !isStr(a.pos(1)) {
				throw("get: second argument must be a string (key)")
			}
			def := mkNone()
			if a.count() == 3 {
				def = a.list[2]
			}
			return a.r.objGet(o, a.list[1], def)
		}),
		"keys": fn(func(a *args) value {
			a.ensure1(vObject)
			return mkArr(append([]value(nil), a.list[0].(*objVal).keys...))
		}),
		"values": fn(func(a *args) value {
			a.ensure1(vObject)
			return mkArr(append([]value(nil), a.list[0].(*objVal).vals...))
		}),
		"items": fn(func(a *args) value {
			a.ensure1(vObject)
			o := a.list[0].(*objVal)
			out := make([]value, len(o.keys))
			for i := range o.keys {
				out[i] = mkTuple([]value{o.keys[i], o.vals[i]})
			}
			return mkArr(out)
		}),
		// named twice in the pin's table: the first, tojson itself, stays
		"tojson": fn(tojson),
		"string": fn(func(a *args) value {
			a.ensure1(vObject)
			if a.r.stats {
				a.r.markDeep(a.list[0])
			}
			return mkJStr(asString(a.r, a.list[0]))
		}),
		"length": fn(func(a *args) value {
			a.ensure1(vObject)
			return mkInt(int64(len(a.list[0].(*objVal).keys)))
		}),
		"dictsort": fn(objDictsort),
		"join":     notImpl("object join not implemented"),
	}
}

func objDictsort(a *args) value {
	in := a.pos(0)
	_ = a.kwargOrPos("case_sensitive", 1)
	by := a.kwargOrPos("by", 2)
	rev := asBool(a.kwargOrPos("reverse", 3))
	byValue := false
	if s, ok := by.(*strVal); ok && s.s.str() == "value" {
		byValue = true
	}
	op := cmpLt
	if rev {
		op = cmpGt
	}
	src, ok := in.(*objVal)
	if !ok {
		typeError(in, "is not an object value")
	}
	res := objCopy(src)
	idx := make([]int, len(res.keys))
	for i := range idx {
		idx[i] = i
	}
	keys, vals := res.keys, res.vals
	stdSort(idx, func(x, y int) bool {
		if byValue {
			return a.r.compare(vals[x], vals[y], op)
		}
		return a.r.compare(keys[x], keys[y], op)
	})
	res.keys = make([]value, len(idx))
	res.vals = make([]value, len(idx))
	for i, j := range idx {
		res.keys[i], res.vals[i] = keys[j], vals[j]
	}
	if res.index != nil {
		res.reindex()
	}
	return res
}
