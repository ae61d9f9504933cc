// Port of llama.cpp common/jinja/runtime.cpp (v0.5.0): executing a parsed
// template. The pin raises errors as C++ exceptions; here they are panics
// of *exception, caught where the pin catches them and at Render, so that
// no panic leaves the package.

package jinja

import (
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"
)

type excKind uint8

const (
	excError    excKind = iota // a std::exception that statement::execute wraps
	excRethrown                // already wrapped with its place (rethrown_exception)
	excNotImpl                 // not_implemented_exception: passes unwrapped
	excBreak                   // break_statement::signal
	excContinue                // continue_statement::signal
)

type exception struct {
	kind excKind
	msg  string
	pos  int // the innermost statement's position, -1 when unknown
}

func throw(msg string) { panic(&exception{msg: msg, pos: -1}) }

func throwNotImpl(msg string) {
	panic(&exception{kind: excNotImpl, msg: "NotImplemented: " + msg, pos: -1})
}

// Limits the pin does not have: where it would exhaust its stack or its
// memory (or run for hours), a render stops with an error.
const (
	maxCallDepth  = 500      // nested macro and caller() calls
	maxValueDepth = 500      // nested arrays and objects walked
	maxStringSize = 64 << 20 // bytes (and parts) in one string
	maxRangeLen   = 1 << 20  // elements of one range()
)

// maxSteps bounds the statements executed and loop iterations run in one
// render (a variable for the tests).
var maxSteps = 1 << 24

// scope is jinja::context's variables. The pin copies the parent's
// variables into every new scope; a child that looks them up in its parent
// sees the same, as no scope's bindings change while a child of it lives
// (except a caller block's, which snapshot takes).
type scope struct {
	parent *scope
	vars   map[string]value
}

func (s *scope) child() *scope { return &scope{parent: s} }

func (s *scope) lookup(name string) value {
	for c := s; c != nil; c = c.parent {
		if v, ok := c.vars[name]; ok {
			return v
		}
	}
	return nil
}

func (s *scope) set(name string, v value) {
	if s.vars == nil {
		s.vars = make(map[string]value, 4)
	}
	s.vars[name] = v
}

func (s *scope) snapshot() *scope {
	flat := &scope{vars: map[string]value{}}
	var chain []*scope
	for c := s; c != nil; c = c.parent {
		chain = append(chain, c)
	}
	for i := len(chain) - 1; i >= 0; i-- {
		for k, v := range chain[i].vars {
			flat.vars[k] = v
		}
	}
	return flat
}

func newRootScope() *scope {
	return &scope{vars: map[string]value{
		"true": mkBool(true), "True": mkBool(true),
		"false": mkBool(false), "False": mkBool(false),
		"none": mkNone(), "None": mkNone(),
	}}
}

// renderer is one render's state (the pin keeps it in the context).
type renderer struct {
	src        string    // the source errors show
	stats      bool      // is_get_stats: mark what the template uses
	now        time.Time // current_time
	calls      int
	valueDepth int
	steps      int
}

func (r *renderer) enterValue() {
	r.valueDepth++
	if r.valueDepth > maxValueDepth {
		r.valueDepth = 0
		throw("value nested deeper than " + strconv.Itoa(maxValueDepth) + " levels (a cycle?)")
	}
}

func (r *renderer) leaveValue() { r.valueDepth-- }

func (r *renderer) mark(v value) {
	if !r.stats {
		return
	}
	b := v.b()
	if b.shared {
		return
	}
	if b.st == nil {
		b.st = &stats{}
	}
	b.st.used = true
}

func (r *renderer) markOp(v value, op string) {
	if !r.stats {
		return
	}
	b := v.b()
	if b.shared {
		return
	}
	if b.st == nil {
		b.st = &stats{}
	}
	if !b.st.has(op) {
		b.st.ops = append(b.st.ops, op)
	}
}

// markDeep is mark_used(val, true).
func (r *renderer) markDeep(v value) {
	r.mark(v)
	switch x := v.(type) {
	case *arrVal:
		r.enterValue()
		defer r.leaveValue()
		for _, e := range x.items {
			r.markDeep(e)
		}
	case *objVal:
		r.enterValue()
		defer r.leaveValue()
		for i := range x.keys {
			r.markDeep(x.keys[i])
			r.markDeep(x.vals[i])
		}
	}
}

// exec is statement::execute: the first error below a statement is
// wrapped once with that statement's place in the source.
func (r *renderer) exec(n node, c *scope) value {
	defer r.rethrow(n)
	r.step()
	return n.eval(r, c)
}

func (r *renderer) step() {
	r.steps++
	if r.steps > maxSteps {
		throw("template ran more than " + strconv.Itoa(maxSteps) + " steps")
	}
}

func (r *renderer) rethrow(n node) {
	x := recover()
	if x == nil {
		return
	}
	panic(r.wrap(n, x))
}

func (r *renderer) wrap(n node, x any) *exception {
	e, ok := x.(*exception)
	if !ok {
		// a fault of this port, not of the template: still an error
		e = &exception{msg: fmt.Sprint("internal error: ", x)}
	}
	if e.kind != excError {
		return e
	}
	pos := n.position()
	var msg string
	if r.src == "" {
		msg = "\nError executing " + n.typeName() + " at position " + strconv.Itoa(pos) + ": " + e.msg
	} else {
		msg = "\n------------\nWhile executing " + n.typeName() + " at " + lineColText(r.src, pos) +
			" in source:\n" + peakSource(r.src, pos) + "\nError: " + e.msg
	}
	return &exception{kind: excRethrown, msg: msg, pos: pos}
}

// gather is gather_string_parts_recursive; size counts what out holds.
func (r *renderer) gather(v value, out []Part, size *int) []Part {
	switch x := v.(type) {
	case *strVal:
		if *size += strSize(x.s); *size > maxStringSize {
			throw("string longer than " + strconv.Itoa(maxStringSize) + " bytes")
		}
		return append(out, x.s.parts...)
	case *intVal, *floatVal, *boolVal:
		return append(out, asString(r, v).parts...)
	case *arrVal:
		r.enterValue()
		defer r.leaveValue()
		for _, e := range x.items {
			out = r.gather(e, out, size)
		}
	}
	return out
}

func (r *renderer) gatherAll(vals []value) jstr {
	var parts []Part
	size := 0
	for _, v := range vals {
		parts = r.gather(v, parts, &size)
	}
	return jstr{parts: parts}
}

// execStatements is exec_statements: the statements' output as a string.
func (r *renderer) execStatements(stmts []node, c *scope) *strVal {
	vals := make([]value, 0, len(stmts))
	for _, s := range stmts {
		vals = append(vals, r.exec(s, c))
	}
	return mkJStr(r.gatherAll(vals))
}

// mergeParts joins neighbouring parts of the same kind (gather_string_parts).
func mergeParts(p []Part) []Part {
	var out []Part
	for i := 0; i < len(p); {
		j := i + 1
		n := len(p[i].Text)
		for j < len(p) && p[j].Input == p[i].Input {
			n += len(p[j].Text)
			j++
		}
		if j == i+1 {
			out = append(out, p[i])
		} else {
			var b strings.Builder
			b.Grow(n)
			for k := i; k < j; k++ {
				b.WriteString(p[k].Text)
			}
			out = append(out, Part{Text: b.String(), Input: p[i].Input})
		}
		i = j
	}
	return out
}

func (n *program) eval(*renderer, *scope) value {
	throw("Cannot execute program directly, use jinja::runtime instead")
	return nil
}

func (n *commentStmt) eval(*renderer, *scope) value { return mkUndef("") }
func (n *noopStmt) eval(*renderer, *scope) value    { return mkUndef("") }
func (n *blankExpr) eval(*renderer, *scope) value   { return mkUndef("") }

func (n *breakStmt) eval(*renderer, *scope) value {
	panic(&exception{kind: excBreak, msg: "Break statement executed", pos: n.pos})
}

func (n *continueStmt) eval(*renderer, *scope) value {
	panic(&exception{kind: excContinue, msg: "Continue statement executed", pos: n.pos})
}

func (n *intLit) eval(*renderer, *scope) value   { return mkInt(n.v) }
func (n *floatLit) eval(*renderer, *scope) value { return mkFloat(n.v) }
func (n *strLit) eval(*renderer, *scope) value   { return mkStr(n.v) }

func (n *arrayLit) eval(r *renderer, c *scope) value {
	items := make([]value, 0, len(n.items))
	for _, it := range n.items {
		items = append(items, r.exec(it, c))
	}
	return mkArr(items)
}

func (n *tupleLit) eval(r *renderer, c *scope) value {
	items := make([]value, 0, len(n.items))
	for _, it := range n.items {
		items = append(items, r.exec(it, c))
	}
	return mkTuple(items)
}

func (n *objectLit) eval(r *renderer, c *scope) value {
	o := mkObj()
	for i := range n.keys {
		k := r.exec(n.keys[i], c)
		v := r.exec(n.vals[i], c)
		r.objInsert(o, k, v)
	}
	return o
}

func (n *sliceExpr) eval(*renderer, *scope) value {
	throw("must be handled by MemberExpression")
	return nil
}

func (n *spreadExpr) eval(*renderer, *scope) value {
	throw("cannot exec SpreadExpression")
	return nil
}

func (n *identNode) eval(r *renderer, c *scope) value {
	v := c.lookup(n.name)
	if v != nil && !isUndef(v) {
		r.mark(v)
		return v
	}
	if fn, ok := globalBuiltins[n.name]; ok {
		return &funcVal{name: n.name, fn: fn}
	}
	return mkUndef(n.name)
}

func (n *ternaryExpr) eval(r *renderer, c *scope) value {
	if asBool(r.exec(n.cond, c)) {
		return r.exec(n.yes, c)
	}
	return r.exec(n.no, c)
}

func (n *selectExpr) eval(r *renderer, c *scope) value {
	// the pin runs the children's execute_impl here, not execute: their
	// errors are wrapped as this expression's
	if !asBool(n.test.eval(r, c)) {
		return mkUndef("")
	}
	return n.lhs.eval(r, c)
}

func (n *kwargExpr) eval(r *renderer, c *scope) value {
	id, ok := n.key.(*identNode)
	if !ok {
		throw("Keyword argument key must be identifiers")
	}
	return &kwargVal{key: id.name, val: r.exec(n.val, c)}
}

func (n *unaryExpr) eval(r *renderer, c *scope) value {
	v := r.exec(n.arg, c)
	switch n.op {
	case "not":
		return mkBool(!asBool(v))
	case "-":
		switch x := v.(type) {
		case *intVal:
			return mkInt(-x.i)
		case *floatVal:
			return mkFloat(-x.f)
		}
		throw("Unary - operator requires numeric operand")
	case "+":
		if isNumber(v) {
			return v
		}
		throw("Unary + operator requires numeric operand")
	}
	throw("Unknown unary operator '" + n.op + "'")
	return nil
}

func (n *ifStmt) eval(r *renderer, c *scope) value {
	test := r.exec(n.test, c)
	body := n.alternate
	if asBool(test) {
		body = n.body
	}
	vals := make([]value, 0, len(body))
	for _, s := range body {
		vals = append(vals, r.exec(s, c))
	}
	return mkJStr(r.gatherAll(vals))
}

func (r *renderer) testIsIn(c *scope, needle, haystack value) bool {
	a := &args{r: r, ctx: c, list: []value{needle, haystack}}
	return asBool(globalBuiltins["test_is_in"].call(a))
}

func (n *binaryExpr) eval(r *renderer, c *scope) value {
	left := r.exec(n.left, c)
	switch n.op {
	case "and":
		if asBool(left) {
			return r.exec(n.right, c)
		}
		return left
	case "or":
		if asBool(left) {
			return left
		}
		return r.exec(n.right, c)
	}
	right := r.exec(n.right, c)
	switch n.op {
	case "==":
		return mkBool(r.equivalent(left, right))
	case "!=":
		return mkBool(!r.equivalent(left, right))
	}
	if isUndef(left) || isUndef(right) || isNone(left) || isNone(right) {
		return r.nullOp(c, n.op, left, right)
	}
	if isNumber(left) && isNumber(right) {
		if v := numericOp(n.op, left, right); v != nil {
			return v
		}
	}
	return r.otherOp(c, n.op, left, right)
}

// nullOp is a binary operator with an undefined or none side: membership,
// concatenation with a string (as an empty string), else an error.
func (r *renderer) nullOp(c *scope, op string, left, right value) value {
	nullConcat := func() (value, bool) {
		lnull := isNone(left) || isUndef(left)
		rnull := isNone(right) || isUndef(right)
		if (lnull && isStr(right)) || (rnull && isStr(left)) {
			var ls, rs jstr
			if !lnull {
				ls = asString(r, left)
			}
			if !rnull {
				rs = asString(r, right)
			}
			return mkJStr(concatChecked(ls, rs)), true
		}
		return nil, false
	}
	if isUndef(left) || isUndef(right) {
		if isUndef(right) && (op == "in" || op == "not in") {
			return mkBool(op == "not in")
		}
		if op == "+" || op == "~" {
			if v, ok := nullConcat(); ok {
				return v
			}
		}
		throw("Cannot perform operation " + op + " on undefined values")
	}
	if !isNone(right) && (op == "in" || op == "not in") {
		member := r.testIsIn(c, left, right)
		return mkBool(member == (op == "in"))
	}
	if op == "+" || op == "~" {
		if v, ok := nullConcat(); ok {
			return v
		}
	}
	throw("Cannot perform operation on null values")
	return nil
}

// otherOp is a binary operator on arrays, strings and objects.
func (r *renderer) otherOp(c *scope, op string, left, right value) value {
	la, lok := left.(*arrVal)
	ra, rok := right.(*arrVal)
	if lok && rok {
		if op == "+" {
			items := make([]value, 0, len(la.items)+len(ra.items))
			items = append(items, la.items...)
			items = append(items, ra.items...)
			return mkArr(items)
		}
	} else if rok {
		// the pin tests membership first, whatever the operator
		member := r.testIsIn(c, left, right)
		if op == "in" || op == "not in" {
			return mkBool(member == (op == "in"))
		}
	}
	if (isStr(left) || isStr(right)) && (op == "~" || op == "+") {
		return mkJStr(concatChecked(asString(r, left), asString(r, right)))
	}
	if op == "*" && (isStr(left) && isInt(right) || isInt(left) && isStr(right)) {
		if isStr(left) {
			return mkJStr(repeat(asString(r, left), asInt(right)))
		}
		return mkJStr(repeat(asString(r, right), asInt(left)))
	}
	if isStr(left) && isStr(right) || isObj(right) {
		member := r.testIsIn(c, left, right)
		if op == "in" || op == "not in" {
			return mkBool(member == (op == "in"))
		}
	}
	throw("Unknown operator \"" + op + "\" between " + typeName(left) + " and " + typeName(right))
	return nil
}

// numericOp is the binary operators on two numbers, computed in doubles as
// the pin computes them; nil for an operator that is not numeric.
func numericOp(op string, left, right value) value {
	a, b := asFloat(left), asFloat(right)
	isF := isFloat(left) || isFloat(right)
	num := func(f float64) value {
		if isF {
			return mkFloat(f)
		}
		return mkInt(cvtInt(f))
	}
	switch op {
	case "+":
		return num(a + b)
	case "-":
		return num(a - b)
	case "*":
		return num(a * b)
	case "/":
		return mkFloat(a / b)
	case "%":
		return num(fmod(a, b))
	case "<":
		return mkBool(a < b)
	case ">":
		return mkBool(a > b)
	case ">=":
		return mkBool(a >= b)
	case "<=":
		return mkBool(a <= b)
	}
	return nil
}

// strSize is what a string holds in memory, about: its bytes and its
// parts (a part is a few words).
// fmod is glibc's: where the result is not a number, it is (x*y)/(x*y)
// as the hardware computes it (x86's default NaN is negative: "-nan").
func fmod(x, y float64) float64 {
	if y == 0 || math.IsInf(x, 0) || math.IsNaN(x) || math.IsNaN(y) {
		p := x * y
		return p / p
	}
	return math.Mod(x, y)
}

func strSize(s jstr) int { return s.length() + partCost*len(s.parts) }

const partCost = 32

func checkSize(s jstr) {
	if strSize(s) > maxStringSize {
		throw("string longer than " + strconv.Itoa(maxStringSize) + " bytes")
	}
}

// concatChecked is concat, refused before it is made when too long.
func concatChecked(a, b jstr) jstr {
	if strSize(a)+strSize(b) > maxStringSize {
		throw("string longer than " + strconv.Itoa(maxStringSize) + " bytes")
	}
	return concat(a, b)
}

// repeat is the pin's string * integer: the parts k times.
func repeat(s jstr, k int64) jstr {
	if k <= 0 {
		return jstr{}
	}
	if int64(strSize(s))*k > maxStringSize || k > maxStringSize {
		throw("string longer than " + strconv.Itoa(maxStringSize) + " bytes")
	}
	parts := make([]Part, 0, len(s.parts)*int(k))
	for range k {
		parts = append(parts, s.parts...)
	}
	return jstr{parts: parts}
}

// builtinOf is try_builtin_func: the named built-in of the value's type,
// bound to it.
func (r *renderer) builtinOf(name string, input value, undefOnMissing bool) value {
	r.mark(input)
	r.markOp(input, name)
	table := builtinsOf(input)
	if fn, ok := table[name]; ok {
		return &funcVal{name: name, fn: fn, this: input}
	}
	if undefOnMissing {
		return mkUndef(name)
	}
	throw("Unknown (built-in) filter '" + name + "' for type " + typeName(input))
	return nil
}

var filterAliases = map[string]string{"count": "length", "d": "default", "e": "escape", "trim": "strip"}

func (r *renderer) applyFilter(c *scope, filter node, input value) value {
	switch f := filter.(type) {
	case *identNode:
		id := f.name
		if a, ok := filterAliases[id]; ok {
			id = a
		}
		switch id {
		case "capitalize", "lower", "replace", "strip", "title", "upper", "wordcount":
			if !isUndef(input) && !isStr(input) {
				input = mkJStr(asString(r, input))
			}
		}
		return r.invoke(r.builtinOf(id, input, false), &args{r: r, ctx: c})
	case *callExpr:
		callee, ok := f.callee.(*identNode)
		if !ok {
			throw("Filter callee must be an identifier")
		}
		id := callee.name
		if a, ok := filterAliases[id]; ok {
			id = a
		}
		a := &args{r: r, ctx: c}
		for _, e := range f.args {
			a.list = append(a.list, r.exec(e, c))
		}
		return r.invoke(r.builtinOf(id, input, false), a)
	}
	throw("Invalid filter expression")
	return nil
}

// invoke is value_t::invoke: only functions can be called.
func (r *renderer) invoke(v value, a *args) value {
	f, ok := v.(*funcVal)
	if !ok {
		typeError(v, "is not a function value")
	}
	call := &args{r: a.r, ctx: a.ctx, name: f.name}
	if f.this != nil {
		call.list = make([]value, 0, len(a.list)+1)
		call.list = append(call.list, f.this)
	}
	call.list = append(call.list, a.list...)
	return f.fn.call(call)
}

func (n *filterExpr) eval(r *renderer, c *scope) value {
	return r.applyFilter(c, n.filter, r.exec(n.operand, c))
}

func (n *filterStmt) eval(r *renderer, c *scope) value {
	body := r.execStatements(n.body, c)
	return r.applyFilter(c, n.filter, mkJStr(r.gatherAll([]value{body})))
}

func (n *testExpr) eval(r *renderer, c *scope) value {
	input := r.exec(n.operand, c)
	a := &args{r: r, ctx: c, list: []value{input}}
	var id string
	switch t := n.test.(type) {
	case *identNode:
		id = t.name
	case *callExpr:
		callee, ok := t.callee.(*identNode)
		if !ok {
			throw("Test callee must be an identifier")
		}
		id = callee.name
		for _, e := range t.args {
			a.list = append(a.list, r.exec(e, c))
		}
	default:
		throw("Invalid test expression")
	}
	name := "test_is_" + id
	fn, ok := globalBuiltins[name]
	if !ok {
		throw("Unknown test '" + id + "'")
	}
	r.mark(input)
	r.markOp(input, name)
	res := fn.call(a)
	if n.negate {
		return mkBool(!asBool(res))
	}
	return res
}

func (n *forStmt) eval(r *renderer, c *scope) value {
	sc := c.child()
	iterExpr := n.iterable
	var test node
	if sel, ok := n.iterable.(*selectExpr); ok {
		iterExpr, test = sel.lhs, sel.test
	}
	items, isObject := r.forItems(r.exec(iterExpr, sc))
	filtered, binds := n.filter(r, sc, items, isObject, test)
	var out []value
	noIteration := true
	for i := range filtered {
		r.step()
		sc.set("loop", loopObject(filtered, i))
		binds[i](sc)
		ctl := r.runBody(n.body, sc, &out)
		if ctl == excContinue {
			continue
		}
		if ctl == excBreak {
			break
		}
		noIteration = false
	}
	if noIteration {
		for _, s := range n.otherwise {
			out = append(out, r.exec(s, c))
		}
	}
	return mkJStr(r.gatherAll(out))
}

// forItems are what a for loop goes over: an array's elements, or an
// object's (key, value) pairs; undefined is empty.
func (r *renderer) forItems(iterable value) (items []value, isObject bool) {
	r.mark(iterable)
	r.markOp(iterable, "array_access")
	if isUndef(iterable) {
		iterable = mkArr(nil)
	}
	switch x := iterable.(type) {
	case *objVal:
		items = make([]value, len(x.keys))
		for i := range x.keys {
			items[i] = mkTuple([]value{x.keys[i], x.vals[i]})
		}
		r.markOp(iterable, "object_access")
		return items, true
	case *arrVal:
		return append([]value(nil), x.items...), false
	}
	throw("Expected iterable or object type in for loop: got " + typeName(iterable))
	return nil, false
}

// filter binds the loop variables of each item and keeps those the
// loop's test (for x in xs if test) lets through.
func (n *forStmt) filter(r *renderer, sc *scope, items []value, isObject bool, test node) ([]value, []func(*scope)) {
	var filtered []value
	var binds []func(*scope)
	for i := range items {
		cur := items[i]
		var bind func(*scope)
		switch lv := n.loopvar.(type) {
		case *identNode:
			item := items[i]
			if isObject {
				item = item.(*arrVal).items[0]
				cur = item
			}
			bind = func(s *scope) { s.set(lv.name, item) }
		case *tupleLit:
			a, ok := cur.(*arrVal)
			if !ok {
				throw("Cannot unpack non-iterable type: " + typeName(cur))
			}
			if len(lv.items) != len(a.items) {
				if len(lv.items) > len(a.items) {
					throw("Too few items to unpack")
				}
				throw("Too many items to unpack")
			}
			bind = func(s *scope) {
				for j, e := range lv.items {
					id, ok := e.(*identNode)
					if !ok {
						throw("Cannot unpack non-identifier type: " + e.typeName())
					}
					s.set(id.name, a.items[j])
				}
			}
		default:
			throw("Invalid loop variable(s): " + n.loopvar.typeName())
		}
		if test != nil {
			ls := sc.child()
			bind(ls)
			if !asBool(r.exec(test, ls)) {
				continue
			}
		}
		filtered = append(filtered, cur)
		binds = append(binds, bind)
	}
	return filtered, binds
}

// loopObject is the loop variable of iteration i.
func loopObject(filtered []value, i int) *objVal {
	nf := len(filtered)
	prev, next := mkUndef("previtem"), mkUndef("nextitem")
	if i > 0 {
		prev = filtered[i-1]
	}
	if i < nf-1 {
		next = filtered[i+1]
	}
	return &objVal{noBuiltins: true, keys: loopKeys[:],
		vals: []value{mkInt(int64(i + 1)), mkInt(int64(i)), mkInt(int64(nf - i)), mkInt(int64(nf - i - 1)),
			mkBool(i == 0), mkBool(i == nf-1), mkInt(int64(nf)), prev, next}}
}

// loopKeys are the loop object's keys, in the pin's order, shared by
// every loop: a template that sets loop.x appends to a full slice, which
// copies it first, and replaces values, never keys.
var loopKeys = [...]value{sharedStr("index"), sharedStr("index0"), sharedStr("revindex"), sharedStr("revindex0"),
	sharedStr("first"), sharedStr("last"), sharedStr("length"), sharedStr("previtem"), sharedStr("nextitem")}

// runBody runs a loop's body, catching break and continue.
func (r *renderer) runBody(body []node, sc *scope, out *[]value) (ctl excKind) {
	defer func() {
		if x := recover(); x != nil {
			if e, ok := x.(*exception); ok && (e.kind == excBreak || e.kind == excContinue) {
				ctl = e.kind
				return
			}
			panic(x)
		}
	}()
	for _, s := range body {
		*out = append(*out, r.exec(s, sc))
	}
	return excError
}

func (n *setStmt) eval(r *renderer, c *scope) value {
	var rhs value
	if n.val != nil {
		rhs = r.exec(n.val, c)
	} else {
		rhs = r.execStatements(n.body, c)
	}
	switch lhs := n.assignee.(type) {
	case *identNode:
		c.set(lhs.name, rhs)
	case *tupleLit:
		a, ok := rhs.(*arrVal)
		if !ok {
			throw("Cannot unpack non-iterable type in set: " + typeName(rhs))
		}
		if len(a.items) != len(lhs.items) {
			if len(lhs.items) > len(a.items) {
				throw("Too few items to unpack in set")
			}
			throw("Too many items to unpack in set")
		}
		for i, e := range lhs.items {
			id, ok := e.(*identNode)
			if !ok {
				throw("Cannot unpack to non-identifier in set: " + e.typeName())
			}
			c.set(id.name, a.items[i])
		}
	case *memberExpr:
		if lhs.computed {
			throw("Cannot assign to computed member")
		}
		prop, ok := lhs.property.(*identNode)
		if !ok {
			throw("Cannot assign to member with non-identifier property")
		}
		obj, ok := r.exec(lhs.object, c).(*objVal)
		if !ok {
			throw("Cannot assign to member of non-object")
		}
		r.objInsert(obj, mkStr(prop.name), rhs)
	default:
		throw("Invalid LHS inside assignment expression: " + n.assignee.typeName())
	}
	return mkUndef("")
}

// bindParameters is bind_parameters: a macro's (or a caller block's)
// parameters from the call's arguments, by keyword or position, else
// their defaults evaluated in the caller's scope.
func (r *renderer) bindParameters(name string, params []node, a *args, c *scope) {
	for i, p := range params {
		if i < len(a.list) {
			var pname string
			switch x := p.(type) {
			case *identNode:
				pname = x.name
			case *kwargExpr:
				id, ok := x.key.(*identNode)
				if !ok {
					throw("Keyword argument key must be an identifier in '" + name + "'")
				}
				pname = id.name
			default:
				throw("Invalid parameter type in '" + name + "'")
			}
			c.set(pname, a.kwargOrPos(pname, i))
			continue
		}
		kw, ok := p.(*kwargExpr)
		if !ok {
			throw("Not enough arguments provided to '" + name + "'")
		}
		id, ok := kw.key.(*identNode)
		if !ok {
			throw("Keyword argument key must be an identifier in '" + name + "'")
		}
		c.set(id.name, r.exec(kw.val, a.ctx))
	}
}

func (r *renderer) enterCall() {
	r.calls++
	if r.calls > maxCallDepth {
		r.calls = 0
		throw("macro calls nested deeper than " + strconv.Itoa(maxCallDepth) + " levels")
	}
}

func (r *renderer) leaveCall() { r.calls-- }

func (n *macroStmt) eval(r *renderer, c *scope) value {
	id, ok := n.name.(*identNode)
	if !ok {
		throw("Macro name must be an identifier")
	}
	name := id.name
	fn := &builtin{call: func(a *args) value {
		a.r.enterCall()
		defer a.r.leaveCall()
		mc := a.ctx.child()
		a.r.bindParameters(name, n.args, a, mc)
		return a.r.execStatements(n.body, mc)
	}}
	c.set(name, &funcVal{name: name, fn: fn})
	return mkUndef("")
}

func (n *callStmt) eval(r *renderer, c *scope) value {
	cv := r.exec(n.call.callee, c)
	callee, ok := cv.(*funcVal)
	if !ok {
		throw("Callee is not a function: got " + typeName(cv))
	}
	callerCtx := c.snapshot()
	fn := &builtin{call: func(a *args) value {
		a.r.enterCall()
		defer a.r.leaveCall()
		bc := callerCtx.child()
		a.r.bindParameters("caller", n.callerArgs, a, bc)
		return a.r.execStatements(n.body, bc)
	}}
	cc := c.child()
	cc.set("caller", &funcVal{name: "caller", fn: fn})
	a := &args{r: r, ctx: cc}
	for _, e := range n.call.args {
		a.list = append(a.list, r.exec(e, c))
	}
	return r.invoke(callee, a)
}

func (n *callExpr) eval(r *renderer, c *scope) value {
	a := &args{r: r, ctx: c, list: make([]value, 0, len(n.args))}
	for _, e := range n.args {
		a.list = append(a.list, r.exec(e, c))
	}
	callee := r.exec(n.callee, c)
	if !isFunc(callee) {
		throw("Callee is not a function: got " + typeName(callee))
	}
	return r.invoke(callee, a)
}

func (n *memberExpr) eval(r *renderer, c *scope) value {
	object := r.exec(n.object, c)
	var property value
	if n.computed {
		if s, ok := n.property.(*sliceExpr); ok {
			return r.slice(c, s, object)
		}
		property = r.exec(n.property, c)
	} else if lit, ok := n.property.(*intLit); ok {
		property = mkInt(lit.v)
		if lit.v < 0 {
			throw("Static member property cannot be negative")
		}
	} else {
		id, ok := n.property.(*identNode)
		if !ok {
			throw("Static member property must be an identifier")
		}
		property = n.name
		// a built-in of the type wins over a key of the same name (obj.items)
		if v := r.builtinOf(id.name, object, true); !isUndef(v) {
			return v
		}
	}
	val := mkUndef("object_property")
	if isUndef(property) {
		return val
	}
	if !r.isHashable(property) {
		throw("Type: " + typeName(property) + " is not allowed as object key")
	}
	switch o := object.(type) {
	case *undefVal:
		return val
	case *objVal:
		val = r.objGet(o, property, val)
		if isUndef(val) {
			val = r.builtinOf(asString(r, property).str(), object, true)
		}
	case *arrVal, *strVal:
		switch p := property.(type) {
		case *intVal:
			if a, ok := o.(*arrVal); ok {
				val = arrGet(a, p.i, val)
			} else {
				s := asString(r, object).str()
				if p.i >= 0 && p.i < int64(len(s)) {
					val = mkStr(s[p.i : p.i+1])
				}
			}
		case *strVal:
			val = r.builtinOf(p.s.str(), object, true)
		default:
			throw("Cannot access property with non-string/non-number: got " + typeName(property))
		}
	default:
		p, ok := property.(*strVal)
		if !ok {
			throw("Cannot access property with non-string: got " + typeName(property))
		}
		val = r.builtinOf(p.s.str(), object, true)
	}
	if r.stats {
		r.mark(val)
		r.mark(object)
		r.mark(property)
		if isInt(property) {
			r.markOp(object, "array_access")
		} else if isStr(property) {
			r.markOp(object, "object_access")
		}
	}
	return val
}

// slice is obj[start:stop:step], which the pin turns into obj.slice(...).
func (r *renderer) slice(c *scope, s *sliceExpr, object value) value {
	var size int64
	switch o := object.(type) {
	case *arrVal:
		size = int64(len(o.items))
	case *strVal:
		size = int64(o.s.length())
	}
	var step, start, stop value
	if s.step != nil {
		step = r.exec(s.step, c)
	} else {
		step = mkInt(1)
	}
	if s.start != nil {
		start = r.exec(s.start, c)
	} else if asInt(step) < 0 {
		start = mkInt(size - 1)
	} else {
		start = mkInt(0)
	}
	if s.stop != nil {
		stop = r.exec(s.stop, c)
	} else if asInt(step) < 0 {
		stop = mkInt(-1)
	} else {
		stop = mkInt(size)
	}
	fn := r.builtinOf("slice", object, false)
	return r.invoke(fn, &args{r: r, ctx: c, list: []value{start, stop, step}})
}
