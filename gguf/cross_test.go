package gguf_test

import (
	"errors"
	"path/filepath"
	"strings"
	"testing"

	"github.com/ggload/ggload/bindings"
	"github.com/ggload/ggload/ggml"
	"github.com/ggload/ggload/gguf"
	"github.com/ggload/ggload/lab/testenv"
)

// Every GGUF file of the pinned source's models/ directory reads the same in
// our reader and in ggml's.
func TestCrossReferenceModels(t *testing.T) {
	src := testenv.SourceTree(t)
	lib := testenv.Lib(testenv.Runtime(t))
	files, err := filepath.Glob(filepath.Join(src, "models", "*.gguf"))
	must(t, err)
	if len(files) == 0 {
		t.Fatalf("no .gguf files in %s/models", src)
	}
	for _, p := range files {
		f, err := gguf.Open(p)
		if err != nil {
			t.Errorf("%s: %v", p, err)
			continue
		}
		compareDumps(t, filepath.Base(p), ourDump(t, f), nativeDump(t, lib, p))
		f.Close()
	}
	t.Logf("%d files compared", len(files))
}

// Files from our writer read the same in ggml's reader, for several
// alignments.
func TestWriterReadByNative(t *testing.T) {
	lib := testenv.Lib(testenv.Runtime(t))
	for _, align := range []uint64{0, 1, 64, 4096} {
		path := writeSample(t, align)
		f, err := gguf.Open(path)
		must(t, err)
		compareDumps(t, path, ourDump(t, f), nativeDump(t, lib, path))
		f.Close()
	}
}

// Files from ggml's writer read the same in ours, tensor data included.
func TestNativeWriterReadByOurs(t *testing.T) {
	rt := testenv.Runtime(t)
	lib := testenv.Lib(rt)
	ctx := lib.GGUFInitEmpty()
	defer lib.GGUFFree(ctx)
	lib.GGUFSetValStr(ctx, "general.architecture", "llama")
	lib.GGUFSetValU8(ctx, "n.u8", 9)
	lib.GGUFSetValI8(ctx, "n.i8", -9)
	lib.GGUFSetValU16(ctx, "n.u16", 999)
	lib.GGUFSetValI16(ctx, "n.i16", -999)
	lib.GGUFSetValU32(ctx, "n.u32", 99999)
	lib.GGUFSetValI32(ctx, "n.i32", -99999)
	lib.GGUFSetValF32(ctx, "n.f32", 1.25)
	lib.GGUFSetValU64(ctx, "n.u64", 1<<40)
	lib.GGUFSetValI64(ctx, "n.i64", -1<<40)
	lib.GGUFSetValF64(ctx, "n.f64", 2.5)
	lib.GGUFSetValBool(ctx, "n.bool", true)
	ints := []int32{3, -1, 4}
	lib.GGUFSetArrData(ctx, "n.arr", int32(gguf.TypeInt32), bindings.Ptr(int32Bytes(ints)), uintptr(len(ints)))
	strs := []string{"a", "", "ccc"}
	ptrs := make([]*byte, len(strs))
	for i, s := range strs {
		ptrs[i] = bindings.CString(s)
	}
	lib.GGUFSetArrStr(ctx, "n.strs", &ptrs[0], uintptr(len(ptrs)))

	gctx, err := rt.NewContext(ggml.ContextParams{Tensors: 3, DataBytes: 1 << 16})
	must(t, err)
	defer gctx.Free()
	var want [][]byte
	for i, spec := range []struct {
		typ ggml.Type
		ne  []int64
	}{{ggml.TypeF32, []int64{17}}, {ggml.TypeQ8_0, []int64{64, 3}}, {ggml.TypeF16, []int64{5, 2, 3}}} {
		tn, err := gctx.NewTensor(spec.typ, spec.ne...)
		must(t, err)
		must(t, tn.SetName("tensor."+string(rune('a'+i))))
		data := make([]byte, tn.NBytes())
		for j := range data {
			data[j] = byte(i*31 + j)
		}
		copy(unsafeBytes(tn), data)
		want = append(want, data)
		lib.GGUFAddTensor(ctx, testenv.TensorC(tn))
	}
	path := filepath.Join(t.TempDir(), "native.gguf")
	if !lib.GGUFWriteToFile(ctx, path, false) {
		t.Fatal("native write failed")
	}
	f, err := gguf.Open(path)
	must(t, err)
	defer f.Close()
	compareDumps(t, "native writer", ourDump(t, f), nativeDump(t, lib, path))
	for i, ti := range f.Tensors {
		got := make([]byte, ti.Size)
		_, err := f.Data(ti).ReadAt(got, 0)
		must(t, err)
		if string(got) != string(want[i]) {
			t.Errorf("tensor %s data differs", ti.Name)
		}
	}
	if v, _ := f.Lookup("n.strs"); v.Len() != 3 {
		t.Errorf("n.strs %v", v.Format(-1))
	}
}

// ggml's writer does not apply a general.alignment set through
// gguf_set_val_u32 to its offsets, so the file it writes is refused by ggml's
// own reader; ours refuses it the same way, naming the tensor.
func TestNativeWriterAlignmentQuirkRefusedByBoth(t *testing.T) {
	rt := testenv.Runtime(t)
	lib := testenv.Lib(rt)
	ctx := lib.GGUFInitEmpty()
	defer lib.GGUFFree(ctx)
	lib.GGUFSetValU32(ctx, gguf.KeyAlignment, 64)
	gctx, err := rt.NewContext(ggml.ContextParams{Tensors: 2, DataBytes: 1024})
	must(t, err)
	defer gctx.Free()
	for _, name := range []string{"a", "b"} {
		tn, err := gctx.NewTensor(ggml.TypeF32, 5)
		must(t, err)
		must(t, tn.SetName(name))
		lib.GGUFAddTensor(ctx, testenv.TensorC(tn))
	}
	path := filepath.Join(t.TempDir(), "quirk.gguf")
	if !lib.GGUFWriteToFile(ctx, path, false) {
		t.Fatal("native write failed")
	}
	if c := lib.GGUFInitFromFile(path, bindings.GGUFInitParams{NoAlloc: true}); c != 0 {
		lib.GGUFFree(c)
		t.Fatal("ggml's reader accepted the file; the quirk is gone and this test should change")
	}
	_, err = gguf.Open(path)
	if !errors.Is(err, gguf.ErrTensorOffset) || !strings.Contains(err.Error(), `"b"`) {
		t.Fatalf("got %v", err)
	}
}
