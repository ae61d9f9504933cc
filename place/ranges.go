package place

import (
	"github.com/ggload/ggload/gguf"
	"github.com/ggload/ggload/internal/ranges"
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
	return ranges.List(own).Merge().Sub(ranges.List(other).Merge())
}
