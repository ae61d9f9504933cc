// Package ranges is byte-range arithmetic over lists of half-open ranges
// [start, end): what a buffer over a mapped file wraps (package place),
// what a mapping prefetches and still maps (package loader).
package ranges

import (
	"cmp"
	"slices"
)

// List is a list of half-open ranges [r[0], r[1]). Merged lists (Merge)
// are sorted, without empty or overlapping ranges; the methods say which
// lists they take merged.
type List [][2]int64

// Merge returns the ranges sorted and merged: overlapping and touching
// ranges become one, empty ones go. It sorts l in place.
func (l List) Merge() List {
	slices.SortFunc(l, func(a, b [2]int64) int { return cmp.Compare(a[0], b[0]) })
	var out List
	for _, r := range l {
		if r[0] >= r[1] {
			continue
		}
		if n := len(out); n > 0 && r[0] <= out[n-1][1] {
			out[n-1][1] = max(out[n-1][1], r[1])
		} else {
			out = append(out, r)
		}
	}
	return out
}

// Sub is the merged list l less the merged list b.
func (l List) Sub(b List) List {
	var out List
	j := 0
	for _, r := range l {
		start := r[0]
		for j < len(b) && b[j][1] <= start {
			j++
		}
		for k := j; k < len(b) && b[k][0] < r[1]; k++ {
			if b[k][0] > start {
				out = append(out, [2]int64{start, b[k][0]})
			}
			start = max(start, b[k][1])
		}
		if start < r[1] {
			out = append(out, [2]int64{start, r[1]})
		}
	}
	return out
}

// Complement is what the ranges of l (any list; l is left as it is)
// leave uncovered in [0, limit).
func (l List) Complement(limit int64) List {
	return List{{0, limit}}.Sub(slices.Clone(l).Merge())
}

// Cut is the merged list l less [first, last).
func (l List) Cut(first, last int64) List {
	return l.Sub(List{{first, last}})
}
