package main

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"testing"

	"github.com/ggload/ggload/bindings"
	"github.com/ggload/ggload/lab/synth"
	"github.com/ggload/ggload/lab/testenv"
	"github.com/ggload/ggload/place"
)

func TestMain(m *testing.M) { testenv.Main(m) }

// The API answers under /llm/ beside the program's own route.
func TestMountedAPI(t *testing.T) {
	rt := testenv.Runtime(t)
	cache, err := bindings.CacheDir()
	if err != nil {
		t.Fatal(err)
	}
	path, err := synth.TextModel(rt, filepath.Join(cache, "models", "text"), testenv.SourceTree(t), "llama", "llama-spm", synth.ArchOptions{Layers: 2}, 7)
	if err != nil {
		t.Fatal(err)
	}
	mux, closeAll, err := newMux(context.Background(), path, place.Params{DeviceNames: []string{"none"}, Context: place.ContextParams{NCtx: 512, NParallel: 2, KVUnified: true}})
	if err != nil {
		t.Fatal(err)
	}
	defer closeAll()
	srv := httptest.NewServer(mux)
	defer srv.Close()
	resp, err := http.Post(srv.URL+"/llm/v1/completions", "application/json", strings.NewReader(`{"prompt":"Hello","max_tokens":4,"temperature":0}`))
	if err != nil {
		t.Fatal(err)
	}
	var c struct {
		Model   string `json:"model"`
		Choices []struct {
			FinishReason string `json:"finish_reason"`
		} `json:"choices"`
		Usage struct {
			CompletionTokens int `json:"completion_tokens"`
		} `json:"usage"`
	}
	err = json.NewDecoder(resp.Body).Decode(&c)
	resp.Body.Close()
	if err != nil || resp.StatusCode != 200 || c.Model != "my-model" || len(c.Choices) != 1 || c.Usage.CompletionTokens == 0 {
		t.Fatalf("status %d, %+v, %v", resp.StatusCode, c, err)
	}
	for path, want := range map[string]int{"/healthz": 200, "/llm/health": 200, "/health": 404, "/llm/nope": 404} {
		resp, err := http.Get(srv.URL + path)
		if err != nil {
			t.Fatal(err)
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		if resp.StatusCode != want {
			t.Errorf("GET %s: %d, want %d", path, resp.StatusCode, want)
		}
	}
}
