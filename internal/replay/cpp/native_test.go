package cpp_test

import (
	"testing"
	"unsafe"

	"github.com/ggload/ggload/ggml/ops"
	"github.com/ggload/ggload/internal/replay/cpp"
	"github.com/ggload/ggload/lab/testenv"
)

func TestMain(m *testing.M) { testenv.Main(m) }

// A native ggml tensor's members, as the graph programs read them: ne,
// nb, type, op, flags, name, src, view_src and data, ggml's own values
// of tensors made by ggml on a no_alloc context.
func TestNativeTensorMembers(t *testing.T) {
	lib := testenv.Runtime(t).Ops()
	ctx := lib.NewContext(lib.TensorOverhead() * 8)
	if ctx == nil {
		t.Fatal("ggml_init failed")
	}
	defer lib.Free(ctx)
	w, err := lib.NewTensor(ctx, ops.TypeF32, 2, [4]int64{4, 6, 1, 1})
	if err != nil {
		t.Fatal(err)
	}
	lib.SetName(w, "w")
	sum, err := lib.Add(ctx, w, w)
	if err != nil {
		t.Fatal(err)
	}
	view, err := lib.View(ctx, w, 2, [4]int64{2, 3}, [4]uintptr{0, 16}, 0)
	if err != nil {
		t.Fatal(err)
	}
	lib.SetInput(w)
	var backing [16]byte
	withData := &ops.Tensor{Type: ops.TypeI32, Data: unsafe.Pointer(&backing[0])}

	in := func(t *testing.T, body string) (cpp.Val, error) {
		t.Helper()
		this := cpp.NewObject("counter")
		this.Open = true
		h := newRichHost(richLib)
		h.globals["W"] = cpp.Val{K: cpp.KNative, P: w}
		h.globals["SUM"] = cpp.Val{K: cpp.KNative, P: sum}
		h.globals["VIEW"] = cpp.Val{K: cpp.KNative, P: view}
		h.globals["WITH_DATA"] = cpp.Val{K: cpp.KNative, P: withData}
		p, err := cpp.DecodeProgram("fn test test.cpp:1\n(block)\n(block " + body + ")")
		if err != nil {
			t.Fatal(err)
		}
		richLib.Prepare(p)
		return (&cpp.Interp{Lib: richLib, Host: h}).Call(p, cpp.Val{K: cpp.KObj, P: this}, nil)
	}
	checkValues(t, in, []valueCase{
		{"ne", `(return (idx (mem "ne" W) 1))`, int64(6)},
		{"ne is a C array of 4", `(return (call (mem "size" (mem "ne" W))))`, int64(4)},
		{"nb: a row's bytes", `(return (idx (mem "nb" W) 1))`, int64(16)},
		{"nb of the last dimension", `(return (idx (mem "nb" W) 3))`, int64(96)},
		{"type", `(return (mem "type" W))`, int64(ops.TypeF32)},
		{"op of a leaf", `(return (mem "op" W))`, int64(0)},
		{"op of a sum", `(return (bin "!=" (mem "op" SUM) 0))`, int64(1)},
		{"flags of an input", `(return (bin "!=" (mem "flags" W) 0))`, int64(1)},
		{"name", `(return (mem "name" W))`, "w"},
		{"an op's sources", `(return (bin "&&" (bin "==" (idx (mem "src" SUM) 0) W) (bin "==" (idx (mem "src" SUM) 1) W)))`, int64(1)},
		{"a source it has not", `(return (bin "==" (idx (mem "src" SUM) 2) nullptr))`, int64(1)},
		{"a leaf's sources", `(return (bin "==" (idx (mem "src" W) 0) nullptr))`, int64(1)},
		{"a view's source", `(return (bin "==" (mem "view_src" VIEW) W))`, int64(1)},
		{"a view's shape", `(return (idx (mem "ne" VIEW) 1))`, int64(3)},
		{"no view source", `(return (bin "==" (mem "view_src" W) nullptr))`, int64(1)},
		{"no data on a no_alloc context", `(return (bin "==" (mem "data" W) nullptr))`, int64(1)},
		{"data", `(return (bin "==" (mem "data" WITH_DATA) (cast :u64 0)))`, int64(0)},
		{"an unnamed tensor", `(return (call (mem "size" (mem "name" WITH_DATA))))`, int64(0)},
	})
	checkErrors(t, in, []errorCase{
		{"a member a tensor has not", `(return (mem "grad" W))`, "eval", `member grad of ggml tensor "w" [4 6 1 1]`},
	})
	if d := (cpp.Val{K: cpp.KNative, P: sum}).Describe(); d != `ggml tensor "" [4 6 1 1]` {
		t.Errorf("an unnamed tensor describes as %s", d)
	}
}
