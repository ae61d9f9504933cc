package main

import (
	"bytes"
	"encoding/json"
	"encoding/pem"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ggload/ggload/lab/synth"
	"github.com/ggload/ggload/lab/testenv"
)

// servedModel serves the file at path over HTTPS on loopback, with ranges
// and an ETag, and returns its URL, a certificate file that trusts the
// server (for SSL_CERT_FILE) and the count of GET requests.
func servedModel(t *testing.T, path, token string) (url, certFile string, gets *atomic.Int64) {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	gets = new(atomic.Int64)
	name := "/models/" + filepath.Base(path)
	srv := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != name {
			http.NotFound(w, r)
			return
		}
		if r.Method == http.MethodGet {
			gets.Add(1)
		}
		if token != "" && r.Header.Get("Authorization") != "Bearer "+token {
			w.WriteHeader(http.StatusUnauthorized)
			return
		}
		w.Header().Set("ETag", `"m1"`)
		http.ServeContent(w, r, name, time.Time{}, bytes.NewReader(data))
	}))
	t.Cleanup(srv.Close)
	certFile = filepath.Join(t.TempDir(), "loopback.pem")
	pemBytes := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: srv.Certificate().Raw})
	if err := os.WriteFile(certFile, pemBytes, 0o644); err != nil {
		t.Fatal(err)
	}
	return srv.URL + name, certFile, gets
}

// ggloadRun runs this test binary as ggload with the extra environment,
// and returns its stdout, stderr and error.
func ggloadRun(t *testing.T, env []string, args ...string) (string, string, error) {
	t.Helper()
	cmd := exec.Command(os.Args[0], args...)
	cmd.Env = append(append(os.Environ(), asGgloadEnv+"=1"), env...)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	return stdout.String(), stderr.String(), err
}

var (
	lazyAuto = regexp.MustCompile(`(lazy |"lazy": ")auto`)
	timings  = regexp.MustCompile(`(sized in |"took_s": )[0-9.e-]+`)
)

// ggloadTwice runs ggload with args on the file and on the URL (either
// may be empty: not run), and returns both outputs, the URL's with the URL
// written as the file's path. A run on the URL may make at most two
// requests: the header's.
func ggloadTwice(t *testing.T, env, args []string, path, url string, gets *atomic.Int64) (fromFile, fromURL string) {
	t.Helper()
	if path != "" {
		out, errOut, err := ggloadRun(t, env, append(append([]string{}, args...), path)...)
		if err != nil {
			t.Fatalf("%v from the file: %v\n%s", args, err, errOut)
		}
		fromFile = out
	}
	if url != "" {
		before := gets.Load()
		out, errOut, err := ggloadRun(t, env, append(append([]string{}, args...), url)...)
		if err != nil {
			t.Fatalf("%v from %s: %v\n%s", args, url, err, errOut)
		}
		if n := gets.Load() - before; n > 2 {
			t.Errorf("%v made %d requests for the header, want at most 2", args, n)
		}
		fromURL = strings.ReplaceAll(out, url, path)
	}
	return fromFile, fromURL
}

// A model's URL goes where its path goes: plan over HTTPS answers exactly
// as from the file, from its header alone; load streams the weights to the
// devices and reads them back equal; -mu downloads into the cache, then
// loads the local file.
func TestModelOverHTTPS(t *testing.T) {
	testenv.Runtime(t)
	path := writeSynth(t, synth.Spec{Layers: 4, Embd: 256, FF: 512, Heads: 2, Vocab: 256})
	url, certFile, gets := servedModel(t, path, "")
	env := []string{"SSL_CERT_FILE=" + certFile, "LLAMA_CACHE=" + t.TempDir()}

	// a URL is read, not mapped: what the file gives with -lm none, line
	// for line
	for _, args := range [][]string{{"plan", "-lm", "none"}, {"plan", "--json", "--tensors", "-lm", "none"}, {"inspect"}, {"inspect", "--json", "--full"}} {
		fromFile, fromURL := ggloadTwice(t, env, args, path, url, gets)
		// what differs: the time -fit took, and lazy auto, which llama.cpp
		// turns off where the weights cannot be mapped, as a URL's cannot
		fromFile = timings.ReplaceAllString(lazyAuto.ReplaceAllString(fromFile, "${1}off"), "${1}")
		fromURL = timings.ReplaceAllString(fromURL, "${1}")
		if fromURL != fromFile {
			t.Errorf("%v: the URL's answer differs from the file's:\n--- file\n%s\n--- url\n%s", args, fromFile, fromURL)
		}
	}
	// and by default, auto resolves to none, so every tensor, buffer,
	// device and context buffer is where -lm none puts them from the file
	fromFile, _ := ggloadTwice(t, env, []string{"plan", "--json", "--tensors", "-lm", "none"}, path, "", gets)
	_, fromURL := ggloadTwice(t, env, []string{"plan", "--json", "--tensors"}, "", url, gets)
	var a, b struct {
		Plan   map[string]json.RawMessage
		Memory json.RawMessage
	}
	if err := json.Unmarshal([]byte(fromFile), &a); err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal([]byte(fromURL), &b); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(a.Memory, b.Memory) {
		t.Errorf("memory: file %s, url %s", a.Memory, b.Memory)
	}
	for _, k := range []string{"tensors", "buffers", "layer_devices", "devices", "usage", "context", "memory_breakdown", "totals", "load_mode", "use_mmap"} {
		if len(a.Plan[k]) == 0 || !bytes.Equal(a.Plan[k], b.Plan[k]) {
			t.Errorf("plan's %s: file %s, url %s", k, a.Plan[k], b.Plan[k])
		}
	}

	out, errOut, err := ggloadRun(t, env, "load", url, "--verify", "--readers", "4")
	if err != nil {
		t.Fatalf("load %s: %v\n%s", url, err, errOut)
	}
	for _, want := range []string{"ggload: loaded ", "ggload: verified: ", "(load_mode = none)"} {
		if !strings.Contains(out, want) {
			t.Errorf("load %s: missing %q in\n%s", url, want, out)
		}
	}
	// a mode that maps the file cannot take a URL
	_, errOut, err = ggloadRun(t, env, "load", url, "-lm", "mmap")
	if err == nil || !strings.Contains(errOut, "load mode mmap needs a local file: "+url+" is read through a reader") {
		t.Errorf("load -lm mmap of a URL: %v\n%s", err, errOut)
	}

	// -mu: into the cache, then from disk (mapped, as any local file)
	cache := filepath.Join(t.TempDir(), "cache")
	muEnv := []string{"SSL_CERT_FILE=" + certFile, "LLAMA_CACHE=" + cache}
	out, errOut, err = ggloadRun(t, muEnv, "load", "-mu", url, "--verify")
	if err != nil {
		t.Fatalf("load -mu %s: %v\n%s", url, err, errOut)
	}
	local := filepath.Join(cache, filepath.Base(path))
	want, _ := os.ReadFile(path)
	if got, err := os.ReadFile(local); err != nil || !bytes.Equal(got, want) {
		t.Fatalf("-mu's download %s: %v", local, err)
	}
	if !strings.Contains(out, "ggload: verified: ") || !strings.Contains(out, "(load_mode = mmap)") {
		t.Errorf("load -mu: the local file %s was not loaded and verified:\n%s", local, out)
	}
	// again: the cached file stands (one HEAD, no GET)
	before := gets.Load()
	if _, errOut, err = ggloadRun(t, muEnv, "plan", "-mu", url); err != nil {
		t.Fatalf("plan -mu again: %v\n%s", err, errOut)
	}
	if n := gets.Load() - before; n != 0 {
		t.Errorf("the cached download was fetched again: %d GETs", n)
	}

	// bad URLs: refused before any request, naming the URL and the reason
	before = gets.Load()
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"plan", "ftp://127.0.0.1/m.gguf"}, `scheme "ftp" is not supported`},
		{[]string{"inspect", "gopher://127.0.0.1/m.gguf"}, `scheme "gopher" is not supported`},
		{[]string{"plan", "-mu", "127.0.0.1/m.gguf"}, "no scheme"},
		{[]string{"plan", "-mu", url, url}, "is a URL"},
		{[]string{"plan", "https:///m.gguf"}, "no host"},
	} {
		_, errOut, err := ggloadRun(t, env, c.args...)
		ee, ok := err.(*exec.ExitError)
		if !ok || ee.ExitCode() != 2 || !strings.Contains(errOut, c.want) {
			t.Errorf("%v: %v (want exit 2 and %q): %s", c.args, err, c.want, errOut)
		}
	}
	if n := gets.Load() - before; n != 0 {
		t.Errorf("bad URLs made %d requests", n)
	}
}

// -hft, or HF_TOKEN, is sent as a bearer token, and never printed.
func TestModelURLToken(t *testing.T) {
	testenv.Runtime(t)
	path := writeSynth(t, synth.Spec{Layers: 2, Embd: 256, FF: 512, Heads: 2, Vocab: 256})
	url, certFile, _ := servedModel(t, path, "hf_tok123")
	env := []string{"SSL_CERT_FILE=" + certFile, "HF_TOKEN="}
	_, errOut, err := ggloadRun(t, env, "plan", url)
	if err == nil || !strings.Contains(errOut, "401") || !strings.Contains(errOut, "HF_TOKEN") {
		t.Fatalf("without a token: %v\n%s", err, errOut)
	}
	out, errOut, err := ggloadRun(t, env, "plan", "-hft", "hf_tok123", url)
	if err != nil {
		t.Fatalf("-hft: %v\n%s", err, errOut)
	}
	if strings.Contains(out+errOut, "hf_tok123") {
		t.Errorf("the token is printed:\n%s%s", out, errOut)
	}
	out, errOut, err = ggloadRun(t, []string{"SSL_CERT_FILE=" + certFile, "HF_TOKEN=hf_tok123"}, "load", url, "--verify")
	if err != nil || !strings.Contains(out, "ggload: verified: ") {
		t.Fatalf("HF_TOKEN: %v\n%s%s", err, out, errOut)
	}
	if strings.Contains(out+errOut, "hf_tok123") {
		t.Errorf("the token is printed:\n%s%s", out, errOut)
	}
}
