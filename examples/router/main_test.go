package main

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/ggload/ggload/bindings"
	"github.com/ggload/ggload/lab/synth"
	"github.com/ggload/ggload/lab/testenv"
	"github.com/ggload/ggload/place"
	"github.com/ggload/ggload/serve"
	"github.com/ggload/ggload/serve/pool"
)

func TestMain(m *testing.M) { testenv.Main(m) }

// The API answers under /llm/ for each model of the directory, by name.
func TestMountedRouter(t *testing.T) {
	rt := testenv.Runtime(t)
	cache, err := bindings.CacheDir()
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	for name, seed := range map[string]uint64{"one": 7, "two": 11} {
		path, err := synth.TextModel(rt, filepath.Join(cache, "models", "text"), testenv.SourceTree(t), "llama", "llama-spm", synth.ArchOptions{Layers: 2}, seed)
		if err != nil {
			t.Fatal(err)
		}
		if err := os.Symlink(path, filepath.Join(dir, name+".gguf")); err != nil {
			t.Fatal(err)
		}
	}
	mux, closePool, err := newMux(rt, pool.Params{ModelsDir: dir, Defaults: pool.Options{
		Place: place.Params{DeviceNames: []string{"none"}, Context: place.ContextParams{NCtx: 512, NParallel: 1}},
		Serve: serve.Params{Threads: 1, NoCacheRAM: true}}})
	if err != nil {
		t.Fatal(err)
	}
	defer closePool()
	srv := httptest.NewServer(mux)
	defer srv.Close()
	for _, model := range []string{"one", "two", "three"} {
		resp, err := http.Post(srv.URL+"/llm/v1/completions", "application/json", strings.NewReader(`{"model":"`+model+`","prompt":"Hello","max_tokens":4,"temperature":0}`))
		if err != nil {
			t.Fatal(err)
		}
		var c struct {
			Model string `json:"model"`
			Error struct {
				Message string `json:"message"`
			} `json:"error"`
		}
		err = json.NewDecoder(resp.Body).Decode(&c)
		resp.Body.Close()
		if model == "three" {
			if resp.StatusCode != 400 || c.Error.Message != "model 'three' not found" {
				t.Errorf("an unknown model: %d %+v", resp.StatusCode, c)
			}
			continue
		}
		if err != nil || resp.StatusCode != 200 || c.Model != model {
			t.Errorf("%s: status %d, %+v, %v", model, resp.StatusCode, c, err)
		}
	}
}
