package main

// The graph programs: the functions a model's graph builder reaches,
// found by indexing every function definition of the graph-building
// sources (out-of-class definitions, in-class ones in headers, templated
// class members such as llama_model_llama::graph<embed>::graph, with
// their member initializer lists) and following the calls from graphRoot
// and every architecture's build_arch_graph. Overloads (build_attn, build_qkv, build_moe_ffn) are
// kept apart: an overloaded function's programs are NAME#1, NAME#2, ...
// in the order of its definitions in the source, and the evaluator picks
// one by its arguments.

import (
	"fmt"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"

	"github.com/ggload/ggload/internal/replay/cpp/ast"
)

// gdef is one function definition of the index.
type gdef struct {
	qual, class, name string
	file              string
	line              int
	params, body      []token
	inits             []token
	tmpl              bool
	inClass           bool
	spec              string // an explicit specialization's argument: Class<true>::f
	ret               string // the identifier before the name: the return type's last word
}

type gindex struct {
	byQual  map[string][]*gdef
	byName  map[string][]*gdef
	bases   map[string][]string // class → bases
	aliases map[string]string   // Class::graph → Other::graph (using graph = ...)
	tparams map[string]string   // Class::graph → the name of its template parameter (template <bool iswa> struct graph)
	all     []*gdef
}

// skipAngles returns where the template argument list that opens at
// toks[i] ends: just past its closing '>', or at a ';', '{' or '}' that
// comes first.
func skipAngles(toks []token, i int) int {
	depth := 0
	for ; i < len(toks); i++ {
		switch toks[i].s {
		case "<":
			depth++
		case ">":
			depth--
		case ">>":
			depth -= 2
		case ";", "{", "}":
			return i
		}
		if depth <= 0 {
			return i + 1
		}
	}
	return i
}

// matchParen returns the index of the ')' that closes the '(' at toks[i],
// or len(toks) where none does.
func matchParen(toks []token, i int) int {
	depth := 0
	for ; i < len(toks); i++ {
		switch toks[i].s {
		case "(":
			depth++
		case ")":
			depth--
			if depth == 0 {
				return i
			}
		}
	}
	return i
}

// scanDefs indexes the function definitions in toks[from:to] of a scope
// (prefix: the enclosing class, "" at the top).
func (ix *gindex) scan(rel string, toks []token, from, to int, prefix string) {
	tmpl := false
	for i := from; i < to; i++ {
		t := toks[i]
		if t.k == tEOF {
			return
		}
		switch {
		case t.s == "template" && toks[i+1].s == "<":
			end := skipAngles(toks, i+1)
			// template <bool name> struct graph ...: the parameter's name
			if prefix != "" && end == i+5 && toks[i+2].s == "bool" && toks[end].s == "struct" && toks[end+1].s == "graph" {
				ix.tparams[prefix+"::graph"] = toks[i+3].s
			}
			i = end - 1
			tmpl = true
			continue
		case t.s == "namespace":
			j := i + 1
			for j < to && toks[j].s != "{" && toks[j].s != ";" {
				j++
			}
			if toks[j].s == "{" {
				end, _ := matchBrace(toks, j)
				ix.scan(rel, toks, j+1, end, prefix)
				i = end
			} else {
				i = j
			}
			continue
		case (t.s == "struct" || t.s == "class" || t.s == "union") && toks[i+1].k == tIdent:
			if end, ok := ix.scanClass(rel, toks, i, to, prefix); ok {
				i, tmpl = end, false
				continue
			}
		case t.s == "using" && prefix != "" && toks[i+1].s == "graph" && toks[i+2].s == "=":
			j := i + 3
			tgt := ""
			for toks[j].s != ";" {
				tgt += toks[j].s
				j++
			}
			ix.aliases[prefix+"::graph"] = tgt
			i = j
			continue
		case t.s == "enum":
			j := i
			for j < to && toks[j].s != "{" && toks[j].s != ";" {
				j++
			}
			if toks[j].s == "{" {
				j, _ = matchBrace(toks, j)
			}
			i = j
			continue
		case t.s == "{":
			end, _ := matchBrace(toks, i)
			i = end
			tmpl = false
			continue
		case t.s == ";":
			tmpl = false
			continue
		}
		if t.k != tIdent || toks[i+1].s != "(" || i == 0 {
			continue
		}
		if p := toks[i-1]; p.s == "." || p.s == "->" || p.s == "=" || p.s == "," || p.s == "(" || p.s == "return" {
			continue
		}
		i = ix.scanDef(rel, toks, i, to, prefix, tmpl)
		tmpl = false
	}
}

// scanClass indexes a struct, class or union defined at toks[i] (its
// bases, and the definitions inside it) and returns where it ends; false
// for a declaration or a use of the name.
func (ix *gindex) scanClass(rel string, toks []token, i, to int, prefix string) (int, bool) {
	name := toks[i+1].s
	j := i + 2
	// a class nested in another, defined outside it (class Outer::Inner)
	for j+1 < to && toks[j].s == "::" && toks[j+1].k == tIdent {
		name += "::" + toks[j+1].s
		j += 2
	}
	var bases []string
	for j < to && toks[j].s != "{" && toks[j].s != ";" && toks[j].s != "(" && toks[j].s != ")" && toks[j].s != "," && toks[j].s != "=" {
		if toks[j].s == ":" {
			for j < to && toks[j].s != "{" {
				if toks[j].k == tIdent && toks[j].s != "public" && toks[j].s != "private" && toks[j].s != "protected" && toks[j].s != "virtual" {
					b := toks[j].s
					for toks[j+1].s == "::" {
						b += "::" + toks[j+2].s
						j += 2
					}
					bases = append(bases, b)
				}
				j++
			}
			break
		}
		j++
	}
	if toks[j].s == "{" {
		cls := name
		if prefix != "" {
			cls = prefix + "::" + name
		}
		ix.bases[cls] = bases
		end, _ := matchBrace(toks, j)
		ix.scan(rel, toks, j+1, end, cls)
		return end, true
	}
	return i, false
}

// scanDef indexes the function defined (or declared) at its name
// toks[i] and returns where it ends.
func (ix *gindex) scanDef(rel string, toks []token, i, to int, prefix string, tmpl bool) int {
	t := toks[i]
	// the qualified name, backwards
	name := t.s
	if toks[i-1].s == "~" {
		name = "~" + name
	}
	qual := name
	spec := ""
	k := i - 1
	for k >= 1 && toks[k].s == "::" {
		k--
		if toks[k].s == ">" && k >= 2 && toks[k-2].s == "<" && (toks[k-1].s == "true" || toks[k-1].s == "false") {
			spec = toks[k-1].s // template <> Class<true>::f: a specialization
		}
		if toks[k].s == ">" { // template args of a class: Class<embed>::
			depth := 0
			for ; k >= 0; k-- {
				if toks[k].s == ">" {
					depth++
				} else if toks[k].s == "<" {
					depth--
					if depth == 0 {
						break
					}
				}
			}
			k--
		}
		qual = toks[k].s + "::" + qual
		k--
	}
	if k < 0 {
		k = 0
	}
	close := matchParen(toks, i+1)
	params := toks[i+2 : close]
	j := close + 1
	for toks[j].s == "const" || toks[j].s == "override" || toks[j].s == "noexcept" || toks[j].s == "final" {
		j++
	}
	if toks[j].s == "->" {
		for toks[j].s != "{" && toks[j].s != ";" {
			j++
		}
	}
	var inits []token
	if toks[j].s == ":" {
		s := j
		j++
		for j < to {
			for toks[j].k == tIdent || toks[j].s == "::" {
				j++
			}
			if toks[j].s == "<" {
				j = skipAngles(toks, j)
			}
			if toks[j].s == "(" {
				j = matchParen(toks, j) + 1
			} else if toks[j].s == "{" {
				e, _ := matchBrace(toks, j)
				j = e + 1
			}
			if toks[j].s == "," {
				j++
				continue
			}
			break
		}
		inits = toks[s+1 : j]
	}
	if toks[j].s != "{" {
		// a declaration (or = default / = 0)
		for j < to && toks[j].s != ";" && toks[j].s != "{" {
			j++
		}
		if toks[j].s == "{" {
			e, _ := matchBrace(toks, j)
			j = e
		}
		return j
	}
	end, _ := matchBrace(toks, j)
	if prefix != "" && !strings.Contains(qual, "::") {
		qual = prefix + "::" + qual
	}
	cls, nm := "", qual
	if x := strings.LastIndex(qual, "::"); x >= 0 {
		cls, nm = qual[:x], qual[x+2:]
	}
	ret := ""
	if toks[k].k == tIdent && k < i {
		ret = toks[k].s
	}
	d := &gdef{qual: qual, class: cls, name: nm, file: rel, line: t.line, params: params, body: toks[j+1 : end], inits: inits, tmpl: tmpl, inClass: prefix != "", spec: spec, ret: ret}
	ix.byQual[qual] = append(ix.byQual[qual], d)
	ix.byName[nm] = append(ix.byName[nm], d)
	ix.all = append(ix.all, d)
	return end
}

type callSite struct {
	name  string // callee as written: "ggml_add", "build_attn", "std::make_unique<graph<true>>"
	recv  string // receiver expression's last identifier for member calls ("" for free/implicit-this)
	arrow bool
	tmpl  string // template args text of the callee
	nargs int
}

func calls(body []token) []callSite {
	var out []callSite
	for i := 0; i+1 < len(body); i++ {
		t := body[i]
		if t.k != tIdent {
			continue
		}
		j := i + 1
		targs := ""
		name := t.s
		// qualified
		for body[j].s == "::" && body[j+1].k == tIdent {
			name += "::" + body[j+1].s
			j += 2
		}
		if body[j].s == "<" && (strings.HasPrefix(name, "std::make_unique") || strings.HasSuffix(name, "_cast") || name == "std::max" || name == "std::min") {
			e := skipAngles(body, j)
			for _, x := range body[j:e] {
				targs += x.s
			}
			j = e
		}
		if body[j].s != "(" {
			i = j - 1
			continue
		}
		if keywords[name] || name == "while" || name == "switch" || name == "for" || name == "if" || name == "catch" || name == "sizeof" {
			continue
		}
		cs := callSite{name: name, tmpl: targs}
		if i > 0 && (body[i-1].s == "." || body[i-1].s == "->") {
			cs.arrow = body[i-1].s == "->"
			if i > 1 {
				cs.recv = body[i-2].s
				if body[i-2].s == "]" || body[i-2].s == ")" {
					cs.recv = "(expr)"
				}
			}
		}
		// count args
		close := matchParen(body, j)
		if close > j+1 {
			n, depth := 1, 0
			for _, x := range body[j+1 : close] {
				switch x.s {
				case "(", "[", "{":
					depth++
				case ")", "]", "}":
					depth--
				case ",":
					if depth == 0 {
						n++
					}
				}
			}
			cs.nargs = n
		}
		out = append(out, cs)
		i = j - 1
	}
	return out
}

// paramCount counts a definition's parameters (min: without defaults).
func paramCount(ps []token) (n, min int) {
	if len(ps) == 0 || len(ps) == 1 && ps[0].s == "void" {
		return 0, 0
	}
	n, depth, defaulted := 1, 0, 0
	sawEq := false
	for _, x := range ps {
		switch x.s {
		case "(", "[", "{", "<":
			depth++
		case ")", "]", "}", ">":
			depth--
		case "=":
			if depth == 0 {
				sawEq = true
			}
		case ",":
			if depth == 0 {
				if sawEq {
					defaulted++
				}
				sawEq = false
				n++
			}
		}
	}
	if sawEq {
		defaulted++
	}
	return n, n - defaulted
}

// recvTypes are the classes the graph index takes a member call's receiver
// to be, by the name the call sites give it
var recvTypes = map[string][]string{
	"res":      {"llm_graph_result"},
	"model":    {"llama_model", "llama_model_base"},
	"cvec":     {"llama_adapter_cvec"},
	"hparams":  {"llama_hparams"},
	"ubatch":   {"llama_ubatch"},
	"kv":       {"llama_kv_cache"},
	"mctx_cur": {"llama_kv_cache_context", "llama_memory_recurrent_context", "llama_kv_cache_iswa_context"},
	"mctx":     {"llama_kv_cache_context", "llama_memory_recurrent_context"},
	"balloc":   {"llama_batch_allocr"},
	"cells":    {"llama_kv_cells"},
	"sinfo":    {"llama_kv_cache::slot_info"},
	"llm":      {"llm_graph_context"},
	"memory":   {"llama_kv_cache", "llama_kv_cache_iswa", "llama_memory_recurrent"},
	"this":     {"llama_context"},
	"inp":      {"llm_graph_input_attn_no_cache", "llm_graph_input_attn_kv", "llm_graph_input_attn_kv_iswa", "llm_graph_input_rs", "llm_graph_input_embd", "llm_graph_input_pos", "llm_graph_input_out_ids"},
}

func (ix *gindex) isBase(cls, base string) bool {
	if cls == base {
		return true
	}
	for _, b := range ix.bases[cls] {
		if ix.isBase(b, base) {
			return true
		}
	}
	return false
}

// methodOf looks name up in cls and its bases.
func (ix *gindex) methodOf(cls, name string) []*gdef {
	if ds := ix.byQual[cls+"::"+name]; len(ds) > 0 {
		return ds
	}
	for _, b := range ix.bases[cls] {
		if ds := ix.methodOf(b, name); len(ds) > 0 {
			return ds
		}
	}
	return nil
}

// graphRoot is where the graph programs start, with every
// architecture's build_arch_graph (llama_model::build_graph calls the
// model's own). An architecture whose graph calls what the evaluator does
// not have yet plans no compute buffers, and says why.
const graphRoot = "llama_model::build_graph"

// shiftRoot is the K-shift's graph (llama_kv_cache::update builds it when
// a sequence's positions moved).
const shiftRoot = "llama_kv_cache::build_graph_shift"

// graphFiles are the sources the graph programs come from.
var graphFiles = []string{"src/llama-graph.cpp", "src/llama-graph.h", "src/llama-kv-cache.cpp", "src/llama-kv-cache.h",
	"src/llama-kv-cache-iswa.cpp", "src/llama-kv-cache-iswa.h", "src/llama-memory-recurrent.cpp", "src/llama-memory-recurrent.h",
	"src/llama-memory-hybrid.cpp", "src/llama-memory-hybrid.h", "src/llama-memory-hybrid-iswa.cpp", "src/llama-memory-hybrid-iswa.h",
	"src/llama-memory-hybrid-idx.cpp", "src/llama-memory-hybrid-idx.h", "src/llama-kv-cache-dsa.cpp", "src/llama-kv-cache-dsa.h",
	"src/llama-kv-cache-dsa-iswa.cpp", "src/llama-kv-cache-dsa-iswa.h", "src/llama-kv-cache-msa.cpp", "src/llama-kv-cache-msa.h",
	"src/llama-kv-cache-dsv4.cpp", "src/llama-kv-cache-dsv4.h", "src/llama-adapter.cpp", "src/llama-adapter.h",
	"src/llama-model.cpp", "src/llama-model.h", "src/llama-hparams.cpp", "src/llama-hparams.h", "src/llama-impl.h",
	"src/llama-batch.cpp", "src/llama-batch.h", "src/llama-context.cpp", "src/llama-cparams.h", "src/llama-kv-cells.h",
	"src/models/models.h"}

// notCalls are names written with a call's syntax that are no function of
// the source: casts, the standard library, ggml's and the C library's,
// the assertion and logging macros.
func notCall(name string) bool {
	switch name {
	case "GGML_ASSERT", "GGML_ABORT", "assert", "GGML_UNUSED", "format", "sqrtf", "powf", "logf", "expf", "fabsf", "strcmp",
		"float", "int", "int64_t", "int32_t", "uint32_t", "bool":
		return true
	}
	return strings.HasSuffix(name, "_cast") || strings.HasPrefix(name, "std::") || strings.HasPrefix(name, "LLAMA_LOG")
}

// graphPrograms extracts the functions graphRoot and the build_arch_graphs reach.
func (g *generator) graphPrograms() error {
	ix, err := g.s.graphIndex()
	if err != nil {
		return err
	}
	roots, err := ix.graphRoots()
	if err != nil {
		return err
	}
	g.graphAliases, g.graphTParams, g.graphSpecs = ix.aliases, ix.tparams, map[string]string{}
	g.graphBases = ix.graphClassBases()
	for _, d := range ix.reached(roots) {
		if err := g.addGraphDef(ix, d); err != nil {
			return err
		}
	}
	return nil
}

// graphIndex indexes the function definitions of graphFiles and of every
// model's source.
func (s *source) graphIndex() (*gindex, error) {
	return s.indexFiles(graphFiles, "src/models/*.cpp")
}

// indexFiles indexes the function definitions of files and of the files
// glob matches.
func (s *source) indexFiles(files []string, glob string) (*gindex, error) {
	ix := &gindex{byQual: map[string][]*gdef{}, byName: map[string][]*gdef{}, bases: map[string][]string{}, aliases: map[string]string{}, tparams: map[string]string{}}
	files = append([]string{}, files...)
	mf, err := filepath.Glob(filepath.Join(s.dir, glob))
	if err != nil {
		return nil, err
	}
	for _, f := range mf {
		rel, _ := filepath.Rel(s.dir, f)
		files = append(files, rel)
	}
	for _, f := range files {
		toks, err := s.tokens(f)
		if err != nil {
			return nil, err
		}
		ix.scan(f, toks, 0, len(toks), "")
	}
	return ix, nil
}

// graphRoots are the definitions the graph programs start from:
// llama_model::build_graph's, then every architecture's build_arch_graph's.
func (ix *gindex) graphRoots() ([]*gdef, error) {
	roots := []string{graphRoot, shiftRoot}
	for q := range ix.byQual {
		if strings.HasSuffix(q, "::build_arch_graph") {
			roots = append(roots, q)
		}
	}
	slices.Sort(roots[2:])
	var ds []*gdef
	for _, r := range roots {
		if len(ix.byQual[r]) == 0 {
			return nil, fmt.Errorf("graph root %s is defined nowhere", r)
		}
		ds = append(ds, ix.byQual[r]...)
	}
	return ds, nil
}

// graphClassBases are the bases of the graph's classes: of every class
// derived from one of llama.cpp's llm_graph_* classes or of its memories'
// (their contexts' accessors are the graph's too).
func (ix *gindex) graphClassBases() map[string][]string {
	var graphish func(c string, depth int) bool
	graphish = func(c string, depth int) bool {
		if strings.HasPrefix(c, "llm_graph_") || strings.HasPrefix(c, "llama_memory_") || strings.HasPrefix(c, "llama_kv_cache") {
			return true
		}
		for _, b := range ix.bases[c] {
			if depth < 8 && graphish(b, depth+1) {
				return true
			}
		}
		return false
	}
	out := map[string][]string{}
	for c, bs := range ix.bases {
		if len(bs) > 0 && graphish(c, 0) {
			out[c] = bs
		}
	}
	return out
}

// reached are the definitions the calls from roots reach, breadth first
// (a member initializer list's calls before the body's), each once.
func (ix *gindex) reached(roots []*gdef) []*gdef {
	seen := map[*gdef]bool{}
	var queue, order []*gdef
	push := func(ds ...*gdef) {
		for _, d := range ds {
			if !seen[d] {
				seen[d] = true
				queue = append(queue, d)
			}
		}
	}
	push(roots...)
	for len(queue) > 0 {
		d := queue[0]
		queue = queue[1:]
		order = append(order, d)
		body := d.body
		if len(d.inits) > 0 {
			body = append(append([]token{}, d.inits...), body...)
		}
		for _, c := range calls(body) {
			push(ix.callees(d, c)...)
		}
	}
	return order
}

// programName is the name of d's program: its qualified name, and for an
// overload #N, its place among the definitions of that name.
func (ix *gindex) programName(d *gdef) string {
	name := d.qual
	if ds := ix.byQual[d.qual]; len(ds) > 1 {
		for i, x := range ds {
			if x == d {
				name += "#" + strconv.Itoa(i+1)
			}
		}
	}
	return name
}

// addGraphDef adds d's program, once, its member initializer list run as
// statements before its body.
func (g *generator) addGraphDef(ix *gindex, d *gdef) error {
	name := ix.programName(d)
	if _, done := g.fns[name]; done {
		return nil
	}
	if d.spec != "" {
		g.graphSpecs[name] = d.spec
	}
	body := d.body
	if len(d.inits) > 0 {
		pre, err := ix.initStatements(d)
		if err != nil {
			return err
		}
		body = append(pre, body...)
	}
	return g.addGraph(name, d, body)
}

// callees are the definitions a call site may call: ggml's own functions
// and the standard library's are none (the evaluator provides them).
func (ix *gindex) callees(d *gdef, c callSite) []*gdef {
	name := c.name
	if strings.HasPrefix(name, "ggml_") && c.recv == "" {
		return ix.byQual[name]
	}
	if strings.HasPrefix(name, "std::make_unique") {
		tt := strings.TrimSuffix(strings.TrimPrefix(c.tmpl, "<"), ">")
		if i := strings.Index(tt, "<"); i >= 0 {
			tt = tt[:i]
		}
		cls := tt
		if tt == "graph" {
			cls = d.class + "::graph"
			if a, ok := ix.aliases[cls]; ok {
				cls, _, _ = strings.Cut(a, "<")
			}
		} else if _, ok := ix.bases[cls]; !ok {
			// a class nested in one that encloses the caller's
			// (llama_model_qwen4exp::llm_graph_input_qsa, made in its graph)
			for outer := d.class; outer != ""; {
				if _, ok := ix.bases[outer+"::"+tt]; ok {
					cls = outer + "::" + tt
					break
				}
				i := strings.LastIndex(outer, "::")
				if i < 0 {
					break
				}
				outer = outer[:i]
			}
		}
		nm := cls
		if x := strings.LastIndex(cls, "::"); x >= 0 {
			nm = cls[x+2:]
		}
		out := append([]*gdef{}, ix.byQual[cls+"::"+nm]...)
		for _, b := range ix.bases[cls] {
			bn := b
			if x := strings.LastIndex(b, "::"); x >= 0 {
				bn = b[x+2:]
			}
			out = append(out, ix.byQual[b+"::"+bn]...)
		}
		return out
	}
	if notCall(name) {
		return nil
	}
	var cands []*gdef
	if c.recv == "" {
		if d.class != "" {
			cands = ix.methodOf(d.class, name)
		}
		if len(cands) == 0 && strings.Contains(name, "::") {
			cands = ix.byQual[name]
		}
		if len(cands) == 0 {
			for _, x := range ix.byQual[name] {
				if x.class == "" {
					cands = append(cands, x)
				}
			}
		}
	} else {
		for _, t := range recvTypes[c.recv] {
			cands = append(cands, ix.methodOf(t, name)...)
		}
		if len(cands) == 0 {
			// every class of the graph's inputs, memories, adapters and
			// result with such a method; a projector graph's helper
			// object (a clip_graph made on the stack)
			for _, x := range ix.byName[name] {
				if x.class != "" && (strings.HasPrefix(x.class, "llm_graph_input") || strings.HasPrefix(x.class, "llama_kv_cache") || strings.HasPrefix(x.class, "llama_memory") || strings.HasPrefix(x.class, "llama_dsv4") || strings.HasPrefix(x.class, "llama_adapter") || x.class == "llm_graph_result" || strings.HasPrefix(x.class, "clip_graph")) {
					cands = append(cands, x)
				}
			}
		}
	}
	// overloads: those whose arity fits
	var fit []*gdef
	for _, x := range cands {
		n, min := paramCount(x.params)
		if c.nargs >= min && c.nargs <= n {
			fit = append(fit, x)
		}
	}
	if len(fit) == 0 {
		return cands
	}
	return fit
}

// initStatements turns a constructor's member initializer list into the
// statements it amounts to: "m(e)" and "m{e}" assign e to the member m,
// "Base(args)" calls Base's constructor on this (Base::Base(args)).
func (ix *gindex) initStatements(d *gdef) ([]token, error) {
	var out []token
	in := d.inits
	for i := 0; i < len(in); {
		if in[i].k != tIdent {
			return nil, fmt.Errorf("%s:%d: %s: member initializer at %q", d.file, in[i].line, d.qual, in[i].s)
		}
		name := in[i]
		j := i + 1
		var qual []token
		for j+1 < len(in) && in[j].s == "::" {
			qual = append(qual, in[j], in[j+1])
			j += 2
		}
		if j < len(in) && in[j].s == "<" {
			j = skipAngles(in, j)
		}
		if j >= len(in) || in[j].s != "(" && in[j].s != "{" {
			return nil, fmt.Errorf("%s:%d: %s: member initializer %s has no arguments", d.file, name.line, d.qual, name.s)
		}
		var end int
		if in[j].s == "(" {
			end = matchParen(in, j)
		} else {
			e, err := matchBrace(in, j)
			if err != nil {
				return nil, err
			}
			end = e
		}
		args := in[j+1 : end]
		full := name.s
		for _, q := range qual {
			full += q.s
		}
		if _, base := ix.bases[d.class]; base && isBaseOf(ix.bases[d.class], full) {
			last := full
			if x := strings.LastIndex(full, "::"); x >= 0 {
				last = full[x+2:]
			}
			out = append(out, token{k: tIdent, s: full, line: name.line})
			out = append(out, token{k: tPunct, s: "::", line: name.line}, token{k: tIdent, s: last, line: name.line})
			out = append(out, in[j])
			out = append(out, args...)
			out = append(out, in[end], token{k: tPunct, s: ";", line: name.line})
		} else {
			// this->m: a parameter may have the member's name
			out = append(out, token{k: tIdent, s: "this", line: name.line}, token{k: tPunct, s: "->", line: name.line})
			out = append(out, name, token{k: tPunct, s: "=", line: name.line})
			if in[j].s == "{" {
				out = append(out, in[j:end+1]...)
			} else {
				out = append(out, token{k: tPunct, s: "(", line: name.line})
				out = append(out, args...)
				out = append(out, token{k: tPunct, s: ")", line: name.line})
			}
			out = append(out, token{k: tPunct, s: ";", line: name.line})
		}
		i = end + 1
		if i < len(in) && in[i].s == "," {
			i++
		}
	}
	return out, nil
}

func isBaseOf(bases []string, name string) bool {
	for _, b := range bases {
		if b == name {
			return true
		}
	}
	return false
}

// addGraph adds a graph program: parsed like every program, without
// following its calls (graphPrograms did), with the default arguments of
// its declaration.
func (g *generator) addGraph(name string, d *gdef, bodyToks []token) error {
	body := append(append([]token{}, bodyToks...), token{k: tEOF})
	// a function that returns a struct of its file returns brace lists
	// as that struct
	var ret []*ast.Node
	text, err := g.s.read(d.file)
	if err != nil {
		return err
	}
	if d.ret != "" && regexp.MustCompile(`(?m)^struct `+regexp.QuoteMeta(d.ret)+` \{`).MatchString(text) {
		fs, err := g.s.cStructFields(d.file, d.ret)
		if err != nil {
			return fmt.Errorf("%s: %w", name, err)
		}
		for _, f := range fs {
			ret = append(ret, &ast.Node{Op: ast.OpDecl, S: f.Name, T: f.Type})
		}
	}
	n, err := parseBodyReturning(d.file, body, d.ret, ret)
	if err != nil {
		return fmt.Errorf("%s: %w", name, err)
	}
	params, err := parseParams(d.file, append(append([]token{}, d.params...), token{k: tEOF}))
	if err != nil {
		return fmt.Errorf("%s: parameters: %w", name, err)
	}
	n = prune(n, false)
	if err := g.graphDefaults(d, params); err != nil {
		return err
	}
	if strings.Contains(name, "#") {
		// an overload: its pointer parameters name their class, which the
		// evaluator picks the overload by
		for i, t := range paramSig(d.params) {
			if i < len(params.Kids) && params.Kids[i].T == ast.TPtr && params.Kids[i].C == "" {
				params.Kids[i].C = strings.TrimSpace(strings.TrimSuffix(strings.TrimPrefix(t, "const "), "*"))
			}
		}
	}
	g.fns[name] = &ast.Node{Op: ast.OpBlock, Kids: []*ast.Node{params, n}}
	g.locs[name] = d.file + ":" + strconv.Itoa(d.line)
	g.order = append(g.order, name)
	return nil
}

// graphHeaders declare the graph programs' methods, with their default
// arguments.
var graphHeaders = []string{"src/llama-graph.h", "src/llama-kv-cache.h", "src/llama-kv-cache-iswa.h", "src/llama-memory-recurrent.h",
	"src/llama-memory-hybrid.h", "src/llama-memory-hybrid-iswa.h", "src/llama-memory-hybrid-idx.h", "src/llama-kv-cache-dsa.h",
	"src/llama-kv-cache-dsa-iswa.h", "src/llama-kv-cache-msa.h", "src/llama-kv-cache-dsv4.h",
	"src/llama-adapter.h", "src/llama-model.h", "src/llama-hparams.h", "src/llama-impl.h", "src/models/models.h"}

// paramSig is a parameter list's types: each parameter's tokens without
// its name and default.
func paramSig(ps []token) []string {
	var out []string
	var cur []string
	depth, inDefault := 0, false
	flush := func() {
		if len(cur) > 1 {
			cur = cur[:len(cur)-1] // the name
		}
		out = append(out, strings.Join(cur, " "))
		cur, inDefault = nil, false
	}
	for _, t := range ps {
		switch t.s {
		case "(", "[", "{", "<":
			depth++
		case ")", "]", "}", ">":
			depth--
		}
		if depth == 0 && t.s == "," {
			flush()
			continue
		}
		if depth == 0 && t.s == "=" {
			inDefault = true
		}
		if !inDefault {
			cur = append(cur, t.s)
		}
	}
	if len(cur) > 0 {
		flush()
	}
	return out
}

// graphDefaults copies a method's default arguments from its declaration
// (the one whose parameter types are the definition's).
func (g *generator) graphDefaults(d *gdef, params *ast.Node) error {
	want := strings.Join(paramSig(d.params), ",")
	headers := graphHeaders
	if g.headers != nil {
		headers = g.headers
	}
	for _, h := range headers {
		toks, err := g.s.tokens(h)
		if err != nil {
			return err
		}
		for i := 1; i+1 < len(toks); i++ {
			if toks[i].k != tIdent || toks[i].s != d.name || toks[i+1].s != "(" || toks[i-1].s == "." || toks[i-1].s == "::" || toks[i-1].s == "->" {
				continue
			}
			k := matchParen(toks, i+1)
			ps := toks[i+2 : k]
			hasDefault := false
			for _, t := range ps {
				if t.s == "=" {
					hasDefault = true
				}
			}
			if !hasDefault || strings.Join(paramSig(ps), ",") != want {
				continue
			}
			decl, err := parseParams(h, append(append([]token{}, ps...), token{k: tEOF}))
			if err != nil || len(decl.Kids) != len(params.Kids) {
				continue
			}
			for pi, x := range decl.Kids {
				if len(x.Kids) > 0 && len(params.Kids[pi].Kids) == 0 {
					params.Kids[pi].Kids = x.Kids
					if x.C != "" && params.Kids[pi].C == "" {
						params.Kids[pi].C = x.C // the struct a {} default makes
					}
				}
			}
			return nil
		}
	}
	return nil
}
