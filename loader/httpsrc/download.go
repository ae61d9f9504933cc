package httpsrc

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"path"
	"path/filepath"
	"regexp"
	"runtime"
	"strconv"
	"strings"
	"time"

	"github.com/ggload/ggload/loader/gguf"
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
// element of the URL's path, without query or fragment) in CacheDir.
func CachePath(rawURL string) (string, error) {
	u, err := CheckURL(rawURL)
	if err != nil {
		return "", err
	}
	name := path.Base(u.Path)
	if name == "/" || name == "." || name == "" {
		return "", fmt.Errorf("httpsrc: %s: %w: no file name in the URL's path", rawURL, ErrURL)
	}
	dir, err := CacheDir()
	if err != nil {
		return "", err
	}
	return filepath.Join(dir, name), nil
}

// Download fetches the model at rawURL, every split of it, as llama.cpp's
// -mu does, and returns the path of its first file: to dest when it is
// given (-m beside -mu; a split model's parts go to dest's directory under
// their own names), else into the cache (CachePath). A file already there
// is kept when the server's ETag is the one saved beside it (<file>.etag),
// when the server gives none, or when it cannot be asked. A download goes
// to <file>.downloadInProgress, resumes from what an interrupted one left
// there (If-Range on the ETag: a changed file starts again), is checked
// against the size the server gave and the GGUF's own header, and only
// then takes the file's name. A download that fails for good (a bad
// answer, a changed file, a refusal, a file that is no GGUF) leaves
// nothing behind; one cut off by the network or by ctx keeps what it has,
// for the next to resume.
func Download(ctx context.Context, rawURL, dest string, o Options) (string, error) {
	parts, err := Parts(rawURL)
	if err != nil {
		return "", err
	}
	var first string
	for i, p := range parts {
		local, err := CachePath(p)
		if err != nil {
			return "", err
		}
		switch {
		case dest != "" && len(parts) == 1:
			local = dest
		case dest != "":
			local = filepath.Join(filepath.Dir(dest), filepath.Base(local))
		}
		if err := fetchFile(ctx, p, local, o); err != nil {
			return "", err
		}
		if i == 0 {
			first = local
		}
	}
	return first, nil
}

// fetchFile brings one file to local.
func fetchFile(ctx context.Context, rawURL, local string, o Options) error {
	client, own := o.client()
	if own {
		defer client.CloseIdleConnections()
	}
	head := func() (etag string, ok bool) {
		req, err := http.NewRequestWithContext(ctx, http.MethodHead, rawURL, nil)
		if err != nil {
			return "", false
		}
		setHeaders(req, o)
		hctx, cancel := context.WithTimeout(ctx, o.timeout())
		defer cancel()
		resp, err := client.Do(req.WithContext(hctx))
		if err != nil {
			return "", false
		}
		resp.Body.Close()
		if resp.StatusCode < 200 || resp.StatusCode >= 300 {
			return "", false
		}
		return resp.Header.Get("ETag"), true
	}
	if _, err := os.Stat(local); err == nil {
		saved, _ := os.ReadFile(local + ".etag")
		etag, ok := head()
		if !ok || etag == "" || etag == strings.TrimSpace(string(saved)) {
			return nil // the cached file stands
		}
		if err := os.Remove(local); err != nil {
			return fmt.Errorf("httpsrc: %s changed on the server: %w", rawURL, err)
		}
	}
	if err := os.MkdirAll(filepath.Dir(local), 0o755); err != nil {
		return fmt.Errorf("httpsrc: %w", err)
	}
	tmp := local + ".downloadInProgress"
	etag, err := pull(ctx, client, rawURL, tmp, o)
	if err != nil {
		if permanent(err) {
			os.Remove(tmp)
		}
		return err
	}
	if err := checkGGUF(tmp, rawURL); err != nil {
		os.Remove(tmp)
		return err
	}
	if err := os.Rename(tmp, local); err != nil {
		os.Remove(tmp)
		return fmt.Errorf("httpsrc: %w", err)
	}
	if etag != "" {
		if err := os.WriteFile(local+".etag", []byte(etag), 0o644); err != nil {
			return fmt.Errorf("httpsrc: %w", err)
		}
	}
	return nil
}

// permanent tells a failure that another run would meet again.
func permanent(err error) bool {
	var e *Error
	if !errors.As(err, &e) {
		return true
	}
	return !transient(e.Status, e.Err) && !errors.Is(err, context.Canceled) && !errors.Is(err, context.DeadlineExceeded)
}

// pull appends the file to tmp from where tmp ends, retrying transient
// failures from where they stopped, and returns the file's ETag.
func pull(ctx context.Context, client *http.Client, rawURL, tmp string, o Options) (string, error) {
	f, err := os.OpenFile(tmp, os.O_RDWR|os.O_CREATE, 0o644)
	if err != nil {
		return "", fmt.Errorf("httpsrc: %w", err)
	}
	defer f.Close()
	// what an earlier download left, resumed only under its ETag
	etag := ""
	if b, err := os.ReadFile(tmp + ".etag"); err == nil {
		etag = strings.TrimSpace(string(b))
	}
	have, err := f.Seek(0, io.SeekEnd)
	if err != nil {
		return "", fmt.Errorf("httpsrc: %w", err)
	}
	if etag == "" && have > 0 {
		if err := f.Truncate(0); err != nil {
			return "", fmt.Errorf("httpsrc: %w", err)
		}
		have = 0
	}
	total := int64(-1)
	pause := o.backoff()
	for attempt := 0; ; attempt++ {
		n, size, tag, restart, status, err := pullOnce(ctx, client, rawURL, f, have, etag, o)
		if restart {
			have = 0
		}
		have += n
		if tag != "" && tag != etag {
			etag = tag
			os.WriteFile(tmp+".etag", []byte(etag), 0o644)
		}
		if size >= 0 {
			total = size
		}
		if err == nil && total >= 0 && have == total {
			if err := f.Sync(); err != nil {
				return "", fmt.Errorf("httpsrc: %w", err)
			}
			os.Remove(tmp + ".etag")
			return etag, nil
		}
		if err == nil {
			err = fmt.Errorf("%w: %d of %d bytes", errBroke, have, total)
		}
		e := &Error{URL: rawURL, Off: have, End: total, Status: status, Err: err}
		if !transient(status, err) || attempt >= o.retries() {
			if permanent(e) {
				os.Remove(tmp + ".etag")
			}
			return "", e
		}
		select {
		case <-ctx.Done():
			return "", &Error{URL: rawURL, Off: have, End: total, Err: ctx.Err()}
		case <-time.After(pause):
		}
		pause *= 2
	}
}

// pullOnce makes one request for the file from byte have and writes what
// comes at have (or, when the server sends the whole file, from 0:
// restart). It returns the bytes written, the file's size and ETag as the
// answer gives them, and the status.
func pullOnce(ctx context.Context, client *http.Client, rawURL string, f *os.File, have int64, etag string, o Options) (n, size int64, tag string, restart bool, status int, err error) {
	resp, q, err := o.get(ctx, client, rawURL, func(h http.Header) {
		if have > 0 {
			h.Set("Range", fmt.Sprintf("bytes=%d-", have))
			h.Set("If-Range", etag)
		}
	})
	if err != nil {
		return 0, -1, "", false, 0, err
	}
	defer q.done()
	defer resp.Body.Close()
	status, tag, size = resp.StatusCode, resp.Header.Get("ETag"), -1
	at := have
	switch status {
	case http.StatusOK:
		// the whole file: from the start
		restart, at = have > 0, 0
		if err := f.Truncate(0); err != nil {
			return 0, -1, tag, restart, status, err
		}
		size = resp.ContentLength
	case http.StatusPartialContent:
		m := contentRange.FindStringSubmatch(resp.Header.Get("Content-Range"))
		if m == nil || m[3] == "*" {
			return 0, -1, tag, false, status, fmt.Errorf("%w: Content-Range %q", ErrBadAnswer, resp.Header.Get("Content-Range"))
		}
		a, _ := strconv.ParseInt(m[1], 10, 64)
		size, _ = strconv.ParseInt(m[3], 10, 64)
		if a != have {
			return 0, -1, tag, false, status, fmt.Errorf("%w: Content-Range %q for bytes=%d-", ErrBadAnswer, m[0], have)
		}
	case http.StatusRequestedRangeNotSatisfiable:
		// an earlier download had every byte but did not get to its
		// rename: the server says how long the file is
		if m := unsatisfiedRange.FindStringSubmatch(resp.Header.Get("Content-Range")); m != nil && have > 0 {
			if size, _ = strconv.ParseInt(m[1], 10, 64); size == have {
				return 0, size, tag, false, status, nil
			}
		}
		return 0, -1, tag, false, status, fmt.Errorf("%w: the server says bytes %d and on are past the file's end (%s)", ErrBadAnswer, have, resp.Header.Get("Content-Range"))
	default:
		return 0, -1, tag, false, status, refused(status)
	}
	buf := make([]byte, 1<<20)
	for {
		k, rerr := resp.Body.Read(buf)
		if k > 0 {
			if _, werr := f.WriteAt(buf[:k], at+n); werr != nil {
				return n, size, tag, restart, status, werr
			}
			n += int64(k)
			q.alive()
			if o.Progress != nil {
				o.Progress(rawURL, at+n, size)
			}
		}
		if rerr == io.EOF {
			break
		}
		if rerr != nil {
			return n, size, tag, restart, status, fmt.Errorf("%w: %w", errBroke, q.cause(rerr))
		}
	}
	if size >= 0 && at+n > size {
		return n, size, tag, restart, status, fmt.Errorf("%w: %d bytes for a file of %d", ErrBadAnswer, at+n, size)
	}
	return n, size, tag, restart, status, nil
}

// unsatisfiedRange is the Content-Range of a 416: the file's size.
var unsatisfiedRange = regexp.MustCompile(`^bytes \*/(\d+)$`)

// checkGGUF parses a downloaded file: a GGUF whose tensors lie in it.
func checkGGUF(p, rawURL string) error {
	f, err := gguf.Open(p)
	if err != nil {
		return fmt.Errorf("httpsrc: %s: the download is no GGUF whose tensors it holds: %w", rawURL, err)
	}
	return f.Close()
}
