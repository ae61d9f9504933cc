package main

import (
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"

	"github.com/ggload/ggload/internal/replay/cpp/ast"
)

// source is the pinned llama.cpp tree.
type source struct {
	dir       string
	toks      map[string][]token
	text      map[string]string
	enumTypes map[string]bool // enum type names seen by enums
	// braceInits: members reads a member's brace initializer as part of
	// its declaration (clip's headers), not as a body to skip
	braceInits bool
}

func (s *source) read(rel string) (string, error) {
	if t, ok := s.text[rel]; ok {
		return t, nil
	}
	b, err := os.ReadFile(filepath.Join(s.dir, rel))
	if err != nil {
		return "", err
	}
	s.text[rel] = string(b)
	return string(b), nil
}

func (s *source) tokens(rel string) ([]token, error) {
	if t, ok := s.toks[rel]; ok {
		return t, nil
	}
	text, err := s.read(rel)
	if err != nil {
		return nil, err
	}
	t, err := lex(text, 1)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", rel, err)
	}
	s.toks[rel] = t
	return t, nil
}

// function is one extracted function definition.
type function struct {
	name   string // qualified: "llama_model_llama::load_arch_tensors", or a free function's name
	file   string
	line   int
	params []token
	body   []token
	logs   bool // keep its LLAMA_LOG_* calls (their messages are llama.cpp's output)
}

// findDef finds the definition of a function: "Class::method" or a free
// function "name".
func (s *source) findDef(rel, qual string) (*function, error) {
	toks, err := s.tokens(rel)
	if err != nil {
		return nil, err
	}
	class, method, qualified := strings.Cut(qual, "::")
	if !qualified {
		method = class
	}
	for i := 0; i+3 < len(toks); i++ {
		j := i
		if qualified {
			if toks[i].k != tIdent || toks[i].s != class || toks[i+1].s != "::" || toks[i+2].s != method || toks[i+3].s != "(" {
				continue
			}
			j = i + 3
		} else {
			if toks[i].k != tIdent || toks[i].s != method || toks[i+1].s != "(" || i == 0 {
				continue
			}
			if prev := toks[i-1]; prev.s == "." || prev.s == "->" || prev.s == "::" || prev.k == tPunct && prev.s != "*" && prev.s != "&" {
				continue
			}
			j = i + 1
		}
		// the parameter list
		k := matchParen(toks, j)
		params := toks[j+1 : k]
		k++
		for k < len(toks) && (toks[k].s == "const" || toks[k].s == "override" || toks[k].s == "noexcept") {
			k++
		}
		if qualified && class == method && k < len(toks) && toks[k].s == ":" {
			// a constructor's member initializers: skipped (the members
			// they make are the evaluator's)
			for k < len(toks) && toks[k].s != "{" {
				if toks[k].s == "(" {
					k = matchParen(toks, k)
				}
				k++
			}
		}
		if k >= len(toks) || toks[k].s != "{" {
			continue // a declaration or a call
		}
		end, err := matchBrace(toks, k)
		if err != nil {
			return nil, fmt.Errorf("%s: %s: %w", rel, qual, err)
		}
		return &function{name: qual, file: rel, line: toks[i].line, params: params, body: toks[k+1 : end]}, nil
	}
	return nil, nil
}

func matchBrace(toks []token, open int) (int, error) {
	depth := 0
	for k := open; k < len(toks); k++ {
		switch toks[k].s {
		case "{":
			if toks[k].k == tPunct {
				depth++
			}
		case "}":
			if toks[k].k == tPunct {
				depth--
				if depth == 0 {
					return k, nil
				}
			}
		}
	}
	return 0, fmt.Errorf("unbalanced braces from line %d", toks[open].line)
}

// enclosingBlock returns the tokens of the innermost braced block of fn's
// body that holds a call to callee.
func enclosingBlock(fn *function, callee string) ([]token, int, error) {
	body := fn.body
	at := -1
	for i := 0; i+1 < len(body); i++ {
		if body[i].k == tIdent && body[i].s == callee && body[i+1].s == "(" {
			at = i
			break
		}
	}
	if at < 0 {
		return nil, 0, fmt.Errorf("%s: no call to %s", fn.name, callee)
	}
	depth := 0
	for i := at; i >= 0; i-- {
		switch body[i].s {
		case "}":
			depth++
		case "{":
			if depth == 0 {
				end, err := matchBrace(body, i)
				if err != nil {
					return nil, 0, err
				}
				return body[i+1 : end], body[i].line, nil
			}
			depth--
		}
	}
	return nil, 0, fmt.Errorf("%s: the call to %s is in no block", fn.name, callee)
}

// macro reads an object-like #define and returns its tokens.
func (s *source) macro(rel, name string) ([]token, error) {
	text, err := s.read(rel)
	if err != nil {
		return nil, err
	}
	lines := strings.Split(text, "\n")
	for i, l := range lines {
		if !regexp.MustCompile(`^#define\s+` + name + `\b`).MatchString(l) {
			continue
		}
		var b strings.Builder
		b.WriteString(strings.TrimPrefix(strings.TrimSpace(l), "#define "+name))
		for strings.HasSuffix(strings.TrimRight(b.String(), " "), "\\") && i+1 < len(lines) {
			cur := strings.TrimRight(b.String(), " ")
			b.Reset()
			b.WriteString(cur[:len(cur)-1])
			b.WriteString("\n")
			i++
			b.WriteString(lines[i])
		}
		toks, err := lex(b.String(), i+1)
		if err != nil {
			return nil, err
		}
		return toks[:len(toks)-1], nil // without EOF
	}
	return nil, fmt.Errorf("%s: no #define %s", rel, name)
}

// defines collects "#define NAME <integer>" constants.
func (s *source) defines(rel string, into map[string]int64) error {
	text, err := s.read(rel)
	if err != nil {
		return err
	}
	re := regexp.MustCompile(`(?m)^#define\s+([A-Z_][A-Z0-9_]*)\s+\(?(-?[0-9]+)[uUlL]*\)?\s*(//.*)?$`)
	for _, m := range re.FindAllStringSubmatch(text, -1) {
		v, err := strconv.ParseInt(m[2], 10, 64)
		if err == nil {
			into[m[1]] = v
		}
	}
	return nil
}

// enums collects the constants of every enum in a header.
func (s *source) enums(rel string, into map[string]int64) error {
	toks, err := s.tokens(rel)
	if err != nil {
		return err
	}
	for i := 0; i < len(toks); i++ {
		if toks[i].k != tIdent || toks[i].s != "enum" {
			continue
		}
		j := i + 1
		for j < len(toks) && toks[j].s != "{" && toks[j].s != ";" && toks[j].s != "(" && toks[j].s != ")" {
			j++
		}
		if j >= len(toks) || toks[j].s != "{" {
			continue
		}
		for k := i + 1; k < j; k++ {
			if toks[k].k == tIdent && toks[k].s != "class" && toks[k].s != "struct" {
				s.enumTypes[toks[k].s] = true
				break
			}
		}
		end, err := matchBrace(toks, j)
		if err != nil {
			return err
		}
		// a value that does not evaluate (an expression over names not
		// known) leaves its constant, and the implicit ones after it,
		// out: a program that uses one fails by its name, never on a
		// wrong value
		next, known := int64(0), true
		k := j + 1
		for k < end {
			if toks[k].k != tIdent {
				k++
				continue
			}
			name := toks[k].s
			k++
			v := next
			if toks[k].s == "=" {
				known = false
				e := k + 1
				for e < end && toks[e].s != "," {
					e++
				}
				p := &parser{toks: append(append([]token{}, toks[k+1:e]...), token{k: tEOF}), file: rel}
				var n *ast.Node
				func() {
					defer func() {
						if r := recover(); r != nil {
							n = nil
						}
					}()
					n = p.expr()
				}()
				if n != nil {
					if x, ok := constEval(n, into); ok {
						v, known = x, true
					}
				}
				k = e
			}
			if known {
				into[name] = v
			} else {
				delete(into, name)
			}
			next = v + 1
			for k < end && toks[k].s != "," {
				k++
			}
			k++
		}
		i = end
	}
	return nil
}

// constEval evaluates an integer constant expression over known names.
func constEval(n *ast.Node, known map[string]int64) (int64, bool) {
	switch n.Op {
	case ast.OpInt:
		return n.I, true
	case ast.OpIdent:
		v, ok := known[n.S]
		return v, ok
	case ast.OpCast:
		return constEval(n.Kids[0], known)
	case ast.OpUnary:
		v, ok := constEval(n.Kids[0], known)
		switch n.S {
		case "-":
			return -v, ok
		case "~":
			return ^v, ok
		case "+":
			return v, ok
		}
	case ast.OpBinary:
		a, ok1 := constEval(n.Kids[0], known)
		b, ok2 := constEval(n.Kids[1], known)
		if !ok1 || !ok2 {
			return 0, false
		}
		switch n.S {
		case "+":
			return a + b, true
		case "-":
			return a - b, true
		case "*":
			return a * b, true
		case "<<":
			return a << uint(b), true
		case "|":
			return a | b, true
		case "&":
			return a & b, true
		}
	}
	return 0, false
}

// mapPairs reads a table "{ A, "b" }," of two-element braces inside the
// definition of a static map named name.
func (s *source) mapPairs(rel, name string) ([][2]string, error) {
	text, err := s.read(rel)
	if err != nil {
		return nil, err
	}
	start := regexp.MustCompile(`\b` + name + `\s*=\s*\{`).FindStringIndex(text)
	if start == nil {
		return nil, fmt.Errorf("%s: no table %s", rel, name)
	}
	body := text[start[1]:]
	end := strings.Index(body, "\n};")
	if end < 0 {
		return nil, fmt.Errorf("%s: table %s does not end", rel, name)
	}
	body = body[:end]
	re := regexp.MustCompile(`\{\s*([A-Za-z_][A-Za-z0-9_]*|"[^"]*")\s*,\s*("[^"]*"|[A-Za-z_][A-Za-z0-9_]*|\{[^}]*\})\s*\}`)
	var out [][2]string
	for _, line := range strings.Split(body, "\n") {
		if i := strings.Index(line, "//"); i >= 0 {
			line = line[:i]
		}
		for _, m := range re.FindAllStringSubmatch(line, -1) {
			out = append(out, [2]string{strings.Trim(m[1], `"`), strings.Trim(m[2], `"`)})
		}
	}
	return out, nil
}

// field is one member of llama_hparams (or of a struct inside it).
type field struct {
	Name    string
	CType   string // as declared
	Type    ast.Type
	Enum    bool
	Len     string // array or bitset length (a constant name or number); "" for scalars
	Struct  string // a nested struct's type name
	Default string // the initializer, as C++ text ("" = zero)
}

var memberRe = regexp.MustCompile(`^\s*((?:const\s+)?(?:enum\s+|struct\s+)?[A-Za-z_][A-Za-z0-9_:]*(?:<[^>]*>)?)\s+([A-Za-z_][A-Za-z0-9_]*)\s*(?:=\s*([^;]+))?;`)

var cArrayRe = regexp.MustCompile(`^\s*([a-z_0-9]+)\s+([A-Za-z_][A-Za-z0-9_]*)\s*\[([A-Za-z0-9_* ]+)\]\s*;`)

var cPointerRe = regexp.MustCompile(`^\s*((?:const\s+)?(?:struct\s+)?[A-Za-z_][A-Za-z0-9_]*)\s*\*\s*([A-Za-z_][A-Za-z0-9_]*)\s*(?:=\s*([^;]+))?;`)

// structFields reads the data members of a struct in a header.
func (s *source) structFields(rel, name string) ([]field, error) {
	return s.members(rel, name, false)
}

// cStructFields reads every data member of a struct, pointers included,
// in order: a struct that is brace-initialized by position.
func (s *source) cStructFields(rel, name string) ([]field, error) {
	return s.members(rel, name, true)
}

func (s *source) members(rel, name string, pointers bool) ([]field, error) {
	text, err := s.read(rel)
	if err != nil {
		return nil, err
	}
	loc := regexp.MustCompile(`(?m)^\s*struct ` + name + `( : public [a-z_0-9]+)? \{`).FindStringIndex(text)
	if loc == nil {
		return nil, fmt.Errorf("%s: no struct %s", rel, name)
	}
	start := loc[0]
	body := text[start:]
	depth := 0
	var lines []string
	var cur strings.Builder
	for i := strings.IndexByte(body, '{'); i < len(body); i++ {
		c := body[i]
		switch c {
		case '{':
			if depth == 1 && s.braceInits && strings.Contains(cur.String(), "=") {
				// a member's brace initializer (= {nullptr}): part of its line
				j := strings.IndexByte(body[i:], '}')
				if j < 0 {
					return nil, fmt.Errorf("%s: struct %s: unterminated initializer", rel, name)
				}
				cur.WriteString(body[i : i+j+1])
				i += j
				continue
			}
			depth++
			if depth == 1 {
				continue
			}
		case '}':
			depth--
			if depth == 0 {
				goto done
			}
		}
		if depth == 1 {
			cur.WriteByte(c)
			if c == '\n' {
				lines = append(lines, cur.String())
				cur.Reset()
			}
		} else if depth > 1 {
			cur.Reset() // inside a method body: drop
		}
	}
done:
	var out []field
	for _, l := range lines {
		if i := strings.Index(l, "//"); i >= 0 {
			l = l[:i]
		}
		if strings.Contains(l, "(") || strings.Contains(l, "static") {
			continue
		}
		if w := strings.Fields(l); len(w) > 0 && (w[0] == "using" || w[0] == "typedef" || w[0] == "friend" || w[0] == "template") {
			continue
		}
		if m := cPointerRe.FindStringSubmatch(l); pointers && m != nil {
			out = append(out, field{Name: m[2], CType: m[1] + " *", Type: ast.TPtr})
			continue
		}
		if m := cArrayRe.FindStringSubmatch(l); m != nil {
			// a C array: its length is a product of numbers and constants
			out = append(out, field{Name: m[2], CType: m[1], Type: scalarType(m[1]), Len: strings.ReplaceAll(m[3], " ", "")})
			continue
		}
		m := memberRe.FindStringSubmatch(l)
		if m == nil {
			continue
		}
		f := field{Name: m[2], CType: strings.TrimSpace(m[1]), Default: strings.TrimSpace(m[3])}
		ct := strings.TrimPrefix(f.CType, "const ")
		switch {
		case strings.HasPrefix(ct, "std::array<"):
			inner := strings.TrimSuffix(strings.TrimPrefix(ct, "std::array<"), ">")
			elem, n, _ := strings.Cut(inner, ",")
			f.Type, f.Len = scalarType(strings.TrimSpace(elem)), strings.TrimSpace(n)
		case strings.HasPrefix(ct, "std::bitset<"):
			f.Type, f.Len = ast.TBool, strings.TrimSuffix(strings.TrimPrefix(ct, "std::bitset<"), ">")
		case strings.HasPrefix(ct, "struct "):
			f.Struct = strings.TrimPrefix(ct, "struct ")
			f.Type = ast.TObj
		case strings.HasPrefix(ct, "enum "):
			f.Type, f.Enum = ast.TI32, true
		case strings.HasPrefix(ct, "std::") && ct != "std::string":
			f.Type = ast.TObj // a container: CType says which
		default:
			f.Type = scalarType(ct)
			if f.Type == ast.TAuto && s.enumTypes[ct] {
				// an enum named without the keyword (llama_swa_type)
				f.Type, f.Enum = ast.TI32, true
			}
		}
		out = append(out, f)
	}
	return out, nil
}

func scalarType(ct string) ast.Type {
	if t, ok := builtinTypes[ct]; ok && t != ast.TAuto {
		return t
	}
	if ct == "std::string" {
		return ast.TStr
	}
	return ast.TAuto
}

// classInfo is a model class of src/models/models.h.
type classInfo struct {
	parent   string
	declares map[string]bool // load_arch_hparams, load_arch_tensors
	// graphInits are the graph struct's members with a literal default
	// member initializer: name, type, value
	graphInits [][3]string
}

// graphInitRe is "const T name = literal;" in a graph struct.
var graphInitRe = regexp.MustCompile(`(?m)^\s+const (int|int32_t|int64_t|uint32_t|float|bool)\s+([a-z_][a-z0-9_]*)\s*=\s*(-?[0-9][0-9.eE+-]*f?|true|false);`)

// graphMapRe is "std::map<K, V> name;" in a graph struct: an empty map.
var graphMapRe = regexp.MustCompile(`(?m)^\s+(std::map)<[^;{}]*>\s+([a-z_][a-z0-9_]*)\s*;`)

func (s *source) classes(rel string) (map[string]*classInfo, error) {
	text, err := s.read(rel)
	if err != nil {
		return nil, err
	}
	re := regexp.MustCompile(`(?m)^struct (llama_model_[a-z0-9_]+) : public (llama_model_[a-z0-9_]+) \{`)
	out := map[string]*classInfo{}
	locs := re.FindAllStringSubmatchIndex(text, -1)
	for i, l := range locs {
		name, parent := text[l[2]:l[3]], text[l[4]:l[5]]
		end := len(text)
		if i+1 < len(locs) {
			end = locs[i+1][0]
		}
		body := text[l[1]:end]
		ci := &classInfo{parent: parent, declares: map[string]bool{}}
		for _, m := range []string{"load_arch_hparams", "load_arch_tensors"} {
			if regexp.MustCompile(`void\s+` + m + `\s*\(`).MatchString(body) {
				ci.declares[m] = true
			}
		}
		if g := strings.Index(body, "struct graph : public"); g >= 0 {
			gb := body[g:]
			if e := strings.Index(gb, "\n    };"); e >= 0 {
				gb = gb[:e]
			}
			for _, m := range graphInitRe.FindAllStringSubmatch(gb, -1) {
				ci.graphInits = append(ci.graphInits, [3]string{m[2], m[1], strings.TrimSuffix(m[3], "f")})
			}
			for _, m := range graphMapRe.FindAllStringSubmatch(gb, -1) {
				ci.graphInits = append(ci.graphInits, [3]string{m[2], m[1], ""})
			}
		}
		out[name] = ci
	}
	return out, nil
}

// nestedStructMembers finds, in the classes of rel named prefix*, the
// data members whose type is a struct nested in the class: each class's
// members (name, "struct", Class::Struct), the structs' own members
// added to structs.
func (s *source) nestedStructMembers(rel, prefix string, structs map[string][]field) (map[string][][3]string, error) {
	text, err := s.read(rel)
	if err != nil {
		return nil, err
	}
	out := map[string][][3]string{}
	classRe := regexp.MustCompile(`(?m)^class (` + regexp.QuoteMeta(prefix) + `[a-z0-9_]+)[^;{]*\{`)
	for _, loc := range classRe.FindAllStringSubmatchIndex(text, -1) {
		class := text[loc[2]:loc[3]]
		body := text[loc[1]:]
		if e := strings.Index(body, "\n};"); e >= 0 {
			body = body[:e]
		}
		for _, m := range regexp.MustCompile(`(?m)^\s+struct ([a-z_][a-z0-9_]*) \{`).FindAllStringSubmatch(body, -1) {
			nested := m[1]
			members := regexp.MustCompile(`(?m)^\s+`+nested+`\s+([a-z_][a-z0-9_]*)\s*;`).FindAllStringSubmatch(body, -1)
			if len(members) == 0 {
				continue
			}
			qual := class + "::" + nested
			fs, err := s.cStructFields(rel, nested)
			if err != nil {
				return nil, err
			}
			structs[qual] = fs
			for _, mm := range members {
				out[class] = append(out[class], [3]string{mm[1], "struct", qual})
			}
		}
	}
	return out, nil
}

// fusedGroup is one resolution of llama_context::resolve_fused_ops: the
// cparams flag that asks for it, the line it logs first ("" for none),
// its probes.
type fusedGroup struct {
	auto, header string
	probes       []fusedProbe
}

// fusedProbe is an llm_fused_op_probe constant and the cparams flag a
// resolution resolves with it.
type fusedProbe struct {
	op, name string
	perSeq   int
	flag     string
}

// fusedOps reads resolve_fused_ops (in rel) and the llm_fused_op_probe
// constants it resolves with: "if (cparams.AUTO) { [LOG(header)]
// resolve(PROBE, cparams.FLAG); ... }", in order.
func (s *source) fusedOps(rel string) ([]fusedGroup, error) {
	text, err := s.read(rel)
	if err != nil {
		return nil, err
	}
	nocomments := regexp.MustCompile(`/\*.*?\*/`).ReplaceAllString(text, "")
	probes := map[string]fusedProbe{}
	for _, m := range regexp.MustCompile(`static const llm_fused_op_probe (\w+)\s*=\s*\{\s*(\w+)\s*,\s*"([^"]*)"\s*,\s*(\d+)\s*,?\s*\}`).FindAllStringSubmatch(nocomments, -1) {
		n, _ := strconv.Atoi(m[4])
		probes[m[1]] = fusedProbe{op: m[2], name: m[3], perSeq: n}
	}
	start := strings.Index(text, "void llama_context::resolve_fused_ops(")
	if start < 0 || len(probes) == 0 {
		return nil, fmt.Errorf("%s: no resolve_fused_ops or no llm_fused_op_probe constants", rel)
	}
	body := text[start:]
	if e := strings.Index(body, "\n}\n"); e >= 0 {
		body = body[:e]
	}
	var out []fusedGroup
	blockRe := regexp.MustCompile(`(?s)\n    if \(cparams\.(\w+)\) \{(.*?)\n    \}`)
	headerRe := regexp.MustCompile(`LLAMA_LOG_INFO\("%s: ([^"]*?)\\n", func\);`)
	resolveRe := regexp.MustCompile(`resolve\((\w+),\s*cparams\.(\w+)\);`)
	for _, b := range blockRe.FindAllStringSubmatch(body, -1) {
		g := fusedGroup{auto: b[1]}
		if h := headerRe.FindStringSubmatch(b[2]); h != nil {
			g.header = h[1]
		}
		for _, r := range resolveRe.FindAllStringSubmatch(b[2], -1) {
			p, ok := probes[r[1]]
			if !ok {
				return nil, fmt.Errorf("%s: resolve_fused_ops resolves with %s, which is no llm_fused_op_probe", rel, r[1])
			}
			p.flag = r[2]
			g.probes = append(g.probes, p)
		}
		if len(g.probes) == 0 {
			return nil, fmt.Errorf("%s: resolve_fused_ops' %s resolves nothing the generator reads", rel, b[1])
		}
		out = append(out, g)
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("%s: resolve_fused_ops resolves nothing the generator reads", rel)
	}
	return out, nil
}

// modelFiles lists src/models/*.cpp.
func (s *source) modelFiles() ([]string, error) {
	m, err := filepath.Glob(filepath.Join(s.dir, "src", "models", "*.cpp"))
	if err != nil {
		return nil, err
	}
	var out []string
	for _, f := range m {
		rel, _ := filepath.Rel(s.dir, f)
		out = append(out, rel)
	}
	sort.Strings(out)
	return out, nil
}

// staticConsts collects "static const int NAME = <constant expression>;".
func (s *source) staticConsts(rel string, into map[string]int64) error {
	text, err := s.read(rel)
	if err != nil {
		return err
	}
	re := regexp.MustCompile(`static const(?:expr)? (?:int|int32_t|uint32_t|size_t) ([A-Z_][A-Z0-9_]*)\s*=\s*([^;]+);`)
	for _, m := range re.FindAllStringSubmatch(text, -1) {
		toks, err := lex(m[2], 1)
		if err != nil {
			return err
		}
		p := &parser{toks: toks, file: rel}
		n := p.expr()
		if v, ok := constEval(n, into); ok {
			into[m[1]] = v
		}
	}
	return nil
}

// staticArrays collects "static const int NAME[N] = { <constant
// expressions> };": each array's values, in order.
func (s *source) staticArrays(rel string, consts map[string]int64, into map[string][]int64) error {
	text, err := s.read(rel)
	if err != nil {
		return err
	}
	re := regexp.MustCompile(`static const(?:expr)? (?:int|int32_t|uint32_t|size_t) ([A-Z_][A-Z0-9_]*)\s*\[\s*([^\]]*)\]\s*=\s*\{([^}]*)\}\s*;`)
	for _, m := range re.FindAllStringSubmatch(text, -1) {
		var vals []int64
		for _, e := range strings.Split(m[3], ",") {
			if strings.TrimSpace(e) == "" {
				continue
			}
			toks, err := lex(e, 1)
			if err != nil {
				return err
			}
			p := &parser{toks: toks, file: rel}
			v, ok := constEval(p.expr(), consts)
			if !ok {
				return fmt.Errorf("%s: %s: %q is not a constant", rel, m[1], strings.TrimSpace(e))
			}
			vals = append(vals, v)
		}
		if n := strings.TrimSpace(m[2]); n != "" {
			toks, err := lex(n, 1)
			if err != nil {
				return err
			}
			p := &parser{toks: toks, file: rel}
			if v, ok := constEval(p.expr(), consts); !ok || v != int64(len(vals)) {
				return fmt.Errorf("%s: %s holds %d values for a length of %s", rel, m[1], len(vals), n)
			}
		}
		into[m[1]] = vals
	}
	return nil
}

// layerStructs reads the struct-typed members of struct llama_layer.
func (s *source) layerStructs(rel string) (map[string]string, error) {
	text, err := s.read(rel)
	if err != nil {
		return nil, err
	}
	start := strings.Index(text, "struct llama_layer {")
	if start < 0 {
		return nil, fmt.Errorf("%s: no struct llama_layer", rel)
	}
	end := strings.Index(text[start:], "\n};")
	out := map[string]string{}
	re := regexp.MustCompile(`(?m)^\s+struct (llama_layer_[a-z0-9_]+) ([a-z0-9_]+);`)
	for _, m := range re.FindAllStringSubmatch(text[start:start+end], -1) {
		out[m[2]] = m[1]
	}
	return out, nil
}
