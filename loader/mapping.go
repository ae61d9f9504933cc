package loader

import "github.com/ggload/ggload/place"

// lazyRanges are the ranges of p's lazy tensors in each of its files, and
// whether there is any.
func lazyRanges(p *place.Plan) (lazy [][][2]int64, some bool) {
	lazy = make([][][2]int64, len(p.Model.Files))
	for _, t := range p.Tensors {
		if t.Lazy {
			lazy[t.Weight.File] = append(lazy[t.Weight.File], [2]int64{t.Weight.Offset, t.Weight.Offset + t.Bytes})
			some = true
		}
	}
	return lazy, some
}
