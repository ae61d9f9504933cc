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

// lookupProgram decodes a program on first use.
func lookupProgram(name string) (*Program, error) {
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
	progs.decoded[name] = p
	return p, nil
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
