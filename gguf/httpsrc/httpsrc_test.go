package httpsrc_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ggload/ggload/ggml"
	"github.com/ggload/ggload/gguf"
	"github.com/ggload/ggload/gguf/httpsrc"
	"github.com/ggload/ggload/lab/synth"
	"github.com/ggload/ggload/lab/testenv"
	"github.com/ggload/ggload/loader"
	"github.com/ggload/ggload/place"
)

func TestMain(m *testing.M) { testenv.Main(m) }

var spec = synth.Spec{Layers: 3, Embd: 256, FF: 512, Heads: 4, Vocab: 300, Weights: ggml.TypeQ4_0, Embeddings: ggml.TypeQ8_0}

// fileServer serves one file by ranges (http.ServeContent: Range, If-Match,
// If-Range), with a fault when fault is set: it decides, for the n-th
// request (from 1), whether to misbehave, and does so itself.
type fileServer struct {
	data  []byte
	etag  string
	hits  atomic.Int64
	fault func(n int64, w http.ResponseWriter, r *http.Request) bool
}

func (s *fileServer) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	n := s.hits.Add(1)
	if s.fault != nil && s.fault(n, w, r) {
		return
	}
	w.Header().Set("ETag", s.etag)
	w.Header().Set("Accept-Ranges", "bytes")
	http.ServeContent(w, r, "model.gguf", time.Time{}, bytes.NewReader(s.data))
}

// served starts a loopback server (TLS when tls) for the file and tracks
// its open connections.
func served(t testing.TB, fs *fileServer, tls bool) (*httptest.Server, *atomic.Int64) {
	t.Helper()
	var open atomic.Int64
	srv := httptest.NewUnstartedServer(fs)
	srv.Config.ConnState = func(c net.Conn, st http.ConnState) {
		switch st {
		case http.StateNew:
			open.Add(1)
		case http.StateClosed, http.StateHijacked:
			open.Add(-1)
		}
	}
	if tls {
		srv.StartTLS()
	} else {
		srv.Start()
	}
	t.Cleanup(srv.Close)
	return srv, &open
}

// settle waits for a count to come down to want.
func settle(f func() int64, want int64) int64 {
	deadline := time.Now().Add(5 * time.Second)
	for time.Now().Before(deadline) && f() > want {
		time.Sleep(10 * time.Millisecond)
	}
	return f()
}

// loadAndCompare plans and loads the model onto the CPU and checks every
// tensor against the local file's bytes.
func loadAndCompare(t *testing.T, rt *ggml.Runtime, gm *gguf.Model, local *gguf.Model, o loader.Options) error {
	t.Helper()
	return loadOntoAndCompare(t, rt, gm, local, o, "none")
}

// loadOntoAndCompare loads the model onto the device and checks every
// tensor against the local file's bytes.
func loadOntoAndCompare(t *testing.T, rt *ggml.Runtime, gm *gguf.Model, local *gguf.Model, o loader.Options, device string) error {
	t.Helper()
	p, err := place.New(context.Background(), rt, gm, place.Params{DeviceNames: []string{device}, NoExtraBufts: true})
	if err != nil {
		return err
	}
	lm, err := loader.Load(context.Background(), p, o)
	if err != nil {
		return err
	}
	defer lm.Close()
	for _, w := range local.Weights {
		tn, ok := lm.Tensor(w.Name)
		if !ok {
			t.Fatalf("no tensor %s", w.Name)
		}
		got, err := tn.Bytes()
		if err != nil {
			t.Fatal(err)
		}
		want := make([]byte, w.Size)
		if _, err := local.Files[w.File].ReaderAt().ReadAt(want, w.Offset); err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(got, want) {
			t.Fatalf("tensor %s differs from the file", w.Name)
		}
	}
	return nil
}

// Over HTTPS from a loopback server: the plan is exactly the file's, from
// its header alone (a few requests, no tensor byte), and the load reads
// back identical weights with several readers at once.
func TestPlanAndLoadOverHTTPS(t *testing.T) {
	rt := testenv.Runtime(t)
	path := testenv.ModelFile(t, rt, spec)
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	local := testenv.OpenModel(t, path)
	fs := &fileServer{data: data, etag: `"v1"`}
	srv, open := served(t, fs, true)
	o := httpsrc.Options{Client: srv.Client(), HeaderWindow: 4096}
	gm, err := httpsrc.OpenModel(context.Background(), srv.URL+"/model.gguf", o)
	if err != nil {
		t.Fatal(err)
	}
	r := gm.Files[0].Source().Reader.(*httpsrc.Reader)
	if r.Received() >= int64(len(data)) || r.Requests() > 3 {
		t.Fatalf("the header took %d requests and %d bytes of %d", r.Requests(), r.Received(), len(data))
	}
	t.Logf("header: %d requests, %d bytes of %d", r.Requests(), r.Received(), len(data))
	for _, mode := range []place.LoadMode{place.LoadAuto, place.LoadNone} {
		params := place.Params{DeviceNames: []string{"none"}, NoExtraBufts: true}
		params.LoadMode = mode
		p, err := place.New(context.Background(), rt, gm, params)
		if err != nil {
			t.Fatal(err)
		}
		wp := place.Params{DeviceNames: []string{"none"}, NoExtraBufts: true}
		wp.LoadMode = place.LoadNone
		want, err := place.New(context.Background(), rt, local, wp)
		if err != nil {
			t.Fatal(err)
		}
		var a, b bytes.Buffer
		p.Report(&a, place.ReportOptions{})
		want.Report(&b, place.ReportOptions{})
		strip := func(s string) string {
			var out []string
			for _, l := range strings.Split(s, "\n") {
				if !strings.HasPrefix(l, "model ") && !strings.HasPrefix(l, "load mode ") {
					out = append(out, l)
				}
			}
			return strings.Join(out, "\n")
		}
		if strip(a.String()) != strip(b.String()) || p.LoadMode != place.LoadNone {
			t.Fatalf("%s: the plan over HTTPS differs from the file's:\n%s\nwant:\n%s", mode, a.String(), b.String())
		}
		// auto resolves as for a device without mmap, and says why
		if mode == place.LoadAuto && (p.Lazy != place.LazyOff || !strings.Contains(p.NoMmap, "is read through a reader")) {
			t.Errorf("auto over HTTPS: lazy %s, no mmap %q", p.Lazy, p.NoMmap)
		}
		// a mode asked for is no choice to explain
		if mode != place.LoadAuto && p.NoMmap != "" {
			t.Errorf("%s over HTTPS: no mmap %q, want none", mode, p.NoMmap)
		}
	}
	if err := loadAndCompare(t, rt, gm, local, loader.Options{Readers: 4}); err != nil {
		t.Fatal(err)
	}
	gm.Close()
	srv.Client().CloseIdleConnections()
	if n := settle(open.Load, 0); n != 0 {
		t.Fatalf("%d connections left open", n)
	}
}

// Servers that misbehave: each case ends in a correct load or an error
// naming the URL and the byte range (and the tensor, once the load has
// begun), with no goroutine or connection left behind.
func TestFaultyServers(t *testing.T) {
	rt := testenv.Runtime(t)
	path := testenv.ModelFile(t, rt, spec)
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	local := testenv.OpenModel(t, path)
	header := int64(local.Files[0].DataOffset)
	// the faults of phase device strike a load onto a GPU, whose lane reads
	// ahead (where the machine has one; CI's lavapipe)
	gpu := ""
	if gpus := testenv.GPUs(t); len(gpus) > 0 {
		gpu = gpus[0].Name()
	}
	status := func(code int) func(int64, http.ResponseWriter, *http.Request) bool {
		return func(_ int64, w http.ResponseWriter, _ *http.Request) bool { w.WriteHeader(code); return true }
	}
	// cut sends the headers of a good answer and part of its body, then
	// drops the connection (reset: with an RST)
	cut := func(reset bool) func(w http.ResponseWriter, r *http.Request) {
		return func(w http.ResponseWriter, r *http.Request) {
			var a, b int64
			if _, err := fmt.Sscanf(r.Header.Get("Range"), "bytes=%d-%d", &a, &b); err != nil {
				w.WriteHeader(http.StatusBadRequest)
				return
			}
			b = min(b, int64(len(data))-1)
			conn, buf, err := http.NewResponseController(w).Hijack()
			if err != nil {
				return
			}
			fmt.Fprintf(buf, "HTTP/1.1 206 Partial Content\r\nContent-Range: bytes %d-%d/%d\r\nContent-Length: %d\r\nETag: \"v1\"\r\n\r\n", a, b, len(data), b-a+1)
			buf.Write(data[a : a+(b-a+1)/2])
			buf.Flush()
			if tc, ok := conn.(*net.TCPConn); ok && reset {
				tc.SetLinger(0)
			}
			conn.Close()
		}
	}
	for _, c := range []struct {
		name  string
		fault func(n int64, w http.ResponseWriter, r *http.Request) bool
		ok    bool   // the load succeeds
		want  string // else the error says this
	}{
		{"correct", nil, true, ""},
		{"ignores ranges", func(_ int64, w http.ResponseWriter, _ *http.Request) bool {
			w.Header().Set("Content-Length", fmt.Sprint(len(data)))
			w.WriteHeader(http.StatusOK)
			w.Write(data)
			return true
		}, true, ""}, // read as one stream (norange_test.go)
		{"lies about the range", func(n int64, w http.ResponseWriter, r *http.Request) bool {
			if n == 1 {
				return false
			}
			w.Header().Set("Content-Range", fmt.Sprintf("bytes 0-9/%d", len(data)))
			w.Header().Set("ETag", `"v1"`)
			w.WriteHeader(http.StatusPartialContent)
			w.Write(data[:10])
			return true
		}, false, "Content-Range"},
		{"truncates once", func(n int64, w http.ResponseWriter, r *http.Request) bool {
			if n == 2 {
				cut(false)(w, r)
				return true
			}
			return false
		}, true, ""},
		{"truncates always", func(n int64, w http.ResponseWriter, r *http.Request) bool {
			if n > 1 {
				cut(false)(w, r)
				return true
			}
			return false
		}, false, "broke off"},
		{"resets mid-body", func(n int64, w http.ResponseWriter, r *http.Request) bool {
			if n > 1 {
				cut(true)(w, r)
				return true
			}
			return false
		}, false, "broke off"},
		{"stalls", func(n int64, w http.ResponseWriter, r *http.Request) bool {
			if n > 1 {
				select {
				case <-r.Context().Done():
				case <-time.After(3 * time.Second):
				}
				return true
			}
			return false
		}, false, "stalled"},
		{"redirects in a loop", func(n int64, w http.ResponseWriter, r *http.Request) bool {
			http.Redirect(w, r, "/again"+r.URL.Path, http.StatusFound)
			return true
		}, false, "redirects"},
		{"401", status(401), false, "HF_TOKEN"},
		{"403", status(403), false, "HF_TOKEN"},
		{"404", status(404), false, "404"},
		{"416", status(416), false, "416"},
		{"500 always", status(500), false, "500"},
		{"500 twice", func(n int64, w http.ResponseWriter, r *http.Request) bool {
			if n == 2 || n == 3 {
				w.WriteHeader(500)
				return true
			}
			return false
		}, true, ""},
		{"changes between requests", func(n int64, w http.ResponseWriter, r *http.Request) bool {
			if n == 1 {
				return false
			}
			w.Header().Set("ETag", `"v2"`)
			http.ServeContent(w, r, "model.gguf", time.Time{}, bytes.NewReader(data))
			return true
		}, false, "changed"},
		{"smaller than its header says", func(n int64, w http.ResponseWriter, r *http.Request) bool {
			w.Header().Set("ETag", `"v1"`)
			http.ServeContent(w, r, "model.gguf", time.Time{}, bytes.NewReader(data[:len(data)-1000]))
			return true
		}, false, "less than the GGUF's header implies"},
	} {
		phases := []string{"header", "data"}
		if gpu != "" {
			phases = append(phases, "device")
		}
		for _, phase := range phases {
			t.Run(strings.ReplaceAll(c.name, " ", "_")+"/"+phase, func(t *testing.T) {
				goroutines := runtime.NumGoroutine()
				fs := &fileServer{data: data, etag: `"v1"`, fault: c.fault}
				srv, open := served(t, fs, false)
				url := srv.URL + "/model.gguf"
				// the header in one request or in several: the faults of the
				// second and later requests strike the header's parse, or
				// the load's tensor reads
				o := httpsrc.Options{Timeout: 300 * time.Millisecond, Backoff: 10 * time.Millisecond, Retries: 2, HeaderWindow: header / 2}
				if phase != "header" {
					o.HeaderWindow = 1 << 20
				}
				loading := false
				gm, err := httpsrc.OpenModel(context.Background(), url, o)
				if err == nil {
					loading = true
					onto := "none"
					if phase == "device" {
						onto = gpu
					}
					err = loadOntoAndCompare(t, rt, gm, local, loader.Options{Readers: 2}, onto)
					gm.Close()
				}
				switch {
				case c.ok && err != nil:
					t.Fatalf("want a correct load: %v", err)
				case !c.ok && err == nil:
					t.Fatalf("the load succeeded")
				case !c.ok:
					msg := err.Error()
					if !strings.Contains(msg, url) || !strings.Contains(msg, "bytes") || !strings.Contains(msg, c.want) {
						t.Fatalf("want an error naming %s, a byte range and %q: %v", url, c.want, err)
					}
					if loading && !strings.Contains(msg, "tensor '") {
						t.Fatalf("a load's error does not name the tensor: %v", err)
					}
					t.Logf("%v", err)
				}
				if n := settle(open.Load, 0); n != 0 {
					t.Fatalf("%d connections left open", n)
				}
				srv.Close()
				if n := settle(func() int64 { return int64(runtime.NumGoroutine()) }, int64(goroutines)); n > int64(goroutines) {
					t.Fatalf("%d goroutines, %d before", n, goroutines)
				}
			})
		}
	}
}

// Split models: every part is found by its -0000k-of-0000N name and read
// at once.
func TestSplitOverHTTP(t *testing.T) {
	rt := testenv.Runtime(t)
	split := spec
	split.Splits = 3
	first := testenv.ModelFile(t, rt, split)
	paths, err := filepath.Glob(strings.Replace(first, "-00001-of-00003.gguf", "-0000?-of-00003.gguf", 1))
	if err != nil || len(paths) != 3 {
		t.Fatalf("the splits of %s: %v %v", first, paths, err)
	}
	mux := http.NewServeMux()
	for _, p := range paths {
		b, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		mux.Handle("/"+filepath.Base(p), &fileServer{data: b, etag: `"x"`})
	}
	srv := httptest.NewServer(mux)
	defer srv.Close()
	gm, err := httpsrc.OpenModel(context.Background(), srv.URL+"/"+filepath.Base(paths[0]), httpsrc.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer gm.Close()
	if len(gm.Files) != 3 {
		t.Fatalf("%d files", len(gm.Files))
	}
	splitLocal, err := gguf.OpenModel(paths[0])
	if err != nil {
		t.Fatal(err)
	}
	defer splitLocal.Close()
	if err := loadAndCompare(t, rt, gm, splitLocal, loader.Options{Readers: 3}); err != nil {
		t.Fatal(err)
	}
}

// Bad URLs are refused before any request.
func TestBadURLs(t *testing.T) {
	for _, u := range []string{"model.gguf", "example.com/m.gguf", "ftp://example.com/m.gguf", "http:///m.gguf", "file:///tmp/m.gguf"} {
		_, err := httpsrc.OpenModel(context.Background(), u, httpsrc.Options{})
		if !errors.Is(err, httpsrc.ErrURL) {
			t.Errorf("%s: %v", u, err)
		}
	}
}

// Plans of models of about 1,000, 10,000 and 100,000 tensors, from the
// file and from its URL: the time, and for the URL the requests the header
// takes (the goal: two, then the header's transfer) and the header bytes
// fetched.
func BenchmarkPlanTensors(b *testing.B) {
	rt := testenv.Runtime(b)
	for _, layers := range []int{111, 1111, 11112} {
		many := synth.Spec{Layers: layers, Embd: 32, FF: 32, Heads: 1, Vocab: 32}
		path := testenv.ModelFile(b, rt, many)
		data, err := os.ReadFile(path)
		if err != nil {
			b.Fatal(err)
		}
		fs := &fileServer{data: data, etag: `"m"`}
		srv, _ := served(b, fs, false)
		url := srv.URL + "/model.gguf"
		params := place.Params{DeviceNames: []string{"none"}}
		for _, from := range []string{"file", "url"} {
			b.Run(fmt.Sprintf("%dlayers/%s", layers, from), func(b *testing.B) {
				var requests, header int64
				tensors := 0
				for b.Loop() {
					var m *gguf.Model
					var err error
					if from == "file" {
						m, err = gguf.OpenModel(path)
					} else {
						m, err = httpsrc.OpenModel(context.Background(), url, httpsrc.Options{})
					}
					if err != nil {
						b.Fatal(err)
					}
					if _, err := place.New(context.Background(), rt, m, params); err != nil {
						b.Fatal(err)
					}
					tensors = len(m.Weights)
					if r, ok := m.Files[0].Source().Reader.(*httpsrc.Reader); ok {
						requests, header = r.Requests(), r.Received()
					}
					m.Close()
				}
				b.ReportMetric(float64(tensors), "tensors")
				if from == "url" {
					b.ReportMetric(float64(requests), "requests/op")
					b.ReportMetric(float64(header)/(1<<20), "header-MiB/op")
				}
			})
		}
	}
}

// A load onto a device reads a tensor's pieces over the network with
// several requests in flight, not one after another: each piece would
// otherwise wait a round trip. The server counts the requests it serves at
// once, answering each after a pause.
func TestDeviceLoadReadsAhead(t *testing.T) {
	rt := testenv.Runtime(t)
	gpus := testenv.GPUs(t)
	if len(gpus) == 0 {
		testenv.Missing(t, "gpu", "no GPU device to upload to (Vulkan on lavapipe: apt-get install mesa-vulkan-drivers)")
	}
	big := synth.Spec{Layers: 2, Embd: 1024, FF: 4096, Heads: 8, Vocab: 512, Weights: ggml.TypeF16}
	path := testenv.ModelFile(t, rt, big)
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	local := testenv.OpenModel(t, path)
	var now, most atomic.Int64
	fs := &fileServer{data: data, etag: `"v1"`}
	fs.fault = func(n int64, w http.ResponseWriter, r *http.Request) bool {
		k := now.Add(1)
		defer now.Add(-1)
		for m := most.Load(); k > m && !most.CompareAndSwap(m, k); m = most.Load() {
		}
		time.Sleep(5 * time.Millisecond)
		w.Header().Set("ETag", `"v1"`)
		http.ServeContent(w, r, "model.gguf", time.Time{}, bytes.NewReader(data))
		return true
	}
	srv, _ := served(t, fs, false)
	gm, err := httpsrc.OpenModel(context.Background(), srv.URL+"/model.gguf", httpsrc.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer gm.Close()
	// one lane, one reader: what is in flight at once is the lane's own
	if err := loadOntoAndCompare(t, rt, gm, local, loader.Options{Readers: 1}, gpus[0].Name()); err != nil {
		t.Fatal(err)
	}
	if m := most.Load(); m < 3 {
		t.Fatalf("at most %d requests in flight at once while the tensors went to %s: the pieces were read one after another", m, gpus[0].Name())
	}
	t.Logf("%s: up to %d requests in flight", gpus[0].Name(), most.Load())
}

// The token goes with every request as a bearer token: Options.Token, else
// $HF_TOKEN, as llama.cpp reads it; a download sends it too.
func TestTokenIsSent(t *testing.T) {
	rt := testenv.Runtime(t)
	path := testenv.ModelFile(t, rt, spec)
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	fs := &fileServer{data: data, etag: `"v1"`}
	fs.fault = func(_ int64, w http.ResponseWriter, r *http.Request) bool {
		if r.Header.Get("Authorization") != "Bearer hf_secret" {
			w.WriteHeader(http.StatusUnauthorized)
			return true
		}
		return false
	}
	srv, _ := served(t, fs, false)
	url := srv.URL + "/model.gguf"
	t.Setenv("HF_TOKEN", "")
	if _, err := httpsrc.OpenModel(context.Background(), url, httpsrc.Options{}); err == nil || !strings.Contains(err.Error(), "401") {
		t.Fatalf("without a token: %v", err)
	}
	m, err := httpsrc.OpenModel(context.Background(), url, httpsrc.Options{Token: "hf_secret"})
	if err != nil {
		t.Fatalf("Options.Token: %v", err)
	}
	local := testenv.OpenModel(t, path)
	if err := loadAndCompare(t, rt, m, local, loader.Options{}); err != nil {
		t.Fatalf("a load with the token: %v", err)
	}
	m.Close()
	t.Setenv("HF_TOKEN", "hf_secret")
	m, err = httpsrc.OpenModel(context.Background(), url, httpsrc.Options{})
	if err != nil {
		t.Fatalf("$HF_TOKEN: %v", err)
	}
	m.Close()
	t.Setenv("LLAMA_CACHE", t.TempDir())
	if _, err := httpsrc.Download(context.Background(), url, "", httpsrc.Options{}); err != nil {
		t.Fatalf("a download with $HF_TOKEN: %v", err)
	}
}

// Close ends a read still in flight (a load that stopped early leaves its
// read-ahead running) and keeps no connection, and no read starts after
// Close.
func TestReadInFlightAtClose(t *testing.T) {
	data := bytes.Repeat([]byte{7}, 1<<20)
	release, asked := make(chan struct{}), make(chan struct{}, 1)
	fs := &fileServer{data: data, etag: `"v1"`, fault: func(n int64, w http.ResponseWriter, r *http.Request) bool {
		if n >= 2 {
			asked <- struct{}{}
			<-release
		}
		return false
	}}
	srv, open := served(t, fs, false)
	var once sync.Once
	free := func() { once.Do(func() { close(release) }) }
	t.Cleanup(free) // before the server's own Close (cleanups run last first)
	r, err := httpsrc.Open(context.Background(), srv.URL+"/model.gguf", httpsrc.Options{HeaderWindow: 4096})
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() {
		buf := make([]byte, 64<<10)
		_, err := r.ReadAt(buf, int64(len(data)-len(buf))) // to the end: the body is drained and its connection reusable
		done <- err
	}()
	<-asked
	if err := r.Close(); err != nil {
		t.Fatal(err)
	}
	// the read ends at once, though the server has not answered yet
	select {
	case err := <-done:
		if err == nil || !strings.Contains(err.Error(), "canceled") {
			t.Fatalf("the read in flight: %v", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("Close did not end the read in flight")
	}
	free()
	if n := settle(open.Load, 0); n != 0 {
		t.Fatalf("%d connections left open after Close", n)
	}
	if _, err := r.ReadAt(make([]byte, 16), 1<<19); err == nil || !strings.Contains(err.Error(), "closed") {
		t.Fatalf("a read after Close: %v", err)
	}
}
