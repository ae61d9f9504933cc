package place

import (
	"cmp"
	"slices"

	"github.com/ggload/ggload/loader/gguf"
)

// mappedRanges are the file ranges a mapped context's buffers wrap.
func (pl *planner) mappedRanges(ci, fi int) [][2]int64 {
	p := pl.p
	var own [][2]int64
	ownW := map[*gguf.Weight]bool{}
	for _, ti := range p.Contexts[ci].Tensors {
		w := p.Tensors[ti].Weight
		if w.File != fi {
			continue
		}
		ownW[w] = true
		own = append(own, [2]int64{w.Offset, w.Offset + w.Size})
	}
	if len(own) == 0 {
		return nil
	}
	if p.Params.MapRanges == MapSpan {
		first, last := own[0][0], own[0][1]
		for _, r := range own {
			first, last = min(first, r[0]), max(last, r[1])
		}
		if first >= last {
			return nil
		}
		return [][2]int64{{first, last}}
	}
	var other [][2]int64
	for cj := range p.Contexts {
		if cj == ci {
			continue
		}
		for _, ti := range p.Contexts[cj].Tensors {
			w := p.Tensors[ti].Weight
			if w.File == fi && !ownW[w] {
				other = append(other, [2]int64{w.Offset, w.Offset + w.Size})
			}
		}
	}
	return subRanges(mergeRanges(own), mergeRanges(other))
}

// mergeRanges sorts and merges overlapping ranges.
func mergeRanges(rs [][2]int64) [][2]int64 {
	slices.SortFunc(rs, func(a, b [2]int64) int { return cmp.Compare(a[0], b[0]) })
	var out [][2]int64
	for _, r := range rs {
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

// subRanges removes the merged ranges b from the merged ranges a.
func subRanges(a, b [][2]int64) [][2]int64 {
	var out [][2]int64
	j := 0
	for _, r := range a {
		start := r[0]
		for j < len(b) && b[j][1] <= start {
			j++
		}
		k := j
		for k < len(b) && b[k][0] < r[1] {
			if b[k][0] > start {
				out = append(out, [2]int64{start, b[k][0]})
			}
			start = max(start, b[k][1])
			k++
		}
		if start < r[1] {
			out = append(out, [2]int64{start, r[1]})
		}
	}
	return out
}
