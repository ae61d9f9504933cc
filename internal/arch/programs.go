package arch

import (
	_ "embed"
	"fmt"
	"strings"
	"sync"

	"github.com/ggload/ggload/internal/arch/ast"
)

// programsText is the generated programs (see gen).
//
//go:embed programs.sx
var programsText string

// Program is one function of the pinned llama.cpp, as a program.
type Program struct {
	Name   string
	Loc    string // source file and line
	Params *ast.Node
	Body   *ast.Node
}

var progs struct {
	once    sync.Once
	offsets map[string]int
	mu      sync.Mutex
	decoded map[string]*Program
	err     map[string]error
}

func indexPrograms() {
	progs.offsets = map[string]int{}
	progs.decoded = map[string]*Program{}
	progs.err = map[string]error{}
	s := programsText
	for off := 0; off < len(s); {
		nl := strings.IndexByte(s[off:], '\n')
		line := s[off:]
		if nl >= 0 {
			line = s[off : off+nl]
		}
		if rest, ok := strings.CutPrefix(line, "fn "); ok {
			name, _, _ := strings.Cut(rest, " ")
			progs.offsets[name] = off
		}
		if nl < 0 {
			break
		}
		off += nl + 1
	}
}

// LookupProgram decodes a program on first use.
func LookupProgram(name string) (*Program, error) {
	progs.once.Do(indexPrograms)
	progs.mu.Lock()
	defer progs.mu.Unlock()
	if p, ok := progs.decoded[name]; ok {
		return p, nil
	}
	if err, ok := progs.err[name]; ok {
		return nil, err
	}
	off, ok := progs.offsets[name]
	if !ok {
		return nil, nil
	}
	p, err := decodeProgram(programsText[off:])
	if err != nil {
		err = fmt.Errorf("arch: program %s: %w", name, err)
		progs.err[name] = err
		return nil, err
	}
	resolveGlobals(p)
	resolveLocals(p)
	compile(p)
	progs.decoded[name] = p
	return p, nil
}

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
func resolveGlobals(p *Program) {
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
				if v, ok := staticGlobal(n.S); ok {
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

func decodeProgram(s string) (*Program, error) {
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

// ProgramNames lists every program of the generated text.
func ProgramNames() []string {
	progs.once.Do(indexPrograms)
	out := make([]string, 0, len(progs.offsets))
	for n := range progs.offsets {
		out = append(out, n)
	}
	return out
}
