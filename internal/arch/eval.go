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
	if r.capture != nil {
		r.capture.scopeEnds(s)
	}
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

// exec runs a compiled statement.
func (f *frame) exec(n *ast.Node) (ctl, error) {
	if n == nil || n.Op == ast.OpNil {
		return ctlNone, nil
	}
	if c, ok := n.Code.(*code); ok && c.stmt != nil {
		return c.stmt(f)
	}
	return ctlNone, f.errorf("statement %s was never compiled", n.Op)
}

// eval evaluates a compiled expression.
func (f *frame) eval(n *ast.Node) (Val, error) {
	if c, ok := n.Code.(*code); ok && c.expr != nil {
		return c.expr(f)
	}
	return vVoid, f.errorf("expression %s was never compiled", n.Op)
}

// ref evaluates a compiled expression to its storage.
func (f *frame) ref(n *ast.Node) (*Cell, error) {
	if c, ok := n.Code.(*code); ok && c.ref != nil {
		return c.ref(f)
	}
	return nil, f.errorf("%s is not an lvalue", n.Op)
}

// rangeItems are what a range-for walks: an array's elements, a map's
// pairs (a set's keys).
func (f *frame) rangeItems(coll Val) ([]Val, error) {
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
		return nil, f.errorf("range over %s", coll.describe())
	}
	return items, nil
}

func pairVal(k, v Val) Val {
	o := newObject("pair")
	o.fields["first"] = &Cell{V: k}
	o.fields["second"] = &Cell{V: v}
	return Val{K: KObj, P: o}
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
	if b, ok := builtins[name]; ok && strings.HasPrefix(name, "ggml_") {
		// a ggml function as a value (a default argument, a callback)
		return nil, Val{K: KFunc, P: b}, nil
	}
	if f.this.K == KObj && (f.this.P == f.r.model || f.this.P.(*Object).share && name != strings.ToUpper(name)) {
		// a member of the model (or of a graph object: a lower-case name,
		// the pin's constants and macros are upper-case) not yet
		// assigned: a null pointer
		return f.this.P.(*Object).field(name), vVoid, nil
	}
	return nil, vVoid, f.errorf("unknown name %s", name)
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
			return dims(ast.TI64, t.Ne), nil
		case "type":
			return vInt(int64(t.Type), ast.TI32), nil
		case "name":
			return vStr(t.Name), nil
		case "tensor":
			return obj, nil // llama_tensor_weight::tensor
		}
	case KArr:
		// a std::pair made by a brace list
		if a := obj.P.(*Array); len(a.cells) == 2 && (name == "first" || name == "second") {
			if name == "first" {
				return a.cells[0].V, nil
			}
			return a.cells[1].V, nil
		}
	case KNull:
		return vVoid, &Abort{Msg: "null pointer dereference reading ->" + name, Where: f.fn}
	case KNative:
		if v, ok := nativeMember(obj, name); ok {
			return v, nil
		}
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

// callValue calls a callable value: a lambda, a bound method, a program,
// a function of the evaluator's.
func (f *frame) callValue(fn Val, args []*ast.Node) (Val, error) {
	switch fp := fn.P.(type) {
	case *closure:
		return f.r.invokeClosure(f, fp, args)
	case *method:
		return f.r.callMethod(f, fp, args)
	case *Program:
		return f.r.invoke(f, fp, f.this, args)
	case builtinFunc:
		return fp(f, args)
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
