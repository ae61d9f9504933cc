package httpsrc

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"time"
)

// userAgent names ggload to the server.
const userAgent = "ggload"

// errRedirects ends a redirect loop.
var errRedirects = errors.New("too many redirects")

// client is the client to use, and whether it is one of the package's
// own (whose idle connections Close lets go). Either way its transport
// adds the token to the requests for the origin they were made for
// (bearer): a caller's client is copied with its Transport wrapped.
func (o Options) client() (*http.Client, bool) {
	tok := o.token()
	if o.Client != nil {
		if tok == "" {
			return o.Client, false
		}
		c := *o.Client
		base := c.Transport
		if b, ok := base.(*bearer); ok {
			base = b.base // (a client of the package's, passed on)
		}
		if base == nil {
			base = http.DefaultTransport
		}
		c.Transport = &bearer{base: base, token: tok}
		return &c, false
	}
	t := http.DefaultTransport.(*http.Transport).Clone()
	t.MaxIdleConnsPerHost = 32 // the loader's readers ask at once
	var rt http.RoundTripper = t
	if tok != "" {
		rt = &bearer{base: t, token: tok}
	}
	return &http.Client{Transport: rt, CheckRedirect: func(req *http.Request, via []*http.Request) error {
		if len(via) >= 10 {
			return fmt.Errorf("%w (%d, the last to %s)", errRedirects, len(via), req.URL.Redacted())
		}
		return nil
	}}, true
}

// bearer adds the token to each request, redirects included, whose URL
// has the origin of the first request of its chain: the URL the package
// was asked for.
type bearer struct {
	base  http.RoundTripper
	token string
}

func (b *bearer) RoundTrip(req *http.Request) (*http.Response, error) {
	if first := chainStart(req); first != nil && sameOrigin(first.URL, req.URL) {
		req = req.Clone(req.Context())
		req.Header.Set("Authorization", "Bearer "+b.token)
	}
	return b.base.RoundTrip(req)
}

// CloseIdleConnections closes the idle connections of the transport below.
func (b *bearer) CloseIdleConnections() {
	if c, ok := b.base.(interface{ CloseIdleConnections() }); ok {
		c.CloseIdleConnections()
	}
}

// chainStart is the request a redirect chain began with (net/http links
// each hop to the answer that caused it), nil where a link is missing.
func chainStart(req *http.Request) *http.Request {
	for req.Response != nil {
		if req = req.Response.Request; req == nil {
			return nil
		}
	}
	return req
}

// sameOrigin reports whether a and b have one origin: scheme, host and
// port, a scheme's default port written or not.
func sameOrigin(a, b *url.URL) bool {
	sa, ha, pa := origin(a)
	sb, hb, pb := origin(b)
	return sa == sb && ha == hb && pa == pb
}

func origin(u *url.URL) (scheme, host, port string) {
	scheme, host, port = strings.ToLower(u.Scheme), strings.ToLower(u.Hostname()), u.Port()
	if port == "" {
		switch scheme {
		case "http":
			port = "80"
		case "https":
			port = "443"
		}
	}
	return scheme, strings.TrimSuffix(host, "."), port
}

// transient tells a failure worth another try: no answer (other than a
// header timeout), a broken or stalled body, 408, 429, 5xx. A body below
// the rate floor is not: a server that trickles would trickle again.
func transient(status int, err error) bool {
	switch {
	case errors.Is(err, ErrNoRanges), errors.Is(err, ErrChanged), errors.Is(err, ErrBadAnswer), errors.Is(err, errRedirects),
		errors.Is(err, errNoAnswer), errors.Is(err, errPanic), errors.Is(err, errSlow),
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
	errClosed   = errors.New("the reader is closed")
	errStalled  = errors.New("stalled")
	errNoAnswer = errors.New("no answer")
	errSlow     = errors.New("too slow")
	errBroke    = errors.New("the body broke off")
	errPanic    = errors.New("panicked")
)

// request is one GET under watch: its answer's headers must come within
// the header timeout, then each piece of its body within the stall
// timeout, and the body must keep the rate floor over each window. A
// watch that trips cancels the request with its reason as the cause.
type request struct {
	ctx    context.Context
	cancel context.CancelCauseFunc

	stallAfter time.Duration
	floor      int64 // bytes a second, 0: none
	window     time.Duration

	mu     sync.Mutex
	header *time.Timer
	stall  *time.Timer
	rate   *time.Timer
	got    int64     // body bytes in the current window
	since  time.Time // its start
	paused bool      // no read of the body is under way (a stream between reads)
	ended  bool
}

// get sends a GET of rawURL with the package's headers (the User-Agent;
// the client adds the token) and those header adds. On success the caller
// reads the body (its reads feed the watch) and calls done at the end.
func (o Options) get(ctx context.Context, client *http.Client, rawURL string, header func(http.Header)) (*http.Response, *request, error) {
	q := &request{stallAfter: o.timeout(), floor: o.minRate(), window: o.rateWindow()}
	q.ctx, q.cancel = context.WithCancelCause(ctx)
	req, err := http.NewRequestWithContext(q.ctx, http.MethodGet, rawURL, nil)
	if err != nil {
		q.cancel(nil)
		return nil, nil, err
	}
	setHeaders(req, o)
	header(req.Header)
	wait := o.headerTimeout()
	late := fmt.Errorf("%w: %w within %v", errStalled, errNoAnswer, wait)
	q.header = time.AfterFunc(wait, func() { q.cancel(late) })
	resp, err := client.Do(req)
	if !q.header.Stop() && err == nil {
		// the headers came as the wait ended: too late
		resp.Body.Close()
		err = late
	}
	if err != nil {
		err = q.cause(err)
		q.done()
		return nil, nil, err
	}
	resp.Body = &watchedBody{ReadCloser: resp.Body, q: q}
	q.mu.Lock()
	q.since = time.Now()
	q.stall = time.AfterFunc(q.stallAfter, q.stalled)
	if q.floor > 0 {
		q.rate = time.AfterFunc(q.window, q.checkRate)
	}
	q.mu.Unlock()
	return resp, q, nil
}

// watchedBody is an answer's body whose reads feed its request's watch.
type watchedBody struct {
	io.ReadCloser
	q *request
}

func (b *watchedBody) Read(p []byte) (int, error) {
	n, err := b.ReadCloser.Read(p)
	if n > 0 {
		b.q.moved(n)
	}
	if err != nil && err != io.EOF {
		err = b.q.cause(err)
	}
	return n, err
}

// moved counts n bytes of the body: the stall watch starts again.
func (q *request) moved(n int) {
	q.mu.Lock()
	defer q.mu.Unlock()
	q.got += int64(n)
	if !q.ended && !q.paused {
		q.stall.Reset(q.stallAfter)
	}
}

// alive restarts the stall watch (the body's reads restart it too).
func (q *request) alive() { q.moved(0) }

// stalled ends a body silent for the stall timeout.
func (q *request) stalled() {
	q.mu.Lock()
	defer q.mu.Unlock()
	if !q.ended && !q.paused {
		q.cancel(fmt.Errorf("%w: nothing for %v", errStalled, q.stallAfter))
	}
}

// checkRate ends a body that brought less than the floor over the window
// just gone, and watches the next.
func (q *request) checkRate() {
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.ended || q.paused {
		return
	}
	took := time.Since(q.since)
	if rate := float64(q.got) / took.Seconds(); rate < float64(q.floor) {
		q.cancel(fmt.Errorf("%w: %s/s over the last %v, below the floor of %s/s (MinRate over RateWindow)", errSlow, byteCount(rate), took.Round(time.Millisecond), byteCount(float64(q.floor))))
		return
	}
	q.got, q.since = 0, time.Now()
	q.rate.Reset(q.window)
}

// pause stops the watch while nobody reads the body (a stream between two
// reads): a reader that waits is no fault of the server's.
func (q *request) pause() {
	q.mu.Lock()
	defer q.mu.Unlock()
	q.paused = true
	q.stall.Stop()
	if q.rate != nil {
		q.rate.Stop()
	}
}

// resume watches the body again, the rate over a new window.
func (q *request) resume() {
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.ended || !q.paused {
		return
	}
	q.paused = false
	q.stall.Reset(q.stallAfter)
	if q.rate != nil {
		q.got, q.since = 0, time.Now()
		q.rate.Reset(q.window)
	}
}

// done ends the watch and the request's context.
func (q *request) done() {
	q.mu.Lock()
	q.ended = true
	q.header.Stop()
	if q.stall != nil {
		q.stall.Stop()
	}
	if q.rate != nil {
		q.rate.Stop()
	}
	q.mu.Unlock()
	q.cancel(nil)
}

// cause is the watch's reason in place of the error a request it
// cancelled returns.
func (q *request) cause(err error) error {
	if c := context.Cause(q.ctx); errors.Is(c, errStalled) || errors.Is(c, errSlow) {
		return c
	}
	return err
}

// byteCount writes a rate's bytes the way people read them.
func byteCount(n float64) string {
	switch {
	case n >= 1<<20:
		return fmt.Sprintf("%.1f MiB", n/(1<<20))
	case n >= 1<<10:
		return fmt.Sprintf("%.1f KiB", n/(1<<10))
	}
	return fmt.Sprintf("%.0f B", n)
}

// setHeaders adds the headers every request of the package carries (the
// client adds the token, for the origin it was given for).
func setHeaders(req *http.Request, o Options) {
	req.Header.Set("User-Agent", userAgent)
}

// refused is the error of an answer the package cannot use: access
// refused, or any other status it does not take.
func refused(status int) error {
	if status == http.StatusUnauthorized || status == http.StatusForbidden {
		return errors.New("access refused (set HF_TOKEN, or --hf-token, to a token that may read it)")
	}
	return errors.New("the request failed")
}

// progress tells Options.Progress of done bytes of size at the URL as
// printed (redacted); a panic of the caller's function is the error.
func (o Options) progress(url string, done, size int64) (err error) {
	if o.Progress == nil {
		return nil
	}
	defer func() {
		if v := recover(); v != nil {
			err = fmt.Errorf("Options.Progress %w: %v", errPanic, v)
		}
	}()
	o.Progress(url, done, size)
	return nil
}
