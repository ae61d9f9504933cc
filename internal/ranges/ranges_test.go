package ranges

import (
	"slices"
	"testing"
)

func TestRanges(t *testing.T) {
	own := List{{100, 200}, {0, 50}, {150, 300}, {300, 310}, {400, 400}}.Merge()
	if !slices.Equal(own, List{{0, 50}, {100, 310}}) {
		t.Fatalf("merge: %v", own)
	}
	other := List{{120, 130}, {40, 60}, {300, 500}}.Merge()
	for _, c := range []struct {
		name      string
		got, want List
	}{
		{"sub", own.Sub(other), List{{0, 40}, {100, 120}, {130, 300}}},
		{"sub nothing", own.Sub(nil), own},
		{"sub everything", own.Sub(List{{0, 1000}}), nil},
		{"complement", List{{10, 20}, {5, 12}, {30, 40}}.Complement(50), List{{0, 5}, {20, 30}, {40, 50}}},
		{"complement past the limit", List{{10, 80}}.Complement(50), List{{0, 10}}},
		{"complement of none", List(nil).Complement(8), List{{0, 8}}},
		{"complement of an empty range", List{{3, 3}}.Complement(8), List{{0, 8}}},
		{"cut the middle", List{{0, 100}}.Cut(40, 60), List{{0, 40}, {60, 100}}},
		{"cut an end", List{{0, 100}, {200, 300}}.Cut(50, 250), List{{0, 50}, {250, 300}}},
		{"cut a whole range", List{{0, 10}, {20, 30}}.Cut(0, 10), List{{20, 30}}},
		{"cut outside", List{{0, 10}}.Cut(20, 30), List{{0, 10}}},
	} {
		if !slices.Equal(c.got, c.want) {
			t.Errorf("%s: %v, want %v", c.name, c.got, c.want)
		}
	}
	// Complement leaves its list as it was
	l := List{{30, 40}, {10, 20}}
	l.Complement(50)
	if !slices.Equal(l, List{{30, 40}, {10, 20}}) {
		t.Errorf("Complement changed its list: %v", l)
	}
}
