package arch

import (
	"errors"
	"strings"
	"testing"

	"github.com/ggload/ggload/internal/replay/cpp"
)

// run evaluates a program body (in the programs' text form) in a llama
// model's run, with this being the model.
func run(t *testing.T, body string) (cpp.Val, error) {
	t.Helper()
	return runWith(t, llamaWriter(t, false), Options{}, body)
}

// C++'s semantics over the model's own objects: llama_hparams' arrays
// and methods, the layers.
func TestEvalSemantics(t *testing.T) {
	cases := []struct {
		name string
		body string
		want int64
	}{
		{"array assignment copies", `(block (expr (set "=" (idx (mem "n_head_arr" hparams) 0) 3))
			(expr (set "=" (mem "n_head_kv_arr" hparams) (mem "n_head_arr" hparams)))
			(expr (set "=" (idx (mem "n_head_arr" hparams) 0) 9))
			(return (idx (mem "n_head_kv_arr" hparams) 0)))`, 3},
		{"hparams method", `(return (call (mem "n_layer" hparams)))`, 2},
		{"null member is false", `(block (expr (call (mem "resize" layers) 2)) (return (un "!" (mem "wq_s" (idx layers 0)))))`, 1},
	}
	for _, c := range cases {
		checkValueWith(t, run, c.name, c.body, c.want)
	}
	var a *cpp.Abort
	if _, err := run(t, `(return (idx (mem "n_head_arr" hparams) 100000))`); !errors.As(err, &a) || !strings.Contains(err.Error(), "out of range") {
		t.Errorf("index past an hparams array's end: %v", err)
	}
}
