package httpsrc_test

import (
	"bufio"
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ggload/ggload/ggml/gtype"
	"github.com/ggload/ggload/gguf"
	"github.com/ggload/ggload/gguf/httpsrc"
)

// modelBytes is a small GGUF of four i8 tensors whose lengths leave
// padding after each (the last too, as llama.cpp's writers pad it), with
// bytes of its own for each version v.
func modelBytes(t testing.TB, v byte) []byte {
	t.Helper()
	w := gguf.NewWriter()
	if err := w.Set("general.name", gguf.String(fmt.Sprintf("download test v%d", v))); err != nil {
		t.Fatal(err)
	}
	for i, n := range []int64{300001, 250003, 200005, 180007} {
		data := make([]byte, n)
		for j := range data {
			data[j] = byte(j*7+i*13) ^ v
		}
		if err := w.AddTensorBytes(fmt.Sprintf("blk.%d.w", i), gtype.TypeI8, []int64{n}, data); err != nil {
			t.Fatal(err)
		}
	}
	var b bytes.Buffer
	if _, err := w.WriteTo(&b); err != nil {
		t.Fatal(err)
	}
	return b.Bytes()
}

// dlServer serves one file for downloads, a version at a time: ranges,
// If-Range and HEAD as http.ServeContent answers them, with the version's
// ETag, unless the test's hook answers first. It logs every request.
type dlServer struct {
	mu   sync.Mutex
	data []byte
	etag string
	log  []string // method, Range and If-Range of each request
	hook func(n int, w http.ResponseWriter, r *http.Request) bool
	gets int
}

func (s *dlServer) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	s.mu.Lock()
	s.log = append(s.log, strings.TrimSpace(r.Method+" "+r.Header.Get("Range")+" "+r.Header.Get("If-Range")))
	if r.Method == http.MethodGet {
		s.gets++
	}
	n, data, etag, hook := len(s.log), s.data, s.etag, s.hook
	s.mu.Unlock()
	if hook != nil && hook(n, w, r) {
		return
	}
	w.Header().Set("ETag", etag)
	http.ServeContent(w, r, "model.gguf", time.Time{}, bytes.NewReader(data))
}

// set serves another version.
func (s *dlServer) set(data []byte, etag string) {
	s.mu.Lock()
	s.data, s.etag = data, etag
	s.mu.Unlock()
}

// requests is the log so far; getCount the GETs.
func (s *dlServer) requests() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]string(nil), s.log...)
}

func (s *dlServer) getCount() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.gets
}

// serve starts a loopback server for s.
func serve(t testing.TB, s *dlServer) *httptest.Server {
	t.Helper()
	srv := httptest.NewServer(s)
	t.Cleanup(srv.Close)
	return srv
}

// cutAt answers a GET of the whole file with its headers and the first n
// bytes of its body, then drops the connection.
func cutAt(w http.ResponseWriter, data []byte, etag string, n int) {
	conn, buf, err := http.NewResponseController(w).Hijack()
	if err != nil {
		return
	}
	fmt.Fprintf(buf, "HTTP/1.1 200 OK\r\nContent-Length: %d\r\nETag: %s\r\n\r\n", len(data), etag)
	buf.Write(data[:n])
	buf.Flush()
	conn.Close()
}

// holdAt answers a GET of the whole file with its headers and the first
// n bytes of its body, says so on sent, and sends the rest once release
// is closed.
func holdAt(w http.ResponseWriter, r *http.Request, data []byte, etag string, n int, sent chan<- struct{}, release <-chan struct{}) {
	w.Header().Set("ETag", etag)
	w.Header().Set("Content-Length", strconv.Itoa(len(data)))
	w.WriteHeader(http.StatusOK)
	w.Write(data[:n])
	http.NewResponseController(w).Flush()
	close(sent)
	select {
	case <-release:
		w.Write(data[n:])
	case <-r.Context().Done():
	}
}

// cacheFiles lists the names in dir.
func cacheFiles(t testing.TB, dir string) []string {
	t.Helper()
	es, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, e := range es {
		names = append(names, e.Name())
	}
	sort.Strings(names)
	return names
}

// checkFile fails the test unless path holds data.
func checkFile(t testing.TB, path string, data []byte) {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(b, data) {
		t.Fatalf("%s differs from the served file (%d bytes, want %d)", path, len(b), len(data))
	}
}

func sumOf(b []byte) string {
	s := sha256.Sum256(b)
	return hex.EncodeToString(s[:])
}

// childURL, set in this test binary's environment, makes it a second
// process that downloads the URL into $LLAMA_CACHE (downloadChild).
const (
	childURL  = "HTTPSRC_TEST_DOWNLOAD_URL"
	childHalf = "HTTPSRC_TEST_DOWNLOAD_REPORT_AT"
)

func init() {
	if u := os.Getenv(childURL); u != "" {
		os.Exit(downloadChild(u))
	}
}

// downloadChild downloads u and says on stdout, a line each, what it
// was told: "waiting" (Options.Waiting), "have N" (once N bytes, at
// least $HTTPSRC_TEST_DOWNLOAD_REPORT_AT, are on disk), then "done PATH"
// or "error ...".
func downloadChild(u string) int {
	at, _ := strconv.ParseInt(os.Getenv(childHalf), 10, 64)
	var once sync.Once
	o := httpsrc.Options{
		Retries: -1,
		Waiting: func(_, path string) { fmt.Printf("waiting %s\n", path) },
		Progress: func(_ string, done, _ int64) {
			if at > 0 && done >= at {
				once.Do(func() { fmt.Printf("have %d\n", done) })
			}
		},
	}
	p, err := httpsrc.Download(context.Background(), u, "", o)
	if err != nil {
		fmt.Printf("error %v\n", err)
		return 1
	}
	fmt.Printf("done %s\n", p)
	return 0
}

// child is a second process downloading url into cache; its lines come
// on lines, closed when it exits.
type child struct {
	cmd   *exec.Cmd
	lines chan string
}

func startChild(t *testing.T, url, cache string, reportAt int) *child {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), childURL+"="+url, "LLAMA_CACHE="+cache, childHalf+"="+strconv.Itoa(reportAt))
	cmd.Stderr = os.Stderr
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	c := &child{cmd: cmd, lines: make(chan string, 16)}
	go func() {
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			c.lines <- sc.Text()
		}
		close(c.lines)
	}()
	t.Cleanup(func() {
		cmd.Process.Kill()
		for range c.lines {
		}
		cmd.Wait()
	})
	return c
}

// next is the child's next line ("" once it has ended).
func (c *child) next() string { return <-c.lines }

// -mu: a download into the cache, resumed after an interruption (If-Range
// on the ETag), kept when the ETag is unchanged, fetched again when it
// changed, and nothing left behind by one that fails for good.
func TestDownload(t *testing.T) {
	data, v2 := modelBytes(t, 1), modelBytes(t, 2)
	cache := t.TempDir()
	t.Setenv("LLAMA_CACHE", cache)
	s := &dlServer{data: data, etag: `"v1"`}
	s.hook = func(n int, w http.ResponseWriter, r *http.Request) bool {
		if n == 1 {
			// the first download breaks off half way
			cutAt(w, data, `"v1"`, len(data)/2)
			return true
		}
		return false
	}
	srv := serve(t, s)
	url := srv.URL + "/dl/model-q4.gguf"
	o := httpsrc.Options{Retries: -1, Backoff: time.Millisecond}
	if _, err := httpsrc.Download(context.Background(), url, "", o); err == nil {
		t.Fatal("the interrupted download succeeded")
	}
	tmp := filepath.Join(cache, "model-q4.gguf.downloadInProgress")
	if st, err := os.Stat(tmp); err != nil || st.Size() != int64(len(data)/2) {
		t.Fatalf("the partial download: %v %v", st, err)
	}
	got, err := httpsrc.Download(context.Background(), url, "", o)
	if err != nil {
		t.Fatal(err)
	}
	if got != filepath.Join(cache, "model-q4.gguf") {
		t.Fatalf("downloaded to %s", got)
	}
	checkFile(t, got, data)
	if log := s.requests(); log[len(log)-1] != fmt.Sprintf(`GET bytes=%d- "v1"`, len(data)/2) {
		t.Fatalf("not resumed: %v", log)
	}
	if got := cacheFiles(t, cache); fmt.Sprint(got) != "[model-q4.gguf model-q4.gguf.etag model-q4.gguf.sha256]" {
		t.Fatalf("the cache holds %v", got)
	}
	// unchanged: kept (a HEAD only)
	before := len(s.requests())
	if _, err := httpsrc.Download(context.Background(), url, "", o); err != nil || len(s.requests()) != before+1 {
		t.Fatalf("the cached file was fetched again (%v): %v", s.requests()[before:], err)
	}
	// changed on the server: fetched again
	s.set(v2, `"v2"`)
	if _, err := httpsrc.Download(context.Background(), url, "", o); err != nil {
		t.Fatalf("the changed file: %v", err)
	}
	checkFile(t, got, v2)
	// a file that is no GGUF: refused, nothing left
	bsrv := serve(t, &dlServer{data: []byte("not a model at all"), etag: `"b"`})
	_, err = httpsrc.Download(context.Background(), bsrv.URL+"/bad.gguf", "", o)
	if err == nil || !strings.Contains(err.Error(), "no GGUF") {
		t.Fatalf("bad download: %v", err)
	}
	left, _ := filepath.Glob(filepath.Join(cache, "bad.gguf*"))
	if len(left) != 0 {
		t.Fatalf("left behind: %v", left)
	}
	// -m beside -mu: the download goes there, not to the cache
	dest := filepath.Join(t.TempDir(), "mine.gguf")
	got, err = httpsrc.Download(context.Background(), url, dest, o)
	if err != nil || got != dest {
		t.Fatalf("the download to %s went to %s: %v", dest, got, err)
	}
	checkFile(t, dest, v2)
}

// Two downloads of one file at once, from two processes: the second
// waits for the first's lock on the partial file, says so, then takes
// the file the first brought; one GET in all, and the file is whole.
func TestDownloadTwoProcesses(t *testing.T) {
	data := modelBytes(t, 1)
	cache := t.TempDir()
	t.Setenv("LLAMA_CACHE", cache)
	sent, release := make(chan struct{}), make(chan struct{})
	var once sync.Once
	free := func() { once.Do(func() { close(release) }) }
	t.Cleanup(free)
	s := &dlServer{data: data, etag: `"v1"`}
	s.hook = func(n int, w http.ResponseWriter, r *http.Request) bool {
		if n == 1 {
			holdAt(w, r, data, `"v1"`, len(data)/2, sent, release)
			return true
		}
		return false
	}
	srv := serve(t, s)
	url := srv.URL + "/m/model.gguf"
	first := make(chan error, 1)
	go func() {
		_, err := httpsrc.Download(context.Background(), url, "", httpsrc.Options{Retries: -1})
		first <- err
	}()
	<-sent
	c := startChild(t, url, cache, 0)
	line := c.next()
	free()
	if err := <-first; err != nil {
		t.Fatalf("the first download: %v", err)
	}
	if !strings.HasPrefix(line, "waiting "+filepath.Join(cache, "model.gguf")) {
		t.Fatalf("the second process did not wait for the first: it said %q", line)
	}
	if line = c.next(); line != "done "+filepath.Join(cache, "model.gguf") {
		t.Fatalf("the second process: %q", line)
	}
	checkFile(t, filepath.Join(cache, "model.gguf"), data)
	if n := s.getCount(); n != 1 {
		t.Errorf("%d GETs, want the first download's alone: %v", n, s.requests())
	}
	if got, want := cacheFiles(t, cache), []string{"model.gguf", "model.gguf.etag", "model.gguf.sha256"}; fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("the cache holds %v, want %v", got, want)
	}
}

// A file already at the destination (a stale cached file, -m's file) is
// replaced only by a download that passed every check: one that fails
// leaves it as it was, with its ETag. A directory there is refused, not
// removed.
func TestDownloadKeepsTheOldFile(t *testing.T) {
	v1, v2 := modelBytes(t, 1), modelBytes(t, 2)
	for _, c := range []struct {
		name string
		hook func(n int, w http.ResponseWriter, r *http.Request) bool
		want error
	}{
		{"no GGUF", func(n int, w http.ResponseWriter, r *http.Request) bool {
			if r.Method == http.MethodGet {
				w.Header().Set("ETag", `"v2"`)
				w.Write([]byte("<html>not a model</html>"))
				return true
			}
			return false
		}, nil},
		{"500", func(n int, w http.ResponseWriter, r *http.Request) bool {
			if r.Method == http.MethodGet {
				w.WriteHeader(http.StatusInternalServerError)
				return true
			}
			return false
		}, nil},
		{"another sha256", func(n int, w http.ResponseWriter, r *http.Request) bool {
			w.Header().Set("X-Linked-Etag", `"`+sumOf(v1)+`"`)
			return false
		}, httpsrc.ErrDigest},
	} {
		for _, dest := range []string{"cache", "-m"} {
			t.Run(strings.ReplaceAll(c.name, " ", "_")+"/"+dest, func(t *testing.T) {
				cache := t.TempDir()
				t.Setenv("LLAMA_CACHE", cache)
				local, m := filepath.Join(cache, "model.gguf"), ""
				if dest == "-m" {
					local = filepath.Join(t.TempDir(), "mine.gguf")
					m = local
				}
				if err := os.WriteFile(local, v1, 0o644); err != nil {
					t.Fatal(err)
				}
				if err := os.WriteFile(local+".etag", []byte(`"v1"`), 0o644); err != nil {
					t.Fatal(err)
				}
				s := &dlServer{data: v2, etag: `"v2"`, hook: c.hook}
				srv := serve(t, s)
				_, err := httpsrc.Download(context.Background(), srv.URL+"/model.gguf", m, httpsrc.Options{Retries: -1})
				if err == nil || c.want != nil && !errors.Is(err, c.want) {
					t.Fatalf("want the download to fail (%v): %v", c.want, err)
				}
				t.Logf("%v", err)
				checkFile(t, local, v1)
				if b, err := os.ReadFile(local + ".etag"); err != nil || string(b) != `"v1"` {
					t.Errorf("the old file's ETag: %q %v", b, err)
				}
			})
		}
	}
	t.Run("directory", func(t *testing.T) {
		s := &dlServer{data: v2, etag: `"v2"`}
		srv := serve(t, s)
		cache := t.TempDir()
		t.Setenv("LLAMA_CACHE", cache)
		for _, dir := range []string{filepath.Join(cache, "model.gguf"), filepath.Join(t.TempDir(), "mine.gguf")} {
			if err := os.Mkdir(dir, 0o755); err != nil {
				t.Fatal(err)
			}
			m := ""
			if !strings.HasPrefix(dir, cache) {
				m = dir
			}
			_, err := httpsrc.Download(context.Background(), srv.URL+"/model.gguf", m, httpsrc.Options{Retries: -1})
			if !errors.Is(err, httpsrc.ErrDestination) || !strings.Contains(err.Error(), dir) || !strings.Contains(err.Error(), "directory") {
				t.Fatalf("a directory at %s: %v", dir, err)
			}
			if st, err := os.Stat(dir); err != nil || !st.IsDir() {
				t.Fatalf("the directory at %s: %v", dir, err)
			}
		}
		if n := s.getCount(); n != 0 {
			t.Errorf("%d GETs for a destination that cannot take the file", n)
		}
	})
}

// A URL whose file name would leave the cache directory is refused
// before any request, and nothing is written or removed beside the cache.
func TestDownloadNames(t *testing.T) {
	s := &dlServer{data: modelBytes(t, 1), etag: `"v1"`}
	srv := serve(t, s)
	parent := t.TempDir()
	cache := filepath.Join(parent, "cache")
	if err := os.Mkdir(cache, 0o755); err != nil {
		t.Fatal(err)
	}
	// an empty directory beside the cache, as a name could reach it
	if err := os.Mkdir(filepath.Join(parent, "other"), 0o755); err != nil {
		t.Fatal(err)
	}
	t.Setenv("LLAMA_CACHE", cache)
	for _, p := range []string{"/m/..", "/m/%2e%2e", "/m/%2E%2E", "/m/.", "/m/", "/m/..%2fother", "/m/a%2Fb.gguf", "/m/a%5Cb.gguf", "/m/%2e%2e%5cother", "/m/a%00.gguf", "/m/..."} {
		_, err := httpsrc.Download(context.Background(), srv.URL+p, "", httpsrc.Options{})
		if !errors.Is(err, httpsrc.ErrURL) {
			t.Errorf("%s: %v", p, err)
			continue
		}
		if _, err := httpsrc.CachePath(srv.URL + p); !errors.Is(err, httpsrc.ErrURL) {
			t.Errorf("CachePath %s: %v", p, err)
		}
		t.Logf("%s: %v", p, err)
	}
	if got := cacheFiles(t, parent); fmt.Sprint(got) != "[cache other]" {
		t.Errorf("beside the cache: %v", got)
	}
	if got := cacheFiles(t, cache); len(got) != 0 {
		t.Errorf("in the cache: %v", got)
	}
	if n := len(s.requests()); n != 0 {
		t.Errorf("%d requests: %v", n, s.requests())
	}
	// an encoded name that is a file's is taken, decoded
	if p, err := httpsrc.CachePath(srv.URL + "/m/model%20q4.gguf?download=true#x"); err != nil || p != filepath.Join(cache, "model q4.gguf") {
		t.Errorf("CachePath: %s %v", p, err)
	}
}

// symlink makes a symbolic link, or skips the test where the system
// will not.
func symlink(t *testing.T, target, link string) {
	t.Helper()
	if err := os.Symlink(target, link); err != nil {
		t.Skipf("no symbolic links here: %v", err)
	}
}

// A symbolic link where the partial file goes is refused, its target
// untouched; links where the side files go are replaced, never followed.
func TestDownloadSymlinks(t *testing.T) {
	data := modelBytes(t, 1)
	s := &dlServer{data: data, etag: `"v1"`}
	srv := serve(t, s)
	outside := t.TempDir()
	victim := filepath.Join(outside, "victim")
	keep := []byte("precious, not a model")
	if err := os.WriteFile(victim, keep, 0o644); err != nil {
		t.Fatal(err)
	}
	untouched := func() {
		t.Helper()
		if b, err := os.ReadFile(victim); err != nil || !bytes.Equal(b, keep) {
			t.Fatalf("the link's target was written: %q %v", b, err)
		}
	}

	cache := t.TempDir()
	t.Setenv("LLAMA_CACHE", cache)
	local := filepath.Join(cache, "model.gguf")
	symlink(t, victim, local+".downloadInProgress")
	_, err := httpsrc.Download(context.Background(), srv.URL+"/model.gguf", "", httpsrc.Options{Retries: -1})
	if !errors.Is(err, httpsrc.ErrDestination) || !strings.Contains(err.Error(), "symbolic link") {
		t.Fatalf("a link at the partial file: %v", err)
	}
	untouched()

	cache = t.TempDir()
	t.Setenv("LLAMA_CACHE", cache)
	local = filepath.Join(cache, "model.gguf")
	for _, side := range []string{".etag", ".sha256", ".downloadInProgress.etag"} {
		symlink(t, victim, local+side)
	}
	if _, err := httpsrc.Download(context.Background(), srv.URL+"/model.gguf", "", httpsrc.Options{Retries: -1}); err != nil {
		t.Fatal(err)
	}
	untouched()
	checkFile(t, local, data)
	for _, side := range []string{".etag", ".sha256"} {
		if st, err := os.Lstat(local + side); err != nil || !st.Mode().IsRegular() {
			t.Errorf("%s: %v %v", side, st, err)
		}
	}
}

// A resume never splices two versions of the file: a 206 whose ETag is
// not the partial file's starts the file again, as does a partial file
// under a weak ETag (RFC 9110: no If-Range with it), even from servers
// that ignore If-Range.
func TestDownloadNeverSplices(t *testing.T) {
	v1, v2 := modelBytes(t, 1), modelBytes(t, 2)
	if len(v1) != len(v2) {
		t.Fatal("the versions differ in size")
	}
	for _, c := range []struct {
		name             string
		etag1, etag2     string
		wantRangeRequest bool
	}{
		{"new ETag", `"v1"`, `"v2"`, true},
		{"weak ETag", `W/"w"`, `W/"w"`, false},
	} {
		t.Run(strings.ReplaceAll(c.name, " ", "_"), func(t *testing.T) {
			cache := t.TempDir()
			t.Setenv("LLAMA_CACHE", cache)
			s := &dlServer{data: v1, etag: c.etag1}
			s.hook = func(n int, w http.ResponseWriter, r *http.Request) bool {
				if n == 1 {
					cutAt(w, v1, c.etag1, len(v1)/2)
					return true
				}
				// a server that ignores If-Range: its range of what it
				// has now
				r.Header.Del("If-Range")
				return false
			}
			srv := serve(t, s)
			url := srv.URL + "/model.gguf"
			if _, err := httpsrc.Download(context.Background(), url, "", httpsrc.Options{Retries: -1}); err == nil {
				t.Fatal("the cut download succeeded")
			}
			s.set(v2, c.etag2)
			if _, err := httpsrc.Download(context.Background(), url, "", httpsrc.Options{Retries: -1}); err != nil {
				t.Fatal(err)
			}
			checkFile(t, filepath.Join(cache, "model.gguf"), v2)
			log := s.requests()
			ranged := false
			for _, l := range log[1:] {
				ranged = ranged || strings.Contains(l, "bytes=")
			}
			if ranged != c.wantRangeRequest || log[len(log)-1] != "GET" {
				t.Errorf("requests: %v", log)
			}
			if b, _ := os.ReadFile(filepath.Join(cache, "model.gguf.sha256")); !strings.HasPrefix(string(b), sumOf(v2)) {
				t.Errorf("the kept sha256: %q", b)
			}
		})
	}
}

// Bodies with no length (chunked, or ended by the connection's close)
// are taken when they end at the end the GGUF's header implies; a cut one
// is resumed; a body that runs past the announced length, or past the
// header's end, is refused with nothing written past that end.
func TestDownloadLengths(t *testing.T) {
	data := modelBytes(t, 1)
	chunked := func(body []byte) func(int, http.ResponseWriter, *http.Request) bool {
		return func(n int, w http.ResponseWriter, r *http.Request) bool {
			if r.Method != http.MethodGet || r.Header.Get("Range") != "" {
				return false
			}
			w.Header().Set("ETag", `"v1"`)
			w.WriteHeader(http.StatusOK)
			http.NewResponseController(w).Flush() // no Content-Length: chunked
			w.Write(body)
			return true
		}
	}
	closed := func(cut int) func(int, http.ResponseWriter, *http.Request) bool {
		return func(n int, w http.ResponseWriter, r *http.Request) bool {
			if r.Method != http.MethodGet || r.Header.Get("Range") != "" {
				return false
			}
			conn, buf, err := http.NewResponseController(w).Hijack()
			if err != nil {
				return true
			}
			fmt.Fprintf(buf, "HTTP/1.1 200 OK\r\nETag: \"v1\"\r\nConnection: close\r\n\r\n")
			buf.Write(data[:cut])
			buf.Flush()
			conn.Close()
			return true
		}
	}
	// a range whose body runs on past the file's end
	longRange := func(n int, w http.ResponseWriter, r *http.Request) bool {
		if n == 1 {
			cutAt(w, data, `"v1"`, len(data)/2)
			return true
		}
		w.Header().Set("ETag", `"v1"`)
		w.Header().Set("Content-Range", fmt.Sprintf("bytes %d-%d/%d", len(data)/2, len(data)-1, len(data)))
		w.WriteHeader(http.StatusPartialContent)
		http.NewResponseController(w).Flush()
		w.Write(data[len(data)/2:])
		w.Write(bytes.Repeat([]byte{0xee}, 3<<20))
		return true
	}
	for _, c := range []struct {
		name      string
		hook      func(int, http.ResponseWriter, *http.Request) bool
		gets      int    // GETs of a download that succeeds
		want      string // else its error says this
		announced bool   // the body's length is announced
	}{
		{"chunked", chunked(data), 1, "", false},
		{"close-delimited", closed(len(data)), 1, "", false},
		{"close-delimited cut", closed(len(data) / 3), 2, "", false},
		{"chunked past the header's end", chunked(append(append([]byte{}, data...), make([]byte, 64)...)), 0, "past the", false},
		{"chunked not a GGUF", chunked([]byte("<html>hello</html>")), 0, "no GGUF", false},
		{"range past the file's end", longRange, 0, "runs past", true},
	} {
		t.Run(strings.ReplaceAll(c.name, " ", "_"), func(t *testing.T) {
			cache := t.TempDir()
			t.Setenv("LLAMA_CACHE", cache)
			s := &dlServer{data: data, etag: `"v1"`, hook: c.hook}
			srv := serve(t, s)
			var most atomic.Int64
			o := httpsrc.Options{Retries: 1, Backoff: time.Millisecond, Progress: func(_ string, done, _ int64) {
				if done > most.Load() {
					most.Store(done)
				}
			}}
			if c.name == "range past the file's end" {
				o.Retries = -1
				if _, err := httpsrc.Download(context.Background(), srv.URL+"/model.gguf", "", o); err == nil {
					t.Fatal("the cut download succeeded")
				}
			}
			_, err := httpsrc.Download(context.Background(), srv.URL+"/model.gguf", "", o)
			if c.want == "" {
				if err != nil {
					t.Fatal(err)
				}
				checkFile(t, filepath.Join(cache, "model.gguf"), data)
				if n := s.getCount(); n != c.gets {
					t.Errorf("%d GETs, want %d: %v", n, c.gets, s.requests())
				}
			} else {
				if err == nil || !strings.Contains(err.Error(), c.want) {
					t.Fatalf("want an error saying %q: %v", c.want, err)
				}
				t.Logf("%v", err)
				if got := cacheFiles(t, cache); len(got) != 0 {
					t.Errorf("left in the cache: %v", got)
				}
			}
			// (a body of no announced length has no end to hold it to
			// before the GGUF's header is all there)
			if m := most.Load(); m > int64(len(data)) && c.announced {
				t.Errorf("%d bytes written, past the file's %d", m, len(data))
			}
		})
	}
}

// Where the server names the content's sha256 (X-Linked-Etag, on the
// answer or on the redirect that led to it; an ETag of 64 hex digits),
// the download is hashed as it comes, a resumed one from the part on
// disk, and a different sum is refused with nothing left. The sum is
// kept beside the file, and VerifyDownload checks the file against it.
func TestDownloadSHA256(t *testing.T) {
	data := modelBytes(t, 1)
	right, wrong := sumOf(data), sumOf(modelBytes(t, 2))
	// hub: /resolve/ redirects to /cdn/ with X-Linked-Etag, as the
	// Hugging Face Hub does for an LFS file
	hub := func(linked string) func(int, http.ResponseWriter, *http.Request) bool {
		return func(n int, w http.ResponseWriter, r *http.Request) bool {
			if strings.HasPrefix(r.URL.Path, "/resolve/") {
				w.Header().Set("X-Linked-Etag", `"`+linked+`"`)
				w.Header().Set("X-Linked-Size", strconv.Itoa(len(data)))
				http.Redirect(w, r, "/cdn/"+strings.TrimPrefix(r.URL.Path, "/resolve/"), http.StatusFound)
				return true
			}
			return false
		}
	}
	for _, c := range []struct {
		name, path, etag string
		hook             func(int, http.ResponseWriter, *http.Request) bool
		ok               bool
	}{
		{"linked, right", "/resolve/model.gguf", `"cdn-1"`, hub(right), true},
		{"linked, wrong", "/resolve/model.gguf", `"cdn-1"`, hub(wrong), false},
		{"ETag, right", "/model.gguf", `"` + right + `"`, nil, true},
		{"ETag unquoted, wrong", "/model.gguf", wrong, nil, false},
		{"ETag, wrong", "/model.gguf", `"` + strings.ToUpper(wrong) + `"`, nil, false},
	} {
		t.Run(strings.ReplaceAll(c.name, " ", "_"), func(t *testing.T) {
			cache := t.TempDir()
			t.Setenv("LLAMA_CACHE", cache)
			s := &dlServer{data: data, etag: c.etag, hook: c.hook}
			srv := serve(t, s)
			local, err := httpsrc.Download(context.Background(), srv.URL+c.path, "", httpsrc.Options{Retries: -1})
			if !c.ok {
				if !errors.Is(err, httpsrc.ErrDigest) || !strings.Contains(err.Error(), right) {
					t.Fatalf("want a sha256 mismatch naming the download's sum: %v", err)
				}
				t.Logf("%v", err)
				if got := cacheFiles(t, cache); len(got) != 0 {
					t.Errorf("left in the cache: %v", got)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			checkFile(t, local, data)
			if err := httpsrc.VerifyDownload(context.Background(), local); err != nil {
				t.Fatal(err)
			}
		})
	}

	t.Run("resumed", func(t *testing.T) {
		cache := t.TempDir()
		t.Setenv("LLAMA_CACHE", cache)
		s := &dlServer{data: data, etag: `"cdn-1"`}
		h := hub(right)
		s.hook = func(n int, w http.ResponseWriter, r *http.Request) bool {
			if h(n, w, r) {
				return true
			}
			if n == 2 {
				cutAt(w, data, `"cdn-1"`, len(data)/2)
				return true
			}
			return false
		}
		srv := serve(t, s)
		url := srv.URL + "/resolve/model.gguf"
		if _, err := httpsrc.Download(context.Background(), url, "", httpsrc.Options{Retries: -1}); err == nil {
			t.Fatal("the cut download succeeded")
		}
		local, err := httpsrc.Download(context.Background(), url, "", httpsrc.Options{Retries: -1})
		if err != nil {
			t.Fatal(err)
		}
		checkFile(t, local, data)
		if log := s.requests(); log[len(log)-1] != fmt.Sprintf(`GET bytes=%d- "cdn-1"`, len(data)/2) {
			t.Errorf("not resumed: %v", log)
		}
	})

	t.Run("VerifyDownload", func(t *testing.T) {
		cache := t.TempDir()
		t.Setenv("LLAMA_CACHE", cache)
		srv := serve(t, &dlServer{data: data, etag: `"v1"`})
		local, err := httpsrc.Download(context.Background(), srv.URL+"/model.gguf", "", httpsrc.Options{})
		if err != nil {
			t.Fatal(err)
		}
		if b, err := os.ReadFile(local + ".sha256"); err != nil || string(b) != right+"  model.gguf\n" {
			t.Fatalf("the kept sum: %q %v", b, err)
		}
		if err := httpsrc.VerifyDownload(context.Background(), local); err != nil {
			t.Fatal(err)
		}
		// one byte of a tensor changes: the size and the ETag stand
		f, err := os.OpenFile(local, os.O_RDWR, 0)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := f.WriteAt([]byte{0x55}, int64(len(data)-100)); err != nil {
			t.Fatal(err)
		}
		f.Close()
		err = httpsrc.VerifyDownload(context.Background(), local)
		if !errors.Is(err, httpsrc.ErrDigest) || !strings.Contains(err.Error(), local) {
			t.Fatalf("a changed file: %v", err)
		}
		t.Logf("%v", err)
		os.Remove(local + ".sha256")
		if err := httpsrc.VerifyDownload(context.Background(), local); !errors.Is(err, httpsrc.ErrNoDigest) {
			t.Fatalf("no kept sum: %v", err)
		}
	})
}

// A complete partial file that an earlier download did not rename (a
// crash between the last byte and the rename) is taken when the server
// answers its resume with 416 and the partial file's size and ETag; a 416
// of another ETag starts the file again.
func TestDownload416(t *testing.T) {
	v1, v2 := modelBytes(t, 1), modelBytes(t, 2)
	for _, c := range []struct {
		name string
		etag string
		want []byte
	}{
		{"same ETag", `"v1"`, v1},
		{"another ETag", `"v2"`, v2},
	} {
		t.Run(strings.ReplaceAll(c.name, " ", "_"), func(t *testing.T) {
			cache := t.TempDir()
			t.Setenv("LLAMA_CACHE", cache)
			local := filepath.Join(cache, "model.gguf")
			if err := os.WriteFile(local+".downloadInProgress", v1, 0o644); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(local+".downloadInProgress.etag", []byte(`"v1"`), 0o644); err != nil {
				t.Fatal(err)
			}
			s := &dlServer{data: c.want, etag: c.etag}
			s.hook = func(n int, w http.ResponseWriter, r *http.Request) bool {
				if r.Header.Get("Range") != "" {
					// a server that ignores If-Range
					w.Header().Set("ETag", c.etag)
					w.Header().Set("Content-Range", fmt.Sprintf("bytes */%d", len(c.want)))
					w.WriteHeader(http.StatusRequestedRangeNotSatisfiable)
					return true
				}
				return false
			}
			srv := serve(t, s)
			if _, err := httpsrc.Download(context.Background(), srv.URL+"/model.gguf", "", httpsrc.Options{Retries: -1}); err != nil {
				t.Fatal(err)
			}
			checkFile(t, local, c.want)
			if got := cacheFiles(t, cache); fmt.Sprint(got) != "[model.gguf model.gguf.etag model.gguf.sha256]" {
				t.Errorf("the cache holds %v", got)
			}
			t.Logf("requests: %v", s.requests())
		})
	}
}

// A download whose body stalls, or whose resume gets no answer in time,
// ends with that deadline, keeping what it has for the next download to
// resume.
func TestDownloadDeadlines(t *testing.T) {
	data := modelBytes(t, 1)
	half := len(data) / 2
	for _, c := range []struct {
		name     string
		cutFirst bool // a download cut half way comes first
		o        httpsrc.Options
		hook     func(n int, w http.ResponseWriter, r *http.Request) bool
		want     string
	}{
		{"body stalls", false, httpsrc.Options{Retries: -1, Timeout: 200 * time.Millisecond}, func(n int, w http.ResponseWriter, r *http.Request) bool {
			if n == 1 {
				stall := make(chan struct{}) // never closed: the body stops here
				holdAt(w, r, data, `"v1"`, half, make(chan struct{}), stall)
				return true
			}
			return false
		}, "stalled"},
		{"no answer", true, httpsrc.Options{Retries: -1, HeaderTimeout: 200 * time.Millisecond}, func(n int, w http.ResponseWriter, r *http.Request) bool {
			switch n {
			case 1:
				cutAt(w, data, `"v1"`, half)
				return true
			case 2:
				<-r.Context().Done() // no answer
				return true
			}
			return false
		}, "no answer"},
		// a body below the rate floor ends at once, not after every retry,
		// and keeps what came for the next run
		{"body trickles", false, httpsrc.Options{MinRate: 64 << 10, RateWindow: 200 * time.Millisecond}, func(n int, w http.ResponseWriter, r *http.Request) bool {
			if n == 1 {
				w.Header().Set("ETag", `"v1"`)
				w.Header().Set("Content-Length", strconv.Itoa(len(data)))
				w.Write(data[:half])
				for i := half; i < len(data); i++ {
					http.NewResponseController(w).Flush()
					select {
					case <-r.Context().Done():
						return true
					case <-time.After(20 * time.Millisecond):
					}
					w.Write(data[i : i+1])
				}
				return true
			}
			return false
		}, "below the floor"},
	} {
		t.Run(strings.ReplaceAll(c.name, " ", "_"), func(t *testing.T) {
			cache := t.TempDir()
			t.Setenv("LLAMA_CACHE", cache)
			s := &dlServer{data: data, etag: `"v1"`, hook: c.hook}
			srv := serve(t, s)
			url := srv.URL + "/model.gguf"
			if c.cutFirst {
				if _, err := httpsrc.Download(context.Background(), url, "", httpsrc.Options{Retries: -1}); err == nil {
					t.Fatal("the cut download succeeded")
				}
			}
			_, err := httpsrc.Download(context.Background(), url, "", c.o)
			if err == nil || !strings.Contains(err.Error(), c.want) || !strings.Contains(err.Error(), url) {
				t.Fatalf("want %q, naming %s: %v", c.want, url, err)
			}
			t.Logf("%v", err)
			if got := cacheFiles(t, cache); fmt.Sprint(got) != "[model.gguf.downloadInProgress model.gguf.downloadInProgress.etag]" {
				t.Fatalf("left %v", got)
			}
			if _, err := httpsrc.Download(context.Background(), url, "", httpsrc.Options{Retries: -1}); err != nil {
				t.Fatal(err)
			}
			checkFile(t, filepath.Join(cache, "model.gguf"), data)
			if log := s.requests(); c.name == "body trickles" && len(log) != 2 {
				t.Errorf("the slow body was asked for again: %v", log)
			} else if log[len(log)-1][:len("GET bytes=")] != "GET bytes=" || !strings.HasSuffix(log[len(log)-1], `- "v1"`) {
				t.Errorf("not resumed: %v", log)
			}
		})
	}
}

// A panic of the caller's progress function ends the download with an
// error naming the URL, and keeps what came.
func TestDownloadProgressPanics(t *testing.T) {
	data := modelBytes(t, 1)
	cache := t.TempDir()
	t.Setenv("LLAMA_CACHE", cache)
	srv := serve(t, &dlServer{data: data, etag: `"v1"`})
	url := srv.URL + "/model.gguf"
	_, err := httpsrc.Download(context.Background(), url, "", httpsrc.Options{Progress: func(string, int64, int64) { panic("bar broke") }})
	if err == nil || !strings.Contains(err.Error(), "panicked: bar broke") || !strings.Contains(err.Error(), url) {
		t.Fatalf("a panicking Progress: %v", err)
	}
	if _, err := httpsrc.Download(context.Background(), url, "", httpsrc.Options{}); err != nil {
		t.Fatal(err)
	}
	checkFile(t, filepath.Join(cache, "model.gguf"), data)
}

// What an interrupted download leaves is resumed, never taken for a
// finished file: a process killed mid-body, a download cancelled
// mid-body, a download cancelled while it waits for another.
func TestDownloadInterrupted(t *testing.T) {
	data := modelBytes(t, 1)
	half := len(data) / 2
	t.Run("killed", func(t *testing.T) {
		cache := t.TempDir()
		t.Setenv("LLAMA_CACHE", cache)
		sent, release := make(chan struct{}), make(chan struct{})
		t.Cleanup(func() { close(release) })
		s := &dlServer{data: data, etag: `"v1"`}
		s.hook = func(n int, w http.ResponseWriter, r *http.Request) bool {
			if n == 1 {
				holdAt(w, r, data, `"v1"`, half, sent, release)
				return true
			}
			return false
		}
		srv := serve(t, s)
		url := srv.URL + "/model.gguf"
		c := startChild(t, url, cache, half)
		if line := c.next(); line != fmt.Sprintf("have %d", half) {
			t.Fatalf("the child: %q", line)
		}
		c.cmd.Process.Kill()
		c.cmd.Wait()
		if got := cacheFiles(t, cache); fmt.Sprint(got) != "[model.gguf.downloadInProgress model.gguf.downloadInProgress.etag]" {
			t.Fatalf("the killed download left %v", got)
		}
		local, err := httpsrc.Download(context.Background(), url, "", httpsrc.Options{Retries: -1})
		if err != nil {
			t.Fatal(err)
		}
		checkFile(t, local, data)
		if log := s.requests(); log[len(log)-1] != fmt.Sprintf(`GET bytes=%d- "v1"`, half) {
			t.Errorf("not resumed: %v", log)
		}
		if err := httpsrc.VerifyDownload(context.Background(), local); err != nil {
			t.Error(err)
		}
	})

	t.Run("cancelled", func(t *testing.T) {
		cache := t.TempDir()
		t.Setenv("LLAMA_CACHE", cache)
		sent, release := make(chan struct{}), make(chan struct{})
		t.Cleanup(func() { close(release) })
		s := &dlServer{data: data, etag: `"v1"`}
		s.hook = func(n int, w http.ResponseWriter, r *http.Request) bool {
			if n == 1 {
				holdAt(w, r, data, `"v1"`, half, sent, release)
				return true
			}
			return false
		}
		srv := serve(t, s)
		url := srv.URL + "/model.gguf"
		ctx, cancel := context.WithCancel(context.Background())
		var once sync.Once
		_, err := httpsrc.Download(ctx, url, "", httpsrc.Options{Retries: -1, Progress: func(_ string, done, _ int64) {
			if done >= int64(half) {
				once.Do(cancel)
			}
		}})
		if !errors.Is(err, context.Canceled) {
			t.Fatalf("want the cancel: %v", err)
		}
		if got := cacheFiles(t, cache); fmt.Sprint(got) != "[model.gguf.downloadInProgress model.gguf.downloadInProgress.etag]" {
			t.Fatalf("the cancelled download left %v", got)
		}
		local, err := httpsrc.Download(context.Background(), url, "", httpsrc.Options{Retries: -1})
		if err != nil {
			t.Fatal(err)
		}
		checkFile(t, local, data)
		if log := s.requests(); log[len(log)-1] != fmt.Sprintf(`GET bytes=%d- "v1"`, half) {
			t.Errorf("not resumed: %v", log)
		}
	})

	t.Run("cancelled while waiting", func(t *testing.T) {
		cache := t.TempDir()
		t.Setenv("LLAMA_CACHE", cache)
		sent, release := make(chan struct{}), make(chan struct{})
		var freed sync.Once
		free := func() { freed.Do(func() { close(release) }) }
		t.Cleanup(free)
		s := &dlServer{data: data, etag: `"v1"`}
		s.hook = func(n int, w http.ResponseWriter, r *http.Request) bool {
			if n == 1 {
				holdAt(w, r, data, `"v1"`, half, sent, release)
				return true
			}
			return false
		}
		srv := serve(t, s)
		url := srv.URL + "/model.gguf"
		first := make(chan error, 1)
		go func() {
			_, err := httpsrc.Download(context.Background(), url, "", httpsrc.Options{Retries: -1})
			first <- err
		}()
		<-sent
		ctx, cancel := context.WithCancel(context.Background())
		waited := false
		_, err := httpsrc.Download(ctx, url, "", httpsrc.Options{Retries: -1, Waiting: func(string, string) {
			waited = true
			cancel()
		}})
		if !waited || !errors.Is(err, context.Canceled) || !strings.Contains(err.Error(), "waiting for another download") {
			t.Fatalf("the second download (waited: %v): %v", waited, err)
		}
		t.Logf("%v", err)
		free()
		if err := <-first; err != nil {
			t.Fatalf("the first download: %v", err)
		}
		checkFile(t, filepath.Join(cache, "model.gguf"), data)
		if n := s.getCount(); n != 1 {
			t.Errorf("%d GETs: %v", n, s.requests())
		}
	})
}
