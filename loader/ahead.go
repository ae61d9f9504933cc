package loader

import "github.com/ggload/ggload/loader/internal/sysmem"

// A lane reads the tensors of a file that is not local (an HTTP reader,
// say) through a pipeline that keeps aheadDepth reads of up to aheadPiece
// bytes in flight, across tensors: the lane waits on the network's round
// trip once, not once per piece or per tensor. 64 MiB under way hide a
// round trip of 20 ms at more than 3 GB/s.
const (
	aheadDepth = 8
	aheadPiece = 8 << 20
	// aheadGap is the most bytes between two tensors (alignment padding)
	// read to make one request of both.
	aheadGap = 4 << 10
)

// ahead is a lane's pipeline over the byte ranges of its tensors in the
// order it moves them, planned before the lane starts: adjacent ranges of a
// file are merged and cut into pieces of at most aheadPiece. Reads in that
// order are served from the pieces (any length, across pieces); a read the
// plan does not have goes straight to the file and leaves the pipeline as
// it is. It is the lane's alone (one goroutine reads from it); its memory
// lies outside Go's heap, unmapped by close once no read is in flight.
type ahead struct {
	plan  []aheadSpan // the pieces, in order
	next  int         // the first piece not yet asked for
	queue []*aheadRead
	free  [][]byte
	mem   []byte
}

type aheadSpan struct {
	f        *modelFile
	pos, end int64
}

type aheadRead struct {
	aheadSpan
	buf  []byte
	done chan struct{}
	err  error
}

// planAhead makes the lane's pipeline for the tensors it reads itself from
// files that are not local, nil when there are none.
func (ln *lane) planAhead() (*ahead, error) {
	l := ln.l
	var spans []aheadSpan
	for _, t := range ln.tasks {
		w := t.w
		if w == nil || w.Size <= 0 || t.pl.Buffer == nil || !l.laneReads(t) {
			continue // mapped, or read by the reader pool
		}
		f := l.model.files[w.File]
		if f.local() || l.gm.Files[w.File].Source().Sequential {
			continue // (a stream is read in order, by one read at a time)
		}
		if n := len(spans); n > 0 && spans[n-1].f == f && w.Offset >= spans[n-1].end && w.Offset-spans[n-1].end <= aheadGap {
			spans[n-1].end = w.Offset + w.Size
			continue
		}
		spans = append(spans, aheadSpan{f, w.Offset, w.Offset + w.Size})
	}
	if len(spans) == 0 {
		return nil, nil
	}
	a := &ahead{}
	for _, s := range spans {
		for pos := s.pos; pos < s.end; pos += aheadPiece {
			a.plan = append(a.plan, aheadSpan{s.f, pos, min(pos+aheadPiece, s.end)})
		}
	}
	mem, err := bounceMemory(aheadDepth*aheadPiece, "reading "+ln.name+"'s tensors ahead")
	if err != nil {
		return nil, err
	}
	a.mem = mem
	for i := range aheadDepth {
		a.free = append(a.free, mem[i*aheadPiece:(i+1)*aheadPiece:(i+1)*aheadPiece])
	}
	a.start()
	return a, nil
}

// start asks for the next pieces while buffers are free.
func (a *ahead) start() {
	for len(a.free) > 0 && a.next < len(a.plan) {
		s := a.plan[a.next]
		a.next++
		buf := a.free[len(a.free)-1]
		a.free = a.free[:len(a.free)-1]
		r := &aheadRead{aheadSpan: s, buf: buf[:s.end-s.pos], done: make(chan struct{})}
		go func() {
			defer close(r.done)
			r.err = r.f.readAt(r.buf, r.pos)
		}()
		a.queue = append(a.queue, r)
	}
}

// release gives the head piece's buffer back and asks for the next.
func (a *ahead) release() {
	a.free = append(a.free, a.queue[0].buf[:cap(a.queue[0].buf)])
	a.queue = a.queue[1:]
	a.start()
}

// read fills dst with the bytes at off of f: from the pipeline when they
// are its next bytes, else from the file.
func (a *ahead) read(f *modelFile, dst []byte, off int64) error {
	end := off + int64(len(dst))
	// pieces the lane has gone past (a tensor it did not read) go
	for len(a.queue) > 0 && a.queue[0].f == f && a.queue[0].end <= off {
		<-a.queue[0].done
		a.release()
	}
	if !a.holds(f, off, end) {
		return f.readAt(dst, off)
	}
	for pos := off; pos < end; {
		r := a.queue[0]
		<-r.done
		if r.err != nil {
			return r.err
		}
		n := copy(dst[pos-off:], r.buf[pos-r.pos:min(end, r.end)-r.pos])
		pos += int64(n)
		if r.end <= pos {
			a.release()
		}
	}
	return nil
}

// holds reports whether the pieces queued and still to come cover
// [off, end) of f from the head on, without a hole.
func (a *ahead) holds(f *modelFile, off, end int64) bool {
	if len(a.queue) == 0 {
		return false
	}
	h := a.queue[0]
	if h.f != f || off < h.pos || off >= h.end {
		return false
	}
	at := h.end
	for i := 1; at < end; i++ {
		var s aheadSpan
		switch {
		case i < len(a.queue):
			s = a.queue[i].aheadSpan
		case a.next+i-len(a.queue) < len(a.plan):
			s = a.plan[a.next+i-len(a.queue)]
		default:
			return false
		}
		if s.f != f || s.pos != at {
			return false
		}
		at = s.end
	}
	return true
}

// close ends the pipeline: its memory is unmapped once the reads in
// flight are done; a load that stops early (a failure, a cancellation)
// does not wait for reads that may take a network timeout to end, and
// their memory stays mapped until they do.
func (a *ahead) close() {
	if a == nil || a.mem == nil {
		return
	}
	queue, mem := a.queue, a.mem
	a.queue, a.mem, a.free = nil, nil, nil
	wait := func() {
		for _, r := range queue {
			<-r.done
		}
		sysmem.Unmap(mem)
	}
	for _, r := range queue {
		select {
		case <-r.done:
			continue
		default:
		}
		go wait()
		return
	}
	wait()
}

// aheadSource is a lane's source for a file that is not local: its reads
// go through the lane's pipeline.
type aheadSource struct {
	a *ahead
	f *modelFile
}

func (s aheadSource) readAt(dst []byte, off int64) error    { return s.a.read(s.f, dst, off) }
func (s aheadSource) readChunk(dst []byte, pos int64) error { return s.a.read(s.f, dst, pos) }
func (s aheadSource) alignment() int64                      { return 1 }
func (s aheadSource) file() string                          { return s.f.path }
