package httpsrc_test

import (
	"context"
	"net/http"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/ggload/ggload/gguf/httpsrc"
	"github.com/ggload/ggload/lab/testenv"
	"github.com/ggload/ggload/loader"
)

// panicky is a caller's transport that panics for the second part.
type panicky struct{ *http.Transport }

func (p panicky) RoundTrip(r *http.Request) (*http.Response, error) {
	if strings.Contains(r.URL.Path, "-00002-of-") {
		panic("transport broke")
	}
	return p.Transport.RoundTrip(r)
}

// A panic of the caller's code, Options.Progress or the caller's client,
// called on the goroutines that open a split model's parts and on the
// loader's readers, is an error naming the URL (redacted), not the end of
// the process; nothing is left open.
func TestUserPanicIsAnError(t *testing.T) {
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
	srv, open := served(t, &fileServer{fault: func(_ int64, w http.ResponseWriter, r *http.Request) bool {
		mux.ServeHTTP(w, r)
		return true
	}}, false)
	url := strings.Replace(srv.URL, "http://", "http://user:s3cr3tpw@", 1) + "/" + filepath.Base(paths[0])
	for _, when := range []string{"opening a part", "loading", "the client opening a part"} {
		t.Run(strings.ReplaceAll(when, " ", "_"), func(t *testing.T) {
			goroutines := runtime.NumGoroutine()
			var armed atomic.Bool
			armed.Store(when == "opening a part")
			o := httpsrc.Options{Progress: func(u string, _, _ int64) {
				if armed.Load() && strings.Contains(u, "-00002-of-") {
					panic("progress bar broke")
				}
			}}
			want := "Options.Progress panicked: progress bar broke"
			if when == "the client opening a part" {
				o = httpsrc.Options{Client: &http.Client{Transport: panicky{&http.Transport{}}}}
				want = "opening it panicked: transport broke"
			}
			gm, err := httpsrc.OpenModel(context.Background(), url, o)
			if err == nil {
				armed.Store(true)
				err = loadAndCompare(t, rt, gm, testenv.OpenModel(t, paths[0]), loader.Options{Readers: 2})
				gm.Close()
			}
			msg := ""
			if err != nil {
				msg = err.Error()
			}
			if !strings.Contains(msg, want) || !strings.Contains(msg, "user:xxxxx@") || !strings.Contains(msg, "-00002-of-00003.gguf") || strings.Contains(msg, "s3cr3tpw") {
				t.Fatalf("want an error naming the redacted URL and the panic: %v", err)
			}
			t.Log(err)
			if o.Client != nil {
				o.Client.CloseIdleConnections() // the caller's pool, which it keeps
			}
			if n := settle(open.Load, 0); n != 0 {
				t.Fatalf("%d connections left open", n)
			}
			if n := settle(func() int64 { return int64(runtime.NumGoroutine()) }, int64(goroutines)); n > int64(goroutines) {
				t.Fatalf("%d goroutines, %d before", n, goroutines)
			}
		})
	}
}
