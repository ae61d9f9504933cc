// Package httpsrc reads GGUF models over HTTP and HTTPS with range
// requests: the header first (a window of it, grown as the parse needs),
// then exactly the bytes of the tensors a load reads, several at once when
// the loader's readers ask at once. A plan needs the header alone, so
// "where does this model go, and does it fit" is answered before a weight
// byte is fetched; a load streams the weights to the devices with no local
// copy. Download fetches a model into the cache instead, resumably, as
// llama.cpp's -mu does.
//
// Every answer is checked: a range request must get 206 with the range it
// asked for and the size and ETag of the first answer (a server that
// ignores ranges, lies about them or whose file changed is an error); a
// body that stops short, stalls past the timeout or is reset is asked for
// again from where it stopped, with a growing pause, on transient failures
// (network errors, 429 and 5xx) only. Errors name the URL and the byte
// range; the loader adds the tensor.
package httpsrc

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/ggload/ggload/loader/gguf"
)

// Options tune the requests. The zero value works.
type Options struct {
	// Client makes the requests; zero: a client of its own, which follows
	// up to 10 redirects.
	Client *http.Client
	// Token is sent as a bearer token; zero: $HF_TOKEN, as llama.cpp
	// reads it.
	Token string
	// Timeout bounds the wait for an answer and for each piece of its body
	// (default 30s): a server silent for longer is a transient failure.
	Timeout time.Duration
	// Retries is how many times a transient failure is retried (default
	// 4; negative: none), after a pause that starts at Backoff (default
	// 200ms) and doubles.
	Retries int
	Backoff time.Duration
	// HeaderWindow is the first request's length (default 1 MiB); a
	// header that runs past it is fetched in one more request eight times
	// as long, and so on.
	HeaderWindow int64
	// Progress, when set, is told of every piece of a body received: the
	// bytes of url received so far (by a download: the bytes of the file
	// it has, a resumed part included) and the file's size (-1 while
	// unknown). It is called from the goroutines that read.
	Progress func(url string, done, size int64)
}

func (o Options) timeout() time.Duration {
	if o.Timeout > 0 {
		return o.Timeout
	}
	return 30 * time.Second
}

func (o Options) retries() int {
	switch {
	case o.Retries < 0:
		return 0
	case o.Retries == 0:
		return 4
	}
	return o.Retries
}

func (o Options) backoff() time.Duration {
	if o.Backoff > 0 {
		return o.Backoff
	}
	return 200 * time.Millisecond
}

func (o Options) token() string {
	if o.Token != "" {
		return o.Token
	}
	return os.Getenv("HF_TOKEN")
}

// userAgent names ggload to the server.
const userAgent = "ggload"

// errRedirects ends a redirect loop.
var errRedirects = errors.New("too many redirects")

// client is the client to use, and whether it is one of the package's
// own (whose idle connections Close lets go).
func (o Options) client() (*http.Client, bool) {
	if o.Client != nil {
		return o.Client, false
	}
	t := http.DefaultTransport.(*http.Transport).Clone()
	t.MaxIdleConnsPerHost = 32 // the loader's readers ask at once
	return &http.Client{Transport: t, CheckRedirect: func(req *http.Request, via []*http.Request) error {
		if len(via) >= 10 {
			return fmt.Errorf("%w (%d, the last to %s)", errRedirects, len(via), req.URL.Redacted())
		}
		return nil
	}}, true
}

// Error is a request that failed: the URL, the byte range [Off, End) and
// the HTTP status (0 when there was no answer).
type Error struct {
	URL      string
	Off, End int64
	Status   int
	Err      error
}

func (e *Error) Error() string {
	s := fmt.Sprintf("httpsrc: %s: bytes [%d, %d)", e.URL, e.Off, e.End)
	if e.Status != 0 {
		s += fmt.Sprintf(": %d %s", e.Status, http.StatusText(e.Status))
	}
	return s + ": " + e.Err.Error()
}

func (e *Error) Unwrap() error { return e.Err }

// Sentinels wrapped by the errors of this package.
var (
	// ErrURL: not an http or https URL.
	ErrURL = errors.New("not an http(s) URL")
	// ErrNoRanges: the server answered a range request with the whole body.
	ErrNoRanges = errors.New("the server ignores range requests")
	// ErrChanged: the file changed on the server between two requests.
	ErrChanged = errors.New("the file changed on the server")
	// ErrBadAnswer: an answer that breaks HTTP's range rules.
	ErrBadAnswer = errors.New("bad answer")
)

// CheckURL refuses what is not an absolute http or https URL with a host,
// before any request.
func CheckURL(raw string) (*url.URL, error) {
	u, err := url.Parse(raw)
	if err != nil {
		return nil, fmt.Errorf("httpsrc: %q: %w: %v", raw, ErrURL, err)
	}
	switch {
	case u.Scheme == "":
		return nil, fmt.Errorf("httpsrc: %q: %w: no scheme (write http:// or https://)", raw, ErrURL)
	case u.Scheme != "http" && u.Scheme != "https":
		return nil, fmt.Errorf("httpsrc: %q: %w: scheme %q is not supported", raw, ErrURL, u.Scheme)
	case u.Host == "":
		return nil, fmt.Errorf("httpsrc: %q: %w: no host", raw, ErrURL)
	}
	return u, nil
}

// IsURL reports whether s is meant as a URL (it has a scheme): what a
// command line takes for a path or a URL.
func IsURL(s string) bool { return strings.Contains(s, "://") }

// Reader reads one file over HTTP by ranges: an io.ReaderAt of Size bytes,
// safe for concurrent use.
type Reader struct {
	url    string
	o      Options
	client *http.Client
	own    bool // client is the reader's: Close lets its connections go
	ctx    context.Context
	cancel context.CancelFunc // Close's end of the reads in flight
	size   int64
	etag   string

	mu     sync.Mutex
	head   []byte // the file's first bytes, kept
	frozen bool   // the header is parsed: head no longer grows

	requests atomic.Int64
	received atomic.Int64
	closed   atomic.Bool // Close was called: no new requests; finished ones keep no connection
}

// Open makes the first request, for the header window, and learns the
// file's size and ETag from its answer. ctx bounds every request the
// reader makes.
func Open(ctx context.Context, rawURL string, o Options) (*Reader, error) {
	if _, err := CheckURL(rawURL); err != nil {
		return nil, err
	}
	client, own := o.client()
	ctx, cancel := context.WithCancel(ctx)
	r := &Reader{url: rawURL, o: o, client: client, own: own, ctx: ctx, cancel: cancel, size: -1}
	n := o.HeaderWindow
	if n <= 0 {
		n = 1 << 20
	}
	buf := make([]byte, n)
	got, err := r.get(buf, 0, true)
	if err != nil {
		r.Close()
		return nil, err
	}
	r.head = buf[:got]
	return r, nil
}

// Size is the file's size, from the server's Content-Range.
func (r *Reader) Size() int64 { return r.size }

// URL is the file's URL.
func (r *Reader) URL() string { return r.url }

// Requests is how many requests the reader made; Received how many body
// bytes it got.
func (r *Reader) Requests() int64 { return r.requests.Load() }
func (r *Reader) Received() int64 { return r.received.Load() }

// Freeze stops growing the header window: reads past it go to the server
// as they come (tensor data).
func (r *Reader) Freeze() {
	r.mu.Lock()
	r.frozen = true
	r.mu.Unlock()
}

// Close ends the reads still in flight (a load that stopped early does not
// wait for its read-ahead) and lets the client's idle connections go; no
// read starts after Close.
func (r *Reader) Close() error {
	r.closed.Store(true)
	r.cancel()
	r.dropIdle()
	return nil
}

// dropIdle closes the idle connections of the reader's own client.
func (r *Reader) dropIdle() {
	if r.own {
		r.client.CloseIdleConnections()
	}
}

// headerMax bounds the header window.
const headerMax = 256 << 20

// ReadAt reads len(p) bytes at off: from the header window when they lie
// in it (growing it while the header is parsed), else with range requests.
func (r *Reader) ReadAt(p []byte, off int64) (int, error) {
	if off < 0 {
		return 0, fmt.Errorf("httpsrc: %s: negative offset %d", r.url, off)
	}
	if off >= r.size {
		return 0, io.EOF
	}
	var short error
	if off+int64(len(p)) > r.size {
		p, short = p[:r.size-off], io.EOF
	}
	end := off + int64(len(p))
	r.mu.Lock()
	if have := int64(len(r.head)); end > have && !r.frozen && off <= have && have < headerMax {
		// the parse reads on: one request for the next, longer window
		grow := min(max(end, 8*have), r.size, headerMax) - have
		more := make([]byte, grow)
		got, err := r.get(more, have, false)
		if err != nil {
			r.mu.Unlock()
			return 0, err
		}
		r.head = append(r.head, more[:got]...)
	}
	if end <= int64(len(r.head)) {
		n := copy(p, r.head[off:end])
		r.mu.Unlock()
		return n, short
	}
	r.mu.Unlock()
	got, err := r.get(p, off, false)
	if err == nil {
		err = short
	}
	return got, err
}

// get fills p from off, asking again from where a transient failure
// stopped it. The first request (of Open) learns the size and may come
// back short at the end of a small file.
func (r *Reader) get(p []byte, off int64, first bool) (int, error) {
	got, pause := 0, r.o.backoff()
	for attempt := 0; ; attempt++ {
		if r.closed.Load() {
			return got, &Error{URL: r.url, Off: off, End: off + int64(len(p)), Err: errClosed}
		}
		n, status, err := r.once(p[got:], off+int64(got), first)
		if r.closed.Load() {
			r.dropIdle() // the connection this request put back
		}
		got += n
		if err == nil && (got == len(p) || first && off+int64(got) == r.size) {
			return got, nil
		}
		if err == nil {
			err = fmt.Errorf("%w: the body ended after %d of %d bytes", errBroke, n, len(p)-got+n)
		}
		e := &Error{URL: r.url, Off: off, End: off + int64(len(p)), Status: status, Err: err}
		if !transient(status, err) || attempt >= r.o.retries() {
			return got, e
		}
		select {
		case <-r.ctx.Done():
			e.Err = fmt.Errorf("%w (after: %v)", r.ctx.Err(), err)
			return got, e
		case <-time.After(pause):
		}
		pause *= 2
		if first && got > 0 {
			first = false // the size is known now
		}
	}
}

// transient tells a failure worth another try: no answer, a broken or
// stalled body, 408, 429, 5xx.
func transient(status int, err error) bool {
	switch {
	case errors.Is(err, ErrNoRanges), errors.Is(err, ErrChanged), errors.Is(err, ErrBadAnswer), errors.Is(err, errRedirects),
		errors.Is(err, context.Canceled), errors.Is(err, context.DeadlineExceeded) && status == 0 && !errors.Is(err, errStalled):
		return false
	case status == 0, errors.Is(err, errBroke), errors.Is(err, errStalled):
		return true
	case status == http.StatusRequestTimeout, status == http.StatusTooManyRequests, status >= 500:
		return true
	}
	return false
}

var (
	errClosed  = errors.New("the reader is closed")
	errStalled = errors.New("stalled")
	errBroke   = errors.New("the body broke off")
)

// request is one GET under a stall watch: once no answer, or no piece of
// its body, has come within the timeout, the request is cancelled with
// errStalled as the cause.
type request struct {
	ctx     context.Context
	cancel  context.CancelCauseFunc
	watch   *time.Timer
	timeout time.Duration
}

// get sends a GET of rawURL with the package's headers (User-Agent, the
// bearer token) and those header adds. On success the caller reads the
// body, calls alive after each piece and done at the end.
func (o Options) get(ctx context.Context, client *http.Client, rawURL string, header func(http.Header)) (*http.Response, *request, error) {
	q := &request{timeout: o.timeout()}
	q.ctx, q.cancel = context.WithCancelCause(ctx)
	req, err := http.NewRequestWithContext(q.ctx, http.MethodGet, rawURL, nil)
	if err != nil {
		q.cancel(nil)
		return nil, nil, err
	}
	setHeaders(req, o)
	header(req.Header)
	q.watch = time.AfterFunc(q.timeout, func() { q.cancel(fmt.Errorf("%w: nothing for %v", errStalled, q.timeout)) })
	resp, err := client.Do(req)
	if err != nil {
		err = q.cause(err)
		q.done()
		return nil, nil, err
	}
	return resp, q, nil
}

// alive restarts the stall watch: a piece of the body came.
func (q *request) alive() { q.watch.Reset(q.timeout) }

// done ends the watch and the request's context.
func (q *request) done() {
	q.watch.Stop()
	q.cancel(nil)
}

// cause is the stall in place of the error a stalled request returns.
func (q *request) cause(err error) error {
	if c := context.Cause(q.ctx); errors.Is(c, errStalled) {
		return c
	}
	return err
}

// setHeaders adds the headers every request of the package carries.
func setHeaders(req *http.Request, o Options) {
	req.Header.Set("User-Agent", userAgent)
	if tok := o.token(); tok != "" {
		req.Header.Set("Authorization", "Bearer "+tok)
	}
}

// refused is the error of an answer the package cannot use: access
// refused, or any other status it does not take.
func refused(status int) error {
	if status == http.StatusUnauthorized || status == http.StatusForbidden {
		return errors.New("access refused (set HF_TOKEN, or --hf-token, to a token that may read it)")
	}
	return errors.New("the request failed")
}

var contentRange = regexp.MustCompile(`^bytes (\d+)-(\d+)/(\d+|\*)$`)

// once makes one range request for p at off and reads its body into p.
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
		if r.etag != "" && !strings.HasPrefix(r.etag, "W/") {
			// (a weak ETag never matches If-Match: it is only compared)
			h.Set("If-Match", r.etag)
		}
	})
	if err != nil {
		return 0, 0, err
	}
	defer q.done()
	defer resp.Body.Close()
	switch resp.StatusCode {
	case http.StatusPartialContent:
	case http.StatusOK:
		return 0, resp.StatusCode, fmt.Errorf("%w: it answered 200 with the whole body (%s) to a range request; download the file first (ggload -mu URL)", ErrNoRanges, lengthOf(resp))
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
			q.alive()
			if r.o.Progress != nil {
				r.o.Progress(r.url, r.received.Load(), r.size)
			}
		}
		if err != nil {
			if n == want && errors.Is(err, io.EOF) {
				break
			}
			if err = q.cause(err); errors.Is(err, io.EOF) {
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

// splitURL matches a split's file name (llama.cpp's get_gguf_split_info).
var splitURL = regexp.MustCompile(`(?i)^(.+)-([0-9]{5})-of-([0-9]{5})\.gguf$`)

// Parts are the URLs of every split of the model at rawURL: itself alone
// unless its path ends in -0000k-of-0000N.gguf (as llama.cpp finds them).
func Parts(rawURL string) ([]string, error) {
	u, err := CheckURL(rawURL)
	if err != nil {
		return nil, err
	}
	m := splitURL.FindStringSubmatch(u.Path)
	if m == nil {
		return []string{rawURL}, nil
	}
	n, _ := strconv.Atoi(m[3])
	if n <= 1 {
		return []string{rawURL}, nil
	}
	parts := make([]string, n)
	for i := range parts {
		v := *u
		v.Path = fmt.Sprintf("%s-%05d-of-%05d.gguf", m[1], i+1, n)
		v.RawPath = ""
		parts[i] = v.String()
	}
	return parts, nil
}

// OpenModel opens the model at rawURL (every split, when its name says it
// is split) for planning and loading: only the headers are fetched. Close
// the model to let the connections go.
func OpenModel(ctx context.Context, rawURL string, o Options) (*gguf.Model, error) {
	parts, err := Parts(rawURL)
	if err != nil {
		return nil, err
	}
	// one client for every part, whose connections the last Close lets go
	client, own := o.client()
	o.Client = client
	ok := false
	defer func() {
		if !ok && own {
			client.CloseIdleConnections()
		}
	}()
	readers := make([]*Reader, len(parts))
	errs := make([]error, len(parts))
	var wg sync.WaitGroup
	for i, p := range parts {
		wg.Go(func() {
			readers[i], errs[i] = Open(ctx, p, o)
			if readers[i] != nil {
				readers[i].own = own
			}
		})
	}
	wg.Wait()
	srcs := make([]gguf.Source, len(parts))
	for i, r := range readers {
		if errs[i] != nil {
			for _, r := range readers {
				if r != nil {
					r.Close()
				}
			}
			return nil, errs[i]
		}
		srcs[i] = gguf.Source{Name: r.url, Reader: r, Size: r.size, Closer: r}
	}
	m, err := gguf.OpenModelSources(srcs...)
	if err != nil {
		for _, r := range readers {
			r.Close()
		}
		if errors.Is(err, gguf.ErrOutOfBounds) || errors.Is(err, gguf.ErrTruncated) {
			return nil, fmt.Errorf("httpsrc: the server's size of %s (%d bytes, from its Content-Range) is less than the GGUF's header implies: %w", readers[0].url, readers[0].size, err)
		}
		return nil, err
	}
	for _, r := range readers {
		r.Freeze()
	}
	ok = true
	return m, nil
}
