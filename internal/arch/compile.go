package arch

import (
	"errors"
	"strings"

	"github.com/ggload/ggload/internal/arch/ast"
)

// The evaluator (see the package doc): every node of a decoded program
// compiled once into a closure.

type exprFn func(f *frame) (Val, error)
type stmtFn func(f *frame) (ctl, error)
type refFn func(f *frame) (*Cell, error)

// code is a node's compiled form.
type code struct {
	stmt stmtFn
	expr exprFn
	ref  refFn
}

// compile compiles a decoded program: its parameters' defaults and its
// body.
func compile(p *Program) {
	for _, d := range p.Params.Kids {
		for _, k := range d.Kids {
			exprOf(k)
		}
	}
	stmtOf(p.Body)
}

func codeOf(n *ast.Node) *code {
	c, ok := n.Code.(*code)
	if !ok {
		c = &code{}
		n.Code = c
	}
	return c
}

var noStmt stmtFn = func(*frame) (ctl, error) { return ctlNone, nil }

// stmtOf compiles a statement (once).
func stmtOf(n *ast.Node) stmtFn {
	if n == nil || n.Op == ast.OpNil {
		return noStmt
	}
	c := codeOf(n)
	if c.stmt == nil {
		c.stmt = ticking(compileStmt(n))
	}
	return c.stmt
}

// exprOf compiles an expression (once), and its lvalue form where it has
// one.
func exprOf(n *ast.Node) exprFn {
	c := codeOf(n)
	if c.expr == nil {
		c.expr = compileExpr(n)
		c.ref = compileRef(n)
	}
	return c.expr
}

// refOf is an expression's lvalue form.
func refOf(n *ast.Node) refFn {
	exprOf(n)
	return n.Code.(*code).ref
}

// ticking counts a statement against the run's step limit before it runs.
func ticking(s stmtFn) stmtFn {
	return func(f *frame) (ctl, error) {
		if err := f.r.tick(); err != nil {
			return ctlNone, err
		}
		return s(f)
	}
}

// scopedStmt runs s in a scope of its own when the statement declares
// variables (resolveGlobals marks it).
func scopedStmt(n *ast.Node, s stmtFn) stmtFn {
	if _, ok := n.Res.(scoped); !ok {
		return s
	}
	return func(f *frame) (ctl, error) {
		f.push()
		defer f.pop()
		return s(f)
	}
}

func compileStmt(n *ast.Node) stmtFn {
	switch n.Op {
	case ast.OpBlock:
		kids := make([]stmtFn, len(n.Kids))
		for i, k := range n.Kids {
			kids[i] = stmtOf(k)
		}
		return scopedStmt(n, func(f *frame) (ctl, error) {
			for _, k := range kids {
				c, err := k(f)
				if err != nil || c != ctlNone {
					return c, err
				}
			}
			return ctlNone, nil
		})
	case ast.OpExpr:
		e := exprOf(n.Kids[0])
		return func(f *frame) (ctl, error) {
			_, err := e(f)
			return ctlNone, err
		}
	case ast.OpDecl:
		return compileDecl(n)
	case ast.OpIf:
		init, cond, then, els := stmtOf(n.Kids[0]), exprOf(n.Kids[1]), stmtOf(n.Kids[2]), stmtOf(n.Kids[3])
		return scopedStmt(n, func(f *frame) (ctl, error) {
			if _, err := init(f); err != nil {
				return ctlNone, err
			}
			c, err := cond(f)
			if err != nil {
				return ctlNone, err
			}
			if c.truthy() {
				return then(f)
			}
			return els(f)
		})
	case ast.OpFor:
		return compileFor(n)
	case ast.OpRange:
		return compileRange(n)
	case ast.OpSwitch:
		return compileSwitch(n)
	case ast.OpBreak:
		return func(*frame) (ctl, error) { return ctlBreak, nil }
	case ast.OpContinue:
		return func(*frame) (ctl, error) { return ctlContinue, nil }
	case ast.OpReturn:
		if len(n.Kids) == 0 {
			return func(*frame) (ctl, error) { return ctlReturn, nil }
		}
		v := exprOf(n.Kids[0])
		return func(f *frame) (ctl, error) {
			x, err := v(f)
			if err != nil {
				return ctlNone, err
			}
			f.ret = x
			return ctlReturn, nil
		}
	case ast.OpThrow:
		v := exprOf(n.Kids[0])
		return func(f *frame) (ctl, error) {
			x, err := v(f)
			if err != nil {
				return ctlNone, err
			}
			if x.K == KStr {
				return ctlNone, &Throw{Msg: x.S}
			}
			return ctlNone, &Throw{Msg: x.describe()}
		}
	case ast.OpTry:
		body, handler := stmtOf(n.Kids[0]), stmtOf(n.Kids[1])
		return func(f *frame) (ctl, error) {
			c, err := body(f)
			var t *Throw
			if errors.As(err, &t) {
				return handler(f)
			}
			return c, err
		}
	}
	op := n.Op
	return func(f *frame) (ctl, error) { return ctlNone, f.errorf("statement %s", op) }
}

// compileSwitch: the first case whose label equals the value (else the
// default) and every case after it, until a break.
func compileSwitch(n *ast.Node) stmtFn {
	subject := exprOf(n.Kids[0])
	cases := n.Kids[1:]
	labels := make([]exprFn, len(cases))
	bodies := make([][]stmtFn, len(cases))
	def := -1
	for i, c := range cases {
		if c.Kids[0] == nil || c.Kids[0].Op == ast.OpNil {
			def = i
		} else {
			labels[i] = exprOf(c.Kids[0])
		}
		for _, s := range c.Kids[1:] {
			bodies[i] = append(bodies[i], stmtOf(s))
		}
	}
	_, scopes := n.Res.(scoped)
	run := func(f *frame, start int) (ctl, error) {
		if scopes {
			f.push()
			defer f.pop()
		}
		for _, b := range bodies[start:] {
			for _, s := range b {
				k, err := s(f)
				if err != nil {
					return ctlNone, err
				}
				switch k {
				case ctlBreak:
					return ctlNone, nil
				case ctlContinue, ctlReturn:
					return k, nil
				}
			}
		}
		return ctlNone, nil
	}
	return func(f *frame) (ctl, error) {
		v, err := subject(f)
		if err != nil {
			return ctlNone, err
		}
		start := -1
		for i, l := range labels {
			if l == nil {
				continue
			}
			lv, err := l(f)
			if err != nil {
				return ctlNone, err
			}
			if eqVals(v, lv) {
				start = i
				break
			}
		}
		if start < 0 {
			start = def
		}
		if start < 0 {
			return ctlNone, nil
		}
		return run(f, start)
	}
}

// compileDecl: a variable of a scalar type, a reference, or a container.
func compileDecl(n *ast.Node) stmtFn {
	var init *ast.Node
	if len(n.Kids) > 0 {
		init = n.Kids[0]
	}
	switch {
	case n.C == "array" && n.T != ast.TObj:
		return compileCArrayDecl(n)
	case n.T == ast.TRef:
		return compileRefDecl(n.S, init)
	case n.T == ast.TObj:
		return compileContainerDecl(n.S, n.C, init)
	}
	if fields, ok := structFields[n.C]; ok && n.T == ast.TAuto && (init == nil || init.Op == ast.OpList) {
		return compileStructDecl(n.S, n.C, fields, init)
	}
	return compileScalarDecl(n.S, n.T, init)
}

// compileCArrayDecl: a local C array of scalars or pointers, "T a[N] =
// { ... };": N value-initialized elements, the brace list's first.
func compileCArrayDecl(n *ast.Node) stmtFn {
	size := exprOf(n.Kids[0])
	var elems []exprFn
	if len(n.Kids) > 1 {
		for _, k := range n.Kids[1].Kids {
			elems = append(elems, exprOf(k))
		}
	}
	name, t := n.S, n.T
	return func(f *frame) (ctl, error) {
		nv, err := size(f)
		if err != nil {
			return ctlNone, err
		}
		if nv.K != KInt || nv.I < 0 || nv.I > 1<<20 || int64(len(elems)) > nv.I {
			return ctlNone, f.errorf("array %s of %s elements (%d initializers)", name, nv.describe(), len(elems))
		}
		a := newArray(t, int(nv.I), true)
		for i, e := range elems {
			v, err := e(f)
			if err != nil {
				return ctlNone, err
			}
			if err := a.cells[i].set(v); err != nil {
				return ctlNone, err
			}
		}
		f.defineLocal(name, Val{K: KArr, P: a})
		return ctlNone, nil
	}
}

// compileRefDecl: a reference, bound to its initializer's cell (or to a
// temporary).
func compileRefDecl(name string, init *ast.Node) stmtFn {
	if init == nil {
		return func(f *frame) (ctl, error) {
			return ctlNone, f.errorf("reference %s without an initializer", name)
		}
	}
	ref, val := refOf(init), exprOf(init)
	return func(f *frame) (ctl, error) {
		c, err := ref(f)
		if err != nil {
			// a reference bound to a temporary (const auto & x = f())
			v, err2 := val(f)
			if err2 != nil {
				return ctlNone, err2
			}
			c = &Cell{V: v}
		}
		f.sc.define(name, c)
		return ctlNone, nil
	}
}

// compileContainerDecl: a std:: container (or std::regex), empty or from
// its initializer.
func compileContainerDecl(name, ctype string, init *ast.Node) stmtFn {
	var items []exprFn
	var single exprFn
	switch {
	case init != nil && init.Op == ast.OpList:
		for _, k := range init.Kids {
			items = append(items, exprOf(k))
		}
	case init != nil:
		single = exprOf(init)
	}
	if ctype == "std::regex" {
		return compileRegexDecl(name, items, init)
	}
	if init != nil && init.Op == ast.OpCall && len(init.Kids) > 1 && init.Kids[0].Op == ast.OpIdent && init.Kids[0].S == "std::vector" {
		return compileVectorCtor(name, ctype, init.Kids[1:])
	}
	if strings.HasPrefix(ctype, "std::unique_ptr<") || strings.HasPrefix(ctype, "std::shared_ptr<") {
		// a smart pointer: the object it owns, shared (graph.go's objects
		// are their own pointers)
		return func(f *frame) (ctl, error) {
			c := f.sc.cell(ast.TPtr)
			c.V = vNull
			if single != nil {
				x, err := single(f)
				if err != nil {
					return ctlNone, err
				}
				c.V = x
			}
			f.sc.define(name, c)
			return ctlNone, nil
		}
	}
	return func(f *frame) (ctl, error) {
		v, err := f.r.container(ctype)
		if err != nil {
			return ctlNone, f.errorf("%s %s: %v", ctype, name, err)
		}
		c := f.sc.cell(ast.TAuto)
		c.V = v
		if single != nil {
			x, err := single(f)
			if err != nil {
				return ctlNone, err
			}
			if err := c.set(x); err != nil {
				return ctlNone, err
			}
		} else if v.K == KArr {
			a := v.P.(*Array)
			for i, it := range items {
				x, err := it(f)
				if err != nil {
					return ctlNone, err
				}
				if i >= len(a.cells) {
					if a.fixed {
						return ctlNone, f.errorf("too many initializers for %s", ctype)
					}
					a.cells = append(a.cells, Cell{T: a.elem})
				}
				if err := a.cells[i].set(x); err != nil {
					return ctlNone, err
				}
			}
		}
		f.sc.define(name, c)
		return ctlNone, nil
	}
}

// compileVectorCtor: std::vector<T> name(n) (n value-initialized
// elements of T) or name(n, value).
func compileVectorCtor(name, ctype string, args []*ast.Node) stmtFn {
	var xs []exprFn
	for _, a := range args {
		xs = append(xs, exprOf(a))
	}
	elem, _ := strings.CutPrefix(ctype, "std::vector<")
	elem = strings.TrimSpace(strings.TrimSuffix(elem, ">"))
	et := elemType(elem)
	if strings.HasSuffix(elem, "*") {
		et = ast.TPtr
	}
	return func(f *frame) (ctl, error) {
		if len(xs) > 2 {
			return ctlNone, f.errorf("%s(%d arguments)", ctype, len(xs))
		}
		n, err := xs[0](f)
		if err != nil {
			return ctlNone, err
		}
		if n, err = convert(n, ast.TI64); err != nil || n.K != KInt || n.I < 0 || n.I > 1<<24 {
			return ctlNone, f.errorf("%s(%s)", ctype, n.describe())
		}
		v := zeroOf(et)
		if len(xs) == 2 {
			if v, err = xs[1](f); err != nil {
				return ctlNone, err
			}
		}
		a := &Array{elem: et, cells: make([]Cell, n.I)}
		for i := range a.cells {
			a.cells[i].T = et
			if err := a.cells[i].set(v); err != nil {
				return ctlNone, err
			}
		}
		f.defineLocal(name, Val{K: KArr, P: a})
		return ctlNone, nil
	}
}

// compileRegexDecl: a std::regex of one pattern.
func compileRegexDecl(name string, items []exprFn, init *ast.Node) stmtFn {
	if init != nil && len(init.Kids) == 1 && init.Kids[0].Op == ast.OpStr {
		// a literal pattern: one regex, made once (nothing writes to it)
		if v, err := newRegex(init.Kids[0].S); err == nil {
			return func(f *frame) (ctl, error) {
				f.defineLocal(name, v)
				return ctlNone, nil
			}
		}
	}
	return func(f *frame) (ctl, error) {
		if len(items) != 1 {
			return ctlNone, f.errorf("std::regex %s of %d arguments", name, len(items))
		}
		src, err := items[0](f)
		if err != nil {
			return ctlNone, err
		}
		v, err := newRegex(src.S)
		if err != nil || src.K != KStr {
			return ctlNone, f.errorf("std::regex %s: %v", name, err)
		}
		f.defineLocal(name, v)
		return ctlNone, nil
	}
}

// assignMembers assigns the brace list a to struct o's members in order,
// value-initializing those it does not reach.
func assignMembers(f *frame, o *Object, a *Array) error {
	vals := make([]Val, len(a.cells))
	for i, c := range a.cells {
		vals[i] = c.V
	}
	fresh, err := newStructOf(f, o.class, structFields[o.class], vals)
	if err != nil {
		return err
	}
	for name, c := range fresh.fields {
		o.fields[name] = c
	}
	return nil
}

// newStructOf is a struct of class, its first members set to vals in
// order, the others value-initialized.
func newStructOf(f *frame, class string, fields []fieldDef, vals []Val) (*Object, error) {
	if len(vals) > len(fields) {
		return nil, f.errorf("%d initializers for %s of %d members", len(vals), class, len(fields))
	}
	o, err := f.r.newStruct(class, fields)
	if err != nil {
		return nil, f.errorf("%v", err)
	}
	for i, v := range vals {
		if err := o.fields[fields[i].Name].set(v); err != nil {
			return nil, f.errorf("%s.%s = %s: %v", class, fields[i].Name, v.describe(), err)
		}
	}
	return o, nil
}

// compileStructDecl: a struct of the headers, value-initialized, or
// brace-initialized member by member in order.
func compileStructDecl(name, class string, fields []fieldDef, init *ast.Node) stmtFn {
	var items []exprFn
	if init != nil {
		if len(init.Kids) > len(fields) {
			return func(f *frame) (ctl, error) {
				return ctlNone, f.errorf("%d initializers for %s of %d members", len(init.Kids), class, len(fields))
			}
		}
		for _, k := range init.Kids {
			items = append(items, exprOf(k))
		}
	}
	return func(f *frame) (ctl, error) {
		vals := make([]Val, len(items))
		for i, it := range items {
			v, err := it(f)
			if err != nil {
				return ctlNone, err
			}
			vals[i] = v
		}
		o, err := newStructOf(f, class, fields, vals)
		if err != nil {
			return ctlNone, err
		}
		f.defineLocal(name, Val{K: KObj, P: o})
		return ctlNone, nil
	}
}

// compileScalarDecl: a scalar, a pointer or an auto variable, zero or
// from its initializer.
func compileScalarDecl(name string, t ast.Type, init *ast.Node) stmtFn {
	var val exprFn
	if init != nil {
		switch {
		case init.Op == ast.OpList && len(init.Kids) == 0:
		case init.Op == ast.OpList:
			val = exprOf(init.Kids[0])
		default:
			val = exprOf(init)
		}
	}
	return func(f *frame) (ctl, error) {
		c := f.sc.cell(t)
		c.V = zeroOf(t)
		if val != nil {
			v, err := val(f)
			if err != nil {
				return ctlNone, err
			}
			if err := c.set(v); err != nil {
				return ctlNone, f.errorf("%s = %s: %v", name, v.describe(), err)
			}
		}
		f.sc.define(name, c)
		return ctlNone, nil
	}
}

func constant(v Val) exprFn { return func(*frame) (Val, error) { return v, nil } }

func compileExpr(n *ast.Node) exprFn {
	switch n.Op {
	case ast.OpInt:
		t := ast.TI32
		if n.I > 1<<31-1 || n.I < -1<<31 {
			t = ast.TI64
		}
		return constant(vInt(n.I, t))
	case ast.OpFloat:
		return constant(Val{K: KFloat, T: ast.TF64, F: n.F})
	case ast.OpStr:
		return constant(vStr(n.S))
	case ast.OpIdent:
		if v, ok := n.Res.(Val); ok {
			return constant(v)
		}
		ref := identRef(n)
		return func(f *frame) (Val, error) {
			c, v, err := ref(f)
			if err != nil {
				return vVoid, err
			}
			if c != nil {
				return c.V, nil
			}
			return v, nil
		}
	case ast.OpMember:
		obj, name := exprOf(n.Kids[0]), n.S
		return func(f *frame) (Val, error) {
			o, err := obj(f)
			if err != nil {
				return vVoid, err
			}
			if o.K == KObj {
				if c, ok := o.P.(*Object).fields[name]; ok {
					return c.V, nil
				}
			}
			return f.member(o, name)
		}
	case ast.OpIndex:
		exprOf(n.Kids[0])
		exprOf(n.Kids[1])
		ref := compileIndexRef(n)
		return func(f *frame) (Val, error) {
			c, err := ref(f)
			if err != nil {
				return vVoid, err
			}
			return c.V, nil
		}
	case ast.OpCall:
		return compileCall(n)
	case ast.OpUnary:
		return compileUnary(n)
	case ast.OpBinary:
		return compileBinary(n)
	case ast.OpAssign:
		return compileAssign(n)
	case ast.OpCond:
		c, a, b := exprOf(n.Kids[0]), exprOf(n.Kids[1]), exprOf(n.Kids[2])
		return func(f *frame) (Val, error) {
			v, err := c(f)
			if err != nil {
				return vVoid, err
			}
			if v.truthy() {
				return a(f)
			}
			return b(f)
		}
	case ast.OpCast:
		x, t := exprOf(n.Kids[0]), n.T
		if t == ast.TAuto || t == ast.TRef || t == ast.TPtr || t == ast.TObj {
			return x
		}
		return func(f *frame) (Val, error) {
			v, err := x(f)
			if err != nil {
				return vVoid, err
			}
			cv, err := convert(v, t)
			if err != nil {
				return vVoid, f.errorf("%v", err)
			}
			return cv, nil
		}
	case ast.OpList:
		return compileList(n)
	case ast.OpLambda:
		return compileLambda(n)
	}
	for _, k := range n.Kids {
		if k != nil {
			exprOf(k)
		}
	}
	op := n.Op
	return func(f *frame) (Val, error) { return vVoid, f.errorf("expression %s", op) }
}

// identRef finds an identifier's storage (a variable, a member of this)
// or value (a global): by its static binding when it holds, else by name.
func identRef(n *ast.Node) func(f *frame) (*Cell, Val, error) {
	name := n.S
	switch res := n.Res.(type) {
	case local:
		return func(f *frame) (*Cell, Val, error) {
			sc := f.sc
			for i := 0; i < res.up && sc != nil; i++ {
				sc = sc.parent
			}
			if sc != nil && res.idx < len(sc.names) && sc.names[res.idx] == name {
				return sc.cells[res.idx], vVoid, nil
			}
			return f.lookup(name) // the binding did not hold: the slow way
		}
	case member:
		return func(f *frame) (*Cell, Val, error) { return f.lookupMember(name) }
	}
	return func(f *frame) (*Cell, Val, error) { return f.lookup(name) }
}

// compileRef is an expression's lvalue form: nil for a node that cannot
// be one (refOf's callers then fail, naming the node).
func compileRef(n *ast.Node) refFn {
	switch n.Op {
	case ast.OpIdent:
		ref, name := identRef(n), n.S
		return func(f *frame) (*Cell, error) {
			c, _, err := ref(f)
			if err != nil {
				return nil, err
			}
			if c == nil {
				return nil, f.errorf("%s is not assignable", name)
			}
			return c, nil
		}
	case ast.OpMember:
		obj, name := exprOf(n.Kids[0]), n.S
		return func(f *frame) (*Cell, error) {
			o, err := obj(f)
			if err != nil {
				return nil, err
			}
			switch o.K {
			case KObj:
				ob := o.P.(*Object)
				if c, ok := ob.fields[name]; ok {
					return c, nil
				}
				if ob.class == "llama_hparams" {
					return nil, f.errorf("llama_hparams has no member %s", name)
				}
				return ob.field(name), nil
			case KNull:
				return nil, &Abort{Msg: "null pointer dereference reading ." + name, Where: f.fn}
			}
			return nil, f.errorf("member %s of %s is not assignable", name, o.describe())
		}
	case ast.OpIndex:
		return compileIndexRef(n)
	case ast.OpUnary:
		if n.S == "*" {
			// *p: the variable p holds the address of, or p itself
			ref, x := refOf(n.Kids[0]), exprOf(n.Kids[0])
			return func(f *frame) (*Cell, error) {
				if v, err := x(f); err == nil && v.K == KAddr {
					return v.P.(*Cell), nil
				}
				return ref(f)
			}
		}
	}
	op := n.Op
	return func(f *frame) (*Cell, error) { return nil, f.errorf("%s is not an lvalue", op) }
}

// compileIndexRef is a[i]: an element of an array (checked: reading past
// a std::array's end is undefined in llama.cpp, and an abort here), or a
// map's value (inserted if absent, as operator[] does).
func compileIndexRef(n *ast.Node) refFn {
	arr, idx := exprOf(n.Kids[0]), exprOf(n.Kids[1])
	return func(f *frame) (*Cell, error) {
		a, err := arr(f)
		if err != nil {
			return nil, err
		}
		i, err := idx(f)
		if err != nil {
			return nil, err
		}
		switch a.K {
		case KArr:
			if i.K != KInt {
				return nil, f.errorf("index %s", i.describe())
			}
			k := i.I
			if i.T == ast.TU64 && k < 0 {
				k = 1 << 62
			}
			c, err := a.P.(*Array).at(k)
			if err != nil {
				return nil, &Abort{Msg: "array " + err.Error(), Where: f.fn}
			}
			return c, nil
		case KMap:
			m := a.P.(*cmap)
			k := m.find(i)
			if k < 0 {
				m.keys = append(m.keys, i)
				m.vals = append(m.vals, vInt(0, ast.TI32))
				k = len(m.keys) - 1
			}
			return &Cell{V: m.vals[k]}, nil
		}
		return nil, f.errorf("index into %s", a.describe())
	}
}

func compileUnary(n *ast.Node) exprFn {
	op := n.S
	switch op {
	case "pre++", "pre--", "post++", "post--":
		ref := refOf(n.Kids[0])
		arithOp := "+"
		if strings.HasSuffix(op, "--") {
			arithOp = "-"
		}
		post := strings.HasPrefix(op, "post")
		return func(f *frame) (Val, error) {
			c, err := ref(f)
			if err != nil {
				return vVoid, err
			}
			old := c.V
			nv, err := arith(arithOp, old, vInt(1, ast.TI32))
			if err != nil {
				return vVoid, f.errorf("%v", err)
			}
			if err := c.set(nv); err != nil {
				return vVoid, err
			}
			if post {
				return old, nil
			}
			return c.V, nil
		}
	case "&":
		// an object is its own address (pointers and the objects they
		// point to are the same values here); a variable that holds
		// anything else has one of its own (its cell), through which the
		// callee writes (*out = t)
		x := exprOf(n.Kids[0])
		switch n.Kids[0].Op {
		case ast.OpIdent, ast.OpMember, ast.OpIndex:
		default:
			return x
		}
		ref := refOf(n.Kids[0])
		return func(f *frame) (Val, error) {
			v, err := x(f)
			if err != nil {
				return vVoid, err
			}
			switch v.K {
			case KObj, KArr, KMap, KFunc:
				return v, nil
			}
			c, err := ref(f)
			if err != nil {
				return v, nil // no variable: the value itself
			}
			return Val{K: KAddr, P: c}, nil
		}
	case "*":
		x := exprOf(n.Kids[0])
		return func(f *frame) (Val, error) {
			v, err := x(f)
			if err == nil && v.K == KAddr {
				return v.P.(*Cell).V, nil
			}
			return v, err
		}
	case "+":
		return exprOf(n.Kids[0])
	}
	x := exprOf(n.Kids[0])
	return func(f *frame) (Val, error) {
		v, err := x(f)
		if err != nil {
			return vVoid, err
		}
		switch op {
		case "!":
			return vBool(!v.truthy()), nil
		case "-":
			if v.K == KFloat {
				return Val{K: KFloat, T: v.T, F: -v.F}, nil
			}
			if v.K == KInt {
				return vInt(-v.I, common(v.T, ast.TI32)), nil
			}
		case "~":
			if v.K == KInt {
				return vInt(^v.I, common(v.T, ast.TI32)), nil
			}
		}
		return vVoid, f.errorf("operator %s on %s", op, v.describe())
	}
}

func compileBinary(n *ast.Node) exprFn {
	a, b, op := exprOf(n.Kids[0]), exprOf(n.Kids[1]), n.S
	switch op {
	case "&&", "||":
		or := op == "||"
		return func(f *frame) (Val, error) {
			x, err := a(f)
			if err != nil {
				return vVoid, err
			}
			if x.truthy() == or {
				return vBool(x.truthy()), nil
			}
			y, err := b(f)
			if err != nil {
				return vVoid, err
			}
			return vBool(y.truthy()), nil
		}
	}
	stream := op == "<<"
	return func(f *frame) (Val, error) {
		x, err := a(f)
		if err != nil {
			return vVoid, err
		}
		y, err := b(f)
		if err != nil {
			return vVoid, err
		}
		if stream && x.K == KObj && x.P.(*Object).class == "stringstream" {
			sb, err := convert(y, ast.TStr)
			if err != nil {
				sb = vStr(formatValue(y))
			}
			c := x.P.(*Object).field("str")
			c.V = vStr(c.V.S + sb.S)
			return x, nil
		}
		v, err := arith(op, x, y)
		if err != nil {
			return vVoid, f.arithError(err)
		}
		return v, nil
	}
}

// compileCall: an object's method, this's method, a builtin, a program
// by name, or a callable value (a lambda in a variable).
func compileCall(n *ast.Node) exprFn {
	callee, args := n.Kids[0], n.Kids[1:]
	for _, a := range args {
		exprOf(a)
		if a.Op == ast.OpList {
			for _, k := range a.Kids {
				exprOf(k)
			}
		}
	}
	switch callee.Op {
	case ast.OpMember:
		obj, name := exprOf(callee.Kids[0]), callee.S
		return func(f *frame) (Val, error) {
			o, err := obj(f)
			if err != nil {
				return vVoid, err
			}
			if o.K == KNull {
				return vVoid, &Abort{Msg: "null pointer dereference calling " + name, Where: f.fn}
			}
			if !f.r.hasMethod(o, name) {
				return vVoid, f.errorf("no method %s on %s", name, o.describe())
			}
			m := method{recv: o, name: name}
			return f.r.callMethod(f, &m, args)
		}
	case ast.OpIdent:
		name := callee.S
		b, isBuiltin := builtins[name]
		var local func(f *frame) (*Cell, Val, error)
		if _, isMember := callee.Res.(member); !isMember {
			local = identRef(callee) // a variable (a lambda) may be it
		}
		return func(f *frame) (Val, error) {
			if local != nil {
				if c := f.sc.lookup(name); c != nil {
					return f.callValue(c.V, args)
				}
			}
			if f.this.K == KObj && f.r.hasMethod(f.this, name) {
				m := method{recv: f.this, name: name}
				return f.r.callMethod(f, &m, args)
			}
			if f.this.K == KObj {
				// a member holding a function (std::function)
				if c, ok := f.this.P.(*Object).fields[name]; ok && c.V.K == KFunc {
					return f.callValue(c.V, args)
				}
			}
			if isBuiltin {
				return b(f, args)
			}
			if p := f.r.prog(name); p != nil {
				return f.r.invoke(f, p, f.this, args)
			}
			return vVoid, f.errorf("call of unknown function %s", name)
		}
	}
	fn := exprOf(callee)
	return func(f *frame) (Val, error) {
		v, err := fn(f)
		if err != nil {
			return vVoid, err
		}
		return f.callValue(v, args)
	}
}

// compileFor: a for (or while) loop, with break and continue.
func compileFor(n *ast.Node) stmtFn {
	init, body := stmtOf(n.Kids[0]), stmtOf(n.Kids[3])
	var cond, post exprFn
	if k := n.Kids[1]; k != nil && k.Op != ast.OpNil {
		cond = exprOf(k)
	}
	if k := n.Kids[2]; k != nil && k.Op != ast.OpNil {
		post = exprOf(k)
	}
	return scopedStmt(n, func(f *frame) (ctl, error) {
		if _, err := init(f); err != nil {
			return ctlNone, err
		}
		for {
			if cond != nil {
				c, err := cond(f)
				if err != nil {
					return ctlNone, err
				}
				if !c.truthy() {
					return ctlNone, nil
				}
			}
			c, err := body(f)
			if err != nil {
				return ctlNone, err
			}
			if c == ctlBreak {
				return ctlNone, nil
			}
			if c == ctlReturn {
				return c, nil
			}
			if post != nil {
				if _, err := post(f); err != nil {
					return ctlNone, err
				}
			}
			if err := f.r.tick(); err != nil {
				return ctlNone, err
			}
		}
	})
}

// compileRange: a range-for over a container's elements.
func compileRange(n *ast.Node) stmtFn {
	coll, body, name, t := exprOf(n.Kids[0]), stmtOf(n.Kids[1]), n.S, n.T
	return func(f *frame) (ctl, error) {
		cv, err := coll(f)
		if err != nil {
			return ctlNone, err
		}
		items, err := f.rangeItems(cv)
		if err != nil {
			return ctlNone, err
		}
		for _, it := range items {
			f.push()
			c := f.sc.cell(t)
			if t == ast.TRef {
				c.T = ast.TAuto
			}
			if err := c.set(it); err != nil {
				f.pop()
				return ctlNone, err
			}
			f.sc.define(name, c)
			k, err := body(f)
			f.pop()
			if err != nil {
				return ctlNone, err
			}
			if k == ctlBreak {
				break
			}
			if k == ctlReturn {
				return k, nil
			}
		}
		return ctlNone, nil
	}
}

// compileList: a brace list as a value: the shape of a tensor, a
// vector's elements, or a local struct's members (C "struct:member,...").
func compileList(n *ast.Node) exprFn {
	items := make([]exprFn, len(n.Kids))
	for i, k := range n.Kids {
		items[i] = exprOf(k)
	}
	if class, members, ok := strings.Cut(n.C, ":"); ok {
		names := strings.Split(members, ",")
		return func(f *frame) (Val, error) {
			o := newObject(class)
			for i, name := range names {
				v := zeroOf(ast.TI64)
				if i < len(items) {
					var err error
					if v, err = items[i](f); err != nil {
						return vVoid, err
					}
				}
				o.fields[name] = &Cell{V: v}
			}
			return Val{K: KObj, P: o}, nil
		}
	}
	return func(f *frame) (Val, error) {
		a := &Array{elem: ast.TI64, cells: make([]Cell, 0, len(items))}
		for _, it := range items {
			v, err := it(f)
			if err != nil {
				return vVoid, err
			}
			a.cells = append(a.cells, Cell{V: v})
		}
		return Val{K: KArr, P: a}, nil
	}
}

// compileLambda: a lambda, capturing its scope by reference.
func compileLambda(n *ast.Node) exprFn {
	params, body := n.Kids[0], n.Kids[1]
	for _, d := range params.Kids {
		for _, k := range d.Kids {
			exprOf(k)
		}
	}
	stmtOf(body)
	return func(f *frame) (Val, error) {
		for s := f.sc; s != nil && !s.captured; s = s.parent {
			s.captured = true
		}
		return Val{K: KFunc, P: &closure{params: params, body: body, sc: f.sc, this: f.this, fn: f.fn}}, nil
	}
}

// compileAssign: = and the compound assignments.
func compileAssign(n *ast.Node) exprFn {
	ref, val := refOf(n.Kids[0]), exprOf(n.Kids[1])
	op := strings.TrimSuffix(n.S, "=")
	return func(f *frame) (Val, error) {
		c, err := ref(f)
		if err != nil {
			return vVoid, err
		}
		v, err := val(f)
		if err != nil {
			return vVoid, err
		}
		if op != "" {
			if v, err = arith(op, c.V, v); err != nil {
				return vVoid, f.arithError(err)
			}
		}
		if o, ok := c.V.P.(*Object); ok && c.V.K == KObj && v.K == KArr && structFields[o.class] != nil {
			// a struct assigned a brace list: member by member in order
			return c.V, assignMembers(f, o, v.P.(*Array))
		}
		if err := c.set(v); err != nil {
			return vVoid, f.errorf("%v", err)
		}
		return c.V, nil
	}
}

// defineLocal makes v a local variable of the frame's scope, named name
// (of the type auto gives it).
func (f *frame) defineLocal(name string, v Val) {
	c := f.sc.cell(ast.TAuto)
	c.V = v
	f.sc.define(name, c)
}
