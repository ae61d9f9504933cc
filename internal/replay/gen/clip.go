package main

import (
	"fmt"
	"go/format"
	"maps"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"

	"github.com/ggload/ggload/internal/replay/cpp/ast"
)

// The projector's loader (tools/mtmd/clip.cpp's clip_model_loader):
// load_hparams and load_tensors, the clip_hparams methods they call, and
// the tables they use, written into internal/replay/clip.

const (
	clipDir   = "tools/mtmd"
	clipCpp   = clipDir + "/clip.cpp"
	clipImpl  = clipDir + "/clip-impl.h"
	clipModel = clipDir + "/clip-model.h"
	clipH     = clipDir + "/clip.h"
)

// clipMethodClasses are the structs whose methods are programs: a call
// of a bare name inside one is a call of its own method.
var clipMethodClasses = map[string]bool{"clip_hparams": true, "clip_layer": true, "clip_model": true}

// clipBuiltins are the functions the clip replay provides itself.
var clipBuiltins = map[string]bool{
	"string_format": true, "clip_projector_type_from_string": true, "open_ifstream_binary": true,
	"string_replace_all": true, "string_ends_with": true,
	"gguf_get_n_tensors": true, "gguf_get_tensor_name": true, "gguf_get_data_offset": true, "gguf_get_tensor_offset": true,
	"gguf_find_tensor": true, "gguf_get_tensor_type": true, "gguf_get_tensor_size": true,
	"ggml_tensor_overhead": true, "ggml_init": true, "ggml_get_tensor": true, "ggml_dup_tensor": true, "ggml_set_name": true,
	"ggml_nbytes": true, "ggml_type_name": true, "ggml_backend_get_device": true,
	"ggml_backend_get_default_buffer_type": true, "ggml_backend_alloc_ctx_tensors_from_buft": true,
	"ggml_backend_buffer_set_usage": true, "ggml_backend_buft_is_host": true, "ggml_backend_tensor_set": true,
	"get_bool": true, "get_i32": true, "get_u32": true, "get_f32": true, "get_arr_f32": true, "get_string": true, "get_arr_int": true,
	"std::runtime_error": true, "GGML_ASSERT": true, "GGML_ABORT": true, "std::max": true, "std::min": true, "std::sqrt": true,
	"std::move": true, "sizeof": true, "LOG_INF": true, "LOG_WRN": true, "LOG_DBG": true, "LOG_ERR": true,
	"progress_callback": true,
	"std::find":         true, "sqrt": true,
}

// structDefRe is a struct's definition, nested ones included.
var structDefRe = regexp.MustCompile(`(?m)^\s*struct ([a-z_0-9]+) \{`)

func clipRun(s *source, out, header, pin string) error {
	g := &generator{s: s, fns: map[string]*ast.Node{}, locs: map[string]string{}}
	for _, m := range []string{"load_hparams", "load_tensors"} {
		fn, err := s.findDef(clipCpp, m)
		if err != nil {
			return err
		}
		if fn == nil {
			return fmt.Errorf("%s: no %s", clipCpp, m)
		}
		fn.name = "clip_model_loader::" + m
		if err := g.add(fn); err != nil {
			return err
		}
	}
	// the encoder's output width
	if fn, err := s.findDef(clipCpp, "clip_n_mmproj_embd"); err != nil || fn == nil {
		return fmt.Errorf("%s: clip_n_mmproj_embd: %v", clipCpp, err)
	} else if err := g.add(fn); err != nil {
		return err
	}
	// the methods of the structs they fill (an overloaded one is named
	// by its number of parameters)
	for _, class := range []string{"clip_hparams", "clip_layer", "clip_model"} { // clipMethodClasses
		fns, err := s.findDefsIn(clipModel, class, "")
		if err != nil {
			return err
		}
		count := map[string]int{}
		for _, fn := range fns {
			count[fn.name]++
		}
		for _, fn := range fns {
			if count[fn.name] > 1 {
				n, _ := paramCount(fn.params)
				fn.name += "/" + strconv.Itoa(n)
			}
			if err := g.add(fn); err != nil {
				return err
			}
		}
	}
	// the free and static functions they call
	if err := g.resolveClip(); err != nil {
		return err
	}
	// the graph builders: clip_get_graph_builder, every graph class's
	// build and support_batch, and what they reach
	ix, err := s.indexFiles([]string{clipCpp, clipImpl, clipDir + "/clip-graph.h", clipDir + "/models/models.h"}, clipDir+"/models/*.cpp")
	if err != nil {
		return err
	}
	// the replay's own functions are none of the programs
	for name := range clipBuiltins {
		delete(ix.byQual, name)
		delete(ix.byName, name)
	}
	roots := append([]*gdef{}, ix.byQual["clip_get_graph_builder"]...)
	if len(roots) == 0 {
		return fmt.Errorf("%s: no clip_get_graph_builder", clipCpp)
	}
	for _, d := range ix.all {
		short := d.class[strings.LastIndex(d.class, ":")+1:]
		if (d.name == "build" || d.name == "support_batch" || d.name == short) && strings.HasPrefix(d.class, "clip_graph") {
			roots = append(roots, d)
		}
	}
	g.headers = []string{clipDir + "/clip-graph.h", clipDir + "/models/models.h"}
	for _, d := range ix.reached(roots) {
		if err := g.addGraphDef(ix, d); err != nil {
			return err
		}
	}
	// a graph class made on the stack (clip_graph_X name(args)): its
	// construction, as make_unique's
	for _, fn := range g.fns {
		walk(fn, func(n *ast.Node) {
			if n.Op == ast.OpDecl && strings.HasPrefix(n.C, "clip_graph") && len(n.Kids) == 1 && n.Kids[0].Op == ast.OpList {
				n.Kids[0] = &ast.Node{Op: ast.OpCall, Kids: append([]*ast.Node{{Op: ast.OpIdent, S: "new::" + n.C}}, n.Kids[0].Kids...)}
				n.C, n.T = "", ast.TAuto
			}
		})
	}
	g.graphBases = map[string][]string{}
	for c, bs := range ix.bases {
		if strings.HasPrefix(c, "clip_graph") {
			g.graphBases[c] = bs
		}
	}
	dir := filepath.Join(out, "clip")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	if err := g.writePrograms(dir, pin); err != nil {
		return err
	}
	return g.writeClipTables(dir, header)
}

// resolveClip extracts the functions the programs call that the source
// defines, and fails on those that neither it nor the replay has.
func (g *generator) resolveClip() error {
	s := g.s
	var missing []string
	for len(g.pending) > 0 {
		pc := g.pending[0]
		g.pending = g.pending[1:]
		if _, done := g.fns[pc.name]; done || clipBuiltins[pc.name] || ast.Builtins[pc.name] {
			continue
		}
		found := false
		for _, rel := range []string{clipCpp, clipImpl, clipModel} {
			fn, err := s.findDef(rel, pc.name)
			if err != nil {
				return err
			}
			if fn != nil {
				if err := g.add(fn); err != nil {
					return err
				}
				found = true
				break
			}
		}
		if !found {
			missing = append(missing, pc.name)
		}
	}
	if len(missing) > 0 {
		sort.Strings(missing)
		return fmt.Errorf("clip: neither builtins nor defined in the source: %s", strings.Join(slicesCompact(missing), ", "))
	}
	return nil
}

// findDefsIn finds every definition of a method inside the body of
// struct class in a header (overloads included); of every method, when
// method is "".
func (s *source) findDefsIn(rel, class, method string) ([]*function, error) {
	toks, err := s.tokens(rel)
	if err != nil {
		return nil, err
	}
	start := -1
	for i := 0; i+2 < len(toks); i++ {
		if toks[i].s == "struct" && toks[i+1].s == class && toks[i+2].s == "{" {
			start = i + 2
			break
		}
	}
	if start < 0 {
		return nil, fmt.Errorf("%s: no struct %s", rel, class)
	}
	end, err := matchBrace(toks, start)
	if err != nil {
		return nil, err
	}
	var out []*function
	for i := start + 1; i+1 < end; i++ {
		if toks[i].k != tIdent || method != "" && toks[i].s != method || toks[i+1].s != "(" || toks[i-1].s == "." || toks[i-1].s == "->" {
			continue
		}
		k := matchParen(toks, i+1)
		params := toks[i+2 : k]
		k++
		for k < end && (toks[k].s == "const" || toks[k].s == "override" || toks[k].s == "noexcept") {
			k++
		}
		if toks[k].s != "{" {
			continue
		}
		e, err := matchBrace(toks, k)
		if err != nil {
			return nil, err
		}
		out = append(out, &function{name: class + "::" + toks[i].s, file: rel, line: toks[i].line, params: params, body: toks[k+1 : e]})
		i = e
	}
	return out, nil
}

var strDefineRe = regexp.MustCompile(`(?m)^#define\s+((?:TN|KEY)_[A-Z0-9_]+)\s+("(?:[^"\\]|\\.)*")`)

// writeClipTables writes internal/replay/clip/tables_gen.go: the name and key
// formats (TN_*, KEY_*), the projector types' names, the enum constants
// and the structs' members.
func (g *generator) writeClipTables(dir, header string) error {
	s := g.s
	text, err := s.read(clipImpl)
	if err != nil {
		return err
	}
	var b strings.Builder
	b.WriteString(header)
	b.WriteString("package clip\n\nimport (\n\t\"github.com/ggload/ggload/internal/replay/cpp\"\n\t\"github.com/ggload/ggload/internal/replay/cpp/ast\"\n)\n\n")
	b.WriteString("// formats: the tensor-name and metadata-key formats of clip-impl.h.\nvar formats = map[string]string{\n")
	defined := map[string]bool{}
	for _, m := range strDefineRe.FindAllStringSubmatch(text, -1) {
		if defined[m[1]] {
			continue // defined again, to the same text
		}
		defined[m[1]] = true
		fmt.Fprintf(&b, "\t%q: %s,\n", m[1], m[2])
	}
	b.WriteString("}\n\n")
	names, err := s.mapPairs(clipImpl, "PROJECTOR_TYPE_NAMES")
	if err != nil {
		return err
	}
	b.WriteString("// projectorNames: PROJECTOR_TYPE_NAMES, in the map's order.\nvar projectorNames = [][2]string{\n")
	for _, p := range names {
		fmt.Fprintf(&b, "\t{%q, %q},\n", p[0], p[1])
	}
	b.WriteString("}\n\n")
	// every constant of clip's enums (the structs' initializers name
	// some), and those of ggml's that the programs name
	consts, ggmlConsts := map[string]int64{}, map[string]int64{}
	for _, rel := range []string{clipImpl, clipModel, clipH} {
		if err := s.enums(rel, consts); err != nil {
			return err
		}
	}
	for _, rel := range []string{"ggml/include/ggml.h", "ggml/include/ggml-backend.h"} {
		if err := s.enums(rel, ggmlConsts); err != nil {
			return err
		}
		if err := s.defines(rel, ggmlConsts); err != nil {
			return err
		}
	}
	for _, rel := range []string{clipImpl, clipModel, clipH, clipDir + "/clip-graph.h"} {
		if err := s.defines(rel, consts); err != nil {
			return err
		}
	}
	// the sources' static constants
	models, err := filepath.Glob(filepath.Join(s.dir, clipDir, "models", "*.cpp"))
	if err != nil {
		return err
	}
	arrays := map[string][]int64{}
	for _, f := range append([]string{filepath.Join(s.dir, clipCpp)}, models...) {
		rel, _ := filepath.Rel(s.dir, f)
		if err := s.staticConsts(rel, consts); err != nil {
			return err
		}
		if err := s.staticArrays(rel, consts, arrays); err != nil {
			return err
		}
	}
	// the graph header's constant expressions over ggml's constants
	// (DEFAULT_INTERPOLATION_MODE)
	hdr, err := s.read(clipDir + "/clip-graph.h")
	if err != nil {
		return err
	}
	for _, m := range regexp.MustCompile(`(?m)^#define\s+([A-Z_][A-Z0-9_]*)\s+\(`).FindAllStringSubmatch(hdr, -1) {
		toks, err := s.macro(clipDir+"/clip-graph.h", m[1])
		if err != nil {
			return err
		}
		n, err := parseExpr(clipDir+"/clip-graph.h", append(toks, token{k: tEOF}))
		if err != nil {
			return err
		}
		if v, ok := constEval(n, ggmlConsts); ok {
			consts[m[1]] = v
		}
	}
	for n, v := range ggmlConsts {
		if g.identifiers()[n] {
			consts[n] = v
		}
	}
	var names2 []string
	for n := range consts {
		names2 = append(names2, n)
	}
	sort.Strings(names2)
	b.WriteString("// enumConsts: the enum constants the programs name.\nvar enumConsts = map[string]int64{\n")
	for _, n := range names2 {
		fmt.Fprintf(&b, "\t%q: %d,\n", n, consts[n])
	}
	b.WriteString("}\n\n")
	b.WriteString("// constArrays: the sources' static constant arrays of integers.\nvar constArrays = map[string][]int64{\n")
	for _, n := range slices.Sorted(maps.Keys(arrays)) {
		fmt.Fprintf(&b, "\t%q: %#v,\n", n, arrays[n])
	}
	b.WriteString("}\n\n")
	model, err := s.read(clipModel)
	if err != nil {
		return err
	}
	// every struct of clip-model.h, nested ones included
	var clipStructs []string
	for _, m := range structDefRe.FindAllStringSubmatch(model, -1) {
		clipStructs = append(clipStructs, m[1])
	}
	known := map[string]bool{}
	for _, st := range clipStructs {
		known[st] = true
	}
	s.braceInits = true
	defer func() { s.braceInits = false }()
	structs := map[string][]field{}
	for _, st := range clipStructs {
		fs, err := s.structFields(clipModel, st)
		if err != nil {
			return err
		}
		for i := range fs {
			f := &fs[i]
			ct := strings.TrimPrefix(f.CType, "const ")
			if known[ct] {
				f.Struct, f.Type = ct, ast.TObj
			}
			if f.Type == ast.TAuto && isClipEnum(ct) {
				f.Type, f.Enum = ast.TI32, true
			}
		}
		structs[st] = fs
	}
	// the graph's structs: clip_graph's members with their defaults,
	// build_vit_opts
	for _, st := range []string{"clip_graph", "build_vit_opts"} {
		fs, err := s.structFields(clipDir+"/clip-graph.h", st)
		if err != nil {
			return err
		}
		for i := range fs {
			fs[i].Enum = fs[i].Enum || isClipEnum(strings.TrimPrefix(fs[i].CType, "const "))
		}
		structs[st] = fs
	}
	// clip-impl.h's plain structs (dsv4_block_layout, clip_image_size)
	for _, st := range []string{"dsv4_block_layout", "clip_image_size"} {
		file := clipImpl
		if st == "clip_image_size" {
			file = clipH
		}
		fs, err := s.structFields(file, st)
		if err != nil {
			return err
		}
		structs[st] = fs
	}
	// ggml_init's parameters, brace-initialized by position
	fs, err := s.cStructFields("ggml/include/ggml.h", "ggml_init_params")
	if err != nil {
		return err
	}
	structs["ggml_init_params"] = fs
	writeFieldMap(&b, "structFields: the data members of clip-model.h's structs, clip_graph's and ggml_init_params.", "structFields", structs)
	writeLists(&b, "graphBases: the graph classes' bases.", "graphBases", g.graphBases)
	src, err := format.Source([]byte(b.String()))
	if err != nil {
		return fmt.Errorf("formatting clip tables: %w", err)
	}
	return os.WriteFile(filepath.Join(dir, "tables_gen.go"), src, 0o644)
}

func isClipEnum(ct string) bool {
	switch ct {
	case "projector_type", "clip_modality", "ffn_op_type", "norm_type", "patch_merge_type", "resize_algo", "pad_style",
		"clip_flash_attn_type", "clip_gen_process_type", "ggml_type":
		return true
	}
	return false
}
