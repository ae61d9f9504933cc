package main

import (
	"bufio"
	"bytes"
	"context"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/ggload/ggload/gguf/httpsrc"
	"github.com/ggload/ggload/lab/synth"
)

// load -mu --verify checks the cached file against the sha256 kept at its
// download before it loads: a cached file changed since fails with the
// reason, naming the file; a file with no sum kept is said so and loads.
func TestLoadVerifiesDownload(t *testing.T) {
	path := writeSynth(t, synth.Spec{Layers: 2, Embd: 256, FF: 512, Heads: 2, Vocab: 256})
	url, certFile, _ := servedModel(t, path, "")
	cache := t.TempDir()
	env := []string{"SSL_CERT_FILE=" + certFile, "LLAMA_CACHE=" + cache}
	if out, errOut, err := ggloadRun(t, env, "load", "-mu", url, "--verify"); err != nil || !strings.Contains(out, "ggload: verified: ") {
		t.Fatalf("load -mu --verify: %v\n%s%s", err, out, errOut)
	}
	local := filepath.Join(cache, filepath.Base(path))
	// one byte of the last tensor changes on disk: the size and the
	// ETag stand, so the cached file is taken
	f, err := os.OpenFile(local, os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	st, _ := f.Stat()
	if _, err := f.WriteAt([]byte{0xa5}, st.Size()-64); err != nil {
		t.Fatal(err)
	}
	f.Close()
	_, errOut, err := ggloadRun(t, env, "load", "-mu", url, "--verify")
	if err == nil || !strings.Contains(errOut, "sha256 mismatch") || !strings.Contains(errOut, local) {
		t.Fatalf("load -mu --verify of a changed cached file: %v\n%s", err, errOut)
	}
	t.Logf("%s", errOut)
	if err := os.Remove(local + ".sha256"); err != nil {
		t.Fatal(err)
	}
	out, errOut, err := ggloadRun(t, env, "load", "-mu", url, "--verify")
	if err != nil || !strings.Contains(errOut, local+": no sha256 kept beside it") || !strings.Contains(out, "ggload: verified: ") {
		t.Fatalf("load -mu --verify of a file with no kept sum: %v\n%s%s", err, out, errOut)
	}
}

// A second ggload that downloads the file another download holds says
// that it waits, then takes the file the other brought.
func TestDownloadWaitsForAnother(t *testing.T) {
	path := writeSynth(t, synth.Spec{Layers: 2, Embd: 256, FF: 512, Heads: 2, Vocab: 256})
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	sent, release := make(chan struct{}), make(chan struct{})
	var freed sync.Once
	free := func() { freed.Do(func() { close(release) }) }
	t.Cleanup(free)
	var mu sync.Mutex
	gets := 0
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("ETag", `"m1"`)
		mu.Lock()
		if r.Method == http.MethodGet {
			gets++
		}
		first := gets == 1 && r.Method == http.MethodGet
		mu.Unlock()
		if !first {
			http.ServeContent(w, r, "model.gguf", time.Time{}, bytes.NewReader(data))
			return
		}
		// the first download: half the body, the rest once released
		w.Header().Set("Content-Length", strconv.Itoa(len(data)))
		w.Write(data[:len(data)/2])
		http.NewResponseController(w).Flush()
		close(sent)
		select {
		case <-release:
			w.Write(data[len(data)/2:])
		case <-r.Context().Done():
		}
	}))
	t.Cleanup(srv.Close)
	url := srv.URL + "/models/model.gguf"
	cache := t.TempDir()
	t.Setenv("LLAMA_CACHE", cache)
	first := make(chan error, 1)
	go func() {
		_, err := httpsrc.Download(context.Background(), url, "", httpsrc.Options{Retries: -1})
		first <- err
	}()
	<-sent
	cmd := exec.Command(os.Args[0], "plan", "-mu", url)
	cmd.Env = append(os.Environ(), asGgloadEnv+"=1")
	var out bytes.Buffer
	cmd.Stdout = &out
	stderr, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	sc := bufio.NewScanner(stderr)
	var said []string
	for sc.Scan() {
		said = append(said, sc.Text())
		if strings.HasPrefix(sc.Text(), "ggload: waiting for another download of "+filepath.Join(cache, "model.gguf")) {
			break
		}
	}
	// (a second ggload that waits and does not say so ends only once the
	// first download's body is stalled: Timeout, 30s)
	waited := len(said) > 0 && strings.Contains(said[len(said)-1], "waiting for another download")
	free()
	for sc.Scan() {
		said = append(said, sc.Text())
	}
	if !waited {
		t.Fatalf("the second ggload did not say it waits:\n%s", strings.Join(said, "\n"))
	}
	if err := <-first; err != nil {
		t.Fatalf("the first download: %v", err)
	}
	if err := cmd.Wait(); err != nil {
		t.Fatalf("plan -mu: %v\n%s", err, strings.Join(said, "\n"))
	}
	mu.Lock()
	defer mu.Unlock()
	if gets != 1 {
		t.Errorf("%d GETs: the second ggload downloaded the file again", gets)
	}
}
