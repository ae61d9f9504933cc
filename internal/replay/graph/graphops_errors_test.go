package graph_test

import (
	"errors"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/ggload/ggload/internal/replay/arch"
	"github.com/ggload/ggload/internal/replay/cpp"
	"github.com/ggload/ggload/internal/replay/graph"
	"github.com/ggload/ggload/internal/synthmodel"
	"github.com/ggload/ggload/lab/testenv"
)

var arityError = regexp.MustCompile(`: 0 arguments, not (\d+) `)

// Every ggml function the graph programs call refuses what ggml would
// crash on: a wrong number of arguments, an argument of the wrong kind
// where ggml takes a context, a graph or a tensor, and a null tensor (an
// Abort, as ggml would dereference it). Only the functions that take no
// tensor make one of zeros.
func TestGGMLOpsRefuseBadArguments(t *testing.T) {
	noTensor := map[string]bool{"ggml_row_size": true, "ggml_new_tensor_1d": true, "ggml_new_tensor_2d": true,
		"ggml_new_tensor_3d": true, "ggml_new_tensor_4d": true}
	names := graph.GGMLOps()
	if len(names) < 100 {
		t.Fatalf("%d ggml functions", len(names))
	}
	for _, name := range names {
		_, err := runOps(t, `(return (call `+name+`))`)
		n := 0
		if m := arityError.FindStringSubmatch(err.Error()); m != nil {
			n, _ = strconv.Atoi(m[1])
		} else if !strings.Contains(err.Error(), "null tensor passed to "+name) { // of any number of arguments
			t.Errorf("%s(): %v", name, err)
			continue
		}
		if n == 0 {
			continue
		}
		rest := strings.Repeat(" nullptr", n-1)
		_, err = runOps(t, `(return (call `+name+` "x"`+rest+`))`)
		if err == nil && name != "ggml_row_size" {
			t.Errorf(`%s("x", ...): no error`, name)
		}
		_, err = runOps(t, `(return (bin "!=" (call `+name+` ctx`+rest+`) 0))`)
		var a *arch.Abort
		switch {
		case noTensor[name]:
			if err != nil {
				t.Errorf("%s(ctx, 0...): %v", name, err)
			}
		case err == nil:
			t.Errorf("%s(ctx, nullptr...): no error", name)
		case strings.HasPrefix(name, "ggml_build_forward") || name == "ggml_arange":
			// a context where a graph goes; a range of no length
		case !errors.As(err, &a) && !strings.Contains(err.Error(), "is no tensor"):
			t.Errorf("%s(ctx, nullptr...): %v, want an Abort", name, err)
		}
	}
}

// The ops the newer architectures' graphs reach little, the graph's own
// builtins, and their misuses.
func TestGraphOpsMore(t *testing.T) {
	cases := []struct {
		name string
		body string
		want int64
	}{
		{"pad_ext", `(return (idx (mem "ne" (call ggml_pad_ext ctx t 1 2 0 1 0 0 0 0)) 1))`, 7},
		{"set_inplace", `(block (decl "b" (call ggml_new_tensor_2d ctx 0 4 2)) (return (idx (mem "ne" (call ggml_set_inplace ctx t b 16 96 96 0)) 1)))`, 6},
		{"tri", `(block (decl "s" (call ggml_new_tensor_2d ctx 0 4 4)) (return (idx (mem "ne" (call ggml_tri ctx s 0)) 0)))`, 4},
		{"solve_tri", `(block (decl "a" (call ggml_new_tensor_2d ctx 0 4 4)) (decl "b" (call ggml_new_tensor_2d ctx 0 3 4))
			(return (idx (mem "ne" (call ggml_solve_tri ctx a b true true false)) 0)))`, 3},
		{"build_forward_select", `(block (decl "ts" :ptr @"array" 2 (list (call ggml_add ctx t t) (call ggml_mul ctx t t)))
			(return (bin "==" (call ggml_build_forward_select gf ts 2 1) (idx ts 1))))`, 1},
		{"rope_multi of sections through an iterator", `(block (decl "x" (call ggml_new_tensor_3d ctx 0 8 2 6)) (decl "pos" (call ggml_new_tensor_1d ctx 26 24))
			(decl "sec" :obj @"std::array<int, 4>" (list 1 1 1 1))
			(return (idx (mem "ne" (call ggml_rope_multi ctx x pos nullptr 8 (call (mem "begin" sec)) 8 256 10000.0 1.0 0.0 1.0 32.0 1.0)) 2)))`, 6},
		{"no scheduler: a backend pinned to none", `(block (expr (call ggml_backend_sched_set_tensor_backend nullptr t nullptr)) (return 1))`, 1},
	}
	for _, c := range cases {
		v, err := runOps(t, c.body)
		if err != nil || v != c.want {
			t.Errorf("%s = %d, %v; want %d", c.name, v, err, c.want)
		}
	}
	for _, c := range []struct{ name, body, want string }{
		{"select of no array", `(return (call ggml_build_forward_select gf t 1 0))`, "ggml_build_forward_select of ggml tensor"},
		{"select past the tensors", `(block (decl "ts" :ptr @"array" 1 (list t)) (return (call ggml_build_forward_select gf ts 1 1)))`, "idx >= 0 && idx < n_tensors"},
		{"select of a null tensor", `(block (decl "ts" :ptr @"array" 2 (list t)) (return (call ggml_build_forward_select gf ts 2 0)))`, "null tensor passed to ggml_build_forward_select"},
		{"rope_multi of no sections", `(block (decl "pos" (call ggml_new_tensor_1d ctx 26 24))
			(return (call ggml_rope_multi ctx t pos nullptr 8 5 8 256 10000.0 1.0 0.0 1.0 32.0 1.0)))`, "sections are i32 5, not an array of 4"},
		{"rope_multi of sections of strings", `(block (decl "pos" (call ggml_new_tensor_1d ctx 26 24)) (decl "sec" :obj @"std::vector<std::string>" (list "a" "b" "c" "d"))
			(return (call ggml_rope_multi ctx t pos nullptr 8 sec 8 256 10000.0 1.0 0.0 1.0 32.0 1.0)))`, "cannot convert"},
		{"a backend of two arguments", `(expr (call ggml_backend_sched_set_tensor_backend nullptr t))`, "of 2 arguments"},
		{"a backend of numbers", `(expr (call ggml_backend_sched_set_tensor_backend 1 t 2))`, "ggml_backend_sched_set_tensor_backend(i32 1, ggml tensor"},
		{"an argument that fails", `(expr (call ggml_backend_sched_set_tensor_backend (call nothing) t 2))`, "unknown function nothing"},
		{"an op's argument that fails", `(return (call ggml_cont ctx (call nothing)))`, "unknown function nothing"},
		{"a tensor of a number", `(return (call ggml_cont ctx 5))`, "i32 5 is no tensor"},
	} {
		_, err := runOps(t, c.body)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: %v, want %q", c.name, err, c.want)
		}
	}
}

// Outside a graph being built, the ggml functions refuse to run.
func TestGGMLOpsOutsideAGraph(t *testing.T) {
	rt := testenv.Runtime(t)
	path, err := synthmodel.DemoModel(rt)
	if err != nil {
		t.Fatal(err)
	}
	r, err := arch.Load(testenv.OpenModel(t, path), arch.Options{})
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct{ body, want string }{
		{`(return (call ggml_cont nullptr nullptr))`, "ggml_cont outside BuildGraph"},
		{`(return (call ggml_new_tensor_1d nullptr 0 4))`, "ggml_new_tensor_1d outside BuildGraph"},
	} {
		p, err := cpp.DecodeProgram("fn test test.cpp:1\n(block)\n(block " + c.body + ")")
		if err != nil {
			t.Fatal(err)
		}
		arch.Library().Prepare(p)
		if _, err := r.Call(p, cpp.Val{K: cpp.KObj, P: r.Model()}, nil); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: %v, want %q", c.body, err, c.want)
		}
	}
}
