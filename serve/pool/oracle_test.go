package pool_test

import (
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/ggload/ggload/lab/llamaserver"
	"github.com/ggload/ggload/lab/testenv"
	"github.com/ggload/ggload/serve/pool"
)

// routerModel is one model of llama-server's GET /models, as the router
// lists it.
type routerModel struct {
	ID      string   `json:"id"`
	Aliases []string `json:"aliases"`
	Tags    []string `json:"tags"`
	Source  string   `json:"source"`
	Status  struct {
		Value string   `json:"value"`
		Args  []string `json:"args"`
	} `json:"status"`
}

// arg is the value of a flag in a child's arguments ("" where absent).
func (m routerModel) arg(flag string) string {
	for i, a := range m.Status.Args {
		if a == flag && i+1 < len(m.Status.Args) {
			return m.Status.Args[i+1]
		}
	}
	return ""
}

// routerModels starts llama-server of the pin in router mode with the
// flags and lists its models.
func routerModels(t *testing.T, flags ...string) []routerModel {
	t.Helper()
	if raceOn {
		t.Skip("a comparison with llama-server: it runs without the race detector")
	}
	bin := llamaserver.Build(t)
	s := llamaserver.Start(t, bin, flags...)
	resp, err := http.Get(s.URL + "/models")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var list struct {
		Data []routerModel `json:"data"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&list); err != nil {
		t.Fatal(err)
	}
	return list.Data
}

// sameCatalog holds the pool's list to the router's: the names, aliases,
// tags, sources, statuses and the files (--model, --mmproj,
// --model-draft); and, as a negative control, finds a difference in a
// list changed by one file.
func sameCatalog(t *testing.T, p *pool.Pool, want []routerModel) {
	t.Helper()
	got := p.Models()
	if d := catalogDiff(got, want); d != nil {
		t.Fatalf("the pool's models differ from llama-server's:\n%s", strings.Join(d, "\n"))
	}
	changed := slices.Clone(want)
	changed[len(changed)-1].Status.Args = append(slices.Clone(changed[len(changed)-1].Status.Args), "--mmproj", "/elsewhere")
	if catalogDiff(got, changed) == nil {
		t.Fatal("the comparison sees no difference in a list changed by one file")
	}
}

func catalogDiff(got []pool.Info, want []routerModel) []string {
	if len(got) != len(want) {
		return []string{fmt.Sprintf("%d models, llama-server lists %d: %+v\n%+v", len(got), len(want), got, want)}
	}
	nonNil := func(s []string) []string {
		if s == nil {
			return []string{}
		}
		return s
	}
	var d []string
	for i, w := range want {
		g := got[i]
		if g.Name != w.ID || !slices.Equal(nonNil(g.Aliases), w.Aliases) || !slices.Equal(nonNil(g.Tags), w.Tags) || g.Source.String() != w.Source ||
			g.Path != w.arg("--model") || g.Mmproj != w.arg("--mmproj") || g.Draft != w.arg("--model-draft") || g.Status.String() != w.Status.Value {
			d = append(d, fmt.Sprintf("%s: %q %q %s %s, %q %q %q %s; llama-server: %q %q %s %s, %q %q %q %s", w.ID, g.Aliases, g.Tags, g.Source, g.Name, g.Path, g.Mmproj, g.Draft, g.Status,
				w.Aliases, w.Tags, w.Source, w.ID, w.arg("--model"), w.arg("--mmproj"), w.arg("--model-draft"), w.Status.Value))
		}
	}
	return d
}

// modelsDir lays out a models directory as users fill one: a file at
// the top, a projector and a draft at the top (not models), a file
// whose name holds ".gguf" twice, a subdirectory with a model, its
// projector and draft, a split model's subdirectory, an empty
// subdirectory, a file that is no GGUF.
func modelsDir(t *testing.T) string {
	t.Helper()
	src := modelFile(t, 7)
	dir := t.TempDir()
	for _, name := range []string{"top.gguf", "top-mmproj.gguf", "mtp-top.gguf", "twice.gguf.gguf", "sub/model.gguf", "sub/mmproj-f16.gguf",
		"sub/mtp-draft.gguf", "sub/dflash-other.gguf", "split/m-00001-of-00002.gguf", "split/m-00002-of-00002.gguf"} {
		p := filepath.Join(dir, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.Symlink(src, p); err != nil {
			t.Fatal(err)
		}
	}
	os.MkdirAll(filepath.Join(dir, "empty"), 0o755)
	os.WriteFile(filepath.Join(dir, "readme.txt"), []byte("not a model"), 0o644)
	return dir
}

// TestModelsDirAsRouter: the pool finds the models of a directory as
// llama-server's router finds them (names, files, projectors, drafts,
// split files).
func TestModelsDirAsRouter(t *testing.T) {
	dir := modelsDir(t)
	want := routerModels(t, "--models-dir", dir)
	p := newPool(t, pool.Params{ModelsDir: dir})
	sameCatalog(t, p, want)
}

// presetsFile is a presets file as the pin's documentation writes them:
// a version, comments, the global section, a tag made canonical,
// aliases and tags, the options' several spellings, a negated switch, a
// model of the directory given options.
const presetsFile = `version = 1
; models of the test
# (both kinds of comments)
[*]
c = 1024   ; every model's context

[tiny:q4_k_m]
model = %[1]s
alias = tiny, small-one
tags = b,a
n-gpu-layers = 0

[other]
m = %[1]s
LLAMA_ARG_ALIAS = other-name
no-kv-unified = true
load-on-startup = false

[sub]
ctx-size = 2048
`

// TestPresetsAsRouter: the pool reads a presets file, with and without a
// models directory, as llama-server's router reads it; a file the router
// cannot parse, the pool refuses too.
func TestPresetsAsRouter(t *testing.T) {
	dir := modelsDir(t)
	ini := filepath.Join(t.TempDir(), "presets.ini")
	if err := os.WriteFile(ini, []byte(strings.ReplaceAll(presetsFile, "%[1]s", modelFile(t, 11))), 0o644); err != nil {
		t.Fatal(err)
	}
	t.Run("alone", func(t *testing.T) {
		want := routerModels(t, "--models-preset", ini)
		p := newPool(t, pool.Params{ModelsPreset: ini})
		sameCatalog(t, p, want)
		in, _ := p.Model("small-one")
		if in.Name != "tiny:Q4_K_M" {
			t.Fatalf("an alias names %q", in.Name)
		}
	})
	t.Run("with-dir", func(t *testing.T) {
		want := routerModels(t, "--models-dir", dir, "--models-preset", ini)
		p := newPool(t, pool.Params{ModelsDir: dir, ModelsPreset: ini})
		sameCatalog(t, p, want)
	})
	t.Run("bad", func(t *testing.T) {
		bad := filepath.Join(t.TempDir(), "bad.ini")
		os.WriteFile(bad, []byte("[m]\nmodel /no/equals\n"), 0o644)
		_, err := pool.New(testenv.Runtime(t), pool.Params{ModelsPreset: bad})
		if err == nil || !strings.Contains(err.Error(), "failed to parse server config file: "+bad) {
			t.Fatal(err)
		}
		if raceOn {
			return
		}
		_, serr := llamaserver.StartServer(testenv.Runtime(t).Location().Dir, llamaserver.Build(t), 30*time.Second, "--models-preset", bad)
		if serr == nil || !strings.Contains(serr.Error(), "failed to parse server config file: "+bad) {
			t.Fatalf("llama-server: %v", serr)
		}
	})
}
