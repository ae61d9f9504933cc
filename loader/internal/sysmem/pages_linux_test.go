//go:build linux

package sysmem

import "testing"

// since finds the memory mapped in after a listing, in runs of at least
// the size asked for.
func TestMemorySince(t *testing.T) {
	const M = 1 << 20
	for _, c := range []struct {
		name        string
		before, now Ranges
		want        Ranges
	}{
		{"nothing new", Ranges{{0, 8 * M}}, Ranges{{0, 8 * M}}, nil},
		{"a new mapping", Ranges{{0, 8 * M}}, Ranges{{0, 8 * M}, {16 * M, 32 * M}}, Ranges{{16 * M, 32 * M}}},
		{"grown at the end (merged)", Ranges{{0, 8 * M}}, Ranges{{0, 24 * M}}, Ranges{{8 * M, 24 * M}}},
		{"grown at the start", Ranges{{8 * M, 16 * M}}, Ranges{{0, 16 * M}}, Ranges{{0, 8 * M}}},
		{"filled a hole", Ranges{{0, 4 * M}, {12 * M, 16 * M}}, Ranges{{0, 16 * M}}, Ranges{{4 * M, 12 * M}}},
		{"too small", Ranges{{0, 8 * M}}, Ranges{{0, 9 * M}}, nil},
		{"gone", Ranges{{0, 8 * M}}, nil, nil},
	} {
		got := c.before.since(c.now, 2*M)
		if len(got) != len(c.want) {
			t.Errorf("%s: %v, want %v", c.name, got, c.want)
			continue
		}
		for i := range got {
			if got[i] != c.want[i] {
				t.Errorf("%s: %v, want %v", c.name, got, c.want)
			}
		}
	}
}
