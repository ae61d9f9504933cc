// Command gen reads the pinned llama.cpp source and writes the data that
// ggload's placement replays: every model architecture's hyperparameter
// and tensor-creation functions (load_arch_hparams, load_arch_tensors and
// the shared functions they call) as programs over a small C++ subset, and
// the tables they refer to (architecture names and classes, metadata keys,
// tensor names and infos, enum constants, llama_hparams's members).
//
//	go run ./internal/arch/gen -src /path/to/llama.cpp [-out internal/arch]
//
// scripts/gen-archs.sh unpacks the pinned source and runs it.
package main

import (
	"flag"
	"fmt"
	"go/format"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"

	"github.com/ggload/ggload/internal/arch/ast"
)

func main() {
	src := flag.String("src", "", "the llama.cpp source tree of the pin")
	out := flag.String("out", "internal/arch", "the arch package directory to write into")
	pin := flag.String("pin", "", "the pinned release, for the generated files' header")
	flag.Parse()
	if *src == "" {
		fmt.Fprintln(os.Stderr, "usage: gen -src DIR [-out DIR] [-pin TAG]")
		os.Exit(2)
	}
	if err := run(*src, *out, *pin); err != nil {
		fmt.Fprintln(os.Stderr, "gen:", err)
		os.Exit(1)
	}
}

type generator struct {
	s       *source
	fns     map[string]*ast.Node // name → (block params body)
	locs    map[string]string
	order   []string
	pending []pendingCall
	models  []string
}

type pendingCall struct{ name, file string }

func run(dir, out, pin string) error {
	s := &source{dir: dir, toks: map[string][]token{}, text: map[string]string{}, enumTypes: map[string]bool{}}
	g := &generator{s: s, fns: map[string]*ast.Node{}, locs: map[string]string{}}
	var err error
	if g.models, err = s.modelFiles(); err != nil {
		return err
	}

	// tables of src/llama-arch.cpp
	archNames, err := s.mapPairs("src/llama-arch.cpp", "LLM_ARCH_NAMES")
	if err != nil {
		return err
	}
	kvNames, err := s.mapPairs("src/llama-arch.cpp", "LLM_KV_NAMES")
	if err != nil {
		return err
	}
	tensorNames, err := s.mapPairs("src/llama-arch.cpp", "LLM_TENSOR_NAMES")
	if err != nil {
		return err
	}
	tensorInfos, err := s.mapPairs("src/llama-arch.cpp", "LLM_TENSOR_INFOS")
	if err != nil {
		return err
	}
	ropeTypes, err := s.mapPairs("src/llama-model.cpp", "LLAMA_ROPE_SCALING_TYPES")
	if err != nil {
		return err
	}
	ffnTypes, err := s.mapPairs("src/llama-model.cpp", "LLM_FFN_OP_TYPES_FROM_STRING")
	if err != nil {
		return err
	}

	// which class loads which architecture, and where its methods are
	classOf, err := g.mapping()
	if err != nil {
		return err
	}
	classes, err := s.classes("src/models/models.h")
	if err != nil {
		return err
	}
	owner := func(class, method string) (string, error) {
		for c := class; c != "" && c != "llama_model_base"; {
			ci, ok := classes[c]
			if !ok {
				return "", fmt.Errorf("class %s is not in models.h", c)
			}
			if ci.declares[method] {
				return c, nil
			}
			c = ci.parent
		}
		return "", fmt.Errorf("no class from %s up declares %s", class, method)
	}
	archMethods := map[string][2]string{}
	for _, a := range sortedKeys(classOf) {
		var names [2]string
		for i, m := range []string{"load_arch_hparams", "load_arch_tensors"} {
			c, err := owner(classOf[a], m)
			if err != nil {
				return fmt.Errorf("%s: %w", a, err)
			}
			names[i] = c + "::" + m
			if err := g.extractModelMethod(names[i]); err != nil {
				return err
			}
		}
		archMethods[a] = names
	}

	// the shared functions: the base hyperparameters, the tensor helpers,
	// the generic pass after load_arch_tensors, llama_hparams's methods
	if err := g.extract("src/llama-model.cpp", "llama_model_base::load_hparams"); err != nil {
		return err
	}
	// the memory module a context of the model gets (its constructors are
	// the evaluator's)
	if err := g.extract("src/llama-model.cpp", "llama_model::create_memory"); err != nil {
		return err
	}
	lt, err := s.findDef("src/llama-model.cpp", "llama_model_base::load_tensors")
	if err != nil || lt == nil {
		return fmt.Errorf("llama_model_base::load_tensors not found: %v", err)
	}
	blk, line, err := enclosingBlock(lt, "load_arch_tensors")
	if err != nil {
		return err
	}
	blk = withLocals(lt.body, blk)
	// the block runs inside load_tensors(llama_model_loader & ml)
	mlParam, err := lex("llama_model_loader & ml", line)
	if err != nil {
		return err
	}
	if err := g.add(&function{name: "llama_model_base::create_tensors", file: lt.file, line: line, params: mlParam[:len(mlParam)-1], body: blk}); err != nil {
		return err
	}
	hp, err := s.read("src/llama-hparams.cpp")
	if err != nil {
		return err
	}
	for _, m := range regexp.MustCompile(`(?m)^[a-z_0-9 ]+ llama_hparams::([a-z_0-9]+)\(`).FindAllStringSubmatch(hp, -1) {
		if err := g.extract("src/llama-hparams.cpp", "llama_hparams::"+m[1]); err != nil {
			return err
		}
	}
	// functions the programs call that the evaluator does not provide
	var missing []string
	for len(g.pending) > 0 {
		pc := g.pending[0]
		g.pending = g.pending[1:]
		if _, done := g.fns[pc.name]; done || ast.Builtins[pc.name] {
			continue
		}
		found := false
		for _, rel := range []string{pc.file, "src/llama-arch.cpp", "src/llama-model.cpp", "src/llama-hparams.cpp"} {
			for _, q := range []string{pc.name, "llama_model_base::" + pc.name} {
				fn, err := s.findDef(rel, q)
				if err != nil {
					return err
				}
				if fn != nil {
					fn.name = pc.name
					if err := g.add(fn); err != nil {
						return err
					}
					found = true
					break
				}
			}
			if found {
				break
			}
		}
		if !found {
			missing = append(missing, pc.name+" (called from "+pc.file+")")
		}
	}
	if len(missing) > 0 {
		sort.Strings(missing)
		return fmt.Errorf("neither builtins of the evaluator nor defined in the source:\n\t%s", strings.Join(slicesCompact(missing), "\n\t"))
	}

	// enum constants and #defines the programs and members use
	consts := map[string]int64{}
	for _, h := range []string{"include/llama.h", "src/llama-arch.h", "src/llama-hparams.h", "src/llama-model.h",
		"ggml/include/ggml.h", "src/llama-graph.h", "src/llama-vocab.h", "src/llama-model-loader.h"} {
		if err := s.defines(h, consts); err != nil {
			return err
		}
		if err := s.enums(h, consts); err != nil {
			return err
		}
	}
	if err := s.staticConsts("src/llama-model-loader.h", consts); err != nil {
		return err
	}
	layerStructs, err := s.layerStructs("src/llama-model.h")
	if err != nil {
		return err
	}
	fields, err := s.structFields("src/llama-hparams.h", "llama_hparams")
	if err != nil {
		return err
	}
	var structs []string
	sub := map[string][]field{}
	for _, f := range fields {
		if f.Struct != "" && sub[f.Struct] == nil {
			fs, err := s.structFields("src/llama-hparams.h", f.Struct)
			if err != nil {
				return err
			}
			sub[f.Struct] = fs
			structs = append(structs, f.Struct)
		}
	}
	// the data members of the model and of each model class
	modelFields := map[string][]field{}
	if modelFields["llama_model"], err = s.structFields("src/llama-model.h", "llama_model"); err != nil {
		return err
	}
	classParents := map[string]string{}
	for c, ci := range classes {
		classParents[c] = ci.parent
		fs, err := s.structFields("src/models/models.h", c)
		if err != nil {
			return err
		}
		if len(fs) > 0 {
			modelFields[c] = fs
		}
	}
	used := g.identifiers()
	for _, fs := range append(append([][]field{fields}, mapValues(modelFields)...), mapValues(sub)...) {
		for _, f := range fs {
			for _, id := range regexp.MustCompile(`[A-Z_][A-Z0-9_]+`).FindAllString(f.Default+" "+f.Len, -1) {
				used[id] = true
			}
		}
	}
	usedConsts := map[string]int64{}
	for id := range used {
		if v, ok := consts[id]; ok {
			usedConsts[id] = v
		}
	}
	for _, p := range ropeTypes {
		usedConsts[p[0]] = consts[p[0]]
	}
	for _, p := range ffnTypes {
		usedConsts[p[1]] = consts[p[1]]
	}
	header := "// Code generated by internal/arch/gen from llama.cpp " + pin + "; DO NOT EDIT.\n\n"

	// programs.sx
	var b strings.Builder
	b.WriteString(";; Code generated by internal/arch/gen from llama.cpp " + pin + "; DO NOT EDIT.\n")
	b.WriteString(";; Each program: fn NAME FILE:LINE, then its parameters and its body.\n")
	for _, name := range g.order {
		fmt.Fprintf(&b, "\nfn %s %s\n", name, g.locs[name])
		fn := g.fns[name]
		pretty(&b, fn.Kids[0], 0)
		b.WriteByte('\n')
		pretty(&b, fn.Kids[1], 0)
		b.WriteByte('\n')
	}
	if err := os.WriteFile(filepath.Join(out, "programs.sx"), []byte(b.String()), 0o644); err != nil {
		return err
	}

	// tables_gen.go
	var t strings.Builder
	t.WriteString(header)
	t.WriteString("package arch\n\nimport \"github.com/ggload/ggload/internal/arch/ast\"\n\n")
	fmt.Fprintf(&t, "// Pin is the llama.cpp release the tables and programs come from.\nconst Pin = %q\n\n", pin)
	t.WriteString("// archTable: the architectures llama_model_mapping creates, by GGUF name: enum, class, and the two programs.\n")
	t.WriteString("var archTable = map[string]archEntry{\n")
	byEnum := map[string]string{}
	for _, p := range archNames {
		byEnum[p[0]] = p[1]
	}
	for _, a := range sortedKeys(classOf) {
		name, ok := byEnum[a]
		if !ok {
			return fmt.Errorf("%s has a class but no name", a)
		}
		m := archMethods[a]
		fmt.Fprintf(&t, "\t%q: {%q, %q, %q, %q},\n", name, a, classOf[a], m[0], m[1])
	}
	t.WriteString("}\n\n")
	t.WriteString("// archNames: every LLM_ARCH_ name of the pin (some have no class).\nvar archNames = map[string]string{\n")
	for _, p := range archNames {
		fmt.Fprintf(&t, "\t%q: %q,\n", p[0], p[1])
	}
	t.WriteString("}\n\n")
	writePairs(&t, "kvNames: LLM_KV_NAMES, the metadata key templates (%s is the architecture).", "kvNames", kvNames)
	writePairs(&t, "tensorNames: LLM_TENSOR_NAMES, the tensor name templates (%d is the block, then the expert).", "tensorNames", tensorNames)
	// the reverse: a template several kinds share goes to the kind the
	// programs create most often (the first in LLM_TENSOR_NAMES on a tie)
	refs := map[string]int{}
	for _, fn := range g.fns {
		walk(fn, func(n *ast.Node) {
			if n.Op == ast.OpIdent && strings.HasPrefix(n.S, "LLM_TENSOR_") {
				refs[n.S]++
			}
		})
	}
	t.WriteString("// templateKinds: the tensor kind of each template (for a template several kinds share,\n// the one the programs create most).\nvar templateKinds = map[string]string{\n")
	best := map[string]string{}
	var tmplOrder []string
	for _, p := range firstOfEach(tensorNames) {
		cur, seen := best[p[1]]
		if !seen {
			tmplOrder = append(tmplOrder, p[1])
		}
		if !seen || refs[p[0]] > refs[cur] {
			best[p[1]] = p[0]
		}
	}
	for _, tm := range tmplOrder {
		fmt.Fprintf(&t, "\t%q: %q,\n", tm, best[tm])
	}
	t.WriteString("}\n\n")
	t.WriteString("// tensorInfos: LLM_TENSOR_INFOS, each tensor's layer class and the op its probe builds.\nvar tensorInfos = map[string][2]string{\n")
	for _, p := range firstOfEach(tensorInfos) {
		l, o, _ := strings.Cut(strings.Trim(p[1], "{}"), ",")
		fmt.Fprintf(&t, "\t%q: {%q, %q},\n", p[0], strings.TrimSpace(l), strings.TrimSpace(o))
	}
	t.WriteString("}\n\n")
	t.WriteString("// ropeScalingTypes: LLAMA_ROPE_SCALING_TYPES (enum, name).\nvar ropeScalingTypes = [][2]string{\n")
	for _, p := range ropeTypes {
		fmt.Fprintf(&t, "\t{%q, %q},\n", p[0], p[1])
	}
	t.WriteString("}\n\n")
	t.WriteString("// ffnOpTypes: LLM_FFN_OP_TYPES_FROM_STRING (name, enum).\nvar ffnOpTypes = [][2]string{\n")
	for _, p := range ffnTypes {
		fmt.Fprintf(&t, "\t{%q, %q},\n", p[0], p[1])
	}
	t.WriteString("}\n\n")
	t.WriteString("// enumConsts: the enum constants and #defines the programs use.\nvar enumConsts = map[string]int64{\n")
	for _, k := range sortedKeys(usedConsts) {
		fmt.Fprintf(&t, "\t%q: %d,\n", k, usedConsts[k])
	}
	t.WriteString("}\n\n")
	writeFields := func(name string, fs []field) {
		fmt.Fprintf(&t, "var %s = []fieldDef{\n", name)
		for _, f := range fs {
			fmt.Fprintf(&t, "\t{Name: %q, CType: %q, Type: ast.%s, Enum: %v, Len: %q, Struct: %q, Default: %q},\n",
				f.Name, f.CType, goType(f.Type), f.Enum, f.Len, f.Struct, f.Default)
		}
		t.WriteString("}\n\n")
	}
	t.WriteString("// layerStructs: the struct members of struct llama_layer.\nvar layerStructs = map[string]string{\n")
	for _, k := range sortedKeys(layerStructs) {
		fmt.Fprintf(&t, "\t%q: %q,\n", k, layerStructs[k])
	}
	t.WriteString("}\n\n")
	t.WriteString("// hparamsFields: the data members of struct llama_hparams.\n")
	writeFields("hparamsFields", fields)
	writeFieldMap := func(doc, name string, m map[string][]field) {
		fmt.Fprintf(&t, "// %s\nvar %s = map[string][]fieldDef{\n", doc, name)
		for _, st := range sortedKeys(m) {
			fmt.Fprintf(&t, "\t%q: {\n", st)
			for _, f := range m[st] {
				fmt.Fprintf(&t, "\t\t{Name: %q, CType: %q, Type: ast.%s, Enum: %v, Len: %q, Struct: %q, Default: %q},\n",
					f.Name, f.CType, goType(f.Type), f.Enum, f.Len, f.Struct, f.Default)
			}
			t.WriteString("\t},\n")
		}
		t.WriteString("}\n\n")
	}
	writeFieldMap("structFields: the members of the structs inside llama_hparams.", "structFields", sub)
	writeFieldMap("modelFields: the data members of llama_model and of each model class.", "modelFields", modelFields)
	t.WriteString("// classParents: each model class's base class.\nvar classParents = map[string]string{\n")
	for _, c := range sortedKeys(classParents) {
		fmt.Fprintf(&t, "\t%q: %q,\n", c, classParents[c])
	}
	t.WriteString("}\n")
	src, err := format.Source([]byte(t.String()))
	if err != nil {
		return fmt.Errorf("formatting tables: %w", err)
	}
	if err := os.WriteFile(filepath.Join(out, "tables_gen.go"), src, 0o644); err != nil {
		return err
	}

	// converter_gen.go: the types the pin's converter writes each key with
	conv, err := s.converterKeys()
	if err != nil {
		return err
	}
	if src, err = writeConverterKeys(header, conv); err != nil {
		return fmt.Errorf("formatting converter keys: %w", err)
	}
	return os.WriteFile(filepath.Join(out, "converter_gen.go"), src, 0o644)
}

func goType(t ast.Type) string {
	return map[ast.Type]string{ast.TAuto: "TAuto", ast.TBool: "TBool", ast.TI32: "TI32", ast.TU32: "TU32",
		ast.TI64: "TI64", ast.TU64: "TU64", ast.TF32: "TF32", ast.TF64: "TF64", ast.TStr: "TStr",
		ast.TRef: "TRef", ast.TPtr: "TPtr", ast.TObj: "TObj"}[t]
}

func writePairs(t *strings.Builder, doc, name string, pairs [][2]string) {
	fmt.Fprintf(t, "// %s\nvar %s = map[string]string{\n", doc, name)
	for _, p := range firstOfEach(pairs) {
		fmt.Fprintf(t, "\t%q: %q,\n", p[0], p[1])
	}
	t.WriteString("}\n\n")
}

func sortedKeys[V any](m map[string]V) []string {
	ks := make([]string, 0, len(m))
	for k := range m {
		ks = append(ks, k)
	}
	sort.Strings(ks)
	return ks
}

// mapping reads llama_model_mapping: architecture enum → model class.
func (g *generator) mapping() (map[string]string, error) {
	fn, err := g.s.findDef("src/llama-model.cpp", "llama_model_mapping")
	if err != nil || fn == nil {
		return nil, fmt.Errorf("llama_model_mapping not found: %v", err)
	}
	out := map[string]string{}
	var cases []string
	for i := 0; i+2 < len(fn.body); i++ {
		t := fn.body[i]
		if t.s == "case" && fn.body[i+1].k == tIdent {
			cases = append(cases, fn.body[i+1].s)
		}
		if t.s == "new" && fn.body[i+1].k == tIdent {
			for _, c := range cases {
				out[c] = fn.body[i+1].s
			}
			cases = nil
		}
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("llama_model_mapping: no cases found")
	}
	return out, nil
}

func (g *generator) extractModelMethod(name string) error {
	if _, ok := g.fns[name]; ok {
		return nil
	}
	for _, rel := range g.models {
		fn, err := g.s.findDef(rel, name)
		if err != nil {
			return err
		}
		if fn != nil {
			return g.add(fn)
		}
	}
	return fmt.Errorf("%s is defined in no file of src/models", name)
}

func (g *generator) extract(rel, name string) error {
	if _, ok := g.fns[name]; ok {
		return nil
	}
	fn, err := g.s.findDef(rel, name)
	if err != nil {
		return err
	}
	if fn == nil {
		return fmt.Errorf("%s: %s not found", rel, name)
	}
	return g.add(fn)
}

// dropped calls: logging and markers with no effect on what is loaded.
var droppedCalls = map[string]bool{"LLAMA_LOG_INFO": true, "LLAMA_LOG_WARN": true, "LLAMA_LOG_DEBUG": true,
	"LLAMA_LOG_ERROR": true, "LLAMA_LOG_CONT": true, "GGML_UNUSED": true}

func (g *generator) add(fn *function) error {
	body := fn.body
	// expand LLAMA_LOAD_LOCALS
	for i := 0; i < len(body); i++ {
		if body[i].k == tIdent && body[i].s == "LLAMA_LOAD_LOCALS" {
			m, err := g.s.macro("src/llama-model.h", "LLAMA_LOAD_LOCALS")
			if err != nil {
				return err
			}
			nb := append(append(append([]token{}, body[:i]...), m...), body[i+1:]...)
			body = nb
			i += len(m) - 1
		}
	}
	body = append(append([]token{}, body...), token{k: tEOF})
	n, err := parseBody(fn.file, body)
	if err != nil {
		return fmt.Errorf("%s: %w", fn.name, err)
	}
	params, err := parseParams(fn.file, append(append([]token{}, fn.params...), token{k: tEOF}))
	if err != nil {
		return fmt.Errorf("%s: parameters: %w", fn.name, err)
	}
	n = prune(n)
	if err := g.defaults(fn.name, params); err != nil {
		return err
	}
	g.fns[fn.name] = &ast.Node{Op: ast.OpBlock, Kids: []*ast.Node{params, n}}
	g.locs[fn.name] = fn.file + ":" + strconv.Itoa(fn.line)
	g.order = append(g.order, fn.name)
	// calls to functions the source defines: same class first
	locals := map[string]bool{}
	walk(n, func(x *ast.Node) {
		if x.Op == ast.OpDecl {
			locals[x.S] = true
		}
	})
	class, _, _ := strings.Cut(fn.name, "::")
	walk(n, func(x *ast.Node) {
		if x.Op != ast.OpCall || x.Kids[0].Op != ast.OpIdent || locals[x.Kids[0].S] {
			return
		}
		name := x.Kids[0].S
		if class == "llama_hparams" && !strings.Contains(name, "::") && !ast.Builtins[name] {
			name = "llama_hparams::" + name
		}
		g.pending = append(g.pending, pendingCall{name, fn.file})
	})
	return nil
}

// prune removes logging statements.
func prune(n *ast.Node) *ast.Node {
	if n == nil {
		return nil
	}
	if n.Op == ast.OpExpr {
		if c := n.Kids[0]; c.Op == ast.OpCall && c.Kids[0].Op == ast.OpIdent && droppedCalls[c.Kids[0].S] {
			return nil
		}
	}
	kids := n.Kids[:0]
	for i, k := range n.Kids {
		pk := prune(k)
		if pk == nil && k != nil && (n.Op == ast.OpBlock || n.Op == ast.OpCase && i > 0) {
			continue
		}
		if pk == nil && k != nil {
			pk = &ast.Node{Op: ast.OpBlock} // an emptied branch
		}
		kids = append(kids, pk)
	}
	n.Kids = kids
	return n
}

func walk(n *ast.Node, f func(*ast.Node)) {
	if n == nil {
		return
	}
	f(n)
	for _, k := range n.Kids {
		walk(k, f)
	}
}

// identifiers are every identifier the programs name.
func (g *generator) identifiers() map[string]bool {
	out := map[string]bool{}
	for _, fn := range g.fns {
		walk(fn, func(n *ast.Node) {
			if n.Op == ast.OpIdent {
				out[n.S] = true
			}
		})
	}
	return out
}

// pretty writes a node with one statement per line.
func pretty(b *strings.Builder, n *ast.Node, depth int) {
	ind := strings.Repeat("  ", depth)
	if n == nil {
		b.WriteString(ind + "(nil)")
		return
	}
	switch n.Op {
	case ast.OpBlock, ast.OpIf, ast.OpFor, ast.OpRange, ast.OpSwitch, ast.OpCase, ast.OpTry:
	default:
		b.WriteString(ind)
		ast.Encode(b, n)
		return
	}
	b.WriteString(ind + "(" + n.Op.String())
	if n.Op == ast.OpRange {
		b.WriteString(" " + strconv.Quote(n.S))
		if n.T != ast.TAuto {
			b.WriteString(" :" + n.T.String())
		}
	}
	for _, k := range n.Kids {
		b.WriteByte('\n')
		pretty(b, k, depth+1)
	}
	b.WriteString(")")
}

func slicesCompact(s []string) []string {
	var out []string
	for i, x := range s {
		if i == 0 || x != s[i-1] {
			out = append(out, x)
		}
	}
	return out
}

// firstOfEach keeps the first pair of each key, as a std::map built from
// an initializer list does.
func firstOfEach(pairs [][2]string) [][2]string {
	seen := map[string]bool{}
	var out [][2]string
	for _, p := range pairs {
		if !seen[p[0]] {
			seen[p[0]] = true
			out = append(out, p)
		}
	}
	return out
}

// headers that declare the methods the programs define.
var declHeaders = []string{"src/llama-hparams.h", "src/llama-model.h", "src/models/models.h", "src/llama-arch.h"}

// defaults copies a method's default arguments from its declaration in a
// header (a definition does not repeat them).
func (g *generator) defaults(name string, params *ast.Node) error {
	class, method, ok := strings.Cut(name, "::")
	if !ok {
		method, class = name, ""
	}
	for _, h := range declHeaders {
		toks, err := g.s.tokens(h)
		if err != nil {
			return err
		}
		for i := 1; i+1 < len(toks); i++ {
			if toks[i].k != tIdent || toks[i].s != method || toks[i+1].s != "(" || toks[i-1].s == "." || toks[i-1].s == "::" || toks[i-1].s == "->" {
				continue
			}
			depth, k := 0, i+1
			hasDefault := false
			for ; k < len(toks); k++ {
				switch toks[k].s {
				case "(":
					depth++
				case ")":
					depth--
				case "=":
					hasDefault = true
				}
				if depth == 0 {
					break
				}
			}
			if !hasDefault {
				continue
			}
			j := k + 1
			for j < len(toks) && (toks[j].s == "const" || toks[j].s == "override") {
				j++
			}
			if j >= len(toks) || toks[j].s != ";" {
				continue
			}
			decl, err := parseParams(h, append(append([]token{}, toks[i+2:k]...), token{k: tEOF}))
			if err != nil || len(decl.Kids) != len(params.Kids) {
				continue
			}
			_ = class
			for pi, d := range decl.Kids {
				if len(d.Kids) > 0 && len(params.Kids[pi].Kids) == 0 {
					params.Kids[pi].Kids = d.Kids
				}
			}
			return nil
		}
	}
	return nil
}

// withLocals prefixes a block of a function with the function's own
// top-level "const T x = e;" declarations that the block uses.
func withLocals(body, blk []token) []token {
	used := map[string]bool{}
	for _, t := range blk {
		if t.k == tIdent {
			used[t.s] = true
		}
	}
	var pre []token
	depth, start := 0, 0
	for i, t := range body {
		if &body[i] == &blk[0] {
			break
		}
		switch t.s {
		case "{", "(", "[":
			depth++
		case "}", ")", "]":
			depth--
		case ";":
			if depth == 0 {
				st := body[start : i+1]
				start = i + 1
				if len(st) > 3 && st[0].s == "const" {
					for j := 1; j+1 < len(st); j++ {
						if st[j].k == tIdent && st[j+1].s == "=" {
							if used[st[j].s] {
								pre = append(pre, st...)
							}
							break
						}
					}
				}
			}
		}
		if depth == 0 && t.s == "}" {
			start = i + 1
		}
	}
	return append(pre, blk...)
}

func mapValues[V any](m map[string]V) []V {
	var out []V
	for _, k := range sortedKeys(m) {
		out = append(out, m[k])
	}
	return out
}
