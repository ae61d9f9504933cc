package httpsrc

import (
	"context"
	"crypto/sha1"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"hash"
	"io"
	"io/fs"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"runtime"
	"strconv"
	"strings"
	"time"

	"github.com/ggload/ggload/gguf"
)

// CacheDir is llama.cpp's cache directory (fs_get_cache_directory):
// $LLAMA_CACHE, else llama.cpp under $XDG_CACHE_HOME or ~/.cache (macOS:
// ~/Library/Caches; Windows: %LOCALAPPDATA%), so that both share what they
// download.
func CacheDir() (string, error) {
	if d := os.Getenv("LLAMA_CACHE"); d != "" {
		return d, nil
	}
	var base string
	switch runtime.GOOS {
	case "darwin":
		home := os.Getenv("HOME")
		if home == "" {
			return "", errors.New("httpsrc: $HOME is not set: no cache directory (set LLAMA_CACHE)")
		}
		base = filepath.Join(home, "Library", "Caches")
	case "windows":
		base = os.Getenv("LOCALAPPDATA")
		if base == "" {
			return "", errors.New("httpsrc: %LOCALAPPDATA% is not set: no cache directory (set LLAMA_CACHE)")
		}
	default:
		base = os.Getenv("XDG_CACHE_HOME")
		if base == "" {
			home, err := os.UserHomeDir()
			if err != nil {
				return "", fmt.Errorf("httpsrc: no cache directory (set LLAMA_CACHE): %w", err)
			}
			base = filepath.Join(home, ".cache")
		}
	}
	return filepath.Join(base, "llama.cpp"), nil
}

// CachePath is where Download puts the file at rawURL: its name (the last
// segment of the URL's path, decoded, without query or fragment) in
// CacheDir. A name that would leave the cache directory is refused.
func CachePath(rawURL string) (string, error) {
	name, err := fileName(rawURL)
	if err != nil {
		return "", err
	}
	dir, err := CacheDir()
	if err != nil {
		return "", err
	}
	return filepath.Join(dir, name), nil
}

// fileName is the name of the file at rawURL: the last segment of its
// path, decoded. Names that would reach another directory are ErrURL: an
// empty one (a path that ends in /), dots and spaces alone (., .., and
// ..., which Windows trims to its directory), one holding a separator
// (/ or \, %2F or %5C encoded) or a NUL, and on Windows a reserved name
// or one with a volume.
func fileName(rawURL string) (string, error) {
	u, err := CheckURL(rawURL)
	if err != nil {
		return "", err
	}
	p := u.EscapedPath()
	name, err := url.PathUnescape(p[strings.LastIndexByte(p, '/')+1:])
	var why string
	switch {
	case err != nil:
		why = fmt.Sprintf("its file name does not decode: %v", err)
	case name == "":
		why = "no file name in the URL's path"
	case strings.ContainsAny(name, "/\\"):
		why = fmt.Sprintf("its file name %q holds a path separator", name)
	case strings.Contains(name, "\x00"):
		why = fmt.Sprintf("its file name %q holds a NUL", name)
	case strings.Trim(name, ". ") == "":
		why = fmt.Sprintf("its file name %q names a directory", name)
	case !filepath.IsLocal(name):
		why = fmt.Sprintf("%q is no file name on this system", name)
	default:
		return name, nil
	}
	return "", fmt.Errorf("httpsrc: %s: %w: %s", Redact(rawURL), ErrURL, why)
}

// Names beside a downloaded file: the partial file a download writes
// (llama.cpp's name), and the ETag (llama.cpp's) and sha256 kept beside a
// file. The partial file's ETag, the one a resume asks for in If-Range, is
// kept beside it in turn (<file>.downloadInProgress.etag).
const (
	partialSuffix = ".downloadInProgress"
	etagSuffix    = ".etag"
	sumSuffix     = ".sha256"
)

// Sentinels of a download's local side, wrapped by *FileError.
var (
	// ErrDestination: the path cannot take the file: a directory, or a
	// symbolic link or special file where a partial or side file goes.
	ErrDestination = errors.New("cannot download to this path")
	// ErrDigest: a file's sha256 differs from the one the server named
	// for it, or from the one kept beside it when it was downloaded.
	ErrDigest = errors.New("sha256 mismatch")
	// ErrNoDigest: no sha256 is kept beside the file (llama.cpp or
	// another tool downloaded it): there is nothing to check it against.
	ErrNoDigest = errors.New("no sha256 kept beside the file")
)

// FileError is a download's failure on the local side: the file, the URL
// it comes from (redacted when printed; none for VerifyDownload) and the
// reason.
type FileError struct {
	Path string
	URL  string
	Err  error
}

func (e *FileError) Error() string {
	if e.URL == "" {
		return "httpsrc: " + e.Path + ": " + e.Err.Error()
	}
	return "httpsrc: " + e.Path + " (from " + Redact(e.URL) + "): " + e.Err.Error()
}

func (e *FileError) Unwrap() error { return e.Err }

// Download fetches the model at rawURL, every split of it, as llama.cpp's
// -mu does, and returns the path of its first file: to dest when it is
// given (-m beside -mu; a split model's parts go to dest's directory under
// their own names), else into the cache (CachePath).
//
// A file already there is kept when the server's ETag is the one saved
// beside it (<file>.etag), when the server gives none, or when it cannot
// be asked; else it is downloaded again, and stays until the new one has
// passed every check. A directory at the destination is refused, never
// removed, as are names that would leave the directory (fileName).
//
// A download writes <file>.downloadInProgress and holds an advisory lock
// on it (flock; LockFileEx on Windows): one writer per file, among
// processes and within one. Another download of the file waits for the
// lock, says so through Options.Waiting, then takes the file the first
// brought, or resumes what it left. The partial file and every side file
// are opened without following a symbolic link; side files are written
// to a new temporary file beside them, then renamed.
//
// A download resumes from what an interrupted one left, with If-Range on
// its strong ETag, and only when the answer carries that ETag: another
// answer starts the file again (a weak ETag or none never resumes), so
// two versions are never spliced. A body is taken up to the length the
// server announced (Content-Length, Content-Range, else X-Linked-Size)
// and no further; one without a length is taken when it ends cleanly at
// the end its GGUF header implies. Where the server names
// the content's sha256 (X-Linked-Etag, as the Hugging Face Hub sends for
// its LFS files, or an ETag of 64 hex digits), the bytes are hashed as
// they come (a resume hashes the part on disk first) and a different sum
// is refused. The finished file is checked against the size the server
// gave and the GGUF's own header, then takes its name by one atomic
// rename; its sha256 is kept beside it (<file>.sha256, as sha256sum
// writes it) for VerifyDownload.
//
// A download that fails for good (a bad answer, a changed file, a
// refusal, a sum that differs, a file that is no GGUF) leaves no partial
// file; one cut off by the network, by ctx or by the process's end keeps
// what it has, under its ETag, for the next to resume; nothing is left
// that a later run would take for a finished file.
func Download(ctx context.Context, rawURL, dest string, o Options) (string, error) {
	parts, err := Parts(rawURL)
	if err != nil {
		return "", err
	}
	client, own := o.client()
	if own {
		defer client.CloseIdleConnections()
	}
	var first string
	for i, p := range parts {
		local, err := localPath(p, dest, len(parts))
		if err != nil {
			return "", err
		}
		d := &download{url: p, local: local, tmp: local + partialSuffix, client: client, o: o, size: -1, h: newSum()}
		if err := d.run(ctx); err != nil {
			return "", err
		}
		if i == 0 {
			first = local
		}
	}
	return first, nil
}

// localPath is where the file at rawURL, one of parts, goes.
func localPath(rawURL, dest string, parts int) (string, error) {
	name, err := fileName(rawURL)
	if err != nil {
		return "", err
	}
	switch {
	case dest != "" && os.IsPathSeparator(dest[len(dest)-1]):
		return "", &FileError{Path: dest, URL: rawURL, Err: fmt.Errorf("%w: the path names a directory", ErrDestination)}
	case dest != "" && parts == 1:
		return dest, nil
	case dest != "":
		return filepath.Join(filepath.Dir(dest), name), nil
	}
	dir, err := CacheDir()
	if err != nil {
		return "", err
	}
	return filepath.Join(dir, name), nil
}

// download is one file's download into its partial file.
type download struct {
	url, local, tmp string
	client          *http.Client
	o               Options

	asked    bool   // the server was asked for the file's ETag (HEAD)
	headOK   bool   // and answered
	headETag string // with this ETag

	f         *os.File  // the partial file, locked
	have      int64     // its bytes
	size      int64     // the file's size as the server gave it; -1: unknown
	etag      string    // the ETag of the answer the partial file's bytes came from
	validator string    // that ETag when strong (a resume's If-Range); "": no resume
	digest    string    // the sha256 the server named (hex), if any
	h         hash.Hash // over the partial file's first hashed bytes
	hashed    int64
	status    int // the last answer's status

	// hub: a file of a hub repository (Pull), whose blob is named by its
	// hash: llama.cpp's skip_etag (a file there stands, the server is not
	// asked), no side files kept beside it, and the bytes checked
	// against oid (an LFS sha256, or a git blob's sha1).
	hub bool
	oid string
}

// newSum is the hash a download keeps of its bytes.
func newSum() hash.Hash { return sha256.New() }

func (d *download) fileErr(err error) error {
	return &FileError{Path: d.local, URL: d.url, Err: err}
}

// run brings the file to d.local, or finds it there.
func (d *download) run(ctx context.Context) error {
	if ok, err := d.cached(ctx); err != nil || ok {
		return err
	}
	if err := os.MkdirAll(filepath.Dir(d.local), 0o755); err != nil {
		return d.fileErr(err)
	}
	if err := d.lock(ctx); err != nil {
		return err
	}
	defer d.unlock()
	// another download may have brought the file while this one waited
	if ok, err := d.cached(ctx); err != nil || ok {
		if ok {
			d.dropEmpty()
		}
		return err
	}
	if err := d.fetch(ctx); err != nil {
		return err
	}
	return d.install()
}

// cached reports whether the file at d.local stands, as llama.cpp decides:
// it is there and the server gives no other ETag than the one saved
// beside it (or none, or no answer). Anything there but a file is refused.
func (d *download) cached(ctx context.Context) (bool, error) {
	st, err := os.Stat(d.local)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return false, nil
	case err != nil:
		return false, d.fileErr(err)
	case st.IsDir():
		return false, d.fileErr(fmt.Errorf("%w: a directory is there", ErrDestination))
	case !st.Mode().IsRegular():
		return false, d.fileErr(fmt.Errorf("%w: it is no regular file (%s)", ErrDestination, st.Mode().Type()))
	case d.hub:
		return true, nil
	}
	if !d.asked {
		d.headETag, d.headOK = d.head(ctx)
		d.asked = true
	}
	saved, _ := readSide(d.local + etagSuffix)
	return !d.headOK || d.headETag == "" || d.headETag == saved, nil
}

// head asks the server for the file's ETag.
func (d *download) head(ctx context.Context) (etag string, ok bool) {
	hctx, cancel := context.WithTimeout(ctx, d.o.headerTimeout())
	defer cancel()
	req, err := http.NewRequestWithContext(hctx, http.MethodHead, d.url, nil)
	if err != nil {
		return "", false
	}
	setHeaders(req, d.o)
	resp, err := d.client.Do(req)
	if err != nil {
		return "", false
	}
	resp.Body.Close()
	if resp.StatusCode < 200 || resp.StatusCode >= 300 {
		return "", false
	}
	return resp.Header.Get("ETag"), true
}

// lock opens the partial file and takes its lock, waiting while another
// download holds it. A lock taken on a file that is no longer the partial
// file (its holder renamed it into place, or removed it) is let go, and
// the file now there is tried.
func (d *download) lock(ctx context.Context) error {
	pause, told, moved := 20*time.Millisecond, false, 0
	for {
		f, err := openPartial(d.tmp)
		if err != nil {
			return d.fileErr(err)
		}
		ok, err := tryLock(f)
		if err != nil {
			f.Close()
			return d.fileErr(fmt.Errorf("locking %s: %w", d.tmp, err))
		}
		if ok {
			st, err1 := f.Stat()
			now, err2 := os.Lstat(d.tmp)
			if err1 == nil && err2 == nil && os.SameFile(st, now) {
				d.f = f
				return nil
			}
			unlock(f)
			f.Close()
			if moved++; moved > 100 {
				return d.fileErr(fmt.Errorf("%w: %s is another file each time it is opened", ErrDestination, d.tmp))
			}
			continue
		}
		f.Close()
		if !told && d.o.Waiting != nil {
			d.o.Waiting(Redact(d.url), d.local)
		}
		told = true
		select {
		case <-ctx.Done():
			return d.fileErr(fmt.Errorf("waiting for another download of the file: %w", ctx.Err()))
		case <-time.After(pause):
		}
		pause = min(2*pause, time.Second)
	}
}

// unlock lets the partial file go.
func (d *download) unlock() {
	unlock(d.f)
	d.f.Close()
}

// dropEmpty removes an empty partial file, which this download made while
// another brought the file.
func (d *download) dropEmpty() {
	if st, err := d.f.Stat(); err == nil && st.Size() == 0 {
		os.Remove(d.tmp)
	}
}

// fetch fills the partial file with the file's bytes, resuming what it
// holds, retrying transient failures from where they stopped, and checks
// the result.
func (d *download) fetch(ctx context.Context) error {
	st, err := d.f.Stat()
	if err != nil {
		return d.fileErr(err)
	}
	d.have = st.Size()
	if d.have > 0 {
		// an earlier download's bytes, resumed only under their strong ETag
		if etag, _ := readSide(d.tmp + etagSuffix); strongETag(etag) {
			d.etag, d.validator = etag, etag
		}
	}
	pause, restarted := d.o.backoff(), false
	for attempt := 0; ; attempt++ {
		err := d.once(ctx)
		if err == nil {
			err = d.complete()
		}
		if err == nil {
			return nil
		}
		if errors.Is(err, ErrChanged) && !restarted {
			// the file is another than the partial file's: once more,
			// from the start
			restarted = true
			if err := d.reset(); err != nil {
				return err
			}
			attempt--
			continue
		}
		if fe := (*FileError)(nil); errors.As(err, &fe) {
			// the local side failed (kept, for another run), or the
			// content is refused (gone)
			if errors.Is(err, errNotGGUF) || errors.Is(err, ErrDigest) || errors.Is(err, ErrBadAnswer) {
				d.discard()
			}
			return err
		}
		e := &Error{URL: d.url, Off: d.have, End: d.size, Status: d.status, Err: err}
		if !transient(d.status, err) || attempt >= d.o.retries() {
			if permanent(e) {
				d.discard()
			}
			return e
		}
		select {
		case <-ctx.Done():
			return &Error{URL: d.url, Off: d.have, End: d.size, Err: ctx.Err()}
		case <-time.After(pause):
		}
		pause *= 2
	}
}

// permanent tells an answer that another run would meet again; a
// failure with no answer, or ended by ctx, is not one.
func permanent(e *Error) bool {
	return e.Status != 0 && !transient(e.Status, e.Err) && !errors.Is(e, errSlow) && !errors.Is(e, context.Canceled) && !errors.Is(e, context.DeadlineExceeded)
}

// discard removes the partial file and its ETag: what they hold would
// fail again.
func (d *download) discard() {
	os.Remove(d.tmp + etagSuffix)
	os.Remove(d.tmp)
}

// reset empties the partial file. Its ETag goes first, and the
// truncation is on disk before another ETag is kept, so that no ETag ever
// names bytes of another answer, a crash or a power cut between them
// included.
func (d *download) reset() error {
	if err := os.Remove(d.tmp + etagSuffix); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return d.fileErr(err)
	}
	if err := d.f.Truncate(0); err != nil {
		return d.fileErr(err)
	}
	if err := d.f.Sync(); err != nil {
		return d.fileErr(err)
	}
	d.have, d.size, d.etag, d.validator, d.digest, d.hashed = 0, -1, "", "", "", 0
	d.h.Reset()
	return nil
}

// once makes one request for the file from byte d.have and writes what
// comes: the rest of the file, or all of it from the start.
func (d *download) once(ctx context.Context) error {
	if d.have > 0 && d.validator == "" {
		// bytes of an answer no request can name: no resume
		if err := d.reset(); err != nil {
			return err
		}
	}
	resume := d.have > 0
	d.status = 0
	resp, q, err := d.o.get(ctx, d.client, d.url, func(h http.Header) {
		if resume {
			h.Set("Range", fmt.Sprintf("bytes=%d-", d.have))
			h.Set("If-Range", d.validator)
		}
	})
	if err != nil {
		return err
	}
	defer q.done()
	defer resp.Body.Close()
	d.status = resp.StatusCode
	switch {
	case resp.StatusCode == http.StatusOK:
		// the whole file (to a resume: the ETag no longer matches)
		if err := d.restart(resp); err != nil {
			return err
		}
	case resp.StatusCode == http.StatusPartialContent && resume:
		if err := d.resumed(resp); err != nil {
			return err
		}
	case resp.StatusCode == http.StatusRequestedRangeNotSatisfiable && resume:
		return d.unsatisfiable(resp)
	case resp.StatusCode == http.StatusPartialContent, resp.StatusCode == http.StatusRequestedRangeNotSatisfiable:
		return fmt.Errorf("%w: %d to a request without a range", ErrBadAnswer, resp.StatusCode)
	default:
		return refused(resp.StatusCode)
	}
	return d.receive(resp, q)
}

// restart takes a 200: the file from its first byte.
func (d *download) restart(resp *http.Response) error {
	if err := d.reset(); err != nil {
		return err
	}
	d.etag = resp.Header.Get("ETag")
	if strongETag(d.etag) {
		d.validator = d.etag
		if err := writeSide(d.tmp+etagSuffix, d.etag); err != nil {
			return d.fileErr(err)
		}
	}
	d.digest, d.size = namedDigest(resp), resp.ContentLength
	if d.size < 0 {
		d.size = linkedSize(resp)
	}
	return nil
}

// resumed takes a 206 to a resume: the rest of the file, when the answer
// is of the file the partial file holds (its ETag is the one asked for)
// and is exactly the rest.
func (d *download) resumed(resp *http.Response) error {
	if tag := resp.Header.Get("ETag"); tag != d.validator {
		return fmt.Errorf("%w: the answer to a resume has ETag %q, the partial file %s", ErrChanged, tag, d.validator)
	}
	if named := namedDigest(resp); named != "" {
		if d.digest != "" && d.digest != named {
			return fmt.Errorf("%w: the server names sha256 %s, %s before", ErrChanged, named, d.digest)
		}
		d.digest = named
	}
	cr := resp.Header.Get("Content-Range")
	m := contentRange.FindStringSubmatch(cr)
	if m == nil || m[3] == "*" {
		return fmt.Errorf("%w: Content-Range %q", ErrBadAnswer, cr)
	}
	a, _ := strconv.ParseInt(m[1], 10, 64)
	b, _ := strconv.ParseInt(m[2], 10, 64)
	size, err := strconv.ParseInt(m[3], 10, 64)
	switch {
	case err != nil || a != d.have || b != size-1:
		return fmt.Errorf("%w: Content-Range %q for bytes=%d-", ErrBadAnswer, cr, d.have)
	case resp.ContentLength >= 0 && resp.ContentLength != size-a:
		return fmt.Errorf("%w: Content-Length %d for a range of %d bytes", ErrBadAnswer, resp.ContentLength, size-a)
	}
	d.size = size
	return d.catchUp()
}

// unsatisfiable takes a 416 to a resume: an earlier download had every
// byte but did not get to its rename, when the server gives the size the
// partial file has and the partial file's ETag. Another answer is of
// another file.
func (d *download) unsatisfiable(resp *http.Response) error {
	m := unsatisfiedRange.FindStringSubmatch(resp.Header.Get("Content-Range"))
	if m == nil || resp.Header.Get("ETag") != d.validator {
		return fmt.Errorf("%w: the server says bytes %d and on are past the file's end (%s, ETag %q)", ErrChanged, d.have, resp.Header.Get("Content-Range"), resp.Header.Get("ETag"))
	}
	if size, err := strconv.ParseInt(m[1], 10, 64); err != nil || size != d.have {
		return fmt.Errorf("%w: the server says the file has %s bytes, the partial file %d", ErrChanged, m[1], d.have)
	}
	d.size = d.have
	d.digest = namedDigest(resp)
	return d.catchUp()
}

// unsatisfiedRange is the Content-Range of a 416: the file's size.
var unsatisfiedRange = regexp.MustCompile(`^bytes \*/(\d+)$`)

// catchUp hashes the partial file's bytes that came before this run.
func (d *download) catchUp() error {
	if d.hashed == d.have {
		return nil
	}
	if _, err := io.Copy(d.h, io.NewSectionReader(d.f, d.hashed, d.have-d.hashed)); err != nil {
		return d.fileErr(fmt.Errorf("hashing the partial file: %w", err))
	}
	d.hashed = d.have
	return nil
}

// receive writes the body at d.have, no further than the size the server
// gave, hashing it as it comes.
func (d *download) receive(resp *http.Response, q *request) error {
	left := int64(-1) // the bytes the body may still bring; -1: no bound
	if d.size >= 0 {
		left = d.size - d.have
	}
	buf := make([]byte, 1<<20)
	for {
		k, rerr := resp.Body.Read(buf)
		if left >= 0 && int64(k) > left {
			return fmt.Errorf("%w: the body runs past the %d bytes of the file", ErrBadAnswer, d.size)
		}
		if k > 0 {
			if _, err := d.f.WriteAt(buf[:k], d.have); err != nil {
				return d.fileErr(err)
			}
			d.h.Write(buf[:k])
			d.have += int64(k)
			d.hashed = d.have
			if left >= 0 {
				left -= int64(k)
			}
			q.alive()
			if err := d.o.progress(Redact(d.url), d.have, d.size); err != nil {
				return err
			}
		}
		if rerr == io.EOF {
			break
		}
		if rerr != nil {
			return fmt.Errorf("%w: %w", errBroke, q.cause(rerr))
		}
	}
	if left > 0 {
		return fmt.Errorf("%w: %d of %d bytes", errBroke, d.have, d.size)
	}
	return nil
}

// complete checks a partial file whose answer ended cleanly: every byte
// the server announced, or, with no size announced, the size its GGUF
// header implies, exactly; and the sha256 the server named. A file cut
// short is errBroke (another request resumes it); any other fault is a
// *FileError.
func (d *download) complete() error {
	g, err := gguf.NewReader(d.f, d.have)
	if err != nil {
		if d.size < 0 && errors.Is(err, gguf.ErrTruncated) {
			return fmt.Errorf("%w: the body ended after %d bytes, short of the end of the GGUF's tensors: %w", errBroke, d.have, err)
		}
		return d.fileErr(fmt.Errorf("%w: %w", errNotGGUF, err))
	}
	if d.size < 0 {
		switch end := dataEnd(g); {
		case d.have < end && (len(g.Tensors) > 0 || d.have != g.DataOffset):
			return fmt.Errorf("%w: the body ended after %d bytes, short of the %d its GGUF header implies", errBroke, d.have, end)
		case d.have > end:
			return d.fileErr(fmt.Errorf("%w: the body of unannounced length ran to %d bytes, past the %d its GGUF header implies", ErrBadAnswer, d.have, end))
		}
		d.size = d.have
	}
	sum := hex.EncodeToString(d.h.Sum(nil))
	if d.digest != "" && sum != d.digest {
		return d.fileErr(fmt.Errorf("%w: the download's is %s, the server names %s", ErrDigest, sum, d.digest))
	}
	return d.checkOID(sum)
}

// checkOID checks a hub file's bytes against the hash its repository's
// tree gives: the sha256 of an LFS file, the sha1 of a git blob
// ("blob SIZE\0" and the bytes).
func (d *download) checkOID(sum string) error {
	got := sum
	switch len(d.oid) {
	case 0:
		return nil
	case 40:
		h := sha1.New()
		fmt.Fprintf(h, "blob %d\x00", d.have)
		if _, err := io.Copy(h, io.NewSectionReader(d.f, 0, d.have)); err != nil {
			return d.fileErr(fmt.Errorf("hashing the download: %w", err))
		}
		got = hex.EncodeToString(h.Sum(nil))
	}
	if got != d.oid {
		return d.fileErr(fmt.Errorf("%w: the download's is %s, the repository's tree gives %s", ErrDigest, got, d.oid))
	}
	return nil
}

// errNotGGUF is a download refused by the GGUF parser.
var errNotGGUF = errors.New("the download is no GGUF whose tensors it holds")

// dataEnd is where a GGUF file ends as its header gives it: its data
// section's end, each tensor padded to the alignment as llama.cpp's
// writers pad them (the last one too). A file without tensors ends at its
// header, padded too (llama.cpp's writers) or not (ggload's).
func dataEnd(g *gguf.File) int64 {
	a := int64(g.Alignment)
	return (g.DataOffset+a-1)/a*a + int64(g.DataSize)
}

// install gives the checked partial file its name. The old file's side
// files go first, so that a crash never leaves them beside the new file;
// the new ones are written beside before, and renamed into place after.
func (d *download) install() error {
	if err := d.f.Sync(); err != nil {
		return d.fileErr(err)
	}
	if d.hub {
		// a blob: its name is its hash, and nothing is kept beside it
		if err := os.Rename(d.tmp, d.local); err != nil {
			return d.fileErr(err)
		}
		os.Remove(d.tmp + etagSuffix)
		return nil
	}
	sides := map[string]string{sumSuffix: hex.EncodeToString(d.h.Sum(nil)) + "  " + filepath.Base(d.local) + "\n"}
	if d.etag != "" {
		sides[etagSuffix] = d.etag
	}
	temps := make(map[string]string, len(sides))
	defer func() {
		for _, t := range temps {
			os.Remove(t)
		}
	}()
	for suffix, text := range sides {
		t, err := writeTemp(d.local+suffix, text)
		if err != nil {
			return d.fileErr(err)
		}
		temps[suffix] = t
	}
	for _, suffix := range []string{etagSuffix, sumSuffix} {
		if err := os.Remove(d.local + suffix); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return d.fileErr(err)
		}
	}
	if err := os.Rename(d.tmp, d.local); err != nil {
		return d.fileErr(err)
	}
	for suffix, t := range temps {
		if err := os.Rename(t, d.local+suffix); err != nil {
			return d.fileErr(err)
		}
		delete(temps, suffix)
	}
	os.Remove(d.tmp + etagSuffix)
	return nil
}

// strongETag reports whether an ETag can go in If-Range: a strong one
// (RFC 9110: a weak one, W/"...", never matches there), quoted, of at most
// 1 KiB of visible ASCII.
func strongETag(s string) bool {
	if len(s) < 2 || len(s) > 1024 || s[0] != '"' || s[len(s)-1] != '"' {
		return false
	}
	for i := 1; i < len(s)-1; i++ {
		if c := s[i]; c <= ' ' || c == '"' || c >= 0x7f {
			return false
		}
	}
	return true
}

// hexSum is the sha256 that a header value names, lower-case: 64 hex
// digits, quoted or not; else "".
var hexSum = regexp.MustCompile(`^"?([0-9a-fA-F]{64})"?$`)

// namedDigest is the sha256 the server names for the body: X-Linked-Etag
// on the answer or on a redirect that led to it (the Hugging Face Hub's
// for an LFS file, whose CDN then answers), else a strong ETag of 64 hex
// digits.
func namedDigest(resp *http.Response) string {
	for _, r := range chain(resp) {
		if m := hexSum.FindStringSubmatch(r.Header.Get("X-Linked-Etag")); m != nil {
			return strings.ToLower(m[1])
		}
	}
	if strings.HasPrefix(resp.Header.Get("ETag"), "W/") {
		return ""
	}
	if m := hexSum.FindStringSubmatch(resp.Header.Get("ETag")); m != nil {
		return strings.ToLower(m[1])
	}
	return ""
}

// linkedSize is the size X-Linked-Size gives for a body of no announced
// length (on the answer or a redirect that led to it); -1 if none.
func linkedSize(resp *http.Response) int64 {
	for _, r := range chain(resp) {
		if n, err := strconv.ParseInt(r.Header.Get("X-Linked-Size"), 10, 64); err == nil && n >= 0 {
			return n
		}
	}
	return -1
}

// chain is an answer and the redirects that led to it, the last first.
func chain(resp *http.Response) []*http.Response {
	var rs []*http.Response
	for r := resp; r != nil && len(rs) <= 10; {
		rs = append(rs, r)
		if r.Request == nil {
			break
		}
		r = r.Request.Response
	}
	return rs
}

// sideMax bounds what is read of a side file.
const sideMax = 4096

// readSide reads a side file (an ETag, a sha256) without following a
// symbolic link; its text, trimmed.
func readSide(path string) (string, error) {
	f, err := openSide(path)
	if err != nil {
		return "", err
	}
	defer f.Close()
	b, err := io.ReadAll(io.LimitReader(f, sideMax+1))
	if err != nil {
		return "", err
	}
	if len(b) > sideMax {
		return "", fmt.Errorf("%s: longer than %d bytes", path, sideMax)
	}
	return strings.TrimSpace(string(b)), nil
}

// writeSide replaces a side file: a new file beside it, then a rename.
func writeSide(path, text string) error {
	t, err := writeTemp(path, text)
	if err != nil {
		return err
	}
	if err := os.Rename(t, path); err != nil {
		os.Remove(t)
		return err
	}
	return nil
}

// writeTemp writes text to a new file beside path (created exclusively)
// and returns its name.
func writeTemp(path, text string) (string, error) {
	f, err := os.CreateTemp(filepath.Dir(path), filepath.Base(path)+".*.tmp")
	if err != nil {
		return "", err
	}
	_, err = f.WriteString(text)
	if err == nil {
		err = f.Chmod(0o644)
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		os.Remove(f.Name())
		return "", err
	}
	return f.Name(), nil
}

// keptSum is a sum as <file>.sha256 keeps it.
var keptSum = regexp.MustCompile(`^[0-9a-fA-F]{64}$`)

// VerifyDownload hashes the file at path and compares the sum with the one
// its download kept beside it (<path>.sha256). A file with no kept sum
// (llama.cpp or another tool downloaded it, or a crash came between the
// rename and the sum) is ErrNoDigest: there is nothing to check; a sum
// that differs is ErrDigest: the file changed since it was downloaded.
func VerifyDownload(ctx context.Context, path string) error {
	text, err := readSide(path + sumSuffix)
	if errors.Is(err, fs.ErrNotExist) {
		return &FileError{Path: path, Err: ErrNoDigest}
	}
	if err != nil {
		return &FileError{Path: path, Err: err}
	}
	want, _, _ := strings.Cut(text, " ")
	if !keptSum.MatchString(want) {
		return &FileError{Path: path, Err: fmt.Errorf("%w: %s holds no sha256", ErrDigest, path+sumSuffix)}
	}
	f, err := os.Open(path)
	if err != nil {
		return &FileError{Path: path, Err: err}
	}
	defer f.Close()
	h := sha256.New()
	buf := make([]byte, 1<<20)
	for {
		if err := ctx.Err(); err != nil {
			return &FileError{Path: path, Err: err}
		}
		k, rerr := f.Read(buf)
		h.Write(buf[:k])
		if rerr == io.EOF {
			break
		}
		if rerr != nil {
			return &FileError{Path: path, Err: rerr}
		}
	}
	if got := hex.EncodeToString(h.Sum(nil)); got != strings.ToLower(want) {
		return &FileError{Path: path, Err: fmt.Errorf("%w: the file's is %s, the one kept at its download %s: the file changed since", ErrDigest, got, strings.ToLower(want))}
	}
	return nil
}
