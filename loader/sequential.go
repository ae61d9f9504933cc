package loader

import (
	"cmp"
	"slices"
	"time"
)

// A sequential source (gguf.Source.Sequential: an HTTP server that ignores
// range requests) gives its bytes as one stream that cannot go back. A
// load of a model with one reads every tensor in file order, from one
// goroutine, whichever device each goes to: the lanes' pipelines are
// made first, then each tensor is moved by its own lane's in turn, then
// every lane finishes; there are no reads ahead and one reader. One pass
// of each file, at the cost of the devices' uploads overlapping each
// other, which such a link cannot feed faster anyway.

// sequential reports whether a file of the model is a sequential source.
func (l *load) sequential() bool {
	for _, f := range l.gm.Files {
		if f.Source().Sequential {
			return true
		}
	}
	return false
}

// runInFileOrder moves every lane's tensors in the order of their bytes
// in the files, then lets each lane finish.
func (l *load) runInFileOrder(lanes []*lane) (err error) {
	type owned struct {
		ln *lane
		t  task
	}
	inFile := func(a, b task) int {
		return cmp.Or(cmp.Compare(a.w.File, b.w.File), cmp.Compare(a.w.Offset, b.w.Offset))
	}
	start := time.Now()
	defer func() {
		for _, ln := range lanes {
			if ferr := ln.finish(); err == nil {
				err = ferr
			}
			ln.took = time.Since(start)
		}
	}()
	var all []owned
	for _, ln := range lanes {
		slices.SortStableFunc(ln.tasks, inFile) // the order its pipeline plans for
		if err := ln.begin(); err != nil {
			return err
		}
		for _, t := range ln.tasks {
			all = append(all, owned{ln, t})
		}
	}
	slices.SortStableFunc(all, func(a, b owned) int { return inFile(a.t, b.t) })
	for _, o := range all {
		if err := o.ln.move(o.t); err != nil {
			return err
		}
	}
	for _, ln := range lanes {
		if err := ln.end(); err != nil {
			return err
		}
	}
	return nil
}
