package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/ggload/ggload/lab/hubtest"
)

// Every command that takes a model takes -hf, as llama.cpp's tools do:
// the model brought from the hub into the Hugging Face cache, then used
// as the local file it now is (run's text, tokenize's tokens, inspect's
// report and plan's are the local file's); --offline uses the cache
// alone; the options that cannot go together are refused before any
// request.
func TestHubOptions(t *testing.T) {
	model := textModel(t, "llama", "llama-spm")
	data, err := os.ReadFile(model)
	if err != nil {
		t.Fatal(err)
	}
	repo := hubtest.Repo{ID: "ggload-test/tiny-GGUF", Files: []hubtest.File{
		{Path: "README.md", Data: []byte("# tiny\n"), Git: true},
		{Path: "tiny-Q8_0.gguf", Data: data},
	}}
	h := hubtest.New(t, repo)
	cache := t.TempDir()
	t.Setenv("MODEL_ENDPOINT", h.URL)
	t.Setenv("HF_ENDPOINT", "")
	t.Setenv("LLAMA_CACHE", "")
	t.Setenv("HF_HUB_CACHE", cache)
	t.Setenv("HF_TOKEN", "")
	local := filepath.Join(cache, "models--ggload-test--tiny-GGUF", "snapshots", hubtest.Commit(repo), "tiny-Q8_0.gguf")

	text := []string{"-p", "Hello world", "-n", "8", "-s", "3", "-t", "2", "-dev", "none"}
	want, err := runCLI(t, append([]string{"run", model}, text...)...)
	if err != nil {
		t.Fatal(err)
	}
	got, err := runCLI(t, append([]string{"run", "-hf", repo.ID}, text...)...)
	if err != nil {
		t.Fatal(err)
	}
	if got != want {
		t.Errorf("run -hf printed %q, run of the file %q", got, want)
	}
	if st, err := os.Lstat(local); err != nil || st.Mode()&os.ModeSymlink == 0 {
		t.Errorf("the snapshot's entry %s: %v (want a link into blobs/)", local, err)
	}
	// tokenize and inspect, offline now
	h.Lock()
	h.Down = true
	h.Unlock()
	before := len(h.Requests())
	tw, err := runCLI(t, "tokenize", model, "-p", "Hello world")
	if err != nil {
		t.Fatal(err)
	}
	tg, err := runCLI(t, "tokenize", "-hf", repo.ID+":Q8_0", "--offline", "-p", "Hello world")
	if err != nil || tg != tw {
		t.Errorf("tokenize -hf --offline: %q, %v; the file's %q", tg, err, tw)
	}
	js, err := runCLI(t, "inspect", "-hf", repo.ID, "--offline", "--json")
	var rep inspectReport
	if err != nil || json.Unmarshal([]byte(js), &rep) != nil || len(rep.Files) != 1 || rep.Files[0].Path != local {
		t.Errorf("inspect -hf --offline: %v, %+v", err, rep.Files)
	}
	if n := len(h.Requests()); n != before {
		t.Errorf("--offline made %d requests", n-before)
	}
	// the hub down, without --offline: the cache, said so
	if _, err := runCLI(t, "plan", "-hf", repo.ID, "-dev", "none"); err != nil {
		t.Errorf("plan -hf with the hub down: %v", err)
	}
	// LLAMA_ARG_HF_REPO sets -hf, as in llama.cpp
	t.Setenv("LLAMA_ARG_HF_REPO", repo.ID)
	if _, err := runCLI(t, "plan", "--offline", "-dev", "none"); err != nil {
		t.Errorf("plan with LLAMA_ARG_HF_REPO: %v", err)
	}
	t.Setenv("LLAMA_ARG_HF_REPO", "")
	os.Unsetenv("LLAMA_ARG_HF_REPO")

	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"run", "-hf", "ggload-test/other", "--offline", "-p", "x"}, "models--ggload-test--other"},
		{[]string{"run", "-hf", repo.ID + ":IQ1_S", "--offline", "-p", "x"}, "no model file of quantization IQ1_S"},
		{[]string{"plan", "-hff", "tiny-Q8_0.gguf", model}, "give -hf too"},
		{[]string{"plan", "-hf", repo.ID, model}, "give one model"},
		{[]string{"plan", "-hf", repo.ID, "-m", model}, "give one model"},
		{[]string{"tokenize", "-hf", repo.ID, model, "-p", "x"}, "give one model"},
		{[]string{"inspect", "-hf", repo.ID, model}, "give one model"},
		{[]string{"plan", "-hf", "ggload-test"}, "want <user>/<model>[:quant]"},
		{[]string{"plan", "-hf", "a/b..c"}, "want <user>/<model>[:quant]"},
		{[]string{"plan", "-dr", "ai/smollm2"}, "Docker Hub"},
	} {
		_, err := runCLI(t, c.args...)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%v: %v, want an error saying %q", c.args, err, c.want)
		}
	}
}
