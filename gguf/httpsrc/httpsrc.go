// Package httpsrc reads GGUF models over HTTP and HTTPS: the header first
// (a window of it, grown as the parse needs), then exactly the bytes of
// the tensors a load reads, by range requests, several at once when the
// loader's readers ask at once. A plan needs the header alone, so "where
// does this model go, and does it fit" is answered before a weight byte is
// fetched; a load streams the weights to the devices with no local copy.
// Such a source cannot be mapped: a plan of it resolves load mode auto to
// none and lazy auto to off, and says so (place.Plan.NoMmap); mmap,
// mlock, direct I/O and lazy on are refused. Download fetches a model
// into the cache instead, resumably, as llama.cpp's -mu does, after which
// it loads as any local file.
//
// The header window is Options.HeaderWindow long at first and doubles
// whenever the parse reads past it, so that it fetches at most twice the
// bytes the parse reads (or the first window); each growth is kept as it
// came, never copied again. It keeps at most 64 MiB: past that the parse
// reads through a slide of 16 MiB that moves on with it, so a header that
// claims a huge string costs that string's transfer and no copy of it.
// Once the header is parsed (Freeze) the window keeps only what the parse
// read.
//
// A split model's parts are found by their names (-0000k-of-0000N.gguf):
// OpenModel opens the first, reads its split.count, and only then the
// others, four at a time; the first failure cancels the rest. A name whose
// count is not split.count is refused; a first part that says it is not
// split is loaded alone, as llama.cpp loads it.
//
// Every answer is checked: a range request must get 206 with the range it
// asked for and the size and ETag of the first answer (a server that lies
// about ranges or whose file changed is an error); a body that stops
// short, stalls or is reset is asked for again from where it stopped, with
// a growing pause, on transient failures (network errors, 408, 429 and
// 5xx) only.
//
// Deadlines. An answer's headers must come within HeaderTimeout (default:
// Timeout); a server that sends none in time is not asked again, so one
// that never answers fails a request after that long, not that times the
// retries. A body must bring a piece within Timeout (30s; else it is
// stalled) and at least MinRate bytes a second over each RateWindow
// (4 KiB/s over 30s; else it is too slow, and the error gives the rate
// measured and the floor). A stalled body is a transient failure, asked
// for again from where it stopped; a slow one is not: a server that
// trickles fails after one RateWindow. Downloads keep the same deadlines,
// and keep what a slow body brought for the next run to resume.
//
// Servers that ignore ranges (Python's http.server among them) answer the
// first request with the whole file: 200 and its length. The reader then
// reads that body as one stream, in file order: the header from its
// start, the stream closed once the header is parsed (Freeze; a plan or
// inspect fetches the header's window and no more), then a load's reads
// from a new stream, skipping what lies between them: one pass of the
// file. A read behind the stream's position is refused with an error
// wrapping ErrNoRanges, since it would fetch the file again from its
// start: a second load of the same opened model, or a Verify, is refused
// (download the file first, with -mu). A stream that breaks is asked for
// again from the start, dropping the bytes before where it broke, on the
// retries of a transient failure. The reader's source says so
// (gguf.Source.Sequential), and the loader reads such a source once, in
// file order, with one reader.
//
// Credentials. The bearer token (Options.Token, else $HF_TOKEN) is sent
// only to the exact origin of the URL a request was made for: its scheme,
// host and port, a default port written or not. A redirect to another
// host or port does not get it, nor one from https to http or from http
// to https; a hop that comes back to that origin gets it again. This holds
// whatever client makes the requests (a caller's Client is copied, never
// changed). A password in the URL (user:pw@host) goes to the server as the
// URL says, but is never printed: errors, Reader.URL, the Name of the
// sources OpenModel gives and Progress see the URL redacted (user:xxxxx@,
// as Redact writes it). The token is never printed.
//
// Errors name the URL and the byte range; the loader adds the tensor. A
// panic of Options.Progress ends the read with an error naming the URL,
// as does one of a caller's client while OpenModel opens a part.
package httpsrc

import (
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/url"
	"os"
	"strings"
	"time"
)

// Options tune the requests. The zero value works.
type Options struct {
	// Client makes the requests; zero: a client of its own, which follows
	// up to 10 redirects. A caller's client is used through a copy that
	// adds the token (its Transport wrapped); the caller's is not changed.
	Client *http.Client
	// Token is sent as a bearer token to the URL's own origin; zero:
	// $HF_TOKEN, as llama.cpp reads it.
	Token string
	// HeaderTimeout bounds the wait for an answer's headers (zero:
	// Timeout). It is not retried.
	HeaderTimeout time.Duration
	// Timeout bounds the wait for each piece of a body (default 30s): a
	// body silent for longer is stalled, a transient failure.
	Timeout time.Duration
	// MinRate is the floor, in bytes a second, of a body's progress over
	// each RateWindow (defaults: 4 KiB/s over 30s; a negative MinRate: no
	// floor). A body below it is ended, a transient failure. The floor is
	// per request, and a load has 8 under way per device it fills (a
	// trickle of a byte a second is 4,096 times below it), so the default
	// asks tens of KiB/s of a link, which any link that carries a model
	// gives.
	MinRate    int64
	RateWindow time.Duration
	// Retries is how many times a transient failure is retried (default
	// 4; negative: none), after a pause that starts at Backoff (default
	// 200ms) and doubles.
	Retries int
	Backoff time.Duration
	// HeaderWindow is the first request's length (default 1 MiB); the
	// window doubles when the header's parse reads past it.
	HeaderWindow int64
	// Progress, when set, is told of every piece of a body received: the
	// URL (redacted), the bytes of it received so far (by a download: the
	// bytes of the file it has, a resumed part included) and the file's
	// size (-1 while unknown). It is called from the goroutines that read.
	Progress func(url string, done, size int64)
	// Waiting, when set, is told that a download waits for another
	// download of the same file to let it go: the file's URL and its
	// local path.
	Waiting func(url, path string)
	// Logger receives what OpenModel does that the caller may not expect
	// (a part named split that says it is not); default slog.Default().
	Logger *slog.Logger

	noToken bool // no token, not even $HF_TOKEN (the hub's API, for a token of another form)
}

func (o Options) timeout() time.Duration {
	if o.Timeout > 0 {
		return o.Timeout
	}
	return 30 * time.Second
}

func (o Options) headerTimeout() time.Duration {
	if o.HeaderTimeout > 0 {
		return o.HeaderTimeout
	}
	return o.timeout()
}

// minRate is the floor of a body's rate in bytes a second, 0 for none.
func (o Options) minRate() int64 { return orNone(o.MinRate, 4<<10) }

func (o Options) rateWindow() time.Duration {
	if o.RateWindow > 0 {
		return o.RateWindow
	}
	return 30 * time.Second
}

func (o Options) retries() int { return orNone(o.Retries, 4) }

// orNone is the value of an option v whose zero means def and whose
// negative values mean none (0).
func orNone[T int | int64](v, def T) T {
	switch {
	case v < 0:
		return 0
	case v == 0:
		return def
	}
	return v
}

func (o Options) backoff() time.Duration {
	if o.Backoff > 0 {
		return o.Backoff
	}
	return 200 * time.Millisecond
}

func (o Options) token() string {
	if o.noToken {
		return ""
	}
	if o.Token != "" {
		return o.Token
	}
	return os.Getenv("HF_TOKEN")
}

func (o Options) logger() *slog.Logger {
	if o.Logger != nil {
		return o.Logger
	}
	return slog.Default()
}

// Error is a request that failed: the URL (redacted), the byte range
// [Off, End) and the HTTP status (0 when there was no answer).
type Error struct {
	URL      string
	Off, End int64
	Status   int
	Err      error
}

func (e *Error) Error() string {
	s := fmt.Sprintf("httpsrc: %s: bytes [%d, %d)", Redact(e.URL), e.Off, e.End)
	if e.Status != 0 {
		s += fmt.Sprintf(": %d %s", e.Status, http.StatusText(e.Status))
	}
	return s + ": " + e.Err.Error()
}

func (e *Error) Unwrap() error { return e.Err }

// Sentinels wrapped by the errors of this package.
var (
	// ErrURL: not an http or https URL with a host, or one whose file
	// name cannot name a file of the cache (empty, "." or "..", or one
	// holding a separator once decoded).
	ErrURL = errors.New("bad URL")
	// ErrNoRanges: the server ignores range requests, and a read cannot be
	// served from the one stream of its body (a read behind it, a server
	// that answered ranges before, a body of unknown length).
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
		// (url's own errors quote the URL: the reason alone)
		var ue *url.Error
		if errors.As(err, &ue) {
			err = ue.Err
		}
		return nil, fmt.Errorf("httpsrc: %q: %w: %v", Redact(raw), ErrURL, err)
	}
	switch {
	case u.Scheme == "":
		return nil, fmt.Errorf("httpsrc: %q: %w: no scheme (write http:// or https://)", u.Redacted(), ErrURL)
	case u.Scheme != "http" && u.Scheme != "https":
		return nil, fmt.Errorf("httpsrc: %q: %w: scheme %q is not supported", u.Redacted(), ErrURL, u.Scheme)
	case u.Host == "":
		return nil, fmt.Errorf("httpsrc: %q: %w: no host", u.Redacted(), ErrURL)
	}
	return u, nil
}

// IsURL reports whether s is meant as a URL (it has a scheme): what a
// command line takes for a path or a URL.
func IsURL(s string) bool { return strings.Contains(s, "://") }

// Redact is rawURL as it may be printed: a password in it replaced by
// "xxxxx", as url.URL.Redacted writes it (user:xxxxx@host), also where
// rawURL does not parse. Everything else is kept as it is.
func Redact(rawURL string) string {
	if u, err := url.Parse(rawURL); err == nil {
		if _, has := u.User.Password(); !has {
			return rawURL // as given, not as url would write it again
		}
		return u.Redacted()
	}
	// unparsed: the authority is what lies between "//" and the path
	i := strings.Index(rawURL, "//")
	if i < 0 {
		return rawURL
	}
	auth := rawURL[i+2:]
	if j := strings.IndexAny(auth, "/?#"); j >= 0 {
		auth = auth[:j]
	}
	at := strings.LastIndex(auth, "@")
	if at < 0 {
		return rawURL
	}
	user, _, has := strings.Cut(auth[:at], ":")
	if !has {
		return rawURL
	}
	return rawURL[:i+2] + user + ":xxxxx" + rawURL[i+2+at:]
}
