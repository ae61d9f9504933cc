package arch

import (
	"errors"
	"strings"
	"testing"

	"github.com/ggload/ggload/internal/cpp"
)

// run evaluates a program body (in the programs' text form) in a llama
// model's run, with this being the model.
func run(t *testing.T, body string) (cpp.Val, error) {
	t.Helper()
	r, err := Load(memModel(t, llamaWriter(t, false)), Options{})
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(body, "(block") {
		body = "(block " + body + ")"
	}
	p, err := cpp.DecodeProgram("fn test test.cpp:1\n(block)\n" + body)
	if err != nil {
		t.Fatal(err)
	}
	programs.Prepare(p)
	return r.Call(p, cpp.Val{K: cpp.KObj, P: r.model}, nil)
}

// C++'s semantics where the programs depend on them.
func TestEvalSemantics(t *testing.T) {
	cases := []struct {
		name string
		body string
		want int64
	}{
		{"unsigned wraps", `(block (decl "x" :u32 0) (expr (set "-=" x 1)) (return x))`, 4294967295},
		{"unsigned compare", `(block (decl "x" :u32 0) (return (bin "<" (bin "-" x 1) 5)))`, 0},
		{"signed compare", `(block (decl "x" :i32 0) (return (bin "<" (bin "-" x 1) 5)))`, 1},
		{"integer division truncates", `(return (bin "/" -7 2))`, -3},
		{"cast to int truncates", `(return (cast :i32 2.9))`, 2},
		{"switch falls through", `(block (decl "n" :i32 0)
			(switch 1 (case 0 (expr (set "+=" n 1))) (case 1 (expr (set "+=" n 10))) (case 2 (expr (set "+=" n 100)) (break)) (case (nil) (expr (set "+=" n 1000))))
			(return n))`, 110},
		{"switch default", `(block (decl "n" :i32 0) (switch 7 (case 0 (expr (set "=" n 1))) (case (nil) (expr (set "=" n 2)))) (return n))`, 2},
		{"for with continue and break", `(block (decl "s" :i32 0)
			(for (decl "i" :i32 0) (bin "<" i 10) (un "post++" i)
				(block (if (nil) (bin "==" i 3) (continue) (nil)) (if (nil) (bin "==" i 6) (break) (nil)) (expr (set "+=" s i))))
			(return s))`, 0 + 1 + 2 + 4 + 5},
		{"try catches a throw", `(block (decl "n" :i32 0) (try (block (throw "boom") (expr (set "=" n 1))) (block (expr (set "=" n 2)))) (return n))`, 2},
		{"lambda captures by reference", `(block (decl "n" :i32 1) (decl "f" (lambda (block (decl "k" :i32)) (block (expr (set "+=" n k)))))
			(expr (call f 5)) (expr (call f 7)) (return n))`, 13},
		{"array assignment copies", `(block (expr (set "=" (idx (mem "n_head_arr" hparams) 0) 3))
			(expr (set "=" (mem "n_head_kv_arr" hparams) (mem "n_head_arr" hparams)))
			(expr (set "=" (idx (mem "n_head_arr" hparams) 0) 9))
			(return (idx (mem "n_head_kv_arr" hparams) 0)))`, 3},
		{"reference aliases", `(block (decl "x" :i32 1) (decl "y" :ref x) (expr (set "=" y 4)) (return x))`, 4},
		{"shadowing in a block", `(block (decl "x" :i32 1) (block (decl "x" :i32 2) (expr (set "=" x 3))) (return x))`, 1},
		{"short circuit", `(block (decl "n" :i32 0) (expr (bin "||" 1 (set "=" n 5))) (return n))`, 0},
		{"ternary", `(return (cond (bin ">" 2 1) 7 8))`, 7},
		{"hparams method", `(return (call (mem "n_layer" hparams)))`, 2},
		{"null member is false", `(return (un "!" (mem "wq_s" (idx layers 0))))`, 1},
	}
	for _, c := range cases {
		if strings.Contains(c.body, "layers") {
			c.body = `(block (expr (call (mem "resize" layers) 2)) ` + c.body + `)`
		}
		v, err := run(t, c.body)
		if err != nil {
			t.Errorf("%s: %v", c.name, err)
			continue
		}
		if v.K != cpp.KInt || v.I != c.want {
			t.Errorf("%s = %s, want %d", c.name, v.Describe(), c.want)
		}
	}
}

// What llama.cpp would crash on is an Abort, never a Go panic; what the
// evaluator cannot do is its own error.
func TestEvalFailures(t *testing.T) {
	var a *cpp.Abort
	if _, err := run(t, `(return (bin "/" 1 0))`); !errors.As(err, &a) {
		t.Errorf("division by zero: %v", err)
	}
	if _, err := run(t, `(expr (call GGML_ASSERT (bin "==" 1 2)))`); !errors.As(err, &a) || a.Msg != "GGML_ASSERT(1 == 2) failed" {
		t.Errorf("assert: %v", err)
	}
	if _, err := run(t, `(return (idx (mem "n_head_arr" hparams) 100000))`); !errors.As(err, &a) {
		t.Errorf("index past the end: %v", err)
	}
	var e *cpp.EvalError
	if _, err := run(t, `(return (call no_such_function))`); !errors.As(err, &e) {
		t.Errorf("unknown function: %v", err)
	}
	var th *cpp.Throw
	if _, err := run(t, `(throw (call format "bad %s %d" "x" 3))`); !errors.As(err, &th) || th.Msg != "bad x 3" {
		t.Errorf("throw: %v", err)
	}
}
