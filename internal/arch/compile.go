package arch

import (
	"strings"

	"github.com/ggload/ggload/internal/arch/ast"
)

// A program's most frequent nodes are compiled once, when it is decoded,
// into closures that call their children's closures directly: statements
// (blocks, expressions, ifs, fors) and expressions (literals, names,
// members, calls, operators, assignments). They do what exec and eval do
// for the same node; every other node is left to exec and eval, which
// also run a node's compiled form when it has one.

type exprFn func(f *frame) (Val, error)
type stmtFn func(f *frame) (ctl, error)
type refFn func(f *frame) (*Cell, error)

// compile compiles a decoded program's body.
func compile(p *Program) {
	for _, d := range p.Params.Kids {
		for _, k := range d.Kids {
			exprOf(k)
		}
	}
	stmtOf(p.Body)
}

// stmtOf returns the statement's compiled form, compiling it (and its
// children) on first use; a statement it does not compile runs in exec.
func stmtOf(n *ast.Node) stmtFn {
	if n == nil {
		return func(*frame) (ctl, error) { return ctlNone, nil }
	}
	if c, ok := n.Code.(stmtFn); ok {
		return c
	}
	c := compileStmt(n)
	if c == nil {
		compileChildren(n)
		return func(f *frame) (ctl, error) { return f.exec(n) }
	}
	n.Code = c
	return c
}

// exprOf is stmtOf for expressions.
func exprOf(n *ast.Node) exprFn {
	if c, ok := n.Code.(exprFn); ok {
		return c
	}
	c := compileExpr(n)
	if c == nil {
		compileChildren(n)
		return func(f *frame) (Val, error) { return f.eval(n) }
	}
	n.Code = c
	return c
}

// compileChildren compiles what is below a node left to the interpreter.
func compileChildren(n *ast.Node) {
	switch n.Op {
	case ast.OpSwitch:
		exprOf(n.Kids[0])
		for _, c := range n.Kids[1:] {
			if c.Kids[0] != nil {
				exprOf(c.Kids[0])
			}
			for _, s := range c.Kids[1:] {
				stmtOf(s)
			}
		}
	case ast.OpRange:
		exprOf(n.Kids[0])
		stmtOf(n.Kids[1])
	case ast.OpTry:
		stmtOf(n.Kids[0])
		stmtOf(n.Kids[1])
	case ast.OpDecl, ast.OpReturn, ast.OpThrow:
		for _, k := range n.Kids {
			if k.Op == ast.OpList {
				for _, x := range k.Kids {
					exprOf(x)
				}
			} else {
				exprOf(k)
			}
		}
	case ast.OpLambda:
		for _, d := range n.Kids[0].Kids {
			for _, k := range d.Kids {
				exprOf(k)
			}
		}
		stmtOf(n.Kids[1])
	case ast.OpList:
		for _, k := range n.Kids {
			exprOf(k)
		}
	default:
		for _, k := range n.Kids {
			if k == nil {
				continue
			}
			if isStmt(k.Op) {
				stmtOf(k)
			} else {
				exprOf(k)
			}
		}
	}
}

func isStmt(op ast.Op) bool {
	switch op {
	case ast.OpBlock, ast.OpDecl, ast.OpExpr, ast.OpIf, ast.OpFor, ast.OpRange, ast.OpSwitch, ast.OpCase,
		ast.OpBreak, ast.OpContinue, ast.OpReturn, ast.OpThrow, ast.OpTry:
		return true
	}
	return false
}

func compileStmt(n *ast.Node) stmtFn {
	_, scopedStmt := n.Res.(scoped)
	switch n.Op {
	case ast.OpBlock:
		kids := make([]stmtFn, len(n.Kids))
		for i, k := range n.Kids {
			kids[i] = stmtOf(k)
		}
		return func(f *frame) (ctl, error) {
			if err := f.r.tick(); err != nil {
				return ctlNone, err
			}
			if scopedStmt {
				f.push()
				defer f.pop()
			}
			for _, k := range kids {
				c, err := k(f)
				if err != nil || c != ctlNone {
					return c, err
				}
			}
			return ctlNone, nil
		}
	case ast.OpExpr:
		e := exprOf(n.Kids[0])
		return func(f *frame) (ctl, error) {
			if err := f.r.tick(); err != nil {
				return ctlNone, err
			}
			_, err := e(f)
			return ctlNone, err
		}
	case ast.OpIf:
		var init stmtFn
		if n.Kids[0] != nil {
			init = stmtOf(n.Kids[0])
		}
		cond, then, els := exprOf(n.Kids[1]), stmtOf(n.Kids[2]), stmtOf(n.Kids[3])
		return func(f *frame) (ctl, error) {
			if err := f.r.tick(); err != nil {
				return ctlNone, err
			}
			if scopedStmt {
				f.push()
				defer f.pop()
			}
			if init != nil {
				if _, err := init(f); err != nil {
					return ctlNone, err
				}
			}
			c, err := cond(f)
			if err != nil {
				return ctlNone, err
			}
			if c.truthy() {
				return then(f)
			}
			return els(f)
		}
	case ast.OpFor:
		var init stmtFn
		var cond, post exprFn
		if n.Kids[0] != nil {
			init = stmtOf(n.Kids[0])
		}
		if n.Kids[1] != nil {
			cond = exprOf(n.Kids[1])
		}
		if n.Kids[2] != nil {
			post = exprOf(n.Kids[2])
		}
		body := stmtOf(n.Kids[3])
		return func(f *frame) (ctl, error) {
			if err := f.r.tick(); err != nil {
				return ctlNone, err
			}
			if scopedStmt {
				f.push()
				defer f.pop()
			}
			if init != nil {
				if _, err := init(f); err != nil {
					return ctlNone, err
				}
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
		}
	}
	return nil
}

func compileExpr(n *ast.Node) exprFn {
	switch n.Op {
	case ast.OpInt, ast.OpFloat, ast.OpStr:
		v, _ := (&frame{}).evalNode(n)
		return func(*frame) (Val, error) { return v, nil }
	case ast.OpIdent:
		switch res := n.Res.(type) {
		case Val:
			return func(*frame) (Val, error) { return res, nil }
		case local:
			return func(f *frame) (Val, error) {
				sc := f.sc
				for i := 0; i < res.up && sc != nil; i++ {
					sc = sc.parent
				}
				if sc != nil && res.idx < len(sc.names) && sc.names[res.idx] == res.name {
					return sc.cells[res.idx].V, nil
				}
				return f.evalNode(n) // the binding did not hold: the slow way
			}
		}
		return nil
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
	case ast.OpUnary:
		switch n.S {
		case "!":
			x := exprOf(n.Kids[0])
			return func(f *frame) (Val, error) {
				v, err := x(f)
				if err != nil {
					return vVoid, err
				}
				return vBool(!v.truthy()), nil
			}
		}
		exprOf(n.Kids[0])
		return nil
	case ast.OpBinary:
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
		case "<<":
			return nil // the stringstream case is the interpreter's
		}
		return func(f *frame) (Val, error) {
			x, err := a(f)
			if err != nil {
				return vVoid, err
			}
			y, err := b(f)
			if err != nil {
				return vVoid, err
			}
			v, err := arith(op, x, y)
			if err != nil {
				return vVoid, f.arithError(err)
			}
			return v, nil
		}
	case ast.OpAssign:
		ref, val := refOf(n.Kids[0]), exprOf(n.Kids[1])
		if ref == nil {
			return nil
		}
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
			if err := c.set(v); err != nil {
				return vVoid, f.errorf("%v", err)
			}
			return c.V, nil
		}
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
	case ast.OpCall:
		return compileCall(n)
	}
	return nil
}

// refOf compiles an lvalue: a variable, or a member of an object.
func refOf(n *ast.Node) refFn {
	switch n.Op {
	case ast.OpIdent:
		if res, ok := n.Res.(local); ok {
			return func(f *frame) (*Cell, error) {
				sc := f.sc
				for i := 0; i < res.up && sc != nil; i++ {
					sc = sc.parent
				}
				if sc != nil && res.idx < len(sc.names) && sc.names[res.idx] == res.name {
					return sc.cells[res.idx], nil
				}
				return f.ref(n)
			}
		}
	case ast.OpMember:
		obj, name := exprOf(n.Kids[0]), n.S
		return func(f *frame) (*Cell, error) {
			o, err := obj(f)
			if err != nil {
				return nil, err
			}
			if o.K == KObj {
				ob := o.P.(*Object)
				if c, ok := ob.fields[name]; ok {
					return c, nil
				}
				if ob.class != "llama_hparams" {
					return ob.field(name), nil
				}
			}
			return f.ref(n)
		}
	}
	compileChildren(n)
	return func(f *frame) (*Cell, error) { return f.ref(n) }
}

// compileCall compiles a call whose callee is an object's method, this's
// method or a builtin; other calls (lambdas in variables, programs
// called by name) are the interpreter's.
func compileCall(n *ast.Node) exprFn {
	callee, args := n.Kids[0], n.Kids[1:]
	for _, a := range args {
		if a.Op == ast.OpList {
			for _, k := range a.Kids {
				exprOf(k)
			}
		} else {
			exprOf(a)
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
		if _, isMember := callee.Res.(member); !isMember {
			return nil // a local variable (a lambda) may be it
		}
		name := callee.S
		b, isBuiltin := builtins[name]
		return func(f *frame) (Val, error) {
			if f.this.K == KObj && f.r.hasMethod(f.this, name) {
				m := method{recv: f.this, name: name}
				return f.r.callMethod(f, &m, args)
			}
			if isBuiltin {
				return b(f, args)
			}
			return f.call(n)
		}
	}
	return nil
}
