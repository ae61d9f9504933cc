package cpp

import (
	"fmt"
	"strings"
	"sync"

	"github.com/ggload/ggload/internal/replay/cpp/ast"
)

// Program is one function of the pinned llama.cpp, as a program.
type Program struct {
	Name   string
	Loc    string // source file and line
	Params *ast.Node
	Body   *ast.Node
}

// Library is a body of programs (the generated text, each decoded and
// compiled on its first use) with what they reach at compile time: the
// builtins, the structs of the headers, the constants of the tables.
// Compiled programs are shared by every Interp that uses the library.
type Library struct {
	text     string
	constant func(name string) (Val, bool)
	structs  map[string][]FieldDef
	builtins map[string]Builtin

	once    sync.Once
	offsets map[string]int
	mu      sync.Mutex
	decoded map[string]*Program
	err     map[string]error
}

// NewLibrary is the library of the programs of text (each begins with a
// line "fn NAME LOC"), whose constants constant resolves and whose
// structs are structs', with the standard library's builtins
// (StdBuiltins).
func NewLibrary(text string, constant func(name string) (Val, bool), structs map[string][]FieldDef) *Library {
	return &Library{text: text, constant: constant, structs: structs, builtins: StdBuiltins()}
}

// Register adds builtins to the library. Programs compiled before see
// them not: register before the first Lookup.
func (l *Library) Register(builtins map[string]Builtin) {
	l.mu.Lock()
	defer l.mu.Unlock()
	for n, b := range builtins {
		l.builtins[n] = b
	}
}

// Builtin is a builtin of the library.
func (l *Library) Builtin(name string) (Builtin, bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	b, ok := l.builtins[name]
	return b, ok
}

// Structs are the structs of the library's headers, by name.
func (l *Library) Structs() map[string][]FieldDef { return l.structs }

func (l *Library) index() {
	l.offsets = map[string]int{}
	l.decoded = map[string]*Program{}
	l.err = map[string]error{}
	s := l.text
	for off := 0; off < len(s); {
		nl := strings.IndexByte(s[off:], '\n')
		line := s[off:]
		if nl >= 0 {
			line = s[off : off+nl]
		}
		if rest, ok := strings.CutPrefix(line, "fn "); ok {
			name, _, _ := strings.Cut(rest, " ")
			l.offsets[name] = off
		}
		if nl < 0 {
			break
		}
		off += nl + 1
	}
}

// Lookup decodes and compiles a program on first use; nil if the
// library has none of the name.
func (l *Library) Lookup(name string) (*Program, error) {
	l.once.Do(l.index)
	l.mu.Lock()
	defer l.mu.Unlock()
	if p, ok := l.decoded[name]; ok {
		return p, nil
	}
	if err, ok := l.err[name]; ok {
		return nil, err
	}
	off, ok := l.offsets[name]
	if !ok {
		return nil, nil
	}
	p, err := DecodeProgram(l.text[off:])
	if err != nil {
		err = fmt.Errorf("program %s: %w", name, err)
		l.err[name] = err
		return nil, err
	}
	l.Prepare(p)
	l.decoded[name] = p
	return p, nil
}

// Prepare resolves a decoded program's names and compiles it (l.mu
// held).
func (l *Library) Prepare(p *Program) {
	l.resolveGlobals(p)
	resolveLocals(p)
	(&compiler{lib: l}).compile(p)
}

// Names lists every program of the library.
func (l *Library) Names() []string {
	l.once.Do(l.index)
	out := make([]string, 0, len(l.offsets))
	for n := range l.offsets {
		out = append(out, n)
	}
	return out
}

// Has reports whether the library has a program of the name, without
// decoding it.
func (l *Library) Has(name string) bool {
	l.once.Do(l.index)
	_, ok := l.offsets[name]
	return ok
}

// compiler compiles the programs of a library.
type compiler struct{ lib *Library }

// local is an identifier's variable, found statically: up scopes out
// from the one where the identifier is evaluated, at index idx.
type local struct {
	up, idx int
	name    string
}

// memberRes marks an identifier that is no variable of its program (a
// memberRes of this, or a global).
type memberRes struct{}

// resolveLocals binds every identifier that names a variable to its
// scope and slot, by walking the program as exec runs it: the same
// scopes, opened at the same statements, declaring in the same order.
// Evaluation checks the binding (the slot's name) and looks the name up
// the slow way if it ever differs.
func resolveLocals(p *Program) {
	r := &resolver{}
	r.push()
	for _, d := range p.Params.Kids {
		if d.S != "" {
			r.define(d.S)
		}
	}
	r.stmt(p.Body)
}

type resolver struct {
	scopes [][]string
}

func (r *resolver) push() { r.scopes = append(r.scopes, nil) }
func (r *resolver) pop()  { r.scopes = r.scopes[:len(r.scopes)-1] }
func (r *resolver) define(name string) {
	r.scopes[len(r.scopes)-1] = append(r.scopes[len(r.scopes)-1], name)
}

func (r *resolver) ident(n *ast.Node) {
	if n.Res != nil {
		return // a global
	}
	for up := 0; up < len(r.scopes); up++ {
		sc := r.scopes[len(r.scopes)-1-up]
		for i := len(sc) - 1; i >= 0; i-- {
			if sc[i] == n.S {
				n.Res = local{up, i, n.S}
				return
			}
		}
	}
	n.Res = memberRes{}
}

func (r *resolver) stmt(n *ast.Node) {
	if n == nil {
		return
	}
	_, scopedStmt := n.Res.(scoped)
	switch n.Op {
	case ast.OpBlock:
		if scopedStmt {
			r.push()
			defer r.pop()
		}
		for _, k := range n.Kids {
			r.stmt(k)
		}
	case ast.OpExpr, ast.OpReturn, ast.OpThrow:
		for _, k := range n.Kids {
			r.expr(k)
		}
	case ast.OpDecl:
		for _, k := range n.Kids {
			r.expr(k)
		}
		r.define(n.S)
	case ast.OpIf:
		if scopedStmt {
			r.push()
			defer r.pop()
		}
		r.stmt(n.Kids[0])
		r.expr(n.Kids[1])
		r.stmt(n.Kids[2])
		r.stmt(n.Kids[3])
	case ast.OpFor:
		if scopedStmt {
			r.push()
			defer r.pop()
		}
		r.stmt(n.Kids[0])
		r.expr(n.Kids[1])
		r.stmt(n.Kids[3])
		r.expr(n.Kids[2])
	case ast.OpRange:
		r.expr(n.Kids[0])
		r.push()
		r.define(n.S)
		r.stmt(n.Kids[1])
		r.pop()
	case ast.OpSwitch:
		r.expr(n.Kids[0])
		for _, c := range n.Kids[1:] {
			r.expr(c.Kids[0])
		}
		if scopedStmt {
			r.push()
			defer r.pop()
		}
		for _, c := range n.Kids[1:] {
			for _, s := range c.Kids[1:] {
				r.stmt(s)
			}
		}
	case ast.OpTry:
		r.stmt(n.Kids[0])
		r.stmt(n.Kids[1])
	}
}

func (r *resolver) expr(n *ast.Node) {
	if n == nil {
		return
	}
	switch n.Op {
	case ast.OpIdent:
		r.ident(n)
	case ast.OpLambda:
		// the body runs in a scope of its parameters, inside the scopes
		// the lambda was made in
		saved := r.scopes
		r.scopes = append(append([][]string(nil), r.scopes...), nil)
		for _, d := range n.Kids[0].Kids {
			for _, k := range d.Kids {
				r.expr(k)
			}
			if d.S != "" {
				r.define(d.S)
			}
		}
		r.stmt(n.Kids[1])
		r.scopes = saved
	default:
		for _, k := range n.Kids {
			r.expr(k)
		}
	}
}

// resolveGlobals binds the identifiers of a program that name a constant
// of the tables (and no variable of the program) to its value, once.
func (l *Library) resolveGlobals(p *Program) {
	declared := map[string]bool{}
	var walk func(n *ast.Node, f func(*ast.Node))
	walk = func(n *ast.Node, f func(*ast.Node)) {
		if n == nil {
			return
		}
		f(n)
		for _, k := range n.Kids {
			walk(k, f)
		}
	}
	collect := func(n *ast.Node) {
		if n.Op == ast.OpDecl || n.Op == ast.OpRange {
			declared[n.S] = true
		}
	}
	walk(p.Params, collect)
	walk(p.Body, collect)
	walk(p.Body, func(n *ast.Node) {
		switch n.Op {
		case ast.OpIdent:
			if !declared[n.S] {
				if v, ok := Constant(n.S); ok {
					n.Res = v
				} else if v, ok := l.constant(n.S); ok {
					n.Res = v
				}
			}
		case ast.OpBlock, ast.OpSwitch:
			// a block opens a scope only if it declares something
			for _, k := range n.Kids {
				if k != nil && (k.Op == ast.OpDecl || k.Op == ast.OpCase && declares(k)) {
					n.Res = scoped{}
				}
			}
		case ast.OpIf, ast.OpFor:
			if n.Kids[0] != nil {
				n.Res = scoped{}
			}
		}
	})
}

// scoped marks a statement that opens a scope for its declarations.
type scoped struct{}

func declares(c *ast.Node) bool {
	for _, k := range c.Kids[1:] {
		if k != nil && k.Op == ast.OpDecl {
			return true
		}
	}
	return false
}

// DecodeProgram decodes one program of the generated text.
func DecodeProgram(s string) (*Program, error) {
	d := ast.NewDecoder(s)
	if w, err := d.Word(); err != nil || w != "fn" {
		return nil, fmt.Errorf("expected fn")
	}
	name, err := d.Word()
	if err != nil {
		return nil, err
	}
	loc, err := d.Word()
	if err != nil {
		return nil, err
	}
	params, err := d.Node()
	if err != nil {
		return nil, err
	}
	body, err := d.Node()
	if err != nil {
		return nil, err
	}
	if params == nil || body == nil || params.Op != ast.OpBlock || body.Op != ast.OpBlock {
		return nil, fmt.Errorf("malformed program")
	}
	return &Program{Name: name, Loc: loc, Params: params, Body: body}, nil
}
