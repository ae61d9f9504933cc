package cpp

import (
	"errors"
	"fmt"
	"strings"

	"github.com/ggload/ggload/gguf"
	"github.com/ggload/ggload/internal/replay/cpp/ast"
)

// Throw is a C++ exception a program raised (std::runtime_error and the
// like): llama.cpp reports it as the load's error. Try blocks catch it.
type Throw struct {
	Msg  string
	Need *Need // what the model lacked, when that is what the error is about
}

// Need describes a metadata key or a tensor a model lacks or has wrong.
type Need struct {
	Key   string         // a metadata key
	Type  gguf.ValueType // the type get_key wants (of the elements, for arrays)
	Array bool           // an array key
	Len   int            // the array length get_key_or_arr wants (0: any)

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

// EvalError is a construct the evaluator does not support: a defect of
// ggload's evaluator, never of the model file.
type EvalError struct {
	Fn  string
	Msg string
}

func (e *EvalError) Error() string {
	return "arch: evaluating " + e.Fn + ": " + e.Msg + " (ggload's evaluator does not support this construct)"
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

// newScope takes a scope from the interpreter's free list, or makes one.
func (in *Interp) newScope(parent *scope) *scope {
	var s *scope
	if n := len(in.free); n > 0 {
		s = in.free[n-1]
		in.free = in.free[:n-1]
	} else {
		s = &scope{}
	}
	s.parent = parent
	s.names, s.cells = s.namesBuf[:0], s.cellsBuf[:0]
	return s
}

// release returns a scope nothing can reach any more to the free list.
func (in *Interp) release(s *scope) {
	if in.capture != nil {
		in.capture.scopeEnds(s)
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
	in.free = append(in.free, s)
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

// Frame is one function activation.
type Frame struct {
	I    *Interp
	Fn   string
	This Val // the object whose members unqualified names reach
	sc   *scope
	Ret  Val
}

// Closure is a lambda with the scope it captured by reference.
type Closure struct {
	Params, Body *ast.Node
	Scope        *scope
	This         Val
	Fn           string
}

// Builtin is a function the evaluator provides; it receives its
// arguments unevaluated (some take references).
type Builtin func(f *Frame, args []*ast.Node) (Val, error)

// Method is a builtin bound to its receiver.
type Method struct {
	Recv Val
	Name string
}

func (f *Frame) Errorf(format string, args ...any) error {
	return &EvalError{f.Fn, fmt.Sprintf(format, args...)}
}

// arithError places an arithmetic failure: a division by zero is an
// abort where it happened, anything else a defect of the evaluator.
func (f *Frame) arithError(err error) error {
	var a *Abort
	if errors.As(err, &a) {
		a.Where = f.Fn
		return a
	}
	return f.Errorf("%v", err)
}

func (f *Frame) push() { f.sc = f.I.newScope(f.sc) }
func (f *Frame) pop() {
	s := f.sc
	f.sc = s.parent
	f.I.release(s)
}

// Exec runs a compiled statement.
func (f *Frame) Exec(n *ast.Node) (ctl, error) {
	if n == nil || n.Op == ast.OpNil {
		return ctlNone, nil
	}
	if c, ok := n.Code.(*code); ok && c.stmt != nil {
		return c.stmt(f)
	}
	return ctlNone, f.Errorf("statement %s was never compiled", n.Op)
}

// Eval evaluates a compiled expression.
func (f *Frame) Eval(n *ast.Node) (Val, error) {
	if c, ok := n.Code.(*code); ok && c.expr != nil {
		return c.expr(f)
	}
	return Void, f.Errorf("expression %s was never compiled", n.Op)
}

// Ref evaluates a compiled expression to its storage.
func (f *Frame) Ref(n *ast.Node) (*Cell, error) {
	if c, ok := n.Code.(*code); ok && c.ref != nil {
		return c.ref(f)
	}
	return nil, f.Errorf("%s is not an lvalue", n.Op)
}

// rangeElem is the i-th element a range-for walks over coll, an array
// or a map, nil past its end: an array's element's own cell, a map's
// pair whose second is the map's own value cell, a set's key.
func rangeElem(coll Val, i int) *Cell {
	if coll.K == KArr {
		if a := coll.P.(*Array); i < len(a.Cells) {
			return &a.Cells[i]
		}
		return nil
	}
	m := coll.P.(*Map)
	switch {
	case i >= len(m.Keys):
		return nil
	case m.Vals == nil:
		return &Cell{V: m.Keys[i]}
	}
	o := NewObject("pair")
	o.Fields["first"] = &Cell{V: m.Keys[i]}
	o.Fields["second"] = m.Vals[i]
	return &Cell{V: Val{K: KObj, P: o}}
}

func Pair(k, v Val) Val {
	o := NewObject("pair")
	o.Fields["first"] = &Cell{V: k}
	o.Fields["second"] = &Cell{V: v}
	return Val{K: KObj, P: o}
}

// lookup finds an identifier: locals, then the members of this, then the
// global constants.
func (f *Frame) lookup(name string) (*Cell, Val, error) {
	if c := f.sc.lookup(name); c != nil {
		return c, Void, nil
	}
	return f.lookupMember(name)
}

// lookupMember finds a name that is no local variable.
func (f *Frame) lookupMember(name string) (*Cell, Val, error) {
	switch name {
	case "this":
		return nil, f.This, nil
	case "__func__":
		_, fn, _ := strings.Cut(f.Fn, "::")
		if fn == "" {
			fn = f.Fn
		}
		return nil, Str(fn), nil
	}
	if f.This.K == KObj {
		o := f.This.P.(*Object)
		if c, ok := o.Fields[name]; ok {
			return c, Void, nil
		}
	}
	if v, ok := Constant(name); ok {
		return nil, v, nil
	}
	if v, ok := f.I.Host.Global(name); ok {
		return nil, v, nil
	}
	if b, ok := f.I.Lib.builtins[name]; ok && strings.HasPrefix(name, "ggml_") {
		// a ggml function as a value (a default argument, a callback)
		return nil, Val{K: KFunc, P: b}, nil
	}
	if o, ok := f.This.P.(*Object); ok && f.This.K == KObj && (o.Open || o.Shared && name != strings.ToUpper(name)) {
		// a member of an open object (the model), or of a graph object
		// (a lower-case name: the pin's constants and macros are
		// upper-case), not yet assigned: a null pointer
		return f.This.P.(*Object).Field(name), Void, nil
	}
	return nil, Void, f.Errorf("unknown name %s", name)
}

// member reads obj.name.
func (f *Frame) member(obj Val, name string) (Val, error) {
	switch obj.K {
	case KObj:
		o := obj.P.(*Object)
		if c, ok := o.Fields[name]; ok {
			return c.V, nil
		}
		if m, ok := f.I.methodOf(obj, name); ok {
			return m, nil
		}
		if o.Strict {
			return Void, f.Errorf("%s has no member %s", o.Class, name)
		}
		if o.Members != nil && o.Members(name) != nil {
			return o.Field(name).V, nil
		}
		return Null, nil // a member never assigned: a null pointer
	case KTensor:
		if hv, ok := obj.P.(HostValue); ok {
			if v, ok := hv.Member(name); ok {
				if v.K == KVoid {
					return obj, nil // the value itself (llama_tensor_weight::tensor)
				}
				return v, nil
			}
		}
	case KArr:
		// a std::pair made by a brace list
		if a := obj.P.(*Array); len(a.Cells) == 2 && (name == "first" || name == "second") {
			if name == "first" {
				return a.Cells[0].V, nil
			}
			return a.Cells[1].V, nil
		}
	case KNull:
		msg := "null pointer dereference reading ->" + name
		if obj.S != "" {
			// a host's null that says what it stands for
			msg += " of " + obj.S
		}
		return Void, &Abort{Msg: msg, Where: f.Fn}
	case KNative:
		if v, ok := nativeMember(obj, name); ok {
			return v, nil
		}
	case KIter:
		if m, ok := obj.P.(*Map); ok && obj.I < int64(len(m.Keys)) {
			switch name {
			case "first":
				return m.Keys[obj.I], nil
			case "second":
				if m.Vals != nil {
					return m.Vals[obj.I].V, nil
				}
			}
		}
	}
	if m, ok := f.I.methodOf(obj, name); ok {
		return m, nil
	}
	return Void, f.Errorf("member %s of %s", name, obj.Describe())
}

// callValue calls a callable value: a lambda, a bound method, a program,
// a function of the evaluator's.
func (f *Frame) callValue(fn Val, args []*ast.Node) (Val, error) {
	switch fp := fn.P.(type) {
	case *Closure:
		return f.I.invokeClosure(f, fp, args)
	case *Method:
		return f.I.callMethod(f, fp, args)
	case *Program:
		return f.I.Invoke(f, fp, f.This, args)
	case Builtin:
		return fp(f, args)
	}
	return Void, f.Errorf("call of %s", fn.Describe())
}

// BindParams binds a function's parameters in a new scope of callee,
// evaluating the arguments in the caller's frame.
func BindParams(caller, callee *Frame, params *ast.Node, args []*ast.Node) error {
	if len(args) > len(params.Kids) {
		return caller.Errorf("%s: %d arguments for %d parameters", callee.Fn, len(args), len(params.Kids))
	}
	for i, p := range params.Kids {
		var c *Cell
		switch {
		case i < len(args) && p.T == ast.TRef:
			rc, err := caller.Ref(args[i])
			if err != nil {
				v, err2 := caller.Eval(args[i])
				if err2 != nil {
					return err2
				}
				rc = &Cell{V: v}
			}
			c = rc
		case i < len(args):
			v, err := caller.Eval(args[i])
			if err != nil {
				return err
			}
			c = callee.sc.cell(p.T)
			if p.T == ast.TObj {
				c.T = ast.TAuto
			}
			if err := c.Set(v); err != nil {
				return caller.Errorf("argument %d of %s: %v", i, callee.Fn, err)
			}
		case len(p.Kids) > 0:
			v, err := callee.defaultArg(p)
			if err != nil {
				return err
			}
			c = callee.sc.cell(p.T)
			if err := c.Set(v); err != nil {
				return err
			}
		default:
			return caller.Errorf("%s: missing argument %d", callee.Fn, i)
		}
		if p.S != "" {
			callee.sc.define(p.S, c)
		}
	}
	return nil
}

// defaultArg is a parameter's default argument: "= {}" of a struct of
// the headers (the parameter names it) a value-initialized one.
func (f *Frame) defaultArg(d *ast.Node) (Val, error) {
	if fields, ok := f.I.Lib.structs[d.C]; ok && d.C != "" && d.Kids[0].Op == ast.OpList && len(d.Kids[0].Kids) == 0 {
		o, err := f.I.Host.NewStruct(d.C, fields)
		if err != nil {
			return Void, err
		}
		return Val{K: KObj, P: o}, nil
	}
	return f.Eval(d.Kids[0])
}

// ExprString prints an expression as C++, for assertion messages.
func ExprString(n *ast.Node) string {
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
		return ExprString(n.Kids[0]) + "." + n.S
	case ast.OpIndex:
		return ExprString(n.Kids[0]) + "[" + ExprString(n.Kids[1]) + "]"
	case ast.OpCall:
		var as []string
		for _, a := range n.Kids[1:] {
			as = append(as, ExprString(a))
		}
		return ExprString(n.Kids[0]) + "(" + strings.Join(as, ", ") + ")"
	case ast.OpUnary:
		switch {
		case strings.HasPrefix(n.S, "pre"):
			return n.S[3:] + ExprString(n.Kids[0])
		case strings.HasPrefix(n.S, "post"):
			return ExprString(n.Kids[0]) + n.S[4:]
		}
		return n.S + ExprString(n.Kids[0])
	case ast.OpBinary, ast.OpAssign:
		return ExprString(n.Kids[0]) + " " + n.S + " " + ExprString(n.Kids[1])
	case ast.OpCond:
		return ExprString(n.Kids[0]) + " ? " + ExprString(n.Kids[1]) + " : " + ExprString(n.Kids[2])
	case ast.OpCast:
		if n.T == ast.TF32 && n.Kids[0].Op == ast.OpFloat {
			return ExprString(n.Kids[0]) // a float literal (1.0f)
		}
		return "(" + n.T.String() + ") " + ExprString(n.Kids[0])
	case ast.OpList:
		var as []string
		for _, a := range n.Kids {
			as = append(as, ExprString(a))
		}
		return "{" + strings.Join(as, ", ") + "}"
	}
	return n.Op.String()
}
