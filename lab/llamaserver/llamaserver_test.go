package llamaserver_test

import (
	"encoding/json"
	"net/http"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/ggload/ggload/bindings"
	"github.com/ggload/ggload/lab/llamaserver"
	"github.com/ggload/ggload/lab/synth"
	"github.com/ggload/ggload/lab/testenv"
)

func TestMain(m *testing.M) { testenv.Main(m) }

// llama-server of the pin builds from its source against the native set
// and answers: /health, then a greedy completion of a synthesized model,
// the same twice.
func TestBuildAndStart(t *testing.T) {
	t0 := time.Now()
	bin := llamaserver.Build(t)
	t.Logf("built (or found) %s in %v", bin, time.Since(t0))
	rt := testenv.Runtime(t)
	cache, err := bindings.CacheDir()
	if err != nil {
		t.Fatal(err)
	}
	model, err := synth.TextModel(rt, filepath.Join(cache, "models", "text"), testenv.SourceTree(t), "llama", "llama-spm", synth.ArchOptions{Layers: 2}, 7)
	if err != nil {
		t.Fatal(err)
	}
	s := llamaserver.Start(t, bin, "-m", model, "--device", "none", "-t", "2", "-c", "1024")
	ask := func() []int {
		resp, err := http.Post(s.URL+"/completion", "application/json", strings.NewReader(`{"prompt":"Hello world","n_predict":6,"temperature":0,"return_tokens":true}`))
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		var r struct {
			Tokens []int `json:"tokens"`
		}
		if err := json.NewDecoder(resp.Body).Decode(&r); err != nil || resp.StatusCode != 200 {
			t.Fatalf("status %d, %v", resp.StatusCode, err)
		}
		return r.Tokens
	}
	a, b := ask(), ask()
	if len(a) != 6 || len(b) != 6 {
		t.Fatalf("tokens %v, %v", a, b)
	}
	for i := range a {
		if a[i] != b[i] {
			t.Fatalf("greedy completions differ: %v, %v", a, b)
		}
	}
}
