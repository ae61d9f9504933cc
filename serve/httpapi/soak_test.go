package httpapi_test

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"net/http"
	"os"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ggload/ggload/serve/httpapi"
)

// openFDs is the process's open file descriptors.
func openFDs() int {
	ents, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		return -1
	}
	return len(ents)
}

// soakRequests are the mixed requests of the soak: completions at once
// and streamed (some dropped half way), chat, tokenize, slots, props,
// bad bodies.
var soakRequests = []struct {
	path, body string
	stream     bool
	drop       bool // the client leaves after the first event
}{
	{"/completion", `{"prompt":"Hello %d","n_predict":16}`, false, false},
	{"/completion", `{"prompt":"Once %d","n_predict":24,"stream":true}`, true, false},
	{"/completion", `{"prompt":"Drop %d","n_predict":200,"ignore_eos":true,"stream":true}`, true, true},
	{"/v1/completions", `{"prompt":"A %d","max_tokens":8}`, false, false},
	{"/v1/chat/completions", `{"messages":[{"role":"user","content":"Hi %d"}],"max_tokens":12,"stream":true}`, true, false},
	{"/v1/chat/completions", `{"messages":[{"role":"user","content":"Yo %d"}],"max_tokens":8}`, false, false},
	{"/tokenize", `{"content":"tokens %d","with_pieces":true}`, false, false},
	{"/slots", ``, false, false},
	{"/props", ``, false, false},
	{"/completion", `{"prompt":%d,"n_predict":"x"}`, false, false},
	{"/v1/chat/completions", `{"messages":[{"role":"user"}],"n":%d}`, false, false},
}

// The server's goroutines and file descriptors stay bounded under mixed
// requests from many clients, some of which drop their streams, and come
// back to where they were. A few seconds by default; GGLOAD_HTTP_SOAK=10m
// soaks for that long.
func TestSoak(t *testing.T) {
	d := 4 * time.Second
	if s := os.Getenv("GGLOAD_HTTP_SOAK"); s != "" {
		var err error
		if d, err = time.ParseDuration(s); err != nil {
			t.Fatal(err)
		}
	}
	path := textModel(t, "llama", "llama-spm", 2)
	quiet := httpapi.Options{Logger: slog.New(slog.DiscardHandler)}
	srv, _ := newServer(t, path, config{nCtx: 2048, nParallel: 4, jinja: true, http: quiet})
	client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 16}}
	// a first round so that the lazy parts (templates, the pools) are made
	for i := range soakRequests {
		soakOne(t, client, srv.URL, i, 0)
	}
	client.CloseIdleConnections()
	time.Sleep(200 * time.Millisecond)
	g0, f0 := runtime.NumGoroutine(), openFDs()
	var maxG, maxF, n, errs atomic.Int64
	ctx, cancel := context.WithTimeout(context.Background(), d)
	defer cancel()
	var wg sync.WaitGroup
	for c := range 12 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			r := rand.New(rand.NewPCG(uint64(c), 7))
			for i := 0; ctx.Err() == nil; i++ {
				if !soakOne(t, client, srv.URL, r.IntN(len(soakRequests)), c*100000+i) {
					errs.Add(1)
				}
				n.Add(1)
			}
		}()
	}
	tick := time.NewTicker(100 * time.Millisecond)
	go func() {
		for range tick.C {
			if g := int64(runtime.NumGoroutine()); g > maxG.Load() {
				maxG.Store(g)
			}
			if f := int64(openFDs()); f > maxF.Load() {
				maxF.Store(f)
			}
		}
	}()
	wg.Wait()
	tick.Stop()
	client.CloseIdleConnections()
	waitIdle(t, srv.URL, 30*time.Second)
	client.CloseIdleConnections()
	deadline := time.Now().Add(10 * time.Second)
	var g1, f1 int
	for {
		g1, f1 = runtime.NumGoroutine(), openFDs()
		if (g1 <= g0+4 && f1 <= f0+4) || time.Now().After(deadline) {
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	t.Logf("soak of %v: %d requests (%d answered otherwise than expected); goroutines %d before, at most %d, %d after; fds %d before, at most %d, %d after",
		d, n.Load(), errs.Load(), g0, maxG.Load(), g1, f0, maxF.Load(), f1)
	if g1 > g0+4 || f1 > f0+4 {
		t.Errorf("goroutines %d -> %d, fds %d -> %d: something leaks", g0, g1, f0, f1)
	}
	if errs.Load() > 0 {
		t.Errorf("%d requests were answered otherwise than expected", errs.Load())
	}
}

// soakOne sends request kind k; whether the answer was as expected.
func soakOne(t *testing.T, c *http.Client, base string, k, i int) bool {
	r := soakRequests[k]
	method, body := "GET", ""
	if r.body != "" {
		method, body = "POST", fmt.Sprintf(r.body, i)
	}
	req, _ := http.NewRequest(method, base+r.path, strings.NewReader(body))
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	req = req.WithContext(ctx)
	resp, err := c.Do(req)
	if err != nil {
		t.Logf("%s: %v", r.path, err)
		return false
	}
	defer resp.Body.Close()
	bad := strings.Contains(r.body, `"x"`) || strings.Contains(r.body, `"role":"user"}`)
	if bad {
		io.Copy(io.Discard, resp.Body)
		return resp.StatusCode >= 400
	}
	if resp.StatusCode != 200 {
		b, _ := io.ReadAll(resp.Body)
		t.Logf("%s %s: %d %s", r.path, body, resp.StatusCode, b)
		return false
	}
	if r.drop {
		bufio.NewReader(resp.Body).ReadString('\n')
		cancel()
		return true
	}
	_, err = io.Copy(io.Discard, resp.Body)
	return err == nil
}
