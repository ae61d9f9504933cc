package httpsrc

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/ggload/ggload/gguf"
)

// Reader reads one file over HTTP: an io.ReaderAt of Size bytes, safe for
// concurrent use. It reads by range requests or, from a server that
// ignores them, from one stream of the body in file order (stream.go).
type Reader struct {
	url    string // as given: the requests' (it may carry a password)
	name   string // redacted: what errors and reports show
	o      Options
	client *http.Client
	own    bool // client is the reader's: Close lets its connections go
	ctx    context.Context
	cancel context.CancelFunc // Close's end of the reads in flight
	size   int64
	etag   string

	mu     sync.Mutex // the header window
	head   window
	frozen bool // the header is parsed: head no longer grows

	stream *stream // the server ignores ranges: its body, read in order

	requests atomic.Int64
	received atomic.Int64
	closed   atomic.Bool // Close was called: no new requests; finished ones keep no connection
}

// Open makes the first request, for the header window, and learns the
// file's size and ETag from its answer. ctx bounds every request the
// reader makes.
func Open(ctx context.Context, rawURL string, o Options) (*Reader, error) {
	return open(ctx, context.Background(), rawURL, o)
}

// open is Open whose first request also ends when opening is done (the
// open of another part of the model failed).
func open(ctx, opening context.Context, rawURL string, o Options) (*Reader, error) {
	if _, err := CheckURL(rawURL); err != nil {
		return nil, err
	}
	client, own := o.client()
	ctx, cancel := context.WithCancel(ctx)
	r := &Reader{url: rawURL, name: Redact(rawURL), o: o, client: client, own: own, ctx: ctx, cancel: cancel, size: -1}
	n := o.HeaderWindow
	if n <= 0 {
		n = 1 << 20
	}
	buf := make([]byte, n)
	stop := context.AfterFunc(opening, cancel)
	got, err := r.get(buf, 0, true)
	if !stop() && err == nil {
		err = &Error{URL: r.name, Off: 0, End: n, Err: context.Cause(opening)}
	}
	if err != nil {
		r.Close()
		return nil, err
	}
	r.head.add(buf[:got])
	return r, nil
}

// Size is the file's size, from the server's Content-Range (or, where it
// ignores ranges, Content-Length).
func (r *Reader) Size() int64 { return r.size }

// URL is the file's URL as it may be printed: with its password, if it
// has one, redacted.
func (r *Reader) URL() string { return r.name }

// Sequential reports whether the server ignores range requests: the
// reader then reads its body as one stream, in file order (see the
// package doc).
func (r *Reader) Sequential() bool { return r.stream != nil }

// Requests is how many requests the reader made; Received how many body
// bytes it got.
func (r *Reader) Requests() int64 { return r.requests.Load() }
func (r *Reader) Received() int64 { return r.received.Load() }

// source is the reader as a gguf.Source, which closes it.
func (r *Reader) source() gguf.Source {
	return gguf.Source{Name: r.name, Reader: r, Size: r.size, Closer: r, Sequential: r.Sequential()}
}

// Freeze stops growing the header window, which keeps from then on only
// the bytes the parse read: reads past it go to the server as they come
// (tensor data). A server that ignores ranges has the stream of its body
// closed: the next read past the window starts a new one.
func (r *Reader) Freeze() {
	r.mu.Lock()
	was := r.frozen
	if !was {
		r.frozen = true
		r.head.trim(r.head.reach)
	}
	r.mu.Unlock()
	if r.stream != nil && !was {
		r.stream.rewind()
	}
}

// Close ends the reads still in flight (a load that stopped early does not
// wait for its read-ahead) and lets the client's idle connections go; no
// read starts after Close.
func (r *Reader) Close() error {
	r.closed.Store(true)
	r.cancel()
	if r.stream != nil {
		r.stream.close()
	}
	r.dropIdle()
	return nil
}

// dropIdle closes the idle connections of the reader's own client.
func (r *Reader) dropIdle() {
	if r.own {
		r.client.CloseIdleConnections()
	}
}

// The header window keeps at most headerMax bytes; past them the parse
// reads through a slide of slideLen bytes.
var (
	headerMax int64 = 64 << 20
	slideLen  int64 = 16 << 20
)

// ReadAt reads len(p) bytes at off: from the header window when they lie
// in it (growing it while the header is parsed), else from the server.
func (r *Reader) ReadAt(p []byte, off int64) (int, error) {
	if off < 0 {
		return 0, fmt.Errorf("httpsrc: %s: negative offset %d", r.name, off)
	}
	if off >= r.size {
		return 0, io.EOF
	}
	var short error
	if off+int64(len(p)) > r.size {
		p, short = p[:r.size-off], io.EOF
	}
	r.mu.Lock()
	if !r.frozen {
		err := r.parseRead(p, off)
		r.mu.Unlock()
		if err != nil {
			return 0, err
		}
		return len(p), short
	}
	if off+int64(len(p)) <= r.head.have {
		r.head.copyAt(p, off)
		r.mu.Unlock()
		return len(p), short
	}
	r.mu.Unlock()
	got, err := r.fetch(p, off)
	if err == nil {
		err = short
	}
	return got, err
}

// parseRead serves a read of the header's parse (r.mu held): from the
// window, doubled first when the read runs past it (or starts no further
// past it than its length), else from the slide.
func (r *Reader) parseRead(p []byte, off int64) error {
	w := &r.head
	end := off + int64(len(p))
	w.reach = max(w.reach, end)
	if end > w.have && off <= 2*w.have && w.have < headerMax {
		to := min(max(end, 2*w.have), r.size, headerMax)
		seg := make([]byte, to-w.have)
		if _, err := r.fetch(seg, w.have); err != nil {
			return err
		}
		w.add(seg)
	}
	n := int64(0)
	if off < w.have {
		n = min(end, w.have) - off
		w.copyAt(p[:n], off)
	}
	if off+n < end {
		return r.slideRead(p[n:], off+n)
	}
	return nil
}

// slideRead serves a read of the parse past the window (r.mu held) from
// the slide: slideLen bytes (or the read's length) from where the read
// starts, keeping the bytes of the last slide that it still needs.
func (r *Reader) slideRead(p []byte, off int64) error {
	w := &r.head
	end, sEnd := off+int64(len(p)), w.slideOff+int64(len(w.slide))
	if off >= w.slideOff && end <= sEnd {
		copy(p, w.slide[off-w.slideOff:])
		return nil
	}
	n := min(max(int64(len(p)), slideLen), r.size-off)
	keep := int64(0)
	if off >= w.slideOff && off < sEnd {
		keep = sEnd - off
	}
	buf := w.slide
	if int64(cap(buf)) < n {
		buf = make([]byte, n)
	}
	buf = buf[:n]
	if keep > 0 {
		copy(buf, w.slide[off-w.slideOff:])
	}
	w.slide = nil
	if _, err := r.fetch(buf[keep:], off+keep); err != nil {
		return err
	}
	w.slide, w.slideOff = buf, off
	copy(p, buf)
	return nil
}

// window is what the header's parse read of the file: its first bytes as
// they came, each growth a piece of its own (none copied again), and past
// headerMax a slide that moves on with the parse.
type window struct {
	segs     [][]byte
	have     int64 // bytes [0, have) are in segs
	reach    int64 // the end of the furthest read of the parse
	slide    []byte
	slideOff int64
}

// add appends the next bytes.
func (w *window) add(b []byte) {
	if len(b) > 0 {
		w.segs = append(w.segs, b)
		w.have += int64(len(b))
	}
}

// copyAt fills p with the bytes at off, which lie in [0, have).
func (w *window) copyAt(p []byte, off int64) {
	pos := int64(0)
	for _, s := range w.segs {
		if len(p) == 0 {
			return
		}
		if end := pos + int64(len(s)); off < end {
			n := copy(p, s[off-pos:])
			p, off = p[n:], off+int64(n)
		}
		pos += int64(len(s))
	}
}

// trim keeps the first n bytes, in memory no larger than they are, and
// drops the slide.
func (w *window) trim(n int64) {
	w.slide, w.slideOff = nil, 0
	if n >= w.have {
		return
	}
	pos := int64(0)
	for i, s := range w.segs {
		if pos+int64(len(s)) >= n {
			keep := w.segs[:i]
			if n > pos {
				keep = append(keep, bytes.Clone(s[:n-pos]))
			}
			clear(w.segs[len(keep):])
			w.segs = keep
			break
		}
		pos += int64(len(s))
	}
	w.have = n
}

// fetch fills p with the bytes at off from the server: by range requests,
// or from the stream of a server that ignores them.
func (r *Reader) fetch(p []byte, off int64) (int, error) {
	if r.stream != nil {
		return r.stream.read(p, off)
	}
	return r.get(p, off, false)
}

// get fills p from off, asking again from where a transient failure
// stopped it. The first request (of Open) learns the size, may come back
// short at the end of a small file, and learns whether the server takes
// ranges: where it does not, the rest comes from its body's stream.
func (r *Reader) get(p []byte, off int64, first bool) (int, error) {
	got, pause := 0, r.o.backoff()
	for attempt := 0; ; attempt++ {
		if r.closed.Load() {
			return got, &Error{URL: r.name, Off: off, End: off + int64(len(p)), Err: errClosed}
		}
		n, status, err := r.once(p[got:], off+int64(got), first)
		if r.closed.Load() {
			r.dropIdle() // the connection this request put back
		}
		got += n
		if err == nil && r.stream != nil {
			// the server ignores ranges: the rest from its body
			rest := p[got:min(int64(len(p)), r.size-off)]
			k, err := r.stream.read(rest, off+int64(got))
			return got + k, err
		}
		if err == nil && (got == len(p) || first && off+int64(got) == r.size) {
			return got, nil
		}
		if err == nil {
			err = fmt.Errorf("%w: the body ended after %d of %d bytes", errBroke, n, len(p)-got+n)
		}
		e := &Error{URL: r.name, Off: off, End: off + int64(len(p)), Status: status, Err: err}
		if final := r.retry(e, attempt, &pause); final != nil {
			return got, final
		}
		if first && got > 0 {
			first = false // the size is known now
		}
	}
}

// retry waits before attempt+1 of a request that failed with e: the
// pause, which then doubles. It returns nil then, or e itself where no
// other attempt is to be made: a failure that is not transient, the
// retries spent, or the reader's context ended during the pause.
func (r *Reader) retry(e *Error, attempt int, pause *time.Duration) error {
	if !transient(e.Status, e.Err) || attempt >= r.o.retries() {
		return e
	}
	select {
	case <-r.ctx.Done():
		e.Err = fmt.Errorf("%w (after: %v)", r.ctx.Err(), e.Err)
		return e
	case <-time.After(*pause):
	}
	*pause *= 2
	return nil
}

// report tells Options.Progress of the bytes received; a panic of it is
// the read's error.
func (r *Reader) report() error {
	return r.o.progress(r.name, r.received.Load(), r.size)
}

var contentRange = regexp.MustCompile(`^bytes (\d+)-(\d+)/(\d+|\*)$`)

// once makes one range request for p at off and reads its body into p.
// The first request's answer of 200 (the whole body: the server ignores
// ranges) starts the reader's stream instead, reading nothing.
func (r *Reader) once(p []byte, off int64, first bool) (int, int, error) {
	if len(p) == 0 {
		return 0, 0, nil
	}
	last := off + int64(len(p)) - 1
	if r.size >= 0 && last >= r.size {
		last = r.size - 1
	}
	r.requests.Add(1)
	resp, q, err := r.o.get(r.ctx, r.client, r.url, func(h http.Header) {
		h.Set("Range", fmt.Sprintf("bytes=%d-%d", off, last))
		h.Set("Accept-Encoding", "identity") // the file's own bytes, its own length
		if r.etag != "" && !strings.HasPrefix(r.etag, "W/") {
			// (a weak ETag never matches If-Match: it is only compared)
			h.Set("If-Match", r.etag)
		}
	})
	if err != nil {
		return 0, 0, err
	}
	if resp.StatusCode == http.StatusOK && first && r.size < 0 {
		return 0, resp.StatusCode, r.startStream(resp, q)
	}
	defer q.done()
	defer resp.Body.Close()
	switch resp.StatusCode {
	case http.StatusPartialContent:
	case http.StatusOK:
		return 0, resp.StatusCode, fmt.Errorf("%w now: it answered 200 with the whole body (%s) to a range request, where it had answered with ranges", ErrNoRanges, lengthOf(resp))
	case http.StatusPreconditionFailed:
		return 0, resp.StatusCode, fmt.Errorf("%w: its ETag is no longer %s", ErrChanged, r.etag)
	case http.StatusRequestedRangeNotSatisfiable:
		size := "a size it did not give"
		if cr := resp.Header.Get("Content-Range"); cr != "" {
			size = cr
		}
		return 0, resp.StatusCode, fmt.Errorf("%w: the server says the range is past the file's end (%s)", ErrBadAnswer, size)
	default:
		return 0, resp.StatusCode, refused(resp.StatusCode)
	}
	m := contentRange.FindStringSubmatch(resp.Header.Get("Content-Range"))
	if m == nil {
		return 0, resp.StatusCode, fmt.Errorf("%w: Content-Range %q", ErrBadAnswer, resp.Header.Get("Content-Range"))
	}
	a, _ := strconv.ParseInt(m[1], 10, 64)
	b, _ := strconv.ParseInt(m[2], 10, 64)
	total := int64(-1)
	if m[3] != "*" {
		total, _ = strconv.ParseInt(m[3], 10, 64)
	}
	etag := resp.Header.Get("ETag")
	if first && r.size < 0 {
		if total < 0 {
			return 0, resp.StatusCode, fmt.Errorf("%w: Content-Range %q gives no size", ErrBadAnswer, m[0])
		}
		r.size, r.etag = total, etag
		if last >= total {
			last = total - 1
		}
	}
	switch {
	case total != r.size:
		return 0, resp.StatusCode, fmt.Errorf("%w: the file is %d bytes now, %d before", ErrChanged, total, r.size)
	case r.etag != "" && etag != "" && etag != r.etag:
		return 0, resp.StatusCode, fmt.Errorf("%w: ETag %s, %s before", ErrChanged, etag, r.etag)
	case a != off || b != last:
		return 0, resp.StatusCode, fmt.Errorf("%w: Content-Range %q for bytes=%d-%d", ErrBadAnswer, m[0], off, last)
	case resp.ContentLength >= 0 && resp.ContentLength != b-a+1:
		return 0, resp.StatusCode, fmt.Errorf("%w: Content-Length %d for a range of %d bytes", ErrBadAnswer, resp.ContentLength, b-a+1)
	}
	want := int(b - a + 1)
	n := 0
	for n < want {
		k, err := resp.Body.Read(p[n:want])
		if k > 0 {
			n += k
			r.received.Add(int64(k))
			if err := r.report(); err != nil {
				return n, resp.StatusCode, err
			}
		}
		if err != nil {
			if n == want && errors.Is(err, io.EOF) {
				break
			}
			if errors.Is(err, io.EOF) {
				err = io.ErrUnexpectedEOF
			}
			return n, resp.StatusCode, fmt.Errorf("%w after %d of %d bytes: %w", errBroke, n, want, err)
		}
	}
	return n, resp.StatusCode, nil
}

func lengthOf(resp *http.Response) string {
	if resp.ContentLength >= 0 {
		return fmt.Sprintf("%d bytes", resp.ContentLength)
	}
	return "of unknown length"
}
