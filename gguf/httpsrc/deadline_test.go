package httpsrc_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net/http"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/ggload/ggload/gguf/httpsrc"
)

// A server that never sends an answer's headers fails the request after
// the header timeout, asked once: its wait is not multiplied by the
// retries. Unset, the header timeout is Timeout.
func TestHeaderTimeoutIsNotRetried(t *testing.T) {
	for _, o := range []httpsrc.Options{
		{HeaderTimeout: 150 * time.Millisecond, Timeout: time.Minute},
		{Timeout: 150 * time.Millisecond},
	} {
		o.Retries, o.Backoff = 3, time.Millisecond
		goroutines := runtime.NumGoroutine()
		fs := &fileServer{fault: func(_ int64, w http.ResponseWriter, r *http.Request) bool {
			<-r.Context().Done()
			return true
		}}
		srv, open := served(t, fs, false)
		_, err := httpsrc.Open(context.Background(), srv.URL+"/model.gguf", o)
		var he *httpsrc.Error
		if !errors.As(err, &he) || !strings.Contains(err.Error(), "no answer within 150ms") || !strings.Contains(err.Error(), srv.URL) {
			t.Fatalf("want an error naming the URL and the header timeout: %v", err)
		}
		if n := fs.hits.Load(); n != 1 {
			t.Fatalf("the server was asked %d times", n)
		}
		if n := settle(open.Load, 0); n != 0 {
			t.Fatalf("%d connections left open", n)
		}
		srv.Close()
		if n := settle(func() int64 { return int64(runtime.NumGoroutine()) }, int64(goroutines)); n > int64(goroutines) {
			t.Fatalf("%d goroutines, %d before", n, goroutines)
		}
		t.Log(err)
	}
}

// trickle answers a range request with its headers, then a few bytes at a
// time, each within the stall timeout, far below the rate floor; it gives
// up after a while and drops the connection.
func trickle(data []byte) func(int64, http.ResponseWriter, *http.Request) bool {
	return func(_ int64, w http.ResponseWriter, r *http.Request) bool {
		var a, b int64
		if _, err := fmt.Sscanf(r.Header.Get("Range"), "bytes=%d-%d", &a, &b); err != nil {
			a, b = 0, int64(len(data))-1
			w.Header().Set("Content-Length", fmt.Sprint(len(data)))
			w.WriteHeader(http.StatusOK)
		} else {
			b = min(b, int64(len(data))-1)
			w.Header().Set("Content-Range", fmt.Sprintf("bytes %d-%d/%d", a, b, len(data)))
			w.Header().Set("Content-Length", fmt.Sprint(b-a+1))
			w.WriteHeader(http.StatusPartialContent)
		}
		rc := http.NewResponseController(w)
		give := time.After(3 * time.Second)
		for pos := a; pos <= b; pos += 16 {
			w.Write(data[pos:min(pos+16, b+1)])
			rc.Flush()
			select {
			case <-r.Context().Done():
				return true
			case <-give:
				conn, _, err := rc.Hijack()
				if err == nil {
					conn.Close()
				}
				return true
			case <-time.After(10 * time.Millisecond):
			}
		}
		return true
	}
}

// A body that moves, but slower than the floor, is ended with an error
// that gives the rate measured and the floor: by range requests, from a
// server without ranges, and in a download.
func TestSlowBodyIsEnded(t *testing.T) {
	data := bytes.Repeat([]byte("slow"), 64<<10)
	o := httpsrc.Options{MinRate: 32 << 10, RateWindow: 200 * time.Millisecond, Timeout: 5 * time.Second, Retries: -1}
	for _, c := range []string{"ranges", "stream", "download"} {
		t.Run(c, func(t *testing.T) {
			goroutines := runtime.NumGoroutine()
			fs := &fileServer{data: data, etag: `"v1"`}
			ranges := trickle(data)
			fs.fault = func(n int64, w http.ResponseWriter, r *http.Request) bool {
				if c == "stream" {
					r.Header.Del("Range")
				}
				return ranges(n, w, r)
			}
			srv, open := served(t, fs, false)
			var err error
			if c == "download" {
				t.Setenv("LLAMA_CACHE", t.TempDir())
				_, err = httpsrc.Download(context.Background(), srv.URL+"/model.gguf", "", o)
			} else {
				_, err = httpsrc.Open(context.Background(), srv.URL+"/model.gguf", o)
			}
			if err == nil || !strings.Contains(err.Error(), "too slow") || !strings.Contains(err.Error(), "B/s over the last") || !strings.Contains(err.Error(), "below the floor of 32.0 KiB/s") {
				t.Fatalf("want an error with the rate measured and the floor: %v", err)
			}
			t.Log(err)
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

// A stream whose reader waits between two reads longer than the stall
// timeout and the rate window is not ended for it: the watch covers the
// reads alone.
func TestStreamWaitsForItsReader(t *testing.T) {
	data := bytes.Repeat([]byte("wait"), 1<<20)
	fs := &fileServer{data: data, etag: `"v1"`}
	ignoreRanges(fs, nil)
	srv, _ := served(t, fs, false)
	o := httpsrc.Options{Timeout: 100 * time.Millisecond, MinRate: 1 << 20, RateWindow: 100 * time.Millisecond, HeaderWindow: 4096}
	r, err := httpsrc.Open(context.Background(), srv.URL+"/model.gguf", o)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	buf := make([]byte, 64<<10)
	for i := range 3 {
		if _, err := r.ReadAt(buf, int64(i*len(buf))); err != nil {
			t.Fatalf("read %d: %v", i, err)
		}
		if !bytes.Equal(buf, data[i*len(buf):(i+1)*len(buf)]) {
			t.Fatalf("read %d differs from the file", i)
		}
		time.Sleep(300 * time.Millisecond) // the reader busy elsewhere
	}
	if n := r.Requests(); n != 1 {
		t.Fatalf("%d requests: the stream was asked for again", n)
	}
}
