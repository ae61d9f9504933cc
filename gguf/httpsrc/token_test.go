package httpsrc_test

import (
	"bytes"
	"context"
	"net/http"
	"net/http/httptest"
	"reflect"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/ggload/ggload/gguf/httpsrc"
)

// hop is a loopback server that records what each request carried and
// answers by its path: a redirect where one is set, else a small file.
type hop struct {
	srv   *httptest.Server
	mu    sync.Mutex
	seen  []string // "host path token|-"
	moves map[string]string
}

func newHop(t *testing.T, tls bool) *hop {
	h := &hop{moves: map[string]string{}}
	data := bytes.Repeat([]byte("gguf"), 1024)
	handler := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		tok := "-"
		if a := r.Header.Get("Authorization"); a != "" {
			tok = a
		}
		h.mu.Lock()
		h.seen = append(h.seen, r.Host+" "+r.URL.Path+" "+tok)
		to, move := h.moves[r.URL.Path]
		h.mu.Unlock()
		if move {
			http.Redirect(w, r, to, http.StatusFound)
			return
		}
		http.ServeContent(w, r, "model.gguf", time.Time{}, bytes.NewReader(data))
	})
	if tls {
		h.srv = httptest.NewTLSServer(handler)
	} else {
		h.srv = httptest.NewServer(handler)
	}
	t.Cleanup(h.srv.Close)
	return h
}

func (h *hop) requests() []string {
	h.mu.Lock()
	defer h.mu.Unlock()
	return append([]string(nil), h.seen...)
}

// The token goes to the exact origin of the URL it was given with, on
// every hop that asks that origin, and to no other: not to another port
// or host, not from https to http, not from http to https. The package's
// own client and a caller's client (which is not changed) alike.
func TestTokenGoesToItsOriginOnly(t *testing.T) {
	const bearer = "Bearer hf_secret"
	for _, c := range []struct {
		name     string
		tls      [2]bool // of servers a and b
		setup    func(a, b *hop) string
		with, no []string // "a path" / "b path" hops that must carry the token, and must not
	}{
		{"same origin", [2]bool{}, func(a, b *hop) string {
			a.moves["/start"] = "/model.gguf"
			return a.srv.URL + "/start"
		}, []string{"a /start", "a /model.gguf"}, nil},
		{"other port", [2]bool{}, func(a, b *hop) string {
			a.moves["/start"] = b.srv.URL + "/model.gguf"
			return a.srv.URL + "/start"
		}, []string{"a /start"}, []string{"b /model.gguf"}},
		{"other host", [2]bool{}, func(a, b *hop) string {
			// the same server by another name
			a.moves["/start"] = strings.Replace(a.srv.URL, "127.0.0.1", "localhost", 1) + "/model.gguf"
			return a.srv.URL + "/start"
		}, []string{"a /start"}, []string{"a /model.gguf"}},
		{"https to http", [2]bool{true, false}, func(a, b *hop) string {
			a.moves["/start"] = b.srv.URL + "/model.gguf"
			return a.srv.URL + "/start"
		}, []string{"a /start"}, []string{"b /model.gguf"}},
		{"http to https", [2]bool{false, true}, func(a, b *hop) string {
			a.moves["/start"] = b.srv.URL + "/model.gguf"
			return a.srv.URL + "/start"
		}, []string{"a /start"}, []string{"b /model.gguf"}},
		{"back to the origin", [2]bool{}, func(a, b *hop) string {
			a.moves["/start"] = b.srv.URL + "/bounce"
			b.moves["/bounce"] = a.srv.URL + "/model.gguf"
			return a.srv.URL + "/start"
		}, []string{"a /start", "a /model.gguf"}, []string{"b /bounce"}},
	} {
		for _, by := range []string{"own client", "caller's client"} {
			tls := c.tls[0] || c.tls[1]
			if tls && by == "own client" {
				continue // the test's CA is known to the test's client alone
			}
			t.Run(strings.ReplaceAll(c.name+"/"+by, " ", "_"), func(t *testing.T) {
				a, b := newHop(t, c.tls[0]), newHop(t, c.tls[1])
				url := c.setup(a, b)
				o := httpsrc.Options{Token: "hf_secret", HeaderWindow: 64}
				var client *http.Client
				if by == "caller's client" {
					client = &http.Client{}
					for _, h := range []*hop{a, b} {
						if h.srv.TLS != nil {
							client = h.srv.Client()
						}
					}
					o.Client = client
				}
				var before http.Client
				if client != nil {
					before = *client
				}
				r, err := httpsrc.Open(context.Background(), url, o)
				if err != nil {
					t.Fatal(err)
				}
				r.Close()
				if client != nil && (client.Transport != before.Transport || reflect.ValueOf(client.CheckRedirect).Pointer() != reflect.ValueOf(before.CheckRedirect).Pointer()) {
					t.Fatal("the caller's client was changed")
				}
				got := map[string]string{}
				for name, h := range map[string]*hop{"a": a, "b": b} {
					for _, s := range h.requests() {
						f := strings.SplitN(s, " ", 3)
						got[name+" "+f[1]] = f[2] // (by server and path: every case's hops differ so)
					}
				}
				for _, k := range c.with {
					if got[k] != bearer {
						t.Errorf("%s: no token (%q)", k, got[k])
					}
				}
				for _, k := range c.no {
					if v, ok := got[k]; !ok || v != "-" {
						t.Errorf("%s: got %q, want no token", k, v)
					}
				}
				t.Logf("a: %v; b: %v", a.requests(), b.requests())
			})
		}
	}
}
