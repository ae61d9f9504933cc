package arch

import (
	"errors"
	"fmt"
	"strings"

	"github.com/ggload/ggload/internal/arch/ast"
)

// Throw is a C++ exception a program raised (std::runtime_error and the
// like): llama.cpp reports it as the load's error. Try blocks catch it.
type Throw struct {
	Msg  string
	Need *Need // what the model lacked, when that is what the error is about
}

// Need describes a metadata key or a tensor a model lacks or has wrong.
type Need struct {
	Key   string    // a metadata key
	Type  ValueType // the type get_key wants (of the elements, for arrays)
	Array bool      // an array key
	Len   int       // the array length get_key_or_arr wants (0: any)

	Tensor string  // a tensor
	Shape  []int64 // the shape create_tensor wants
	Op     string  // the op its probe would build ("MUL_MAT")
}

func (e *Throw) Error() string { return e.Msg }

// Abort is a GGML_ASSERT or GGML_ABORT that would end llama.cpp's process.
type Abort struct {
	Msg   string
	Where string // the program
}

func (e *Abort) Error() string { return e.Msg + " (in " + e.Where + ")" }

// evalError is a construct the evaluator does not support: a defect of
// ggload's evaluator, never of the model file.
type evalError struct {
	fn  string
	msg string
}

func (e *evalError) Error() string {
	return "arch: evaluating " + e.fn + ": " + e.msg + " (ggload's evaluator does not support this construct)"
}

type ctl uint8

const (
	ctlNone ctl = iota
	ctlBreak
	ctlContinue
	ctlReturn
)

// scope is one block's local variables. The first few live in the scope
// itself, so that a block's declarations allocate nothing more.
type scope struct {
	names  []string
	cells  []*Cell
	parent *scope

	namesBuf [4]string
	cellsBuf [4]*Cell
	store    [4]Cell
	nStore   int
	captured bool // a lambda holds it: never reused
}

// newScope takes a scope from the run's free list, or makes one.
func (r *Run) newScope(parent *scope) *scope {
	var s *scope
	if n := len(r.freeScopes); n > 0 {
		s = r.freeScopes[n-1]
		r.freeScopes = r.freeScopes[:n-1]
	} else {
		s = &scope{}
	}
	s.parent = parent
	s.names, s.cells = s.namesBuf[:0], s.cellsBuf[:0]
	return s
}

// release returns a scope nothing can reach any more to the free list.
func (r *Run) release(s *scope) {
	if s.captured {
		return
	}
	for i := 0; i < s.nStore; i++ {
		s.store[i] = Cell{}
	}
	s.nStore = 0
	clear(s.namesBuf[:])
	clear(s.cellsBuf[:])
	s.parent = nil
	r.freeScopes = append(r.freeScopes, s)
}

// cell returns storage for a new variable of type t.
func (s *scope) cell(t ast.Type) *Cell {
	if s.nStore < len(s.store) {
		c := &s.store[s.nStore]
		s.nStore++
		*c = Cell{T: t}
		return c
	}
	return &Cell{T: t}
}

func (s *scope) lookup(name string) *Cell {
	for sc := s; sc != nil; sc = sc.parent {
		for i := len(sc.names) - 1; i >= 0; i-- {
			if sc.names[i] == name {
				return sc.cells[i]
			}
		}
	}
	return nil
}

func (s *scope) define(name string, c *Cell) {
	s.names = append(s.names, name)
	s.cells = append(s.cells, c)
}

// frame is one function activation.
type frame struct {
	r    *Run
	fn   string
	this Val // the object whose members unqualified names reach
	sc   *scope
	ret  Val
}

// closure is a lambda with the scope it captured by reference.
type closure struct {
	params, body *ast.Node
	sc           *scope
	this         Val
	fn           string
}

// builtinFunc is a function the evaluator provides; it receives its
// arguments unevaluated (some take references).
type builtinFunc func(f *frame, args []*ast.Node) (Val, error)

// method is a builtin bound to its receiver.
type method struct {
	recv Val
	name string
}

func (f *frame) errorf(format string, args ...any) error {
	return &evalError{f.fn, fmt.Sprintf(format, args...)}
}

// arithError places an arithmetic failure: a division by zero is an
// abort where it happened, anything else a defect of the evaluator.
func (f *frame) arithError(err error) error {
	var a *Abort
	if errors.As(err, &a) {
		a.Where = f.fn
		return a
	}
	return f.errorf("%v", err)
}

func (f *frame) push() { f.sc = f.r.newScope(f.sc) }
func (f *frame) pop() {
	s := f.sc
	f.sc = s.parent
	f.r.release(s)
}

// exec runs one statement.
func (f *frame) exec(n *ast.Node) (ctl, error) {
	if n == nil {
		return ctlNone, nil
	}
	if c, ok := n.Code.(stmtFn); ok {
		return c(f)
	}
	return f.execNode(n)
}

// execNode runs a statement by interpreting it.
func (f *frame) execNode(n *ast.Node) (ctl, error) {
	if err := f.r.tick(); err != nil {
		return ctlNone, err
	}
	switch n.Op {
	case ast.OpBlock:
		if n.Res != nil {
			f.push()
			defer f.pop()
		}
		for _, k := range n.Kids {
			c, err := f.exec(k)
			if err != nil || c != ctlNone {
				return c, err
			}
		}
		return ctlNone, nil
	case ast.OpExpr:
		_, err := f.eval(n.Kids[0])
		return ctlNone, err
	case ast.OpDecl:
		return ctlNone, f.declare(n)
	case ast.OpIf:
		if n.Res != nil {
			f.push()
			defer f.pop()
		}
		if n.Kids[0] != nil {
			if _, err := f.exec(n.Kids[0]); err != nil {
				return ctlNone, err
			}
		}
		c, err := f.eval(n.Kids[1])
		if err != nil {
			return ctlNone, err
		}
		if c.truthy() {
			return f.exec(n.Kids[2])
		}
		return f.exec(n.Kids[3])
	case ast.OpFor:
		if n.Res != nil {
			f.push()
			defer f.pop()
		}
		if n.Kids[0] != nil {
			if _, err := f.exec(n.Kids[0]); err != nil {
				return ctlNone, err
			}
		}
		for {
			if n.Kids[1] != nil {
				c, err := f.eval(n.Kids[1])
				if err != nil {
					return ctlNone, err
				}
				if !c.truthy() {
					return ctlNone, nil
				}
			}
			c, err := f.exec(n.Kids[3])
			if err != nil {
				return ctlNone, err
			}
			if c == ctlBreak {
				return ctlNone, nil
			}
			if c == ctlReturn {
				return c, nil
			}
			if n.Kids[2] != nil {
				if _, err := f.eval(n.Kids[2]); err != nil {
					return ctlNone, err
				}
			}
			if err := f.r.tick(); err != nil {
				return ctlNone, err
			}
		}
	case ast.OpRange:
		coll, err := f.eval(n.Kids[0])
		if err != nil {
			return ctlNone, err
		}
		var items []Val
		switch coll.K {
		case KArr:
			for i := range coll.P.(*Array).cells {
				items = append(items, coll.P.(*Array).cells[i].V)
			}
		case KMap:
			m := coll.P.(*cmap)
			for i, k := range m.keys {
				if m.vals != nil {
					items = append(items, pairVal(k, m.vals[i]))
				} else {
					items = append(items, k)
				}
			}
		default:
			return ctlNone, f.errorf("range over %s", coll.describe())
		}
		for _, it := range items {
			f.push()
			c := f.sc.cell(n.T)
			if n.T == ast.TRef {
				c.T = ast.TAuto
			}
			if err := c.set(it); err != nil {
				f.pop()
				return ctlNone, err
			}
			f.sc.define(n.S, c)
			k, err := f.exec(n.Kids[1])
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
	case ast.OpSwitch:
		v, err := f.eval(n.Kids[0])
		if err != nil {
			return ctlNone, err
		}
		start := -1
		for i, c := range n.Kids[1:] {
			if c.Kids[0] == nil {
				continue
			}
			lv, err := f.eval(c.Kids[0])
			if err != nil {
				return ctlNone, err
			}
			if eqVals(v, lv) {
				start = i
				break
			}
		}
		if start < 0 {
			for i, c := range n.Kids[1:] {
				if c.Kids[0] == nil {
					start = i
				}
			}
		}
		if start < 0 {
			return ctlNone, nil
		}
		if n.Res != nil {
			f.push()
			defer f.pop()
		}
		for _, c := range n.Kids[1+start:] {
			for _, s := range c.Kids[1:] {
				k, err := f.exec(s)
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
	case ast.OpBreak:
		return ctlBreak, nil
	case ast.OpContinue:
		return ctlContinue, nil
	case ast.OpReturn:
		if len(n.Kids) > 0 {
			v, err := f.eval(n.Kids[0])
			if err != nil {
				return ctlNone, err
			}
			f.ret = v
		}
		return ctlReturn, nil
	case ast.OpThrow:
		v, err := f.eval(n.Kids[0])
		if err != nil {
			return ctlNone, err
		}
		if v.K == KStr {
			return ctlNone, &Throw{Msg: v.S}
		}
		return ctlNone, &Throw{Msg: v.describe()}
	case ast.OpTry:
		c, err := f.exec(n.Kids[0])
		var t *Throw
		if errors.As(err, &t) {
			return f.exec(n.Kids[1])
		}
		return c, err
	}
	return ctlNone, f.errorf("statement %s", n.Op)
}

func pairVal(k, v Val) Val {
	o := newObject("pair")
	o.fields["first"] = &Cell{V: k}
	o.fields["second"] = &Cell{V: v}
	return Val{K: KObj, P: o}
}

// declare runs a declaration.
func (f *frame) declare(n *ast.Node) error {
	if n.T == ast.TRef {
		if len(n.Kids) == 0 {
			return f.errorf("reference %s without an initializer", n.S)
		}
		c, err := f.ref(n.Kids[0])
		if err != nil {
			// a reference bound to a temporary (const auto & x = f())
			v, err2 := f.eval(n.Kids[0])
			if err2 != nil {
				return err2
			}
			c = &Cell{V: v}
		}
		f.sc.define(n.S, c)
		return nil
	}
	c := f.sc.cell(n.T)
	if n.T == ast.TObj {
		v, err := f.r.container(n.C)
		if err != nil {
			return f.errorf("%s %s: %v", n.C, n.S, err)
		}
		c.V = v
		c.T = ast.TAuto
		if len(n.Kids) > 0 {
			init := n.Kids[0]
			if init.Op == ast.OpList {
				if v.K == KArr {
					a := v.P.(*Array)
					for i, k := range init.Kids {
						x, err := f.eval(k)
						if err != nil {
							return err
						}
						if i >= len(a.cells) {
							if a.fixed {
								return f.errorf("too many initializers for %s", n.C)
							}
							a.cells = append(a.cells, Cell{T: a.elem})
						}
						if err := a.cells[i].set(x); err != nil {
							return err
						}
					}
				}
			} else {
				x, err := f.eval(init)
				if err != nil {
					return err
				}
				if err := c.set(x); err != nil {
					return err
				}
			}
		}
		f.sc.define(n.S, c)
		return nil
	}
	c.V = zeroOf(n.T)
	if len(n.Kids) > 0 {
		init := n.Kids[0]
		var v Val
		var err error
		if init.Op == ast.OpList {
			if len(init.Kids) == 0 {
				v = zeroOf(n.T)
			} else {
				v, err = f.eval(init.Kids[0])
			}
		} else {
			v, err = f.eval(init)
		}
		if err != nil {
			return err
		}
		if err := c.set(v); err != nil {
			return f.errorf("%s = %s: %v", n.S, v.describe(), err)
		}
	}
	f.sc.define(n.S, c)
	return nil
}

// lookupNode finds an identifier, by its static binding when it has one.
func (f *frame) lookupNode(n *ast.Node) (*Cell, Val, error) {
	switch res := n.Res.(type) {
	case local:
		sc := f.sc
		for i := 0; i < res.up && sc != nil; i++ {
			sc = sc.parent
		}
		if sc != nil && res.idx < len(sc.names) && sc.names[res.idx] == res.name {
			return sc.cells[res.idx], vVoid, nil
		}
	case member:
		return f.lookupMember(n.S)
	}
	return f.lookup(n.S)
}

// lookup finds an identifier: locals, then the members of this, then the
// global constants.
func (f *frame) lookup(name string) (*Cell, Val, error) {
	if c := f.sc.lookup(name); c != nil {
		return c, vVoid, nil
	}
	return f.lookupMember(name)
}

// lookupMember finds a name that is no local variable.
func (f *frame) lookupMember(name string) (*Cell, Val, error) {
	switch name {
	case "this":
		return nil, f.this, nil
	case "__func__":
		_, fn, _ := strings.Cut(f.fn, "::")
		if fn == "" {
			fn = f.fn
		}
		return nil, vStr(fn), nil
	}
	if f.this.K == KObj {
		o := f.this.P.(*Object)
		if c, ok := o.fields[name]; ok {
			return c, vVoid, nil
		}
	}
	if v, ok := f.r.global(name); ok {
		return nil, v, nil
	}
	if f.this.K == KObj && f.this.P == f.r.model {
		// a member of the model not yet assigned: a null pointer
		return f.r.model.field(name), vVoid, nil
	}
	return nil, vVoid, f.errorf("unknown name %s", name)
}

// eval evaluates an expression.
func (f *frame) eval(n *ast.Node) (Val, error) {
	if c, ok := n.Code.(exprFn); ok {
		return c(f)
	}
	return f.evalNode(n)
}

// evalNode evaluates an expression by interpreting it.
func (f *frame) evalNode(n *ast.Node) (Val, error) {
	switch n.Op {
	case ast.OpInt:
		t := ast.TI32
		if n.I > 1<<31-1 || n.I < -1<<31 {
			t = ast.TI64
		}
		return vInt(n.I, t), nil
	case ast.OpFloat:
		return Val{K: KFloat, T: ast.TF64, F: n.F}, nil
	case ast.OpStr:
		return vStr(n.S), nil
	case ast.OpIdent:
		if v, ok := n.Res.(Val); ok {
			return v, nil
		}
		c, v, err := f.lookupNode(n)
		if err != nil {
			return vVoid, err
		}
		if c != nil {
			return c.V, nil
		}
		return v, nil
	case ast.OpMember:
		obj, err := f.eval(n.Kids[0])
		if err != nil {
			return vVoid, err
		}
		return f.member(obj, n.S)
	case ast.OpIndex:
		c, err := f.ref(n)
		if err != nil {
			return vVoid, err
		}
		return c.V, nil
	case ast.OpCall:
		return f.call(n)
	case ast.OpUnary:
		return f.unary(n)
	case ast.OpBinary:
		switch n.S {
		case "&&", "||":
			a, err := f.eval(n.Kids[0])
			if err != nil {
				return vVoid, err
			}
			if a.truthy() == (n.S == "||") {
				return vBool(a.truthy()), nil
			}
			b, err := f.eval(n.Kids[1])
			if err != nil {
				return vVoid, err
			}
			return vBool(b.truthy()), nil
		}
		a, err := f.eval(n.Kids[0])
		if err != nil {
			return vVoid, err
		}
		b, err := f.eval(n.Kids[1])
		if err != nil {
			return vVoid, err
		}
		if n.S == "<<" && a.K == KObj && a.P.(*Object).class == "stringstream" {
			sb, err := convert(b, ast.TStr)
			if err != nil {
				sb = vStr(formatValue(b))
			}
			c := a.P.(*Object).field("str")
			c.V = vStr(c.V.S + sb.S)
			return a, nil
		}
		v, err := arith(n.S, a, b)
		if err != nil {
			return vVoid, f.arithError(err)
		}
		return v, nil
	case ast.OpAssign:
		return f.assign(n)
	case ast.OpCond:
		c, err := f.eval(n.Kids[0])
		if err != nil {
			return vVoid, err
		}
		if c.truthy() {
			return f.eval(n.Kids[1])
		}
		return f.eval(n.Kids[2])
	case ast.OpCast:
		v, err := f.eval(n.Kids[0])
		if err != nil {
			return vVoid, err
		}
		if n.T == ast.TAuto || n.T == ast.TRef || n.T == ast.TPtr || n.T == ast.TObj {
			return v, nil
		}
		cv, err := convert(v, n.T)
		if err != nil {
			return vVoid, f.errorf("%v", err)
		}
		return cv, nil
	case ast.OpList:
		// a brace list as a value: the shape of a tensor
		a := &Array{elem: ast.TI64}
		for _, k := range n.Kids {
			v, err := f.eval(k)
			if err != nil {
				return vVoid, err
			}
			a.cells = append(a.cells, Cell{V: v})
		}
		return Val{K: KArr, P: a}, nil
	case ast.OpLambda:
		for s := f.sc; s != nil && !s.captured; s = s.parent {
			s.captured = true
		}
		return Val{K: KFunc, P: &closure{params: n.Kids[0], body: n.Kids[1], sc: f.sc, this: f.this, fn: f.fn}}, nil
	}
	return vVoid, f.errorf("expression %s", n.Op)
}

func (f *frame) unary(n *ast.Node) (Val, error) {
	switch n.S {
	case "pre++", "pre--", "post++", "post--":
		c, err := f.ref(n.Kids[0])
		if err != nil {
			return vVoid, err
		}
		old := c.V
		op := "+"
		if strings.HasSuffix(n.S, "--") {
			op = "-"
		}
		nv, err := arith(op, old, vInt(1, ast.TI32))
		if err != nil {
			return vVoid, f.errorf("%v", err)
		}
		if err := c.set(nv); err != nil {
			return vVoid, err
		}
		if strings.HasPrefix(n.S, "post") {
			return old, nil
		}
		return c.V, nil
	}
	v, err := f.eval(n.Kids[0])
	if err != nil {
		return vVoid, err
	}
	switch n.S {
	case "!":
		return vBool(!v.truthy()), nil
	case "-":
		if v.K == KFloat {
			return Val{K: KFloat, T: v.T, F: -v.F}, nil
		}
		if v.K == KInt {
			t := common(v.T, ast.TI32)
			return vInt(-v.I, t), nil
		}
	case "+":
		return v, nil
	case "~":
		if v.K == KInt {
			t := common(v.T, ast.TI32)
			return vInt(^v.I, t), nil
		}
	case "*", "&":
		return v, nil // pointers and the objects they point to are the same values here
	}
	return vVoid, f.errorf("operator %s on %s", n.S, v.describe())
}

func (f *frame) assign(n *ast.Node) (Val, error) {
	c, err := f.ref(n.Kids[0])
	if err != nil {
		return vVoid, err
	}
	v, err := f.eval(n.Kids[1])
	if err != nil {
		return vVoid, err
	}
	if n.S != "=" {
		op := strings.TrimSuffix(n.S, "=")
		if v, err = arith(op, c.V, v); err != nil {
			return vVoid, f.arithError(err)
		}
	}
	if err := c.set(v); err != nil {
		return vVoid, f.errorf("%v", err)
	}
	return c.V, nil
}

// ref evaluates an lvalue to its storage.
func (f *frame) ref(n *ast.Node) (*Cell, error) {
	switch n.Op {
	case ast.OpIdent:
		c, _, err := f.lookupNode(n)
		if err != nil {
			return nil, err
		}
		if c == nil {
			return nil, f.errorf("%s is not assignable", n.S)
		}
		return c, nil
	case ast.OpMember:
		obj, err := f.eval(n.Kids[0])
		if err != nil {
			return nil, err
		}
		if obj.K == KObj {
			o := obj.P.(*Object)
			if o == f.r.hparams.obj || o.class == "llama_hparams" {
				c, ok := o.fields[n.S]
				if !ok {
					return nil, f.errorf("llama_hparams has no member %s", n.S)
				}
				return c, nil
			}
			return o.field(n.S), nil
		}
		if obj.K == KNull {
			return nil, &Abort{Msg: "null pointer dereference reading ." + n.S, Where: f.fn}
		}
		return nil, f.errorf("member %s of %s is not assignable", n.S, obj.describe())
	case ast.OpIndex:
		a, err := f.eval(n.Kids[0])
		if err != nil {
			return nil, err
		}
		i, err := f.eval(n.Kids[1])
		if err != nil {
			return nil, err
		}
		switch a.K {
		case KArr:
			if i.K != KInt {
				return nil, f.errorf("index %s", i.describe())
			}
			idx := i.I
			if i.T == ast.TU64 && idx < 0 {
				idx = 1 << 62
			}
			c, err := a.P.(*Array).at(idx)
			if err != nil {
				// std::array's operator[] does not check: reading past the
				// end is undefined in llama.cpp; refuse it here
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
	case ast.OpUnary:
		if n.S == "*" {
			return f.ref(n.Kids[0])
		}
	}
	return nil, f.errorf("%s is not an lvalue", n.Op)
}

// member reads obj.name.
func (f *frame) member(obj Val, name string) (Val, error) {
	switch obj.K {
	case KObj:
		o := obj.P.(*Object)
		if c, ok := o.fields[name]; ok {
			return c.V, nil
		}
		if m, ok := f.r.methodOf(obj, name); ok {
			return m, nil
		}
		if o.class == "llama_hparams" {
			return vVoid, f.errorf("llama_hparams has no member %s", name)
		}
		if _, ok := layerStructs[name]; ok && o.class == "llama_layer" {
			return o.field(name).V, nil
		}
		return vNull, nil // a member never assigned: a null pointer
	case KTensor:
		t := obj.P.(*Tensor)
		switch name {
		case "ne":
			a := newArray(ast.TI64, 4, true)
			for i := range a.cells {
				a.cells[i].V = vInt(t.Ne[i], ast.TI64)
			}
			return Val{K: KArr, P: a}, nil
		case "type":
			return vInt(int64(t.Type), ast.TI32), nil
		case "name":
			return vStr(t.Name), nil
		case "tensor":
			return obj, nil // llama_tensor_weight::tensor
		}
	case KNull:
		return vVoid, &Abort{Msg: "null pointer dereference reading ->" + name, Where: f.fn}
	case KIter:
		if m, ok := obj.P.(*cmap); ok && obj.I < int64(len(m.keys)) {
			switch name {
			case "first":
				return m.keys[obj.I], nil
			case "second":
				if m.vals != nil {
					return m.vals[obj.I], nil
				}
			}
		}
	}
	if m, ok := f.r.methodOf(obj, name); ok {
		return m, nil
	}
	return vVoid, f.errorf("member %s of %s", name, obj.describe())
}

// call evaluates a call expression.
func (f *frame) call(n *ast.Node) (Val, error) {
	callee := n.Kids[0]
	args := n.Kids[1:]
	var fn Val
	switch callee.Op {
	case ast.OpIdent:
		name := callee.S
		if _, isMember := callee.Res.(member); !isMember {
			if c := f.sc.lookup(name); c != nil {
				fn = c.V
				break
			}
		}
		if f.this.K == KObj && f.r.hasMethod(f.this, name) {
			m := method{recv: f.this, name: name}
			return f.r.callMethod(f, &m, args)
		}
		if b, ok := builtins[name]; ok {
			return b(f, args)
		}
		if p := f.r.prog(name); p != nil {
			return f.r.invoke(f, p, f.this, args)
		}
		return vVoid, f.errorf("call of unknown function %s", name)
	case ast.OpMember:
		obj, err := f.eval(callee.Kids[0])
		if err != nil {
			return vVoid, err
		}
		if obj.K == KNull {
			return vVoid, &Abort{Msg: "null pointer dereference calling " + callee.S, Where: f.fn}
		}
		if !f.r.hasMethod(obj, callee.S) {
			return vVoid, f.errorf("no method %s on %s", callee.S, obj.describe())
		}
		m := method{recv: obj, name: callee.S}
		return f.r.callMethod(f, &m, args)
	default:
		v, err := f.eval(callee)
		if err != nil {
			return vVoid, err
		}
		fn = v
	}
	switch fp := fn.P.(type) {
	case *closure:
		return f.r.invokeClosure(f, fp, args)
	case *method:
		return f.r.callMethod(f, fp, args)
	case *Program:
		return f.r.invoke(f, fp, f.this, args)
	}
	return vVoid, f.errorf("call of %s", fn.describe())
}

// bindParams binds a function's parameters in a new scope of callee,
// evaluating the arguments in the caller's frame.
func bindParams(caller, callee *frame, params *ast.Node, args []*ast.Node) error {
	if len(args) > len(params.Kids) {
		return caller.errorf("%s: %d arguments for %d parameters", callee.fn, len(args), len(params.Kids))
	}
	for i, p := range params.Kids {
		var c *Cell
		switch {
		case i < len(args) && p.T == ast.TRef:
			rc, err := caller.ref(args[i])
			if err != nil {
				v, err2 := caller.eval(args[i])
				if err2 != nil {
					return err2
				}
				rc = &Cell{V: v}
			}
			c = rc
		case i < len(args):
			v, err := caller.eval(args[i])
			if err != nil {
				return err
			}
			c = callee.sc.cell(p.T)
			if p.T == ast.TObj {
				c.T = ast.TAuto
			}
			if err := c.set(v); err != nil {
				return caller.errorf("argument %d of %s: %v", i, callee.fn, err)
			}
		case len(p.Kids) > 0:
			v, err := callee.eval(p.Kids[0])
			if err != nil {
				return err
			}
			c = callee.sc.cell(p.T)
			if err := c.set(v); err != nil {
				return err
			}
		default:
			return caller.errorf("%s: missing argument %d", callee.fn, i)
		}
		if p.S != "" {
			callee.sc.define(p.S, c)
		}
	}
	return nil
}

// exprString prints an expression as C++, for assertion messages.
func exprString(n *ast.Node) string {
	if n == nil {
		return ""
	}
	switch n.Op {
	case ast.OpInt:
		return fmt.Sprint(n.I)
	case ast.OpFloat:
		return fmt.Sprint(n.F)
	case ast.OpStr:
		return fmt.Sprintf("%q", n.S)
	case ast.OpIdent:
		return n.S
	case ast.OpMember:
		return exprString(n.Kids[0]) + "." + n.S
	case ast.OpIndex:
		return exprString(n.Kids[0]) + "[" + exprString(n.Kids[1]) + "]"
	case ast.OpCall:
		var as []string
		for _, a := range n.Kids[1:] {
			as = append(as, exprString(a))
		}
		return exprString(n.Kids[0]) + "(" + strings.Join(as, ", ") + ")"
	case ast.OpUnary:
		switch {
		case strings.HasPrefix(n.S, "pre"):
			return n.S[3:] + exprString(n.Kids[0])
		case strings.HasPrefix(n.S, "post"):
			return exprString(n.Kids[0]) + n.S[4:]
		}
		return n.S + exprString(n.Kids[0])
	case ast.OpBinary, ast.OpAssign:
		return exprString(n.Kids[0]) + " " + n.S + " " + exprString(n.Kids[1])
	case ast.OpCond:
		return exprString(n.Kids[0]) + " ? " + exprString(n.Kids[1]) + " : " + exprString(n.Kids[2])
	case ast.OpCast:
		return "(" + n.T.String() + ") " + exprString(n.Kids[0])
	case ast.OpList:
		var as []string
		for _, a := range n.Kids {
			as = append(as, exprString(a))
		}
		return "{" + strings.Join(as, ", ") + "}"
	}
	return n.Op.String()
}
