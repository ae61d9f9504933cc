package httpsrc

import (
	"errors"
	"fmt"
	"io"
	"net/http"
	"sync"
)

// stream is the body of a server that ignores range requests, read in
// file order: a read at or past where the pass has come skips to it and
// reads on; one behind it is refused, since it would fetch the file again
// from its start. A body that breaks is asked for again, from byte 0, and
// read up to where it broke. Reads take their turn; the body's watch is
// paused between them (the reader waiting is no fault of the server's).
type stream struct {
	r       *Reader
	mu      sync.Mutex
	resp    *http.Response // the body under way, nil when none is
	q       *request
	pos     int64 // the file offset of the body's next byte
	at      int64 // where the pass has come: reads before it are refused
	scratch []byte
}

// startStream takes the whole body the first request got (200) as the
// reader's stream: its length is the file's size.
func (r *Reader) startStream(resp *http.Response, q *request) error {
	if resp.ContentLength < 0 {
		q.done()
		resp.Body.Close()
		return fmt.Errorf("%w: it answered 200 with the whole body, of unknown length (no Content-Length), to a range request; download the file first (ggload -mu URL)", ErrNoRanges)
	}
	r.size, r.etag = resp.ContentLength, resp.Header.Get("ETag")
	r.stream = &stream{r: r, resp: resp, q: q}
	return nil
}

// read fills p with the bytes at off.
func (s *stream) read(p []byte, off int64) (int, error) {
	r := s.r
	s.mu.Lock()
	defer s.mu.Unlock()
	end := off + int64(len(p))
	if off < s.at {
		return 0, &Error{URL: r.name, Off: off, End: end, Err: fmt.Errorf("%w, and its body was read up to byte %d: reading byte %d would fetch the file again from its start; download it first (ggload -mu URL)", ErrNoRanges, s.at, off)}
	}
	got, pause := 0, r.o.backoff()
	for attempt := 0; ; attempt++ {
		if r.closed.Load() {
			s.end()
			return got, &Error{URL: r.name, Off: off, End: end, Err: errClosed}
		}
		status, err := s.open()
		if err == nil {
			s.q.resume()
			var n int
			n, err = s.readAt(p[got:], off+int64(got))
			got += n
		}
		if err == nil {
			s.at = end
			if s.pos == r.size {
				s.end() // drained: its connection goes back
			} else {
				s.q.pause()
			}
			return got, nil
		}
		s.end()
		e := &Error{URL: r.name, Off: off, End: end, Status: status, Err: err}
		if final := r.retry(e, attempt, &pause); final != nil {
			return got, final
		}
	}
}

// open asks for the body again, from byte 0, when none is under way; it
// must be the file the reader opened (its size and ETag).
func (s *stream) open() (int, error) {
	if s.resp != nil {
		return s.resp.StatusCode, nil
	}
	r := s.r
	r.requests.Add(1)
	resp, q, err := r.o.get(r.ctx, r.client, r.url, func(h http.Header) {
		h.Set("Accept-Encoding", "identity") // the file's own bytes, its own length
	})
	if err != nil {
		return 0, err
	}
	etag := resp.Header.Get("ETag")
	switch {
	case resp.StatusCode != http.StatusOK:
		err = refused(resp.StatusCode)
	case resp.ContentLength < 0:
		err = fmt.Errorf("%w: its whole body has no length now (no Content-Length); it was %d bytes", ErrBadAnswer, r.size)
	case resp.ContentLength != r.size:
		err = fmt.Errorf("%w: the file is %d bytes now (Content-Length), %d before", ErrChanged, resp.ContentLength, r.size)
	case r.etag != "" && etag != "" && etag != r.etag:
		err = fmt.Errorf("%w: ETag %s, %s before", ErrChanged, etag, r.etag)
	}
	if err != nil {
		q.done()
		resp.Body.Close()
		return resp.StatusCode, err
	}
	s.resp, s.q, s.pos = resp, q, 0
	return resp.StatusCode, nil
}

// readAt drops the body's bytes up to off, then reads p from it.
func (s *stream) readAt(p []byte, off int64) (int, error) {
	for s.pos < off {
		if s.scratch == nil {
			s.scratch = make([]byte, 256<<10)
		}
		if _, err := s.next(s.scratch[:min(int64(len(s.scratch)), off-s.pos)]); err != nil {
			return 0, s.broke(err, 0, len(p))
		}
	}
	n := 0
	for n < len(p) {
		k, err := s.next(p[n:])
		n += k
		if err != nil && !(n == len(p) && errors.Is(err, io.EOF)) {
			return n, s.broke(err, n, len(p))
		}
	}
	return n, nil
}

// next is one read of the body, counted and reported.
func (s *stream) next(p []byte) (int, error) {
	r := s.r
	k, err := s.resp.Body.Read(p)
	if k > 0 {
		s.pos += int64(k)
		r.received.Add(int64(k))
		if perr := r.report(); perr != nil {
			return k, perr
		}
	}
	if err == io.EOF && s.pos < r.size {
		err = io.ErrUnexpectedEOF
	}
	return k, err
}

// broke is the error of a body that failed n bytes into a read of want.
func (s *stream) broke(err error, n, want int) error {
	if errors.Is(err, errPanic) {
		return err
	}
	return fmt.Errorf("%w at byte %d, after %d of %d bytes: %w", errBroke, s.pos, n, want, err)
}

// end closes the body under way, if any.
func (s *stream) end() {
	if s.resp != nil {
		s.q.done()
		s.resp.Body.Close()
		s.resp, s.q = nil, nil
	}
}

// rewind ends the pass: the body under way is closed, and the next read,
// wherever it is, starts a new one.
func (s *stream) rewind() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.end()
	s.pos, s.at = 0, 0
}

// close closes the body under way.
func (s *stream) close() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.end()
}
