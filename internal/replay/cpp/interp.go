package cpp

import (
	"fmt"

	"github.com/ggload/ggload/internal/replay/cpp/ast"
)

// Interp runs programs: the state of one evaluation (a replay of one
// model) that its frames share. What the programs reach beyond the
// C++ the interpreter knows (constants, objects with methods, structs of
// the headers) its Host answers.
type Interp struct {
	Lib     *Library // the programs and what they reach
	Host    Host
	steps   int64
	free    []*scope // scopes no frame uses any more
	capture *capture // CallLocals' variables
	// Session is what the builtins of the call under way work on (a graph
	// being built): set by whoever makes the call.
	Session any
}

// Host is what an Interp's programs reach beyond the interpreter.
type Host interface {
	// Global is a name that is no local variable and no member: a
	// constant.
	Global(name string) (Val, bool)
	// Function is the program of a free function, nil if none.
	Function(name string) *Program
	// HasMethod and CallMethod are the methods of the host's objects
	// (the containers' and strings' are the interpreter's own).
	HasMethod(obj Val, name string) bool
	CallMethod(f *Frame, m *Method, args []*ast.Node) (Val, error)
	// ConstLen is a constant that sizes an array (LLAMA_MAX_LAYERS).
	ConstLen(name string) (int64, bool)
	// NewStruct is a value-initialized struct of the headers.
	NewStruct(class string, fields []FieldDef) (*Object, error)
}

// HostValue is a host's value of kind KTensor: its members.
type HostValue interface {
	// Member is the value of a member; a Val of kind KVoid names the
	// value itself.
	Member(name string) (Val, bool)
	// Describe names the value in errors.
	Describe() string
}

// stepLimit bounds a replay's statements: programs of the pin run a few
// hundred per layer.
const stepLimit = 1 << 28

func (in *Interp) tick() error {
	in.steps++
	if in.steps > stepLimit {
		return &EvalError{"", "too many steps"}
	}
	return nil
}

// Call runs a program with evaluated arguments.
func (in *Interp) Call(p *Program, this Val, args []Val) (Val, error) {
	f := &Frame{I: in, Fn: p.Name, This: this, sc: in.newScope(nil)}
	defer in.release(f.sc)
	if err := f.bindValues(p.Params, args, true); err != nil {
		return Void, err
	}
	return f.run(p.Body)
}

// Invoke runs a program called from a frame with unevaluated arguments.
func (in *Interp) Invoke(caller *Frame, p *Program, this Val, args []*ast.Node) (Val, error) {
	return in.invoke(caller, &Frame{I: in, Fn: p.Name, This: this, sc: in.newScope(nil)}, p.Params, p.Body, args)
}

func (in *Interp) invokeClosure(caller *Frame, c *Closure, args []*ast.Node) (Val, error) {
	return in.invoke(caller, &Frame{I: in, Fn: c.Fn, This: c.This, sc: in.newScope(c.Scope)}, c.Params, c.Body, args)
}

// invoke runs body in a new frame f, its parameters bound to the
// caller's unevaluated arguments.
func (in *Interp) invoke(caller, f *Frame, params, body *ast.Node, args []*ast.Node) (Val, error) {
	defer in.release(f.sc)
	if err := BindParams(caller, f, params, args); err != nil {
		return Void, err
	}
	return f.run(body)
}

// bindValues binds parameters to evaluated arguments, each in a cell of
// its type (a reference or an object takes the argument's own); a
// parameter past the arguments takes its default argument where defaults
// says so, else its type's zero value.
func (f *Frame) bindValues(params *ast.Node, args []Val, defaults bool) error {
	for i, d := range params.Kids {
		c := f.sc.cell(d.T)
		if d.T == ast.TRef || d.T == ast.TObj {
			c.T = ast.TAuto
		}
		switch {
		case i < len(args):
			if err := c.Set(args[i]); err != nil {
				return err
			}
		case defaults && len(d.Kids) > 0:
			v, err := f.defaultArg(d)
			if err != nil {
				return err
			}
			if err := c.Set(v); err != nil {
				return err
			}
		}
		if d.S != "" {
			f.sc.define(d.S, c)
		}
	}
	return nil
}

// run runs a body in f and returns what it returned.
func (f *Frame) run(body *ast.Node) (Val, error) {
	if _, err := f.Exec(body); err != nil {
		return Void, err
	}
	return f.Ret, nil
}

// CallCells runs a program with its parameters bound to the cells given:
// what the program does to a parameter, the caller sees.
func (in *Interp) CallCells(p *Program, this Val, args []*Cell) (Val, error) {
	f := &Frame{I: in, Fn: p.Name, This: this, sc: in.newScope(nil)}
	defer in.release(f.sc)
	for i, d := range p.Params.Kids {
		if i >= len(args) {
			return Void, fmt.Errorf("arch: %s: %d arguments for %d parameters", p.Name, len(args), len(p.Params.Kids))
		}
		if d.S != "" {
			f.sc.define(d.S, args[i])
		}
	}
	return f.run(p.Body)
}

// CallLocals runs a program and returns the values its body's variables
// named have when it ends.
func (in *Interp) CallLocals(p *Program, this Val, args []Val, names ...string) (map[string]Val, error) {
	out := map[string]Val{}
	in.capture = &capture{names: names, out: out}
	defer func() { in.capture = nil }()
	if _, err := in.Call(p, this, args); err != nil {
		return nil, err
	}
	for _, n := range names {
		if _, ok := out[n]; !ok {
			return nil, fmt.Errorf("arch: %s has no variable %s at its end", p.Name, n)
		}
	}
	return out, nil
}

// capture is callLocals' request: the variables of the scopes that end.
type capture struct {
	names []string
	out   map[string]Val
}

func (c *capture) scopeEnds(s *scope) {
	for _, n := range c.names {
		for i := len(s.names) - 1; i >= 0; i-- {
			if s.names[i] == n {
				c.out[n] = s.cells[i].V // the outermost scope ends last
				break
			}
		}
	}
}

// Apply runs a lambda on evaluated arguments.
func (in *Interp) Apply(c *Closure, args []Val) (Val, error) {
	f := &Frame{I: in, Fn: c.Fn, This: c.This, sc: in.newScope(c.Scope)}
	defer in.release(f.sc)
	if err := f.bindValues(c.Params, args, false); err != nil {
		return Void, err
	}
	return f.run(c.Body)
}
