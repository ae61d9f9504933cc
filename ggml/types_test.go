package ggml_test

import (
	"testing"

	"github.com/ggload/ggload/ggml"
	"github.com/ggload/ggload/lab/testenv"
)

// The pure-Go traits table must agree with the native library for every
// type id of the pin, removed ones included.
func TestTypeTraitsMatchNative(t *testing.T) {
	rt := testenv.Runtime(t)
	lib := rt.Lib()
	for id := int32(0); id < int32(ggml.TypeCount); id++ {
		ty := ggml.Type(id)
		tr, ok := ty.Traits()
		if !ok {
			t.Fatalf("type %d has no traits", id)
		}
		if got := lib.TypeName(id); got != tr.Name {
			t.Errorf("type %d name: go %q native %q", id, tr.Name, got)
		}
		if got := lib.BlckSize(id); got != tr.BlockSize {
			t.Errorf("%s block size: go %d native %d", tr.Name, tr.BlockSize, got)
		}
		if got := int64(lib.TypeSize(id)); got != tr.TypeSize {
			t.Errorf("%s type size: go %d native %d", tr.Name, tr.TypeSize, got)
		}
		if got := lib.IsQuantized(id); got != tr.Quantized {
			t.Errorf("%s quantized: go %v native %v", tr.Name, tr.Quantized, got)
		}
		if ty.Valid() {
			row, err := ty.RowSize(4 * tr.BlockSize)
			if err != nil || uint64(row) != uint64(lib.RowSize(id, 4*tr.BlockSize)) {
				t.Errorf("%s row size: go %d (%v) native %d", tr.Name, row, err, lib.RowSize(id, 4*tr.BlockSize))
			}
		}
	}
}

// ggml_nbytes of tensors the library creates equals Type.Bytes and
// Tensor.NBytes, for every valid type and a spread of shapes.
func TestBytesMatchNative(t *testing.T) {
	rt := testenv.Runtime(t)
	ctx, err := rt.NewContext(ggml.ContextParams{Tensors: 2000, NoAlloc: true})
	if err != nil {
		t.Fatal(err)
	}
	defer ctx.Free()
	shapes := [][]int64{{1}, {3, 5}, {7, 1, 2}, {2, 3, 4, 5}, {1, 0, 3}, {11, 13, 1, 1}}
	for id := ggml.Type(0); id < ggml.TypeCount; id++ {
		if !id.Valid() {
			continue
		}
		for _, s := range shapes {
			ne := append([]int64(nil), s...)
			ne[0] *= id.BlockSize()
			tn, err := ctx.NewTensor(id, ne...)
			if err != nil {
				t.Fatalf("%s %v: %v", id, ne, err)
			}
			native := uint64(rt.Lib().NBytes(tn.C()))
			var sh ggml.Shape = ggml.Shape{1, 1, 1, 1}
			copy(sh[:], ne)
			goBytes, err := id.Bytes(sh)
			if err != nil || uint64(goBytes) != native || tn.NBytes() != native {
				t.Errorf("%s %v: native %d, Type.Bytes %d (%v), Tensor.NBytes %d", id, ne, native, goBytes, err, tn.NBytes())
			}
			if st := id.Strides(sh); [4]uint64{uint64(st[0]), uint64(st[1]), uint64(st[2]), uint64(st[3])} != tn.Strides() {
				t.Errorf("%s %v: strides %v vs native %v", id, ne, st, tn.Strides())
			}
		}
	}
}

func TestTypeChecks(t *testing.T) {
	for _, c := range []struct {
		t   ggml.Type
		ne  int64
		bad bool
	}{
		{ggml.TypeQ4_K, 256, false},
		{ggml.TypeQ4_K, 255, true},
		{ggml.TypeQ4_K, -256, true},
		{ggml.Type(4), 32, true},
		{ggml.Type(99), 32, true},
		{ggml.TypeF32, 1 << 61, true},
	} {
		_, err := c.t.RowSize(c.ne)
		if (err != nil) != c.bad {
			t.Errorf("%s RowSize(%d): err %v", c.t, c.ne, err)
		}
	}
	if _, err := ggml.TypeF32.Bytes(ggml.Shape{1 << 32, 1 << 32, 1, 1}); err == nil {
		t.Error("overflowing shape accepted")
	}
	if ty, ok := ggml.TypeByName("Q4_k"); !ok || ty != ggml.TypeQ4_K {
		t.Error("TypeByName")
	}
	if _, ok := ggml.TypeByName("DEPRECATED"); ok {
		t.Error("removed type found by name")
	}
}
