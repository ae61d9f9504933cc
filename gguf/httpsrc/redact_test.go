package httpsrc_test

import (
	"bytes"
	"context"
	"encoding/base64"
	"net/http"
	"os"
	"strings"
	"sync"
	"testing"

	"github.com/ggload/ggload/gguf/httpsrc"
	"github.com/ggload/ggload/lab/testenv"
	"github.com/ggload/ggload/place"
)

func TestRedact(t *testing.T) {
	for _, c := range [][2]string{
		{"http://user:s3cr3t@h/m.gguf", "http://user:xxxxx@h/m.gguf"},
		{"https://user:s3cr3t@h:8443/a/m.gguf?x=1", "https://user:xxxxx@h:8443/a/m.gguf?x=1"},
		{"http://user@h/m.gguf", "http://user@h/m.gguf"},
		{"https://h/m.gguf", "https://h/m.gguf"},
		{"https://h/a@b/m.gguf", "https://h/a@b/m.gguf"},
		// not parsed by net/url: redacted all the same
		{"http://user:s3cr3t@h/%zz", "http://user:xxxxx@h/%zz"},
		{"http://user:s3cr3t@h:99999999/m", "http://user:xxxxx@h:99999999/m"},
		{"not a url", "not a url"},
	} {
		if got := httpsrc.Redact(c[0]); got != c[1] {
			t.Errorf("Redact(%q) = %q, want %q", c[0], got, c[1])
		}
	}
}

// A password in the URL goes to the server (Basic auth) and into no
// message: not errors, not the source's name or the reader's URL, not the
// plan's report, not Progress. The token is printed nowhere either.
func TestPasswordIsRedacted(t *testing.T) {
	rt := testenv.Runtime(t)
	path := testenv.ModelFile(t, rt, spec)
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	const pw = "s3cr3tpw"
	var mu sync.Mutex
	var auths []string
	fs := &fileServer{data: data, etag: `"v1"`, fault: func(_ int64, w http.ResponseWriter, r *http.Request) bool {
		mu.Lock()
		auths = append(auths, r.Header.Get("Authorization"))
		mu.Unlock()
		if !strings.HasSuffix(r.URL.Path, "/model.gguf") {
			w.WriteHeader(http.StatusUnauthorized)
			return true
		}
		return false
	}}
	srv, _ := served(t, fs, false)
	base := strings.Replace(srv.URL, "http://", "http://user:"+pw+"@", 1)
	var progress []string
	o := httpsrc.Options{Progress: func(url string, _, _ int64) {
		mu.Lock()
		progress = append(progress, url)
		mu.Unlock()
	}}
	leaks := func(what, s string) {
		t.Helper()
		if strings.Contains(s, pw) || strings.Contains(s, "hf_secret") {
			t.Errorf("%s shows a credential: %s", what, s)
		}
	}

	gm, err := httpsrc.OpenModel(context.Background(), base+"/model.gguf", o)
	if err != nil {
		t.Fatal(err)
	}
	r := gm.Files[0].Source().Reader.(*httpsrc.Reader)
	leaks("the source's name", gm.Files[0].Source().Name)
	leaks("the model's path", gm.Paths[0])
	leaks("Reader.URL", r.URL())
	if !strings.Contains(r.URL(), "user:xxxxx@") {
		t.Errorf("Reader.URL %q is not the URL redacted", r.URL())
	}
	p, err := place.New(context.Background(), rt, gm, place.Params{DeviceNames: []string{"none"}})
	if err != nil {
		t.Fatal(err)
	}
	var rep bytes.Buffer
	p.Report(&rep, place.ReportOptions{})
	js, err := p.MarshalJSON()
	if err != nil {
		t.Fatal(err)
	}
	rep.Write(js)
	leaks("the plan's report", rep.String())
	gm.Close()
	mu.Lock()
	for _, u := range progress {
		leaks("Progress", u)
	}
	if want := "Basic " + base64.StdEncoding.EncodeToString([]byte("user:"+pw)); len(auths) == 0 || auths[0] != want {
		t.Errorf("the server got %q, want the URL's password", auths)
	}
	mu.Unlock()

	// failures: a refusal, a bad URL; with a token too
	_, err = httpsrc.OpenModel(context.Background(), base+"/other.gguf", httpsrc.Options{Token: "hf_secret", Retries: -1})
	if err == nil || !strings.Contains(err.Error(), "user:xxxxx@") {
		t.Fatalf("a refusal: %v", err)
	}
	leaks("a refusal", err.Error())
	_, err = httpsrc.OpenModel(context.Background(), base+"/%zz.gguf", o)
	if err == nil {
		t.Fatal("a bad URL was taken")
	}
	leaks("a bad URL's error", err.Error())
}
