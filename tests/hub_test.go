package tests

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/ggload/ggload/ggml/gtype"
	"github.com/ggload/ggload/gguf"
	"github.com/ggload/ggload/gguf/httpsrc"
	"github.com/ggload/ggload/lab/cxx"
	"github.com/ggload/ggload/lab/hubtest"
)

// hubHarness asks libllama-common of the pin what -hf brings
// (common_download_get_hf_plan), and with "1" as its fifth argument
// brings it (common_download_file_single, then hf_cache::finalize_file),
// printing the plan's paths in the repository and the local paths.
const hubHarness = `
#include "common.h"
#include "download.h"
#include "hf-cache.h"
#include <cstdio>
#include <cstdlib>
#include <cstring>

int main(int argc, char ** argv) {
    if (argc < 6) { fprintf(stderr, "usage: repo[:tag] file|- mmproj offline download\n"); return 2; }
    common_params_model model;
    model.hf_repo = argv[1];
    if (strcmp(argv[2], "-") != 0) model.hf_file = argv[2];
    common_download_opts opts;
    opts.download_mmproj = argv[3][0] == '1';
    opts.offline = argv[4][0] == '1';
    if (const char * tok = getenv("HF_TOKEN")) opts.bearer_token = tok;
    common_download_hf_plan plan;
    try {
        plan = common_download_get_hf_plan(model, opts);
    } catch (const std::exception & e) {
        printf("error %s\n", e.what());
        return 0;
    }
    printf("primary %s\n", plan.primary.path.c_str());
    for (auto & f : plan.model_files) printf("file %s\n", f.path.c_str());
    printf("mmproj %s\n", plan.mmproj.path.c_str());
    if (argv[5][0] != '1') return 0;
    std::vector<hf_cache::hf_file> all = plan.model_files;
    if (!plan.mmproj.path.empty()) all.push_back(plan.mmproj);
    for (auto & f : all) {
        int status = common_download_file_single(f.url, f.local_path, opts, true);
        if (status < 200 || status >= 400) { printf("error %s: status %d\n", f.path.c_str(), status); return 0; }
        printf("final %s\n", hf_cache::finalize_file(f).c_str());
    }
    printf("resolve %s\n", common_download_resolve_path(argv[1], model.hf_file).c_str());
    return 0;
}
`

// hubPlan is what the harness printed.
type hubPlan struct {
	primary, mmproj string
	files, finals   []string
	resolve, err    string
}

// llamaHub runs the harness on the hub and cache of the environment.
func llamaHub(t *testing.T, bin, repoTag, file string, mmproj, offline, download bool) hubPlan {
	t.Helper()
	b := func(v bool) string {
		if v {
			return "1"
		}
		return "0"
	}
	if file == "" {
		file = "-"
	}
	cmd := cxx.Command(t, bin, repoTag, file, b(mmproj), b(offline), b(download))
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("llama.cpp's -hf %s: %v\n%s", repoTag, err, stderr.String())
	}
	var p hubPlan
	for _, l := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		k, v, _ := strings.Cut(l, " ")
		switch k {
		case "primary":
			p.primary = v
		case "mmproj":
			p.mmproj = v
		case "file":
			p.files = append(p.files, v)
		case "final":
			p.finals = append(p.finals, v)
		case "resolve":
			p.resolve = v
		case "error":
			p.err = v
		}
	}
	return p
}

// hubGGUF is a small GGUF of its own bytes.
func hubGGUF(t *testing.T, v int) []byte {
	t.Helper()
	w := gguf.NewWriter()
	if err := w.Set("general.name", gguf.String(fmt.Sprintf("hub %d", v))); err != nil {
		t.Fatal(err)
	}
	data := bytes.Repeat([]byte{byte(v)}, 4096+v)
	if err := w.AddTensorBytes("w", gtype.TypeI8, []int64{int64(len(data))}, data); err != nil {
		t.Fatal(err)
	}
	var b bytes.Buffer
	if _, err := w.WriteTo(&b); err != nil {
		t.Fatal(err)
	}
	return b.Bytes()
}

// hubRepos are repositories whose trees take each of llama.cpp's rules
// of choice: the default tags and the first model file, a tag in any
// case, splits (listed out of order), directories, and the projector
// nearest to the model by directory, then by its quantization's bits.
func hubRepos(t *testing.T) []hubtest.Repo {
	n := 0
	files := func(paths ...string) []hubtest.File {
		var out []hubtest.File
		for _, p := range paths {
			n++
			out = append(out, hubtest.File{Path: p, Data: hubGGUF(t, n)})
		}
		return append(out, hubtest.File{Path: "README.md", Data: []byte("# model\n"), Git: true})
	}
	return []hubtest.Repo{
		{ID: "ggload-test/tiny-GGUF", Files: files("tiny-Q8_0.gguf", "Q4_K_M/tiny-Q4_K_M-00002-of-00002.gguf", "Q4_K_M/tiny-Q4_K_M-00001-of-00002.gguf", "mmproj-tiny-f16.gguf", "imatrix.gguf", "tiny-F16.gguf", "mmproj-tiny-q8_0.gguf")},
		{ID: "ggload-test/odd.quants", Files: files("a-IQ4_XS.gguf", "a-Q5_K_S.gguf", "mmproj-a-F16.gguf", "mmproj-a-Q8_0.gguf", "sub/mmproj-a-Q4_0.gguf", "mtp-a-Q8_0.gguf")},
		{ID: "ggload-test/dirs", Files: files("mmproj-F16.gguf", "dir/m-Q4_K_M.gguf", "dir/mmproj-BF16.gguf", "dir/m-Q8_0-00001-of-00003.gguf", "dir/m-Q8_0-00003-of-00003.gguf", "dir/m-Q8_0-00002-of-00003.gguf")},
		{ID: "ggload-test/no-model", Files: files("mmproj-only-f16.gguf")},
	}
}

// ggload's -hf brings what llama.cpp's brings: the same file for every
// tag of every repository, the same splits and projector, refused where
// llama.cpp finds none. And each uses what the other brought: llama.cpp's
// downloads serve ggload offline, and ggload's serve llama.cpp offline
// (its plan and common_download_resolve_path), at the same paths.
func TestHubAsLlamaCpp(t *testing.T) {
	bin := cxx.Build(t, "hf-harness", []string{writeHarness(t, "hf-harness.cpp", hubHarness)})
	repos := hubRepos(t)
	h := hubtest.New(t, repos...)
	t.Setenv("MODEL_ENDPOINT", h.URL)
	t.Setenv("HF_ENDPOINT", "")
	t.Setenv("LLAMA_CACHE", "")
	t.Setenv("HF_TOKEN", "")
	ctx := context.Background()
	type ask struct {
		repo, tag, file string
	}
	var asks []ask
	for _, r := range repos {
		for _, tag := range []string{"", "Q8_0", "q4_k_m", "F16", "IQ4_XS", "Q5_K_S"} {
			asks = append(asks, ask{r.ID, tag, ""})
		}
	}
	asks = append(asks, ask{"ggload-test/tiny-GGUF", "", "tiny-F16.gguf"}, ask{"ggload-test/dirs", "Q8_0", "dir/m-Q8_0-00002-of-00003.gguf"}, ask{"ggload-test/tiny-GGUF", "", "missing.gguf"})
	agreed, refused := 0, 0
	// (the control: the requests must lead to many files, not one)
	primaries, projectors := map[string]bool{}, map[string]bool{}
	for _, a := range asks {
		name := a.repo
		if a.tag != "" {
			name += ":" + a.tag
		}
		cache := t.TempDir()
		t.Setenv("HF_HUB_CACHE", cache)
		want := llamaHub(t, bin, name, a.file, true, false, false)
		got, err := httpsrc.Pull(ctx, name, httpsrc.HubOptions{File: a.file, Mmproj: true})
		if want.primary == "" {
			if err == nil {
				t.Errorf("%s -hff %q: llama.cpp finds no model, ggload brings %v", name, a.file, got.Files)
			}
			refused++
			continue
		}
		if err != nil {
			t.Errorf("%s -hff %q: llama.cpp brings %s, ggload: %v", name, a.file, want.primary, err)
			continue
		}
		snap := filepath.Join(cache, "models--"+strings.ReplaceAll(a.repo, "/", "--"), "snapshots", got.Commit)
		rel := func(p string) string {
			if p == "" {
				return ""
			}
			r, _ := filepath.Rel(snap, p)
			return filepath.ToSlash(r)
		}
		var gotFiles []string
		for _, f := range got.Files {
			gotFiles = append(gotFiles, rel(f))
		}
		wantFiles := append([]string{want.primary}, slices.DeleteFunc(slices.Clone(want.files), func(s string) bool { return s == want.primary })...)
		primaries[a.repo+"/"+want.primary] = true
		projectors[a.repo+"/"+want.mmproj] = true
		if !slices.Equal(gotFiles, wantFiles) || rel(got.Mmproj) != want.mmproj {
			t.Errorf("%s -hff %q: ggload brings %v and projector %q, llama.cpp %v and %q", name, a.file, gotFiles, rel(got.Mmproj), wantFiles, want.mmproj)
			continue
		}
		agreed++
	}
	if len(primaries) < 8 || len(projectors) < 4 {
		t.Errorf("the requests led llama.cpp to %d model files and %d projectors: too few to compare the rules of choice", len(primaries), len(projectors))
	}
	if agreed+refused != len(asks) || agreed < 12 || refused < 8 {
		t.Errorf("of %d requests, %d brought the same files as llama.cpp's, %d were refused by both", len(asks), agreed, refused)
	}
	t.Logf("of %d requests, %d brought the same files as llama.cpp's, %d were refused by both", len(asks), agreed, refused)

	// llama.cpp's cache serves ggload offline
	cache := t.TempDir()
	t.Setenv("HF_HUB_CACHE", cache)
	theirs := llamaHub(t, bin, "ggload-test/dirs:Q8_0", "", true, false, true)
	if theirs.err != "" || len(theirs.finals) != 4 {
		t.Fatalf("llama.cpp's download: %+v", theirs)
	}
	before := len(h.Requests())
	ours, err := httpsrc.Pull(ctx, "ggload-test/dirs:Q8_0", httpsrc.HubOptions{Mmproj: true, Offline: true})
	if err != nil {
		t.Fatalf("offline, in llama.cpp's cache: %v", err)
	}
	if got := append(slices.Clone(ours.Files), ours.Mmproj); !sameSet(got, theirs.finals) {
		t.Errorf("offline in llama.cpp's cache: %v, llama.cpp's %v", got, theirs.finals)
	}
	if _, err := gguf.OpenModel(ours.Path()); err != nil {
		t.Errorf("the split model llama.cpp brought: %v", err)
	}
	if n := len(h.Requests()); n != before {
		t.Errorf("offline: %d requests", n-before)
	}

	// ggload's cache serves llama.cpp offline
	cache = t.TempDir()
	t.Setenv("HF_HUB_CACHE", cache)
	ours, err = httpsrc.Pull(ctx, "ggload-test/tiny-GGUF", httpsrc.HubOptions{Mmproj: true})
	if err != nil {
		t.Fatal(err)
	}
	before = len(h.Requests())
	theirs = llamaHub(t, bin, "ggload-test/tiny-GGUF", "", true, true, true)
	if got := append(slices.Clone(ours.Files), ours.Mmproj); theirs.err != "" || !sameSet(got, theirs.finals) || theirs.resolve != ours.Path() {
		t.Errorf("llama.cpp offline in ggload's cache: %+v; ggload's files %v", theirs, got)
	}
	if n := len(h.Requests()); n != before {
		t.Errorf("llama.cpp offline: %d requests", n-before)
	}
}

// sameSet reports whether a and b hold the same paths.
func sameSet(a, b []string) bool {
	a, b = slices.Clone(a), slices.Clone(b)
	slices.Sort(a)
	slices.Sort(b)
	return slices.Equal(a, b)
}

// writeHarness writes a harness's source into the test's directory.
func writeHarness(t *testing.T, name, src string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), name)
	if err := os.WriteFile(p, []byte(src), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}
