package sysmem

import (
	"testing"
	"unsafe"
)

func TestWholePages(t *testing.T) {
	m, err := Map(4 << 12)
	if err != nil {
		t.Fatal(err)
	}
	defer Unmap(m)
	base := uintptr(unsafe.Pointer(&m[0])) // page-aligned
	for _, c := range []struct {
		off  int
		n    uint64
		want [][2]uintptr // offsets from base
	}{
		{0, 8192, [][2]uintptr{{0, 8192}}},
		{4000, 8192, [][2]uintptr{{4096, 8192}}},
		{1, 12288, [][2]uintptr{{4096, 12288}}},
		{4097, 4095, nil},
		{0, 4095, nil},
	} {
		got := WholePages(unsafe.Pointer(&m[c.off]), c.n)
		var want Ranges
		for _, r := range c.want {
			want = append(want, [2]uintptr{base + r[0], base + r[1]})
		}
		if len(got) != len(want) || len(got) == 1 && got[0] != want[0] {
			t.Errorf("WholePages(+%d, %d) = %v, want %v", c.off, c.n, got, want)
		}
		if got.Bytes() != want.Bytes() {
			t.Errorf("WholePages(+%d, %d) spans %d bytes, want %d", c.off, c.n, got.Bytes(), want.Bytes())
		}
	}
}
