package cpp

import (
	"errors"
	"strings"

	"github.com/ggload/ggload/internal/replay/cpp/ast"
)

// The evaluator (see the package doc): every node of a decoded program
// compiled once into a closure.

type exprFn func(f *Frame) (Val, error)
type stmtFn func(f *Frame) (ctl, error)
type refFn func(f *Frame) (*Cell, error)

// code is a node's compiled form.
type code struct {
	stmt stmtFn
	expr exprFn
	ref  refFn
}

// compile compiles a decoded program: its parameters' defaults and its
// body.
func (cp *compiler) compile(p *Program) {
	for _, d := range p.Params.Kids {
		for _, k := range d.Kids {
			cp.exprOf(k)
		}
	}
	cp.stmtOf(p.Body)
}

func (cp *compiler) codeOf(n *ast.Node) *code {
	c, ok := n.Code.(*code)
	if !ok {
		c = &code{}
		n.Code = c
	}
	return c
}

var noStmt stmtFn = func(*Frame) (ctl, error) { return ctlNone, nil }

// stmtOf compiles a statement (once).
func (cp *compiler) stmtOf(n *ast.Node) stmtFn {
	if n == nil || n.Op == ast.OpNil {
		return noStmt
	}
	c := cp.codeOf(n)
	if c.stmt == nil {
		c.stmt = cp.ticking(cp.compileStmt(n))
	}
	return c.stmt
}

// exprOf compiles an expression (once), and its lvalue form where it has
// one.
func (cp *compiler) exprOf(n *ast.Node) exprFn {
	c := cp.codeOf(n)
	if c.expr == nil {
		c.expr = cp.compileExpr(n)
		c.ref = cp.compileRef(n)
	}
	return c.expr
}

// refOf is an expression's lvalue form.
func (cp *compiler) refOf(n *ast.Node) refFn {
	cp.exprOf(n)
	return n.Code.(*code).ref
}

// ticking counts a statement against the run's step limit before it runs.
func (cp *compiler) ticking(s stmtFn) stmtFn {
	return func(f *Frame) (ctl, error) {
		if err := f.I.tick(); err != nil {
			return ctlNone, err
		}
		return s(f)
	}
}

// scopedStmt runs s in a scope of its own when the statement declares
// variables (resolveGlobals marks it).
func (cp *compiler) scopedStmt(n *ast.Node, s stmtFn) stmtFn {
	if _, ok := n.Res.(scoped); !ok {
		return s
	}
	return func(f *Frame) (ctl, error) {
		f.push()
		defer f.pop()
		return s(f)
	}
}

func (cp *compiler) compileStmt(n *ast.Node) stmtFn {
	switch n.Op {
	case ast.OpBlock:
		kids := make([]stmtFn, len(n.Kids))
		for i, k := range n.Kids {
			kids[i] = cp.stmtOf(k)
		}
		return cp.scopedStmt(n, func(f *Frame) (ctl, error) {
			for _, k := range kids {
				c, err := k(f)
				if err != nil || c != ctlNone {
					return c, err
				}
			}
			return ctlNone, nil
		})
	case ast.OpExpr:
		e := cp.exprOf(n.Kids[0])
		return func(f *Frame) (ctl, error) {
			_, err := e(f)
			return ctlNone, err
		}
	case ast.OpDecl:
		return cp.compileDecl(n)
	case ast.OpIf:
		init, cond, then, els := cp.stmtOf(n.Kids[0]), cp.exprOf(n.Kids[1]), cp.stmtOf(n.Kids[2]), cp.stmtOf(n.Kids[3])
		return cp.scopedStmt(n, func(f *Frame) (ctl, error) {
			if _, err := init(f); err != nil {
				return ctlNone, err
			}
			c, err := cond(f)
			if err != nil {
				return ctlNone, err
			}
			if c.Truthy() {
				return then(f)
			}
			return els(f)
		})
	case ast.OpFor:
		return cp.compileFor(n)
	case ast.OpRange:
		return cp.compileRange(n)
	case ast.OpSwitch:
		return cp.compileSwitch(n)
	case ast.OpBreak:
		return func(*Frame) (ctl, error) { return ctlBreak, nil }
	case ast.OpContinue:
		return func(*Frame) (ctl, error) { return ctlContinue, nil }
	case ast.OpReturn:
		if len(n.Kids) == 0 {
			return func(*Frame) (ctl, error) { return ctlReturn, nil }
		}
		v := cp.exprOf(n.Kids[0])
		return func(f *Frame) (ctl, error) {
			x, err := v(f)
			if err != nil {
				return ctlNone, err
			}
			f.Ret = x
			return ctlReturn, nil
		}
	case ast.OpThrow:
		v := cp.exprOf(n.Kids[0])
		return func(f *Frame) (ctl, error) {
			x, err := v(f)
			if err != nil {
				return ctlNone, err
			}
			if x.K == KStr {
				return ctlNone, &Throw{Msg: x.S}
			}
			return ctlNone, &Throw{Msg: x.Describe()}
		}
	case ast.OpTry:
		body, handler := cp.stmtOf(n.Kids[0]), cp.stmtOf(n.Kids[1])
		return func(f *Frame) (ctl, error) {
			c, err := body(f)
			var t *Throw
			if errors.As(err, &t) {
				return handler(f)
			}
			return c, err
		}
	}
	op := n.Op
	return func(f *Frame) (ctl, error) { return ctlNone, f.Errorf("statement %s", op) }
}

// compileSwitch: the first case whose label equals the value (else the
// default) and every case after it, until a break.
func (cp *compiler) compileSwitch(n *ast.Node) stmtFn {
	subject := cp.exprOf(n.Kids[0])
	cases := n.Kids[1:]
	labels := make([]exprFn, len(cases))
	bodies := make([][]stmtFn, len(cases))
	def := -1
	for i, c := range cases {
		if c.Kids[0] == nil || c.Kids[0].Op == ast.OpNil {
			def = i
		} else {
			labels[i] = cp.exprOf(c.Kids[0])
		}
		for _, s := range c.Kids[1:] {
			bodies[i] = append(bodies[i], cp.stmtOf(s))
		}
	}
	_, scopes := n.Res.(scoped)
	run := func(f *Frame, start int) (ctl, error) {
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
	return func(f *Frame) (ctl, error) {
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
func (cp *compiler) compileDecl(n *ast.Node) stmtFn {
	var init *ast.Node
	if len(n.Kids) > 0 {
		init = n.Kids[0]
	}
	switch {
	case n.C == "array" && n.T != ast.TObj:
		return cp.compileCArrayDecl(n)
	case n.T == ast.TRef:
		return cp.compileRefDecl(n.S, init)
	case n.T == ast.TObj:
		return cp.compileContainerDecl(n.S, n.C, init)
	}
	if fields, ok := cp.lib.structs[n.C]; ok && n.T == ast.TAuto && (init == nil || init.Op == ast.OpList) {
		return cp.compileStructDecl(n.S, n.C, fields, init)
	}
	return cp.compileScalarDecl(n.S, n.T, init)
}

// compileCArrayDecl: a local C array of scalars or pointers, "T a[N] =
// { ... };": N value-initialized elements, the brace list's first.
func (cp *compiler) compileCArrayDecl(n *ast.Node) stmtFn {
	size := cp.exprOf(n.Kids[0])
	var elems []exprFn
	if len(n.Kids) > 1 {
		for _, k := range n.Kids[1].Kids {
			elems = append(elems, cp.exprOf(k))
		}
	}
	name, t := n.S, n.T
	return func(f *Frame) (ctl, error) {
		nv, err := size(f)
		if err != nil {
			return ctlNone, err
		}
		if nv.K != KInt || nv.I < 0 || nv.I > 1<<20 || int64(len(elems)) > nv.I {
			return ctlNone, f.Errorf("array %s of %s elements (%d initializers)", name, nv.Describe(), len(elems))
		}
		a := NewArray(t, int(nv.I), true)
		for i, e := range elems {
			v, err := e(f)
			if err != nil {
				return ctlNone, err
			}
			if err := a.Cells[i].Set(v); err != nil {
				return ctlNone, err
			}
		}
		f.defineLocal(name, Val{K: KArr, P: a})
		return ctlNone, nil
	}
}

// compileRefDecl: a reference, bound to its initializer's cell (or to a
// temporary).
func (cp *compiler) compileRefDecl(name string, init *ast.Node) stmtFn {
	if init == nil {
		return func(f *Frame) (ctl, error) {
			return ctlNone, f.Errorf("reference %s without an initializer", name)
		}
	}
	ref, val := cp.refOf(init), cp.exprOf(init)
	return func(f *Frame) (ctl, error) {
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
func (cp *compiler) compileContainerDecl(name, ctype string, init *ast.Node) stmtFn {
	var items []exprFn
	var single exprFn
	switch {
	case init != nil && init.Op == ast.OpList:
		for _, k := range init.Kids {
			items = append(items, cp.exprOf(k))
		}
	case init != nil:
		single = cp.exprOf(init)
	}
	if ctype == "std::regex" {
		return cp.compileRegexDecl(name, items, init)
	}
	if init != nil && init.Op == ast.OpCall && len(init.Kids) > 1 && init.Kids[0].Op == ast.OpIdent && init.Kids[0].S == "std::vector" {
		return cp.compileVectorCtor(name, ctype, init.Kids[1:])
	}
	if strings.HasPrefix(ctype, "std::unique_ptr<") || strings.HasPrefix(ctype, "std::shared_ptr<") {
		// a smart pointer: the object it owns, shared (graph.go's objects
		// are their own pointers)
		return func(f *Frame) (ctl, error) {
			c := f.sc.cell(ast.TPtr)
			c.V = Null
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
	return func(f *Frame) (ctl, error) {
		v, err := f.I.Container(ctype)
		if err != nil {
			return ctlNone, f.Errorf("%s %s: %v", ctype, name, err)
		}
		c := f.sc.cell(ast.TAuto)
		c.V = v
		if single != nil {
			x, err := single(f)
			if err != nil {
				return ctlNone, err
			}
			if err := c.Set(x); err != nil {
				return ctlNone, err
			}
		} else if v.K == KArr {
			a := v.P.(*Array)
			for i, it := range items {
				x, err := it(f)
				if err != nil {
					return ctlNone, err
				}
				if i >= len(a.Cells) {
					if a.Fixed {
						return ctlNone, f.Errorf("too many initializers for %s", ctype)
					}
					a.Cells = append(a.Cells, Cell{T: a.Elem})
				}
				if err := a.Cells[i].Set(x); err != nil {
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
func (cp *compiler) compileVectorCtor(name, ctype string, args []*ast.Node) stmtFn {
	var xs []exprFn
	for _, a := range args {
		xs = append(xs, cp.exprOf(a))
	}
	elem := templateArg(ctype, 0)
	return func(f *Frame) (ctl, error) {
		if len(xs) > 2 {
			return ctlNone, f.Errorf("%s(%d arguments)", ctype, len(xs))
		}
		et, mk, err := f.I.element(elem)
		if err != nil {
			return ctlNone, f.Errorf("%s %s: %v", ctype, name, err)
		}
		n, err := xs[0](f)
		if err != nil {
			return ctlNone, err
		}
		if n, err = Convert(n, ast.TI64); err != nil || n.K != KInt || n.I < 0 || n.I > 1<<24 {
			return ctlNone, f.Errorf("%s(%s)", ctype, n.Describe())
		}
		var v Val
		if len(xs) == 2 {
			if v, err = xs[1](f); err != nil {
				return ctlNone, err
			}
		}
		a := &Array{Elem: et, Make: mk, Cells: make([]Cell, n.I)}
		for i := range a.Cells {
			a.Cells[i].T = et
			if len(xs) == 1 {
				a.Cells[i].V = a.zero()
			} else if err := a.Cells[i].Set(v); err != nil {
				return ctlNone, err
			}
		}
		f.defineLocal(name, Val{K: KArr, P: a})
		return ctlNone, nil
	}
}

// compileRegexDecl: a std::regex of one pattern.
func (cp *compiler) compileRegexDecl(name string, items []exprFn, init *ast.Node) stmtFn {
	if init != nil && len(init.Kids) == 1 && init.Kids[0].Op == ast.OpStr {
		// a literal pattern: one regex, made once (nothing writes to it)
		if v, err := newRegex(init.Kids[0].S); err == nil {
			return func(f *Frame) (ctl, error) {
				f.defineLocal(name, v)
				return ctlNone, nil
			}
		}
	}
	return func(f *Frame) (ctl, error) {
		if len(items) != 1 {
			return ctlNone, f.Errorf("std::regex %s of %d arguments", name, len(items))
		}
		src, err := items[0](f)
		if err != nil {
			return ctlNone, err
		}
		v, err := newRegex(src.S)
		if err != nil || src.K != KStr {
			return ctlNone, f.Errorf("std::regex %s: %v", name, err)
		}
		f.defineLocal(name, v)
		return ctlNone, nil
	}
}

// assignMembers assigns the brace list a to struct o's members in order,
// value-initializing those it does not reach.
func assignMembers(f *Frame, o *Object, a *Array) error {
	vals := make([]Val, len(a.Cells))
	for i, c := range a.Cells {
		vals[i] = c.V
	}
	fresh, err := newStructOf(f, o.Class, f.I.Lib.structs[o.Class], vals)
	if err != nil {
		return err
	}
	for name, c := range fresh.Fields {
		o.Fields[name] = c
	}
	return nil
}

// newStructOf is a struct of class, its first members set to vals in
// order, the others value-initialized.
func newStructOf(f *Frame, class string, fields []FieldDef, vals []Val) (*Object, error) {
	if len(vals) > len(fields) {
		return nil, f.Errorf("%d initializers for %s of %d members", len(vals), class, len(fields))
	}
	o, err := f.I.Host.NewStruct(class, fields)
	if err != nil {
		return nil, f.Errorf("%v", err)
	}
	for i, v := range vals {
		if err := o.Fields[fields[i].Name].Set(v); err != nil {
			return nil, f.Errorf("%s.%s = %s: %v", class, fields[i].Name, v.Describe(), err)
		}
	}
	return o, nil
}

// compileStructDecl: a struct of the headers, value-initialized, or
// brace-initialized member by member in order.
func (cp *compiler) compileStructDecl(name, class string, fields []FieldDef, init *ast.Node) stmtFn {
	var items []exprFn
	if init != nil {
		if len(init.Kids) > len(fields) {
			return func(f *Frame) (ctl, error) {
				return ctlNone, f.Errorf("%d initializers for %s of %d members", len(init.Kids), class, len(fields))
			}
		}
		for _, k := range init.Kids {
			items = append(items, cp.exprOf(k))
		}
	}
	return func(f *Frame) (ctl, error) {
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
func (cp *compiler) compileScalarDecl(name string, t ast.Type, init *ast.Node) stmtFn {
	var val exprFn
	if init != nil {
		switch {
		case init.Op == ast.OpList && len(init.Kids) == 0:
		case init.Op == ast.OpList:
			val = cp.exprOf(init.Kids[0])
		default:
			val = cp.exprOf(init)
		}
	}
	return func(f *Frame) (ctl, error) {
		c := f.sc.cell(t)
		c.V = Zero(t)
		if val != nil {
			v, err := val(f)
			if err != nil {
				return ctlNone, err
			}
			if err := c.Set(v); err != nil {
				return ctlNone, f.Errorf("%s = %s: %v", name, v.Describe(), err)
			}
		}
		f.sc.define(name, c)
		return ctlNone, nil
	}
}

func constant(v Val) exprFn { return func(*Frame) (Val, error) { return v, nil } }

// compileExpr compiles an expression by its kind; a kind with no case
// compiles to a closure that fails, naming it.
func (cp *compiler) compileExpr(n *ast.Node) exprFn {
	switch n.Op {
	case ast.OpInt:
		return compileInt(n)
	case ast.OpFloat:
		return constant(Val{K: KFloat, T: ast.TF64, F: n.F})
	case ast.OpStr:
		return constant(Str(n.S))
	case ast.OpIdent:
		return cp.compileIdent(n)
	case ast.OpMember:
		return cp.compileMember(n)
	case ast.OpIndex:
		return cp.compileIndex(n)
	case ast.OpCall:
		return cp.compileCall(n)
	case ast.OpUnary:
		return cp.compileUnary(n)
	case ast.OpBinary:
		return cp.compileBinary(n)
	case ast.OpAssign:
		return cp.compileAssign(n)
	case ast.OpCond:
		return cp.compileCond(n)
	case ast.OpCast:
		return cp.compileCast(n)
	case ast.OpList:
		return cp.compileList(n)
	case ast.OpLambda:
		return cp.compileLambda(n)
	}
	for _, k := range n.Kids {
		if k != nil {
			cp.exprOf(k)
		}
	}
	op := n.Op
	return func(f *Frame) (Val, error) { return Void, f.Errorf("expression %s", op) }
}

// compileInt is an integer literal: an int, or a long where an int cannot
// hold it.
func compileInt(n *ast.Node) exprFn {
	t := ast.TI32
	if n.I > 1<<31-1 || n.I < -1<<31 {
		t = ast.TI64
	}
	return constant(Int(n.I, t))
}

// compileIdent is an identifier's value: a constant resolved at
// decoding, or what its storage holds.
func (cp *compiler) compileIdent(n *ast.Node) exprFn {
	if v, ok := n.Res.(Val); ok {
		return constant(v)
	}
	ref := cp.identRef(n)
	return func(f *Frame) (Val, error) {
		c, v, err := ref(f)
		if err != nil {
			return Void, err
		}
		if c != nil {
			return c.V, nil
		}
		return v, nil
	}
}

// compileMember is o.name: a struct object's field read directly,
// anything else through Frame.member.
func (cp *compiler) compileMember(n *ast.Node) exprFn {
	obj, name := cp.exprOf(n.Kids[0]), n.S
	return func(f *Frame) (Val, error) {
		o, err := obj(f)
		if err != nil {
			return Void, err
		}
		if o.K == KObj {
			if c, ok := o.P.(*Object).Fields[name]; ok {
				return c.V, nil
			}
		}
		return f.member(o, name)
	}
}

// compileIndex is a[i]'s value (compileIndexRef).
func (cp *compiler) compileIndex(n *ast.Node) exprFn {
	cp.exprOf(n.Kids[0])
	cp.exprOf(n.Kids[1])
	ref := cp.compileIndexRef(n)
	return func(f *Frame) (Val, error) {
		c, err := ref(f)
		if err != nil {
			return Void, err
		}
		return c.V, nil
	}
}

// compileCond is c ? a : b, which evaluates only the branch it takes.
func (cp *compiler) compileCond(n *ast.Node) exprFn {
	c, a, b := cp.exprOf(n.Kids[0]), cp.exprOf(n.Kids[1]), cp.exprOf(n.Kids[2])
	return func(f *Frame) (Val, error) {
		v, err := c(f)
		if err != nil {
			return Void, err
		}
		if v.Truthy() {
			return a(f)
		}
		return b(f)
	}
}

// compileCast converts to a scalar type; a cast to a reference, a
// pointer, an object or auto leaves the value as it is.
func (cp *compiler) compileCast(n *ast.Node) exprFn {
	x, t := cp.exprOf(n.Kids[0]), n.T
	if t == ast.TAuto || t == ast.TRef || t == ast.TPtr || t == ast.TObj {
		return x
	}
	return func(f *Frame) (Val, error) {
		v, err := x(f)
		if err != nil {
			return Void, err
		}
		cv, err := Convert(v, t)
		if err != nil {
			return Void, f.Errorf("%v", err)
		}
		return cv, nil
	}
}

// identRef finds an identifier's storage (a variable, a member of this)
// or value (a global): by its static binding when it holds, else by name.
func (cp *compiler) identRef(n *ast.Node) func(f *Frame) (*Cell, Val, error) {
	name := n.S
	switch res := n.Res.(type) {
	case local:
		return func(f *Frame) (*Cell, Val, error) {
			sc := f.sc
			for i := 0; i < res.up && sc != nil; i++ {
				sc = sc.parent
			}
			if sc != nil && res.idx < len(sc.names) && sc.names[res.idx] == name {
				return sc.cells[res.idx], Void, nil
			}
			return f.lookup(name) // the binding did not hold: the slow way
		}
	case memberRes:
		return func(f *Frame) (*Cell, Val, error) { return f.lookupMember(name) }
	}
	return func(f *Frame) (*Cell, Val, error) { return f.lookup(name) }
}

// compileRef is an expression's lvalue form: nil for a node that cannot
// be one (refOf's callers then fail, naming the node).
func (cp *compiler) compileRef(n *ast.Node) refFn {
	switch n.Op {
	case ast.OpIdent:
		ref, name := cp.identRef(n), n.S
		return func(f *Frame) (*Cell, error) {
			c, _, err := ref(f)
			if err != nil {
				return nil, err
			}
			if c == nil {
				return nil, f.Errorf("%s is not assignable", name)
			}
			return c, nil
		}
	case ast.OpMember:
		obj, name := cp.exprOf(n.Kids[0]), n.S
		return func(f *Frame) (*Cell, error) {
			o, err := obj(f)
			if err != nil {
				return nil, err
			}
			switch o.K {
			case KObj:
				ob := o.P.(*Object)
				if c, ok := ob.Fields[name]; ok {
					return c, nil
				}
				if ob.Strict {
					return nil, f.Errorf("%s has no member %s", ob.Class, name)
				}
				return ob.Field(name), nil
			case KNull:
				return nil, &Abort{Msg: "null pointer dereference reading ." + name, Where: f.Fn}
			}
			return nil, f.Errorf("member %s of %s is not assignable", name, o.Describe())
		}
	case ast.OpIndex:
		return cp.compileIndexRef(n)
	case ast.OpUnary:
		if n.S == "*" {
			// *p: the variable p holds the address of, or p itself
			ref, x := cp.refOf(n.Kids[0]), cp.exprOf(n.Kids[0])
			return func(f *Frame) (*Cell, error) {
				if v, err := x(f); err == nil && v.K == KAddr {
					return v.P.(*Cell), nil
				}
				return ref(f)
			}
		}
	}
	op := n.Op
	return func(f *Frame) (*Cell, error) { return nil, f.Errorf("%s is not an lvalue", op) }
}

// compileIndexRef is a[i]: an element of an array (checked: reading past
// a std::array's end is undefined in llama.cpp, and an abort here), or
// the cell of a map's value (inserted if absent, as operator[] does).
func (cp *compiler) compileIndexRef(n *ast.Node) refFn {
	arr, idx := cp.exprOf(n.Kids[0]), cp.exprOf(n.Kids[1])
	return func(f *Frame) (*Cell, error) {
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
				return nil, f.Errorf("index %s", i.Describe())
			}
			k := i.I
			if i.T == ast.TU64 && k < 0 {
				k = 1 << 62
			}
			c, err := a.P.(*Array).At(k)
			if err != nil {
				return nil, &Abort{Msg: "array " + err.Error(), Where: f.Fn}
			}
			return c, nil
		case KMap:
			m := a.P.(*Map)
			if m.Vals == nil {
				return nil, f.Errorf("index into a set")
			}
			k := m.Find(i)
			if k < 0 {
				k = m.add(i, &Cell{T: m.Elem, V: m.zero()})
			}
			return m.Vals[k], nil
		}
		return nil, f.Errorf("index into %s", a.Describe())
	}
}

func (cp *compiler) compileUnary(n *ast.Node) exprFn {
	op := n.S
	switch op {
	case "pre++", "pre--", "post++", "post--":
		ref := cp.refOf(n.Kids[0])
		arithOp := "+"
		if strings.HasSuffix(op, "--") {
			arithOp = "-"
		}
		post := strings.HasPrefix(op, "post")
		return func(f *Frame) (Val, error) {
			c, err := ref(f)
			if err != nil {
				return Void, err
			}
			old := c.V
			nv, err := Arith(arithOp, old, Int(1, ast.TI32))
			if err != nil {
				return Void, f.Errorf("%v", err)
			}
			if err := c.Set(nv); err != nil {
				return Void, err
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
		x := cp.exprOf(n.Kids[0])
		switch n.Kids[0].Op {
		case ast.OpIdent, ast.OpMember, ast.OpIndex:
		default:
			return x
		}
		ref := cp.refOf(n.Kids[0])
		return func(f *Frame) (Val, error) {
			v, err := x(f)
			if err != nil {
				return Void, err
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
		x := cp.exprOf(n.Kids[0])
		return func(f *Frame) (Val, error) {
			v, err := x(f)
			if err == nil && v.K == KAddr {
				return v.P.(*Cell).V, nil
			}
			return v, err
		}
	case "+":
		return cp.exprOf(n.Kids[0])
	}
	x := cp.exprOf(n.Kids[0])
	return func(f *Frame) (Val, error) {
		v, err := x(f)
		if err != nil {
			return Void, err
		}
		switch op {
		case "!":
			return Bool(!v.Truthy()), nil
		case "-":
			if v.K == KFloat {
				return Val{K: KFloat, T: v.T, F: -v.F}, nil
			}
			if v.K == KInt {
				return Int(-v.I, Common(v.T, ast.TI32)), nil
			}
		case "~":
			if v.K == KInt {
				return Int(^v.I, Common(v.T, ast.TI32)), nil
			}
		}
		return Void, f.Errorf("operator %s on %s", op, v.Describe())
	}
}

func (cp *compiler) compileBinary(n *ast.Node) exprFn {
	a, b, op := cp.exprOf(n.Kids[0]), cp.exprOf(n.Kids[1]), n.S
	switch op {
	case "&&", "||":
		or := op == "||"
		return func(f *Frame) (Val, error) {
			x, err := a(f)
			if err != nil {
				return Void, err
			}
			if x.Truthy() == or {
				return Bool(x.Truthy()), nil
			}
			y, err := b(f)
			if err != nil {
				return Void, err
			}
			return Bool(y.Truthy()), nil
		}
	}
	stream := op == "<<"
	return func(f *Frame) (Val, error) {
		x, err := a(f)
		if err != nil {
			return Void, err
		}
		y, err := b(f)
		if err != nil {
			return Void, err
		}
		if stream && x.K == KObj && x.P.(*Object).Class == "stringstream" {
			sb, err := Convert(y, ast.TStr)
			if err != nil {
				sb = Str(FormatValue(y))
			}
			c := x.P.(*Object).Field("str")
			c.V = Str(c.V.S + sb.S)
			return x, nil
		}
		v, err := Arith(op, x, y)
		if err != nil {
			return Void, f.arithError(err)
		}
		return v, nil
	}
}

// compileCall: an object's method, this's method, a builtin, a program
// by name, or a callable value (a lambda in a variable).
func (cp *compiler) compileCall(n *ast.Node) exprFn {
	callee, args := n.Kids[0], n.Kids[1:]
	for _, a := range args {
		cp.exprOf(a)
		if a.Op == ast.OpList {
			for _, k := range a.Kids {
				cp.exprOf(k)
			}
		}
	}
	switch callee.Op {
	case ast.OpMember:
		obj, name := cp.exprOf(callee.Kids[0]), callee.S
		return func(f *Frame) (Val, error) {
			o, err := obj(f)
			if err != nil {
				return Void, err
			}
			if o.K == KNull {
				return Void, &Abort{Msg: "null pointer dereference calling " + name, Where: f.Fn}
			}
			if !f.I.hasMethod(o, name) {
				if o.K == KObj {
					// a member holding a function (std::function)
					if c, ok := o.P.(*Object).Fields[name]; ok && c.V.K == KFunc {
						return f.callValue(c.V, args)
					}
				}
				return Void, f.Errorf("no method %s on %s", name, o.Describe())
			}
			m := Method{Recv: o, Name: name}
			return f.I.callMethod(f, &m, args)
		}
	case ast.OpIdent:
		name := callee.S
		b, isBuiltin := cp.lib.builtins[name]
		var local func(f *Frame) (*Cell, Val, error)
		if _, isMember := callee.Res.(memberRes); !isMember {
			local = cp.identRef(callee) // a variable (a lambda) may be it
		}
		return func(f *Frame) (Val, error) {
			if local != nil {
				if c := f.sc.lookup(name); c != nil {
					return f.callValue(c.V, args)
				}
			}
			if f.This.K == KObj && f.I.hasMethod(f.This, name) {
				m := Method{Recv: f.This, Name: name}
				return f.I.callMethod(f, &m, args)
			}
			if f.This.K == KObj {
				// a member holding a function (std::function)
				if c, ok := f.This.P.(*Object).Fields[name]; ok && c.V.K == KFunc {
					return f.callValue(c.V, args)
				}
			}
			if isBuiltin {
				return b(f, args)
			}
			if p := f.I.Host.Function(name); p != nil {
				return f.I.Invoke(f, p, f.This, args)
			}
			return Void, f.Errorf("call of unknown function %s", name)
		}
	}
	fn := cp.exprOf(callee)
	return func(f *Frame) (Val, error) {
		v, err := fn(f)
		if err != nil {
			return Void, err
		}
		return f.callValue(v, args)
	}
}

// compileFor: a for (or while) loop, with break and continue.
func (cp *compiler) compileFor(n *ast.Node) stmtFn {
	init, body := cp.stmtOf(n.Kids[0]), cp.stmtOf(n.Kids[3])
	var cond, post exprFn
	if k := n.Kids[1]; k != nil && k.Op != ast.OpNil {
		cond = cp.exprOf(k)
	}
	if k := n.Kids[2]; k != nil && k.Op != ast.OpNil {
		post = cp.exprOf(k)
	}
	return cp.scopedStmt(n, func(f *Frame) (ctl, error) {
		if _, err := init(f); err != nil {
			return ctlNone, err
		}
		for {
			if cond != nil {
				c, err := cond(f)
				if err != nil {
					return ctlNone, err
				}
				if !c.Truthy() {
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
			if err := f.I.tick(); err != nil {
				return ctlNone, err
			}
		}
	})
}

// compileRange: a range-for over a container's elements, as many as it
// has when the loop begins; its variable is a copy of each, or the
// element itself where it is a reference.
func (cp *compiler) compileRange(n *ast.Node) stmtFn {
	coll, body, name, t := cp.exprOf(n.Kids[0]), cp.stmtOf(n.Kids[1]), n.S, n.T
	return func(f *Frame) (ctl, error) {
		cv, err := coll(f)
		if err != nil {
			return ctlNone, err
		}
		var count int
		switch cv.K {
		case KArr:
			count = len(cv.P.(*Array).Cells)
		case KMap:
			count = len(cv.P.(*Map).Keys)
		default:
			return ctlNone, f.Errorf("range over %s", cv.Describe())
		}
		for i := 0; i < count; i++ {
			elem := rangeElem(cv, i)
			if elem == nil {
				break // the body shrank the container
			}
			f.push()
			if t == ast.TRef {
				f.sc.define(name, elem)
			} else {
				c := f.sc.cell(t)
				if err := c.Set(elem.V); err != nil {
					f.pop()
					return ctlNone, err
				}
				f.sc.define(name, c)
			}
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
func (cp *compiler) compileList(n *ast.Node) exprFn {
	items := make([]exprFn, len(n.Kids))
	for i, k := range n.Kids {
		items[i] = cp.exprOf(k)
	}
	if class, members, ok := strings.Cut(n.C, ":"); ok {
		names := strings.Split(members, ",")
		return func(f *Frame) (Val, error) {
			o := NewObject(class)
			for i, name := range names {
				v := Zero(ast.TI64)
				if i < len(items) {
					var err error
					if v, err = items[i](f); err != nil {
						return Void, err
					}
				}
				o.Fields[name] = &Cell{V: v}
			}
			return Val{K: KObj, P: o}, nil
		}
	}
	return func(f *Frame) (Val, error) {
		a := &Array{Elem: ast.TI64, Cells: make([]Cell, 0, len(items))}
		for _, it := range items {
			v, err := it(f)
			if err != nil {
				return Void, err
			}
			a.Cells = append(a.Cells, Cell{V: v})
		}
		return Val{K: KArr, P: a}, nil
	}
}

// compileLambda: a lambda, capturing its scope by reference.
func (cp *compiler) compileLambda(n *ast.Node) exprFn {
	params, body := n.Kids[0], n.Kids[1]
	for _, d := range params.Kids {
		for _, k := range d.Kids {
			cp.exprOf(k)
		}
	}
	cp.stmtOf(body)
	return func(f *Frame) (Val, error) {
		for s := f.sc; s != nil && !s.captured; s = s.parent {
			s.captured = true
		}
		return Val{K: KFunc, P: &Closure{Params: params, Body: body, Scope: f.sc, This: f.This, Fn: f.Fn}}, nil
	}
}

// compileAssign: = and the compound assignments.
func (cp *compiler) compileAssign(n *ast.Node) exprFn {
	ref, val := cp.refOf(n.Kids[0]), cp.exprOf(n.Kids[1])
	op := strings.TrimSuffix(n.S, "=")
	return func(f *Frame) (Val, error) {
		c, err := ref(f)
		if err != nil {
			return Void, err
		}
		v, err := val(f)
		if err != nil {
			return Void, err
		}
		if op != "" {
			if v, err = Arith(op, c.V, v); err != nil {
				return Void, f.arithError(err)
			}
		}
		if o, ok := c.V.P.(*Object); ok && c.V.K == KObj && v.K == KArr && f.I.Lib.structs[o.Class] != nil {
			// a struct assigned a brace list: member by member in order
			return c.V, assignMembers(f, o, v.P.(*Array))
		}
		if err := c.Set(v); err != nil {
			return Void, f.Errorf("%v", err)
		}
		return c.V, nil
	}
}

// defineLocal makes v a local variable of the frame's scope, named name
// (of the type auto gives it).
func (f *Frame) defineLocal(name string, v Val) {
	c := f.sc.cell(ast.TAuto)
	c.V = v
	f.sc.define(name, c)
}
