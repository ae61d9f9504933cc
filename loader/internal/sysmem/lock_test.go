//go:build unix

package sysmem

import (
	"testing"
	"unsafe"
)

// A lock grows over the pages its range touches, whatever the range's
// alignment, never past its last page, and Release unlocks them all.
func TestLockCoversTheRangesPages(t *testing.T) {
	page := uintptr(pageSize())
	b, err := Map(int(4 * page))
	if err != nil {
		t.Fatal(err)
	}
	defer Unmap(b)
	var warned string
	// two pages' worth from 100 bytes into the first: three pages
	l := NewLock(unsafe.Pointer(&b[100]), 2*page, "the test range", func(s string) { warned = s })
	for _, c := range []struct{ target, want uintptr }{
		{1, page}, {page - 100, page}, {page - 99, 2 * page}, {2 * page, 3 * page}, {1 << 30, 3 * page},
	} {
		l.GrowTo(c.target)
		if warned != "" {
			t.Skipf("memory cannot be locked here: %s", warned)
		}
		if l.locked != c.want {
			t.Fatalf("GrowTo(%d): %d bytes locked, want %d", c.target, l.locked, c.want)
		}
	}
	l.Release()
	if l.locked != 0 {
		t.Fatalf("%d bytes locked after Release", l.locked)
	}
	// an empty range locks nothing, and says nothing
	empty := NewLock(nil, 0, "nothing", func(s string) { t.Errorf("an empty range warns: %s", s) })
	empty.GrowTo(1 << 20)
	empty.Release()
}
