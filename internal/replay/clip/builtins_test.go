package clip

import (
	"fmt"
	"path/filepath"
	"sort"
	"strings"
	"testing"

	"github.com/ggload/ggload/gguf"
	"github.com/ggload/ggload/internal/replay/cpp"
)

// A program that calls one of the builtins wrongly (too few
// arguments, or arguments whose evaluation fails) gets an error, never a
// panic: the programs are generated from the pin, and a later pin's may
// call a builtin as this one does not.
func TestBuiltinsRefuseBadCalls(t *testing.T) {
	w := gguf.NewWriter()
	if err := w.Set("general.architecture", gguf.String("clip")); err != nil {
		t.Fatal(err)
	}
	if err := w.AddTensorBytes("v.t", 0, []int64{2}, make([]byte, 8)); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "t.gguf")
	if err := w.WriteFile(path); err != nil {
		t.Fatal(err)
	}
	f, err := gguf.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	// every builtin of the programs: the loader's, and the graphs' (which,
	// outside a graph's building, refuse)
	var names []string
	all := map[string]cpp.Builtin{}
	for n := range builtins {
		all[n] = nil
	}
	for n := range graphBuiltins() {
		all[n] = nil
	}
	for n := range all {
		b, ok := programs.Builtin(n)
		if !ok {
			t.Fatalf("%s is not a builtin of the programs", n)
		}
		all[n] = b
		names = append(names, n)
	}
	sort.Strings(names)
	// per builtin: no arguments; three whose evaluation fails; and
	// arguments of a valid form and a tensor index out of range
	var text strings.Builder
	calls := map[string]string{}
	for i, n := range names {
		for j, args := range []string{"", ` (bin "/" 1 0) (bin "/" 1 0) (bin "/" 1 0)`, ` "a" 99 "b"`} {
			fn := fmt.Sprintf("t%d_%d", i, j)
			calls[fn] = n + args
			fmt.Fprintf(&text, "fn %s test.cpp:%d\n(block)\n(block (expr (call %s%s)))\n", fn, i+1, n, args)
		}
	}
	lib := cpp.NewLibrary(text.String(), staticGlobal, structFields)
	lib.Register(all)
	r := &Run{path: path, f: f, seen: map[string]bool{}}
	r.Interp = cpp.Interp{Lib: lib, Host: r}
	var refused int
	for fn, call := range calls {
		func() {
			defer func() {
				if p := recover(); p != nil {
					t.Errorf("(%s) panicked: %v", call, p)
				}
			}()
			p, err := lib.Lookup(fn)
			if err != nil {
				t.Fatalf("(%s): %v", call, err)
			}
			if _, err := r.CallCells(p, cpp.Void, nil); err != nil {
				refused++
			}
		}()
	}
	t.Logf("%d of %d calls refused", refused, len(calls))
	if refused < len(names) {
		t.Errorf("%d of %d calls refused: fewer than one a builtin", refused, len(calls))
	}
}
