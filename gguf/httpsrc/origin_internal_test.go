package httpsrc

import (
	"net/http"
	"net/url"
	"testing"
)

// Origins compare scheme, host and port, a default port written or not;
// nothing else of the URL counts.
func TestSameOrigin(t *testing.T) {
	for _, c := range []struct {
		a, b string
		same bool
	}{
		{"https://h/a", "https://h:443/b?c", true},
		{"http://h/a", "http://h:80/b", true},
		{"HTTPS://H.example/a", "https://h.example/", true},
		{"https://user:pw@h/a", "https://h/a", true},
		{"http://[::1]:8080/a", "http://[::1]:8080/b", true},
		{"https://h/a", "http://h/a", false},
		{"http://h/a", "https://h/a", false},
		{"https://h/a", "https://h:8443/a", false},
		{"http://h:80/a", "http://h:8080/a", false},
		{"https://h/a", "https://h.example/a", false},
		{"https://h/a", "https://evil.h/a", false},
		{"http://[::1]/a", "http://127.0.0.1/a", false},
	} {
		a, _ := url.Parse(c.a)
		b, _ := url.Parse(c.b)
		if got := sameOrigin(a, b); got != c.same {
			t.Errorf("sameOrigin(%s, %s) = %v", c.a, c.b, got)
		}
	}
}

// A redirect whose chain cannot be followed back to its first request
// gets no token.
func TestChainStartFailsClosed(t *testing.T) {
	first, _ := http.NewRequest(http.MethodGet, "https://h/a", nil)
	hop := &http.Request{URL: first.URL, Response: &http.Response{Request: first}}
	if chainStart(hop) != first {
		t.Fatal("the chain's first request was not found")
	}
	lost := &http.Request{URL: first.URL, Response: &http.Response{}}
	if chainStart(lost) != nil {
		t.Fatal("a hop with no link back counts as a first request")
	}
}
